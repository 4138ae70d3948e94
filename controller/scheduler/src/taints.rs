//! Taints and tolerations (TaintToleration and NodeUnschedulable): a node's
//! `NoSchedule` and `NoExecute` taints must be tolerated; untolerated
//! `PreferNoSchedule` taints only lower the node's score; a cordoned node
//! takes only pods that tolerate `node.kubernetes.io/unschedulable`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Taint};

use crate::error::InputError;

/// The taint kube-scheduler checks a cordoned node's pods against.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";
const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";

/// A toleration read once: `key` empty tolerates every key (with
/// `Exists`), `effect` empty every effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Toleration {
    key: String,
    exists: bool,
    value: String,
    effect: String,
}

impl Toleration {
    /// Whether this toleration covers `taint`.
    fn tolerates(&self, key: &str, value: &str, effect: &str) -> bool {
        (self.effect.is_empty() || self.effect == effect)
            && (self.key.is_empty() || self.key == key)
            && (self.exists || self.value == value)
    }
}

/// The pod's `spec.tolerations`, checked.
pub(crate) fn parse_tolerations(pod: &Pod, object: &str) -> Result<Vec<Toleration>, InputError> {
    let mut out = Vec::new();
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref());
    for (i, t) in tolerations.into_iter().flatten().enumerate() {
        let field = |f: &str| format!("spec.tolerations[{i}].{f}");
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                let why = format!("{other:?} is not Equal or Exists");
                return Err(InputError::new(object, field("operator"), why));
            }
        };
        let value = t.value.clone().unwrap_or_default();
        if exists && !value.is_empty() {
            let why = "must be empty when operator is Exists";
            return Err(InputError::new(object, field("value"), why));
        }
        out.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value,
            effect: t.effect.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

/// A taint's effect, read once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Effect {
    NoSchedule,
    NoExecute,
    PreferNoSchedule,
}

impl Effect {
    fn as_str(self) -> &'static str {
        match self {
            Effect::NoSchedule => NO_SCHEDULE,
            Effect::NoExecute => NO_EXECUTE,
            Effect::PreferNoSchedule => PREFER_NO_SCHEDULE,
        }
    }

    fn hard(self) -> bool {
        matches!(self, Effect::NoSchedule | Effect::NoExecute)
    }
}

/// A node's taint as the filters read it (`timeAdded` plays no part).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct NodeTaint {
    key: String,
    value: String,
    effect: Effect,
}

/// A node's taints, shared by every node with the same ones: most nodes
/// have none or the same few (a cordon's, a pool's), so one pod's
/// verdict on a set is worked out once per decision, not once per node
/// (reading each node's taint strings was a cache miss per node and a
/// quarter of the controller's time while a backlog was scheduled).
pub(crate) type TaintSet = Arc<[NodeTaint]>;

