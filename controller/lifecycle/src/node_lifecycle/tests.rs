use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::{
    NodeCondition, NodeSpec, NodeStatus, PodCondition, PodSpec, PodStatus, Taint, Toleration,
};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Lease, MicroTime, Node, ObjectMeta, Pod, Time};

use super::taints::{NOT_READY, NO_EXECUTE, NO_SCHEDULE, UNREACHABLE};
use super::*;

/// The injected clock: seconds after an arbitrary start.
fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn condition(kind: &str, status: &str, heartbeat: i64) -> NodeCondition {
    NodeCondition {
        type_: kind.into(),
        status: status.into(),
        last_heartbeat_time: Some(Time(t(heartbeat))),
        last_transition_time: Some(Time(t(heartbeat))),
        reason: Some("KubeletReady".into()),
        message: None,
    }
}

fn node(name: &str, zone: &str, ready: &str, heartbeat: i64) -> Node {
    let mut conditions = vec![condition("Ready", ready, heartbeat)];
    for kind in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        conditions.push(condition(kind, "False", heartbeat));
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            creation_timestamp: Some(Time(t(-1000))),
            labels: Some(BTreeMap::from([(ZONE_LABEL.to_string(), zone.to_string())])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            conditions: Some(conditions),
            ..Default::default()
        }),
    }
}

fn lease(name: &str, renewed: i64) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(LEASE_NAMESPACE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            renew_time: Some(MicroTime(t(renewed))),
            ..Default::default()
        }),
    }
}

fn pod(name: &str, node: &str, tolerations: Vec<Toleration>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("{name}-uid")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            tolerations: Some(tolerations),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(NO_EXECUTE.into()),
        toleration_seconds: seconds,
        value: None,
    }
}

fn taint(key: &str, effect: &str, added: i64) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        time_added: Some(Time(t(added))),
        value: None,
    }
}

fn with_taints(mut n: Node, taints: Vec<Taint>) -> Node {
    n.spec.as_mut().unwrap().taints = Some(taints);
    n
}

fn keys(taints: &[Taint]) -> Vec<(String, String)> {
    let mut k: Vec<_> = taints
        .iter()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect();
    k.sort();
    k
}

fn pair(key: &str, effect: &str) -> (String, String) {
    (key.to_string(), effect.to_string())
}

/// A Ready node in a zone of its own, heard from until well after every
/// test's clock: with it, one node's silence is not a whole-cluster outage
/// (which would lift every NoExecute taint).
fn witness() -> Node {
    node("witness", "elsewhere", "True", 10_000)
}

fn run(nodes: &[Node], leases: &[Lease], pods: &[Pod], now: i64) -> LifecyclePlan {
    reconcile::<Node, Lease, Pod>(nodes, leases, pods, &Config::default(), t(now))
}

