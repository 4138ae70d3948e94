//! Frame parsing: Ethernet (one optional 802.1Q tag), IPv4 with options,
//! IPv6 with hop-by-hop / destination-options headers skipped, TCP, UDP,
//! ICMP and ICMPv6.
//!
//! Every read goes through [`Packet::load`], so a truncated frame yields
//! `None` instead of an out-of-bounds access. Lengths come from the IP
//! header, not from the frame length, because Ethernet pads short frames.

use crate::env::Packet;
use crate::maps::{Addr, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};

pub const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;

const IPV6_HLEN: usize = 40;
const NEXTHDR_HOP: u8 = 0;
const NEXTHDR_DEST: u8 = 60;
const NEXTHDR_FRAGMENT: u8 = 44;
/// Hop-by-hop and destination options are skipped (they do not change
/// addressing); anything deeper than this many is left alone.
const MAX_SKIPPED_EXT: usize = 2;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_ACK: u8 = 0x10;

/// Where the L4 checksum sits, relative to the L4 header.
pub const TCP_CSUM_OFF: usize = 16;
pub const UDP_CSUM_OFF: usize = 6;

/// A parsed IP packet with a complete, handled L4 header.
///
/// Compact on purpose (56 bytes): the program keeps one for its whole run
/// and every sub-function reads it by reference. Offsets are `u16` (a frame
/// is at most 64 KiB); addresses are word-aligned (see `maps`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct Flow {
    pub saddr: Addr,
    pub daddr: Addr,
    /// Ports for TCP/UDP; zero for ICMP.
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub v6: bool,
    /// TCP only.
    pub tcp_flags: u8,
    /// TCP header length in bytes (20..=60); TCP only.
    pub tcp_hlen: u8,
    /// IPv4 TTL or IPv6 hop limit as received.
    pub ttl: u8,
    /// Offset of the IP header.
    pub l3: u16,
    /// Offset of the L4 header.
    pub l4: u16,
    /// Bytes of L4 header plus payload, from the IP header.
    pub l4_len: u16,
    /// IPv4 header checksum as received (the rewrite updates it itself and
    /// writes it with the addresses in one store); zero for IPv6.
    pub ip_csum: u16,
    /// TCP only.
    pub seq: u32,
    pub ack: u32,
    /// The TCP timestamp option's `TSval`, read on SYNs, FINs and segments
    /// without data only: what the SNAT allocator compares to decide
    /// whether an endpoint's TIME_WAIT socket takes a new connection on a
    /// tuple. 0: none (a
    /// `TSval` of 0 counts as none too; a flag would grow the program's
    /// per-run state past a stack frame it has no room for).
    pub tsval: u32,
}

impl Flow {
    /// The segment carried a TCP timestamp ([`Flow::tsval`]).
    #[inline(always)]
    pub fn has_ts(&self) -> bool {
        self.tsval != 0
    }

    #[inline(always)]
    pub fn is_tcp(&self) -> bool {
        self.proto == PROTO_TCP
    }

    #[inline(always)]
    pub fn is_udp(&self) -> bool {
        self.proto == PROTO_UDP
    }

    #[inline(always)]
    pub fn l3(&self) -> usize {
        usize::from(self.l3)
    }

    #[inline(always)]
    pub fn l4(&self) -> usize {
        usize::from(self.l4)
    }

    /// Offset of the L4 checksum for the protocols whose ports we rewrite.
    #[inline(always)]
    pub fn l4_csum_off(&self) -> Option<usize> {
        match self.proto {
            PROTO_TCP => Some(self.l4() + TCP_CSUM_OFF),
            PROTO_UDP => Some(self.l4() + UDP_CSUM_OFF),
            _ => None,
        }
    }

    /// TCP payload bytes (for the sequence space a reset must acknowledge).
    #[inline(always)]
    pub fn tcp_payload_len(&self) -> usize {
        usize::from(self.l4_len).saturating_sub(usize::from(self.tcp_hlen))
    }
}

/// What the parser made of a frame. Whatever it learnt is in the [`Flow`]
/// it filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not IPv4/IPv6 (ARP, LLDP, ...).
    NotIp,
    /// IP, but nothing the program translates (other L4 protocols, IPv6
    /// routing headers, ...): passes untouched.
    Unhandled,
    /// A fragment: `daddr` and `proto` are set, and `dport` too when
    /// `has_port` (the first fragment held a complete TCP/UDP header start).
    Fragment { has_port: bool },
    /// The IP header parsed but something after it is inconsistent or cut
    /// short. `daddr` is set when `has_daddr`, so the caller can tell
    /// whether it was aimed at a VIP.
    Malformed { has_daddr: bool },
    /// A complete flow.
    Flow,
}

const MALFORMED: Parsed = Parsed::Malformed { has_daddr: true };

