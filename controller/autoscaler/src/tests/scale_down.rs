//! Scale-down: thresholds per profile, each blocker, limits, parallelism,
//! upgrades.

use serde_json::{json, Value};
use sluice_model::cluster::AutoscalingProfile;
use sluice_model::k8s::Node;
use sluice_model::node_pool::ScalingRules;
use sluice_model::operation::BlueGreenPhase;

use super::*;
use crate::blockers::BlockingReason;
use crate::scale_down::Unremovable;

/// Pool `p` in zone `a`: `big` (8 cpu, 4.1 used: above both thresholds'
/// reach once its pod would have to move) that takes
/// moved pods, and `small` with one pod of `cpu`.
fn two_nodes(cpu: &str) -> World {
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("big", "p", "a", "8", "32Gi"));
    w.pods.push(running("keep", "keep", "big", "4100m", "1Gi"));
    w.nodes.push(node("small", "p", "a", "4", "16Gi"));
    w.pods.push(running("mover", "mover", "small", cpu, "1Gi"));
    w
}

/// Runs decisions at the given seconds, carrying the state.
fn run(w: &World, times: &[i64]) -> Vec<Decision> {
    let mut state = State::default();
    let mut out = Vec::new();
    for &t in times {
        let d = w.decide(&state, at(t));
        state = d.state.clone();
        out.push(d);
    }
    out
}

fn kept(d: &Decision, node: &str) -> Option<Unremovable> {
    d.nodes[node].kept.clone()
}

fn blocked_by(d: &Decision, node: &str) -> Option<BlockingReason> {
    match kept(d, node) {
        Some(Unremovable::BlockedByPod(b)) => Some(b.reason),
        _ => None,
    }
}

#[test]
fn thresholds_and_unneeded_times_per_profile() {
    // spec: C4, C9 — balanced: at most 0.5, for 10 minutes; optimize-
    // utilization: at most 0.7, for 5 minutes.
    let table = [
        // (pod cpu on a 4-cpu node, profile, candidate, removed after)
        ("2", None, true, 10 * MIN),
        ("2100m", None, false, 0),
        (
            "2800m",
            Some(AutoscalingProfile::OptimizeUtilization),
            true,
            5 * MIN,
        ),
        (
            "2900m",
            Some(AutoscalingProfile::OptimizeUtilization),
            false,
            0,
        ),
        ("1", Some(AutoscalingProfile::Balanced), true, 10 * MIN),
    ];
    for (cpu, profile, candidate, after) in table {
        let mut w = two_nodes(cpu);
        w.profile = profile;
        let ds = run(&w, &[0, after - 1, after]);
        if !candidate {
            assert_eq!(
                kept(&ds[0], "small"),
                Some(Unremovable::NotUnderutilized),
                "{cpu} {profile:?}"
            );
            continue;
        }
        assert_eq!(
            ds[0].nodes["small"].unneeded_since,
            Some(t0()),
            "{cpu} {profile:?}"
        );
        assert_eq!(
            kept(&ds[1], "small"),
            Some(Unremovable::NotUnneededLongEnough),
            "{cpu} {profile:?}"
        );
        assert_eq!(
            ds[1].nodes["small"].unneeded_left,
            Some(SignedDuration::from_secs(1))
        );
        assert!(ds[1].removals.is_empty());
        assert_eq!(ds[2].removals.len(), 1, "{cpu} {profile:?}");
        let r = &ds[2].removals[0];
        assert_eq!((r.node.as_str(), r.empty), ("small", false));
        assert_eq!(r.evict, ["default/mover"]);
    }
}