#[test]
fn a_silent_node_goes_unknown_after_the_grace_period() {
    // The Ready heartbeat is old; the Lease is what shows the kubelet alive.
    let nodes = [node("n1", "z", "True", -300), witness()];
    let leases = [lease("n1", 0)];
    let quiet = run(&nodes, &leases, &[], 39);
    assert!(quiet.node_updates.is_empty(), "{quiet:?}");
    assert_eq!(quiet.requeue_after, Some(SignedDuration::from_secs(1)));

    let plan = run(&nodes, &leases, &[], 41);
    let [update] = plan.node_updates.as_slice() else {
        panic!("{plan:?}")
    };
    assert_eq!(update.node, "n1");
    let conditions = update.conditions.as_ref().unwrap();
    assert_eq!(conditions.len(), 4);
    for c in conditions {
        assert_eq!(c.status, "Unknown", "{c:?}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(c.last_transition_time, Some(Time(t(41))));
        // The heartbeat stays what the kubelet last wrote.
        assert_eq!(c.last_heartbeat_time, Some(Time(t(-300))));
    }
    let taints = update.taints.as_ref().unwrap();
    assert_eq!(
        keys(taints),
        [
            pair(UNREACHABLE, NO_EXECUTE),
            pair(UNREACHABLE, NO_SCHEDULE)
        ]
    );
    assert!(taints.iter().all(|x| x.time_added == Some(Time(t(41)))));
    assert_eq!(plan.zones["z"].state, ZoneState::FullDisruption);
}

#[test]
fn a_restarted_controller_gives_every_node_a_full_grace_period() {
    // The controller was down from 0 to 100 s (kill -9): no Lease could be
    // renewed meanwhile. Its downtime is not the nodes' silence; counted
    // from when it began watching again, as upstream's probeTimestamp.
    let nodes = [node("n1", "z", "True", -300), witness()];
    let leases = [lease("n1", 0)];
    let restarted = Config {
        watching_since: Some(t(100)),
        ..Config::default()
    };
    let at = |now| reconcile::<Node, Lease, Pod>(&nodes, &leases, &[], &restarted, t(now));
    let plan = at(101);
    assert!(plan.node_updates.is_empty(), "{plan:?}");
    assert_eq!(plan.requeue_after, Some(SignedDuration::from_secs(39)));
    assert!(at(139).node_updates.is_empty());
    // Still silent a full grace period after: Unknown, as ever.
    assert_eq!(at(141).node_updates.len(), 1);
    // Without the restart the same node was silent at 41 s.
    assert_eq!(run(&nodes, &leases, &[], 101).node_updates.len(), 1);
}

#[test]
fn without_a_lease_the_ready_heartbeat_counts() {
    let nodes = [node("n1", "z", "True", 0)];
    assert!(run(&nodes, &[], &[], 39).node_updates.is_empty());
    assert_eq!(run(&nodes, &[], &[], 41).node_updates.len(), 1);
    // A Lease in another namespace is not the node's.
    let mut elsewhere = lease("n1", 40);
    elsewhere.metadata.namespace = Some("default".into());
    assert_eq!(run(&nodes, &[elsewhere], &[], 41).node_updates.len(), 1);
    // No heartbeat and no Lease: counted from the node's creation.
    let mut silent = node("n1", "z", "True", 0);
    silent.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_heartbeat_time = None;
    let silent = [silent, witness()];
    assert!(run(&silent, &[], &[], -961).node_updates.is_empty());
    assert_eq!(run(&silent, &[], &[], -959).node_updates.len(), 1);
    // The grace period is configurable.
    let slow = Config {
        grace_period: SignedDuration::from_secs(120),
        ..Config::default()
    };
    assert!(
        reconcile::<Node, Lease, Pod>(&nodes, &[], &[], &slow, t(41))
            .node_updates
            .is_empty()
    );
}

#[test]
fn a_node_that_never_reported_gets_the_startup_grace() {
    let mut n = node("n1", "z", "True", 0);
    n.status = None;
    n.metadata.creation_timestamp = Some(Time(t(0)));
    assert!(run(&[n.clone()], &[], &[], 59).node_updates.is_empty());
    let plan = run(&[n], &[], &[], 61);
    let conditions = plan.node_updates[0].conditions.as_ref().unwrap();
    let kinds: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        kinds,
        ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
    );
    assert!(conditions.iter().all(|c| c.status == "Unknown"
        && c.reason.as_deref() == Some("NodeStatusNeverUpdated")
        && c.message.as_deref() == Some("Kubelet never posted node status.")));
}

#[test]
fn an_unknown_node_is_not_rewritten_again() {
    let mut n = node("n1", "z", "Unknown", 0);
    for c in n.status.as_mut().unwrap().conditions.as_mut().unwrap() {
        c.status = "Unknown".into();
    }
    let n = with_taints(
        n,
        vec![
            taint(UNREACHABLE, NO_SCHEDULE, 41),
            taint(UNREACHABLE, NO_EXECUTE, 41),
        ],
    );
    let plan = run(&[n, witness()], &[], &[], 500);
    assert!(plan.node_updates.is_empty(), "{plan:?}");
    assert_eq!(
        plan.requeue_after,
        Some(SignedDuration::from_secs(10_040 - 500))
    );
}

