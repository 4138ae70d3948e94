//! What the control side hands the engines: every Service's VIP frontends
//! and its backends with their health. Built from the configuration (the
//! API's load-balancer objects or a file) and the health prober's verdicts;
//! the engines turn it into Maglev tables and backend entries.

use std::net::IpAddr;

/// A backend's id: stable for as long as the backend (a node behind a
/// Service) stays configured, so the flow table can keep naming it across
/// updates; never reused while flows may still point at it.
pub type BackendId = u32;

/// The whole desired state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbDesired {
    pub services: Vec<LbService>,
}

impl LbDesired {
    /// Whether `service` has `node`'s backend at `address`.
    pub fn has_backend(&self, service: &str, node: &str, address: IpAddr) -> bool {
        self.services
            .iter()
            .filter(|s| s.name == service)
            .flat_map(|s| &s.backends)
            .any(|b| b.node == node && b.address == address)
    }
}

/// One load-balanced Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LbService {
    /// `namespace/name`, for metrics and logs.
    pub name: String,
    /// The VIP frontends (address, port, protocol) that lead to `backends`.
    pub frontends: Vec<Frontend>,
    /// Every configured backend, healthy or not, in a stable order.
    pub backends: Vec<Backend>,
}

/// One VIP frontend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frontend {
    pub address: IpAddr,
    pub port: u16,
    pub protocol: Protocol,
}

/// The L4 protocols a frontend takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// One backend node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    pub id: BackendId,
    /// The node's name, for metrics and logs.
    pub node: String,
    /// The address probed and whose neighbour entry gave `mac`.
    pub address: IpAddr,
    /// The node's link-layer address on the load balancer's segment: frames
    /// are delivered to it with the destination IP (the VIP) unchanged.
    pub mac: [u8; 6],
    /// The prober's verdict. New connections go to healthy backends only;
    /// when none is healthy, to all (as Google's passthrough load balancers
    /// do).
    pub healthy: bool,
}
