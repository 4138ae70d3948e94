//! Routes between nodes' pod ranges: each other node's `podCIDRs` via its
//! InternalIP of the same family (host-gateway routing, as flannel's host-gw
//! or kube-router do on a flat node network).

use std::net::IpAddr;

use ipnet::IpNet;

use crate::state::DesiredState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRoute {
    pub dst: IpNet,
    pub via: IpAddr,
}

pub fn desired_routes(state: &DesiredState, node_name: &str) -> Vec<PodRoute> {
    let mut out = Vec::new();
    for node in state.nodes.values() {
        if node.name == node_name {
            continue;
        }
        for cidr in &node.pod_cidrs {
            let via = match cidr {
                IpNet::V4(_) => node.addr_v4(),
                IpNet::V6(_) => node.addr_v6(),
            };
            if let Some(via) = via {
                out.push(PodRoute { dst: *cidr, via });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// What to add and what to remove to go from `have` to `want`.
pub fn diff(have: &[PodRoute], want: &[PodRoute]) -> (Vec<PodRoute>, Vec<PodRoute>) {
    let add = want.iter().filter(|r| !have.contains(r)).copied().collect();
    let del = have.iter().filter(|r| !want.contains(r)).copied().collect();
    (add, del)
}
