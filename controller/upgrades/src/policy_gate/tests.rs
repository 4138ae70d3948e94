use super::*;
use serde_json::json;

fn op(kind: &str, version: Option<&str>, config: Option<serde_json::Value>) -> Operation {
    let mut spec =
        json!({"operationType": kind, "targetLink": "/apis/sluice.dev/v1/nodepools/pool-a"});
    if let Some(v) = version {
        spec["nodeVersion"] = json!(v);
    }
    if let Some(c) = config {
        spec["config"] = c;
    }
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": "op-1"}, "spec": spec}))
    .expect("an operation")
}

fn config(cpu: &str, labels: serde_json::Value) -> serde_json::Value {
    json!({"capacity": {"cpu": cpu, "memory": "4Gi"}, "labels": labels})
}

fn pool() -> NodePool {
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": "pool-a"},
        "spec": {"locations": ["zone-a"], "initialNodeCount": 3, "version": "1.33.2",
            "config": config("2", json!({"team": "a"}))}}))
    .expect("a pool")
}

/// A cluster whose only window is Saturdays 00:00–08:00 UTC.
fn cluster(exclusions: serde_json::Value) -> Cluster {
    serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "Cluster",
        "metadata": {"name": "default"},
        "spec": {"releaseChannel": {"channel": "REGULAR"}, "maintenancePolicy": {"window": {
            "recurringWindow": {"window": {"startTime": "2026-01-03T00:00:00Z",
                "endTime": "2026-01-03T08:00:00Z"}, "recurrence": "FREQ=WEEKLY;BYDAY=SA"},
            "maintenanceExclusions": exclusions}}}}))
    .expect("a cluster")
}

fn at(s: &str) -> Timestamp {
    s.parse().expect("a time")
}

// spec: M4 — the event an upgrade is: a minor, a patch, or a node
// recreation for a config with the version unchanged.
#[test]
fn the_event_is_the_size_of_the_version_step() {
    let p = pool();
    let minor = op("UPGRADE_NODES", Some("1.34.1"), None);
    let patch = op("UPGRADE_NODES", Some("1.33.5"), None);
    let recreate = op("UPGRADE_NODES", None, Some(config("4", json!({}))));
    assert_eq!(event_of(&minor, &p).change, Change::Minor);
    assert_eq!(event_of(&patch, &p).change, Change::Patch);
    assert_eq!(event_of(&recreate, &p).change, Change::VmDisruption);
    assert_eq!(event_of(&minor, &p).plane, Plane::Node);
}

// spec: M8 — automatic upgrades and manual changes that recreate nodes
// wait for the policy; a manual version upgrade and a label-only change
// do not.
#[test]
fn who_asked_decides_whether_the_policy_gates() {
    let p = pool();
    let saturday_only = cluster(json!({}));
    let tuesday = at("2026-11-24T12:00:00Z");
    let gate = |o: &Operation| gate_of(o, &p, Some(&saturday_only), tuesday);

    let auto = op("AUTO_UPGRADE_NODES", Some("1.33.5"), None);
    match gate(&auto) {
        Gate::Closed { reason, next } => {
            assert!(reason.contains("window closed"), "{reason}");
            assert_eq!(next, Some(at("2026-11-28T00:00:00Z")));
        }
        g => panic!("an automatic upgrade on a Tuesday: {g:?}"),
    }
    let manual = op("UPGRADE_NODES", Some("1.33.5"), None);
    assert_eq!(gate(&manual), Gate::Open { until: None });
    let bigger = op(
        "UPGRADE_NODES",
        None,
        Some(config("4", json!({"team": "a"}))),
    );
    assert!(!gate(&bigger).is_open(), "a manual recreation waits");
    let relabel = op(
        "UPGRADE_NODES",
        None,
        Some(config("2", json!({"team": "b"}))),
    );
    assert!(gate(&relabel).is_open(), "a label change recreates nothing");
    // Inside the window: open until it closes.
    let saturday = at("2026-11-28T03:00:00Z");
    assert_eq!(
        gate_of(&auto, &p, Some(&saturday_only), saturday),
        Gate::Open {
            until: Some(at("2026-11-28T08:00:00Z"))
        }
    );
    // No Cluster object: no policy.
    assert!(gate_of(&auto, &p, None, tuesday).is_open());
}

// spec: M4 — an exclusion wins over the open window and is named.
#[test]
fn an_exclusion_closes_the_window_and_is_named() {
    let p = pool();
    let c = cluster(json!({"freeze": {"startTime": "2026-11-27T00:00:00Z",
        "endTime": "2026-12-05T00:00:00Z"}}));
    let auto = op("AUTO_UPGRADE_NODES", Some("1.33.5"), None);
    match gate_of(&auto, &p, Some(&c), at("2026-11-28T03:00:00Z")) {
        Gate::Closed { reason, next } => {
            assert!(
                reason.contains("\"freeze\"") && reason.contains("NO_UPGRADES"),
                "{reason}"
            );
            assert_eq!(next, Some(at("2026-12-05T00:00:00Z")));
        }
        g => panic!("{g:?}"),
    }
}
