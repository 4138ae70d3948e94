//! A pool the cluster autoscaler sizes (`status.autoscaler`): its size
//! per zone and the nodes it names, read from the pool alone.

use std::collections::BTreeMap;

use sluice_model::node_pool::{AutoscalerStatus, NodePoolAutoscaling, NodeToRemove};

use super::*;
use crate::reconcile::ZoneHold;

/// Pool `p` autoscaled 1..=5 per zone, `initialNodeCount` 1, with the
/// autoscaler's sizes and named nodes as its status holds them.
fn autoscaled(zones: &[&str], sizes: &[(&str, i32)], remove: &[(&str, &str)]) -> NodePool {
    let mut p = pool(zones, 1);
    p.spec.autoscaling = Some(NodePoolAutoscaling {
        enabled: true,
        min_node_count: Some(1),
        max_node_count: Some(5),
        ..Default::default()
    });
    p.status = Some(sluice_model::node_pool::NodePoolStatus {
        autoscaler: Some(AutoscalerStatus {
            target_sizes: sizes.iter().map(|(z, n)| (z.to_string(), *n)).collect(),
            nodes_to_remove: remove
                .iter()
                .map(|(name, zone)| NodeToRemove {
                    name: name.to_string(),
                    zone: zone.to_string(),
                })
                .collect(),
            memory: None,
        }),
        ..Default::default()
    });
    p
}

#[test]
fn the_autoscalers_size_is_made_up() {
    // spec: C3 — the size the autoscaler chose is created at once, in
    // parallel, though initialNodeCount says 1.
    let have = [running("p-a-1", "zone-a", 500)];
    let p = run(
        &autoscaled(&["zone-a"], &[("zone-a", 4)], &[]),
        &have,
        &ready_nodes(&have),
    );
    assert_eq!(creates(&p), ["zone-a", "zone-a", "zone-a"]);
    assert_eq!(p.status.zones[0].target_node_count, 4);
    // spec: C6 — never above max: a size of 9 is held at 5.
    let p = run(
        &autoscaled(&["zone-a"], &[("zone-a", 9)], &[]),
        &have,
        &ready_nodes(&have),
    );
    assert_eq!(creates(&p).len(), 4);
}

#[test]
fn the_named_node_goes_never_the_newest() {
    // spec: C4 — the autoscaler drained p-a-1 (the oldest) and lowered the
    // zone from 3 to 2: exactly p-a-1 is deleted, not p-a-3, the newest,
    // which a plain surplus would take.
    let have = [
        running("p-a-1", "zone-a", 900),
        running("p-a-2", "zone-a", 500),
        running("p-a-3", "zone-a", 10),
    ];
    let nodes = ready_nodes(&have);
    let pl = autoscaled(&["zone-a"], &[("zone-a", 2)], &[("p-a-1", "zone-a")]);
    let p = run(&pl, &have, &nodes);
    assert_eq!(deletes(&p), [("p-a-1", &DeleteReason::ScaledDown)]);
    assert_eq!(creates(&p), Vec::<&str>::new());
    // The size lowered before the node is named: no running node is cut.
    let early = autoscaled(&["zone-a"], &[("zone-a", 2)], &[]);
    assert_eq!(run(&early, &have, &nodes).actions, []);
    // A not yet registered node of a rolled-back scale-up is surplus.
    let mut booting = have.to_vec();
    booting.push(inst("p-a-4", "zone-a", InstanceState::Creating, 5));
    let p = run(&early, &booting, &nodes);
    assert_eq!(deletes(&p), [("p-a-4", &DeleteReason::Surplus)]);
}

#[test]
fn a_restart_reads_the_autoscalers_choice_from_the_pool() {
    // spec: C3, C4 — the reconciler keeps nothing between passes: a plan
    // made from the stored pool alone (as a restarted controller makes it)
    // holds the size and deletes the named node, and the status it builds
    // keeps the autoscaler's fields as they are.
    let have = [
        running("p-a-1", "zone-a", 900),
        running("p-a-2", "zone-a", 500),
        running("p-b-1", "zone-b", 500),
    ];
    let nodes = ready_nodes(&have);
    let stored = autoscaled(
        &["zone-a", "zone-b"],
        &[("zone-a", 1), ("zone-b", 3)],
        &[("p-a-2", "zone-a")],
    );
    let decoded: NodePool = serde_json::from_value(serde_json::to_value(&stored).unwrap()).unwrap();
    for pool in [&stored, &decoded] {
        let p = run(pool, &have, &nodes);
        assert_eq!(deletes(&p), [("p-a-2", &DeleteReason::ScaledDown)]);
        assert_eq!(creates(&p), ["zone-b", "zone-b"]);
        assert_eq!(
            p.status.autoscaler,
            pool.status.as_ref().and_then(|s| s.autoscaler.clone())
        );
    }
}

#[test]
fn autoscaling_off_ignores_what_the_autoscaler_left() {
    // spec: C1 — with autoscaling disabled the pool is initialNodeCount,
    // and a named node is not deleted for the autoscaler.
    let have = [running("p-a-1", "zone-a", 900)];
    let mut pl = autoscaled(&["zone-a"], &[("zone-a", 3)], &[("p-a-1", "zone-a")]);
    if let Some(a) = pl.spec.autoscaling.as_mut() {
        a.enabled = false;
    }
    assert_eq!(run(&pl, &have, &ready_nodes(&have)).actions, []);
}

#[test]
fn an_upgrade_hold_wins_over_a_named_node() {
    // spec: U7, C12 — while an upgrade holds the zone, the node the
    // autoscaler named stays (the upgrade decides that zone's nodes), and
    // the zone keeps the autoscaler's size, so no running node is cut.
    let have = [
        running("p-a-1", "zone-a", 900),
        running("p-a-2", "zone-a", 500),
        running("p-a-3", "zone-a", 10),
    ];
    let pl = autoscaled(&["zone-a"], &[("zone-a", 2)], &[("p-a-1", "zone-a")]);
    let config = Config {
        held_zones: BTreeMap::from([("zone-a".to_owned(), ZoneHold { extra: 1 })]),
        ..Config::default()
    };
    let p = plan(&pl, &have, &ready_nodes(&have), &config, now()).unwrap();
    assert_eq!(p.actions, []);
}
