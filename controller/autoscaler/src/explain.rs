//! Why a pod did or did not trigger a scale-up, pool zone by pool zone, and
//! why a node is or is not being removed, as text and JSON for `sluice
//! autoscaler explain` and `simulate`, and as annotations on the node. Read
//! off the same decision the loop acts on.
//!
//! The annotations are under `sluice.dev/`, not upstream's
//! `cluster-autoscaler.kubernetes.io/`: upstream has not defined keys for
//! its open request to put the reasons on the node, that prefix is the
//! Kubernetes project's to define, and a key it later defines with other
//! values would then clash with ours.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value};
use sluice_model::k8s::Node;

use crate::scale_down::{NodeOutcome, Unremovable};
use crate::scale_up::{PodOutcome, PodVerdict};
use crate::Decision;

/// The node annotation holding why it is kept (absent while it is being
/// removed, or when the autoscaler has nothing to say about it).
pub const SCALE_DOWN_REASON_ANNOTATION: &str = "sluice.dev/autoscaler-scale-down-blocked";
/// The node annotation holding its utilisation as last judged (the larger
/// of cpu and memory, as upstream compares with the threshold).
pub const UTILIZATION_ANNOTATION: &str = "sluice.dev/autoscaler-utilization";
/// The node annotation holding since when it has been unneeded. The time
/// left is not written: it changes every loop, and the node with it.
pub const UNNEEDED_SINCE_ANNOTATION: &str = "sluice.dev/autoscaler-unneeded-since";
/// Every annotation this module writes.
pub const NODE_ANNOTATIONS: [&str; 3] = [
    SCALE_DOWN_REASON_ANNOTATION,
    UTILIZATION_ANNOTATION,
    UNNEEDED_SINCE_ANNOTATION,
];

/// One line naming why a node stays.
pub fn unremovable_text(why: &Unremovable) -> String {
    match why {
        Unremovable::BlockedByPod(b) => {
            let mut s = format!("BlockedByPod: pod {} ({})", b.pod, b.reason.as_str());
            if let Some(budget) = &b.budget {
                let _ = write!(s, ", PodDisruptionBudget {budget}");
            }
            if let Some(until) = b.until {
                let _ = write!(s, ", protected until {until}");
            }
            s
        }
        Unremovable::NoPlaceToMovePods { pod, why } => {
            format!("NoPlaceToMovePods: pod {pod}: {why}")
        }
        Unremovable::UnexpectedError { message } => format!("UnexpectedError: {message}"),
        other => format!("{other:?}"),
    }
}

/// Why `pod` (`namespace/name`) did or did not trigger a scale-up.
pub fn pod(decision: &Decision, key: &str) -> Option<String> {
    let o: &PodOutcome = decision.pods.get(key)?;
    let mut s = match &o.verdict {
        PodVerdict::Triggered(infos) => {
            let list: Vec<String> = infos.iter().map(ToString::to_string).collect();
            format!("pod {key} triggered scale-up: [{}]\n", list.join(" "))
        }
        PodVerdict::NotTriggered { reasons } => {
            format!("pod {key} didn't trigger scale-up: {reasons}\n")
        }
        PodVerdict::FitsExisting => {
            format!("pod {key} fits on a node that exists or is being added\n")
        }
        PodVerdict::Expendable => {
            format!("pod {key} has a priority below -10 and never triggers a scale-up\n")
        }
        PodVerdict::Unreadable(e) => format!("pod {key} was skipped: {e}\n"),
    };
    for (group, answer) in &o.per_group {
        let _ = writeln!(s, "  {group}: {answer}");
    }
    Some(s)
}

/// Why `node` is or is not being removed.
pub fn node(decision: &Decision, name: &str) -> Option<String> {
    let o: &NodeOutcome = decision.nodes.get(name)?;
    let mut s = format!("node {name}");
    if let Some(pool) = &o.pool {
        let _ = write!(s, " (pool {pool})");
    }
    s.push('\n');
    if let Some(u) = o.utilization {
        let _ = writeln!(
            s,
            "  utilization: cpu {:.2}, memory {:.2} (threshold {:.2})",
            u.cpu, u.memory, o.threshold
        );
    }
    if let Some(since) = o.unneeded_since {
        let _ = writeln!(s, "  unneeded since: {since}");
    }
    if let Some(left) = o.unneeded_left {
        let _ = writeln!(s, "  unneeded time left: {left:#}");
    }
    match &o.kept {
        None => s.push_str("  being removed\n"),
        Some(why) => {
            let _ = writeln!(s, "  kept: {}", unremovable_text(why));
        }
    }
    Some(s)
}

/// The annotations that carry the node's answer on the Node itself; one
/// left out is to be removed.
pub fn node_annotations(o: &NodeOutcome) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(why) = &o.kept {
        out.insert(
            SCALE_DOWN_REASON_ANNOTATION.to_owned(),
            unremovable_text(why),
        );
    }
    if let Some(u) = o.utilization {
        out.insert(UTILIZATION_ANNOTATION.to_owned(), format!("{:.3}", u.max()));
    }
    if let Some(since) = o.unneeded_since {
        out.insert(UNNEEDED_SINCE_ANNOTATION.to_owned(), since.to_string());
    }
    out
}