#[test]
fn utilisation_is_the_larger_share_with_daemon_sets_counted() {
    // spec: C2, C4 — requests over allocatable, cpu or memory, whichever is
    // larger, DaemonSet pods included.
    let mut w = two_nodes("1");
    w.pods[1]["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("12Gi");
    let d = w.decide(&State::default(), t0());
    assert_eq!(kept(&d, "small"), Some(Unremovable::NotUnderutilized));
    let u = d.nodes["small"].utilization.unwrap();
    assert!(
        (u.cpu - 0.25).abs() < 1e-9 && (u.memory - 0.75).abs() < 1e-9,
        "{u:?}"
    );
    let mut w = two_nodes("1");
    let mut ds = running("ds", "ds", "small", "2", "10Mi");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    w.pods.push(ds);
    let d = w.decide(&State::default(), t0());
    assert_eq!(kept(&d, "small"), Some(Unremovable::NotUnderutilized));
    // A node running only a DaemonSet pod is empty: nothing to move.
    let mut w = two_nodes("1");
    w.pods.remove(1);
    let mut ds = running("ds", "ds", "small", "1", "10Mi");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    w.pods.push(ds);
    let ds = run(&w, &[0, 10 * MIN]);
    assert!(ds[1].removals[0].empty);
    assert!(ds[1]
        .events
        .iter()
        .any(|e| e.message == "Scale-down: removing empty node \"small\""));
}

#[test]
fn each_blocking_pod_is_named_with_upstreams_reason() {
    // spec: C5 — per pod, upstream's reason names.
    let young = "2025-12-31T23:50:00Z";
    type Edit = Box<dyn Fn(Value) -> Value>;
    let cases: Vec<(&str, Edit, Option<BlockingReason>)> = vec![
        (
            "no controller",
            Box::new(|p: Value| set(p, &["metadata", "ownerReferences"], json!(null))),
            Some(BlockingReason::NotReplicated),
        ),
        (
            "custom controller",
            Box::new(|p: Value| {
                set(
                    p,
                    &["metadata", "ownerReferences", "0", "kind"],
                    json!("Thing"),
                )
            }),
            Some(BlockingReason::NotReplicated),
        ),
        (
            "safe-to-evict false",
            Box::new(|p| annotate(p, "cluster-autoscaler.kubernetes.io/safe-to-evict", "false")),
            Some(BlockingReason::NotSafeToEvictAnnotation),
        ),
        (
            "safe-to-evict true overrides no controller",
            Box::new(|p| {
                annotate(
                    set(p, &["metadata", "ownerReferences"], json!(null)),
                    "cluster-autoscaler.kubernetes.io/safe-to-evict",
                    "true",
                )
            }),
            None,
        ),
        (
            "young kube-system pod",
            Box::new(move |p| {
                set(
                    set(p, &["metadata", "namespace"], json!("kube-system")),
                    &["status", "startTime"],
                    json!(young),
                )
            }),
            Some(BlockingReason::UnmovableKubeSystemPod),
        ),
        (
            "kube-system pod older than an hour",
            Box::new(|p| set(p, &["metadata", "namespace"], json!("kube-system"))),
            None,
        ),
        (
            "StatefulSet pod",
            Box::new(|p| {
                set(
                    p,
                    &["metadata", "ownerReferences", "0", "kind"],
                    json!("StatefulSet"),
                )
            }),
            None,
        ),
        (
            "hostPath, local storage not blocking (GKE ≥ 1.22)",
            Box::new(|p| {
                set(
                    p,
                    &["spec", "volumes"],
                    json!([{"name": "h", "hostPath": {"path": "/x"}}]),
                )
            }),
            None,
        ),
    ];
    for (what, edit, want) in cases {
        let mut w = two_nodes("1");
        w.pods[1] = edit(w.pods[1].clone());
        let d = w.decide(&State::default(), t0());
        assert_eq!(blocked_by(&d, "small"), want, "{what}");
        if want.is_none() {
            assert_eq!(d.nodes["small"].unneeded_since, Some(t0()), "{what}");
        }
    }
}

#[test]
fn local_storage_blocks_where_the_option_says_so() {
    // spec: C5 — local storage blocks only for control planes before 1.22.
    let mut w = two_nodes("1");
    w.options.local_storage_blocks = true;
    let base = w.pods[1].clone();
    w.pods[1] = set(
        base.clone(),
        &["spec", "volumes"],
        json!([{"name": "scratch", "emptyDir": {}}]),
    );
    let d = w.decide(&State::default(), t0());
    assert_eq!(
        blocked_by(&d, "small"),
        Some(BlockingReason::LocalStorageRequested)
    );
    w.pods[1] = set(
        base.clone(),
        &["spec", "volumes"],
        json!([{"name": "m", "emptyDir": {"medium": "Memory"}}]),
    );
    assert_eq!(
        blocked_by(&w.decide(&State::default(), t0()), "small"),
        None
    );
    let listed = set(
        base,
        &["spec", "volumes"],
        json!([{"name": "scratch", "emptyDir": {}}]),
    );
    w.pods[1] = annotate(
        listed,
        "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes",
        "scratch",
    );
    assert_eq!(
        blocked_by(&w.decide(&State::default(), t0()), "small"),
        None
    );
}

#[test]
fn a_budget_with_no_disruption_left_blocks_and_is_named() {
    // spec: C5 — a PodDisruptionBudget an eviction would break.
    let mut w = two_nodes("1");
    w.pdbs.push(json!({
        "metadata": {"name": "mover-pdb", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "mover"}}},
    }));
    let d = w.decide(&State::default(), t0());
    match kept(&d, "small") {
        Some(Unremovable::BlockedByPod(b)) => {
            assert_eq!(b.reason, BlockingReason::NotEnoughPdb);
            assert_eq!(b.budget.as_deref(), Some("mover-pdb"));
            assert_eq!(b.pod, "default/mover");
        }
        other => panic!("{other:?}"),
    }
    let text = crate::explain::node(&d, "small").unwrap();
    assert!(
        text.contains("NotEnoughPdb") && text.contains("mover-pdb"),
        "{text}"
    );
    // One disruption allowed: the node may go.
    w.pdbs[0]["spec"]["maxUnavailable"] = json!(1);
    let d = w.decide(&State::default(), t0());
    assert_eq!(kept(&d, "small"), Some(Unremovable::NotUnneededLongEnough));
}

