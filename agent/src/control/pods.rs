//! Which pods this node must wire, and how their links are named and
//! addressed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::IpNet;

use super::stable_hash;
use crate::state::DesiredState;

/// Where network namespaces named by `ip netns` live.
pub const NETNS_DIR: &str = "/run/netns";

/// A pod's link to the node, engine-independent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLinkSpec {
    pub key: String,
    pub netns: PathBuf,
    pub pod_ifname: String,
    /// Unique on the node and at most 15 bytes (IFNAMSIZ - 1).
    pub host_ifname: String,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// The first host of the node's IPv4 pod range: the pods' default gateway.
    pub gateway4: Option<Ipv4Addr>,
}

/// Host-side link name: a stable hash of the pod's key, so a restarted agent
/// finds the links it made.
pub fn host_ifname(key: &str) -> String {
    format!("slp{:08x}", stable_hash(key))
}

pub fn gateway4(state: &DesiredState, node_name: &str) -> Option<Ipv4Addr> {
    let node = state.nodes.get(node_name)?;
    node.pod_cidrs.iter().find_map(|c| match c {
        IpNet::V4(n) => {
            let first = u32::from(n.network()).checked_add(1)?;
            n.contains(&Ipv4Addr::from(first))
                .then(|| Ipv4Addr::from(first))
        }
        IpNet::V6(_) => None,
    })
}

/// The links of this node's pods: in the namespace the pod names
/// (`sluice.dev/netns`), else in the one the agent makes for it.
pub fn desired_pod_links(state: &DesiredState, node_name: &str) -> Vec<PodLinkSpec> {
    let gw = gateway4(state, node_name);
    state
        .pods
        .values()
        .filter(|p| p.node == node_name)
        .map(|p| {
            let netns = p
                .netns
                .clone()
                .unwrap_or_else(|| crate::pods::netns_name(&p.key));
            PodLinkSpec {
                key: p.key.clone(),
                netns: PathBuf::from(NETNS_DIR).join(netns),
                pod_ifname: "eth0".to_string(),
                host_ifname: host_ifname(&p.key),
                ipv4: p.ips.iter().find_map(|ip| match ip {
                    IpAddr::V4(v) => Some(*v),
                    IpAddr::V6(_) => None,
                }),
                ipv6: p.ips.iter().find_map(|ip| match ip {
                    IpAddr::V6(v) => Some(*v),
                    IpAddr::V4(_) => None,
                }),
                gateway4: gw,
            }
        })
        .collect()
}
