//! What server-side apply needs to know of the served kinds' shapes: which
//! lists are associative (`x-kubernetes-list-type: map`, by which key
//! fields), which are sets, and which maps and structs are atomic
//! (replaced whole, owned as one field).
//!
//! The associative lists are the strategic merge table's
//! (`strategic/keys.rs`): upstream's `x-kubernetes-list-map-keys` are the
//! `patchMergeKey`s, except where they name several fields, which this
//! module overrides:
//!
//! | list | patchMergeKey | list-map-keys |
//! |---|---|---|
//! | a container's `ports` | `containerPort` | `containerPort`, `protocol` |
//! | a Service's `spec.ports` | `port` | `port`, `protocol` |
//! | a pod's `topologySpreadConstraints` | `topologyKey` | `topologyKey`, `whenUnsatisfiable` |
//!
//! `protocol` is defaulted to `TCP` when an element leaves it out, as the
//! OpenAPI schema's default says. Every other list is atomic, as
//! kube-apiserver treats lists without a list type. Atomic structs and
//! maps: label selectors (`structType: atomic`: a Deployment's,
//! ReplicaSet's or budget's `spec.selector`, any `labelSelector` or
//! `namespaceSelector`), a pod's `nodeSelector` and a Service's
//! `spec.selector` (`mapType: atomic`). Object fields are otherwise
//! granular; without the full schema a map's entries are taken for
//! struct fields, which differs from upstream only for maps whose values
//! are objects (none in the served kinds).

use serde_json::Value;

use crate::strategic::keys::{strategy, ListStrategy};

/// How a list is merged and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole, owned as one field.
    Atomic,
    /// Scalars, each element owned (`v:`).
    Set,
    /// Objects identified by these key fields (`k:`).
    Map(Vec<&'static str>),
}

/// The pod-spec-relative path of `names`, if it lies in a pod spec.
fn in_pod_spec<'a>(kind: &str, names: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match (kind, names) {
        ("Pod", ["spec", rest @ ..]) => Some(rest),
        ("Deployment" | "ReplicaSet", ["spec", "template", "spec", rest @ ..]) => Some(rest),
        _ => None,
    }
}

/// The list at `names` (field names from the root; list elements add no
/// name) in an object of `kind`.
pub fn list_type(kind: &str, names: &[&str]) -> ListType {
    if let Some(rest) = in_pod_spec(kind, names) {
        match rest {
            ["containers" | "initContainers" | "ephemeralContainers", "ports"] => {
                return ListType::Map(vec!["containerPort", "protocol"])
            }
            ["topologySpreadConstraints"] => {
                return ListType::Map(vec!["topologyKey", "whenUnsatisfiable"])
            }
            _ => {}
        }
    }
    if kind == "Service" && names == ["spec", "ports"] {
        return ListType::Map(vec!["port", "protocol"]);
    }
    match strategy(kind, names) {
        ListStrategy::Replace => ListType::Atomic,
        ListStrategy::MergeBy(key) => ListType::Map(vec![key]),
        ListStrategy::MergeScalars => ListType::Set,
    }
}

/// Whether the object at `names` is replaced and owned whole.
pub fn atomic_map(kind: &str, names: &[&str]) -> bool {
    if matches!(names.last(), Some(&"labelSelector" | &"namespaceSelector")) {
        return true;
    }
    if in_pod_spec(kind, names) == Some(&["nodeSelector"]) {
        return true;
    }
    matches!(
        (kind, names),
        (
            "Deployment" | "ReplicaSet" | "PodDisruptionBudget" | "Service",
            ["spec", "selector"]
        )
    )
}

/// The value a key field takes when an element leaves it out.
pub fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".into()))
}

/// Fields the walks never look at: the bookkeeping itself and the
/// revision (the stored object carries none, the one patched does).
pub fn skipped(names: &[&str], key: &str) -> bool {
    names == ["metadata"] && matches!(key, "managedFields" | "resourceVersion")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_list_types_follow_the_list_map_keys_of_the_served_kinds() {
        // Upstream OpenAPI (k8s.io/api): containers `x-kubernetes-list-map-keys:
        // [name]`, ports `[containerPort, protocol]`, Service ports `[port,
        // protocol]`, conditions `[type]`, finalizers `x-kubernetes-list-type: set`.
        assert_eq!(
            list_type("Pod", &["spec", "containers"]),
            ListType::Map(vec!["name"])
        );
        assert_eq!(
            list_type(
                "Deployment",
                &["spec", "template", "spec", "containers", "ports"]
            ),
            ListType::Map(vec!["containerPort", "protocol"])
        );
        assert_eq!(
            list_type("Service", &["spec", "ports"]),
            ListType::Map(vec!["port", "protocol"])
        );
        assert_eq!(
            list_type("Node", &["status", "conditions"]),
            ListType::Map(vec!["type"])
        );
        assert_eq!(list_type("Pod", &["metadata", "finalizers"]), ListType::Set);
        assert_eq!(list_type("Pod", &["spec", "tolerations"]), ListType::Atomic);
        assert_eq!(
            list_type("Pod", &["spec", "containers", "args"]),
            ListType::Atomic
        );
        assert!(atomic_map("Deployment", &["spec", "selector"]));
        assert!(atomic_map("Pod", &["spec", "nodeSelector"]));
        assert!(!atomic_map("Pod", &["metadata", "labels"]));
        assert_eq!(key_default("protocol"), Some(Value::String("TCP".into())));
    }
}