#[test]
fn two_nodes_never_spend_one_budgets_last_disruption() {
    // spec: C5 — the budget's disruptions are spent node by node.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("big", "p", "a", "16", "64Gi"));
    w.pods.push(running("keep", "keep", "big", "8", "1Gi"));
    for n in ["s1", "s2"] {
        w.nodes.push(node(n, "p", "a", "4", "16Gi"));
        w.pods
            .push(running(&format!("{n}-web"), "web", n, "1", "1Gi"));
    }
    w.pdbs.push(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }));
    let d = w.decide(&State::default(), t0());
    let blocked = ["s1", "s2"]
        .iter()
        .filter(|n| blocked_by(&d, n) == Some(BlockingReason::NotEnoughPdb))
        .count();
    assert_eq!(blocked, 1);
}

#[test]
fn safe_to_evict_false_protects_per_pool_kind() {
    // spec: E5 — Standard: blocks scale-down for good.
    // spec: E2 — Autopilot: for 7 days from the pod's start.
    // spec: E3 — not for spot pods.
    use sluice_model::policy::eviction::PoolKind;
    let started = "2025-12-30T00:00:00Z"; // 2 days before t0
    let make = |kind, spot: bool| {
        let mut w = two_nodes("1");
        w.pods[1] = set(
            annotate(
                w.pods[1].clone(),
                "cluster-autoscaler.kubernetes.io/safe-to-evict",
                "false",
            ),
            &["status", "startTime"],
            json!(started),
        );
        w.pools[0]["spec"]["config"]["spot"] = json!(spot);
        w.extras.insert(
            "p".into(),
            PoolExtras {
                kind,
                ..Default::default()
            },
        );
        w
    };
    let w = make(PoolKind::Standard, false);
    for days in [0, 30] {
        let d = w.decide(&State::default(), at(days * 86_400));
        assert_eq!(
            blocked_by(&d, "small"),
            Some(BlockingReason::NotSafeToEvictAnnotation),
            "day {days}"
        );
    }
    let w = make(PoolKind::Autopilot, false);
    let d = w.decide(&State::default(), at(5 * 86_400 - 1));
    match kept(&d, "small") {
        Some(Unremovable::BlockedByPod(b)) => {
            assert_eq!(b.reason, BlockingReason::NotSafeToEvictAnnotation);
            assert_eq!(b.until, Some(at(5 * 86_400)));
        }
        other => panic!("{other:?}"),
    }
    let d = w.decide(&State::default(), at(5 * 86_400));
    assert_eq!(blocked_by(&d, "small"), None);
    let w = make(PoolKind::Autopilot, true);
    let d = w.decide(&State::default(), t0());
    assert_eq!(blocked_by(&d, "small"), None);
}

