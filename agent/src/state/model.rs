//! The validated desired state of a node: what the manifests mean, with every
//! field checked and defaulted, so the control side never has to guess.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::pods::{EvictionReason, PdbSpec, PodRunSpec, PoolKind};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    pub nodes: BTreeMap<String, NodeInfo>,
    /// Keyed `namespace/name`.
    pub pods: BTreeMap<String, PodInfo>,
    /// Keyed `namespace/name`.
    pub services: BTreeMap<String, ServiceInfo>,
    /// PodDisruptionBudgets, keyed `namespace/name`.
    pub pdbs: BTreeMap<String, PdbSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    /// InternalIP addresses, at most one per family.
    pub addrs: Vec<IpAddr>,
    pub pod_cidrs: Vec<IpNet>,
    /// Taint keys (e.g. `ToBeDeletedByClusterAutoscaler`).
    pub taints: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// A drain requested of this node (`sluice.dev/drain: <reason>`).
    pub drain: Option<EvictionReason>,
    /// `sluice.dev/drain-cordoned`: the cordon is the agent's, made for a
    /// drain through the API (undone when the drain ends).
    pub cordoned_by_agent: bool,
    /// `sluice.dev/cordoned-at`: when an upgrade cordoned the node (A3's
    /// 7 days count from here); `None` when absent or unreadable.
    pub cordoned_at: Option<std::time::SystemTime>,
    /// `sluice.dev/pool-kind` label (default standard): what
    /// `safe-to-evict: "false"` protects from (E2, E5).
    pub pool: PoolKind,
}

impl NodeInfo {
    pub fn addr_v4(&self) -> Option<IpAddr> {
        self.addrs.iter().copied().find(IpAddr::is_ipv4)
    }
    pub fn addr_v6(&self) -> Option<IpAddr> {
        self.addrs.iter().copied().find(IpAddr::is_ipv6)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub key: String,
    pub node: String,
    pub ips: Vec<IpAddr>,
    /// An existing network namespace (name under /run/netns) to wire to the
    /// node, for pods whose processes someone else runs.
    pub netns: Option<String>,
    /// What the agent runs for this pod when it is scheduled here.
    pub run: PodRunSpec,
    pub labels: BTreeMap<String, String>,
    /// `status.conditions[type=Ready]`: `Some(status == "True")`, `None`
    /// when the file gives no Ready condition.
    pub ready: Option<bool>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.deletionTimestamp`: when a graceful deletion's grace ends
    /// (the agent stops the pod by then and deletes it).
    pub deletion_deadline: Option<std::time::SystemTime>,
    /// `metadata.uid` (API objects; the precondition of the agent's delete).
    pub uid: Option<String>,
    /// `spec.hostNetwork`: the pod's addresses are its node's.
    pub host_network: bool,
    /// What the pod's status already says that a status written again
    /// keeps (after an agent restart): its start and its conditions'
    /// transitions.
    pub reported: ReportedStatus,
    /// One eviction requested of this pod (`sluice.dev/evict: <reason>`).
    pub evict: Option<EvictionReason>,
    /// Controlled by a DaemonSet (`ownerReferences[controller=true]`): a
    /// drain leaves it, as `kubectl drain --ignore-daemonsets` does.
    pub daemon_set: bool,
}

/// `status.startTime` and `status.conditions[]` as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportedStatus {
    pub start_time: Option<std::time::SystemTime>,
    /// (type, status, lastTransitionTime).
    pub conditions: Vec<(String, String, Option<std::time::SystemTime>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrafficPolicy {
    Cluster,
    Local,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => sluice_datapath::maps::PROTO_TCP,
            Protocol::Udp => sluice_datapath::maps::PROTO_UDP,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetPort {
    Number(u16),
    Name(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServicePortInfo {
    /// `spec.ports[].name`, empty when the Service has a single unnamed port.
    pub name: String,
    pub port: u16,
    pub protocol: Protocol,
    pub target: TargetPort,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceInfo {
    pub key: String,
    pub policy: TrafficPolicy,
    /// `sessionAffinity: ClientIP` timeout in seconds.
    pub affinity_timeout_s: Option<u32>,
    pub health_check_node_port: Option<u16>,
    /// LoadBalancer ingress IPs (the VIPs).
    pub vips: Vec<IpAddr>,
    pub ports: Vec<ServicePortInfo>,
    pub endpoints: Vec<EndpointInfo>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EndpointInfo {
    pub addr: IpAddr,
    /// Shared between a slice's endpoints on one node (one allocation per
    /// slice and node rather than per endpoint).
    pub node: Option<Arc<str>>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// The slice's ports: (port name, protocol) → port number. Shared by
    /// every endpoint of a slice: one map per slice, not per endpoint (at
    /// 100 000 endpoints, tens of megabytes).
    pub ports: Arc<BTreeMap<(String, Protocol), u16>>,
}
