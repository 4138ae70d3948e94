//! The one reading of the planner's [`Action`]s as writes: each Node
//! action as a JSON merge patch of that Node, [`Action::SetPoolTarget`] as
//! a merge patch of the pool. The controller loop sends these patches to
//! the API; the simulation harness and the tests apply them to their own
//! objects with [`apply`], so that an action means the same thing
//! everywhere. Provider calls are [`crate::provider_actions`]'s.

use k8s_openapi::api::core::v1::{Node, Taint};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use sluice_model::node_pool::NodeTaint;
use sluice_model::policy::eviction::DRAIN_ANNOTATION;

use crate::drain::DRAIN_STARTED_ANNOTATION;
use crate::{
    Action, InPlace, CORDONED_AT_ANNOTATION, CORDONED_BY_ANNOTATION, UPGRADING_ANNOTATION,
};

/// A merge patch of one Node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeWrite {
    pub node: String,
    pub patch: Value,
}

/// The Node patch `action` makes, if it is a Node action. `operation`:
/// the operation's name, which marks and cordons record; `node`: the Node
/// as last seen, whose taints an in-place change rewrites whole (a merge
/// patch replaces lists).
pub fn node_write(action: &Action, operation: &str, node: Option<&Node>) -> Option<NodeWrite> {
    let annotations = |a: Value| json!({"metadata": {"annotations": a}});
    let patch = match action {
        Action::MarkUpgrading { .. } => annotations(json!({ UPGRADING_ANNOTATION: operation })),
        Action::Unmark { .. } => annotations(json!({ UPGRADING_ANNOTATION: null })),
        Action::Drain {
            reason, started, ..
        } => annotations(json!({
            DRAIN_ANNOTATION: format!("{reason:?}"),
            DRAIN_STARTED_ANNOTATION: started.to_string(),
        })),
        Action::ReleaseDrain { .. } => {
            annotations(json!({ DRAIN_ANNOTATION: null, DRAIN_STARTED_ANNOTATION: null }))
        }
        Action::Cordon { at, .. } => json!({
            "metadata": {"annotations": {
                CORDONED_BY_ANNOTATION: operation,
                CORDONED_AT_ANNOTATION: at.to_string(),
            }},
            "spec": {"unschedulable": true},
        }),
        Action::Uncordon { .. } => json!({
            "metadata": {"annotations": {
                CORDONED_BY_ANNOTATION: null,
                CORDONED_AT_ANNOTATION: null,
            }},
            "spec": {"unschedulable": null},
        }),
        Action::ApplyInPlace(p) => in_place(p, node),
        Action::CreateNode(_)
        | Action::DeleteInstance { .. }
        | Action::Recreate { .. }
        | Action::SetPoolTarget { .. } => return None,
    };
    Some(NodeWrite {
        node: action.subject()?.to_owned(),
        patch,
    })
}

/// The pool patch of [`Action::SetPoolTarget`]: `spec.version` and
/// `spec.config` (only those given).
pub fn pool_write(action: &Action) -> Option<Value> {
    let Action::SetPoolTarget { version, config } = action else {
        return None;
    };
    let mut spec = Map::new();
    if let Some(v) = version {
        spec.insert("version".into(), json!(v));
    }
    if let Some(c) = config {
        spec.insert(
            "config".into(),
            serde_json::to_value(c).unwrap_or(Value::Null),
        );
    }
    Some(json!({ "spec": spec }))
}

/// U7: labels set and removed by a merge patch; taints written whole,
/// the node's other taints kept.
fn in_place(p: &InPlace, node: Option<&Node>) -> Value {
    let mut labels = Map::new();
    for (k, v) in &p.set_labels {
        labels.insert(k.clone(), json!(v));
    }
    for k in &p.remove_labels {
        labels.insert(k.clone(), Value::Null);
    }
    let mut patch = json!({"metadata": {"labels": labels}});
    if !p.add_taints.is_empty() || !p.remove_taints.is_empty() {
        let current = node
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        patch["spec"] = json!({"taints": taints_after(&current, p)});
    }
    patch
}

fn same_taint(k: &Taint, t: &NodeTaint) -> bool {
    k.key == t.key && k.effect == t.effect.kubernetes()
}

