//! Replacing instances: failed, never registered, Node deleted.

use k8s_openapi::jiff::SignedDuration;
use sluice_model::node_pool::{InstanceState as StatusState, NodePoolStatus};

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
