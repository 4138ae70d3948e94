use std::collections::HashSet;

use crate::state::Deletion;
use crate::{TargetReason, ZoneTarget};
use serde_json::json;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Node, Pod};
use sluice_model::node_pool::{
    AutoscalerStatus, NodePool, NodePoolSpec, NodePoolStatus, NodeToRemove, PlacementPolicy,
    ReservationAffinity as ModelAffinity, ReservationType,
};

use super::*;

fn t0() -> Timestamp {
    "2026-03-01T10:00:00Z".parse().expect("time")
}

fn secs(n: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(n)
}

fn node(tainted: bool) -> Node {
    let taints = if tainted {
        json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"taints": taints}}))
        .expect("node")
}

fn pod(name: &str, owner: &str, terminating: bool, grace: Option<i64>) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o",
                "uid": "u", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}
    });
    if terminating {
        v["metadata"]["deletionTimestamp"] = json!("2026-03-01T10:00:05Z");
    }
    if let Some(g) = grace {
        v["spec"]["terminationGracePeriodSeconds"] = json!(g);
    }
    serde_json::from_value(v).expect("pod")
}

fn deletion() -> Deletion {
    Deletion {
        pool: "p".into(),
        started_at: t0(),
        empty: false,
    }
}

#[test]
fn nothing_is_evicted_before_the_taint_is_seen() {
    // spec: C4 — the node is tainted and cordoned first, so evicted pods
    // cannot land on it again.
    let web = pod("web", "ReplicaSet", false, None);
    assert_eq!(
        drain_step(&node(false), &[&web], &deletion(), Ok(()), t0()),
        Step::Wait
    );
}

#[test]
fn evictions_are_capped_at_ten_minutes_and_daemon_pods_stay() {
    // spec: C4, E1 — evicted with their own grace, at most 10 minutes;
    // DaemonSet pods go with the node.
    let long = pod("long", "ReplicaSet", false, Some(3600));
    let short = pod("short", "ReplicaSet", false, Some(5));
    let ds = pod("agent", "DaemonSet", false, None);
    assert_eq!(
        drain_step(
            &node(true),
            &[&long, &short, &ds],
            &deletion(),
            Ok(()),
            secs(1)
        ),
        Step::Evict(vec![
            ("default/long".into(), 600),
            ("default/short".into(), 5)
        ])
    );
    // An empty node (DaemonSet pods only) is handed over at once.
    assert_eq!(
        drain_step(&node(true), &[&ds], &deletion(), Ok(()), secs(1)),
        Step::HandOver
    );
}

