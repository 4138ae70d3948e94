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
pub mod lb;
pub mod maps;
pub mod nat;
pub mod parse;
pub mod reply;
pub mod select;

mod outcome;

#[cfg(feature = "host")]
pub mod host;

pub use outcome::{Event, Outcome, Verdict};

use conntrack::{CtEntry, PortUse, Touched};
use env::{Clock, Maps, Packet};
use maps::{
    addr_is_zero, is_v4_mapped, vip_marker_key, LocalKey, ServiceKey, SnatExhaustKey,
    CT_DIR_FORWARD, CT_DIR_REPLY, CT_F_SNAT, CT_STATE_SYN_SENT, PROTO_TCP, PROTO_UDP, SVC_F_LOCAL,
};
use parse::{Flow, Parsed, TCP_RST};
use select::{Choice, SnatSeq};

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
pub const SNAT_RETRIES: u32 = 16;

#[inline(always)]
fn out(verdict: Verdict, event: Event) -> Outcome {
    Outcome { verdict, event }
}

/// Everything one run keeps, in one place (the BPF stack frame of
/// [`process`]); the sub-functions get it by reference. BPF calls take at
/// most five arguments, so this is also how they get more than that.
#[derive(Default)]
struct Run {
    flow: Flow,
    /// The one conntrack key/value buffer (see [`CtEntry`]).
    ct: CtEntry,
    now: u64,
}

impl Run {
    /// `slot` set to all zeros a word at a time, in place. A derived
    /// `Default` (or any zeroing LLVM sees through, or a zeroed value moved
    /// into place) becomes a call to `memset`, which the BPF build links as
    /// a byte loop: 168 stores on every packet at every hook, the program's
    /// largest single cost in a profile. Volatile stores are not merged
    /// back into that call.
    #[inline(always)]
    fn zero_in(slot: &mut core::mem::MaybeUninit<Run>) -> &mut Run {
        const WORDS: usize = core::mem::size_of::<Run>() / 8;
        let words = slot.as_mut_ptr().cast::<u64>();
        let mut i = 0;
        while i < WORDS {
            // SAFETY: `Run` is `WORDS` aligned words (asserted below), so
            // each store is in bounds and aligned.
            unsafe { core::ptr::write_volatile(words.add(i), 0) };
            i += 1;
        }
        // SAFETY: every byte was written, and all-zero is a valid `Run`
        // (integers, byte arrays and a `bool`).
        unsafe { slot.assume_init_mut() }
    }
}

const _: () = assert!(
    core::mem::size_of::<Run>().is_multiple_of(8) && core::mem::align_of::<Run>() >= 8,
    "Run::zero_in writes whole aligned words"
);

/// What [`to_frontend`] leaves for [`process`] to finish.
#[derive(Clone, Copy)]
enum Step {
    Done(Outcome),
    /// Rewrite the packet with `run.ct.val`.
    Apply(Event),
    /// Nothing serves the frontend (P6).
    NoEndpoint,
    /// `run.ct` holds the new flow's forward entry, endpoint chosen;
    /// conntrack it (`local`: without SNAT) and rewrite.
    NewFlow {
        local: bool,
    },
}

