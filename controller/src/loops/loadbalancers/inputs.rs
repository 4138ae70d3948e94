//! What the load-balancer loop reads of the upstream objects, read once
//! into plain values: a Node's zone, InternalIPs and exclusion facts, a
//! Service's kind of LB, policy and frontends, the nodes serving it.
//! Pure, and forgiving: a field that cannot be read leaves the object out
//! of what it would feed (a node without a zone or an IPv4 InternalIP is
//! no backend; a frontend without an IP or with SCTP is not served), it
//! never fails the Service.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_model::k8s::{EndpointSlice, Node, Service};
use sluice_model::load_balancer::{ExternalTrafficPolicy, Frontend, Protocol};
use sluice_model::policy::eviction::DRAIN_ANNOTATION;
use sluice_subsetting::node::{EXCLUDE_LABEL, TO_BE_DELETED_TAINT};
use sluice_subsetting::TrafficPolicy;

/// The label holding a node's zone.
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// A Node as the load balancers see it: what decides whether and where
/// it is a backend, and the addresses it is reached at. Compared to tell
/// a change that matters from a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub name: String,
    pub zone: Option<String>,
    /// The first IPv4 InternalIP.
    pub ipv4: Option<String>,
    /// The first IPv6 InternalIP.
    pub ipv6: Option<String>,
    pub to_be_deleted: bool,
    pub exclude_label: bool,
    pub deleting: bool,
    /// Carries `sluice.dev/drain` (REFERENCE: nodes being drained are left
    /// out of the groups).
    pub draining: bool,
}

impl NodeFacts {
    pub fn of(n: &Node) -> NodeFacts {
        let labels = n.metadata.labels.as_ref();
        let internal: Vec<&str> = n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address.as_str())
            .collect();
        NodeFacts {
            name: n.metadata.name.clone().unwrap_or_default(),
            zone: labels
                .and_then(|l| l.get(ZONE))
                .filter(|z| !z.is_empty())
                .cloned(),
            ipv4: internal
                .iter()
                .find(|a| a.parse::<Ipv4Addr>().is_ok())
                .map(|a| a.to_string()),
            ipv6: internal
                .iter()
                .find(|a| a.parse::<Ipv6Addr>().is_ok())
                .map(|a| a.to_string()),
            to_be_deleted: n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT)),
            exclude_label: labels.is_some_and(|l| l.contains_key(EXCLUDE_LABEL)),
            deleting: n.metadata.deletion_timestamp.is_some(),
            draining: n
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(DRAIN_ANNOTATION)),
        }
    }

    /// The node for the backend decisions, if it can be one at all: it
    /// needs a name, a zone (groups are per zone) and an IPv4 InternalIP
    /// (what the load balancer sends to).
    pub fn decision_node(&self) -> Option<sluice_subsetting::Node> {
        let zone = self.zone.clone()?;
        self.ipv4.as_ref()?;
        if self.name.is_empty() {
            return None;
        }
        Some(sluice_subsetting::Node {
            name: self.name.clone(),
            zone,
            to_be_deleted: self.to_be_deleted,
            exclude_label: self.exclude_label,
            deleting: self.deleting,
            draining: self.draining,
        })
    }
}

/// `spec.type: LoadBalancer`.
pub fn is_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// `spec.externalTrafficPolicy`, absent (or anything unknown) as `Cluster`.
pub fn policy(svc: &Service) -> ExternalTrafficPolicy {
    match svc
        .spec
        .as_ref()
        .and_then(|s| s.external_traffic_policy.as_deref())
    {
        Some("Local") => ExternalTrafficPolicy::Local,
        _ => ExternalTrafficPolicy::Cluster,
    }
}

pub fn traffic_policy(p: ExternalTrafficPolicy) -> TrafficPolicy {
    match p {
        ExternalTrafficPolicy::Cluster => TrafficPolicy::Cluster,
        ExternalTrafficPolicy::Local => TrafficPolicy::Local,
    }
}

/// `spec.healthCheckNodePort`.
pub fn health_check_node_port(svc: &Service) -> Option<i64> {
    svc.spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .map(i64::from)
}

/// The Service's ingress IPs × its ports, each once, in the order the
/// Service lists them. A Service without an ingress IP yet, or without
/// ports, has none: its LB is made and serves nothing.
pub fn frontends(svc: &Service) -> Vec<Frontend> {
    let ips = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref())
        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok());
    let ports: Vec<(i64, Protocol)> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let protocol = match p.protocol.as_deref() {
                None | Some("TCP") => Protocol::Tcp,
                Some("UDP") => Protocol::Udp,
                // SCTP: no L4 load balancer of GKE's serves it.
                Some(_) => return None,
            };
            let port = i64::from(p.port);
            (1..=65535).contains(&port).then_some((port, protocol))
        })
        .collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for ip in ips {
        for &(port, protocol) in &ports {
            let f = Frontend {
                ip_address: ip.to_string(),
                port,
                protocol,
            };
            if seen.insert(f.clone()) {
                out.push(f);
            }
        }
    }
    out
}

/// The nodes with at least one serving endpoint of the Service (N3): ready
/// (or serving) and not terminating, as the agent's `Local` health check
/// counts them (H3).
pub fn serving_nodes<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> BTreeSet<String> {
    slices
        .into_iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| {
            let c = e.conditions.as_ref();
            let ready = c.and_then(|c| c.serving.or(c.ready)).unwrap_or(true);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            ready && !terminating
        })
        .filter_map(|e| e.node_name.clone())
        .collect()
}
