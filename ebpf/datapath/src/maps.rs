//! Map keys and values shared by the program and the control side.
//!
//! `#[repr(C)]`, plain old data, explicit padding: the same bytes live in
//! kernel maps and in the host maps, and the differential test compares them.
//! Addresses are 16 bytes for both families; IPv4 is stored IPv4-mapped
//! (`::ffff:a.b.c.d`). Ports are host byte order.
//!
//! Every type holding an address is at least 4-byte aligned (sizes are
//! unchanged: each already was a multiple of its new alignment). The BPF
//! backend cannot load misaligned words, so a byte-aligned address is
//! compared and checksummed byte by byte; aligned, it takes four word loads.
//! See `ebpf/programs/VERIFIER_NOTES.md`.

use crate::Event;

// The kernel maps (`ebpf/programs` defines them, the agent's kernel engine
// opens them by name). Kernel map names keep the first 15 bytes
// (`SLUICE_ENDPOINT` in `bpftool map`); aya finds them by the full name.

/// Hash: [`ServiceKey`] → [`ServiceValue`].
pub const MAP_SERVICES: &str = "SLUICE_SERVICES";
/// Array: slot → [`Endpoint`].
pub const MAP_ENDPOINTS: &str = "SLUICE_ENDPOINTS";
/// Array: chunk → [`MaglevChunk`] ([`MAGLEV_CHUNK`] slot offsets): entry
/// `i` of the flat Maglev array is `chunk[i / MAGLEV_CHUNK][i % MAGLEV_CHUNK]`.
pub const MAP_MAGLEV: &str = "SLUICE_MAGLEV";
/// LRU hash: [`CtKey`] → [`CtValue`].
pub const MAP_CT: &str = "SLUICE_CT";
/// LRU hash: [`AffinityKey`] → [`AffinityValue`].
pub const MAP_AFFINITY: &str = "SLUICE_AFFINITY";
/// Array: 0 → [`NodeConfig`].
pub const MAP_NODE: &str = "SLUICE_NODE";
/// Per-CPU array: `Event as u32` → count (`u64`).
pub const MAP_EVENTS: &str = "SLUICE_EVENTS";
/// Hash: [`LocalKey`] → [`LocalLink`]: this node's pods, whose translated
/// packets go straight to their link.
pub const MAP_LOCAL: &str = "SLUICE_LOCAL";
/// LRU per-CPU hash: [`SnatExhaustKey`] → count (`u64`): new flows reset
/// for want of a SNAT port, by Service and endpoint.
pub const MAP_SNAT_EXHAUSTED: &str = "SLUICE_SNAT_EXHAUSTED";

// Service-side sizes: what the object declares and the agent's defaults
// (`--bpf-service-entries`, `--bpf-endpoint-entries`,
// `--bpf-maglev-entries` override them at load). Sized so 10 000 Services
// of 10 endpoints, or 20 000 of one, fit with room for changes; see
// docs/architecture.md, "Map sizes".

/// Frontends and VIP markers (a hash map: 65 536 keys).
pub const SERVICES_MAX_ENTRIES: u32 = 65_536;
/// Endpoint slots, ready-first per service (24 B each: 12 MiB).
pub const ENDPOINTS_MAX_ENTRIES: u32 = 524_288;
/// Entries of the flat Maglev array (each service owns a prime-sized
/// window; 4 B each, packed in chunks: 64 MiB).
pub const MAGLEV_MAX_ENTRIES: u32 = 16_777_216;
/// Maglev entries per element of `SLUICE_MAGLEV`. A kernel array rounds
/// every value up to 8 bytes, so one `u32` per element would cost 8; 256
/// per element cost exactly 4 each, and a service's window (at least 251
/// entries) is written as a few whole elements instead of hundreds.
pub const MAGLEV_CHUNK: u32 = 256;
/// One element of `SLUICE_MAGLEV`.
pub type MaglevChunk = [u32; MAGLEV_CHUNK as usize];
/// Elements of `SLUICE_MAGLEV` the object declares.
pub const MAGLEV_MAX_CHUNKS: u32 = MAGLEV_MAX_ENTRIES / MAGLEV_CHUNK;
/// Conntrack entries (two per translated flow).
pub const CT_MAX_ENTRIES: u32 = 262_144;
/// Session affinity entries.
pub const AFFINITY_MAX_ENTRIES: u32 = 65_536;
/// One node configuration, index 0.
pub const NODE_MAX_ENTRIES: u32 = 1;
/// One counter per [`Event`], then one per kind of verdict
/// ([`crate::Verdict::counter_index`]).
pub const EVENTS_MAX_ENTRIES: u32 = Event::COUNT as u32 + 3;
/// Pod addresses on this node.
pub const LOCAL_MAX_ENTRIES: u32 = 16_384;
/// (Service, endpoint) pairs whose SNAT ports ran out; the least recently
/// counted go first.
pub const SNAT_EXHAUSTED_MAX_ENTRIES: u32 = 1_024;

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

