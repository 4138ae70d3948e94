//! The cluster autoscaler over three pools in simulated time: a burst of
//! pending pods gets nodes, then the load falls away and the nodes go,
//! with the rules checked at every 10 s step.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use sluice_autoscaler::Options;
use sluice_model::node_pool::NodePool;
use sluice_simulation::autoscaling::{run, Scenario, Workload};

fn t0() -> Timestamp {
    "2026-05-04T08:00:00Z".parse().expect("time")
}

fn at(minutes: i64) -> Timestamp {
    t0() + SignedDuration::from_mins(minutes)
}

fn pool(
    name: &str,
    zones: &[&str],
    cpu: &str,
    mem: &str,
    limits: (i32, i32),
    extra: serde_json::Value,
) -> NodePool {
    let mut v = json!({
        "apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "locations": zones,
            "initialNodeCount": limits.0,
            "version": "1.33.2",
            "config": {"capacity": {"cpu": cpu, "memory": mem}},
            "autoscaling": {"enabled": true, "minNodeCount": limits.0, "maxNodeCount": limits.1},
        },
    });
    if let (Some(config), Some(extra)) = (v["spec"]["config"].as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    serde_json::from_value(v).expect("pool")
}

#[test]
fn a_burst_gets_nodes_and_the_nodes_go_when_the_load_falls() {
    // spec: C1, C3, C4, C5, C6, C7, C8 — three pools over three zones: a
    // general one starting at one node per zone, a large one and a spot
    // one starting at zero. 90 pods of 500m arrive at once; after 30
    // minutes 6 remain, guarded by a budget of 5, and one pinned pod is
    // `safe-to-evict: "false"`.
    let scenario = Scenario {
        pools: vec![
            pool(
                "general",
                &["zone-a", "zone-b"],
                "4",
                "16Gi",
                (1, 10),
                json!({}),
            ),
            pool("large", &["zone-a"], "16", "64Gi", (0, 3), json!({})),
            pool(
                "spot",
                &["zone-a", "zone-b", "zone-c"],
                "4",
                "16Gi",
                (0, 5),
                json!({"spot": true}),
            ),
        ],
        workloads: vec![
            Workload {
                name: "web".into(),
                cpu: "500m".into(),
                memory: "1Gi".into(),
                replicas: vec![(at(0), 90), (at(30), 6)],
                min_available: Some(5),
                pinned: false,
            },
            Workload {
                name: "pinned".into(),
                cpu: "100m".into(),
                memory: "128Mi".into(),
                replicas: vec![(at(0), 1)],
                min_available: None,
                pinned: true,
            },
        ],
        start: t0(),
        boot_delay: SignedDuration::from_secs(60),
        // Three hours of 10 s steps.
        steps: 3 * 360,
        step: SignedDuration::from_secs(10),
        options: Options::default(),
        upgrade: None,
    };
    let report = run(scenario);
    assert_eq!(report.violations, [], "rules broken");
    let peak = report.nodes.iter().copied().max().unwrap_or(0);
    let end = report.nodes.last().copied().unwrap_or(0);
    // spec: C3 — the burst (46 cores) got nodes, all at once: every pod
    // was bound within a few loops of its creation.
    assert!(peak >= 12, "peak {peak}");
    assert!(
        report.longest_wait <= 18,
        "a pod waited {} steps",
        report.longest_wait
    );
    // spec: C4 — the load gone, the unneeded nodes went, through their
    // pools, down to what 6 + 1 pods and the minimums need.
    assert!(end <= 4, "{end} nodes left of {peak}: {:?}", report.nodes);
    assert!(report.removed.len() >= peak - end, "{:?}", report.removed);
    // spec: C4, C5 — nodes with pods were drained (pods evicted one by
    // one within the budget), not only empty ones removed.
    assert!(report.evictions >= 1, "no drain: {report:?}");
    // spec: C7 — never to zero.
    assert!(end >= 1);
    assert_eq!(report.pending_at_end, 0);
}
