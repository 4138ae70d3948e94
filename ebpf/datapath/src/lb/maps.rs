//! The load balancer's map keys and values, shared by its TC program
//! (`ebpf/programs`, bin `sluice-lb`), its engines (`agent/lb`) and the
//! host build.
//!
//! `#[repr(C)]`, plain old data, explicit padding, sizes asserted at the
//! bottom: the same bytes live in the kernel maps and in the host maps.
//! Addresses are 16 bytes, IPv4 stored IPv4-mapped, ports in host byte
//! order, as in [`crate::maps`]. The maps are the load balancer's own
//! (`SLB_*`): the agent's object creates none of them and this one none of
//! the agent's.

pub use crate::maps::{Addr, MaglevChunk, MAGLEV_CHUNK, PROTO_TCP, PROTO_UDP};

/// Hash: [`FrontendKey`] → [`FrontendValue`] (frontends and VIP markers).
pub const MAP_LB_FRONTENDS: &str = "SLB_FRONTENDS";
/// Hash: backend id (`u32`) → [`LbBackend`].
pub const MAP_LB_BACKENDS: &str = "SLB_BACKENDS";
/// Array: chunk → [`MaglevChunk`] of backend ids; entry `i` of the flat
/// array is `chunk[i / MAGLEV_CHUNK][i % MAGLEV_CHUNK]`.
pub const MAP_LB_MAGLEV: &str = "SLB_MAGLEV";
/// LRU hash: [`FlowKey`] → [`FlowValue`].
pub const MAP_LB_FLOWS: &str = "SLB_FLOWS";
/// Array: 0 → [`LbConfig`].
pub const MAP_LB_CONFIG: &str = "SLB_CONFIG";
/// Per-CPU array: [`super::LbEvent`] index, then one per verdict kind
/// ([`super::LbVerdict::counter_index`]) → count (`u64`).
pub const MAP_LB_EVENTS: &str = "SLB_EVENTS";
/// Per-CPU hash: backend id (`u32`) → frames delivered to it (`u64`).
pub const MAP_LB_PACKETS: &str = "SLB_PACKETS";

/// Frontend keys: every (VIP, port, protocol) plus one marker per VIP.
pub const LB_FRONTENDS_MAX_ENTRIES: u32 = 16_384;
/// Configured backends, all Services together.
pub const LB_BACKENDS_MAX_ENTRIES: u32 = 65_536;
/// Maglev entries of one generation: the kernel array holds two
/// ([`LB_MAGLEV_MAX_ENTRIES`]), the live one and the one the next update
/// is written into (4 MiB each).
pub const LB_MAGLEV_GENERATION_ENTRIES: u32 = 1 << 20;
/// Entries of the whole kernel Maglev array: two generations.
pub const LB_MAGLEV_MAX_ENTRIES: u32 = 2 * LB_MAGLEV_GENERATION_ENTRIES;
/// Elements (chunks) of `SLB_MAGLEV`.
pub const LB_MAGLEV_MAX_CHUNKS: u32 = LB_MAGLEV_MAX_ENTRIES / MAGLEV_CHUNK;
/// Flow table entries (an LRU: the least recently used flow makes room).
pub const LB_FLOWS_MAX_ENTRIES: u32 = 262_144;
/// Per-backend counters (one per configured backend at most).
pub const LB_PACKETS_MAX_ENTRIES: u32 = LB_BACKENDS_MAX_ENTRIES;
/// One configuration, index 0.
pub const LB_CONFIG_MAX_ENTRIES: u32 = 1;
/// One counter per event, then one per verdict kind.
pub const LB_EVENTS_MAX_ENTRIES: u32 = super::LbEvent::COUNT as u32 + 3;

/// A flow's last-seen time is rewritten only when it is at least this old:
/// an established packet costs lookups, not a map write.
pub const FLOW_TOUCH_NS: u64 = 1_000_000_000;

/// A VIP frontend: address, port, protocol (`PROTO_TCP` / `PROTO_UDP`).
/// Port 0 and protocol 0 is the VIP's marker (see [`vip_marker`]).
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrontendKey {
    pub addr: Addr,
    pub port: u16,
    pub proto: u8,
    pub _pad: u8,
}

/// The marker value: the key names a VIP, not a frontend.
pub const FE_F_MARKER: u32 = 1 << 0;

/// Where a frontend's Service is: its Maglev window (backend ids, built by
/// the control side over the healthy backends, or over all configured ones
/// when none is healthy) and counts. Every frontend of a Service carries
/// the same value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrontendValue {
    /// The Service's id: a backend serves a frontend only if its
    /// [`LbBackend::service`] is the same.
    pub service: u32,
    /// `FE_F_*`.
    pub flags: u32,
    /// Configured backends (healthy or not).
    pub backends: u32,
    /// Healthy backends among them.
    pub healthy: u32,
    pub maglev_base: u32,
    /// 0: nothing to deliver to (no backend with a usable MAC).
    pub maglev_size: u32,
}

/// The backend passed its health checks.
pub const BE_F_HEALTHY: u8 = 1 << 0;

/// A configured backend: a node behind a Service, reached at L2.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbBackend {
    /// The Service it serves (see [`FrontendValue::service`]).
    pub service: u32,
    /// Destination MAC of frames delivered to it.
    pub mac: [u8; 6],
    /// `BE_F_*`.
    pub flags: u8,
    pub _pad: u8,
}

impl LbBackend {
    #[inline(always)]
    pub fn healthy(&self) -> bool {
        self.flags & BE_F_HEALTHY != 0
    }
}

/// A flow as the client sent it.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub saddr: Addr,
    pub daddr: Addr,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub _pad: [u8; 3],
}

/// The backend a flow goes to, and when it was last seen (monotonic ns,
/// refreshed at most once per [`FLOW_TOUCH_NS`]).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowValue {
    pub backend: u32,
    pub _pad: u32,
    pub last_seen_ns: u64,
}

/// The load balancer's own interface.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbConfig {
    /// Source MAC of delivered frames; all zero: not configured yet (VIP
    /// frames are dropped).
    pub mac: [u8; 6],
    pub _pad: [u8; 2],
    /// The interface's index (kernel engine; informational, the program
    /// transmits on the interface the frame came in on).
    pub ifindex: u32,
}

/// The marker key of a VIP: packets aimed at the VIP that match no
/// frontend (another port, ICMP, fragments, cut-off headers) are dropped
/// rather than handed to the load balancer's own stack, which does not own
/// the address.
#[inline(always)]
pub const fn vip_marker(addr: &Addr) -> FrontendKey {
    FrontendKey {
        addr: *addr,
        port: 0,
        proto: 0,
        _pad: 0,
    }
}

#[inline(always)]
pub(crate) fn mac_is_zero(m: &[u8; 6]) -> bool {
    (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0
}

const _: () = {
    use core::mem::size_of;
    assert!(size_of::<FrontendKey>() == 20);
    assert!(size_of::<FrontendValue>() == 24);
    assert!(size_of::<LbBackend>() == 12);
    assert!(size_of::<FlowKey>() == 40);
    assert!(size_of::<FlowValue>() == 16);
    assert!(size_of::<LbConfig>() == 12);
    assert!(LB_MAGLEV_GENERATION_ENTRIES.is_multiple_of(MAGLEV_CHUNK));
};