#[test]
fn scale_down_disabled_and_upgrading_nodes_are_never_candidates() {
    // spec: C5 — the node annotation scale-down-disabled.
    let mut w = two_nodes("1");
    w.nodes[1] = annotate(
        w.nodes[1].clone(),
        "cluster-autoscaler.kubernetes.io/scale-down-disabled",
        "true",
    );
    let d = w.decide(&State::default(), t0());
    assert_eq!(
        kept(&d, "small"),
        Some(Unremovable::ScaleDownDisabledAnnotation)
    );
    // spec: U7, C12 — a node being upgraded is left alone.
    let mut w = two_nodes("1");
    w.nodes[1] = annotate(
        w.nodes[1].clone(),
        sluice_upgrades::UPGRADING_ANNOTATION,
        "op-1",
    );
    let d = w.decide(&State::default(), t0());
    assert_eq!(kept(&d, "small"), Some(Unremovable::Upgrading));
    assert_eq!(
        crate::snapshot::UPGRADING_ANNOTATION,
        sluice_upgrades::UPGRADING_ANNOTATION
    );
}

#[test]
fn pods_that_fit_nowhere_else_keep_their_node() {
    // spec: C4, C5 — a pod pinned to its node has no place to go.
    let mut w = two_nodes("1");
    w.pods[1] = set(
        w.pods[1].clone(),
        &["spec", "nodeSelector"],
        json!({"kubernetes.io/hostname": "small"}),
    );
    let d = w.decide(&State::default(), t0());
    match kept(&d, "small") {
        Some(Unremovable::NoPlaceToMovePods { pod, why }) => {
            assert_eq!(pod, "default/mover");
            assert!(
                why.contains("node(s) didn't match Pod's node affinity/selector"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Required anti-affinity against the pod already on `big`.
    let mut w = two_nodes("1");
    w.pods[1] = set(
        w.pods[1].clone(),
        &["spec", "affinity"],
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "keep"}}, "topologyKey": "kubernetes.io/hostname"}]}}),
    );
    let d = w.decide(&State::default(), t0());
    assert!(matches!(
        kept(&d, "small"),
        Some(Unremovable::NoPlaceToMovePods { .. })
    ));
}

#[test]
fn minimums_hold_per_zone_and_in_total() {
    // spec: C1, C6 — never below min; below min no scale-down.
    let mut w = World::default();
    w.pools.push(pool("p", &["a", "b"], "4", "16Gi", 1, 10));
    w.nodes.push(node("a1", "p", "a", "4", "16Gi"));
    w.nodes.push(node("b1", "p", "b", "4", "16Gi"));
    w.nodes.push(node("b2", "p", "b", "4", "16Gi"));
    let ds = run(&w, &[0, 10 * MIN]);
    assert_eq!(
        kept(&ds[1], "a1"),
        Some(Unremovable::NodeGroupMinSizeReached)
    );
    let removed: Vec<&str> = ds[1].removals.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(removed[0].starts_with('b'));
    // In total: at least 2 over both zones, three empty nodes: one goes.
    w.pools[0]["spec"]["autoscaling"] =
        json!({"enabled": true, "totalMinNodeCount": 2, "totalMaxNodeCount": 10});
    let ds = run(&w, &[0, 10 * MIN]);
    assert_eq!(ds[1].removals.len(), 1);
    let min_reached = ds[1]
        .nodes
        .values()
        .filter(|o| o.kept == Some(Unremovable::NodeGroupMinSizeReached))
        .count();
    assert_eq!(min_reached, 2);
}

