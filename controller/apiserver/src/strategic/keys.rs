//! Which lists of the served kinds a strategic merge patch merges, and by
//! which key: the `patchStrategy`/`patchMergeKey` of the Kubernetes API
//! types (facts of the API; kubectl computes its patches from the same
//! tags). Any other list is replaced whole, as in a JSON merge patch.

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Replaced whole (no strategy in the type).
    Replace,
    /// Objects merged by this key.
    MergeBy(&'static str),
    /// Scalars merged as a set (`finalizers`, `podCIDRs`).
    MergeScalars,
}

use ListStrategy::*;

/// Lists of a container, relative to it.
fn container(rest: &[&str]) -> ListStrategy {
    match rest {
        ["ports"] => MergeBy("containerPort"),
        ["env"] => MergeBy("name"),
        ["volumeMounts"] => MergeBy("mountPath"),
        ["volumeDevices"] => MergeBy("devicePath"),
        _ => Replace,
    }
}

/// Lists of a pod spec, relative to it.
fn pod_spec(rest: &[&str]) -> ListStrategy {
    match rest {
        ["volumes"] | ["imagePullSecrets"] | ["schedulingGates"] | ["resourceClaims"] => {
            MergeBy("name")
        }
        ["containers"] | ["initContainers"] | ["ephemeralContainers"] => MergeBy("name"),
        ["hostAliases"] => MergeBy("ip"),
        ["topologySpreadConstraints"] => MergeBy("topologyKey"),
        ["containers" | "initContainers" | "ephemeralContainers", rest @ ..] => container(rest),
        _ => Replace,
    }
}

fn conditions(rest: &[&str]) -> ListStrategy {
    match rest {
        ["conditions"] => MergeBy("type"),
        _ => Replace,
    }
}

/// The strategy of the list at `path` (field names from the object's
/// root; list elements add no segment) in an object of `kind`.
pub fn strategy(kind: &str, path: &[&str]) -> ListStrategy {
    match (kind, path) {
        (_, ["metadata", "finalizers"]) => MergeScalars,
        (_, ["metadata", "ownerReferences"]) => MergeBy("uid"),
        ("Pod", ["spec", rest @ ..]) => pod_spec(rest),
        ("Pod", ["status", "podIPs"]) | ("Pod", ["status", "hostIPs"]) => MergeBy("ip"),
        ("Pod", ["status", "resourceClaimStatuses"]) => MergeBy("name"),
        ("Deployment" | "ReplicaSet", ["spec", "template", "spec", rest @ ..]) => pod_spec(rest),
        ("Node", ["spec", "podCIDRs"]) => MergeScalars,
        ("Node", ["status", "addresses"]) => MergeBy("type"),
        ("Service", ["spec", "ports"]) => MergeBy("port"),
        (
            "Pod"
            | "Node"
            | "Service"
            | "Deployment"
            | "ReplicaSet"
            | "PodDisruptionBudget"
            | "Namespace",
            ["status", rest @ ..],
        ) => conditions(rest),
        _ => Replace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merge_keys_kubectl_patches_with() {
        assert_eq!(strategy("Pod", &["spec", "containers"]), MergeBy("name"));
        assert_eq!(
            strategy("Pod", &["spec", "containers", "ports"]),
            MergeBy("containerPort")
        );
        assert_eq!(
            strategy(
                "Deployment",
                &["spec", "template", "spec", "containers", "env"]
            ),
            MergeBy("name")
        );
        assert_eq!(strategy("Pod", &["spec", "tolerations"]), Replace);
        assert_eq!(strategy("Node", &["status", "conditions"]), MergeBy("type"));
        assert_eq!(strategy("Node", &["spec", "taints"]), Replace);
        assert_eq!(strategy("Service", &["spec", "ports"]), MergeBy("port"));
        assert_eq!(strategy("Lease", &["metadata", "finalizers"]), MergeScalars);
        assert_eq!(strategy("EndpointSlice", &["endpoints"]), Replace);
    }
}
