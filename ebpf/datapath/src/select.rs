//! Endpoint choice: session affinity, Maglev over ready endpoints, and the
//! terminating fallback (P5).

use crate::env::{Clock, Maps};
use crate::maps::{
    is_v4_mapped, Addr, AffinityKey, AffinityValue, Endpoint, ServiceValue, SVC_F_AFFINITY,
};
use crate::parse::Flow;

/// murmur3's finaliser: full avalanche, so `h % maglev_size` is uniform.
#[inline(always)]
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

#[inline(always)]
fn word(a: &Addr, i: usize) -> u32 {
    match a.get(i..i + 4) {
        Some(&[b0, b1, b2, b3]) => u32::from_be_bytes([b0, b1, b2, b3]),
        _ => 0,
    }
}

/// Deterministic hash of the 5-tuple: the same flow picks the same Maglev
/// entry on every node and across restarts.
#[inline(always)]
pub fn hash_tuple(saddr: &Addr, daddr: &Addr, sport: u16, dport: u16, proto: u8) -> u32 {
    let mut h: u32 = 0x9747_b28c ^ u32::from(proto);
    let mut i = 0;
    while i < 16 {
        h = (h ^ word(saddr, i))
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15);
        h = (h ^ word(daddr, i))
            .wrapping_mul(0x1b87_3593)
            .rotate_left(13);
        i += 4;
    }
    h ^= (u32::from(sport) << 16) | u32::from(dport);
    fmix32(h)
}

/// Where the chosen endpoint sits, relative to the service's `ep_base`.
#[derive(Clone, Copy)]
pub struct Choice {
    pub slot: u32,
    pub ep: Endpoint,
}

#[inline(always)]
fn endpoint<M: Maps>(maps: &M, svc: &ServiceValue, slot: u32) -> Option<Choice> {
    let ep = maps.endpoint(svc.ep_base.checked_add(slot)?)?;
    Some(Choice { slot, ep })
}

/// Maglev over the ready slots, or (P5) hash over the terminating ones when
/// nothing is ready.
#[inline(always)]
fn by_hash<M: Maps>(maps: &M, svc: &ServiceValue, h: u32) -> Option<Choice> {
    if svc.ready > 0 {
        let mut off = h % svc.ready;
        if svc.maglev_size > 0 {
            let entry = svc.maglev_base.checked_add(h % svc.maglev_size)?;
            if let Some(o) = maps.maglev(entry) {
                // A table from an older layout could point past `ready`;
                // the plain modulo keeps the choice inside the slots.
                if o < svc.ready {
                    off = o;
                }
            }
        }
        endpoint(maps, svc, off)
    } else if svc.terminating > 0 {
        endpoint(maps, svc, svc.ready + h % svc.terminating)
    } else {
        None
    }
}

/// The slots a client may be (re)sent to right now.
#[inline(always)]
fn serving_limit(svc: &ServiceValue) -> u32 {
    if svc.ready > 0 {
        svc.ready
    } else {
        svc.terminating
    }
}

/// Choose the endpoint for a new flow; `None` when nothing serves (P6).
#[inline(always)]
pub fn choose<M: Maps, C: Clock>(
    maps: &mut M,
    clock: &C,
    svc: &ServiceValue,
    flow: &Flow,
) -> Option<Choice> {
    let h = hash_tuple(&flow.saddr, &flow.daddr, flow.sport, flow.dport, flow.proto);
    if svc.flags & SVC_F_AFFINITY == 0 {
        return by_hash(maps, svc, h);
    }
    let now = clock.now_ns();
    let key = AffinityKey {
        client: flow.saddr,
        svc_id: svc.id,
        _pad: 0,
    };
    if let Some(a) = maps.affinity_get(&key) {
        let timeout = u64::from(svc.affinity_timeout_s).saturating_mul(1_000_000_000);
        let fresh = now.saturating_sub(a.last_used_ns) <= timeout;
        // Only ready slots, or terminating ones while nothing is ready (P5):
        // affinity must not keep sending new flows to a terminating pod.
        if fresh && a.slot < serving_limit(svc) {
            let slot = a.slot;
            if let Some(c) = endpoint(maps, svc, slot) {
                if c.ep.addr == a.endpoint && c.ep.port == a.port {
                    maps.affinity_put(
                        &key,
                        &AffinityValue {
                            last_used_ns: now,
                            ..a
                        },
                    );
                    return Some(c);
                }
            }
        }
    }
    let c = by_hash(maps, svc, h)?;
    maps.affinity_put(
        &key,
        &AffinityValue {
            endpoint: c.ep.addr,
            port: c.ep.port,
            _pad: 0,
            slot: c.slot,
            last_used_ns: now,
        },
    );
    Some(c)
}

/// The endpoint's family must match the packet's; the control side should
/// never mix them, but a wrong table must not produce a garbage packet.
#[inline(always)]
pub fn family_matches(flow: &Flow, ep: &Endpoint) -> bool {
    is_v4_mapped(&ep.addr) != flow.v6
}
