//! Desired state to map content: the services, endpoint slots and Maglev
//! windows this node's packet program must see.

use std::fmt;
use std::net::IpAddr;

use sluice_datapath::host::{ServiceSpec, ServiceTables};
use sluice_datapath::maps::{
    Endpoint, NodeConfig, ServiceKey, EP_F_LOCAL, SVC_F_AFFINITY, SVC_F_LOCAL,
};

use super::to_addr;
use crate::state::{
    DesiredState, EndpointInfo, ServiceInfo, ServicePortInfo, TargetPort, TrafficPolicy,
};

/// SNAT source ports by default. Above the kernel's default ephemeral
/// range (32768-60999), so translated flows never collide with the node's
/// own outgoing connections to the same pod. 4 536 ports per (node,
/// endpoint); the program hands a port on when its flow has ended and the
/// endpoint's TIME_WAIT would take the new SYN (`conntrack::port_use`).
pub const SNAT_PORT_MIN: u16 = 61_000;
pub const SNAT_PORT_MAX: u16 = 65_535;

/// The node's SNAT source port range (`--snat-port-range`), inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnatPorts {
    pub first: u16,
    pub last: u16,
}

impl Default for SnatPorts {
    fn default() -> Self {
        SnatPorts {
            first: SNAT_PORT_MIN,
            last: SNAT_PORT_MAX,
        }
    }
}

impl fmt::Display for SnatPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Below this, ports are the node's own services' (`ip_unprivileged_port_start`).
const SNAT_PORT_FLOOR: u16 = 1024;

impl std::str::FromStr for SnatPorts {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("{s:?}: expected FIRST-LAST, e.g. 61000-65535"))?;
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("{s:?}: {t:?} is not a port (1024-65535)"))
        };
        let (first, last) = (port(a)?, port(b)?);
        if first < SNAT_PORT_FLOOR {
            return Err(format!(
                "{s:?}: ports below {SNAT_PORT_FLOOR} belong to the node's own services"
            ));
        }
        if first > last {
            return Err(format!("{s:?}: the first port is above the last"));
        }
        Ok(SnatPorts { first, last })
    }
}

impl SnatPorts {
    /// Where the range shares ports with the node's ephemeral range
    /// (`net.ipv4.ip_local_port_range`, "LOW HIGH"): a translated flow and
    /// one of the node's own connections to the same pod could then pick
    /// the same tuple.
    pub fn overlap_with_local(&self, local_port_range: &str) -> Option<(u16, u16)> {
        let mut it = local_port_range
            .split_whitespace()
            .map(|t| t.parse::<u16>());
        let (Some(Ok(low)), Some(Ok(high))) = (it.next(), it.next()) else {
            return None;
        };
        let (a, b) = (self.first.max(low), self.last.min(high));
        (a <= b).then_some((a, b))
    }
}

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
        key: ServiceKey {
            addr: to_addr(vip),
            port: port.port,
            proto: port.protocol.number(),
            _pad: 0,
        },
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

#[cfg(test)]
mod snat_ports_tests {
    use super::SnatPorts;

    // spec: P3 (the SNAT range is the operator's, checked whole)
    #[test]
    fn the_range_parses_and_bad_ones_are_named() {
        assert_eq!("61000-65535".parse::<SnatPorts>(), Ok(SnatPorts::default()));
        assert_eq!(
            " 2000 - 2007 ".parse::<SnatPorts>(),
            Ok(SnatPorts {
                first: 2000,
                last: 2007
            })
        );
        for (bad, says) in [
            ("", "expected FIRST-LAST"),
            ("61000", "expected FIRST-LAST"),
            ("61000-70000", "\"70000\" is not a port"),
            ("a-b", "\"a\" is not a port"),
            ("80-90", "below 1024"),
            ("65000-61000", "above the last"),
        ] {
            let e = bad.parse::<SnatPorts>().expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn overlap_with_the_ephemeral_range_is_found() {
        let default = SnatPorts::default();
        assert_eq!(default.overlap_with_local("32768\t60999\n"), None);
        assert_eq!(
            default.overlap_with_local("32768 61999"),
            Some((61000, 61999))
        );
        let wide = SnatPorts {
            first: 1024,
            last: 65535,
        };
        assert_eq!(wide.overlap_with_local("32768 60999"), Some((32768, 60999)));
        assert_eq!(default.overlap_with_local("garbage"), None);
    }
}