#[test]
fn not_ready_nodes_get_not_ready_taints_and_lose_them_when_ready() {
    let user = taint("dedicated", NO_SCHEDULE, -50);
    let n = with_taints(node("n1", "z", "False", 0), vec![user.clone()]);
    let plan = run(&[n, witness()], &[], &[], 5);
    let update = &plan.node_updates[0];
    assert!(update.conditions.is_none());
    assert_eq!(
        keys(update.taints.as_ref().unwrap()),
        [
            pair("dedicated", NO_SCHEDULE),
            pair(NOT_READY, NO_EXECUTE),
            pair(NOT_READY, NO_SCHEDULE)
        ]
    );
    // Unreachable before, reporting Ready=False now: swapped at once.
    let n = with_taints(
        node("n1", "z", "False", 0),
        vec![
            taint(UNREACHABLE, NO_SCHEDULE, -10),
            taint(UNREACHABLE, NO_EXECUTE, -10),
        ],
    );
    let plan = run(&[n, witness()], &[], &[], 5);
    assert_eq!(
        keys(plan.node_updates[0].taints.as_ref().unwrap()),
        [pair(NOT_READY, NO_EXECUTE), pair(NOT_READY, NO_SCHEDULE)]
    );
    // Ready again: the controller's taints go, the user's stay.
    let n = with_taints(
        node("n1", "z", "True", 0),
        vec![
            user.clone(),
            taint(NOT_READY, NO_SCHEDULE, -10),
            taint(NOT_READY, NO_EXECUTE, -10),
        ],
    );
    let plan = run(&[n], &[], &[], 5);
    assert_eq!(plan.node_updates[0].taints.as_deref(), Some(&[user][..]));
}

#[test]
fn cordon_and_pressure_become_no_schedule_taints() {
    let mut n = node("n1", "z", "True", 0);
    n.spec.as_mut().unwrap().unschedulable = Some(true);
    n.status.as_mut().unwrap().conditions.as_mut().unwrap()[2].status = "True".into();
    let plan = run(&[n], &[], &[], 5);
    assert_eq!(
        keys(plan.node_updates[0].taints.as_ref().unwrap()),
        [
            pair(taints::DISK_PRESSURE, NO_SCHEDULE),
            pair(taints::UNSCHEDULABLE, NO_SCHEDULE)
        ]
    );
}

#[test]
fn pods_are_evicted_when_their_toleration_runs_out() {
    let n = with_taints(
        node("n1", "z", "Unknown", -100),
        vec![
            taint(UNREACHABLE, NO_SCHEDULE, 0),
            taint(UNREACHABLE, NO_EXECUTE, 0),
        ],
    );
    let bare = pod("bare", "n1", vec![]);
    let five_min = pod("five-min", "n1", vec![toleration(UNREACHABLE, Some(300))]);
    let forever = pod("forever", "n1", vec![toleration(UNREACHABLE, None)]);
    let mut leaving = pod("leaving", "n1", vec![]);
    leaving.metadata.deletion_timestamp = Some(Time(t(0)));
    let pods = [bare, five_min, forever, leaving];
    let nodes = [n, node("n2", "z", "True", 290)];

    let plan = run(&nodes, &[], &pods, 299);
    let evicted: Vec<(&str, EvictionCause)> = plan
        .evictions
        .iter()
        .map(|e| (e.pod.name.as_str(), e.cause))
        .collect();
    assert_eq!(evicted, [("bare", EvictionCause::NotTolerated)]);
    assert_eq!(plan.evictions[0].taint.key, UNREACHABLE);
    assert_eq!(plan.evictions[0].pod.uid.as_deref(), Some("bare-uid"));
    assert_eq!(plan.requeue_after, Some(SignedDuration::from_secs(1)));

    let plan = run(&nodes, &[], &pods, 300);
    let evicted: Vec<(&str, EvictionCause)> = plan
        .evictions
        .iter()
        .map(|e| (e.pod.name.as_str(), e.cause))
        .collect();
    assert_eq!(
        evicted,
        [
            ("bare", EvictionCause::NotTolerated),
            (
                "five-min",
                EvictionCause::TolerationExpired {
                    toleration_seconds: 300
                }
            )
        ]
    );
    assert!(plan.evictions[1].message().contains("ran out after 300s"));
}

