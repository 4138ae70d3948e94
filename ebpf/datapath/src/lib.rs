//! The Sluice packet program.
//!
//! One source, two engines: compiled for `bpfel-unknown-none` and wrapped by
//! thin aya-ebpf entry points (`ebpf/programs`), or compiled for the host and
//! driven by the agent's user-space engine. Everything here is generic over
//! the small traits in [`env`], never allocates, never panics and only loops
//! with constant bounds, so the verifier and the host see the same logic.
//!
//! Fragments: a non-first fragment carries no L4 header, so neither the
//! service nor the conntrack entry can be found for it, and translating the
//! first fragment alone would split one datagram across two destinations.
//! Fragments aimed at a VIP are therefore dropped (event `Fragment`); others
//! pass untouched. Reassembly or a fragment-id map (Cilium's) is future work.
//! A non-first fragment is recognised as aimed at a VIP when the control side
//! installs the VIP's wildcard key ([`maps::vip_marker_key`]); without it such
//! fragments pass and the node kernel, which does not own the VIP, drops them.
#![cfg_attr(not(feature = "std"), no_std)]

pub mod conntrack;
pub mod csum;
pub mod env;
pub mod maps;
pub mod nat;
pub mod parse;
pub mod reply;
pub mod select;

mod outcome;

#[cfg(feature = "host")]
pub mod host;

pub use outcome::{Event, Outcome, Verdict};

use env::{Clock, Maps, Packet};
use maps::{
    is_v4_mapped, vip_marker_key, Addr, CtKey, CtValue, ServiceKey, CT_DIR_FORWARD, CT_DIR_REPLY,
    CT_F_SNAT, PROTO_TCP, PROTO_UDP, SVC_F_LOCAL,
};
use nat::Target;
use parse::{Flow, Parsed, TCP_RST};

/// Where the program runs; see `docs/architecture.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Frames arriving from the wire on `nic0`: VIP traffic and replies
    /// from remote endpoints.
    WireIngress,
    /// Frames the node sends on `nic0`.
    WireEgress,
    /// Frames a local pod sends: replies of local endpoints.
    FromPod,
}

/// How many SNAT ports are tried before giving up; Cilium bounds its
/// search the same way (SNAT_COLLISION_RETRIES).
pub const SNAT_RETRIES: usize = 16;

#[inline(always)]
fn out(verdict: Verdict, event: Event) -> Outcome {
    Outcome { verdict, event }
}

/// Run the program on one frame.
pub fn process<P: Packet, M: Maps, C: Clock>(
    pkt: &mut P,
    maps: &mut M,
    clock: &mut C,
    hook: Hook,
) -> Outcome {
    let flow = match parse::parse(pkt) {
        Parsed::Flow(f) => f,
        Parsed::NotIp => return out(Verdict::Pass, Event::NotIp),
        Parsed::Unhandled => return out(Verdict::Pass, Event::Unhandled),
        Parsed::Fragment {
            daddr,
            proto,
            dport,
        } => {
            let to_vip = hook == Hook::WireIngress && aimed_at_vip(maps, &daddr, proto, dport);
            let verdict = if to_vip { Verdict::Drop } else { Verdict::Pass };
            return out(verdict, Event::Fragment);
        }
        Parsed::Malformed { daddr } => {
            let to_vip = hook == Hook::WireIngress
                && match daddr {
                    Some(d) => maps.service(&vip_marker_key(&d)).is_some(),
                    None => false,
                };
            let verdict = if to_vip { Verdict::Drop } else { Verdict::Pass };
            return out(verdict, Event::Malformed);
        }
    };
    if flow.proto != PROTO_TCP && flow.proto != PROTO_UDP {
        // ICMP: no ports to translate. Errors about translated flows pass
        // untranslated (future work, as Cilium's ICMP reverse NAT).
        return out(Verdict::Pass, Event::NotService);
    }
    let now = clock.now_ns();

    if let Some(o) = reverse_nat(pkt, maps, &flow, now) {
        return o;
    }
    if hook != Hook::WireIngress {
        return out(Verdict::Pass, Event::NotService);
    }

    let skey = ServiceKey {
        addr: flow.daddr,
        port: flow.dport,
        proto: flow.proto,
        _pad: 0,
    };
    let Some(svc) = maps.service(&skey) else {
        return out(Verdict::Pass, Event::NotService);
    };

    let fkey = CtKey {
        saddr: flow.saddr,
        daddr: flow.daddr,
        sport: flow.sport,
        dport: flow.dport,
        proto: flow.proto,
        dir: CT_DIR_FORWARD,
        _pad: [0; 2],
    };
    if let Some(v) = conntrack::lookup(maps, &fkey, now) {
        let reused = conntrack::is_pure_syn(&flow) && v.state != maps::CT_STATE_SYN_SENT;
        if !reused {
            return translate(pkt, maps, &flow, &fkey, &v, now, Event::Established);
        }
        // The client reuses the tuple for a new connection: choose again,
        // so a terminating endpoint stops getting new connections (P5).
        conntrack::delete_pair(maps, &fkey, &v);
    }

    let Some(choice) = select::choose(maps, clock, &svc, &flow) else {
        return no_endpoint(pkt, &flow);
    };
    if !select::family_matches(&flow, &choice.ep) {
        return out(Verdict::Drop, Event::BadEndpoint);
    }

    let local = svc.flags & SVC_F_LOCAL != 0;
    let state = conntrack::initial_state(&flow);
    let expires = now.saturating_add(conntrack::timeout_ns(flow.is_tcp(), state));
    let mut fval = CtValue {
        nat_saddr: flow.saddr,
        nat_daddr: choice.ep.addr,
        nat_sport: flow.sport,
        nat_dport: choice.ep.port,
        state,
        flags: 0,
        svc_id: svc.id,
        last_seen_ns: now,
        expires_ns: expires,
        ..CtValue::default()
    };
    if local {
        // P4: the client address stays; replies come back endpoint to client.
        let (rkey, rval) = conntrack::mirror(&fkey, &fval);
        if !maps.ct_put(&rkey, &rval) {
            return out(Verdict::Drop, Event::CtFull);
        }
    } else {
        // P3: SNAT to the node address with a port no other flow to the same
        // endpoint holds; claiming the reply key is what reserves it.
        let node = maps.node();
        let snat_addr = if flow.v6 { node.addr6 } else { node.addr4 };
        if snat_addr == [0u8; 16] || (!flow.v6 && !is_v4_mapped(&snat_addr)) {
            return out(Verdict::Drop, Event::NoNodeAddr);
        }
        fval.nat_saddr = snat_addr;
        fval.flags = CT_F_SNAT;
        if !claim_snat_port(
            maps,
            clock,
            &fkey,
            &mut fval,
            node.snat_port_min,
            node.snat_port_max,
            now,
        ) {
            return out(Verdict::Drop, Event::NoSnatPort);
        }
    }
    if !maps.ct_put(&fkey, &fval) {
        let (rkey, _) = conntrack::mirror(&fkey, &fval);
        maps.ct_delete(&rkey);
        return out(Verdict::Drop, Event::CtFull);
    }
    apply(pkt, &flow, &fval, Event::NewFlow)
}

