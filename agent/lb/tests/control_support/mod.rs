//! What the namespace tests share: a load-balancer namespace and a node
//! namespace on one veth, the node's health port bound.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use sluice_lb::neighbours::parse_mac;
use sluice_tests::Netns;

pub struct Segment {
    /// `lb0`, 198.18.`net`.1/24.
    pub lb: Netns,
    /// `nic0`, 198.18.`net`.2/24.
    pub node: Netns,
    pub node_mac: [u8; 6],
    /// The node's 10256, bound in the node's namespace, non-blocking (for
    /// tokio), not yet served.
    pub health: std::net::TcpListener,
    pub health_addr: SocketAddr,
}

/// A fresh segment; `net` keeps parallel tests' subnets apart.
pub fn segment(tag: &str, net: u8) -> Segment {
    let lb = Netns::new(tag).expect("namespace");
    let node = Netns::new(&format!("{tag}n")).expect("namespace");
    lb.veth_to("lb0", &node, "nic0").expect("veth");
    lb.addr_add("lb0", &format!("198.18.{net}.1/24"))
        .expect("address");
    node.addr_add("nic0", &format!("198.18.{net}.2/24"))
        .expect("address");
    let link: serde_json::Value = serde_json::from_str(
        &node
            .ip(&["-j", "link", "show", "dev", "nic0"])
            .expect("link"),
    )
    .expect("json");
    let node_mac = link[0]["address"]
        .as_str()
        .and_then(parse_mac)
        .expect("the node's MAC");
    let health_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, net, 2)), 10256);
    let health = node
        .in_ns(move || std::net::TcpListener::bind(health_addr))
        .expect("in the node")
        .expect("bind");
    health.set_nonblocking(true).expect("nonblocking");
    Segment {
        lb,
        node,
        node_mac,
        health,
        health_addr,
    }
}