#[test]
fn never_the_whole_cluster_to_zero() {
    // spec: C7 — the last node stays even with min 0.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("only", "p", "a", "4", "16Gi"));
    let ds = run(&w, &[0, 10 * MIN]);
    assert!(ds[1].removals.is_empty());
    assert_eq!(kept(&ds[1], "only"), Some(Unremovable::LastNodeInCluster));
    // Two empty nodes: one goes, one stays.
    w.nodes.push(node("second", "p", "a", "4", "16Gi"));
    let ds = run(&w, &[0, 10 * MIN]);
    assert_eq!(ds[1].removals.len(), 1);
}

#[test]
fn empty_nodes_go_ten_at_a_time_and_nodes_with_pods_one_at_a_time() {
    // spec: C4 — removal parallelism.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 20));
    w.nodes.push(node("big", "p", "a", "64", "256Gi"));
    w.pods.push(running("keep", "keep", "big", "33", "1Gi"));
    for i in 0..12 {
        w.nodes
            .push(node(&format!("e{i:02}"), "p", "a", "4", "16Gi"));
    }
    let ds = run(&w, &[0, 10 * MIN]);
    assert_eq!(ds[1].removals.len(), 10);
    assert!(ds[1].removals.iter().all(|r| r.empty));
    assert_eq!(
        ds[1]
            .nodes
            .values()
            .filter(|o| o.kept == Some(Unremovable::WaitingForRemovalSlot))
            .count(),
        2
    );
    // Removals in flight count against the budget.
    let d = w.decide(&ds[1].state, at(10 * MIN + 10));
    assert_eq!(d.removals.len(), 0);
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 20));
    w.nodes.push(node("big", "p", "a", "64", "256Gi"));
    w.pods.push(running("keep", "keep", "big", "33", "1Gi"));
    for i in 0..3 {
        let n = format!("s{i}");
        w.nodes.push(node(&n, "p", "a", "4", "16Gi"));
        w.pods
            .push(running(&format!("{n}-pod"), "small", &n, "1", "1Gi"));
    }
    let ds = run(&w, &[0, 10 * MIN]);
    assert_eq!(ds[1].removals.len(), 1);
    assert!(!ds[1].removals[0].empty);
    let taint = ds[1]
        .taints
        .iter()
        .find(|t| matches!(t, crate::TaintChange::Add { cordon: true, .. }));
    assert!(taint.is_some(), "{:?}", ds[1].taints);
}

