//! The node a pool would add, built from its config (capacity, labels,
//! taints), so a pool at zero nodes can grow. It is the Node the pool
//! reconciler registers (`sluice-nodepools`' `node_object`): the pool, zone
//! and hostname labels over the config's labels, allocatable equal to the
//! capacity, 110 pods. DaemonSets already running in the cluster add a
//! copy of their pod to it when it would take one, since a new node runs
//! them too and their requests take room.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, Taint};
use sluice_model::k8s::{Node, Pod, Quantity};

use crate::snapshot::{PoolView, HOSTNAME_LABEL, POOL_LABEL, ZONE_LABEL};

/// The pod count a registered node allows.
const MAX_PODS: &str = "110";

/// Taint key prefixes a new node carries only while it starts (upstream's
/// startup and status taints), left off templates.
const STARTUP_TAINT_PREFIXES: [&str; 3] = [
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
    "status-taint.cluster-autoscaler.kubernetes.io/",
];

/// A template node for `pool` in `zone`, named `name`. `None` when the
/// pool's capacity cannot be read.
pub(crate) fn template_node(pool: &PoolView<'_>, zone: &str, name: &str) -> Option<Node> {
    let (cpu, memory) = pool.capacity?;
    let config = &pool.pool.spec.config;
    let mut labels = config.labels.clone();
    labels.insert(POOL_LABEL.into(), pool.name.clone());
    if !zone.is_empty() {
        labels.insert(ZONE_LABEL.into(), zone.to_owned());
    }
    labels.insert(HOSTNAME_LABEL.into(), name.to_owned());
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity(format!("{cpu}m"))),
        ("memory".to_owned(), Quantity(memory.to_string())),
        ("pods".to_owned(), Quantity(MAX_PODS.into())),
    ]
    .into();
    let taints: Vec<Taint> = config
        .taints
        .iter()
        .filter(|t| !STARTUP_TAINT_PREFIXES.iter().any(|p| t.key.starts_with(p)))
        .map(|t| Taint {
            key: t.key.clone(),
            value: Some(t.value.clone()).filter(|v| !v.is_empty()),
            effect: t.effect.kubernetes().to_owned(),
            time_added: None,
        })
        .collect();
    let mut node = Node::default();
    node.metadata.name = Some(name.to_owned());
    node.metadata.labels = Some(labels);
    node.spec = Some(NodeSpec {
        taints: Some(taints).filter(|t| !t.is_empty()),
        ..Default::default()
    });
    node.status = Some(NodeStatus {
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        ..Default::default()
    });
    Some(node)
}

/// Whether `pod` belongs to a DaemonSet.
pub(crate) fn is_daemon_set_pod(pod: &Pod) -> bool {
    controller_of(pod).is_some_and(|(kind, _)| kind == "DaemonSet")
}

/// The kind and uid of the pod's controller (the owner with `controller: true`).
pub(crate) fn controller_of(pod: &Pod) -> Option<(&str, &str)> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.uid.as_str()))
}

/// One pod per DaemonSet running in the cluster, the first seen, to copy
/// onto templates.
pub(crate) fn daemon_set_exemplars(pods: &[Pod]) -> Vec<&Pod> {
    let mut seen = std::collections::BTreeSet::new();
    pods.iter()
        .filter(|p| crate::snapshot::node_name(p).is_some() && is_daemon_set_pod(p))
        .filter(|p| controller_of(p).is_some_and(|(_, uid)| seen.insert(uid.to_owned())))
        .collect()
}

/// The exemplar as its DaemonSet would make it for `node`: renamed, bound
/// there, without the `metadata.name` field selector the DaemonSet
/// controller pins each pod to its node with.
pub(crate) fn daemon_set_copy(exemplar: &Pod, node: &str) -> Pod {
    let mut pod = exemplar.clone();
    let name = format!(
        "{}-{node}",
        exemplar.metadata.name.as_deref().unwrap_or("daemon")
    );
    pod.metadata.name = Some(name);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.to_owned());
        if let Some(na) = spec
            .affinity
            .as_mut()
            .and_then(|a| a.node_affinity.as_mut())
        {
            if let Some(required) = na
                .required_during_scheduling_ignored_during_execution
                .as_mut()
            {
                for term in &mut required.node_selector_terms {
                    if let Some(fields) = term.match_fields.as_mut() {
                        fields.retain(|f| f.key != "metadata.name");
                    }
                }
                required.node_selector_terms.retain(|t| {
                    t.match_fields.as_ref().is_some_and(|f| !f.is_empty())
                        || t.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
                });
                if required.node_selector_terms.is_empty() {
                    na.required_during_scheduling_ignored_during_execution = None;
                }
            }
        }
    }
    pod
}
