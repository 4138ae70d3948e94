//! The load balancer's packet path (issue 11): a one-armed, Katran-shaped
//! L4 passthrough balancer in front of the nodes.
//!
//! [`process_lb`] runs on every frame arriving on the load balancer's
//! interface (TC ingress in the kernel engine, the relay's wire socket in
//! the emulated one):
//!
//! 1. Frames not aimed at a VIP pass untouched: they are the load
//!    balancer's own traffic (ARP, neighbour discovery, health probes and
//!    their answers, management).
//! 2. A TCP or UDP frame to a frontend (VIP, port, protocol) is delivered to
//!    a backend node at L2: the destination MAC becomes the node's, the
//!    source MAC the load balancer's own, and nothing else changes (the IP
//!    header and the payload are the client's; the node's program sees the
//!    VIP and answers the client directly: direct server return). The
//!    verdict is [`LbVerdict::Tx`]: out of the interface it came in on.
//! 3. Anything else aimed at a VIP is dropped, never passed: the load
//!    balancer's stack does not own the VIP and must not route it, answer
//!    it or send errors about it. That covers other ports and protocols
//!    (ICMP included), frames cut short, and IP fragments: a non-first
//!    fragment has no port, so neither its frontend nor its flow can be
//!    found, and sending the first fragment alone would split the datagram
//!    (the agent drops them the same way). VIP frames not addressed to the
//!    load balancer's MAC (flooded, or seen in promiscuous mode) are
//!    dropped too, so a frame is never delivered twice.
//!
//! Backend choice: a flow table (LRU, 5-tuple → backend id, last seen)
//! keeps a flow on its backend while that backend is configured for the
//! frontend's Service, whatever other backends come and go. Health follows
//! Google Cloud's passthrough load balancers: a TCP connection stays on a
//! backend that turned unhealthy (only new connections avoid it: a pure SYN
//! whose entry names an unhealthy backend is chosen again); a UDP flow moves
//! off an unhealthy backend while the Service has a healthy one. New flows
//! (and re-chosen ones) take Maglev on a hash of the 5-tuple over the
//! Service's window, which the control side builds over the healthy
//! backends, or over all configured ones when none is healthy ("send to
//! all"); the program only indexes it.
//!
//! Like [`crate::process`], this is `no_std`, never allocates or panics and
//! only loops with constant bounds; the verifier and the host run the same
//! code.

pub mod maps;

#[cfg(feature = "host")]
pub mod host;

#[cfg(all(test, feature = "host"))]
mod tests;

use crate::env::{Clock, Packet};
use crate::parse::{self, Flow, Parsed, TCP_ACK, TCP_SYN};
use crate::select::hash_tuple;
use maps::{
    mac_is_zero, vip_marker, FlowKey, FlowValue, FrontendKey, FrontendValue, LbBackend, LbConfig,
    FLOW_TOUCH_NS, PROTO_TCP, PROTO_UDP,
};

/// What the load balancer's program needs from the engine running it.
/// Values are returned by copy, as in [`crate::env::Maps`].
pub trait LbMaps {
    fn config(&self) -> LbConfig;
    fn frontend(&self, key: &FrontendKey) -> Option<FrontendValue>;
    fn backend(&self, id: u32) -> Option<LbBackend>;
    /// Entry `entry` of the flat Maglev array: a backend id.
    fn maglev(&self, entry: u32) -> Option<u32>;
    fn flow_get(&self, key: &FlowKey) -> Option<FlowValue>;
    /// Insert or replace (an LRU: never refused for room).
    fn flow_put(&mut self, key: &FlowKey, value: &FlowValue);
    /// Set the last-seen time of an existing entry (the kernel adapter
    /// writes the one field in place).
    fn flow_touch(&mut self, key: &FlowKey, now_ns: u64) {
        if let Some(mut v) = self.flow_get(key) {
            v.last_seen_ns = now_ns;
            self.flow_put(key, &v);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbVerdict {
    /// Not for a VIP: up the load balancer's own stack.
    Pass,
    Drop,
    /// Rewritten for a backend: out of the interface it came in on
    /// (`bpf_redirect` to the ingress ifindex in the kernel engine).
    Tx,
}

impl LbVerdict {
    pub const KINDS: [LbVerdict; 3] = [LbVerdict::Pass, LbVerdict::Drop, LbVerdict::Tx];

    /// Metric label.
    pub fn name(&self) -> &'static str {
        match self {
            LbVerdict::Pass => "lb_pass",
            LbVerdict::Drop => "lb_drop",
            LbVerdict::Tx => "lb_tx",
        }
    }

    /// Its counter's index in the events counters, after the events'.
    #[inline(always)]
    pub fn counter_index(&self) -> u32 {
        LbEvent::COUNT as u32
            + match self {
                LbVerdict::Pass => 0,
                LbVerdict::Drop => 1,
                LbVerdict::Tx => 2,
            }
    }
}

/// What [`process_lb`] decided: the verdict, why, and for [`LbVerdict::Tx`]
/// the backend the frame went to (counted per backend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbOutcome {
    pub verdict: LbVerdict,
    pub event: LbEvent,
    /// The backend id when `verdict` is `Tx`, else 0.
    pub backend: u32,
}

macro_rules! lb_events {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// What happened to a frame; one metrics counter each.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum LbEvent {
            $($(#[$doc])* $v,)*
        }

        impl LbEvent {
            pub const ALL: &'static [LbEvent] = &[$(LbEvent::$v,)*];
            pub const COUNT: usize = LbEvent::ALL.len();

            /// Metric label.
            pub fn name(&self) -> &'static str {
                match self {
                    $(LbEvent::$v => $name,)*
                }
            }

            /// Dense index, for per-event counter arrays.
            #[inline(always)]
            pub fn index(&self) -> usize {
                *self as usize
            }
        }
    };
}