#[test]
fn removals_taint_and_stale_taints_are_lifted() {
    // spec: C4 — the node is tainted ToBeDeletedByClusterAutoscaler and
    // cordoned; a leftover taint without a removal is lifted.
    let w = two_nodes("1");
    let ds = run(&w, &[0, 10 * MIN]);
    let adds: Vec<&crate::TaintChange> = ds[1].taints.iter().collect();
    assert!(adds.iter().any(|t| matches!(t, crate::TaintChange::Add { node, taint, cordon: true }
        if node == "small" && taint.key == "ToBeDeletedByClusterAutoscaler" && taint.effect == "NoSchedule")));
    assert!(ds[1]
        .events
        .iter()
        .any(|e| e.reason == "ScaleDown"
            && e.message == "marked the node as toBeDeleted/unschedulable"));
    // The soft taint marked it while it waited.
    assert!(ds[0].taints.iter().any(|t| matches!(t, crate::TaintChange::Add { node, taint, cordon: false }
        if node == "small" && taint.key == "DeletionCandidateOfClusterAutoscaler" && taint.effect == "PreferNoSchedule")));
    let mut w = two_nodes("1");
    w.nodes[1]["spec"]["taints"] =
        json!([{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]);
    let d = w.decide(&State::default(), t0());
    let lifted = |d: &crate::Decision| {
        d.taints.iter().any(
            |t| matches!(t, crate::TaintChange::Remove { node, uncordon: true, .. } if node == "small"),
        )
    };
    assert!(lifted(&d));
    // Upstream lifts leftovers once, at its first loop: a taint that
    // appears later is someone else's, and the node stays out (not a
    // candidate either).
    let later = w.decide(&d.state, at(10));
    assert!(!lifted(&later), "{:?}", later.taints);
    assert_eq!(
        later.nodes["small"].kept,
        Some(crate::Unremovable::CurrentlyBeingDeleted)
    );
    // A removal that failed is given back at the next decision, once.
    let mut failed = later.state.clone();
    failed.removal_failed("small", at(20));
    let next = w.decide(&failed, at(30));
    assert!(lifted(&next), "{:?}", next.taints);
    assert!(!lifted(&w.decide(&next.state, at(40))));
    // A restarted controller reads its memory back and cleans again.
    let json = serde_json::to_value(&next.state).expect("state");
    let back: State = serde_json::from_value(json).expect("state");
    assert!(lifted(&w.decide(&back, at(50))));
}

/// A pool `p` mid blue-green upgrade: `blue` holds the old nodes, both
/// empty; the rules as the upgrade loop publishes them.
fn blue_green(phase: BlueGreenPhase, autoscaled: bool) -> World {
    let (blue, green): (ScalingRules, ScalingRules) =
        sluice_upgrades::scaling_rules::blue_green(Some(phase), autoscaled);
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 2, 10));
    w.pools[0]["status"] = json!({"updateInfo": {"blueGreenInfo": {
        "phase": serde_json::to_value(phase).unwrap(),
        "blueNodes": ["blue-1", "blue-2"], "greenNodes": ["green-1"],
        "blueAutoscaling": serde_json::to_value(blue).unwrap(),
        "greenAutoscaling": serde_json::to_value(green).unwrap(),
    }}});
    w.nodes.push(node("keeper", "other", "a", "100m", "100Mi"));
    for n in ["blue-1", "blue-2", "green-1"] {
        w.nodes.push(node(n, "p", "a", "4", "16Gi"));
    }
    w
}

#[test]
fn the_upgrade_table_decides_what_each_side_may_do() {
    // spec: C12, B1–B6, A1 — the blue-green table, read from the pool's
    // status as the upgrade loop publishes it (sluice-upgrades' own rules).
    use BlueGreenPhase as P;
    let table = [
        // (phase, autoscaled, pool may grow, blue may shrink, green may shrink)
        (P::CreatingGreenPool, false, true, false, false),
        (P::DrainingBluePool, false, true, false, false),
        (P::NodePoolSoaking, false, true, false, true),
        (P::RollbackStarted, false, true, false, false),
        (P::WaitingToDrainBluePool, true, true, true, true),
        (P::DrainingBluePool, true, true, false, true),
    ];
    for (phase, autoscaled, grows, blue_down, green_down) in table {
        let mut w = blue_green(phase, autoscaled);
        let ds = run(&w, &[0, 10 * MIN]);
        let forbidden = |n: &str| kept(&ds[0], n) == Some(Unremovable::UpgradeForbidsScaleDown);
        assert_eq!(!forbidden("blue-1"), blue_down, "{phase:?} {autoscaled}");
        assert_eq!(!forbidden("green-1"), green_down, "{phase:?} {autoscaled}");
        for n in ["blue-1", "blue-2", "green-1"] {
            w.pods
                .push(running(&format!("{n}-fill"), "fill", n, "4", "1Gi"));
        }
        w.pods.push(pending("w", "w", "4", "1Gi"));
        let d = w.decide(&State::default(), t0());
        assert_eq!(!d.targets.is_empty(), grows, "{phase:?} {autoscaled}");
    }
    // spec: A1 — while an autoscaled upgrade waits, blue shrinks past the
    // pool's minimum (2), to zero, while green keeps it.
    let w = blue_green(P::WaitingToDrainBluePool, true);
    let ds = run(&w, &[0, 10 * MIN]);
    let removed: Vec<&str> = ds[1].removals.iter().map(|r| r.node.as_str()).collect();
    assert_eq!(removed, ["blue-1", "blue-2"]);
    // spec: B1 — standard blue-green in phase 1: green grows, blue never.
    let (blue, green) =
        sluice_upgrades::scaling_rules::blue_green(Some(P::CreatingGreenPool), false);
    assert!(!blue.scale_up && green.scale_up);
}

