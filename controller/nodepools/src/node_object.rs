//! The Node a pool's instance registers as: its name, zone and pool
//! labels, the pool's labels and taints, its capacity. The simulator makes
//! these itself (nothing boots); a real node's agent registers the same.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec as K8sNodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_model::k8s::Quantity;

use crate::instance::{Instance, NodeSpec};

/// The label naming a node's pool (GKE's).
pub const POOL_LABEL: &str = "cloud.google.com/gke-nodepool";
/// The label naming a node's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The label naming a node's host.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The pool a Node belongs to, by its pool label.
pub fn pool_of(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()?
        .get(POOL_LABEL)
        .map(String::as_str)
}

/// `instance`'s Node, registered and Ready since its creation.
pub fn node_object(instance: &Instance, spec: &NodeSpec) -> Node {
    let mut labels = spec.labels.clone();
    labels.insert(POOL_LABEL.into(), instance.pool.clone());
    labels.insert(ZONE_LABEL.into(), instance.zone.clone());
    labels.insert(HOSTNAME_LABEL.into(), instance.name.clone());
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity(format!("{}m", spec.cpu_milli))),
        ("memory".to_owned(), Quantity(spec.memory_bytes.to_string())),
        ("pods".to_owned(), Quantity("110".into())),
    ]
    .into();
    let taints: Vec<Taint> = spec
        .taints
        .iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: Some(t.value.clone()).filter(|v| !v.is_empty()),
            effect: t.effect.kubernetes().to_owned(),
            time_added: None,
        })
        .collect();
    let mut node = Node::default();
    node.metadata.name = Some(instance.name.clone());
    node.metadata.labels = Some(labels);
    node.spec = Some(K8sNodeSpec {
        taints: Some(taints).filter(|t| !t.is_empty()),
        ..Default::default()
    });
    node.status = Some(NodeStatus {
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            last_transition_time: Some(Time(instance.created_at)),
            ..Default::default()
        }]),
        node_info: Some(NodeSystemInfo {
            kubelet_version: format!("v{}", instance.version),
            ..Default::default()
        }),
        ..Default::default()
    });
    node
}
