//! What the API serves: each resource's group, version, names, scope and
//! verbs, once. Discovery is rendered from this table, and the handlers
//! that come next route by it.

/// One served resource (or subresource, `name` with a `/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lowercase (`pods`, `pods/eviction`).
    pub name: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Discovery's categories: `kubectl get all` expands `all` to the
    /// resources that name it.
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// For subresources whose kind lives in another group
    /// (`pods/eviction` is `policy/v1` `Eviction`).
    pub kind_group_version: Option<(&'static str, &'static str)>,
}

const RW: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS: &[&str] = &["get", "patch", "update"];

const fn res(
    group: &'static str,
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version: "v1",
        name,
        singular,
        kind,
        namespaced,
        short_names,
        categories: &[],
        verbs: RW,
        kind_group_version: None,
    }
}

const fn status(
    group: &'static str,
    name: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version: "v1",
        name,
        singular: "",
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        verbs: STATUS,
        kind_group_version: None,
    }
}

/// The scale subresource of a workload: an `autoscaling/v1` `Scale`, as
/// kube-apiserver lists it.
const fn scale(name: &'static str) -> Resource {
    Resource {
        group: "apps",
        version: "v1",
        name,
        singular: "",
        kind: "Scale",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: STATUS,
        kind_group_version: Some(("autoscaling", "v1")),
    }
}

/// `r` in upstream's `all` category (the workloads and Services that
/// `kubectl get all` lists).
const fn in_all(r: Resource) -> Resource {
    Resource {
        categories: &["all"],
        ..r
    }
}

/// Everything served, in discovery order.
pub const RESOURCES: &[Resource] = &[
    res("", "namespaces", "namespace", "Namespace", false, &["ns"]),
    // The namespace deletion loop's `kubernetes` token leaves
    // `spec.finalizers` through `finalize` alone, as upstream.
    Resource {
        group: "",
        version: "v1",
        name: "namespaces/finalize",
        singular: "",
        kind: "Namespace",
        namespaced: false,
        short_names: &[],
        categories: &[],
        verbs: &["update"],
        kind_group_version: None,
    },
    status("", "namespaces/status", "Namespace", false),
    res("", "nodes", "node", "Node", false, &["no"]),
    status("", "nodes/status", "Node", false),
    in_all(res("", "pods", "pod", "Pod", true, &["po"])),
    status("", "pods/status", "Pod", true),
    Resource {
        group: "",
        version: "v1",
        name: "pods/eviction",
        singular: "",
        kind: "Eviction",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: &["create"],
        kind_group_version: Some(("policy", "v1")),
    },
    Resource {
        group: "",
        version: "v1",
        name: "pods/binding",
        singular: "",
        kind: "Binding",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: &["create"],
        kind_group_version: None,
    },
    in_all(res("", "services", "service", "Service", true, &["svc"])),
    status("", "services/status", "Service", true),
    res("", "events", "event", "Event", true, &["ev"]),
    res("", "configmaps", "configmap", "ConfigMap", true, &["cm"]),
    // No short name, as upstream: `kubectl get secret` is spelled out.
    res("", "secrets", "secret", "Secret", true, &[]),
    in_all(res(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
    )),
    scale("deployments/scale"),
    status("apps", "deployments/status", "Deployment", true),
    in_all(res(
        "apps",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
    )),
    scale("replicasets/scale"),
    status("apps", "replicasets/status", "ReplicaSet", true),
    res("coordination.k8s.io", "leases", "lease", "Lease", true, &[]),
    res(
        "discovery.k8s.io",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
    ),
    res(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
    ),
    status(
        "policy",
        "poddisruptionbudgets/status",
        "PodDisruptionBudget",
        true,
    ),
    res("sluice.dev", "clusters", "cluster", "Cluster", false, &[]),
    status("sluice.dev", "clusters/status", "Cluster", false),
    res(
        "sluice.dev",
        "nodepools",
        "nodepool",
        "NodePool",
        false,
        &["np"],
    ),
    status("sluice.dev", "nodepools/status", "NodePool", false),
    res(
        "sluice.dev",
        "operations",
        "operation",
        "Operation",
        false,
        &["op"],
    ),
    status("sluice.dev", "operations/status", "Operation", false),
    // The L4 load balancer's objects (issue 11), written by the loop in
    // `loops/loadbalancers.rs`, read by `sluice-lb`.
    res(
        "sluice.dev",
        "l4loadbalancers",
        "l4loadbalancer",
        "L4LoadBalancer",
        true,
        &["l4lb"],
    ),
    status(
        "sluice.dev",
        "l4loadbalancers/status",
        "L4LoadBalancer",
        true,
    ),
    res(
        "sluice.dev",
        "healthchecks",
        "healthcheck",
        "HealthCheck",
        true,
        &["hc"],
    ),
    status("sluice.dev", "healthchecks/status", "HealthCheck", true),
    res(
        "sluice.dev",
        "networkendpointgroups",
        "networkendpointgroup",
        "NetworkEndpointGroup",
        true,
        &["neg"],
    ),
    res(
        "sluice.dev",
        "instancegroups",
        "instancegroup",
        "InstanceGroup",
        false,
        &["ig"],
    ),
    status(
        "sluice.dev",
        "instancegroups/status",
        "InstanceGroup",
        false,
    ),
];

/// The groups other than core, in discovery order, each once.
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&str> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.contains(&r.group) {
            out.push(r.group);
        }
    }
    out
}

/// The resources of one group and version.
pub fn in_group_version(group: &str, version: &str) -> Vec<&'static Resource> {
    RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subresource_has_its_parent_and_names_are_unique() {
        for r in RESOURCES {
            if let Some((parent, _)) = r.name.split_once('/') {
                assert!(
                    RESOURCES
                        .iter()
                        .any(|p| p.group == r.group && p.name == parent),
                    "{} has no parent",
                    r.name
                );
            }
            let same = RESOURCES
                .iter()
                .filter(|o| o.group == r.group && o.name == r.name)
                .count();
            assert_eq!(same, 1, "{}", r.name);
        }
        assert_eq!(
            groups(),
            vec![
                "apps",
                "coordination.k8s.io",
                "discovery.k8s.io",
                "policy",
                "sluice.dev"
            ]
        );
    }
}
