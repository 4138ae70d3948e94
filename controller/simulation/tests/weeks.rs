//! A 1 000-node, 3-zone pool upgraded automatically through a weekly
//! maintenance window with two exclusions, weeks of simulated time in
//! seconds, every invariant checked at every step (see
//! `sluice_simulation::invariants`).

mod common;

use std::collections::BTreeSet;

use common::{at, sized_pool, upgrade_with};
use k8s_openapi::jiff::SignedDuration;
use serde_json::json;
use sluice_maintenance::{admission, Versions};
use sluice_model::operation::{Operation, OperationState};
use sluice_model::policy::disruption::{Budget, IntOrPercent};
use sluice_simulation::harness::{Report, Scenario};
use sluice_simulation::world::Workload;

fn upgrade(to: &str, max_surge: i32) -> Operation {
    upgrade_with(to, json!({"maxSurge": max_surge, "maxUnavailable": 0}))
}

fn scenario(to: &str, max_surge: i32) -> Scenario {
    // A Monday: the window opens on Saturday.
    common::scenario(
        upgrade(to, max_surge),
        at("2026-11-30T09:00:00Z"),
        1000 + 3 * max_surge as u64,
    )
}

fn run(s: Scenario) -> Report {
    common::run(s).0
}

fn days(report: &Report) -> BTreeSet<String> {
    report
        .starts
        .iter()
        .map(|(t, _)| t.to_string()[..10].to_owned())
        .collect()
}

// spec: M1 M3 M4 M5 U1 U3 E6 — the whole pool moves to the new minor
// inside the windows only, pausing when each closes and resuming in the
// next, skipping the freeze (NO_UPGRADES) and the holidays
// (NO_MINOR_UPGRADES blocks a node minor), the pool within its bounds and
// every budget kept at every step.
#[test]
fn a_thousand_nodes_upgrade_through_weekly_windows_and_two_exclusions() {
    let s = scenario("1.35.1", 3);
    let versions = Versions::example().expect("the example versions");
    let c = s.cluster.clone().expect("a cluster");
    admission::admit(&c, &versions, s.start).expect("the policy passes M7");
    let report = run(s);
    assert!(
        report.violations.is_empty(),
        "{:#?}",
        common::first(&report, 10)
    );
    let state = report.operation.status.as_ref().and_then(|s| s.status);
    assert_eq!(
        state,
        Some(OperationState::Done),
        "{:?}",
        report.operation.status
    );
    assert_eq!(
        report.versions.get("1.35.1"),
        Some(&1000),
        "{:?}",
        report.versions
    );
    assert_eq!(report.pool.spec.version.as_deref(), Some("1.35.1"));
    // Started only on window days, never in the freeze or the holidays.
    let days = days(&report);
    assert!(
        days.iter().all(|d| {
            let wd = d
                .parse::<k8s_openapi::jiff::civil::Date>()
                .map(|d| d.weekday());
            matches!(
                wd,
                Ok(k8s_openapi::jiff::civil::Weekday::Saturday
                    | k8s_openapi::jiff::civil::Weekday::Sunday)
            )
        }),
        "{days:?}"
    );
    for (t, node) in &report.starts {
        let frozen = *t >= at("2026-12-04T18:00:00Z") && *t < at("2026-12-07T06:00:00Z");
        let holidays = *t >= at("2026-12-18T00:00:00Z") && *t < at("2027-01-04T00:00:00Z");
        assert!(!frozen && !holidays, "{node} started at {t}");
    }
    // M3: the work did not fit one window; it paused and resumed.
    assert!(days.len() >= 3, "{days:?}");
    assert!(report.refusals > 0, "budgets held some evictions back");
}

// spec: M4 — a patch is not a minor: the holidays' NO_MINOR_UPGRADES
// exclusion lets it through, the freeze still holds it.
#[test]
fn a_patch_goes_through_the_holidays_but_not_the_freeze() {
    let report = run(scenario("1.34.9", 3));
    assert!(
        report.violations.is_empty(),
        "{:#?}",
        common::first(&report, 10)
    );
    let state = report.operation.status.as_ref().and_then(|s| s.status);
    assert_eq!(state, Some(OperationState::Done));
    let in_holidays = report
        .starts
        .iter()
        .filter(|(t, _)| *t >= at("2026-12-18T00:00:00Z") && *t < at("2027-01-04T00:00:00Z"))
        .count();
    let in_freeze = report
        .starts
        .iter()
        .filter(|(t, _)| *t >= at("2026-12-04T18:00:00Z") && *t < at("2026-12-07T06:00:00Z"))
        .count();
    assert_eq!(in_freeze, 0);
    assert!(in_holidays > 0 || report.ended_at < at("2026-12-18T00:00:00Z"));
}

// spec: E6 — the checks can fail: a budget that never gives a
// disruption holds a drain for the hour of E1, then the drain deletes past
// it, and the run reports each such pod.
#[test]
fn a_budget_that_never_gives_is_reported_when_the_drain_forces_past_it() {
    let mut s = scenario("1.35.1", 1);
    s.pool = sized_pool(6);
    s.quota = Some(20);
    s.workloads = vec![Workload {
        name: "db".into(),
        replicas: 3,
        budget: Budget::MinAvailable(IntOrPercent::Int(3)),
        startup: SignedDuration::from_secs(20),
        grace: SignedDuration::from_secs(30),
    }];
    let report = run(s);
    let state = report.operation.status.as_ref().and_then(|s| s.status);
    assert_eq!(state, Some(OperationState::Done), "E1: forced, not stuck");
    let forced: Vec<_> = report
        .violations
        .iter()
        .filter(|v| v.what.contains("past its budget"))
        .collect();
    assert_eq!(forced.len(), report.forced);
    assert!(!forced.is_empty(), "{:?}", report.violations);
    assert!(report.refusals > 0);
}