/// The merge patch that brings `node`'s annotations to its answer `o`
/// (`None`: the autoscaler says nothing about it, so its annotations go),
/// or `None` when they already say that: the loop writes a node only when
/// its reasons change.
pub fn annotation_patch(node: &Node, o: Option<&NodeOutcome>) -> Option<Value> {
    let want = o.map(node_annotations).unwrap_or_default();
    let have = node.metadata.annotations.as_ref();
    let mut patch = serde_json::Map::new();
    for key in NODE_ANNOTATIONS {
        let now = have.and_then(|a| a.get(key));
        match (now, want.get(key)) {
            (Some(a), Some(b)) if a == b => {}
            (None, None) => {}
            (_, Some(b)) => {
                patch.insert(key.to_owned(), json!(b));
            }
            (Some(_), None) => {
                patch.insert(key.to_owned(), Value::Null);
            }
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"annotations": patch}}))
}

fn verdict_json(o: &PodOutcome) -> Value {
    match &o.verdict {
        PodVerdict::Triggered(infos) => json!({
            "verdict": "TriggeredScaleUp",
            "scaleUps": infos.iter().map(|i| json!({
                "nodeGroup": i.group, "from": i.from, "to": i.to, "max": i.max,
            })).collect::<Vec<_>>(),
        }),
        PodVerdict::NotTriggered { reasons } => json!({
            "verdict": "NotTriggerScaleUp",
            "message": format!("pod didn't trigger scale-up: {reasons}"),
        }),
        PodVerdict::FitsExisting => json!({"verdict": "FitsExisting"}),
        PodVerdict::Expendable => json!({"verdict": "Expendable"}),
        PodVerdict::Unreadable(e) => json!({"verdict": "Unreadable", "message": e}),
    }
}

/// [`pod`] for scripts: the verdict, upstream's message, and each pool
/// zone's answer.
pub fn pod_json(decision: &Decision, key: &str) -> Option<Value> {
    let o = decision.pods.get(key)?;
    let mut v = verdict_json(o);
    v["pod"] = json!(key);
    v["nodeGroups"] = json!(o.per_group);
    Some(v)
}

/// The name of why a node stays (upstream's UnremovableReason).
fn unremovable_name(why: &Unremovable) -> String {
    // The variant's name: the serialised tag would be overwritten by a
    // blocking pod's own `reason`.
    let debug = format!("{why:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// [`node`] for scripts: utilisation, unneeded time, and why it stays
/// (`reason`; for a blocking pod, the pod, its reason and the budget).
pub fn node_json(decision: &Decision, name: &str) -> Option<Value> {
    let o = decision.nodes.get(name)?;
    let mut v = json!({
        "node": name,
        "pool": o.pool,
        "utilization": o.utilization,
        "threshold": o.threshold,
        "unneededSince": o.unneeded_since.map(|t| t.to_string()),
        "unneededLeft": o.unneeded_left.map(|d| format!("{d:#}")),
        "removed": o.kept.is_none(),
    });
    if let Some(why) = &o.kept {
        v["reason"] = json!(unremovable_name(why));
        v["message"] = json!(unremovable_text(why));
        match why {
            Unremovable::BlockedByPod(b) => {
                v["blockingPod"] = json!({
                    "pod": b.pod, "reason": b.reason.as_str(), "budget": b.budget,
                    "until": b.until.map(|t| t.to_string()),
                });
            }
            Unremovable::NoPlaceToMovePods { pod, why } => {
                v["blockingPod"] = json!({"pod": pod, "reason": why});
            }
            _ => {}
        }
    }
    Some(v)
}

/// What the loop would do with `decision`: the sizes it would set, the
/// nodes it would remove, and why for every pending pod and every node.
pub fn simulation(decision: &Decision) -> String {
    let mut s = format!(
        "scale-up: {:?}; scale-down: {:?}\n",
        decision.scale_up, decision.scale_down
    );
    if decision.targets.is_empty() {
        s.push_str("would add: nothing\n");
    }
    for t in &decision.targets {
        let _ = writeln!(
            s,
            "would resize: {}/{} {} -> {} ({:?})",
            t.pool, t.zone, t.from, t.to, t.reason
        );
    }
    if decision.removals.is_empty() {
        s.push_str("would remove: nothing\n");
    }
    for r in &decision.removals {
        let how = if r.empty {
            "empty".to_owned()
        } else {
            format!("draining {}", r.evict.join(", "))
        };
        let _ = writeln!(
            s,
            "would remove: node {} (pool {}, zone {}): utilization cpu {:.2}, memory {:.2}; {how}",
            r.node, r.pool, r.zone, r.utilization.cpu, r.utilization.memory
        );
    }
    for key in decision.pods.keys() {
        if let Some(text) = pod(decision, key) {
            s.push_str(&text);
        }
    }
    for name in decision.nodes.keys() {
        if let Some(text) = node(decision, name) {
            s.push_str(&text);
        }
    }
    s
}

/// [`simulation`] for scripts.
pub fn simulation_json(decision: &Decision) -> Value {
    let pods: BTreeMap<&String, Value> = decision
        .pods
        .keys()
        .filter_map(|k| Some((k, pod_json(decision, k)?)))
        .collect();
    let nodes: BTreeMap<&String, Value> = decision
        .nodes
        .keys()
        .filter_map(|k| Some((k, node_json(decision, k)?)))
        .collect();
    json!({
        "scaleUpResult": format!("{:?}", decision.scale_up),
        "scaleDownResult": format!("{:?}", decision.scale_down),
        "resizes": decision.targets.iter().map(|t| json!({
            "pool": t.pool, "zone": t.zone, "from": t.from, "to": t.to,
            "reason": format!("{:?}", t.reason),
        })).collect::<Vec<_>>(),
        "removals": decision.removals,
        "pods": pods,
        "nodes": nodes,
    })
}
