//! The subset of Kubernetes manifests the agent reads, with Kubernetes field
//! names so users can apply what they already write. Unknown fields are
//! ignored, as `kubectl apply` would carry them; known fields are validated in
//! `validate.rs`.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Set when the object is being deleted (graceful deletion).
    #[serde(default)]
    pub deletion_timestamp: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
}

// --- Node ---------------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodeSpec,
    #[serde(default)]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Vec<String>,
    #[serde(default)]
    pub unschedulable: bool,
    #[serde(default)]
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub effect: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default)]
    pub addresses: Vec<NodeAddress>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeAddress {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub address: String,
}

// --- Pod ----------------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub node_name: String,
    /// The pod uses the node's addresses (no pod IP of its own).
    #[serde(default)]
    pub host_network: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, rename = "podIPs")]
    pub pod_ips: Vec<PodIp>,
    #[serde(default)]
    pub conditions: Vec<PodCondition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodCondition {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodIp {
    #[serde(default)]
    pub ip: String,
}

// --- Service ------------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpec,
    #[serde(default)]
    pub status: ServiceStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    #[serde(default)]
    pub external_traffic_policy: Option<String>,
    #[serde(default)]
    pub health_check_node_port: Option<i64>,
    #[serde(default)]
    pub session_affinity: Option<String>,
    #[serde(default)]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    #[serde(default)]
    pub load_balancer_ip: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    #[serde(default, rename = "clientIP")]
    pub client_ip: Option<ClientIpConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientIpConfig {
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub port: i64,
    #[serde(default)]
    pub target_port: Option<IntOrString>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    #[serde(default)]
    pub load_balancer: LoadBalancerStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    #[serde(default)]
    pub ingress: Vec<LoadBalancerIngress>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoadBalancerIngress {
    #[serde(default)]
    pub ip: Option<String>,
}

// --- EndpointSlice ------------------------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub address_type: String,
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
    #[serde(default)]
    pub endpoints: Vec<SliceEndpoint>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointPort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub port: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceEndpoint {
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: EndpointConditions,
    #[serde(default)]
    pub node_name: Option<String>,
}

/// Kubernetes semantics for absent conditions: `ready` unknown counts as
/// ready, `serving` unknown takes `ready`'s value, `terminating` unknown is
/// false.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointConditions {
    #[serde(default)]
    pub ready: Option<bool>,
    #[serde(default)]
    pub serving: Option<bool>,
    #[serde(default)]
    pub terminating: Option<bool>,
}

// --- PodDisruptionBudget (policy/v1) -------------------------------------

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudget {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PdbSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub min_available: Option<IntOrString>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub unhealthy_pod_eviction_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LabelSelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}
