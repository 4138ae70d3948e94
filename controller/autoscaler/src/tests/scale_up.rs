//! Scale-up: packing, reasons, limits, zones, TPU slices, priorities.

use serde_json::json;

use super::*;
use crate::scale_up::{PodVerdict, ScaleUpResult};
use crate::{Event, EventType, PoolExtras, TpuSlice};

fn with_init(v: Value, cpu: &str) -> Value {
    set(
        v,
        &["spec", "initContainers"],
        json!([{"name": "init", "resources": {"requests": {"cpu": cpu}}}]),
    )
}

/// A node of `pool` that is full (one pod takes all its cpu).
fn full_node(w: &mut World, name: &str, pool: &str, zone: &str) {
    w.nodes.push(node(name, pool, zone, "4", "16Gi"));
    w.pods.push(running(
        &format!("{name}-filler"),
        "filler",
        name,
        "4",
        "1Gi",
    ));
}

#[test]
fn packs_mixed_sizes_first_fit_decreasing_with_init_containers_from_zero() {
    // spec: C2 — the init container's 3 cpu outweighs the 1 cpu of the app
    // container, so each of those pods takes 3 of a node's 4 cpu.
    // spec: C3, C7 — all nodes asked at once, from a pool at zero.
    let mut w = World::default();
    w.pools.push(pool("p", &["z1"], "4", "16Gi", 0, 10));
    for i in 0..3 {
        w.pods.push(pending(&format!("a{i}"), "a", "2", "1Gi"));
    }
    for i in 0..2 {
        w.pods
            .push(with_init(pending(&format!("b{i}"), "b", "1", "1Gi"), "3"));
    }
    let d = w.decide(&State::default(), t0());
    assert_eq!(d.scale_up, ScaleUpResult::Successful);
    // b0, b1 on a node each (3 of 4 cpu); a0 cannot join them (1 cpu
    // left), a0+a1 share a node, a2 a fourth. Without the init rule two
    // nodes would do.
    assert_eq!(World::targets(&d), sizes(&[("p/z1", 4)]));
    let triggered: Vec<&Event> = d
        .events
        .iter()
        .filter(|e| e.reason == "TriggeredScaleUp")
        .collect();
    assert_eq!(triggered.len(), 5);
    assert_eq!(
        triggered[0].message,
        "pod triggered scale-up: [{p/z1 0->4 (max: 10)}]"
    );
    let scaled: Vec<&Event> = d
        .events
        .iter()
        .filter(|e| e.reason == "ScaledUpGroup")
        .collect();
    assert_eq!(scaled.len(), 1);
    assert_eq!(
        scaled[0].message,
        "Scale-up: setting group p/z1 size to 4 instead of 0 (max: 10)"
    );
    assert_eq!(d.state.scale_ups.len(), 1);
    assert_eq!(d.state.last_scale_up, Some(t0()));
}

#[test]
fn equivalent_pods_are_grouped_and_distinct_specs_are_not() {
    // spec: C3 — pods of one controller with the same spec form one group,
    // whatever their env; another request is another group.
    let pods: Vec<Pod> = [
        pending("x0", "x", "1", "1Gi"),
        set(
            pending("x1", "x", "1", "1Gi"),
            &["spec", "containers", "0", "env"],
            json!(null),
        ),
        pending("x2", "x", "2", "1Gi"),
        pending("y0", "y", "1", "1Gi"),
    ]
    .iter()
    .map(|v| serde_json::from_value(v.clone()).unwrap())
    .collect();
    let mut pods = pods;
    pods[1].spec.as_mut().unwrap().containers[0].env =
        Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "ID".into(),
            value: Some("1".into()),
            value_from: None,
        }]);
    let groups = crate::equivalence::group(&pods, &[0, 1, 2, 3]);
    let got: Vec<Vec<usize>> = groups.into_iter().map(|g| g.pods).collect();
    assert_eq!(got, vec![vec![0, 1], vec![2], vec![3]]);
}