/// Address as stored in maps.
pub type Addr = [u8; 16];

/// `::ffff:a.b.c.d`
pub const fn v4_mapped(a: [u8; 4]) -> Addr {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
    ]
}

pub const fn is_v4_mapped(a: &Addr) -> bool {
    addr_word(a, 0) == 0 && addr_word(a, 1) == 0 && addr_word(a, 2) == 0x0000_ffff
}

/// Word `i` (0..=3) of an address, big-endian. Indices past the end read
/// as 0. Whole-word loads: see the module note on alignment.
#[inline(always)]
pub const fn addr_word(a: &Addr, i: usize) -> u32 {
    let o = i * 4;
    if o + 4 > a.len() {
        return 0;
    }
    u32::from_be_bytes([a[o], a[o + 1], a[o + 2], a[o + 3]])
}

/// Address equality, word by word.
#[inline(always)]
pub const fn addr_eq(a: &Addr, b: &Addr) -> bool {
    addr_word(a, 0) == addr_word(b, 0)
        && addr_word(a, 1) == addr_word(b, 1)
        && addr_word(a, 2) == addr_word(b, 2)
        && addr_word(a, 3) == addr_word(b, 3)
}

/// The all-zero address ("none" in [`NodeConfig`]).
#[inline(always)]
pub const fn addr_is_zero(a: &Addr) -> bool {
    addr_word(a, 0) == 0 && addr_word(a, 1) == 0 && addr_word(a, 2) == 0 && addr_word(a, 3) == 0
}

/// A LoadBalancer frontend: the VIP, `spec.ports[].port` and protocol.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ServiceKey {
    pub addr: Addr,
    pub port: u16,
    pub proto: u8,
    pub _pad: u8,
}

/// `externalTrafficPolicy: Local` (P4): no SNAT, only this node's endpoints
/// are in the slots.
pub const SVC_F_LOCAL: u32 = 1 << 0;
/// `sessionAffinity: ClientIP`.
pub const SVC_F_AFFINITY: u32 = 1 << 1;

/// One frontend. The control side lays the endpoint slots out ready-first:
/// `ep_base .. ep_base+ready` are ready, the next `terminating` are serving
/// and terminating (the P5 fallback). For `Local` services only this node's
/// endpoints are in the slots (P4); for `Cluster` all of them (P3).
/// The Maglev table (`maglev_base .. maglev_base+maglev_size`) holds slot
/// offsets relative to `ep_base`, over the ready endpoints only.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceValue {
    pub id: u32,
    pub flags: u32,
    pub ep_base: u32,
    pub ready: u32,
    pub terminating: u32,
    pub maglev_base: u32,
    pub maglev_size: u32,
    pub affinity_timeout_s: u32,
}

/// The endpoint runs on this node.
pub const EP_F_LOCAL: u16 = 1 << 0;

/// A backend: pod IP and the `targetPort` for this service port.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: Addr,
    pub port: u16,
    pub flags: u16,
    pub _pad: u32,
}

