//! Answers the program builds itself when a service has nothing to serve
//! (P6): a TCP reset, or an ICMP port unreachable for UDP. The packet is
//! rewritten in place into the answer (VIP to client) and passed; the node
//! kernel routes it, so the MAC swap below is a courtesy, not a dependency.

use crate::csum;
use crate::env::Packet;
use crate::maps::{addr_word, Addr, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP};
use crate::parse::{Flow, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};

const REPLY_TTL: u8 = 64;
const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;
const TCP_HLEN: usize = 20;
const ICMP_HLEN: usize = 8;
/// Original IPv4 header (up to 60 bytes with options) plus the 8 bytes of
/// the UDP header (RFC 792).
const QUOTE_MAX: usize = 68;
/// IPv6: the fixed header plus 8 bytes.
const QUOTE_V6: usize = IPV6_HLEN + 8;

const ICMP_DEST_UNREACH: u8 = 3;
const ICMP_PORT_UNREACH: u8 = 3;
const ICMPV6_DEST_UNREACH: u8 = 1;
const ICMPV6_PORT_UNREACH: u8 = 4;

#[inline(always)]
fn tail4(a: &Addr) -> [u8; 4] {
    addr_word(a, 3).to_be_bytes()
}

/// Sum of an address as big-endian 16-bit words, by 32-bit words.
#[inline(always)]
fn addr_sum(a: &Addr) -> u32 {
    csum::sum32(addr_word(a, 0))
        + csum::sum32(addr_word(a, 1))
        + csum::sum32(addr_word(a, 2))
        + csum::sum32(addr_word(a, 3))
}

#[inline(always)]
fn swap_macs<P: Packet>(pkt: &mut P) -> Option<()> {
    let dst = pkt.load::<6>(0)?;
    let src = pkt.load::<6>(6)?;
    pkt.store(0, &src)?;
    pkt.store(6, &dst)
}

/// Write a fresh IP header from the VIP (`flow.daddr`) to the client
/// (`flow.saddr`) carrying `payload_len` bytes of `proto`; returns the sum of
/// the L4 pseudo-header (zero contribution for ICMPv4, which has none).
#[inline(always)]
fn write_ip<P: Packet>(pkt: &mut P, flow: &Flow, proto: u8, payload_len: u16) -> Option<u32> {
    if flow.v6 {
        let pl = payload_len.to_be_bytes();
        let h = [0x60, 0, 0, 0, pl[0], pl[1], proto, REPLY_TTL];
        pkt.store(flow.l3(), &h)?;
        pkt.store(flow.l3() + 8, &flow.daddr)?;
        pkt.store(flow.l3() + 24, &flow.saddr)?;
        Some(
            addr_sum(&flow.daddr)
                + addr_sum(&flow.saddr)
                + u32::from(payload_len)
                + u32::from(proto),
        )
    } else {
        let src = tail4(&flow.daddr);
        let dst = tail4(&flow.saddr);
        let total = (payload_len + IPV4_HLEN as u16).to_be_bytes();
        let mut h = [
            0x45, 0, total[0], total[1], 0, 0, 0x40, 0, REPLY_TTL, proto, 0, 0, src[0], src[1],
            src[2], src[3], dst[0], dst[1], dst[2], dst[3],
        ];
        let c = csum::finish(csum::sum(&h)).to_be_bytes();
        h[10] = c[0];
        h[11] = c[1];
        pkt.store(flow.l3(), &h)?;
        if proto == PROTO_ICMP {
            Some(0)
        } else {
            Some(csum::sum(&src) + csum::sum(&dst) + u32::from(payload_len) + u32::from(proto))
        }
    }
}

#[inline(always)]
fn l3_hlen(flow: &Flow) -> usize {
    if flow.v6 {
        IPV6_HLEN
    } else {
        IPV4_HLEN
    }
}

/// Turn a TCP segment to a VIP with no endpoint into the RST the client
/// expects (RFC 9293 3.10.7.1): seq from their ACK if they sent one, else an
/// ACK covering everything they sent. Its own BPF function.
#[inline(never)]
pub fn tcp_reset<P: Packet>(pkt: &mut P, flow: &Flow) -> Option<()> {
    let (seq, ack, flags) = if flow.tcp_flags & TCP_ACK != 0 {
        (flow.ack, 0u32, TCP_RST)
    } else {
        let mut len = flow.tcp_payload_len() as u32;
        if flow.tcp_flags & TCP_SYN != 0 {
            len += 1;
        }
        if flow.tcp_flags & TCP_FIN != 0 {
            len += 1;
        }
        (0u32, flow.seq.wrapping_add(len), TCP_RST | TCP_ACK)
    };
    let sp = flow.dport.to_be_bytes();
    let dp = flow.sport.to_be_bytes();
    let s = seq.to_be_bytes();
    let a = ack.to_be_bytes();
    let mut t = [
        sp[0], sp[1], dp[0], dp[1], s[0], s[1], s[2], s[3], a[0], a[1], a[2], a[3], 0x50, flags, 0,
        0, 0, 0, 0, 0,
    ];
    swap_macs(pkt)?;
    let pseudo = write_ip(pkt, flow, PROTO_TCP, TCP_HLEN as u16)?;
    let c = csum::finish(pseudo + csum::sum(&t)).to_be_bytes();
    t[16] = c[0];
    t[17] = c[1];
    let l4 = flow.l3() + l3_hlen(flow);
    pkt.store(l4, &t)?;
    pkt.resize(l4 + TCP_HLEN)
}

/// Turn a UDP datagram to a VIP with no endpoint into ICMP / ICMPv6 port
/// unreachable quoting the original IP header and 8 bytes after it. Its own
/// BPF function.
#[inline(never)]
pub fn port_unreachable<P: Packet>(pkt: &mut P, flow: &Flow) -> Option<()> {
    let quote_len = if flow.v6 {
        QUOTE_V6
    } else {
        flow.l4().saturating_sub(flow.l3()) + 8
    };
    if quote_len > QUOTE_MAX {
        return None;
    }
    let l4 = flow.l3() + l3_hlen(flow);
    let new_len = l4 + ICMP_HLEN + quote_len;
    pkt.resize(new_len)?;
    // Move the quoted bytes into place in the frame itself, last word
    // first: the destination lies after the source, so no word is
    // overwritten before it was read. (No buffer: stack is scarce in BPF.)
    let dst = l4 + ICMP_HLEN;
    let mut quote_sum = 0u32;
    let mut i = QUOTE_MAX / 4;
    while i > 0 {
        i -= 1;
        let off = i * 4;
        if off >= quote_len {
            continue;
        }
        let w = pkt.load::<4>(flow.l3() + off)?;
        quote_sum += csum::sum(&w);
        pkt.store(dst + off, &w)?;
    }
    swap_macs(pkt)?;
    let (proto, ty, code) = if flow.v6 {
        (PROTO_ICMPV6, ICMPV6_DEST_UNREACH, ICMPV6_PORT_UNREACH)
    } else {
        (PROTO_ICMP, ICMP_DEST_UNREACH, ICMP_PORT_UNREACH)
    };
    let pseudo = write_ip(pkt, flow, proto, (ICMP_HLEN + quote_len) as u16)?;
    let sum = pseudo + csum::sum(&[ty, code]) + quote_sum;
    let c = csum::finish(sum).to_be_bytes();
    pkt.store(l4, &[ty, code, c[0], c[1], 0, 0, 0, 0])?;
    Some(())
}