/// The node's taints with `p`'s removed and added (a taint is its key
/// and effect, as `kubectl taint` sees it).
pub fn taints_after(current: &[Taint], p: &InPlace) -> Vec<Value> {
    let kept = current
        .iter()
        .filter(|k| !p.remove_taints.iter().any(|t| same_taint(k, t)))
        .filter(|k| !p.add_taints.iter().any(|t| same_taint(k, t)))
        .map(|k| serde_json::to_value(k).unwrap_or(Value::Null));
    let added = p.add_taints.iter().map(|t| {
        let mut v = json!({"key": t.key, "effect": t.effect.kubernetes()});
        if !t.value.is_empty() {
            v["value"] = json!(t.value);
        }
        v
    });
    kept.chain(added).collect()
}

/// RFC 7386: `patch` merged into `target` (members set to `null` removed,
/// objects merged member by member, anything else replaced).
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// `object` with `patch` merged in, as the API server would store it;
/// `None` when the result is no longer an object of its kind.
pub fn apply<T: Serialize + DeserializeOwned>(object: &T, patch: &Value) -> Option<T> {
    let mut v = serde_json::to_value(object).ok()?;
    merge(&mut v, patch);
    serde_json::from_value(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use sluice_model::policy::eviction::EvictionReason;

    fn t0() -> Timestamp {
        "2026-11-23T02:00:00Z".parse().unwrap()
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n
    }

    #[test]
    fn a_drain_names_its_reason_and_a_release_lifts_it() {
        // spec: B3, U1 — the drain's reason is what the agent reads.
        let n = node("n1");
        let drain = Action::Drain {
            node: "n1".into(),
            reason: EvictionReason::BlueGreenDrain,
            started: t0(),
        };
        let w = node_write(&drain, "op", Some(&n)).unwrap();
        let drained = apply(&n, &w.patch).unwrap();
        let a = drained.metadata.annotations.clone().unwrap();
        assert_eq!(a[DRAIN_ANNOTATION], "BlueGreenDrain");
        assert_eq!(a[DRAIN_STARTED_ANNOTATION], t0().to_string());
        let release = node_write(&Action::ReleaseDrain { node: "n1".into() }, "op", None).unwrap();
        let released = apply(&drained, &release.patch).unwrap();
        assert_eq!(released.metadata.annotations.unwrap_or_default().len(), 0);
    }

    #[test]
    fn a_cordon_without_a_drain_is_recorded_and_undone() {
        // spec: B2, B6 — blue is cordoned, not drained; a rollback uncordons it.
        let n = node("n1");
        let cordon = Action::Cordon {
            node: "n1".into(),
            at: t0(),
        };
        let c = apply(&n, &node_write(&cordon, "op", None).unwrap().patch).unwrap();
        assert_eq!(c.spec.as_ref().unwrap().unschedulable, Some(true));
        let a = c.metadata.annotations.clone().unwrap();
        assert_eq!(a[CORDONED_BY_ANNOTATION], "op");
        assert_eq!(a[CORDONED_AT_ANNOTATION], t0().to_string());
        assert!(!a.contains_key(DRAIN_ANNOTATION));
        let undo = node_write(&Action::Uncordon { node: "n1".into() }, "op", None).unwrap();
        let u = apply(&c, &undo.patch).unwrap();
        assert_eq!(u.spec.unwrap_or_default().unschedulable, None);
        assert!(u.metadata.annotations.unwrap_or_default().is_empty());
    }

    #[test]
    fn provider_and_pool_actions_are_no_node_patch() {
        let set = Action::SetPoolTarget {
            version: Some("1.34.1".into()),
            config: None,
        };
        assert_eq!(node_write(&set, "op", None), None);
        assert_eq!(
            pool_write(&set),
            Some(json!({"spec": {"version": "1.34.1"}}))
        );
        let del = Action::DeleteInstance { name: "n1".into() };
        assert_eq!(node_write(&del, "op", None), None);
        assert_eq!(pool_write(&del), None);
    }

    #[test]
    fn merge_follows_rfc_7386() {
        let mut v = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        merge(&mut v, &json!({"a": {"b": null, "c": [3]}, "e": {"f": 1}}));
        assert_eq!(v, json!({"a": {"c": [3]}, "d": 1, "e": {"f": 1}}));
        merge(&mut v, &json!(null));
        assert_eq!(v, Value::Null);
    }
}