/// Run the program on one frame.
///
/// For the BPF build, the functions marked `#[inline(never)]` are BPF
/// functions of their own, each with its own stack frame; the verifier adds
/// frames up along a call chain (at most 512 bytes). So this function is a
/// flat dispatcher holding the per-run state, and the work happens in
/// siblings called from here, at most two calls deep.
/// `ebpf/programs/VERIFIER_NOTES.md` has the frame sizes.
pub fn process<P: Packet, M: Maps, C: Clock>(
    pkt: &mut P,
    maps: &mut M,
    clock: &mut C,
    hook: Hook,
) -> Outcome {
    // A flooded frame meant for another host: translating it would answer
    // for that host (a second SYN-ACK from a local pod, or a reset when this
    // node has no endpoint). The node's stack drops what passes.
    if hook != Hook::WireEgress && pkt.for_other_host() {
        return out(Verdict::Pass, Event::OtherHost);
    }
    let mut slot = core::mem::MaybeUninit::<Run>::uninit();
    let run = Run::zero_in(&mut slot);
    let parsed = parse::parse(pkt, &mut run.flow);
    // Anti-spoofing: a pod speaks only for its own addresses. Otherwise a
    // pod forging another pod's reply (its address and port, to the node's
    // SNAT port) gets it reverse-translated and delivered to that flow's
    // client, and a forged reset closes the flow's conntrack entry; and the
    // node, which routes pods with `rp_filter` off (the reverse-translated
    // replies come from VIPs), forwards whatever else it forges.
    if hook == Hook::FromPod
        && parsed != Parsed::NotIp
        && !source_is_own(maps, &run.flow.saddr, pkt.ingress_link())
    {
        return out(Verdict::Drop, Event::Spoofed);
    }
    if parsed != Parsed::Flow {
        return unparsed(maps, &run.flow, parsed, hook);
    }
    if run.flow.proto != PROTO_TCP && run.flow.proto != PROTO_UDP {
        // ICMP: no ports to translate. Errors about translated flows pass
        // untranslated (future work, as Cilium's ICMP reverse NAT).
        return out(Verdict::Pass, Event::NotService);
    }
    run.now = clock.now_ns();

    // A reply of a translated flow (any hook): source := VIP:port,
    // destination := client.
    run.ct.set_key(&run.flow, CT_DIR_REPLY);
    let event = if conntrack::lookup(maps, &mut run.ct, &run.flow, run.now) {
        match conntrack::touch(maps, &mut run.ct, &run.flow, run.now) {
            Touched::Yes => Event::ReplyNat,
            Touched::Refused { drop: false } => Event::CtInvalid,
            Touched::Refused { drop: true } => return out(Verdict::Drop, Event::CtInvalid),
        }
    } else if hook != Hook::WireIngress {
        return out(Verdict::Pass, Event::NotService);
    } else {
        match to_frontend(maps, run) {
            Step::Done(o) => return o,
            Step::Apply(event) => event,
            Step::NoEndpoint => return no_endpoint(pkt, &run.flow),
            Step::NewFlow { local } => {
                match conntrack_new_flow(maps, run, local) {
                    None => {}
                    Some(Event::NoSnatPort) => {
                        count_snat_exhausted(maps, &run.ct.val);
                        return no_snat_port(pkt, &run.flow);
                    }
                    Some(why) => return out(Verdict::Drop, why),
                }
                Event::NewFlow
            }
        }
    };
    // A translated packet for a pod on this node goes straight to the
    // pod's link, past the node's routing (and its TTL is spent here, as
    // that routing would have). Replies and remote endpoints are routed.
    // (`run.ct` is the forward entry for packets to a frontend, the reply
    // entry for replies.)
    let link = if hook == Hook::WireIngress && run.ct.key.dir == CT_DIR_FORWARD && run.flow.ttl > 1
    {
        local_link_frame(pkt, maps, &run.ct.val.nat_daddr)
    } else {
        0
    };
    match nat::rewrite(pkt, &run.flow, &run.ct.val, link != 0) {
        Some(()) if link != 0 => out(Verdict::Redirect { ifindex: link }, event),
        Some(()) => out(Verdict::Pass, event),
        None => out(Verdict::Drop, Event::Malformed),
    }
}

/// Whether `saddr`, the source of a frame a pod sent on `link`, is the
/// pod's own: one of the addresses published for that very link. Also
/// believed: IPv6 link-local sources (neighbour discovery with the node,
/// which never forwards them) and a source the parser did not get to (all
/// zero: the header was cut short, which the node's stack drops; or
/// IPv6's unspecified address, duplicate address detection). Its own BPF
/// function, so the lookup key stays out of `process`'s frame.
#[inline(never)]
fn source_is_own<M: Maps>(maps: &M, saddr: &maps::Addr, link: u32) -> bool {
    if addr_is_zero(saddr) || (saddr[0] == 0xfe && saddr[1] & 0xc0 == 0x80) {
        return true;
    }
    match maps.local_link(&LocalKey { addr: *saddr }) {
        Some(l) => l.ifindex != 0 && l.ifindex == link,
        None => false,
    }
}

