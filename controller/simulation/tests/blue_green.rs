//! A 1 000-node, 3-zone pool upgraded blue-green: started in a weekend
//! maintenance window and finished after it closed (B7), drained in ten
//! batches with their soaks, the pool soaked, blue deleted; and the same
//! with day-long batch soaks, which the 7-day cap cuts short. Every
//! invariant (`sluice_simulation::invariants`, its blue-green rules
//! included) is checked at every step.

mod common;

use common::{at, sized_pool, upgrade_with, OLD};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use sluice_model::operation::{BlueGreenPhase, Operation, OperationAction, OperationState};
use sluice_simulation::harness::{Report, Scenario};

const NEW: &str = "1.35.1";

/// Blue-green in batches of 10 % of the pool.
fn blue_green(batch_soak: &str, pool_soak: &str) -> Operation {
    upgrade_with(
        NEW,
        json!({"strategy": "BLUE_GREEN", "blueGreenSettings": {
            "standardRolloutPolicy": {"batchPercentage": 0.1, "batchSoakDuration": batch_soak},
            "nodePoolSoakDuration": pool_soak}}),
    )
}

/// Saturday 10:30: the window closes at noon.
fn saturday() -> Timestamp {
    at("2026-11-28T10:30:00Z")
}

fn run(op: Operation) -> Report {
    // Room for green beside blue.
    report(common::scenario(op, saturday(), 2000))
}

fn report(s: Scenario) -> Report {
    let (report, wall) = common::run(s);
    let nodes: usize = report.versions.values().sum();
    let took = report.ended_at.duration_since(saturday());
    println!(
        "blue-green: simulated {:.1} h ({took:#}) in {:.2} s wall; planner and reconciler {:.3} s, {:.2} ms per node",
        took.as_secs_f64() / 3600.0,
        wall.as_secs_f64(),
        report.decision_time.as_secs_f64(),
        report.decision_time.as_secs_f64() * 1000.0 / nodes.max(1) as f64,
    );
    report
}

fn entered(report: &Report, phase: BlueGreenPhase) -> Timestamp {
    report
        .phases
        .iter()
        .find(|(_, p)| *p == phase)
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("{phase:?} never entered: {:?}", report.phases))
}

/// Ended `state` with only `version`'s `n` nodes, every rule kept.
fn assert_alone(report: &Report, state: OperationState, version: &str, n: usize) {
    assert!(
        report.violations.is_empty(),
        "{:#?}",
        common::first(report, 10)
    );
    let ended = report.operation.status.as_ref().and_then(|s| s.status);
    assert_eq!(ended, Some(state), "{:?}", report.operation.status);
    let versions: Vec<(&str, usize)> = report
        .versions
        .iter()
        .map(|(v, n)| (v.as_str(), *n))
        .collect();
    assert_eq!(versions, [(version, n)]);
    assert_eq!(report.pool.spec.version.as_deref(), Some(version));
}

/// Done, green alone at 1 000 nodes, every rule kept.
fn assert_green_alone(report: &Report) {
    assert_alone(report, OperationState::Done, NEW, 1000);
}

/// 90 nodes, the user's writes scripted at hours after the start.
fn small(op: Operation, script: &[(f64, OperationAction)]) -> Scenario {
    let mut s = common::scenario(op, saturday(), 200);
    s.pool = sized_pool(90);
    s.script = script
        .iter()
        .map(|(h, a)| (later(saturday(), *h), *a))
        .collect();
    s
}

fn later(t: Timestamp, hours: f64) -> Timestamp {
    t + SignedDuration::from_secs_f64(hours * 3600.0)
}