lb_events! {
    /// Not IPv4/IPv6 (ARP, LLDP, ...): passed.
    NotIp => "lb_not_ip",
    /// IP, not aimed at a VIP: passed.
    NotVip => "lb_not_vip",
    /// An IP fragment aimed at a VIP: dropped.
    Fragment => "lb_fragment",
    /// Cut-off or inconsistent headers aimed at a VIP: dropped.
    Malformed => "lb_malformed",
    /// Aimed at a VIP but at no frontend (another port or protocol, ICMP):
    /// dropped.
    NotFrontend => "lb_not_frontend",
    /// A VIP frame not addressed to the load balancer's MAC: dropped.
    NotForUs => "lb_not_for_us",
    /// A VIP frame before the interface is configured: dropped.
    NoConfig => "lb_no_config",
    /// The frontend has no backend to deliver to: dropped.
    NoBackend => "lb_no_backend",
    /// A flow without an entry: backend chosen by Maglev, entry written.
    NewFlow => "lb_new_flow",
    /// A flow delivered to the backend its entry names.
    Established => "lb_established",
    /// A flow whose entry named a backend it may no longer use (removed,
    /// or unhealthy for a new TCP connection or a UDP flow): chosen again.
    Rechosen => "lb_rechosen",
}

#[inline(always)]
fn out(verdict: LbVerdict, event: LbEvent) -> LbOutcome {
    LbOutcome {
        verdict,
        event,
        backend: 0,
    }
}

/// The per-run state, in [`process_lb`]'s frame; sub-functions get it by
/// reference (BPF calls take at most five arguments).
#[repr(C, align(8))]
struct LbRun {
    flow: Flow,
    key: FlowKey,
    now: u64,
    /// The chosen backend.
    backend_id: u32,
    _pad: u32,
    backend: LbBackend,
    _pad2: u32,
}

impl LbRun {
    /// Zero the state a word at a time (see `Run::zero_in` in the agent's
    /// program: a derived zeroing becomes a byte-loop `memset` in BPF).
    #[inline(always)]
    fn zero_in(slot: &mut core::mem::MaybeUninit<LbRun>) -> &mut LbRun {
        const WORDS: usize = core::mem::size_of::<LbRun>() / 8;
        let words = slot.as_mut_ptr().cast::<u64>();
        let mut i = 0;
        while i < WORDS {
            // SAFETY: `LbRun` is `WORDS` aligned words (asserted below).
            unsafe { core::ptr::write_volatile(words.add(i), 0) };
            i += 1;
        }
        // SAFETY: every byte was written; all-zero is a valid `LbRun`.
        unsafe { slot.assume_init_mut() }
    }
}

const _: () = assert!(
    core::mem::size_of::<LbRun>().is_multiple_of(8) && core::mem::align_of::<LbRun>() >= 8,
    "LbRun::zero_in writes whole aligned words"
);

/// Run the load balancer's program on one frame (see the module
/// documentation).
pub fn process_lb<P: Packet, M: LbMaps, C: Clock>(
    pkt: &mut P,
    maps: &mut M,
    clock: &C,
) -> LbOutcome {
    let mut slot = core::mem::MaybeUninit::<LbRun>::uninit();
    let run = LbRun::zero_in(&mut slot);
    match parse::parse(pkt, &mut run.flow) {
        Parsed::Flow => {}
        p => return unparsed(maps, &run.flow, p),
    }
    let flow = &run.flow;
    if flow.proto != PROTO_TCP && flow.proto != PROTO_UDP {
        // ICMP: no frontend takes it.
        return by_marker(maps, &flow.daddr, LbEvent::NotFrontend);
    }
    let fkey = FrontendKey {
        addr: flow.daddr,
        port: flow.dport,
        proto: flow.proto,
        _pad: 0,
    };
    let Some(fe) = maps.frontend(&fkey) else {
        return by_marker(maps, &flow.daddr, LbEvent::NotFrontend);
    };
    let cfg = maps.config();
    if mac_is_zero(&cfg.mac) {
        return out(LbVerdict::Drop, LbEvent::NoConfig);
    }
    match pkt.load::<6>(0) {
        Some(dst) if dst == cfg.mac => {}
        _ => return out(LbVerdict::Drop, LbEvent::NotForUs),
    }
    if fe.maglev_size == 0 {
        return out(LbVerdict::Drop, LbEvent::NoBackend);
    }
    run.now = clock.now_ns();
    let event = choose(maps, run, &fe);
    if event == LbEvent::NoBackend {
        return out(LbVerdict::Drop, event);
    }
    deliver(pkt, &run.backend, &cfg, run.backend_id, event)
}

