//! The L4 load-balancer objects (`sluice.dev/v1`, issue 11): what the
//! controller decides for each LoadBalancer Service and what the `sluice-lb`
//! process reads to serve it. All four are written by the controller; a
//! user writes only a `HealthCheck`'s spec (its overrides).
//!
//! - [`L4LoadBalancer`] (namespaced, one per Service, same name): the kind
//!   decided at creation (P7, N5), the frontends, the backends by name;
//! - [`HealthCheck`] (namespaced, same name): overrides in the spec, the
//!   effective check in the status;
//! - [`NetworkEndpointGroup`] (namespaced, `<service>.<zone>`): one zone's
//!   GCE_VM_IP endpoints of one internal Service with subsetting (N1–N3);
//! - [`InstanceGroup`] (cluster scoped, named for its zone): every eligible
//!   node of the zone, shared by the LBs without NEGs (N4).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::k8s::Time;
use crate::kind::sluice_kind;

sluice_kind! {
    /// One LoadBalancer Service's load balancer.
    L4LoadBalancer {
        spec: L4LoadBalancerSpec,
        status: L4LoadBalancerStatus,
        plural: "l4loadbalancers",
        scope: Namespace,
        validate: crate::validation::validate_l4_load_balancer,
    }
}

sluice_kind! {
    /// The health check of one LoadBalancer Service's load balancer.
    HealthCheck {
        spec: HealthCheckSpec,
        status: HealthCheckStatus,
        plural: "healthchecks",
        scope: Namespace,
        validate: crate::validation::validate_health_check,
    }
}

sluice_kind! {
    /// One zone's GCE_VM_IP endpoints of one internal LoadBalancer Service.
    NetworkEndpointGroup {
        spec: NetworkEndpointGroupSpec,
        status: NetworkEndpointGroupStatus,
        plural: "networkendpointgroups",
        scope: Namespace,
        validate: crate::validation::validate_network_endpoint_group,
    }
}

sluice_kind! {
    /// One zone's unmanaged instance group, shared by every LB without NEGs.
    InstanceGroup {
        spec: InstanceGroupSpec,
        status: InstanceGroupStatus,
        plural: "instancegroups",
        scope: Cluster,
        validate: crate::validation::validate_instance_group,
    }
}

/// P7: what the Service's annotations asked for when its LB was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LoadBalancerType {
    Internal,
    ExternalBackendService,
    ExternalTargetPool,
}

/// N5: how the LB reaches its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Backends {
    NetworkEndpointGroups,
    InstanceGroups,
}

/// The Service's `spec.externalTrafficPolicy` (absent reads as `Cluster`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExternalTrafficPolicy {
    Cluster,
    Local,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Protocol {
    Tcp,
    Udp,
}

/// One address and port the LB answers on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Frontend {
    pub ip_address: String,
    /// Wide so that an out-of-range port is reported, not wrapped.
    pub port: i64,
    pub protocol: Protocol,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct L4LoadBalancerSpec {
    /// The Service's name (same namespace).
    pub service: String,
    /// Decided at creation, never changed (P7).
    #[serde(rename = "type")]
    pub type_: LoadBalancerType,
    /// Decided at creation, never changed (N5).
    pub backends: Backends,
    pub external_traffic_policy: ExternalTrafficPolicy,
    /// The Service's ingress IPs × its ports; empty while it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frontends: Vec<Frontend>,
    /// A `HealthCheck` in the same namespace.
    pub health_check: String,
    /// With `backends: NetworkEndpointGroups`: their names, same namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_endpoint_groups: Vec<String>,
    /// With `backends: InstanceGroups`: their (cluster-scoped) names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_groups: Vec<String>,
}

/// A condition as Kubernetes writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub last_transition_time: Option<Time>,
}

/// The condition saying a later annotation asks for another kind of LB,
/// which is not converted (P7).
pub const ANNOTATION_IGNORED: &str = "AnnotationIgnored";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct L4LoadBalancerStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<LoadBalancerCondition>,
    /// What could not be served as asked (N3's 250, N4's 250).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How many nodes stand behind the LB, over all its groups (an
    /// addition to the contract: `kubectl get l4lb` shows it, the spec
    /// names only the groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<i64>,
}

/// The user's overrides; every field optional. Wide integers so that an
/// out-of-range value is reported by validation, not by decoding.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_interval_sec: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_threshold: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_threshold: Option<i64>,
}

/// The effective check: GKE's defaults for the Service's policy with the
/// overrides applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckStatus {
    pub port: i64,
    pub request_path: String,
    pub check_interval_sec: i64,
    pub timeout_sec: i64,
    pub healthy_threshold: i64,
    pub unhealthy_threshold: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NetworkEndpointType {
    #[serde(rename = "GCE_VM_IP")]
    GceVmIp,
}

/// A node as a NEG endpoint: its name and InternalIPs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkEndpoint {
    pub instance: String,
    pub ip_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkEndpointGroupSpec {
    pub network_endpoint_type: NetworkEndpointType,
    pub service: String,
    /// The zone as labelled on the nodes (the name holds it sanitised).
    pub zone: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<NetworkEndpoint>,
}

/// Nothing is observed of a NEG yet; kept so every kind has the same shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkEndpointGroupStatus {}

/// A node in an instance group: its name and InternalIPs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupInstance {
    pub name: String,
    pub ip_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupSpec {
    /// The zone as labelled on the nodes (the name holds it sanitised).
    pub zone: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<GroupInstance>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupStatus {
    /// N4: more nodes than the LB spreads evenly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A zone as a DNS label, for the names of NEGs (`<service>.<zone>`) and
/// instance groups: lower case, anything but `[a-z0-9-]` as `-`, no `-`
/// at either end, at most 63 characters. A zone that had to change gets a
/// hash of its original spelling appended, so two zones that sanitise
/// alike still get two names; a zone that is a DNS label already (every
/// GKE zone) keeps its name.
pub fn zone_label(zone: &str) -> String {
    let clean: String = zone
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let trimmed = clean.trim_matches('-');
    if trimmed == zone && !zone.is_empty() && zone.len() <= 63 {
        return zone.to_string();
    }
    // FNV-1a: stable across processes and versions, unlike std's hasher.
    let hash = zone.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let suffix = format!("{:08x}", hash as u32);
    let room = 63 - suffix.len() - 1;
    let head: String = trimmed.chars().take(room).collect();
    let head = head.trim_end_matches('-');
    if head.is_empty() {
        format!("zone-{suffix}")
    } else {
        format!("{head}-{suffix}")
    }
}

/// The name of `service`'s NEG in `zone`.
pub fn neg_name(service: &str, zone: &str) -> String {
    format!("{service}.{}", zone_label(zone))
}
