//! Reaching and keeping the target: creations, surplus, zones, deletion.

use std::collections::HashSet;

use k8s_openapi::jiff::SignedDuration;
use sluice_model::k8s::Time;
use sluice_model::node_pool::NodePoolPhase;

use super::*;
use crate::reconcile::READY;

#[test]
fn an_empty_pool_creates_initial_node_count_per_zone() {
    let p = run(&pool(&["zone-a", "zone-b"], 2), &[], &[]);
    assert_eq!(creates(&p), ["zone-a", "zone-a", "zone-b", "zone-b"]);
    let names: HashSet<String> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create(c) => {
                assert_eq!((c.pool.as_str(), c.version.as_str()), ("p", "1.33.2"));
                assert_eq!(
                    (c.config.cpu_milli, c.config.memory_bytes),
                    (4000, 16 << 30)
                );
                assert!(c
                    .name
                    .starts_with(&format!("p-{}-", c.zone.rsplit('-').next().unwrap())));
                Some(c.name.clone())
            }
            Action::Delete { .. } => None,
        })
        .collect();
    assert_eq!(names.len(), 4, "names are unique");
    assert_eq!(p.status.status, Some(NodePoolPhase::Provisioning));
    assert_eq!(condition(&p, READY), ("False", "NodesNotReady"));
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(10)));
}

#[test]
fn a_pool_at_its_target_does_nothing_and_settles() {
    let have = [
        running("p-a-1", "zone-a", 100),
        running("p-b-1", "zone-b", 100),
    ];
    let p = run(&pool(&["zone-a", "zone-b"], 1), &have, &ready_nodes(&have));
    assert_eq!(p.actions, []);
    assert_eq!(p.status.status, Some(NodePoolPhase::Running));
    assert_eq!(condition(&p, READY), ("True", "NodesReady"));
    assert_eq!(p.status.nodes, ["p-a-1", "p-b-1"]);
    assert_eq!(p.status.version.as_deref(), Some("1.33.2"));
    assert_eq!(p.status.zones[1].ready_node_count, 1);
    assert_eq!(p.requeue_after, None);
}

#[test]
fn new_nodes_get_the_pool_version_else_the_cluster_version() {
    let mut pl = pool(&["zone-a"], 1);
    pl.spec.version = None;
    let config = Config {
        cluster_version: "1.34.0".into(),
        ..Config::default()
    };
    let p = plan::<Node>(&pl, &[], &[], &config, now()).unwrap();
    assert!(matches!(&p.actions[0], Action::Create(c) if c.version == "1.34.0"));
}

#[test]
fn surplus_goes_unregistered_then_not_ready_then_newest() {
    let have = [
        running("old-ready", "zone-a", 900),
        running("new-ready", "zone-a", 100),
        running("mid-ready", "zone-a", 500),
        running("not-ready", "zone-a", 800),
        running("unregistered", "zone-a", 500),
        running("other-zone", "zone-b", 10),
    ];
    let mut nodes = ready_nodes(&have[..3]);
    nodes.push(node("not-ready", false));
    nodes.push(node("other-zone", true));
    let p = run(&pool(&["zone-a", "zone-b"], 2), &have[..5], &nodes);
    let mut gone: Vec<&str> = deletes(&p).into_iter().map(|(n, _)| n).collect();
    gone.sort();
    assert_eq!(gone, ["new-ready", "not-ready", "unregistered"]);
    assert!(deletes(&p)
        .iter()
        .all(|(_, r)| **r == DeleteReason::Surplus));
    // zone-b is short by two and gets them in the same pass.
    assert_eq!(creates(&p), ["zone-b", "zone-b"]);
}

#[test]
fn zones_left_out_of_locations_are_drained() {
    let have = [
        running("p-a-1", "zone-a", 100),
        running("p-c-1", "zone-c", 100),
    ];
    let p = run(&pool(&["zone-a"], 1), &have, &ready_nodes(&have));
    assert_eq!(deletes(&p), [("p-c-1", &DeleteReason::ZoneRemoved)]);
    assert_eq!(creates(&p), Vec::<&str>::new());
    assert_eq!(p.status.status, Some(NodePoolPhase::Reconciling));
}

