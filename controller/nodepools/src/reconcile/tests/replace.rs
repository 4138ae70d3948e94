//! Replacing instances: failed, never registered, Node deleted.

use k8s_openapi::jiff::SignedDuration;
use sluice_model::node_pool::{InstanceState as StatusState, NodePoolStatus};

use crate::instance::CreateNode;

use super::*;

#[test]
fn a_failed_instance_is_deleted_then_replaced() {
    let have = [
        inst(
            "p-a-1",
            "zone-a",
            InstanceState::Failed("disk full".into()),
            100,
        ),
        running("p-a-2", "zone-a", 100),
    ];
    let p = run(&pool(&["zone-a"], 2), &have, &ready_nodes(&have[1..]));
    assert!(matches!(
        &p.actions[..],
        [Action::Delete { name, reason: DeleteReason::Failed(why) }, Action::Create(c)]
            if name == "p-a-1" && why == "disk full" && c.zone == "zone-a"
    ));
    let failed = &p.status.instances[0];
    assert_eq!(
        (failed.name.as_str(), failed.state),
        ("p-a-1", StatusState::Failed)
    );
    assert!(failed.message.as_deref().unwrap().contains("disk full"));
}

#[test]
fn an_instance_unregistered_past_the_startup_timeout_is_replaced() {
    let late = [running("p-a-1", "zone-a", 600)];
    let p = run(&pool(&["zone-a"], 1), &late, &[]);
    assert_eq!(deletes(&p), [("p-a-1", &DeleteReason::StartupTimeout)]);
    assert_eq!(creates(&p), ["zone-a"]);
}

#[test]
fn an_instance_within_the_startup_timeout_is_waited_for() {
    let booting = [running("p-a-1", "zone-a", 599)];
    let p = run(&pool(&["zone-a"], 1), &booting, &[]);
    assert_eq!(p.actions, []);
    // Wake up when its deadline passes, before the 10 s poll.
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(1)));
}

#[test]
fn a_registered_node_that_is_deleted_is_replaced() {
    let mut pl = pool(&["zone-a"], 2);
    pl.status = Some(NodePoolStatus {
        nodes: vec!["p-a-1".into(), "p-a-2".into()],
        ..Default::default()
    });
    let have = [
        running("p-a-1", "zone-a", 100),
        running("p-a-2", "zone-a", 100),
    ];
    // The Node of p-a-2 is gone; its instance still runs.
    let p = run(&pl, &have, &ready_nodes(&have[..1]));
    assert_eq!(deletes(&p), [("p-a-2", &DeleteReason::NodeDeleted)]);
    assert_eq!(creates(&p), ["zone-a"]);
    assert_eq!(p.status.nodes, ["p-a-1"]);
}

#[test]
fn a_node_gone_with_its_instance_is_made_again() {
    let mut pl = pool(&["zone-a"], 2);
    pl.status = Some(NodePoolStatus {
        nodes: vec!["p-a-1".into(), "p-a-2".into()],
        ..Default::default()
    });
    let have = [running("p-a-1", "zone-a", 100)];
    let p = run(&pl, &have, &ready_nodes(&have));
    assert_eq!(deletes(&p), []);
    assert_eq!(creates(&p), ["zone-a"]);
}

#[test]
fn a_registered_node_that_is_not_ready_is_left_to_repair() {
    let have = [running("p-a-1", "zone-a", 5000)];
    let p = run(&pool(&["zone-a"], 1), &have, &[node("p-a-1", false)]);
    assert_eq!(p.actions, []);
    assert_eq!(p.status.zones[0].ready_node_count, 0);
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(10)));
}

#[test]
fn times_at_the_ends_of_the_calendar_do_not_panic() {
    let mut far = running("p-a-1", "zone-a", 0);
    far.created_at = Timestamp::MAX;
    let mut early = running("p-a-2", "zone-a", 0);
    early.created_at = Timestamp::MIN;
    let p = run(&pool(&["zone-a"], 2), &[far, early], &[]);
    assert_eq!(deletes(&p), [("p-a-2", &DeleteReason::StartupTimeout)]);
}