/// What the program needs to know of the node it runs on.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeConfig {
    /// SNAT source for IPv4 flows (IPv4-mapped); all zero: no IPv4 SNAT.
    pub addr4: Addr,
    /// SNAT source for IPv6 flows; all zero: no IPv6 SNAT.
    pub addr6: Addr,
    /// Inclusive SNAT source port range.
    pub snat_port_min: u16,
    pub snat_port_max: u16,
    pub _pad: u32,
}

/// A Service's endpoint for which a new flow found no SNAT port: what the
/// agent names in `/metrics` and in its log.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnatExhaustKey {
    /// The endpoint (IPv4-mapped for IPv4) and its port.
    pub addr: Addr,
    pub port: u16,
    pub _pad: u16,
    /// The frontend's `ServiceValue::id`.
    pub svc_id: u32,
}

/// A pod address on this node (IPv4-mapped for IPv4).
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalKey {
    pub addr: Addr,
}

/// How to hand a packet to a pod on this node without the node's routing:
/// the frame the node would have sent on the pod's link, built by the
/// program. Each engine fills these for the pods it plugged.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalLink {
    /// The link: the kernel's ifindex of the pod link's node side (kernel
    /// engine), the relay's id of the pod's link (emulated engine).
    pub ifindex: u32,
    /// Destination MAC: the pod's interface.
    pub pod_mac: [u8; 6],
    /// Source MAC: the node's side of the link, as the node's routing
    /// would have sent it.
    pub node_mac: [u8; 6],
}

// Conntrack and affinity: owned by the program; the control side only reads
// and expires them.

/// A conntrack tuple as seen on the wire.
///
/// Every translated flow has two entries. Forward (`dir` 0): client to VIP,
/// as the client sent it. Reply (`dir` 1): endpoint to the SNAT address
/// (`Cluster`) or to the client (`Local`), as the endpoint answers. Each
/// entry's value is enough to rebuild the other one (see
/// `conntrack::mirror`), so the pair is kept in step without extra lookups.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CtKey {
    pub saddr: Addr,
    pub daddr: Addr,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    /// 0: original direction (client to VIP), 1: reply (endpoint to client
    /// or to the SNAT address).
    pub dir: u8,
    pub _pad: [u8; 2],
}

pub const CT_DIR_FORWARD: u8 = 0;
pub const CT_DIR_REPLY: u8 = 1;

/// TCP states (`CtValue::state`). Non-TCP flows stay in `CT_STATE_NONE`.
pub const CT_STATE_NONE: u8 = 0;
pub const CT_STATE_SYN_SENT: u8 = 1;
pub const CT_STATE_ESTABLISHED: u8 = 2;
/// One side sent FIN.
pub const CT_STATE_FIN_WAIT: u8 = 3;
/// Both sides sent FIN.
pub const CT_STATE_CLOSING: u8 = 4;
/// RST seen.
pub const CT_STATE_CLOSED: u8 = 5;

/// `CtValue::flags`: the flow is SNATed (`Cluster`).
pub const CT_F_SNAT: u8 = 1 << 0;
/// FIN seen from the client.
pub const CT_F_FIN_FORWARD: u8 = 1 << 1;
/// FIN seen from the endpoint.
pub const CT_F_FIN_REPLY: u8 = 1 << 2;
/// The endpoint sent the first FIN: it is the side that keeps the tuple in
/// TIME_WAIT once the flow is over.
pub const CT_F_REPLY_CLOSED_FIRST: u8 = 1 << 3;
/// Both FINs were sent and the second was acknowledged: neither side has
/// anything left to send on the tuple.
pub const CT_F_LAST_ACK: u8 = 1 << 4;

