//! The desired state as the program's tables: [`LbDesired`] turned into
//! `sluice_datapath::lb::host::LbTables`, the one layout both engines
//! write.

use std::net::IpAddr;

use anyhow::{Context, Result};
use sluice_datapath::lb::host::{LbBackendSpec, LbServiceSpec, LbTables};
use sluice_datapath::lb::maps::{Addr, FrontendKey, PROTO_TCP, PROTO_UDP};
use sluice_datapath::maps::v4_mapped;

use crate::desired::{LbDesired, Protocol};

/// An address as the maps store it (IPv4-mapped for IPv4).
pub fn map_addr(ip: IpAddr) -> Addr {
    match ip.to_canonical() {
        IpAddr::V4(a) => v4_mapped(a.octets()),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The builder's view of the desired state. A Service's id is a hash of
/// its name, so it stays the same across updates and restarts.
pub fn specs(desired: &LbDesired) -> Vec<LbServiceSpec> {
    desired
        .services
        .iter()
        .map(|s| LbServiceSpec {
            id: LbTables::service_id(&s.name),
            frontends: s
                .frontends
                .iter()
                .map(|f| FrontendKey {
                    addr: map_addr(f.address),
                    port: f.port,
                    proto: match f.protocol {
                        Protocol::Tcp => PROTO_TCP,
                        Protocol::Udp => PROTO_UDP,
                    },
                    _pad: 0,
                })
                .collect(),
            backends: s
                .backends
                .iter()
                .map(|b| LbBackendSpec {
                    id: b.id,
                    addr: map_addr(b.address),
                    mac: b.mac,
                    healthy: b.healthy,
                })
                .collect(),
        })
        .collect()
}

/// The tables of `desired`, or why it cannot be laid out (nothing is
/// applied then).
pub fn build(desired: &LbDesired) -> Result<LbTables> {
    LbTables::build(&specs(desired)).context("laying out the load balancer's tables")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{Backend, Frontend, LbService};

    #[test]
    fn desired_state_becomes_tables() {
        let d = LbDesired {
            services: vec![LbService {
                name: "default/web".into(),
                frontends: vec![
                    Frontend {
                        address: "198.51.100.10".parse().unwrap(),
                        port: 80,
                        protocol: Protocol::Tcp,
                    },
                    Frontend {
                        address: "::ffff:198.51.100.10".parse().unwrap(),
                        port: 53,
                        protocol: Protocol::Udp,
                    },
                ],
                backends: vec![Backend {
                    id: 7,
                    node: "node-1".into(),
                    address: "192.0.2.11".parse().unwrap(),
                    mac: [2, 0, 0, 0, 0, 7],
                    healthy: true,
                }],
            }],
        };
        let t = build(&d).unwrap();
        // Two frontends and one VIP marker (the mapped address is the same
        // VIP).
        assert_eq!(t.frontends.len(), 3);
        assert_eq!(t.backends[&7].service, LbTables::service_id("default/web"));
        assert!(t.maglev.iter().take(251).all(|&id| id == 7));
    }
}