#[test]
fn not_triggered_names_each_pool_reason_in_upstreams_words() {
    // spec: C6 — a pool at its maximum does not grow; the message counts
    // the pools per reason, as upstream's NotTriggerScaleUp.
    let mut w = World::default();
    let ssd = json!({"disk": "ssd"});
    w.pools.push(set(
        pool("ssd", &["z1"], "4", "16Gi", 0, 1),
        &["spec", "config", "labels"],
        ssd,
    ));
    full_node(&mut w, "ssd-1", "ssd", "z1");
    w.pools.push(pool("b", &["z1"], "4", "16Gi", 0, 5));
    w.pools.push(pool("c", &["z1"], "4", "16Gi", 0, 5));
    w.pods.push(set(
        pending("web-0", "web", "1", "1Gi"),
        &["spec", "nodeSelector"],
        json!({"disk": "ssd"}),
    ));
    let d = w.decide(&State::default(), t0());
    assert_eq!(d.scale_up, ScaleUpResult::NoOptionsAvailable);
    assert!(d.targets.is_empty());
    let e = d
        .events
        .iter()
        .find(|e| e.reason == "NotTriggerScaleUp")
        .expect("event");
    assert_eq!(
        e.message,
        "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's node affinity/selector"
    );
    assert_eq!(e.type_, EventType::Normal);
    let o = &d.pods["default/web-0"];
    assert_eq!(o.per_group["ssd/z1"], "max node group size reached");
    assert_eq!(
        o.per_group["b/z1"],
        "node(s) didn't match Pod's node affinity/selector"
    );
    let text = crate::explain::pod(&d, "default/web-0").unwrap();
    assert!(text.contains("c/z1: node(s) didn't match"), "{text}");
}

#[test]
fn pods_below_priority_minus_ten_never_trigger_a_scale_up() {
    // spec: C11 — priority −11 is expendable; −10 is not.
    for (prio, grows) in [(-11, false), (-10, true), (0, true)] {
        let mut w = World::default();
        w.pools.push(pool("p", &["z1"], "4", "16Gi", 0, 5));
        w.pods.push(set(
            pending("w", "w", "1", "1Gi"),
            &["spec", "priority"],
            json!(prio),
        ));
        let d = w.decide(&State::default(), t0());
        assert_eq!(!d.targets.is_empty(), grows, "priority {prio}");
        if !grows {
            assert_eq!(d.pods["default/w"].verdict, PodVerdict::Expendable);
        }
    }
}

#[test]
fn balanced_spreads_over_three_zones_and_any_takes_one() {
    // spec: C8 — BALANCED evens the zones on scale-up: sizes 2, 0, 1 and
    // six whole-node pods end at 3, 3, 3.
    let mut w = World::default();
    w.pools
        .push(pool("p", &["a", "b", "c"], "4", "16Gi", 0, 10));
    full_node(&mut w, "a1", "p", "a");
    full_node(&mut w, "a2", "p", "a");
    full_node(&mut w, "c1", "p", "c");
    for i in 0..6 {
        w.pods.push(pending(&format!("big{i}"), "big", "4", "1Gi"));
    }
    let d = w.decide(&State::default(), t0());
    assert_eq!(
        World::targets(&d),
        sizes(&[("p/a", 3), ("p/b", 3), ("p/c", 3)])
    );
    // spec: C8 — ANY (the default for spot) puts them all in one zone.
    w.pools[0] = set(w.pools[0].clone(), &["spec", "config", "spot"], json!(true));
    let d = w.decide(&State::default(), t0());
    let t = World::targets(&d);
    assert_eq!(t.len(), 1, "{t:?}");
    let (zone, to) = t.iter().next().unwrap();
    let before = match zone.as_str() {
        "p/a" => 2,
        "p/c" => 1,
        _ => 0,
    };
    assert_eq!(to - before, 6, "{t:?}");
}

#[test]
fn balance_leaves_out_zones_the_pods_cannot_use() {
    // spec: C8 — only zones that take the same pods share the scale-up.
    let mut w = World::default();
    w.pools
        .push(pool("p", &["a", "b", "c"], "4", "16Gi", 0, 10));
    for i in 0..4 {
        w.pods.push(set(
            pending(&format!("za{i}"), "za", "4", "1Gi"),
            &["spec", "nodeSelector"],
            json!({"topology.kubernetes.io/zone": "a"}),
        ));
    }
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 4)]));
}

