//! The endpoints a Service should publish: one per selected pod and
//! address family, with the ports resolved against that pod, grouped as
//! upstream groups them into slices (by family, then by port set).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ObjectReference, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
use sluice_model::k8s::{IntOrString, Node, Pod};
use sluice_model::policy::disruption::{PodFacts, Selector};

use super::meta::ServiceRef;
use crate::LifecycleError;

/// Node label the endpoint's `zone` is read from.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// An EndpointSlice `addressType` this controller publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressFamily {
    IPv4,
    IPv6,
}

impl AddressFamily {
    /// The API's spelling (`IPv4`, `IPv6`).
    pub fn as_str(self) -> &'static str {
        match self {
            AddressFamily::IPv4 => "IPv4",
            AddressFamily::IPv6 => "IPv6",
        }
    }

    /// Read `spec.ipFamilies[]` or a slice's `addressType`; `FQDN` and
    /// anything else is not a family of pod addresses.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IPv4" => Some(AddressFamily::IPv4),
            "IPv6" => Some(AddressFamily::IPv6),
            _ => None,
        }
    }

    /// The family of an address.
    pub fn of(ip: &IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => AddressFamily::IPv4,
            IpAddr::V6(_) => AddressFamily::IPv6,
        }
    }
}

/// A port set in a canonical order, so slices and endpoints with the same
/// ports in any order compare equal (upstream hashes the sorted set).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortKey(Vec<(String, String, i32, Option<String>)>);

impl PortKey {
    pub fn of(ports: &[EndpointPort]) -> Self {
        let mut key: Vec<_> = ports
            .iter()
            .map(|p| {
                (
                    p.name.clone().unwrap_or_default(),
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    p.port.unwrap_or_default(),
                    p.app_protocol.clone(),
                )
            })
            .collect();
        key.sort();
        PortKey(key)
    }
}

/// What makes two endpoints the same one, whatever their conditions:
/// upstream's endpoint hash covers the addresses, the hostname and the
/// pod's namespace and name. Ordered by pod first, so new endpoints are
/// laid out in pod name order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EndpointKey {
    pod: Option<(String, String)>,
    addresses: Vec<String>,
    hostname: Option<String>,
}

impl EndpointKey {
    pub fn of(ep: &Endpoint) -> Self {
        EndpointKey {
            addresses: ep.addresses.clone(),
            hostname: ep.hostname.clone(),
            pod: ep.target_ref.as_ref().map(|r| {
                (
                    r.namespace.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                )
            }),
        }
    }
}

/// The endpoints that share one port set, in key order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// The ports as the Service lists them.
    pub ports: Vec<EndpointPort>,
    pub endpoints: BTreeMap<EndpointKey, Endpoint>,
}

/// Every desired endpoint, by family, then by port set.
pub type Desired = BTreeMap<AddressFamily, BTreeMap<PortKey, Group>>;

/// The families the Service publishes, primary first: `spec.ipFamilies`,
/// else the families of its cluster IPs, else IPv4.
pub fn families(
    svc: &ServiceRef,
    spec: &ServiceSpec,
) -> Result<Vec<AddressFamily>, LifecycleError> {
    let mut out = Vec::new();
    let listed = spec.ip_families.as_deref().unwrap_or_default();
    for (i, f) in listed.iter().enumerate() {
        let family = AddressFamily::parse(f).ok_or_else(|| LifecycleError::Invalid {
            kind: "Service",
            object: format!("{}/{}", svc.namespace, svc.name),
            field: format!("spec.ipFamilies[{i}]"),
            message: format!("{f:?} is not IPv4 or IPv6"),
        })?;
        if !out.contains(&family) {
            out.push(family);
        }
    }
    if out.is_empty() {
        let ips = spec.cluster_ips.iter().flatten().chain(&spec.cluster_ip);
        for ip in ips.filter_map(|ip| ip.parse::<IpAddr>().ok()) {
            let family = AddressFamily::of(&ip);
            if !out.contains(&family) {
                out.push(family);
            }
        }
    }
    if out.is_empty() {
        out.push(AddressFamily::IPv4);
    }
    Ok(out)
}

