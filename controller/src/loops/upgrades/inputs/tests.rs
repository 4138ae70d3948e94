use super::*;
use serde_json::json;
use sluice_model::operation::{OperationAction, OperationState};

fn pod(name: &str, node: &str, phase: &str, owner: &str, grace: Option<i64>) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o",
                "uid": "u", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c"}],
            "terminationGracePeriodSeconds": grace},
        "status": {"phase": phase}}))
    .expect("a pod")
}

// spec: U1 — what a drain must remove: not DaemonSet pods, not finished
// ones, only on the pool's nodes; each with its grace period.
#[test]
fn a_drain_waits_for_the_pods_a_drain_removes() {
    let pods = [
        pod("web-1", "n1", "Running", "ReplicaSet", Some(60)),
        pod("agent", "n1", "Running", "DaemonSet", None),
        pod("job", "n1", "Succeeded", "Job", None),
        pod("web-2", "n2", "Running", "ReplicaSet", None),
        pod("other", "elsewhere", "Running", "ReplicaSet", None),
    ];
    let nodes: BTreeSet<String> = ["n1".to_string(), "n2".to_string()].into();
    let refs: Vec<&Pod> = pods.iter().collect();
    let by = pods_by_node(&refs, &nodes, &BTreeSet::new(), &[]);
    assert_eq!(by.len(), 2);
    assert_eq!(
        by["n1"],
        [PodOnNode {
            name: "ns/web-1".into(),
            grace: SignedDuration::from_secs(60),
            held_by: None,
            safe_to_evict_false: false,
        }]
    );
    assert_eq!(by["n2"][0].grace, DEFAULT_GRACE);
}

// spec: U5 — the Local Services and the nodes behind them.
#[test]
fn local_services_name_their_serving_nodes() {
    let svc = |name: &str, policy: &str| -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                "ports": [{"port": 80}]}}))
        .expect("a service")
    };
    let slice = |svc: &str, node: &str, ready: bool| -> EndpointSlice {
        serde_json::from_value(json!({"metadata": {"name": format!("{svc}-{node}"),
                "namespace": "ns", "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["198.18.1.1"], "nodeName": node,
                "conditions": {"ready": ready}}]}))
        .expect("a slice")
    };
    let services = [svc("solo", "Local"), svc("web", "Cluster")];
    let slices = [
        slice("solo", "n1", true),
        slice("solo", "n2", false),
        slice("web", "n3", true),
    ];
    let refs: Vec<&EndpointSlice> = slices.iter().collect();
    let locals = local_services(&services, &refs);
    assert_eq!(locals.len(), 1);
    assert_eq!(locals[0].name, "ns/solo");
    assert_eq!(locals[0].nodes, ["n1".to_string()].into());
}

// spec: U6 — a cancelled upgrade with nothing in flight holds nothing; a
// finished one neither; a running one holds every zone until planned.
#[test]
fn only_live_upgrades_hold_their_pool() {
    use sluice_model::operation::{OperationSpec, OperationType};
    let link = format!("{}pool-a", OperationSpec::NODE_POOL_LINK);
    let mut o = Operation::new(
        "op-1",
        OperationSpec::new(OperationType::UpgradeNodes, link),
    );
    assert_eq!(live_upgrade(&o), Some("pool-a"));
    for (state, live) in [
        (OperationState::Running, true),
        (OperationState::Cancelling, true),
        (OperationState::Cancelled, false),
        (OperationState::Done, false),
        (OperationState::RolledBack, false),
    ] {
        o.status.get_or_insert_with(Default::default).status = Some(state);
        assert_eq!(live_upgrade(&o).is_some(), live, "{state:?}");
    }
    // Asked to go on or back: live again.
    for action in [OperationAction::Resume, OperationAction::Rollback] {
        o.status.get_or_insert_with(Default::default).status = Some(OperationState::Cancelled);
        o.spec.action = Some(action);
        assert_eq!(live_upgrade(&o), Some("pool-a"), "{action:?}");
    }
    o.spec.action = Some(OperationAction::Cancel);
    assert_eq!(live_upgrade(&o), None);
    let zones = vec![("zone-a".to_string(), 3), ("zone-b".to_string(), 3)];
    let held = all_zones_held(&o, &zones);
    assert_eq!(held.len(), 2);
    assert!(
        held.values().all(|h| h.extra == 1),
        "maxSurge defaults to 1"
    );
}

// spec: B6 — a cancelled blue-green upgrade still holds both sides of its
// pool, and after a restart every zone is held with room for both.
#[test]
fn a_cancelled_blue_green_upgrade_holds_its_pool() {
    use sluice_model::node_pool::{UpgradeSettings, UpgradeStrategy};
    use sluice_model::operation::{OperationSpec, OperationType};
    let link = format!("{}pool-a", OperationSpec::NODE_POOL_LINK);
    let mut spec = OperationSpec::new(OperationType::UpgradeNodes, link);
    spec.upgrade_settings = Some(UpgradeSettings {
        strategy: Some(UpgradeStrategy::BlueGreen),
        ..Default::default()
    });
    spec.action = Some(OperationAction::Cancel);
    let mut o = Operation::new("op-1", spec);
    o.status.get_or_insert_with(Default::default).status = Some(OperationState::Cancelled);
    assert_eq!(live_upgrade(&o), Some("pool-a"));
    let zones = vec![("zone-a".to_string(), 3), ("zone-b".to_string(), 2)];
    let held = all_zones_held(&o, &zones);
    assert_eq!(held["zone-a"].extra, 3);
    assert_eq!(held["zone-b"].extra, 2);
    o.status.get_or_insert_with(Default::default).status = Some(OperationState::Done);
    assert_eq!(live_upgrade(&o), None);
}

// spec: E6 — a pod on a draining node that its budget holds back is
// named with the budget, as the Eviction API would refuse it.
#[test]
fn a_budget_holding_a_drain_back_is_named() {
    let ready = |name: &str, node: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
                "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}}))
        .expect("a pod")
    };
    let pdb = |min: i32| -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"minAvailable": min, "selector": {"matchLabels": {"app": "web"}}}}))
        .expect("a budget")
    };
    let pods = [ready("web-1", "n1"), ready("web-2", "n2")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let nodes: BTreeSet<String> = ["n1".to_string(), "n2".to_string()].into();
    let draining: BTreeSet<String> = ["n1".to_string()].into();
    let tight = pdb(2);
    let by = pods_by_node(&refs, &nodes, &draining, &[&tight]);
    let why = by["n1"][0].held_by.as_deref().expect("held back");
    assert!(why.contains("ns/web") && why.contains("needs 2"), "{why}");
    assert_eq!(by["n2"][0].held_by, None, "n2 is not draining");
    let loose = pdb(1);
    let by = pods_by_node(&refs, &nodes, &draining, &[&loose]);
    assert_eq!(by["n1"][0].held_by, None, "one disruption to give");
}
