//! Map keys and values shared by the program and the control side.
//!
//! `#[repr(C)]`, plain old data, explicit padding: the same bytes live in
//! kernel maps and in the host maps, and the differential test compares them.
//! Addresses are 16 bytes for both families; IPv4 is stored IPv4-mapped
//! (`::ffff:a.b.c.d`). Ports are host byte order.

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
    a[0] == 0
        && a[1] == 0
        && a[2] == 0
        && a[3] == 0
        && a[4] == 0
        && a[5] == 0
        && a[6] == 0
        && a[7] == 0
        && a[8] == 0
        && a[9] == 0
        && a[10] == 0xff
        && a[11] == 0xff
}

/// A LoadBalancer frontend: the VIP, `spec.ports[].port` and protocol.
#[repr(C)]
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
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: Addr,
    pub port: u16,
    pub flags: u16,
    pub _pad: u32,
}

/// What the program needs to know of the node it runs on.
#[repr(C)]
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

// Conntrack and affinity: owned by the program; the control side only reads
// and expires them.

/// A conntrack tuple as seen on the wire.
///
/// Every translated flow has two entries. Forward (`dir` 0): client to VIP,
/// as the client sent it. Reply (`dir` 1): endpoint to the SNAT address
/// (`Cluster`) or to the client (`Local`), as the endpoint answers. Each
/// entry's value is enough to rebuild the other one (see
/// `conntrack::mirror`), so the pair is kept in step without extra lookups.
#[repr(C)]
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

/// The translation to apply to packets matching a [`CtKey`], and the state
/// of the flow (the same in both entries of a pair).
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
    pub state: u8,
    pub flags: u8,
    pub _pad: [u8; 2],
    pub svc_id: u32,
    pub _pad2: u32,
    pub last_seen_ns: u64,
    /// Monotonic time after which the entry counts as absent.
    pub expires_ns: u64,
}

#[repr(C)]
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
