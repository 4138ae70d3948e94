//! Frame parsing: Ethernet (one optional 802.1Q tag), IPv4 with options,
//! IPv6 with hop-by-hop / destination-options headers skipped, TCP, UDP,
//! ICMP and ICMPv6.
//!
//! Every read goes through [`Packet::load`], so a truncated frame yields
//! `None` instead of an out-of-bounds access. Lengths come from the IP
//! header, not from the frame length, because Ethernet pads short frames.

use crate::env::Packet;
use crate::maps::{v4_mapped, Addr, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};

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
#[derive(Clone, Copy)]
pub struct Flow {
    pub l3: usize,
    pub l4: usize,
    /// Bytes of L4 header plus payload, from the IP header.
    pub l4_len: usize,
    pub v6: bool,
    pub saddr: Addr,
    pub daddr: Addr,
    pub proto: u8,
    /// Ports for TCP/UDP; zero for ICMP.
    pub sport: u16,
    pub dport: u16,
    /// TCP only.
    pub tcp_flags: u8,
    pub tcp_hlen: usize,
    pub seq: u32,
    pub ack: u32,
}

impl Flow {
    #[inline(always)]
    pub fn is_tcp(&self) -> bool {
        self.proto == PROTO_TCP
    }

    #[inline(always)]
    pub fn is_udp(&self) -> bool {
        self.proto == PROTO_UDP
    }

    /// Offset of the L4 checksum for the protocols whose ports we rewrite.
    #[inline(always)]
    pub fn l4_csum_off(&self) -> Option<usize> {
        match self.proto {
            PROTO_TCP => Some(self.l4 + TCP_CSUM_OFF),
            PROTO_UDP => Some(self.l4 + UDP_CSUM_OFF),
            _ => None,
        }
    }

    /// TCP payload bytes (for the sequence space a reset must acknowledge).
    #[inline(always)]
    pub fn tcp_payload_len(&self) -> usize {
        self.l4_len.saturating_sub(self.tcp_hlen)
    }
}

/// What the parser made of a frame.
pub enum Parsed {
    /// Not IPv4/IPv6 (ARP, LLDP, ...).
    NotIp,
    /// IP, but nothing the program translates (other L4 protocols, IPv6
    /// routing headers, ...): passes untouched.
    Unhandled,
    /// A fragment. `first` carries ports when the first fragment held a
    /// complete TCP/UDP header.
    Fragment {
        daddr: Addr,
        proto: u8,
        dport: Option<u16>,
    },
    /// The IP header parsed but something after it is inconsistent or cut
    /// short. `daddr` lets the caller tell whether it was aimed at a VIP.
    Malformed {
        daddr: Option<Addr>,
    },
    Flow(Flow),
}

#[inline(always)]
fn be16<P: Packet>(pkt: &P, off: usize) -> Option<u16> {
    pkt.load::<2>(off).map(u16::from_be_bytes)
}

#[inline(always)]
fn be32<P: Packet>(pkt: &P, off: usize) -> Option<u32> {
    pkt.load::<4>(off).map(u32::from_be_bytes)
}

pub fn parse<P: Packet>(pkt: &P) -> Parsed {
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
        ETH_P_IP => parse_v4(pkt, l3),
        ETH_P_IPV6 => parse_v6(pkt, l3),
        _ => Parsed::NotIp,
    }
}

fn parse_v4<P: Packet>(pkt: &P, l3: usize) -> Parsed {
    let Some(h) = pkt.load::<20>(l3) else {
        return Parsed::Malformed { daddr: None };
    };
    let daddr = v4_mapped([h[16], h[17], h[18], h[19]]);
    let saddr = v4_mapped([h[12], h[13], h[14], h[15]]);
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let frame_room = pkt.len().saturating_sub(l3);
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl || total > frame_room {
        return Parsed::Malformed { daddr: Some(daddr) };
    }
    let proto = h[9];
    let frag = u16::from_be_bytes([h[6], h[7]]);
    let more_fragments = frag & 0x2000 != 0;
    let offset = frag & 0x1fff;
    let l4 = l3 + ihl;
    let l4_len = total - ihl;
    if more_fragments || offset != 0 {
        let dport = if offset == 0 {
            first_fragment_dport(pkt, proto, l4, l4_len)
        } else {
            None
        };
        return Parsed::Fragment {
            daddr,
            proto,
            dport,
        };
    }
    parse_l4(pkt, l3, l4, l4_len, false, saddr, daddr, proto)
}