/// The endpoints of the pods the Service selects: in its namespace,
/// matching its selector, not terminal, with an address of the family.
/// Pods being deleted stay, as terminating endpoints.
pub fn endpoints(
    svc: &ServiceRef,
    spec: &ServiceSpec,
    families: &[AddressFamily],
    pods: &[Pod],
    nodes: &[Node],
) -> Desired {
    let selector = Selector {
        match_labels: spec.selector.clone().unwrap_or_default(),
        match_expressions: Vec::new(),
    };
    let zones: BTreeMap<&str, &str> = nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let zone = n.metadata.labels.as_ref()?.get(ZONE_LABEL)?;
            Some((name, zone.as_str()))
        })
        .collect();
    let mut out = Desired::new();
    for pod in pods {
        let facts = PodFacts::of(&pod.metadata, pod.status.as_ref());
        if facts.namespace != svc.namespace
            || !selector.matches(&facts.labels)
            || matches!(facts.phase.as_str(), "Succeeded" | "Failed")
        {
            continue;
        }
        let ports = pod_ports(pod, spec.ports.as_deref().unwrap_or_default());
        let key = PortKey::of(&ports);
        for &family in families {
            let Some(address) = pod_address(pod, family) else {
                continue;
            };
            let ep = endpoint(svc, spec, pod, &facts, address, &zones);
            let group = out
                .entry(family)
                .or_default()
                .entry(key.clone())
                .or_default();
            group.ports.clone_from(&ports);
            group.endpoints.insert(EndpointKey::of(&ep), ep);
        }
    }
    out
}

fn endpoint(
    svc: &ServiceRef,
    spec: &ServiceSpec,
    pod: &Pod,
    facts: &PodFacts,
    address: String,
    zones: &BTreeMap<&str, &str>,
) -> Endpoint {
    let pod_spec = pod.spec.as_ref();
    let node_name = pod_spec.and_then(|s| s.node_name.clone());
    // Serving follows readiness alone; ready also needs the pod not to be
    // terminating, unless the Service publishes not-ready addresses.
    let serving = facts.ready;
    let terminating = facts.deleting;
    let ready = spec.publish_not_ready_addresses == Some(true) || (serving && !terminating);
    // A headless Service gives its pods DNS names when they ask for its
    // name as their subdomain.
    let hostname = pod_spec
        .filter(|s| svc.headless && s.subdomain.as_deref() == Some(svc.name.as_str()))
        .and_then(|s| s.hostname.clone());
    Endpoint {
        addresses: vec![address],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname,
        zone: node_name
            .as_deref()
            .and_then(|n| zones.get(n))
            .map(|z| z.to_string()),
        node_name,
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            name: Some(facts.name.clone()),
            namespace: Some(facts.namespace.clone()),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

/// The pod's first address of the family (`status.podIPs`, or the older
/// `status.podIP`).
fn pod_address(pod: &Pod, family: AddressFamily) -> Option<String> {
    let status = pod.status.as_ref()?;
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    listed
        .chain(status.pod_ip.as_deref())
        .find(|ip| {
            ip.parse::<IpAddr>()
                .is_ok_and(|a| AddressFamily::of(&a) == family)
        })
        .map(str::to_string)
}

/// The Service's ports as this pod serves them; a port whose named
/// `targetPort` the pod does not declare is left out for this pod, as
/// upstream does.
fn pod_ports(pod: &Pod, ports: &[ServicePort]) -> Vec<EndpointPort> {
    ports
        .iter()
        .filter_map(|sp| {
            let protocol = sp.protocol.clone().unwrap_or_else(|| "TCP".into());
            let port = target_port(pod, sp, &protocol)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                protocol: Some(protocol),
                port: Some(port),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

fn target_port(pod: &Pod, sp: &ServicePort, protocol: &str) -> Option<i32> {
    match &sp.target_port {
        None | Some(IntOrString::Int(0)) => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| {
                p.name.as_deref() == Some(name.as_str())
                    && p.protocol.as_deref().unwrap_or("TCP") == protocol
            })
            .map(|p| p.container_port),
    }
}
