//! Endpoint choice: session affinity, Maglev over ready endpoints, and the
//! terminating fallback (P5).

use crate::env::Maps;
use crate::maps::{
    addr_eq, addr_word, is_v4_mapped, Addr, AffinityKey, AffinityValue, Endpoint, ServiceValue,
    SVC_F_AFFINITY,
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

/// Seed of the Maglev hash.
const SEED_MAGLEV: u32 = 0x9747_b28c;
/// Seed of the hash SNAT port candidates start from.
const SEED_SNAT_A: u32 = 0x5a17_c0de;

/// Deterministic hash of the 5-tuple: the same flow picks the same Maglev
/// entry on every node and across restarts.
#[inline(always)]
pub fn hash_tuple(saddr: &Addr, daddr: &Addr, sport: u16, dport: u16, proto: u8) -> u32 {
    hash_tuple_seeded(SEED_MAGLEV, saddr, daddr, sport, dport, proto)
}

#[inline(always)]
fn hash_tuple_seeded(
    seed: u32,
    saddr: &Addr,
    daddr: &Addr,
    sport: u16,
    dport: u16,
    proto: u8,
) -> u32 {
    let mut h: u32 = seed ^ u32::from(proto);
    let mut i = 0;
    while i < 4 {
        h = (h ^ addr_word(saddr, i))
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15);
        h = (h ^ addr_word(daddr, i))
            .wrapping_mul(0x1b87_3593)
            .rotate_left(13);
        i += 1;
    }
    h ^= (u32::from(sport) << 16) | u32::from(dport);
    fmix32(h)
}

/// Where a flow's SNAT port candidates come from: a start hashed from the
/// flow, then the ports after it, wrapping in the range (linear probing,
/// as Cilium's SNAT and nf_nat walk). Derived from the flow, not from a
/// random source, so the kernel and the host builds choose the same ports.
/// Consecutive candidates are distinct, so the `SNAT_RETRIES` tries see
/// that many ports (every port of a smaller range): a pick hashed per try
/// saw only about 10 of 16 in a nearly full range of 16. The claim is an
/// insert-if-absent either way, so a candidate in use is skipped, never
/// shared.
#[derive(Clone, Copy)]
pub struct SnatSeq {
    pub start: u32,
}

impl SnatSeq {
    #[inline(always)]
    pub fn of(flow: &Flow) -> Self {
        let (s, d) = (&flow.saddr, &flow.daddr);
        let (sp, dp, p) = (flow.sport, flow.dport, flow.proto);
        // A client reusing its tuple for connection after connection must
        // not walk the same candidates each time: the ports of the previous
        // incarnations are still held (closing, TIME_WAIT) and would run
        // out after `SNAT_RETRIES` reconnects. The initial sequence number
        // differs per connection and stays the same on a retransmitted SYN.
        let isn = if flow.is_tcp() { flow.seq } else { 0 };
        SnatSeq {
            start: fmix32(hash_tuple_seeded(SEED_SNAT_A, s, d, sp, dp, p) ^ isn),
        }
    }

    /// Candidate `i` (< `SNAT_RETRIES`) as an offset into a range of
    /// `range` ports (> 0).
    #[inline(always)]
    pub fn offset(&self, i: u32, range: u32) -> u32 {
        (self.start % range + i) % range
    }
}

/// Where the chosen endpoint sits, relative to the service's `ep_base`.
#[derive(Clone, Copy, Default)]
pub struct Choice {
    pub slot: u32,
    pub ep: Endpoint,
}

#[inline(always)]
fn endpoint<M: Maps>(maps: &M, svc: &ServiceValue, slot: u32, out: &mut Choice) -> bool {
    let Some(idx) = svc.ep_base.checked_add(slot) else {
        return false;
    };
    match maps.endpoint(idx) {
        Some(ep) => {
            out.slot = slot;
            out.ep = ep;
            true
        }
        None => false,
    }
}

/// Maglev over the ready slots, or (P5) hash over the terminating ones when
/// nothing is ready.
#[inline(always)]
fn by_hash<M: Maps>(maps: &M, svc: &ServiceValue, h: u32, out: &mut Choice) -> bool {
    if svc.ready > 0 {
        let mut off = h % svc.ready;
        if svc.maglev_size > 0 {
            let Some(entry) = svc.maglev_base.checked_add(h % svc.maglev_size) else {
                return false;
            };
            if let Some(o) = maps.maglev(entry) {
                // A table from an older layout could point past `ready`;
                // the plain modulo keeps the choice inside the slots.
                if o < svc.ready {
                    off = o;
                }
            }
        }
        endpoint(maps, svc, off, out)
    } else if svc.terminating > 0 {
        endpoint(maps, svc, svc.ready + h % svc.terminating, out)
    } else {
        false
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

/// Choose the endpoint for a new flow into `out`; `false` when nothing
/// serves (P6). Its own BPF function.
#[inline(never)]
pub fn choose<M: Maps>(
    maps: &mut M,
    svc: &ServiceValue,
    flow: &Flow,
    now: u64,
    out: &mut Choice,
) -> bool {
    let h = hash_tuple(&flow.saddr, &flow.daddr, flow.sport, flow.dport, flow.proto);
    if svc.flags & SVC_F_AFFINITY == 0 {
        return by_hash(maps, svc, h, out);
    }
    let key = AffinityKey {
        client: flow.saddr,
        svc_id: svc.id,
        _pad: 0,
    };
    if let Some(mut a) = maps.affinity_get(&key) {
        let timeout = u64::from(svc.affinity_timeout_s).saturating_mul(1_000_000_000);
        let fresh = now.saturating_sub(a.last_used_ns) <= timeout;
        // Only ready slots, or terminating ones while nothing is ready (P5):
        // affinity must not keep sending new flows to a terminating pod.
        if fresh
            && a.slot < serving_limit(svc)
            && endpoint(maps, svc, a.slot, out)
            && addr_eq(&out.ep.addr, &a.endpoint)
            && out.ep.port == a.port
        {
            a.last_used_ns = now;
            maps.affinity_put(&key, &a);
            return true;
        }
    }
    if !by_hash(maps, svc, h, out) {
        return false;
    }
    maps.affinity_put(
        &key,
        &AffinityValue {
            endpoint: out.ep.addr,
            port: out.ep.port,
            _pad: 0,
            slot: out.slot,
            last_used_ns: now,
        },
    );
    true
}

/// The endpoint's family must match the packet's; the control side should
/// never mix them, but a wrong table must not produce a garbage packet.
#[inline(always)]
pub fn family_matches(flow: &Flow, ep: &Endpoint) -> bool {
    is_v4_mapped(&ep.addr) != flow.v6
}
