//! What the simulation's tests share: a cluster with weekend maintenance
//! windows and two exclusions, a 3-zone pool, Deployments under budgets,
//! a scenario around an operation, and a run that prints what it cost.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use sluice_model::cluster::Cluster;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::Operation;
use sluice_model::policy::disruption::{Budget, IntOrPercent};
use sluice_simulation::harness::{Harness, Report, Scenario};
use sluice_simulation::world::Workload;

pub const OLD: &str = "1.34.5";

pub fn at(s: &str) -> Timestamp {
    s.parse().expect("a time")
}

/// Saturdays and Sundays 00:00–12:00 UTC; a NO_UPGRADES freeze over the
/// first weekend of December and a NO_MINOR_UPGRADES one over the
/// holidays.
pub fn cluster() -> Cluster {
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "Cluster",
        "metadata": {"name": "default"},
        "spec": {"releaseChannel": {"channel": "REGULAR"}, "maintenancePolicy": {"window": {
            "recurringWindow": {"window": {"startTime": "2026-11-07T00:00:00Z",
                "endTime": "2026-11-07T12:00:00Z"}, "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
            "maintenanceExclusions": {
                "launch-freeze": {"startTime": "2026-12-04T18:00:00Z",
                    "endTime": "2026-12-07T06:00:00Z"},
                "holidays": {"startTime": "2026-12-18T00:00:00Z",
                    "endTime": "2027-01-04T00:00:00Z",
                    "maintenanceExclusionOptions": {"scope": "NO_MINOR_UPGRADES"}}}}}},
        "status": {"currentMasterVersion": "1.35.1"}}))
    .expect("a cluster")
}

/// 1 000 nodes over three zones (334, 333, 333).
pub fn pool() -> NodePool {
    sized_pool(1000)
}

pub fn sized_pool(total: i32) -> NodePool {
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": "pool-a"},
        "spec": {"locations": ["zone-a", "zone-b", "zone-c"], "version": OLD,
            "config": {"capacity": {"cpu": "8", "memory": "32Gi"}},
            "autoscaling": {"enabled": true, "totalMinNodeCount": total,
                "totalMaxNodeCount": total}}}))
    .expect("a pool")
}

/// An automatic upgrade of pool-a to `to` with `settings`
/// (`upgradeSettings`, as JSON).
pub fn upgrade_with(to: &str, settings: serde_json::Value) -> Operation {
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": "operation-auto-1"},
        "spec": {"operationType": "AUTO_UPGRADE_NODES",
            "targetLink": "/apis/sluice.dev/v1/nodepools/pool-a", "nodeVersion": to,
            "upgradeSettings": settings}}))
    .expect("an operation")
}

pub fn workloads() -> Vec<Workload> {
    let w = |name: &str, replicas, budget, startup| Workload {
        name: name.into(),
        replicas,
        budget,
        startup: SignedDuration::from_secs(startup),
        grace: SignedDuration::from_secs(30),
    };
    vec![
        w(
            "web",
            600,
            Budget::MinAvailable(IntOrPercent::Percent(90)),
            20,
        ),
        w("api", 300, Budget::MaxUnavailable(IntOrPercent::Int(2)), 45),
        w("db", 5, Budget::MinAvailable(IntOrPercent::Int(4)), 120),
    ]
}

/// The 1 000-node pool, the cluster's windows and the workloads, for
/// `operation` from `start`, the provider making at most `quota` nodes.
pub fn scenario(operation: Operation, start: Timestamp, quota: u64) -> Scenario {
    Scenario {
        pool: pool(),
        operation,
        cluster: Some(cluster()),
        start,
        limit: SignedDuration::from_hours(24 * 70),
        boot_delay: SignedDuration::from_secs(240),
        quota: Some(quota),
        workloads: workloads(),
        script: Vec::new(),
        max_steps: 200_000,
    }
}

/// A run to its end, with its real time; prints the steps, the time spent
/// in decisions (per node at the end) and the zones' extremes.
pub fn run(s: Scenario) -> (Report, Duration) {
    let started = Instant::now();
    let report = Harness::new(s)
        .expect("the pool is made")
        .run()
        .expect("the run goes through");
    let wall = started.elapsed();
    let nodes: usize = report.versions.values().sum();
    println!(
        "{} steps, {:.2} s wall, {:.3} s in decisions ({:.1} ms per node), ended {}; refusals {}; zones {:?}",
        report.steps,
        wall.as_secs_f64(),
        report.decision_time.as_secs_f64(),
        report.decision_time.as_secs_f64() * 1000.0 / nodes.max(1) as f64,
        report.ended_at,
        report.refusals,
        report.extremes
    );
    (report, wall)
}

/// The first `n` violations, for a failure's message.
pub fn first(report: &Report, n: usize) -> &[sluice_simulation::invariants::Violation] {
    &report.violations[..report.violations.len().min(n)]
}