/// The translation to apply to packets matching a [`CtKey`], and the state
/// of the flow (the same in both entries of a pair).
///
/// The client's packets and the endpoint's may be handled on two CPUs at
/// once, so an update never rewrites the whole value (a replaced value
/// loses whatever the other CPU wrote meanwhile): each side writes, in
/// place, only fields it owns. The TCP state is two such halves,
/// (`state`, `flags`) written by the client's packets and
/// (`rep_state`, `rep_flags`) by the endpoint's; the flow's state is their
/// merge (`conntrack::merged`). States only move forward, so the merge is
/// the later of the two and the union of the flags. `close_seq` and
/// `close_tsval` are the client's; `expires_ns` is written by both, and
/// each writer checks the merged state after its write (see
/// `conntrack::touch`). `seq_*` track the sequence space of the entry's own
/// direction, written only by packets looked up through that entry.
///
/// Forward entry: source := `nat_saddr:nat_sport` (node address and SNAT
/// port, or the client unchanged for `Local`), destination :=
/// `nat_daddr:nat_dport` (the endpoint). Reply entry: source := VIP:port,
/// destination := client address:port.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtValue {
    pub nat_saddr: Addr,
    pub nat_daddr: Addr,
    pub nat_sport: u16,
    pub nat_dport: u16,
    /// TCP state and `CT_F_*` flags as the client's packets left them.
    pub state: u8,
    pub flags: u8,
    /// The same, as the endpoint's packets left them.
    pub rep_state: u8,
    pub rep_flags: u8,
    pub svc_id: u32,
    /// The sequence number of the SYN that opened a TCP flow (0 for UDP).
    /// A SYN with another on a flow still in `SYN_SENT` is a new
    /// connection from a reused port, not a retransmission: its first try
    /// may have gone to an endpoint that has since died.
    pub syn_seq: u32,
    /// After the client's FIN: the sequence number the endpoint expects
    /// next from it (the FIN's own number, its payload and the FIN). A
    /// TIME_WAIT socket takes a new SYN on the tuple above it.
    pub close_seq: u32,
    /// The TCP timestamp on the client's FIN, 0 for none (as
    /// `Flow::tsval`): a TIME_WAIT socket takes a SYN with a newer one, and
    /// rejects an older one (PAWS, RFC 7323) whatever its sequence number.
    pub close_tsval: u32,
    /// Monotonic time after which the entry counts as absent.
    pub expires_ns: u64,
    /// The sequence number after the last byte (SYN and FIN included)
    /// this entry's direction sent; 0: nothing seen yet. (A direction whose
    /// count lands on 0 reads as not seen for a segment, once in 2^32, and
    /// starts over from its next: harmless.)
    pub seq_nxt: u32,
    /// The highest acknowledgment number this entry's direction sent; 0:
    /// none yet (the same aliasing).
    pub seq_ack: u32,
}

#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AffinityKey {
    pub client: Addr,
    pub svc_id: u32,
    pub _pad: u32,
}

/// The endpoint a client was sent to. `slot` (relative to the service's
/// `ep_base`) lets the program check in O(1) that the endpoint is still in
/// the service's serving slots: the control side may have moved it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AffinityValue {
    pub endpoint: Addr,
    pub port: u16,
    pub _pad: u16,
    pub slot: u32,
    pub last_used_ns: u64,
}

/// A wildcard frontend key (port 0, protocol 0) the control side may install
/// once per VIP, with any value: it lets the program recognise packets that
/// carry no port (non-first fragments, truncated headers) as aimed at a VIP
/// and drop them instead of passing them to the node kernel.
#[inline(always)]
pub const fn vip_marker_key(addr: &Addr) -> ServiceKey {
    ServiceKey {
        addr: *addr,
        port: 0,
        proto: 0,
        _pad: 0,
    }
}

// The layout is the contract with the kernel maps and the agent: sizes must
// not move when fields or alignments do.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<ServiceKey>() == 20);
    assert!(size_of::<ServiceValue>() == 32);
    assert!(size_of::<Endpoint>() == 24);
    assert!(size_of::<NodeConfig>() == 40);
    assert!(size_of::<CtKey>() == 40);
    assert!(size_of::<CtValue>() == 72);
    assert!(size_of::<AffinityKey>() == 24);
    assert!(size_of::<AffinityValue>() == 32);
    assert!(size_of::<LocalKey>() == 16);
    assert!(size_of::<LocalLink>() == 16);
    assert!(size_of::<MaglevChunk>() == 1024);
    assert!(MAGLEV_MAX_ENTRIES.is_multiple_of(MAGLEV_CHUNK));
    assert!(MAGLEV_CHUNK.is_power_of_two());
};