#[test]
fn per_zone_and_total_maximums_cap_the_scale_up() {
    // spec: C1 — per zone: max 3, one node there, five whole-node pods.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 3));
    full_node(&mut w, "a1", "p", "a");
    for i in 0..5 {
        w.pods.push(pending(&format!("big{i}"), "big", "4", "1Gi"));
    }
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 3)]));
    let left = d
        .pods
        .values()
        .filter(|o| matches!(o.verdict, PodVerdict::NotTriggered { .. }))
        .count();
    assert_eq!(left, 3);
    // spec: C1 — in total: at most 4 over two zones of one node each.
    let mut w = World::default();
    let mut p = pool("p", &["a", "b"], "4", "16Gi", 0, 0);
    p["spec"]["autoscaling"] =
        json!({"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 4});
    w.pools.push(p);
    full_node(&mut w, "a1", "p", "a");
    full_node(&mut w, "b1", "p", "b");
    for i in 0..6 {
        w.pods.push(pending(&format!("big{i}"), "big", "4", "1Gi"));
    }
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 2), ("p/b", 2)]));
}

#[test]
fn above_its_maximum_a_pool_does_not_grow() {
    // spec: C6 — over max (a user resized it): no scale-up.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 1));
    full_node(&mut w, "a1", "p", "a");
    full_node(&mut w, "a2", "p", "a");
    w.pods.push(pending("big", "big", "4", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    assert_eq!(
        d.pods["default/big"].verdict,
        PodVerdict::NotTriggered {
            reasons: "1 max node group size reached".into()
        }
    );
}

#[test]
fn mixed_or_inverted_limits_turn_the_pool_off_and_are_reported() {
    // Bad input is named by field, and never stops the decision.
    let mut w = World::default();
    let mut p = pool("p", &["a"], "4", "16Gi", 3, 1);
    p["spec"]["autoscaling"]["totalMaxNodeCount"] = json!(null);
    w.pools.push(p);
    w.pods.push(pending("big", "big", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
    assert_eq!(d.errors[0].field, "spec.autoscaling.minNodeCount");
}

#[test]
fn the_cluster_never_exceeds_its_node_limit() {
    // spec: C11 — the cap (15 000 by default) counts nodes and nodes coming.
    let mut w = World::default();
    w.options.max_nodes_total = 3;
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    for i in 0..3 {
        full_node(&mut w, &format!("n{i}"), "p", "a");
    }
    w.pods.push(pending("big", "big", "4", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(d.scale_up, ScaleUpResult::LimitedByMaxNodesTotal);
    assert!(d.targets.is_empty());
    assert_eq!(
        d.pods["default/big"].verdict,
        PodVerdict::NotTriggered {
            reasons: "max total nodes in cluster reached".into()
        }
    );
    assert!(d.events.iter().any(|e| e.reason == "MaxNodesTotalReached"
        && e.message == "Max total nodes in cluster reached: 3"));
    // One below the cap: one node of the three wanted.
    w.options.max_nodes_total = 4;
    w.pods.push(pending("big2", "big", "4", "1Gi"));
    w.pods.push(pending("big3", "big", "4", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 4)]));
    assert_eq!(crate::options::MAX_NODES_TOTAL, 15_000);
}

fn tpu(topology: &str) -> PoolExtras {
    PoolExtras {
        tpu: Some(TpuSlice {
            topology: topology.into(),
            chips_per_host: 4,
        }),
        ..Default::default()
    }
}

#[test]
fn a_multi_host_tpu_slice_grows_all_or_nothing() {
    // spec: C10 — 2x4 chips of 4-chip hosts: 2 nodes, both or none, for a
    // single pod.
    let mut w = World::default();
    w.pools.push(pool("tpu", &["a"], "4", "16Gi", 0, 2));
    w.extras.insert("tpu".into(), tpu("2x4"));
    w.pods.push(pending("train", "train", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("tpu/a", 2)]));
    // A maximum below the slice's hosts: nothing.
    w.pools[0]["spec"]["autoscaling"]["maxNodeCount"] = json!(1);
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    // The cluster's room below the slice: nothing, with upstream's reason.
    w.pools[0]["spec"]["autoscaling"]["maxNodeCount"] = json!(2);
    w.options.max_nodes_total = 1;
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    // (At the cap the whole cluster says so first.)
    w.options.max_nodes_total = 2;
    w.nodes.push(node("other", "none", "a", "100m", "100Mi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(
        d.pods["default/train"].per_group["tpu/a"],
        "atomic scale-up exceeds cluster node count limit"
    );
    // spec: C10 — a single-host pool (2x2 of 4 chips) grows by need.
    let mut w = World::default();
    w.pools.push(pool("tpu", &["a"], "4", "16Gi", 0, 5));
    w.extras.insert("tpu".into(), tpu("2x2"));
    w.pods.push(pending("train", "train", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("tpu/a", 1)]));
}

#[test]
fn tpu_topologies_must_divide_into_hosts() {
    // Bad input: a topology that does not divide into hosts is refused.
    let t = |s: &str, c| TpuSlice {
        topology: s.into(),
        chips_per_host: c,
    };
    assert_eq!(t("16x16", 4).hosts(), Ok(64));
    assert_eq!(t("2x2x4", 4).hosts(), Ok(4));
    assert!(t("3x3", 4).hosts().is_err());
    assert!(t("16", 4).hosts().is_err());
    assert!(t("0x4", 4).hosts().is_err());
    assert!(t("4x4", 0).hosts().is_err());
}

#[test]
fn nodes_being_created_take_pods_before_new_ones_are_asked() {
    // spec: C3 — a scale-up in flight is not asked for twice.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.extras.insert(
        "p".into(),
        PoolExtras {
            target_sizes: [("a".to_owned(), 1)].into(),
            ..Default::default()
        },
    );
    w.pods.push(pending("w0", "w", "2", "1Gi"));
    w.pods.push(pending("w1", "w", "2", "1Gi"));
    w.pods.push(pending("w2", "w", "2", "1Gi"));
    let d = w.decide(&State::default(), t0());
    // Two fit the node coming; the third needs one more.
    assert_eq!(World::targets(&d), sizes(&[("p/a", 2)]));
    let fits = d
        .pods
        .values()
        .filter(|o| o.verdict == PodVerdict::FitsExisting)
        .count();
    assert_eq!(fits, 2);
}

#[test]
fn daemon_sets_take_room_on_template_nodes() {
    // spec: C2 — a DaemonSet's pod runs on every new node: with 1 of 4 cpu
    // taken by it, two 2-cpu pods need two nodes, not one.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("other", "q", "a", "1", "1Gi"));
    let mut ds = running("ds-x", "ds", "other", "1", "10Mi");
    ds["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
    w.pods.push(ds);
    w.pods.push(pending("w0", "w", "2", "1Gi"));
    w.pods.push(pending("w1", "w", "2", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 2)]));
}

#[test]
fn without_pod_cidrs_no_node_is_asked_and_the_error_is_named() {
    // spec: C11 — IP space exhaustion: scale.up.error.ip.space.exhausted.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.pods.push(pending("big0", "big", "4", "1Gi"));
    w.pods.push(pending("big1", "big", "4", "1Gi"));
    w.pod_cidrs_left = Some(0);
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    assert_eq!(d.scale_up, ScaleUpResult::Error);
    let b = &d.state.backoff["p"];
    assert_eq!(b.message_id, "scale.up.error.ip.space.exhausted");
    assert!(d.events.iter().any(|e| e.reason == "FailedToScaleUpGroup"
        && e.message.contains("scale.up.error.ip.space.exhausted")));
    // One block left: one node.
    w.pod_cidrs_left = Some(1);
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 1)]));
}

#[test]
fn pools_with_autoscaling_off_never_grow() {
    // spec: C1 — only autoscaled pools are considered.
    let mut w = World::default();
    let mut p = pool("p", &["a"], "4", "16Gi", 0, 10);
    p["spec"]["autoscaling"]["enabled"] = json!(false);
    w.pools.push(p);
    w.pods.push(pending("w", "w", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert!(d.targets.is_empty());
    assert!(matches!(
        d.pods["default/w"].verdict,
        PodVerdict::NotTriggered { .. }
    ));
}

#[test]
fn a_malformed_pending_pod_is_skipped_and_reported() {
    // Bad input: an unreadable pod never stops the loop.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.pods.push(pending("bad", "w", "lots", "1Gi"));
    w.pods.push(pending("good", "w2", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("p/a", 1)]));
    assert!(matches!(
        d.pods["default/bad"].verdict,
        PodVerdict::Unreadable(_)
    ));
    assert!(d
        .status
        .message
        .as_deref()
        .unwrap_or("")
        .contains("default/bad"));
}