#[test]
fn a_name_the_last_status_listed_as_a_node_is_not_handed_out_again() {
    // The name a lone creation would get.
    let p = run(&pool(&["zone-a"], 1), &[], &[]);
    let [Action::Create(first)] = &p.actions[..] else {
        panic!("{:?}", p.actions)
    };
    // That name's instance and Node are gone, but the last status still
    // lists its Node: reused now, the next pass would read the new
    // instance's missing Node as that Node deleted and replace it.
    let mut pl = pool(&["zone-a"], 1);
    pl.status = Some(NodePoolStatus {
        nodes: vec![first.name.clone()],
        ..Default::default()
    });
    let p = run(&pl, &[], &[]);
    let [Action::Create(second)] = &p.actions[..] else {
        panic!("{:?}", p.actions)
    };
    assert_ne!(second.name, first.name);
    // The new instance, booting with no Node yet, is waited for.
    let booting = [running(&second.name, "zone-a", 5)];
    pl.status = Some(p.status);
    assert_eq!(run(&pl, &booting, &[]).actions, []);
}

/// `pool` with GKE's flex-start and a run limit of `secs`.
fn flex_start(mut pool: NodePool, secs: i64) -> NodePool {
    pool.spec.config.flex_start = true;
    pool.spec.config.max_run_duration = Some(sluice_model::duration::Duration::from_secs(secs));
    pool
}

#[test]
fn an_instance_its_provider_ended_is_replaced() {
    // spec: A5 — the provider ends a flex-start node at the end of its
    // run; it is no longer listed, its Node may still be Ready (its Lease
    // has not lapsed), and the zone is short of one: a new node is made,
    // under another name, from the pool's config as it is now.
    let mut pl = flex_start(pool(&["zone-a"], 2), 3600);
    pl.status = Some(NodePoolStatus {
        nodes: vec!["p-a-1".into(), "p-a-2".into()],
        ..Default::default()
    });
    let left = [running("p-a-2", "zone-a", 1800)];
    let nodes = [node("p-a-1", true), node("p-a-2", true)];
    let p = run(&pl, &left, &nodes);
    assert_eq!(deletes(&p), []);
    let made: Vec<&CreateNode> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create(c) => Some(c),
            Action::Delete { .. } => None,
        })
        .collect();
    assert_eq!(made.len(), 1, "{:?}", p.actions);
    assert_eq!(made[0].zone, "zone-a");
    assert!(!["p-a-1", "p-a-2"].contains(&made[0].name.as_str()));
    assert_eq!(
        made[0].config.max_run_duration(),
        Some(sluice_model::duration::Duration::from_secs(3600)),
        "the new node runs as long as the pool says"
    );
}

#[test]
fn a_settled_pool_looks_again_when_a_run_ends() {
    // spec: A5 — nothing announces a node whose run ended, and a settled
    // pool is not polled: the pass is due at the end of the first run.
    let have = [
        running("p-a-1", "zone-a", 3000),
        running("p-a-2", "zone-a", 1000),
    ];
    let p = run(
        &flex_start(pool(&["zone-a"], 2), 3600),
        &have,
        &ready_nodes(&have),
    );
    assert_eq!(p.actions, []);
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(600)));
    // Without a limit, a settled pool waits for events.
    let p = run(&pool(&["zone-a"], 2), &have, &ready_nodes(&have));
    assert_eq!(p.requeue_after, None);
    // Still listed past its end (a provider late to end it): polled.
    let late = [running("p-a-1", "zone-a", 4000), have[1].clone()];
    let p = run(
        &flex_start(pool(&["zone-a"], 2), 3600),
        &late,
        &ready_nodes(&late),
    );
    assert_eq!(
        p.requeue_after,
        Some(Config::default().poll_interval),
        "{:?}",
        p.actions
    );
}