/// Whether a fragment is aimed at a VIP: by full key when the first fragment
/// showed the port, else by the VIP's wildcard marker.
#[inline(always)]
fn aimed_at_vip<M: Maps>(maps: &M, daddr: &Addr, proto: u8, dport: Option<u16>) -> bool {
    if let Some(port) = dport {
        let k = ServiceKey {
            addr: *daddr,
            port,
            proto,
            _pad: 0,
        };
        if maps.service(&k).is_some() {
            return true;
        }
    }
    maps.service(&vip_marker_key(daddr)).is_some()
}

/// Reply of a translated flow: source := VIP:port, destination := client.
#[inline(always)]
fn reverse_nat<P: Packet, M: Maps>(
    pkt: &mut P,
    maps: &mut M,
    flow: &Flow,
    now: u64,
) -> Option<Outcome> {
    let rkey = CtKey {
        saddr: flow.saddr,
        daddr: flow.daddr,
        sport: flow.sport,
        dport: flow.dport,
        proto: flow.proto,
        dir: CT_DIR_REPLY,
        _pad: [0; 2],
    };
    let v = conntrack::lookup(maps, &rkey, now)?;
    Some(translate(pkt, maps, flow, &rkey, &v, now, Event::ReplyNat))
}

#[inline(always)]
fn translate<P: Packet, M: Maps>(
    pkt: &mut P,
    maps: &mut M,
    flow: &Flow,
    key: &CtKey,
    val: &CtValue,
    now: u64,
    event: Event,
) -> Outcome {
    conntrack::touch(maps, key, val, flow, now);
    apply(pkt, flow, val, event)
}

#[inline(always)]
fn apply<P: Packet>(pkt: &mut P, flow: &Flow, val: &CtValue, event: Event) -> Outcome {
    let to = Target {
        saddr: val.nat_saddr,
        sport: val.nat_sport,
        daddr: val.nat_daddr,
        dport: val.nat_dport,
    };
    match nat::rewrite(pkt, flow, &to) {
        Some(()) => out(Verdict::Pass, event),
        None => out(Verdict::Drop, Event::Malformed),
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn claim_snat_port<M: Maps, C: Clock>(
    maps: &mut M,
    clock: &mut C,
    fkey: &CtKey,
    fval: &mut CtValue,
    min: u16,
    max: u16,
    now: u64,
) -> bool {
    if min == 0 || max < min {
        return false;
    }
    let range = u32::from(max - min) + 1;
    let mut i = 0;
    while i < SNAT_RETRIES {
        i += 1;
        fval.nat_sport = min + (clock.random() % range) as u16;
        let (rkey, rval) = conntrack::mirror(fkey, fval);
        if maps.ct_put_new(&rkey, &rval) {
            return true;
        }
        // A port whose previous flow expired is free again.
        if conntrack::lookup(maps, &rkey, now).is_none() && maps.ct_put(&rkey, &rval) {
            return true;
        }
    }
    false
}

/// P6: nothing serves this frontend.
#[inline(always)]
fn no_endpoint<P: Packet>(pkt: &mut P, flow: &Flow) -> Outcome {
    if flow.is_tcp() {
        // Never answer a reset with a reset (RFC 9293).
        if flow.tcp_flags & TCP_RST != 0 {
            return out(Verdict::Drop, Event::NoEndpoint);
        }
        return match reply::tcp_reset(pkt, flow) {
            Some(()) => out(Verdict::Pass, Event::Reset),
            None => out(Verdict::Drop, Event::NoEndpoint),
        };
    }
    if flow.is_udp() {
        return match reply::port_unreachable(pkt, flow) {
            Some(()) => out(Verdict::Pass, Event::Unreachable),
            None => out(Verdict::Drop, Event::NoEndpoint),
        };
    }
    out(Verdict::Drop, Event::NoEndpoint)
}
