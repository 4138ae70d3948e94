//! An autoscaled pool upgraded autoscaled blue-green over simulated days,
//! with the real cluster autoscaler growing green and shrinking blue
//! during the wait, the real scheduler placing the pods, and a few
//! `safe-to-evict: "false"` pods that keep their nodes for 7 days after
//! the cordon. Checked at every step: blue never grows, green stays within
//! its max, no budget is broken before its hour, no protected pod leaves
//! its node early; at the end every node is on the new version.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use sluice_autoscaler::Options;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::{BlueGreenPhase, Operation, OperationState};
use sluice_simulation::autoscaling::{run, Report, Scenario, Upgrade, Workload};

const OLD: &str = "1.33.2";
const NEW: &str = "1.34.1";

fn t0() -> Timestamp {
    "2026-06-01T08:00:00Z".parse().expect("time")
}

fn hours(h: i64) -> Timestamp {
    t0() + SignedDuration::from_hours(h)
}

/// `zones` zones of `per_zone` nodes of 4 CPUs, autoscaled 1..=`max` a zone.
fn pool(zones: &[&str], per_zone: i32, max: i32) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": "main"},
        "spec": {
            "locations": zones,
            "initialNodeCount": per_zone,
            "version": OLD,
            "config": {"capacity": {"cpu": "4", "memory": "16Gi"}},
            "autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": max},
        },
    }))
    .expect("pool")
}

fn upgrade(wait: &str) -> Operation {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": "upgrade-main"},
        "spec": {
            "operationType": "UPGRADE_NODES",
            "targetLink": "/apis/sluice.dev/v1/nodepools/main",
            "nodeVersion": NEW,
            "upgradeSettings": {"strategy": "BLUE_GREEN", "blueGreenSettings": {
                "autoscaledRolloutPolicy": {"waitForDrainDuration": wait}}},
        },
    }))
    .expect("operation")
}

/// `nodes` nodes in two zones, 3 pods of 1 CPU a node; at hour 2 a third
/// of the pods go (jobs ending, a Deployment scaled in) and at hour 3 they
/// come back, so blue empties at its own pace and green grows for the
/// newcomers; 4 pinned pods; the wait `wait`.
fn scenario(nodes: i32, wait_hours: i64, days: i64) -> Scenario {
    let per_zone = nodes / 2;
    let pods = usize::try_from(nodes * 3).unwrap_or(0);
    let step = SignedDuration::from_mins(5);
    let steps = u64::try_from(days * 24 * 12).unwrap_or(0);
    Scenario {
        pools: vec![pool(&["zone-a", "zone-b"], per_zone, per_zone * 2)],
        workloads: vec![
            Workload {
                name: "web".into(),
                cpu: "1".into(),
                memory: "1Gi".into(),
                replicas: vec![(t0(), pods), (hours(2), pods * 2 / 3), (hours(3), pods)],
                min_available: Some(i32::try_from(pods * 9 / 10).unwrap_or(0)),
                pinned: false,
            },
            Workload {
                name: "ledger".into(),
                cpu: "100m".into(),
                memory: "128Mi".into(),
                replicas: vec![(t0(), 4)],
                min_available: None,
                pinned: true,
            },
        ],
        start: t0(),
        boot_delay: SignedDuration::from_secs(90),
        steps,
        step,
        options: Options {
            unneeded_time: Some(SignedDuration::from_mins(10)),
            ..Options::default()
        },
        upgrade: Some(Upgrade {
            operation: upgrade(&format!("{}s", wait_hours * 3600)),
            at: hours(1),
        }),
    }
}

fn entered(r: &Report, phase: BlueGreenPhase) -> Timestamp {
    r.upgrade
        .phases
        .iter()
        .find(|(_, p)| *p == phase)
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("{phase:?} never entered: {:?}", r.upgrade.phases))
}

