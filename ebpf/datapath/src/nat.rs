//! Address and port rewriting with incremental checksum updates.

use crate::csum;
use crate::env::{L4Csum, Packet};
use crate::maps::Addr;
use crate::parse::Flow;

const V4_SADDR_OFF: usize = 12;
const V4_DADDR_OFF: usize = 16;
const V4_CSUM_OFF: usize = 10;
const V6_SADDR_OFF: usize = 8;
const V6_DADDR_OFF: usize = 24;

/// The tuple a packet should carry after translation.
#[derive(Clone, Copy)]
pub struct Target {
    pub saddr: Addr,
    pub sport: u16,
    pub daddr: Addr,
    pub dport: u16,
}

#[inline(always)]
fn tail4(a: &Addr) -> [u8; 4] {
    [a[12], a[13], a[14], a[15]]
}

/// Rewrite `flow`'s packet to `to`. Only fields that change are written;
/// address changes reach the L4 checksum through the pseudo-header, port
/// changes directly. `None` only if the frame no longer holds the headers
/// the parser saw.
#[inline(always)]
pub fn rewrite<P: Packet>(pkt: &mut P, flow: &Flow, to: &Target) -> Option<()> {
    let csum_off = flow.l4_csum_off();
    let how_pseudo = L4Csum {
        pseudo: true,
        udp4: flow.is_udp() && !flow.v6,
    };
    let how_port = L4Csum {
        pseudo: false,
        ..how_pseudo
    };

    let s_changed = to.saddr != flow.saddr;
    let d_changed = to.daddr != flow.daddr;
    if s_changed || d_changed {
        let mut addr_diff = 0u32;
        if flow.v6 {
            if s_changed {
                addr_diff += csum::diff(&flow.saddr, &to.saddr);
                pkt.store(flow.l3 + V6_SADDR_OFF, &to.saddr)?;
            }
            if d_changed {
                addr_diff += csum::diff(&flow.daddr, &to.daddr);
                pkt.store(flow.l3 + V6_DADDR_OFF, &to.daddr)?;
            }
        } else {
            if s_changed {
                let new = tail4(&to.saddr);
                addr_diff += csum::diff(&tail4(&flow.saddr), &new);
                pkt.store(flow.l3 + V4_SADDR_OFF, &new)?;
            }
            if d_changed {
                let new = tail4(&to.daddr);
                addr_diff += csum::diff(&tail4(&flow.daddr), &new);
                pkt.store(flow.l3 + V4_DADDR_OFF, &new)?;
            }
            pkt.l3_csum_apply(flow.l3 + V4_CSUM_OFF, addr_diff)?;
        }
        // ICMP (v4) has no pseudo-header; ICMPv6 does, but we never
        // rewrite ICMPv6 here.
        if let Some(off) = csum_off {
            pkt.l4_csum_apply(off, addr_diff, how_pseudo)?;
        }
    }

    if let Some(off) = csum_off {
        let mut port_diff = 0u32;
        let mut ports_changed = false;
        if to.sport != flow.sport {
            port_diff += csum::diff16(flow.sport, to.sport);
            pkt.store(flow.l4, &to.sport.to_be_bytes())?;
            ports_changed = true;
        }
        if to.dport != flow.dport {
            port_diff += csum::diff16(flow.dport, to.dport);
            pkt.store(flow.l4 + 2, &to.dport.to_be_bytes())?;
            ports_changed = true;
        }
        if ports_changed {
            pkt.l4_csum_apply(off, port_diff, how_port)?;
        }
    }
    Some(())
}
