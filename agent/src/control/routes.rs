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
    // A dead node's Node can linger while its replacement, this node, has
    // been given its address: a route via one of this node's own
    // addresses is refused by the kernel ("Gateway can not be a local
    // address") and would fail the whole apply until that Node goes.
    let own: Vec<IpAddr> = state
        .nodes
        .values()
        .filter(|n| n.name == node_name)
        .flat_map(|n| n.addrs.iter().copied())
        .collect();
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
            if let Some(via) = via.filter(|v| !own.contains(v)) {
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