/// Frames without a complete TCP/UDP/ICMP flow: passed unless aimed at a
/// VIP. Its own BPF function.
#[inline(never)]
fn unparsed<M: LbMaps>(maps: &M, flow: &Flow, parsed: Parsed) -> LbOutcome {
    match parsed {
        Parsed::NotIp => out(LbVerdict::Pass, LbEvent::NotIp),
        Parsed::Fragment { .. } => by_marker(maps, &flow.daddr, LbEvent::Fragment),
        Parsed::Malformed { has_daddr: true } => by_marker(maps, &flow.daddr, LbEvent::Malformed),
        // Cut inside the IP header: the destination is unknown.
        Parsed::Malformed { has_daddr: false } => out(LbVerdict::Pass, LbEvent::NotVip),
        Parsed::Unhandled | Parsed::Flow => by_marker(maps, &flow.daddr, LbEvent::NotFrontend),
    }
}

/// Drop with `event` if `daddr` is a VIP, else pass.
#[inline(always)]
fn by_marker<M: LbMaps>(maps: &M, daddr: &maps::Addr, event: LbEvent) -> LbOutcome {
    if maps.frontend(&vip_marker(daddr)).is_some() {
        out(LbVerdict::Drop, event)
    } else {
        out(LbVerdict::Pass, LbEvent::NotVip)
    }
}

/// A TCP segment opening a connection: SYN without ACK.
#[inline(always)]
fn pure_syn(flow: &Flow) -> bool {
    flow.proto == PROTO_TCP && flow.tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN
}

/// Whether `b` may serve frontend `fe` at all.
#[inline(always)]
fn serves(b: &LbBackend, fe: &FrontendValue) -> bool {
    b.service == fe.service && !mac_is_zero(&b.mac)
}

/// Keep the flow's backend, or choose one: sets `run.backend_id` and
/// `run.backend` and returns the event (`NoBackend`: nothing set). Its own
/// BPF function.
#[inline(never)]
fn choose<M: LbMaps>(maps: &mut M, run: &mut LbRun, fe: &FrontendValue) -> LbEvent {
    let flow = &run.flow;
    let key = &mut run.key;
    key.saddr = flow.saddr;
    key.daddr = flow.daddr;
    key.sport = flow.sport;
    key.dport = flow.dport;
    key.proto = flow.proto;
    let mut event = LbEvent::NewFlow;
    if let Some(v) = maps.flow_get(key) {
        if let Some(b) = maps.backend(v.backend) {
            if serves(&b, fe) {
                let keep = if b.healthy() {
                    true
                } else if flow.proto == PROTO_TCP {
                    // An established connection stays; a new one avoids it.
                    !pure_syn(flow)
                } else {
                    // UDP moves off it, unless no backend is healthy.
                    fe.healthy == 0
                };
                if keep {
                    if run.now.saturating_sub(v.last_seen_ns) >= FLOW_TOUCH_NS {
                        maps.flow_touch(key, run.now);
                    }
                    run.backend_id = v.backend;
                    run.backend = b;
                    return LbEvent::Established;
                }
            }
        }
        event = LbEvent::Rechosen;
    }
    let h = hash_tuple(&flow.saddr, &flow.daddr, flow.sport, flow.dport, flow.proto);
    let Some(entry) = fe.maglev_base.checked_add(h % fe.maglev_size) else {
        return LbEvent::NoBackend;
    };
    let Some(id) = maps.maglev(entry) else {
        return LbEvent::NoBackend;
    };
    let Some(b) = maps.backend(id) else {
        return LbEvent::NoBackend;
    };
    if !serves(&b, fe) {
        return LbEvent::NoBackend;
    }
    maps.flow_put(
        key,
        &FlowValue {
            backend: id,
            _pad: 0,
            last_seen_ns: run.now,
        },
    );
    run.backend_id = id;
    run.backend = b;
    event
}

/// Address the frame to the backend: destination MAC the node's, source
/// the load balancer's; nothing else changes.
#[inline(always)]
fn deliver<P: Packet>(
    pkt: &mut P,
    backend: &LbBackend,
    cfg: &LbConfig,
    id: u32,
    event: LbEvent,
) -> LbOutcome {
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&backend.mac);
    macs[6..].copy_from_slice(&cfg.mac);
    match pkt.store(0, &macs) {
        Some(()) => LbOutcome {
            verdict: LbVerdict::Tx,
            event,
            backend: id,
        },
        None => out(LbVerdict::Drop, LbEvent::Malformed),
    }
}
