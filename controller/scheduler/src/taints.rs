//! Taints and tolerations (TaintToleration and NodeUnschedulable): a node's
//! `NoSchedule` and `NoExecute` taints must be tolerated; untolerated
//! `PreferNoSchedule` taints only lower the node's score; a cordoned node
//! takes only pods that tolerate `node.kubernetes.io/unschedulable`.

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

fn tolerated(tolerations: &[Toleration], t: &Taint) -> bool {
    let value = t.value.as_deref().unwrap_or("");
    tolerations
        .iter()
        .any(|tol| tol.tolerates(&t.key, value, &t.effect))
}

/// Upstream's reason for a node with a `NoSchedule` or `NoExecute` taint
/// the pod does not tolerate. Since Kubernetes 1.35 (and 1.34.2) it no
/// longer names the taint (`{key: value}`), whose key and value may be
/// sensitive; only the scheduler's log does.
pub const REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// Whether the node has a `NoSchedule` or `NoExecute` taint the pod does
/// not tolerate.
pub(crate) fn untolerated(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE)
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
pub(crate) fn intolerable_preferred(tolerations: &[Toleration], taints: &[Taint]) -> i64 {
    let n = taints
        .iter()
        .filter(|t| t.effect == PREFER_NO_SCHEDULE && !tolerated(tolerations, t))
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}