/// If `addr` is a pod on this node, address the frame to it on its link
/// (destination MAC the pod's, source the node side's) and return the
/// link; else 0 and the frame is untouched. Its own BPF function, so the
/// link and MAC buffers stay out of `process`'s frame.
#[inline(never)]
fn local_link_frame<P: Packet, M: Maps>(pkt: &mut P, maps: &M, addr: &maps::Addr) -> u32 {
    let Some(link) = maps.local_link(&LocalKey { addr: *addr }) else {
        return 0;
    };
    if link.ifindex == 0 {
        return 0;
    }
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&link.pod_mac);
    macs[6..].copy_from_slice(&link.node_mac);
    match pkt.store(0, &macs) {
        Some(()) => link.ifindex,
        None => 0,
    }
}

/// Frames without a complete flow: passed, or dropped when aimed at a VIP
/// (fragments, cut-off or inconsistent headers at `WireIngress`). Its own
/// BPF function, so its lookups' temporaries stay out of `process`'s frame.
#[inline(never)]
fn unparsed<M: Maps>(maps: &M, flow: &Flow, parsed: Parsed, hook: Hook) -> Outcome {
    match parsed {
        Parsed::Flow => out(Verdict::Pass, Event::NotService),
        Parsed::NotIp => out(Verdict::Pass, Event::NotIp),
        Parsed::Unhandled => out(Verdict::Pass, Event::Unhandled),
        Parsed::Fragment { has_port } => {
            let to_vip = hook == Hook::WireIngress && aimed_at_vip(maps, flow, has_port);
            let verdict = if to_vip { Verdict::Drop } else { Verdict::Pass };
            out(verdict, Event::Fragment)
        }
        Parsed::Malformed { has_daddr } => {
            let to_vip = hook == Hook::WireIngress
                && has_daddr
                && maps.service(&vip_marker_key(&flow.daddr)).is_some();
            let verdict = if to_vip { Verdict::Drop } else { Verdict::Pass };
            out(verdict, Event::Malformed)
        }
    }
}

/// Whether a fragment is aimed at a VIP: by full key when the first fragment
/// showed the port, else by the VIP's wildcard marker.
#[inline(always)]
fn aimed_at_vip<M: Maps>(maps: &M, flow: &Flow, has_port: bool) -> bool {
    if has_port {
        let k = ServiceKey {
            addr: flow.daddr,
            port: flow.dport,
            proto: flow.proto,
            _pad: 0,
        };
        if maps.service(&k).is_some() {
            return true;
        }
    }
    maps.service(&vip_marker_key(&flow.daddr)).is_some()
}