/// The IPv4-mapped form of `a` into an address whose first ten bytes are
/// zero.
#[inline(always)]
fn set_v4_mapped(addr: &mut Addr, a: [u8; 4]) {
    addr[10] = 0xff;
    addr[11] = 0xff;
    addr[12] = a[0];
    addr[13] = a[1];
    addr[14] = a[2];
    addr[15] = a[3];
}

#[inline(always)]
fn be16<P: Packet>(pkt: &P, off: usize) -> Option<u16> {
    pkt.load::<2>(off).map(u16::from_be_bytes)
}

#[inline(always)]
fn be32<P: Packet>(pkt: &P, off: usize) -> Option<u32> {
    pkt.load::<4>(off).map(u32::from_be_bytes)
}

/// Parse a frame into `flow` (which must start zeroed). Its own BPF
/// function: see `ebpf/programs/VERIFIER_NOTES.md`.
#[inline(never)]
pub fn parse<P: Packet>(pkt: &P, flow: &mut Flow) -> Parsed {
    let Some(mut ethertype) = be16(pkt, 12) else {
        return Parsed::NotIp;
    };
    let mut l3 = ETH_HLEN;
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        let Some(inner) = be16(pkt, 16) else {
            return Parsed::NotIp;
        };
        ethertype = inner;
        l3 = ETH_HLEN + 4;
    }
    match ethertype {
        ETH_P_IP => parse_v4(pkt, l3, flow),
        ETH_P_IPV6 => parse_v6(pkt, l3, flow),
        _ => Parsed::NotIp,
    }
}

#[inline(always)]
fn parse_v4<P: Packet>(pkt: &P, l3: usize, flow: &mut Flow) -> Parsed {
    let Some(h) = pkt.load::<20>(l3) else {
        return Parsed::Malformed { has_daddr: false };
    };
    // IPv4-mapped; bytes 0..10 are zero already (`flow` starts zeroed).
    // Writing them again became a `memset` call in the BPF build.
    set_v4_mapped(&mut flow.daddr, [h[16], h[17], h[18], h[19]]);
    set_v4_mapped(&mut flow.saddr, [h[12], h[13], h[14], h[15]]);
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let frame_room = pkt.len().saturating_sub(l3);
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl || total > frame_room {
        return MALFORMED;
    }
    let proto = h[9];
    flow.ttl = h[8];
    flow.ip_csum = u16::from_be_bytes([h[10], h[11]]);
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let more_fragments = frag & 0x2000 != 0;
    let offset = frag & 0x1fff;
    let l4 = l3 + ihl;
    let l4_len = total - ihl;
    if more_fragments || offset != 0 {
        flow.proto = proto;
        let has_port = offset == 0 && first_fragment_dport(pkt, proto, l4, l4_len, flow);
        return Parsed::Fragment { has_port };
    }
    flow.l3 = l3 as u16;
    flow.l4 = l4 as u16;
    flow.l4_len = l4_len as u16;
    flow.v6 = false;
    flow.proto = proto;
    parse_l4(pkt, flow)
}

#[inline(always)]
fn parse_v6<P: Packet>(pkt: &P, l3: usize, flow: &mut Flow) -> Parsed {
    let Some(h) = pkt.load::<8>(l3) else {
        return Parsed::Malformed { has_daddr: false };
    };
    let (Some(saddr), Some(daddr)) = (pkt.load::<16>(l3 + 8), pkt.load::<16>(l3 + 24)) else {
        return Parsed::Malformed { has_daddr: false };
    };
    flow.saddr = saddr;
    flow.daddr = daddr;
    let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let frame_room = pkt.len().saturating_sub(l3 + IPV6_HLEN);
    // Jumbograms (payload length 0) are not for us.
    if h[0] >> 4 != 6 || payload == 0 || payload > frame_room {
        return MALFORMED;
    }
    let mut next = h[6];
    flow.ttl = h[7];
    let mut l4 = l3 + IPV6_HLEN;
    let mut l4_len = payload;
    let mut i = 0;
    while i < MAX_SKIPPED_EXT {
        if next != NEXTHDR_HOP && next != NEXTHDR_DEST {
            break;
        }
        let Some(e) = pkt.load::<2>(l4) else {
            return MALFORMED;
        };
        let elen = (usize::from(e[1]) + 1) * 8;
        if elen > l4_len {
            return MALFORMED;
        }
        next = e[0];
        l4 += elen;
        l4_len -= elen;
        i += 1;
    }
    if next == NEXTHDR_FRAGMENT {
        let Some(f) = pkt.load::<8>(l4) else {
            return MALFORMED;
        };
        let offset = u16::from_be_bytes([f[2], f[3]]) >> 3;
        let proto = f[0];
        flow.proto = proto;
        let has_port = offset == 0
            && l4_len >= 8
            && first_fragment_dport(pkt, proto, l4 + 8, l4_len - 8, flow);
        return Parsed::Fragment { has_port };
    }
    flow.l3 = l3 as u16;
    flow.l4 = l4 as u16;
    flow.l4_len = l4_len as u16;
    flow.v6 = true;
    flow.proto = next;
    parse_l4(pkt, flow)
}