/// The taints the scheduler reads, in a canonical order; effects it does
/// not know (the API validates them) are left out.
fn node_taints(taints: &[Taint]) -> Vec<NodeTaint> {
    let mut out: Vec<NodeTaint> = taints
        .iter()
        .filter_map(|t| {
            let effect = match t.effect.as_str() {
                NO_SCHEDULE => Effect::NoSchedule,
                NO_EXECUTE => Effect::NoExecute,
                PREFER_NO_SCHEDULE => Effect::PreferNoSchedule,
                _ => return None,
            };
            Some(NodeTaint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Every distinct [`TaintSet`] the view's nodes hold.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaintSets {
    sets: HashSet<TaintSet>,
    none: TaintSet,
}

impl TaintSets {
    /// The shared set equal to `taints`.
    pub(crate) fn intern(&mut self, taints: &[Taint]) -> TaintSet {
        let wanted = node_taints(taints);
        if wanted.is_empty() {
            return self.none.clone();
        }
        if let Some(s) = self.sets.get(wanted.as_slice()) {
            return s.clone();
        }
        let s: TaintSet = wanted.into();
        self.sets.insert(s.clone());
        s
    }

    /// A node let go of `set`: forgotten when nothing else holds it.
    pub(crate) fn release(&mut self, set: &TaintSet) {
        // Held by the caller's node and by this table only.
        if !set.is_empty() && Arc::strong_count(set) <= 2 {
            self.sets.remove(set);
        }
    }
}

/// One pod's verdicts on the taint sets met during one decision.
pub(crate) struct TaintVerdicts<'a> {
    tolerations: &'a [Toleration],
    untolerated: HashMap<*const NodeTaint, bool>,
}

impl<'a> TaintVerdicts<'a> {
    pub(crate) fn new(tolerations: &'a [Toleration]) -> Self {
        TaintVerdicts {
            tolerations,
            untolerated: HashMap::new(),
        }
    }

    /// Whether the set has a `NoSchedule` or `NoExecute` taint the pod
    /// does not tolerate.
    pub(crate) fn untolerated(&mut self, set: &TaintSet) -> bool {
        if set.is_empty() {
            return false;
        }
        let tolerations = self.tolerations;
        *self
            .untolerated
            .entry(set.as_ptr())
            .or_insert_with(|| untolerated(tolerations, set))
    }
}

fn tolerated(tolerations: &[Toleration], t: &NodeTaint) -> bool {
    tolerations
        .iter()
        .any(|tol| tol.tolerates(&t.key, &t.value, t.effect.as_str()))
}

/// Upstream's reason for a node with a `NoSchedule` or `NoExecute` taint
/// the pod does not tolerate. Since Kubernetes 1.35 (and 1.34.2) it no
/// longer names the taint (`{key: value}`), whose key and value may be
/// sensitive; only the scheduler's log does.
pub const REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// Whether the node has a `NoSchedule` or `NoExecute` taint the pod does
/// not tolerate.
pub(crate) fn untolerated(tolerations: &[Toleration], taints: &[NodeTaint]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect.hard())
        .any(|t| !tolerated(tolerations, t))
}

/// Whether a cordoned node still takes the pod.
pub(crate) fn tolerates_unschedulable(tolerations: &[Toleration]) -> bool {
    tolerations
        .iter()
        .any(|t| t.tolerates(UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE))
}

/// How many `PreferNoSchedule` taints the pod does not tolerate (only
/// tolerations for that effect or for every effect can cover them).
pub(crate) fn intolerable_preferred(tolerations: &[Toleration], taints: &[NodeTaint]) -> i64 {
    let n = taints
        .iter()
        .filter(|t| t.effect == Effect::PreferNoSchedule && !tolerated(tolerations, t))
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str, added: Option<&str>) -> Taint {
        serde_json::from_value(serde_json::json!({
            "key": key, "effect": effect, "timeAdded": added}))
        .expect("taint")
    }

    // spec: the scheduler's TaintToleration filter — nodes with the same
    // taints share one set (their timeAdded aside), whose verdict for a
    // pod is worked out once; a set no node holds is forgotten.
    #[test]
    fn equal_taints_share_one_set_until_no_node_holds_it() {
        let mut sets = TaintSets::default();
        let a = sets.intern(&[
            taint("k", NO_SCHEDULE, Some("2026-11-26T00:00:00Z")),
            taint("p", PREFER_NO_SCHEDULE, None),
        ]);
        let b = sets.intern(&[
            taint("p", PREFER_NO_SCHEDULE, None),
            taint("k", NO_SCHEDULE, Some("2026-11-27T00:00:00Z")),
        ]);
        assert!(Arc::ptr_eq(&a, &b), "same taints, one set");
        let c = sets.intern(&[taint("k", NO_EXECUTE, None)]);
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(sets.intern(&[taint("x", "Unknown", None)]).is_empty());
        assert_eq!(sets.sets.len(), 2);
        sets.release(&c);
        drop(c);
        assert_eq!(sets.sets.len(), 1, "c's set held by nobody");
        sets.release(&a);
        drop(a);
        assert_eq!(sets.sets.len(), 1, "b still holds it");
        sets.release(&b);
        assert!(sets.sets.is_empty());

        let tolerate_k: Vec<Toleration> = vec![Toleration {
            key: "k".into(),
            exists: true,
            value: String::new(),
            effect: String::new(),
        }];
        let hard = sets.intern(&[taint("k", NO_SCHEDULE, None)]);
        let other = sets.intern(&[taint("j", NO_EXECUTE, None)]);
        let mut verdicts = TaintVerdicts::new(&tolerate_k);
        assert!(!verdicts.untolerated(&hard));
        assert!(verdicts.untolerated(&other));
        assert!(!verdicts.untolerated(&hard), "the same verdict again");
        assert!(!verdicts.untolerated(&sets.intern(&[])));
        assert_eq!(intolerable_preferred(&[], &b), 1);
    }
}
