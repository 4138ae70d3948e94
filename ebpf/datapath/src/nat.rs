//! Address and port rewriting with incremental checksum updates.

use crate::csum;
use crate::env::{L4Csum, Packet};
use crate::maps::{addr_eq, addr_word, Addr, CtValue};
use crate::parse::Flow;

const V4_TTL_OFF: usize = 8;
const V6_SADDR_OFF: usize = 8;
const V6_DADDR_OFF: usize = 24;
const V6_HOP_LIMIT_OFF: usize = 7;

/// RFC 1624 difference for replacing address `old` by `new`, over 32-bit
/// words: all four for IPv6, the last (the IPv4 address of an IPv4-mapped
/// one) for IPv4.
#[inline(always)]
pub fn addr_diff(old: &Addr, new: &Addr, v6: bool) -> u32 {
    let mut d = csum::diff32(addr_word(old, 3), addr_word(new, 3));
    if v6 {
        d += csum::diff32(addr_word(old, 0), addr_word(new, 0));
        d += csum::diff32(addr_word(old, 1), addr_word(new, 1));
        d += csum::diff32(addr_word(old, 2), addr_word(new, 2));
    }
    d
}

/// Rewrite `flow`'s packet to the translation of `to`: source :=
/// `nat_saddr:nat_sport`, destination := `nat_daddr:nat_dport`, and with
/// `hop` the TTL (hop limit) one less, as the router the program stands in
/// for would (the caller checked it is above 1). Only fields that change are
/// written; address changes reach the L4 checksum through the
/// pseudo-header, port changes directly. `None` only if the frame no longer
/// holds the headers the parser saw. Its own BPF function.
#[inline(never)]
pub fn rewrite<P: Packet>(pkt: &mut P, flow: &Flow, to: &CtValue, hop: bool) -> Option<()> {
    let csum_off = flow.l4_csum_off();
    let how_pseudo = L4Csum {
        pseudo: true,
        udp4: flow.is_udp() && !flow.v6,
    };
    let how_port = L4Csum {
        pseudo: false,
        ..how_pseudo
    };
    let l3 = flow.l3();

    let s_changed = !addr_eq(&to.nat_saddr, &flow.saddr);
    let d_changed = !addr_eq(&to.nat_daddr, &flow.daddr);
    let ttl = if hop {
        flow.ttl.wrapping_sub(1)
    } else {
        flow.ttl
    };
    if flow.v6 && hop {
        // The hop limit is in no checksum.
        pkt.store(l3 + V6_HOP_LIMIT_OFF, &[ttl])?;
    }
    if s_changed || d_changed || (hop && !flow.v6) {
        let mut addr_diff_sum = 0u32;
        if s_changed {
            addr_diff_sum += addr_diff(&flow.saddr, &to.nat_saddr, flow.v6);
        }
        if d_changed {
            addr_diff_sum += addr_diff(&flow.daddr, &to.nat_daddr, flow.v6);
        }
        if flow.v6 {
            if s_changed {
                pkt.store(l3 + V6_SADDR_OFF, &to.nat_saddr)?;
            }
            if d_changed {
                pkt.store(l3 + V6_DADDR_OFF, &to.nat_daddr)?;
            }
        } else {
            // IPv4: TTL, protocol, header checksum, source and destination
            // are adjacent (bytes 8..20). One store with the checksum
            // updated here (RFC 1624) instead of up to two stores and a
            // checksum helper: each is a helper call in the kernel build.
            // The TTL is in the header checksum, not in the pseudo-header.
            let ttl_diff = csum::diff16(
                u16::from_be_bytes([flow.ttl, flow.proto]),
                u16::from_be_bytes([ttl, flow.proto]),
            );
            let saddr = if s_changed {
                &to.nat_saddr
            } else {
                &flow.saddr
            };
            let daddr = if d_changed {
                &to.nat_daddr
            } else {
                &flow.daddr
            };
            let mut hdr = [0u8; 12];
            hdr[0] = ttl;
            hdr[1] = flow.proto;
            hdr[2..4].copy_from_slice(
                &csum::apply(flow.ip_csum, addr_diff_sum + ttl_diff).to_be_bytes(),
            );
            hdr[4..8].copy_from_slice(&addr_word(saddr, 3).to_be_bytes());
            hdr[8..].copy_from_slice(&addr_word(daddr, 3).to_be_bytes());
            pkt.store(l3 + V4_TTL_OFF, &hdr)?;
        }
        // ICMP (v4) has no pseudo-header; ICMPv6 does, but we never
        // rewrite ICMPv6 here.
        if let Some(off) = csum_off {
            pkt.l4_csum_apply(off, addr_diff_sum, how_pseudo)?;
        }
    }

    if let Some(off) = csum_off {
        let s_port = to.nat_sport != flow.sport;
        let d_port = to.nat_dport != flow.dport;
        if s_port || d_port {
            let mut port_diff = 0u32;
            if s_port {
                port_diff += csum::diff16(flow.sport, to.nat_sport);
            }
            if d_port {
                port_diff += csum::diff16(flow.dport, to.nat_dport);
            }
            // Both ports in one store: they are adjacent, and unchanged
            // bytes written again are the same bytes.
            let ports = (u32::from(to.nat_sport) << 16) | u32::from(to.nat_dport);
            pkt.store(flow.l4(), &ports.to_be_bytes())?;
            pkt.l4_csum_apply(off, port_diff, how_port)?;
        }
    }
    Some(())
}