#[test]
fn a_node_going_silent_evicts_untolerating_pods_and_unreadies_the_rest() {
    let nodes = [node("n1", "z", "True", 0), node("n2", "z", "True", 400)];
    let pods = [
        pod("bare", "n1", vec![]),
        pod("tolerant", "n1", vec![toleration(UNREACHABLE, Some(300))]),
        pod("elsewhere", "n2", vec![]),
    ];
    let plan = run(&nodes, &[], &pods, 41);
    let evicted: Vec<&str> = plan.evictions.iter().map(|e| e.pod.name.as_str()).collect();
    assert_eq!(evicted, ["bare"]);
    let unready: Vec<&str> = plan
        .mark_not_ready
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(unready, ["tolerant"]);
    // Next due: the tolerant pod's 300 s from the taint added now.
    assert_eq!(plan.requeue_after, Some(SignedDuration::from_secs(300)));
}

#[test]
fn tolerations_match_as_the_scheduler_matches_them() {
    let unreachable = taint(UNREACHABLE, NO_EXECUTE, 0);
    let mut valued = taint("team", NO_EXECUTE, 0);
    valued.value = Some("blue".into());
    let tol = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    };
    use eviction::tolerates;
    assert!(tolerates(
        &tol(None, Some("Exists"), None, None),
        &unreachable
    ));
    assert!(!tolerates(&tol(None, None, None, None), &unreachable));
    assert!(tolerates(
        &tol(Some(UNREACHABLE), Some("Exists"), None, Some("NoExecute")),
        &unreachable
    ));
    assert!(!tolerates(
        &tol(Some(UNREACHABLE), Some("Exists"), None, Some("NoSchedule")),
        &unreachable
    ));
    assert!(!tolerates(
        &tol(Some(NOT_READY), Some("Exists"), None, None),
        &unreachable
    ));
    assert!(tolerates(
        &tol(Some("team"), None, Some("blue"), None),
        &valued
    ));
    assert!(tolerates(
        &tol(Some("team"), Some("Equal"), Some("blue"), None),
        &valued
    ));
    assert!(!tolerates(
        &tol(Some("team"), Some("Equal"), Some("red"), None),
        &valued
    ));
    assert!(!tolerates(
        &tol(Some("team"), Some("Bogus"), Some("blue"), None),
        &valued
    ));
}

fn zone_of_nodes(ready: usize, not_ready: usize, zone: &str) -> Vec<Node> {
    (0..ready)
        .map(|i| node(&format!("{zone}-ok-{i:02}"), zone, "True", 100))
        .chain((0..not_ready).map(|i| node(&format!("{zone}-bad-{i:02}"), zone, "False", 100)))
        .collect()
}

#[test]
fn zone_states_follow_the_share_of_unready_nodes() {
    let c = Config::default();
    let s = |n, bad| ZoneStatus::new(n, bad, &c);
    assert_eq!(s(3, 2).state, ZoneState::Normal); // not more than 2
    assert_eq!(s(10, 5).state, ZoneState::Normal); // under 55 %
    assert_eq!(s(10, 6).state, ZoneState::PartialDisruption);
    assert_eq!(s(10, 6).taint_rate, 0.0); // small zone: stopped
    assert_eq!(s(60, 40).taint_rate, 0.01); // large zone: slowed
    assert_eq!(s(4, 4).state, ZoneState::FullDisruption);
    assert_eq!(s(4, 4).taint_rate, 0.1);
    assert_eq!(s(4, 0).taint_rate, 0.1);
}