/// A packet at `WireIngress` that is no reply: to a frontend? Finds the
/// established flow or chooses the endpoint of a new one.
#[inline(never)]
fn to_frontend<M: Maps>(maps: &mut M, run: &mut Run) -> Step {
    let flow = &run.flow;
    let skey = ServiceKey {
        addr: flow.daddr,
        port: flow.dport,
        proto: flow.proto,
        _pad: 0,
    };
    let Some(svc) = maps.service(&skey) else {
        return Step::Done(out(Verdict::Pass, Event::NotService));
    };

    let ct = &mut run.ct;
    ct.set_key(flow, CT_DIR_FORWARD);
    if conntrack::lookup(maps, ct, flow, run.now) {
        // A pure SYN on an established or closing flow, or on a flow still
        // opening but with another initial sequence number, is a new
        // connection reusing the tuple; only a retransmitted SYN (same
        // number) keeps the endpoint chosen for the first. Without the
        // second case, a connect that timed out against an endpoint that
        // died stuck every later connect from the same port to it for the
        // flow's whole SYN_SENT timeout.
        let reused = conntrack::is_pure_syn(flow)
            && (ct.val.state != CT_STATE_SYN_SENT || ct.val.syn_seq != flow.seq);
        if !reused {
            return match conntrack::touch(maps, ct, flow, run.now) {
                Touched::Yes => Step::Apply(Event::Established),
                Touched::Refused { drop: false } => Step::Apply(Event::CtInvalid),
                Touched::Refused { drop: true } => Step::Done(out(Verdict::Drop, Event::CtInvalid)),
            };
        }
        // The client reuses the tuple for a new connection: choose again,
        // so a terminating endpoint stops getting new connections (P5).
        // The new forward entry replaces the old one; the old reply entry
        // stays until it expires, so the SNAT claim passes over the port
        // the endpoint may still hold in TIME_WAIT.
    }

    let mut choice = Choice::default();
    if !select::choose(maps, &svc, flow, run.now, &mut choice) {
        return Step::NoEndpoint;
    }
    if !select::family_matches(flow, &choice.ep) {
        return Step::Done(out(Verdict::Drop, Event::BadEndpoint));
    }
    let state = conntrack::initial_state(flow);
    let v = &mut ct.val;
    v.nat_saddr = flow.saddr;
    v.nat_daddr = choice.ep.addr;
    v.nat_sport = flow.sport;
    v.nat_dport = choice.ep.port;
    v.state = state;
    v.flags = 0;
    v.rep_state = 0;
    v.rep_flags = 0;
    v.svc_id = svc.id;
    v.syn_seq = if flow.is_tcp() { flow.seq } else { 0 };
    v.close_seq = 0;
    v.close_tsval = 0;
    // The reply entry is written first and tracks the endpoint's side,
    // which has sent nothing yet; the forward entry gets the client's
    // segment before it is written ([`conntrack_new_flow`]).
    v.seq_nxt = 0;
    v.seq_ack = 0;
    v.expires_ns = run
        .now
        .saturating_add(conntrack::timeout_ns(flow.is_tcp(), state));
    Step::NewFlow {
        local: svc.flags & SVC_F_LOCAL != 0,
    }
}

/// Write both conntrack entries of the new flow in `run.ct` (forward
/// orientation, endpoint set), claiming a SNAT port unless `local`. `None`:
/// done, translate; `Some`: why the flow cannot be made.
#[inline(never)]
fn conntrack_new_flow<M: Maps>(maps: &mut M, run: &mut Run, local: bool) -> Option<Event> {
    let ct = &mut run.ct;
    if local {
        // P4: the client address stays; replies come back endpoint to client.
        ct.flip();
        let ok = maps.ct_put(&ct.key, &ct.val);
        ct.flip();
        if !ok {
            return Some(Event::CtFull);
        }
    } else {
        // P3: SNAT to the node address with a port no other flow to the same
        // endpoint holds; claiming the reply key is what reserves it.
        let node = maps.node();
        let snat_addr = if run.flow.v6 {
            &node.addr6
        } else {
            &node.addr4
        };
        if addr_is_zero(snat_addr) || (!run.flow.v6 && !is_v4_mapped(snat_addr)) {
            return Some(Event::NoNodeAddr);
        }
        ct.val.nat_saddr = *snat_addr;
        ct.val.flags = CT_F_SNAT;
        let seq = SnatSeq::of(&run.flow);
        if !claim_snat_port(maps, ct, &run.flow, &seq, &node, run.now) {
            return Some(Event::NoSnatPort);
        }
    }
    conntrack::seq_start(&run.flow, &mut ct.val);
    if !maps.ct_put(&ct.key, &ct.val) {
        ct.flip();
        maps.ct_delete(&ct.key);
        return Some(Event::CtFull);
    }
    None
}