#[test]
fn a_budget_that_still_refuses_keeps_the_node() {
    // spec: C5, E6 — a refused eviction is retried for two minutes; then
    // the removal is given up, naming the pod.
    let held = pod("held", "ReplicaSet", false, None);
    assert!(matches!(
        drain_step(&node(true), &[&held], &deletion(), Ok(()), secs(119)),
        Step::Evict(_)
    ));
    match drain_step(&node(true), &[&held], &deletion(), Ok(()), secs(120)) {
        Step::GiveUp(why) => assert!(why.contains("default/held"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn evicted_pods_are_waited_for_then_the_node_goes() {
    // spec: C4 — drained for at most 10 minutes (after the eviction
    // window, plus upstream's headroom), then forced.
    let going = pod("going", "ReplicaSet", true, None);
    assert_eq!(
        drain_step(&node(true), &[&going], &deletion(), Ok(()), secs(700)),
        Step::Wait
    );
    assert_eq!(
        drain_step(
            &node(true),
            &[&going],
            &deletion(),
            Ok(()),
            secs(120 + 600 + 30)
        ),
        Step::HandOver
    );
}

#[test]
fn a_drained_node_is_handed_over_only_once_the_load_balancers_let_it_go() {
    // spec: C4 — a node still sent connections is not deleted, even with
    // no pod left, or with its drain's time spent.
    let ds = pod("agent", "DaemonSet", false, None);
    let held = Err(Some(secs(30)));
    assert_eq!(
        drain_step(&node(true), &[&ds], &deletion(), held, secs(1)),
        Step::Wait
    );
    let going = pod("going", "ReplicaSet", true, None);
    let late = secs(120 + 600 + 30);
    assert_eq!(
        drain_step(&node(true), &[&going], &deletion(), held, late),
        Step::Wait
    );
    assert_eq!(
        drain_step(&node(true), &[&going], &deletion(), Ok(()), late),
        Step::HandOver
    );
    // Pods to evict are evicted whatever the balancers say.
    let web = pod("web", "ReplicaSet", false, None);
    assert!(matches!(
        drain_step(&node(true), &[&web], &deletion(), held, secs(1)),
        Step::Evict(_)
    ));
}

fn pool(autoscaler: Option<AutoscalerStatus>) -> NodePool {
    let mut p = NodePool::new("p", NodePoolSpec::default());
    p.status = Some(NodePoolStatus {
        zones: vec![sluice_model::node_pool::ZoneStatus {
            zone: "z1".into(),
            target_node_count: 3,
            node_count: 3,
            ready_node_count: 3,
        }],
        autoscaler,
        ..Default::default()
    });
    p
}

#[test]
fn a_handed_over_node_is_named_and_its_zone_shrinks_once() {
    // spec: C4 — the pool is told which node to remove, and its zone's
    // size drops by one (from the reconciler's target, 3, when the
    // autoscaler never sized it); naming it again changes nothing.
    let live: HashSet<&str> = ["n1", "n2", "n3"].into();
    let change = PoolChange {
        targets: vec![],
        handed_over: vec![("n1", "z1", 3)],
        live: &live,
        memory: None,
    };
    let after = pool_status(&pool(None), &change).expect("a change");
    assert_eq!(after.target_sizes.get("z1"), Some(&2));
    assert_eq!(
        after.nodes_to_remove,
        [NodeToRemove {
            name: "n1".into(),
            zone: "z1".into()
        }]
    );
    assert_eq!(pool_status(&pool(Some(after)), &change), None);
}

#[test]
fn sizes_are_set_and_names_of_gone_nodes_dropped() {
    // spec: C3 — the decision's size per zone is written; a removed node
    // no longer listed anywhere leaves the list.
    let before = AutoscalerStatus {
        target_sizes: [("z1".to_string(), 2)].into(),
        nodes_to_remove: vec![NodeToRemove {
            name: "gone".into(),
            zone: "z1".into(),
        }],
        memory: None,
    };
    let live: HashSet<&str> = ["n2"].into();
    let up = ZoneTarget {
        pool: "p".into(),
        zone: "z1".into(),
        from: 2,
        to: 5,
        reason: TargetReason::ScaleUp,
    };
    let change = PoolChange {
        targets: vec![&up],
        handed_over: vec![],
        live: &live,
        memory: Some(json!({"lastScaleUp": "2026-03-01T10:00:00Z"})),
    };
    let after = pool_status(&pool(Some(before)), &change).expect("a change");
    assert_eq!(after.target_sizes.get("z1"), Some(&5));
    assert!(after.nodes_to_remove.is_empty());
    assert!(after.memory.is_some());
}

#[test]
fn the_model_fields_reach_the_autoscaler() {
    // spec: C8, C10 — price, reservation affinity and the TPU slice come
    // from the pool's own fields.
    let mut p = NodePool::new("p", NodePoolSpec::default());
    p.spec.config.price_per_hour = Some(0.4);
    p.spec.config.capacity.tpu = Some(4);
    p.spec.config.reservation_affinity = Some(ModelAffinity {
        consume_reservation_type: ReservationType::SpecificReservation,
        key: Some(sluice_model::node_pool::RESERVATION_NAME_KEY.into()),
        values: vec!["r1".into()],
    });
    p.spec.placement_policy = Some(PlacementPolicy {
        type_: None,
        tpu_topology: Some("4x4".into()),
    });
    let e = extras(&p);
    assert_eq!(e.price_per_hour, Some(0.4));
    assert_eq!(
        e.reservation_affinity,
        crate::ReservationAffinity::Specific(vec!["r1".into()])
    );
    assert_eq!(e.tpu.as_ref().map(|t| t.hosts()), Some(Ok(4)));
    // Absent: GKE's defaults (any reservation, priced from capacity).
    let plain = extras(&NodePool::new("q", NodePoolSpec::default()));
    assert_eq!(
        (plain.price_per_hour, plain.reservation_affinity, plain.tpu),
        (None, crate::ReservationAffinity::Any, None)
    );
}

#[test]
fn the_removal_taint_cordons_and_its_removal_uncordons() {
    // spec: C4 — tainted ToBeDeletedByClusterAutoscaler and cordoned; a
    // removal given up takes both back; a patch already made is not sent.
    use crate::TaintChange;
    use k8s_openapi::api::core::v1::Taint;
    let add = TaintChange::Add {
        node: "n1".into(),
        taint: Taint {
            key: "ToBeDeletedByClusterAutoscaler".into(),
            value: Some("1".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        },
        cordon: true,
    };
    let p = taint_patch(&node(false), &add).expect("a patch");
    assert_eq!(p["spec"]["unschedulable"], json!(true));
    assert_eq!(
        p["spec"]["taints"][0]["key"],
        "ToBeDeletedByClusterAutoscaler"
    );
    let mut done = node(true);
    done.spec.as_mut().expect("spec").unschedulable = Some(true);
    assert_eq!(taint_patch(&done, &add), None);
    let remove = TaintChange::Remove {
        node: "n1".into(),
        key: "ToBeDeletedByClusterAutoscaler".into(),
        uncordon: true,
    };
    let p = taint_patch(&done, &remove).expect("a patch");
    assert_eq!(p["spec"]["taints"], json!([]));
    assert_eq!(p["spec"]["unschedulable"], json!(null));
}