#[test]
fn the_node_explanation_and_annotations_name_the_reason() {
    // The explain command and the node's annotations read the same answer.
    let mut w = two_nodes("1");
    w.pods[1] = annotate(
        w.pods[1].clone(),
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
        "false",
    );
    let d = w.decide(&State::default(), t0());
    let text = crate::explain::node(&d, "small").unwrap();
    assert!(text.contains("utilization: cpu 0.25"), "{text}");
    assert!(
        text.contains("BlockedByPod: pod default/mover (NotSafeToEvictAnnotation)"),
        "{text}"
    );
    let ann = crate::explain::node_annotations(&d.nodes["small"]);
    assert!(ann[crate::explain::SCALE_DOWN_REASON_ANNOTATION].contains("NotSafeToEvictAnnotation"));
    // For scripts: the blocking pod and its reason, by name.
    let v = crate::explain::node_json(&d, "small").unwrap();
    assert_eq!(v["reason"], "BlockedByPod");
    assert_eq!(v["blockingPod"]["pod"], "default/mover");
    assert_eq!(v["blockingPod"]["reason"], "NotSafeToEvictAnnotation");
    assert_eq!(v["removed"], false);
}

#[test]
fn node_annotations_are_written_only_when_the_reasons_change() {
    // spec: C5 — the reasons on the node, as a merge patch of what
    // changed; none when they already say it, removal when they no longer
    // apply.
    use crate::explain::{annotation_patch, SCALE_DOWN_REASON_ANNOTATION as WHY};
    let mut w = two_nodes("1");
    w.pods[1] = annotate(
        w.pods[1].clone(),
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
        "false",
    );
    let d = w.decide(&State::default(), t0());
    let o = &d.nodes["small"];
    let bare: Node = serde_json::from_value(w.nodes[1].clone()).unwrap();
    let patch = annotation_patch(&bare, Some(o)).expect("first write");
    let written = &patch["metadata"]["annotations"];
    assert!(written[WHY]
        .as_str()
        .unwrap()
        .contains("pod default/mover (NotSafeToEvictAnnotation)"));
    // Applied, the same answer writes nothing.
    let mut node = w.nodes[1].clone();
    for (k, v) in written.as_object().unwrap() {
        node = annotate(node, k, v.as_str().unwrap());
    }
    let annotated: Node = serde_json::from_value(node).unwrap();
    assert_eq!(annotation_patch(&annotated, Some(o)), None);
    // No answer any more: every one of them goes, and nothing else.
    let gone = annotation_patch(&annotated, None).expect("removal");
    let keys = gone["metadata"]["annotations"].as_object().unwrap();
    assert!(keys.values().all(Value::is_null));
    assert!(keys.contains_key(WHY));
    assert!(!keys.contains_key("cluster-autoscaler.kubernetes.io/safe-to-evict"));
}

#[test]
fn the_simulation_says_what_would_go_and_why() {
    // spec: C4 — a dry run lists the removal the loop would start, from
    // the same decision, once the node has been unneeded long enough.
    let w = two_nodes("500m");
    let ds = run(&w, &[0, 10 * MIN]);
    let text = crate::explain::simulation(&ds[1]);
    assert!(
        text.contains("would remove: node small (pool p, zone a)"),
        "{text}"
    );
    assert!(text.contains("would add: nothing"), "{text}");
    let v = crate::explain::simulation_json(&ds[1]);
    assert_eq!(v["removals"][0]["node"], "small");
    assert_eq!(v["nodes"]["big"]["removed"], false);
}