#[test]
fn a_pool_upgraded_autoscaled_blue_green_over_days() {
    // spec: A1, A2, A3, A4 — green from zero as pods leave blue, blue
    // shrunk by the autoscaler during the wait, the rest drained after it,
    // pinned pods kept 7 days from the cordon, every node on the new
    // version at the end. 200 nodes in the suite (about a minute);
    // `SLUICE_SIM_NODES=1000` for the full-size run of docs/benchmarks.md.
    let nodes: i32 = std::env::var("SLUICE_SIM_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let wall = std::time::Instant::now();
    let r = run(scenario(nodes, 24, 8));
    let u = &r.upgrade;
    println!(
        "autoscaled blue-green: {nodes} nodes, simulated until {:?} in {:.1} s wall; phases {:?}; \
         most green in a zone {}; evictions {}, refusals {}, forced {}",
        u.ended_at,
        wall.elapsed().as_secs_f64(),
        u.phases,
        u.most_green,
        r.evictions,
        r.refusals,
        u.forced,
    );
    assert_eq!(r.violations, [], "rules broken");
    assert_eq!(u.state, Some(OperationState::Done), "{u:?}");
    // A1: the wait, a day from blue's cordon, shown as its own phase.
    let cordoned = entered(&r, BlueGreenPhase::CordoningBluePool);
    entered(&r, BlueGreenPhase::WaitingToDrainBluePool);
    let drained = entered(&r, BlueGreenPhase::DrainingBluePool);
    let waited = drained.duration_since(cordoned);
    assert!(waited >= SignedDuration::from_hours(24), "{waited:#}");
    assert!(waited <= SignedDuration::from_hours(25), "{waited:#}");
    assert!(!u
        .phases
        .iter()
        .any(|(_, p)| *p == BlueGreenPhase::NodePoolSoaking));
    // Green grew from zero: during the wait, for the pods that came back.
    assert!(u.most_green > 0);
    // A3: the pinned pods left their nodes 7 days after the cordon, no
    // sooner.
    let kept = u.pinned_kept.expect("pinned pods drained");
    assert!(kept >= SignedDuration::from_hours(7 * 24), "{kept:#}");
    // Every node on the new version; nothing left pending.
    assert_eq!(
        u.versions.keys().collect::<Vec<_>>(),
        [NEW],
        "{:?}",
        u.versions
    );
    assert_eq!(r.pending_at_end, 0);
}

/// A flex-start pool whose nodes run 12 hours, upgraded at hour 1 (the
/// operation records nothing: the pool's kind picks SHORT_LIVED). Half
/// the nodes are made at the start and half by the autoscaler for the
/// load that comes at half past, so their runs do not all end at once.
fn short_lived(nodes: i32) -> Scenario {
    let mut s = scenario(nodes, 0, 1);
    let pods = usize::try_from(nodes * 3).unwrap_or(0);
    s.workloads[0].replicas = vec![
        (t0(), pods / 2),
        (t0() + SignedDuration::from_mins(30), pods),
    ];
    s.workloads[0].min_available = None;
    let spec = &mut s.pools[0].spec;
    spec.initial_node_count = Some(nodes / 4);
    spec.config.flex_start = true;
    spec.config.max_run_duration = Some(sluice_model::duration::Duration::from_secs(12 * 3600));
    if let Some(u) = s.upgrade.as_mut() {
        u.operation.spec.upgrade_settings = None;
    }
    s.workloads.retain(|w| !w.pinned);
    s
}

#[test]
fn a_short_lived_pool_moves_over_as_its_nodes_end() {
    // spec: A5 — nothing drained up front; the nodes end with their runs
    // and come back on the new version; blue never grows.
    let r = run(short_lived(40));
    let u = &r.upgrade;
    println!(
        "short-lived: ended {:?}; evictions {}, forced {}; versions {:?}",
        u.ended_at, r.evictions, u.forced, u.versions
    );
    assert_eq!(r.violations, [], "rules broken");
    assert_eq!(u.state, Some(OperationState::Done), "{u:?}");
    assert_eq!(
        u.versions.keys().collect::<Vec<_>>(),
        [NEW],
        "{:?}",
        u.versions
    );
    // Done once the last old runs ended, 12 h after the autoscaler made
    // those nodes.
    let ended = u.ended_at.expect("an end");
    assert!(ended >= hours(12) && ended <= hours(14), "{ended}");
    assert_eq!(u.forced, 0, "nothing drained by force");
    assert_eq!(r.pending_at_end, 0);
}