/// Find a free SNAT port in the node's range for the forward entry `ct`
/// (SNAT address set): claim the reply entry with an insert-if-absent,
/// trying the flow's candidates in order. On success `ct.val.nat_sport` is
/// the port and the reply entry is written; `ct` is back in forward
/// orientation either way.
#[inline(never)]
fn claim_snat_port<M: Maps>(
    maps: &mut M,
    ct: &mut CtEntry,
    syn: &Flow,
    seq: &SnatSeq,
    node: &maps::NodeConfig,
    now: u64,
) -> bool {
    let (min, max) = (node.snat_port_min, node.snat_port_max);
    if min == 0 || max < min {
        return false;
    }
    let range = u32::from(max - min) + 1;
    // In reply orientation the candidate port is the key's destination port
    // (the forward value's `nat_sport`).
    ct.flip();
    let claimed = claim_pass(maps, ct, syn, seq, min, range, now);
    ct.flip();
    claimed
}

/// One walk over the flow's SNAT candidates for the reply entry `ct`: claim
/// the first absent or free one, or one whose flow ended and whose
/// TIME_WAIT at the endpoint takes `syn`.
///
/// A port the endpoint holds against the SYN is never handed out, not even
/// as a last resort: its TIME_WAIT answers the SYN with an ACK for the old
/// connection, the client resets and retransmits, and the retransmit (an
/// older timestamp still) fares the same until the TIME_WAIT ends, up to a
/// minute. A reset at once is the better answer.
#[inline(always)]
fn claim_pass<M: Maps>(
    maps: &mut M,
    ct: &mut CtEntry,
    syn: &Flow,
    seq: &SnatSeq,
    min: u16,
    range: u32,
    now: u64,
) -> bool {
    maps.first_of(SNAT_RETRIES, |maps, i| {
        ct.key.dport = min + seq.offset(i, range) as u16;
        if maps.ct_put_new(&ct.key, &ct.val) {
            return true;
        }
        let wanted = match maps.ct_holder(&ct.key) {
            None => true,
            Some(holder) => match conntrack::port_use(&holder, now) {
                PortUse::Free => true,
                PortUse::Held => conntrack::time_wait_accepts(&holder, syn),
                PortUse::Live => false,
            },
        };
        wanted && maps.ct_put(&ct.key, &ct.val)
    })
}

/// Count a new flow to `v`'s endpoint that found no SNAT port. Its own
/// BPF function: the key is built in its frame, not in the dispatcher's,
/// which sits under the deepest call chain (512 bytes in all).
#[inline(never)]
fn count_snat_exhausted<M: Maps>(maps: &mut M, v: &maps::CtValue) {
    maps.snat_exhausted(&SnatExhaustKey {
        addr: v.nat_daddr,
        port: v.nat_dport,
        _pad: 0,
        svc_id: v.svc_id,
    });
}

/// Answer a connection nothing will take, as a closed port would: a reset
/// for TCP (never for a reset, RFC 9293), port unreachable for UDP. The
/// event of what was sent; `None`: nothing.
#[inline(always)]
fn refuse<P: Packet>(pkt: &mut P, flow: &Flow) -> Option<Event> {
    if flow.is_tcp() {
        if flow.tcp_flags & TCP_RST != 0 {
            return None;
        }
        reply::tcp_reset(pkt, flow)?;
        return Some(Event::Reset);
    }
    if flow.is_udp() {
        reply::port_unreachable(pkt, flow)?;
        return Some(Event::Unreachable);
    }
    None
}

/// P6: nothing serves this frontend.
#[inline(always)]
fn no_endpoint<P: Packet>(pkt: &mut P, flow: &Flow) -> Outcome {
    match refuse(pkt, flow) {
        Some(event) => out(Verdict::Pass, event),
        None => out(Verdict::Drop, Event::NoEndpoint),
    }
}

/// P3: no SNAT port is left for a new flow to its endpoint. Refused as P6
/// refuses, so the client fails at once rather than retrying its SYN into
/// a full range; counted as `no_snat_port` either way, which is what the
/// agent reports. Its own BPF function, off the dispatcher's frame.
#[inline(never)]
fn no_snat_port<P: Packet>(pkt: &mut P, flow: &Flow) -> Outcome {
    let verdict = match refuse(pkt, flow) {
        Some(_) => Verdict::Pass,
        None => Verdict::Drop,
    };
    out(verdict, Event::NoSnatPort)
}