#[test]
fn a_pool_being_deleted_deletes_every_instance_and_creates_none() {
    let mut pl = pool(&["zone-a"], 2);
    pl.metadata.deletion_timestamp = Some(Time(now()));
    let have = [
        running("p-a-1", "zone-a", 100),
        inst("p-a-2", "zone-a", InstanceState::Deleting, 100),
    ];
    let p = run(&pl, &have, &ready_nodes(&have));
    assert_eq!(deletes(&p), [("p-a-1", &DeleteReason::PoolDeleted)]);
    assert_eq!(creates(&p), Vec::<&str>::new());
    assert_eq!(p.status.status, Some(NodePoolPhase::Stopping));
    assert_eq!(condition(&p, READY), ("False", "Deleting"));
}

#[test]
fn instances_being_deleted_are_not_counted_nor_deleted_again() {
    let have = [inst("p-a-1", "zone-a", InstanceState::Deleting, 100)];
    let p = run(&pool(&["zone-a"], 1), &have, &ready_nodes(&have));
    assert_eq!(deletes(&p), []);
    assert_eq!(creates(&p), ["zone-a"]);
}

#[test]
fn other_pools_instances_are_ignored() {
    let mut theirs = running("q-a-1", "zone-a", 100);
    theirs.pool = "q".into();
    let p = run(&pool(&["zone-a"], 1), &[theirs], &[]);
    assert_eq!(deletes(&p), []);
    assert_eq!(creates(&p), ["zone-a"]);
    assert!(p.status.instances.is_empty());
}

#[test]
fn creations_in_flight_are_bounded_and_spread_over_zones() {
    let have: Vec<Instance> = (0..3)
        .map(|i| inst(&format!("p-a-{i}"), "zone-a", InstanceState::Creating, 5))
        .collect();
    let config = Config {
        max_parallel_creations: 5,
        ..Config::default()
    };
    let p = plan::<Node>(&pool(&["zone-a", "zone-b"], 4), &have, &[], &config, now()).unwrap();
    // 3 creating leave room for 2: one per zone rather than both in zone-a.
    assert_eq!(creates(&p), ["zone-a", "zone-b"]);
}

#[test]
fn new_names_avoid_instances_and_nodes_in_use() {
    // A stale Node holding the first name a new node of zone-a would get.
    let salt = crate::naming::salt(now());
    let first = crate::naming::node_name("p", "zone-a", salt, 0);
    let p = run(&pool(&["zone-a"], 1), &[], &[node(&first, false)]);
    assert!(
        matches!(&p.actions[0], Action::Create(c) if c.name == crate::naming::node_name("p", "zone-a", salt, 1))
    );
}

#[test]
fn plans_are_deterministic() {
    let have = [
        inst("p-a-1", "zone-a", InstanceState::Failed("x".into()), 10),
        running("p-b-1", "zone-b", 700),
        running("p-b-2", "zone-b", 10),
    ];
    let pl = pool(&["zone-a", "zone-b"], 3);
    let mut reversed = have.clone();
    reversed.reverse();
    assert_eq!(run(&pl, &have, &[]), run(&pl, &reversed, &[]));
}

#[test]
fn a_five_thousand_node_pool_is_planned() {
    let have: Vec<Instance> = (0..5000)
        .map(|i| running(&format!("p-a-{i}"), "zone-a", 100))
        .collect();
    let p = run(&pool(&["zone-a"], 5000), &have, &ready_nodes(&have));
    assert_eq!(p.actions, []);
    assert_eq!(p.status.zones[0].ready_node_count, 5000);
    let p = run(&pool(&["zone-a"], 5100), &have, &ready_nodes(&have));
    assert_eq!(creates(&p).len(), 100, "max_parallel_creations");
}
