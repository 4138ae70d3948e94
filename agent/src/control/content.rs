//! Desired state to map content: the services, endpoint slots and Maglev
//! windows this node's packet program must see.

use std::fmt;
use std::net::IpAddr;

use sluice_datapath::host::{ServiceSpec, ServiceTables};
use sluice_datapath::maps::{
    Endpoint, NodeConfig, ServiceKey, EP_F_LOCAL, SVC_F_AFFINITY, SVC_F_LOCAL,
};

use super::snat::SnatPorts;
use super::to_addr;
use crate::state::{
    DesiredState, EndpointInfo, ServiceInfo, ServicePortInfo, TargetPort, TrafficPolicy,
};

/// Everything the control side writes into the packet program's maps, as one
/// value so an engine can swap it in atomically.
#[derive(Debug, Clone, Default)]
pub struct MapContent {
    pub node: NodeConfig,
    /// Services, endpoint slots (ready first) and Maglev windows, laid out
    /// by the datapath's own builder so both engines read the same layout.
    pub tables: ServiceTables,
}

impl MapContent {
    /// The same content with the node's SNAT ports set to `ports`.
    pub fn with_snat_ports(mut self, ports: SnatPorts) -> Self {
        self.node.snat_port_min = ports.first;
        self.node.snat_port_max = ports.last;
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    NodeMissing(String),
    NoNodeAddress(String),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::NodeMissing(n) => write!(f, "no Node object named {n:?} in the state"),
            ControlError::NoNodeAddress(n) => {
                write!(f, "Node {n:?} has no InternalIP in status.addresses")
            }
        }
    }
}

impl std::error::Error for ControlError {}

/// Compute the map content for `node_name`.
pub fn build_content(state: &DesiredState, node_name: &str) -> Result<MapContent, ControlError> {
    let node = state
        .nodes
        .get(node_name)
        .ok_or_else(|| ControlError::NodeMissing(node_name.to_string()))?;
    if node.addrs.is_empty() {
        return Err(ControlError::NoNodeAddress(node_name.to_string()));
    }
    // BTreeMap order: the same file gives the same layout on every node.
    let specs: Vec<ServiceSpec> = state
        .services
        .values()
        .flat_map(|svc| {
            svc.ports.iter().flat_map(move |port| {
                svc.vips
                    .iter()
                    .map(move |vip| frontend(svc, port, *vip, node_name))
            })
        })
        .collect();
    Ok(MapContent {
        node: NodeConfig {
            addr4: node.addr_v4().map(to_addr).unwrap_or([0; 16]),
            addr6: node.addr_v6().map(to_addr).unwrap_or([0; 16]),
            snat_port_min: SnatPorts::default().first,
            snat_port_max: SnatPorts::default().last,
            _pad: 0,
        },
        tables: ServiceTables::build(&specs),
    })
}

/// The datapath's key of `port` of a Service at `vip`.
pub fn frontend_key(port: &ServicePortInfo, vip: IpAddr) -> ServiceKey {
    ServiceKey {
        addr: to_addr(vip),
        port: port.port,
        proto: port.protocol.number(),
        _pad: 0,
    }
}

fn frontend(
    svc: &ServiceInfo,
    port: &ServicePortInfo,
    vip: IpAddr,
    node_name: &str,
) -> ServiceSpec {
    let mut ready: Vec<Endpoint> = Vec::new();
    let mut terminating: Vec<Endpoint> = Vec::new();
    for ep in &svc.endpoints {
        if ep.addr.is_ipv4() != vip.is_ipv4() {
            continue;
        }
        let local = ep.node.as_deref() == Some(node_name);
        // P4: a Local service only ever sees this node's endpoints.
        if svc.policy == TrafficPolicy::Local && !local {
            continue;
        }
        let Some(target) = target_port(ep, port) else {
            continue;
        };
        let slot = Endpoint {
            addr: to_addr(ep.addr),
            port: target,
            flags: if local { EP_F_LOCAL } else { 0 },
            _pad: 0,
        };
        // Kubernetes: ready implies not terminating; serving-and-terminating
        // endpoints are the P5 fallback.
        if ep.ready && !ep.terminating {
            push_unique(&mut ready, slot);
        } else if ep.serving && ep.terminating {
            push_unique(&mut terminating, slot);
        }
    }
    let mut flags = 0;
    if svc.policy == TrafficPolicy::Local {
        flags |= SVC_F_LOCAL;
    }
    if svc.affinity_timeout_s.is_some() {
        flags |= SVC_F_AFFINITY;
    }
    ServiceSpec {
        key: frontend_key(port, vip),
        // Derived from the frontend key: stable across resyncs and nodes.
        id: 0,
        flags,
        affinity_timeout_s: svc.affinity_timeout_s.unwrap_or(0),
        ready,
        terminating,
    }
}

/// kube-proxy's rule: the endpoint's port is the EndpointSlice port with the
/// Service port's name and protocol; a numeric `targetPort` serves when the
/// slice lists no ports at all.
fn target_port(ep: &EndpointInfo, port: &ServicePortInfo) -> Option<u16> {
    if let Some(p) = ep.ports.get(&(port.name.clone(), port.protocol)) {
        return Some(*p);
    }
    match (&port.target, ep.ports.is_empty()) {
        (TargetPort::Number(n), true) => Some(*n),
        _ => None,
    }
}

fn push_unique(v: &mut Vec<Endpoint>, e: Endpoint) {
    if !v.iter().any(|x| x.addr == e.addr && x.port == e.port) {
        v.push(e);
    }
}