// spec: B1 B2 B3 B4 B5 B7 E6 — started inside the window, green made in
// every zone, blue cordoned, drained in 10 batches of 100 with a 10 min
// soak after each, the pool soaked 1 h, blue deleted: done after the
// window closed, with no budget broken before phase 5.
#[test]
fn a_thousand_nodes_go_blue_green_past_the_window() {
    let report = run(blue_green("600s", "3600s"));
    assert_green_alone(&report);
    let phases: Vec<BlueGreenPhase> = report.phases.iter().map(|(_, p)| *p).collect();
    use BlueGreenPhase as P;
    assert_eq!(
        phases,
        [
            P::CreatingGreenPool,
            P::CordoningBluePool,
            P::DrainingBluePool,
            P::NodePoolSoaking,
            P::DeletingBluePool
        ]
    );
    // spec: B7 — started before noon, when the window closed; ended after.
    let close = at("2026-11-28T12:00:00Z");
    assert!(entered(&report, P::CreatingGreenPool) < close);
    assert!(report.ended_at > close, "ended {}", report.ended_at);
    let bg = report
        .operation
        .status
        .as_ref()
        .and_then(|s| s.blue_green.clone());
    assert_eq!(bg.as_ref().and_then(|b| b.batches), Some(10));
    assert_eq!(bg.map(|b| b.batches_drained), Some(10));
    // spec: B3, B4 — nine soaks of 10 min between the batches, then the
    // pool's hour.
    let draining = entered(&report, P::DrainingBluePool);
    let soaking = entered(&report, P::NodePoolSoaking);
    let deleting = entered(&report, P::DeletingBluePool);
    assert!(soaking.duration_since(draining) >= SignedDuration::from_mins(90));
    assert!(deleting.duration_since(soaking) >= SignedDuration::from_hours(1));
}

// spec: B4 — day-long soaks after each of 10 batches: 10 days and an
// hour asked, 7 days allowed; phase 5 starts once 7 days of soak are
// spent, the later batches and the pool not soaked.
#[test]
fn the_soaks_stop_at_seven_days() {
    let report = run(blue_green("86400s", "3600s"));
    assert_green_alone(&report);
    let draining = entered(&report, BlueGreenPhase::DrainingBluePool);
    let deleting = entered(&report, BlueGreenPhase::DeletingBluePool);
    let start = report
        .operation
        .status
        .as_ref()
        .and_then(|s| s.blue_green.as_ref())
        .and_then(|b| b.blue_pool_deletion_start_time.clone())
        .map(|t| t.0);
    assert_eq!(start, Some(deleting), "bluePoolDeletionStartTime");
    let soak = deleting.duration_since(draining);
    println!("phase 5 started {soak:#} after the drain's start, at {deleting}");
    assert!(soak >= SignedDuration::from_hours(7 * 24), "{soak:#}");
    // The batches' own drains take minutes each, on top of the soaks.
    assert!(soak <= SignedDuration::from_hours(7 * 24 + 6), "{soak:#}");
}

// spec: B3 B4 B6 — cancelled while blue drains, the pool is kept as it is
// (every rule checked at every step); resumed, it goes on; COMPLETE in
// the day-long soak starts phase 5 at once.
#[test]
fn a_scripted_cancel_resume_and_complete() {
    use OperationAction::{Cancel, Complete, Resume};
    let op = blue_green("600s", "86400s");
    let s = small(op, &[(0.4, Cancel), (3.0, Resume), (6.0, Complete)]);
    let report = report(s);
    assert_alone(&report, OperationState::Done, NEW, 90);
    // Paused mid-drain: the drain began before the cancel and ended
    // only after the resume.
    let draining = entered(&report, BlueGreenPhase::DrainingBluePool);
    let soaking = entered(&report, BlueGreenPhase::NodePoolSoaking);
    assert!(draining < later(saturday(), 0.4), "drain at {draining}");
    assert!(soaking > later(saturday(), 3.0), "soak at {soaking}");
    let deleting = entered(&report, BlueGreenPhase::DeletingBluePool);
    let complete = later(saturday(), 6.0);
    assert!(deleting >= complete, "phase 5 at {deleting}");
    assert!(
        deleting.duration_since(complete) < SignedDuration::from_mins(1),
        "phase 5 at {deleting}"
    );
}

// spec: B6 — rolled back while blue drains, without respectPdb: blue's
// drains and cordons lifted, green's pods deleted and green deleted; blue
// alone at the end.
#[test]
fn a_scripted_rollback_leaves_blue_alone() {
    let op = blue_green("600s", "3600s");
    let report = report(small(op, &[(0.4, OperationAction::Rollback)]));
    assert_alone(&report, OperationState::RolledBack, OLD, 90);
    assert!(report
        .phases
        .iter()
        .any(|(_, p)| *p == BlueGreenPhase::RollbackStarted));
}