#[test]
fn new_no_execute_taints_are_paced_per_zone() {
    let nodes = zone_of_nodes(10, 2, "a");
    let plan = run(&nodes, &[], &[], 101);
    let no_execute: Vec<&str> = plan
        .node_updates
        .iter()
        .filter(|u| u.taints.iter().flatten().any(|t| t.effect == NO_EXECUTE))
        .map(|u| u.node.as_str())
        .collect();
    // One node now, the next 10 s later (0.1 node/s); both get NoSchedule.
    assert_eq!(no_execute, ["a-bad-00"]);
    assert_eq!(plan.node_updates.len(), 2);
    assert_eq!(plan.requeue_after, Some(SignedDuration::from_secs(10)));
    let mut later = nodes.clone();
    for u in &plan.node_updates {
        let n = later
            .iter_mut()
            .find(|n| n.metadata.name.as_deref() == Some(u.node.as_str()))
            .unwrap();
        n.spec.as_mut().unwrap().taints = u.taints.clone();
    }
    let plan = run(&later, &[], &[], 110);
    assert!(plan.node_updates.is_empty(), "{plan:?}");
    let plan = run(&later, &[], &[], 111);
    assert_eq!(plan.node_updates.len(), 1);
    assert_eq!(plan.node_updates[0].node, "a-bad-01");
}

#[test]
fn disrupted_zones_hold_new_taints_and_a_full_outage_lifts_them() {
    // A small zone with 6 of 10 not Ready: no new NoExecute taint.
    let plan = run(&zone_of_nodes(4, 6, "a"), &[], &[], 101);
    assert_eq!(plan.zones["a"].state, ZoneState::PartialDisruption);
    assert!(plan.node_updates.iter().all(|u| u
        .taints
        .iter()
        .flatten()
        .all(|t| t.effect == NO_SCHEDULE)));
    assert_eq!(plan.node_updates.len(), 6);
    // Every zone down: the NoExecute taints are lifted, no pod evicted.
    let tainted = |n: Node| with_taints(n, vec![taint(NOT_READY, NO_EXECUTE, 50)]);
    let nodes: Vec<Node> = zone_of_nodes(0, 2, "a")
        .into_iter()
        .chain(zone_of_nodes(0, 1, "b"))
        .map(tainted)
        .collect();
    let pods = [pod("bare", "a-bad-00", vec![])];
    let plan = run(&nodes, &[], &pods, 101);
    assert!(plan.evictions.is_empty(), "{plan:?}");
    assert_eq!(plan.node_updates.len(), 3);
    for u in &plan.node_updates {
        assert_eq!(
            keys(u.taints.as_ref().unwrap()),
            [pair(NOT_READY, NO_SCHEDULE)]
        );
    }
    // One zone still up: the outage is real, the down zone is tainted.
    let mut nodes = nodes;
    nodes.extend(zone_of_nodes(1, 0, "c"));
    let plan = run(&nodes, &[], &pods, 101);
    assert_eq!(plan.evictions.len(), 1);
}

#[test]
fn the_plan_does_not_depend_on_input_order() {
    let mut nodes = zone_of_nodes(10, 3, "a");
    nodes.extend(zone_of_nodes(2, 2, "b"));
    let pods: Vec<Pod> = ["a-bad-00", "a-bad-01", "b-bad-00", "a-ok-00"]
        .iter()
        .enumerate()
        .map(|(i, n)| pod(&format!("p{i}"), n, vec![]))
        .collect();
    let forward = run(&nodes, &[], &pods, 101);
    nodes.reverse();
    let mut rev_pods = pods.clone();
    rev_pods.reverse();
    assert_eq!(run(&nodes, &[], &rev_pods, 101), forward);
    assert!(!forward.node_updates.is_empty() && !forward.evictions.is_empty());
}