fn parse_v6<P: Packet>(pkt: &P, l3: usize) -> Parsed {
    let Some(h) = pkt.load::<IPV6_HLEN>(l3) else {
        return Parsed::Malformed { daddr: None };
    };
    let mut saddr = [0u8; 16];
    let mut daddr = [0u8; 16];
    saddr.copy_from_slice(&h[8..24]);
    daddr.copy_from_slice(&h[24..40]);
    let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let frame_room = pkt.len().saturating_sub(l3 + IPV6_HLEN);
    // Jumbograms (payload length 0) are not for us.
    if h[0] >> 4 != 6 || payload == 0 || payload > frame_room {
        return Parsed::Malformed { daddr: Some(daddr) };
    }
    let mut next = h[6];
    let mut l4 = l3 + IPV6_HLEN;
    let mut l4_len = payload;
    let mut i = 0;
    while i < MAX_SKIPPED_EXT {
        if next != NEXTHDR_HOP && next != NEXTHDR_DEST {
            break;
        }
        let Some(e) = pkt.load::<2>(l4) else {
            return Parsed::Malformed { daddr: Some(daddr) };
        };
        let elen = (usize::from(e[1]) + 1) * 8;
        if elen > l4_len {
            return Parsed::Malformed { daddr: Some(daddr) };
        }
        next = e[0];
        l4 += elen;
        l4_len -= elen;
        i += 1;
    }
    if next == NEXTHDR_FRAGMENT {
        let Some(f) = pkt.load::<8>(l4) else {
            return Parsed::Malformed { daddr: Some(daddr) };
        };
        let offset = u16::from_be_bytes([f[2], f[3]]) >> 3;
        let proto = f[0];
        let dport = if offset == 0 && l4_len >= 8 {
            first_fragment_dport(pkt, proto, l4 + 8, l4_len - 8)
        } else {
            None
        };
        return Parsed::Fragment {
            daddr,
            proto,
            dport,
        };
    }
    parse_l4(pkt, l3, l4, l4_len, true, saddr, daddr, next)
}

#[inline(always)]
fn first_fragment_dport<P: Packet>(pkt: &P, proto: u8, l4: usize, l4_len: usize) -> Option<u16> {
    if (proto == PROTO_TCP || proto == PROTO_UDP) && l4_len >= 4 {
        be16(pkt, l4 + 2)
    } else {
        None
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn parse_l4<P: Packet>(
    pkt: &P,
    l3: usize,
    l4: usize,
    l4_len: usize,
    v6: bool,
    saddr: Addr,
    daddr: Addr,
    proto: u8,
) -> Parsed {
    let mut flow = Flow {
        l3,
        l4,
        l4_len,
        v6,
        saddr,
        daddr,
        proto,
        sport: 0,
        dport: 0,
        tcp_flags: 0,
        tcp_hlen: 0,
        seq: 0,
        ack: 0,
    };
    let malformed = Parsed::Malformed { daddr: Some(daddr) };
    match proto {
        PROTO_TCP => {
            let Some(t) = pkt.load::<20>(l4) else {
                return malformed;
            };
            let hlen = usize::from(t[12] >> 4) * 4;
            if l4_len < 20 || hlen < 20 || hlen > l4_len {
                return malformed;
            }
            flow.sport = u16::from_be_bytes([t[0], t[1]]);
            flow.dport = u16::from_be_bytes([t[2], t[3]]);
            flow.seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
            flow.ack = u32::from_be_bytes([t[8], t[9], t[10], t[11]]);
            flow.tcp_flags = t[13];
            flow.tcp_hlen = hlen;
        }
        PROTO_UDP => {
            let Some(u) = pkt.load::<8>(l4) else {
                return malformed;
            };
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if l4_len < 8 || ulen < 8 || ulen > l4_len {
                return malformed;
            }
            flow.sport = u16::from_be_bytes([u[0], u[1]]);
            flow.dport = u16::from_be_bytes([u[2], u[3]]);
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            if (proto == PROTO_ICMP) == v6 {
                return Parsed::Unhandled;
            }
            if l4_len < 8 || be32(pkt, l4).is_none() {
                return malformed;
            }
        }
        _ => return Parsed::Unhandled,
    }
    Parsed::Flow(flow)
}