/// The destination port of a first fragment into `flow.dport`, when it
/// holds one.
#[inline(always)]
fn first_fragment_dport<P: Packet>(
    pkt: &P,
    proto: u8,
    l4: usize,
    l4_len: usize,
    flow: &mut Flow,
) -> bool {
    if (proto == PROTO_TCP || proto == PROTO_UDP) && l4_len >= 4 {
        if let Some(p) = be16(pkt, l4 + 2) {
            flow.dport = p;
            return true;
        }
    }
    false
}

/// A bound on the options walked, for the verifier. Stacks put the
/// timestamp among the first few (Linux: third on a SYN, after two NOPs
/// otherwise); a walk that gives up finds none, which only makes the SNAT
/// allocator stricter.
const MAX_TCP_OPTIONS: usize = 16;
const TCPOPT_EOL: u8 = 0;
const TCPOPT_NOP: u8 = 1;
const TCPOPT_TIMESTAMP: u8 = 8;
const TCPOLEN_TIMESTAMP: u8 = 10;

/// The timestamp option among the `len` bytes of TCP options at `off`,
/// into `flow.tsval`, which stays 0 without one (or when the options are
/// malformed: the flow is then treated as without timestamps, which only
/// makes the allocator stricter). Its own BPF function: the
/// bounded walk is verified once.
#[inline(never)]
fn tcp_timestamp<P: Packet>(pkt: &P, off: usize, len: usize, flow: &mut Flow) {
    let mut i = 0;
    let mut n = 0;
    while n < MAX_TCP_OPTIONS && i < len {
        n += 1;
        // Kind and length in one load. A NOP as the packet's very last
        // byte fails it, and nothing follows that NOP anyway.
        let Some(o) = pkt.load::<2>(off + i) else {
            return;
        };
        match o[0] {
            TCPOPT_EOL => return,
            TCPOPT_NOP => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let olen = usize::from(o[1]);
        if olen < 2 || i + olen > len {
            return;
        }
        if o[0] == TCPOPT_TIMESTAMP && o[1] == TCPOLEN_TIMESTAMP {
            if let Some(v) = pkt.load::<4>(off + i + 2) {
                flow.tsval = u32::from_be_bytes(v);
            }
            return;
        }
        i += olen;
    }
}

/// The L4 header of `flow` (`l3`, `l4`, `l4_len`, `v6`, `proto` and the
/// addresses are set).
#[inline(always)]
fn parse_l4<P: Packet>(pkt: &P, flow: &mut Flow) -> Parsed {
    let l4 = flow.l4();
    let l4_len = usize::from(flow.l4_len);
    match flow.proto {
        PROTO_TCP => {
            let Some(t) = pkt.load::<20>(l4) else {
                return MALFORMED;
            };
            let hlen = t[12] >> 4;
            if l4_len < 20 || hlen < 5 || usize::from(hlen) * 4 > l4_len {
                return MALFORMED;
            }
            flow.sport = u16::from_be_bytes([t[0], t[1]]);
            flow.dport = u16::from_be_bytes([t[2], t[3]]);
            flow.seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
            flow.ack = u32::from_be_bytes([t[8], t[9], t[10], t[11]]);
            flow.tcp_flags = t[13];
            flow.tcp_hlen = hlen * 4;
            // SYNs and FINs, and segments without data: the client's ACKs
            // after its FIN move the endpoint's TIME_WAIT timestamp on
            // (`touch`). Data segments, the bulk of a flow, are not walked.
            let bare = usize::from(hlen) * 4 == l4_len;
            if hlen > 5 && (t[13] & (TCP_SYN | TCP_FIN) != 0 || bare) && t[13] & TCP_RST == 0 {
                tcp_timestamp(pkt, l4 + 20, usize::from(hlen - 5) * 4, flow);
            }
        }
        PROTO_UDP => {
            let Some(u) = pkt.load::<8>(l4) else {
                return MALFORMED;
            };
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if l4_len < 8 || ulen < 8 || ulen > l4_len {
                return MALFORMED;
            }
            flow.sport = u16::from_be_bytes([u[0], u[1]]);
            flow.dport = u16::from_be_bytes([u[2], u[3]]);
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            if (flow.proto == PROTO_ICMP) == flow.v6 {
                return Parsed::Unhandled;
            }
            if l4_len < 8 || be32(pkt, l4).is_none() {
                return MALFORMED;
            }
        }
        _ => return Parsed::Unhandled,
    }
    Parsed::Flow
}
