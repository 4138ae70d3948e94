//! The control side: pure functions from desired state to what the engines
//! and the node's network must hold. No I/O here, so every decision is tested
//! without namespaces.

pub mod content;
pub mod disruption;
pub mod overlay;
pub mod pods;
pub mod routes;
pub mod snat;

pub use content::{build_content, ControlError, MapContent};
pub use snat::SnatPorts;

use std::net::IpAddr;

use sluice_datapath::maps::{v4_mapped, Addr};

/// The datapath stores both families in 16 bytes, IPv4 mapped.
pub fn to_addr(ip: IpAddr) -> Addr {
    match ip {
        IpAddr::V4(v4) => v4_mapped(v4.octets()),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// FNV-1a: a stable, dependency-free hash for identifiers that must come out
/// the same on every node and every restart.
pub fn stable_hash(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
