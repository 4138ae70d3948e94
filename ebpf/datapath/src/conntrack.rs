//! Connection tracking: TCP state, timeouts, and keeping the forward and
//! reply entries of a flow in step.

use crate::env::{CtWrite, Maps, SeqTrack};
use crate::maps::{
    CtKey, CtValue, CT_DIR_FORWARD, CT_DIR_REPLY, CT_F_FIN_FORWARD, CT_F_FIN_REPLY, CT_F_LAST_ACK,
    CT_F_REPLY_CLOSED_FIRST, CT_STATE_CLOSED, CT_STATE_CLOSING, CT_STATE_ESTABLISHED,
    CT_STATE_FIN_WAIT, CT_STATE_NONE, CT_STATE_SYN_SENT,
};
use crate::parse::{Flow, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};

const NS_PER_S: u64 = 1_000_000_000;

// Cilium's defaults (bpf-ct-timeout-*), which kube-proxy users rarely notice
// differ from nf_conntrack's: a half-open flow gets a minute, an established
// one six hours, a closing one ten seconds, UDP/other a minute.
/// TCP between the first SYN and the handshake completing.
pub const CT_TIMEOUT_TCP_SYN_NS: u64 = 60 * NS_PER_S;
/// TCP after the handshake.
pub const CT_TIMEOUT_TCP_ESTABLISHED_NS: u64 = 21_600 * NS_PER_S;
/// TCP after a FIN or RST: long enough for the last ACKs and retransmits.
pub const CT_TIMEOUT_TCP_CLOSE_NS: u64 = 10 * NS_PER_S;
/// UDP and everything else.
pub const CT_TIMEOUT_OTHER_NS: u64 = 60 * NS_PER_S;

/// How long an endpoint keeps a tuple in TIME_WAIT after the flow it closed
/// first is over (Linux: `TCP_TIMEWAIT_LEN`, 60 s, not tunable). Within it,
/// the socket takes a new SYN on the tuple only when the SYN is newer than
/// the old connection ([`time_wait_accepts`]); otherwise it answers with an
/// ACK for the old one, which costs the client a reset and a SYN
/// retransmit (a second or more). nf_conntrack keeps such tuples for 120 s
/// for the same reason.
///
/// 66 s, not 60: the TIME_WAIT timer sits on the kernel's timer wheel,
/// which rounds a 60 s timer up to its level's granularity: 512 jiffies at
/// HZ 250 (2.05 s; measured here, six TIME_WAITs lasted 60.2 to 61.8 s),
/// 4 096 at HZ 1000 (4.1 s), 512 at HZ 100 (5.1 s). With 60 the port was
/// free again while the socket still stood, and a SYN handed it was
/// PAWS-refused. A held port still goes to any SYN the socket takes, so
/// the longer hold costs only the SYNs it would refuse anyway.
pub const SNAT_TIME_WAIT_HOLD_NS: u64 = 66 * NS_PER_S;

/// Whether a SNAT port whose reply entry is still in the map may be given
/// to a new flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortUse {
    /// Its flow is alive.
    Live,
    /// Its flow is over, but the endpoint may still hold the tuple in
    /// TIME_WAIT: free for a SYN the socket takes ([`time_wait_accepts`]),
    /// taken for no other.
    Held,
    Free,
}

/// What the SNAT allocator reads of the reply entry that holds a port: a
/// few fields, not the whole value (in the kernel, read straight from the
/// map).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortHolder {
    pub expires_ns: u64,
    pub state: u8,
    pub flags: u8,
    pub close_seq: u32,
    pub close_tsval: u32,
}

impl PortHolder {
    #[inline(always)]
    pub fn of(v: &CtValue) -> Self {
        let (state, flags) = merged(v);
        PortHolder {
            expires_ns: v.expires_ns,
            state,
            flags,
            close_seq: v.close_seq,
            close_tsval: v.close_tsval,
        }
    }
}

/// The flow's TCP state and flags from the two halves of `v` (see
/// [`CtValue`]): the later state, the union of the flags, and closing once
/// both FINs are in, whichever side saw which.
#[inline(always)]
pub fn merge(state: u8, flags: u8, rep_state: u8, rep_flags: u8) -> (u8, u8) {
    let flags = flags | rep_flags;
    let mut state = if rep_state > state { rep_state } else { state };
    let both = CT_F_FIN_FORWARD | CT_F_FIN_REPLY;
    if flags & both == both && state < CT_STATE_CLOSING {
        state = CT_STATE_CLOSING;
    }
    (state, flags)
}

/// [`merge`] of an entry's value.
#[inline(always)]
pub fn merged(v: &CtValue) -> (u8, u8) {
    merge(v.state, v.flags, v.rep_state, v.rep_flags)
}

/// How far past the last sequence number a direction sent a segment of it
/// may start and still be believed: reordering between CPUs' queues, a few
/// super-frames. A blind sender's guess lands within it once in 4 096.
pub const SEQ_AHEAD: u32 = 1 << 20;
/// How far behind it a segment may start (retransmits of a whole window),
/// and how far an acknowledgment may move at once.
pub const SEQ_BACK: u32 = 1 << 24;

/// `a` later than `b` in sequence space (RFC 9293's wrapping comparison).
#[inline(always)]
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The sequence space a TCP segment takes: its payload, a SYN and a FIN.
#[inline(always)]
fn seq_len(flow: &Flow) -> u32 {
    let mut n = u32::from(flow.l4_len).saturating_sub(u32::from(flow.tcp_hlen));
    if flow.tcp_flags & TCP_SYN != 0 {
        n += 1;
    }
    if flow.tcp_flags & TCP_FIN != 0 {
        n += 1;
    }
    n
}

/// Whether `seq` is plausible for a direction that sent up to `nxt`.
#[inline(always)]
fn in_gate(nxt: u32, seq: u32) -> bool {
    let d = seq.wrapping_sub(nxt) as i32;
    d <= SEQ_AHEAD as i32 && d >= -(SEQ_BACK as i32)
}

/// The tracking of a fresh flow's forward entry, from its first packet,
/// into `v`.
#[inline(always)]
pub fn seq_start(flow: &Flow, v: &mut CtValue) {
    let t = seq_first(flow);
    v.seq_nxt = t.nxt;
    v.seq_ack = t.ack;
}

#[inline(always)]
fn seq_first(flow: &Flow) -> SeqTrack {
    if !flow.is_tcp() {
        return SeqTrack::default();
    }
    SeqTrack {
        nxt: flow.seq.wrapping_add(seq_len(flow)),
        ack: if flow.tcp_flags & TCP_ACK != 0 {
            flow.ack
        } else {
            0
        },
    }
}

/// What `flow`, seen on the live entry `v` of its own direction, moves in
/// that entry's tracking; `None`: nothing. A reset moves nothing; a SYN
/// during the handshake starts the direction over (the endpoint's SYN-ACK
/// after anything forged before it); a direction not seen yet starts at
/// its first segment (a flow picked up mid-stream); otherwise only a
/// plausible segment ([`in_gate`]) moves it, and only forward.
#[inline(always)]
pub fn seq_advance(v: &CtValue, flow: &Flow, now: u64) -> Option<SeqTrack> {
    if !flow.is_tcp() || v.expires_ns <= now || flow.tcp_flags & TCP_RST != 0 {
        return None;
    }
    let syn = flow.tcp_flags & TCP_SYN != 0;
    if v.seq_nxt == 0 || (syn && merged(v).0 == CT_STATE_SYN_SENT) {
        let t = seq_first(flow);
        let same = t.nxt == v.seq_nxt && t.ack == v.seq_ack;
        return if same { None } else { Some(t) };
    }
    if !in_gate(v.seq_nxt, flow.seq) {
        return None;
    }
    let mut t = SeqTrack {
        nxt: v.seq_nxt,
        ack: v.seq_ack,
    };
    let end = flow.seq.wrapping_add(seq_len(flow));
    if after(end, t.nxt) {
        t.nxt = end;
    }
    if flow.tcp_flags & TCP_ACK != 0
        && (t.ack == 0 || (after(flow.ack, t.ack) && flow.ack.wrapping_sub(t.ack) <= SEQ_BACK))
    {
        t.ack = flow.ack;
    }
    if t.nxt == v.seq_nxt && t.ack == v.seq_ack {
        None
    } else {
        Some(t)
    }
}

/// What a reset or FIN's sequence numbers make of it (RFC 5961).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// Acceptable: it may change the flow's state.
    Accept,
    /// A reset within the window but not at the number the receiver
    /// expects: passed to the endpoint, whose own TCP answers with a
    /// challenge ACK (RFC 5961 §3.2), and the flow is left as it is.
    InWindow,
    /// Not a segment of this flow as far as the datapath saw it: dropped.
    Outside,
}

/// Check the reset or FIN `flow` of direction `own` (this entry's
/// tracking) against what the other direction `other` sent.
///
/// The receiver expects a reset at its `RCV.NXT` (RFC 5961 §3.2). The
/// datapath does not know it exactly, but it lies between the last
/// acknowledgment the receiver sent and the end of what the sender sent:
/// a reset in that range is accepted (for an idle flow the range is that
/// one number). A FIN must be plausible for the sender (`in_gate`) and
/// acknowledge nothing the receiver never sent (RFC 5961 §5).
#[inline(always)]
pub fn seq_check(own: &SeqTrack, other: &SeqTrack, flow: &Flow) -> SeqCheck {
    let rst = flow.tcp_flags & TCP_RST != 0;
    let has_ack = flow.tcp_flags & TCP_ACK != 0;
    if own.nxt == 0 {
        // This side sent nothing yet: a reset is an endpoint without the
        // connection answering the other side's segment, as RFC 9293
        // (3.10.7.1) builds it: acknowledging exactly what it sent, or
        // at the number that segment acknowledged. A FIN has nothing to
        // be checked against.
        if !rst {
            return SeqCheck::Accept;
        }
        let answers_ack = !has_ack && other.ack != 0 && flow.seq == other.ack;
        let acks_all = has_ack && other.nxt != 0 && flow.ack == other.nxt;
        return if answers_ack || acks_all {
            SeqCheck::Accept
        } else {
            SeqCheck::Outside
        };
    }
    if rst {
        let hi = own.nxt;
        let lo = if other.ack != 0 && !after(other.ack, hi) {
            other.ack
        } else {
            hi
        };
        if !after(lo, flow.seq) && !after(flow.seq, hi) {
            return SeqCheck::Accept;
        }
        return if in_gate(hi, flow.seq) {
            SeqCheck::InWindow
        } else {
            SeqCheck::Outside
        };
    }
    if !in_gate(own.nxt, flow.seq) {
        return SeqCheck::Outside;
    }
    if has_ack {
        if other.nxt != 0 && after(flow.ack, other.nxt) {
            return SeqCheck::Outside;
        }
        if own.ack != 0 && own.ack.wrapping_sub(flow.ack) as i32 > SEQ_BACK as i32 {
            return SeqCheck::Outside;
        }
    }
    SeqCheck::Accept
}

/// How the SNAT port held by the entry `v` may be used at `now`.
///
/// A flow is over when its entry expired, at once when it was reset, or
/// when both FINs were sent and the second acknowledged (nf_conntrack's
/// TIME_WAIT state): a port is then not tied up for the close timeout by
/// flows that ended, which is what short connections do.
#[inline(always)]
pub fn port_use(v: &PortHolder, now: u64) -> PortUse {
    if v.state == CT_STATE_CLOSED {
        // A reset ended it: neither side keeps the tuple (nf_nat reuses
        // tuples of conntracks in CLOSE at once too).
        return PortUse::Free;
    }
    let closed_by_fin = v.state == CT_STATE_FIN_WAIT || v.state == CT_STATE_CLOSING;
    let ended = v.state == CT_STATE_CLOSING && v.flags & CT_F_LAST_ACK != 0;
    if v.expires_ns > now && !ended {
        return PortUse::Live;
    }
    if !closed_by_fin {
        // UDP, half-open and idle flows leave no TIME_WAIT.
        return PortUse::Free;
    }
    if ended && v.flags & CT_F_REPLY_CLOSED_FIRST == 0 {
        // The client closed first: the TIME_WAIT is on its side, with its
        // own address, and the endpoint's socket is gone.
        return PortUse::Free;
    }
    // TIME_WAIT began with the last ACK, when the entry was given the close
    // timeout; a flow that did not end cleanly gets the hold after expiry.
    let since = if ended {
        v.expires_ns.saturating_sub(CT_TIMEOUT_TCP_CLOSE_NS)
    } else {
        v.expires_ns
    };
    if since.saturating_add(SNAT_TIME_WAIT_HOLD_NS) > now {
        PortUse::Held
    } else {
        PortUse::Free
    }
}

/// Whether an endpoint's TIME_WAIT socket for the flow `old` ended takes
/// the SYN `syn` as a new connection, as Linux decides it
/// (`tcp_timewait_state_process`, RFC 6191): with timestamps on both, a
/// newer timestamp is taken and an older one rejected (PAWS); otherwise
/// the SYN's sequence number must be past the old flow's last.
///
/// Current Linux (seen on 6.18) offsets each connection's timestamps at
/// random, so a held port takes a SYN from a fresh port about half the
/// time, and the allocator tries the next port; older kernels offset them
/// per address pair, and a client's own held tuples take its later SYNs.
#[inline(always)]
pub fn time_wait_accepts(old: &PortHolder, syn: &Flow) -> bool {
    if old.close_tsval != 0 && syn.has_ts() {
        let newer = syn.tsval.wrapping_sub(old.close_tsval) as i32;
        if newer != 0 {
            return newer > 0;
        }
    }
    (syn.seq.wrapping_sub(old.close_seq) as i32) > 0
}

/// Expiry is only pushed forward (and the pair rewritten) when it moved by at
/// least this much: keeps an established flow's hot path to one lookup.
pub const CT_REFRESH_NS: u64 = NS_PER_S;

#[inline(always)]
pub fn timeout_ns(proto_is_tcp: bool, state: u8) -> u64 {
    if !proto_is_tcp {
        return CT_TIMEOUT_OTHER_NS;
    }
    match state {
        CT_STATE_SYN_SENT => CT_TIMEOUT_TCP_SYN_NS,
        CT_STATE_ESTABLISHED => CT_TIMEOUT_TCP_ESTABLISHED_NS,
        _ => CT_TIMEOUT_TCP_CLOSE_NS,
    }
}

/// The state a new flow starts in. A flow first seen mid-stream (after an
/// agent restart, say) is taken as established, as Cilium does.
#[inline(always)]
pub fn initial_state(flow: &Flow) -> u8 {
    if !flow.is_tcp() {
        CT_STATE_NONE
    } else if flow.tcp_flags & TCP_RST != 0 {
        CT_STATE_CLOSED
    } else if flow.tcp_flags & TCP_SYN != 0 {
        CT_STATE_SYN_SENT
    } else if flow.tcp_flags & TCP_FIN != 0 {
        CT_STATE_FIN_WAIT
    } else {
        CT_STATE_ESTABLISHED
    }
}

/// A SYN without ACK: the client opens a connection.
#[inline(always)]
pub fn is_pure_syn(flow: &Flow) -> bool {
    flow.is_tcp() && flow.tcp_flags & (TCP_SYN | TCP_ACK | TCP_RST) == TCP_SYN
}

/// State and flags after `flow` was seen in direction `dir`.
#[inline(always)]
pub fn advance(state: u8, flags: u8, dir: u8, flow: &Flow) -> (u8, u8) {
    if !flow.is_tcp() {
        return (state, flags);
    }
    let f = flow.tcp_flags;
    if f & TCP_RST != 0 {
        return (CT_STATE_CLOSED, flags);
    }
    let mut flags = flags;
    if f & TCP_FIN != 0 {
        if dir == CT_DIR_REPLY && flags & (CT_F_FIN_FORWARD | CT_F_FIN_REPLY) == 0 {
            flags |= CT_F_REPLY_CLOSED_FIRST;
        }
        flags |= if dir == CT_DIR_FORWARD {
            CT_F_FIN_FORWARD
        } else {
            CT_F_FIN_REPLY
        };
        let both = CT_F_FIN_FORWARD | CT_F_FIN_REPLY;
        let next = if flags & both == both {
            CT_STATE_CLOSING
        } else {
            CT_STATE_FIN_WAIT
        };
        // A FIN never reopens a reset flow.
        return (
            if state == CT_STATE_CLOSED {
                state
            } else {
                next
            },
            flags,
        );
    }
    let next = match state {
        CT_STATE_SYN_SENT => {
            let synack = f & (TCP_SYN | TCP_ACK) == (TCP_SYN | TCP_ACK);
            let fwd_ack = f & (TCP_SYN | TCP_ACK) == TCP_ACK;
            if (dir == CT_DIR_REPLY && synack) || (dir == CT_DIR_FORWARD && fwd_ack) {
                CT_STATE_ESTABLISHED
            } else {
                state
            }
        }
        CT_STATE_CLOSING => {
            // The side that closed first acknowledges the other's FIN: the
            // last segment of the flow.
            let first_closer = if flags & CT_F_REPLY_CLOSED_FIRST != 0 {
                CT_DIR_REPLY
            } else {
                CT_DIR_FORWARD
            };
            if dir == first_closer && f & (TCP_SYN | TCP_ACK) == TCP_ACK {
                flags |= CT_F_LAST_ACK;
            }
            state
        }
        _ => state,
    };
    (next, flags)
}

/// One conntrack entry: the program's single conntrack buffer. Keys and
/// values are only ever built, looked up and written through it, so a run
/// holds one `CtKey` and one `CtValue`, not a copy per step.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtEntry {
    pub key: CtKey,
    pub val: CtValue,
}

impl CtEntry {
    /// Turn the entry into the other entry of its pair, in place. Each
    /// entry is enough to rebuild the other: the reply key is what the
    /// forward value translates to, the reply value translates back to the
    /// forward key (and the other way round). Its own inverse.
    #[inline(always)]
    pub fn flip(&mut self) {
        core::mem::swap(&mut self.key.saddr, &mut self.val.nat_daddr);
        core::mem::swap(&mut self.key.daddr, &mut self.val.nat_saddr);
        core::mem::swap(&mut self.key.sport, &mut self.val.nat_dport);
        core::mem::swap(&mut self.key.dport, &mut self.val.nat_sport);
        self.key.dir = if self.key.dir == CT_DIR_FORWARD {
            CT_DIR_REPLY
        } else {
            CT_DIR_FORWARD
        };
        self.key._pad = [0; 2];
    }

    /// The key of `flow` as seen on the wire, in direction `dir`.
    #[inline(always)]
    pub fn set_key(&mut self, flow: &Flow, dir: u8) {
        self.key = CtKey {
            saddr: flow.saddr,
            daddr: flow.daddr,
            sport: flow.sport,
            dport: flow.dport,
            proto: flow.proto,
            dir,
            _pad: [0; 2],
        };
    }
}

/// A live entry (present and not expired) for `e.key`, into `e.val`, as
/// it was before `flow`; `flow` moves the entry's sequence tracking in
/// place, in the same lookup ([`seq_advance`]). Its own BPF function, so
/// the tracking's temporaries stay out of its callers' frames, which sit
/// under the deepest call chains (512 bytes in all).
#[inline(never)]
pub fn lookup<M: Maps>(maps: &mut M, e: &mut CtEntry, flow: &Flow, now: u64) -> bool {
    maps.ct_get_tracking(&e.key, &mut e.val, |v| seq_advance(v, flow, now))
        && e.val.expires_ns > now
}

/// A client's reset after its FIN that the endpoint ignores. Once the
/// client's FIN is in, the endpoint is in (or heading to) TIME_WAIT, which a
/// reset ends only at exactly the sequence number it expects next
/// (`tcp_timewait_state_process`: `seq == rcv_nxt`); any other is out of
/// window. Such resets do come: the endpoint retransmits its FIN, the
/// copy is reordered behind its last ACK (veth queues per CPU), and the
/// client, already closed, answers it with a reset at the FIN's ACK
/// number, one short. Taken as the end of the flow, it freed the port for
/// a SYN the TIME_WAIT then refused (PAWS).
#[inline(always)]
fn stale_reset(e: &CtEntry, flow: &Flow) -> bool {
    e.key.dir == CT_DIR_FORWARD
        && flow.tcp_flags & TCP_RST != 0
        && merged(&e.val).1 & CT_F_FIN_FORWARD != 0
        && flow.seq != e.val.close_seq
}

/// What [`touch`] made of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touched {
    /// Recorded (or nothing to record): translate it.
    Yes,
    /// A reset or FIN whose sequence numbers are not acceptable: the flow
    /// is untouched; translate it (`drop` false) or drop it.
    Refused { drop: bool },
}

/// Check a reset or FIN on `e` against both directions' tracking: this
/// entry's (as looked up) and the other entry's (one more lookup, for
/// these rare segments only).
#[inline(always)]
fn check_close<M: Maps>(maps: &M, e: &mut CtEntry, flow: &Flow) -> SeqCheck {
    let own = SeqTrack {
        nxt: e.val.seq_nxt,
        ack: e.val.seq_ack,
    };
    e.flip();
    let other = maps.ct_seq(&e.key).unwrap_or_default();
    e.flip();
    seq_check(&own, &other, flow)
}

/// Record that `flow` was seen on entry `e` in its direction: advance the
/// TCP state, push expiry, and write both entries when anything changed
/// enough to matter. `e` keeps its orientation and its value as looked up.
///
/// Both entries are written in place, and only in the fields this
/// direction owns (see [`CtValue`]): the other side's packets, on another
/// CPU at the same moment, write theirs, and neither update is lost.
#[inline(never)]
pub fn touch<M: Maps>(maps: &mut M, e: &mut CtEntry, flow: &Flow, now: u64) -> Touched {
    if flow.is_tcp() && flow.tcp_flags & (TCP_RST | TCP_FIN) != 0 {
        match check_close(maps, e, flow) {
            SeqCheck::Accept => {}
            SeqCheck::InWindow => return Touched::Refused { drop: false },
            SeqCheck::Outside => return Touched::Refused { drop: true },
        }
    }
    if stale_reset(e, flow) {
        return Touched::Yes;
    }
    let (cur_state, cur_flags) = merged(&e.val);
    let (state, mut flags) = advance(cur_state, cur_flags, e.key.dir, flow);
    // The endpoint's FIN after the client's, but not acknowledging it: it
    // was sent before the client's FIN arrived, the FINs crossed, and the
    // endpoint goes through CLOSING to TIME_WAIT as if it had closed first
    // (both sides hold the tuple). Taken for "the client closed first",
    // the port was free at once for SYNs that TIME_WAIT refuses.
    if e.key.dir == CT_DIR_REPLY
        && flow.tcp_flags & TCP_FIN != 0
        && cur_flags & (CT_F_FIN_FORWARD | CT_F_FIN_REPLY) == CT_F_FIN_FORWARD
        && (flow.ack.wrapping_sub(e.val.close_seq) as i32) < 0
    {
        flags |= CT_F_REPLY_CLOSED_FIRST;
    }
    let expires = now.saturating_add(timeout_ns(flow.is_tcp(), state));
    // A segment of the client's after its FIN with a newer timestamp: when
    // the FINs crossed, the client acknowledges the endpoint's FIN after
    // sending its own, and the endpoint's TIME_WAIT keeps that ACK's
    // timestamp (`ts_recent`), not the FIN's. A SYN between the two would
    // be refused (PAWS) on a port handed to it as safe.
    let later_ts = e.key.dir == CT_DIR_FORWARD
        && e.val.close_tsval != 0
        && flow.tcp_flags & TCP_SYN == 0
        && flow.has_ts()
        && (flow.tsval.wrapping_sub(e.val.close_tsval) as i32) > 0;
    let changed = state != cur_state || flags != cur_flags || later_ts;
    // Closing states must not be extended by late packets beyond their own
    // short timeout, but a refresh within it is harmless.
    if !changed && expires < e.val.expires_ns.saturating_add(CT_REFRESH_NS) {
        return Touched::Yes;
    }
    let mut w = CtWrite {
        dir: e.key.dir,
        state,
        flags,
        close: false,
        close_seq: e.val.close_seq,
        close_tsval: e.val.close_tsval,
        expires_ns: expires,
    };
    if e.key.dir == CT_DIR_FORWARD && flow.tcp_flags & TCP_FIN != 0 && flags != cur_flags {
        // The client's first FIN: where a TIME_WAIT socket of the endpoint
        // will stand ([`time_wait_accepts`]). A retransmitted FIN is
        // later on the client's clock than anything it recorded, and a
        // new SYN later still.
        let payload = u32::from(flow.l4_len).saturating_sub(u32::from(flow.tcp_hlen));
        w.close = true;
        w.close_seq = flow.seq.wrapping_add(payload).wrapping_add(1);
        w.close_tsval = flow.tsval;
    } else if later_ts {
        w.close = true;
        w.close_tsval = flow.tsval;
    }
    write_half(maps, &e.key, &mut w, flow.is_tcp(), now);
    e.flip();
    write_half(maps, &e.key, &mut w, flow.is_tcp(), now);
    e.flip();
    Touched::Yes
}

/// Write this direction's half of the state into the entry at `key`, in
/// place. The expiry is the one field both sides write: when the merged
/// state after the write has another timeout than the one this packet
/// computed (the other side moved the flow on meanwhile), it is written
/// again for the merged state, so a late refresh of an established flow
/// cannot give a closing one hours.
#[inline(always)]
fn write_half<M: Maps>(maps: &mut M, key: &CtKey, w: &mut CtWrite, tcp: bool, now: u64) {
    let used = timeout_ns(tcp, w.state);
    if let Some(state) = maps.ct_write_half(key, w) {
        let wanted = timeout_ns(tcp, state);
        if wanted != used {
            w.expires_ns = now.saturating_add(wanted);
            let _ = maps.ct_write_half(key, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_S;

    fn holder(expires_ns: u64, state: u8, flags: u8) -> PortHolder {
        PortHolder {
            expires_ns,
            state,
            flags,
            ..PortHolder::default()
        }
    }

    // spec: P3 (SNAT ports of FIN-closed flows are held for TIME_WAIT)
    #[test]
    fn port_use_follows_expiry_and_how_the_flow_ended() {
        let t = 1_000 * S;
        for state in [CT_STATE_FIN_WAIT, CT_STATE_CLOSING] {
            assert_eq!(port_use(&holder(t + 1, state, 0), t), PortUse::Live);
            assert_eq!(port_use(&holder(t, state, 0), t), PortUse::Held);
            // Past 60 s: the endpoint's timer may fire up to 5.1 s late.
            assert_eq!(port_use(&holder(t - 65 * S, state, 0), t), PortUse::Held);
            assert_eq!(port_use(&holder(t - 66 * S, state, 0), t), PortUse::Free);
        }
        // UDP, half-open or idle flows leave no TIME_WAIT.
        for state in [CT_STATE_NONE, CT_STATE_SYN_SENT, CT_STATE_ESTABLISHED] {
            assert_eq!(port_use(&holder(t + 1, state, 0), t), PortUse::Live);
            assert_eq!(port_use(&holder(t, state, 0), t), PortUse::Free);
        }
        // Nor does a reset, which frees the port at once.
        assert_eq!(
            port_use(&holder(t + 1, CT_STATE_CLOSED, 0), t),
            PortUse::Free
        );
    }

    // spec: P3 (a cleanly closed flow frees its port at once; the hold
    // counts from its last ACK and only when the endpoint closed first)
    #[test]
    fn a_flow_that_ended_cleanly_holds_its_port_only_for_the_endpoint_s_time_wait() {
        let t = 1_000 * S;
        let closed_at = t;
        let expires = closed_at + CT_TIMEOUT_TCP_CLOSE_NS;
        let server_first = CT_F_LAST_ACK | CT_F_REPLY_CLOSED_FIRST;
        let h = holder(expires, CT_STATE_CLOSING, server_first);
        assert_eq!(port_use(&h, closed_at), PortUse::Held);
        assert_eq!(port_use(&h, closed_at + 61 * S), PortUse::Held);
        assert_eq!(port_use(&h, closed_at + 65 * S), PortUse::Held);
        assert_eq!(port_use(&h, closed_at + 66 * S), PortUse::Free);
        // The client closed first: its own stack keeps the TIME_WAIT.
        let h = holder(expires, CT_STATE_CLOSING, CT_F_LAST_ACK);
        assert_eq!(port_use(&h, closed_at), PortUse::Free);
        // Both FINs but no last ACK yet: the flow may still need its port.
        let h = holder(expires, CT_STATE_CLOSING, CT_F_REPLY_CLOSED_FIRST);
        assert_eq!(port_use(&h, closed_at), PortUse::Live);
    }

    fn syn(seq: u32, ts: Option<u32>) -> Flow {
        Flow {
            proto: crate::maps::PROTO_TCP,
            tcp_flags: TCP_SYN,
            seq,
            tsval: ts.unwrap_or(0),
            ..Flow::default()
        }
    }

    // spec: P3 (a held port goes to a SYN the endpoint's TIME_WAIT takes)
    #[test]
    fn time_wait_takes_newer_timestamps_or_later_sequence_numbers() {
        let old = PortHolder {
            close_seq: 1_000,
            close_tsval: 50_000,
            ..PortHolder::default()
        };
        // Timestamps on both: the timestamp decides, whatever the sequence.
        assert!(time_wait_accepts(&old, &syn(10, Some(50_001))));
        assert!(!time_wait_accepts(&old, &syn(5_000, Some(49_999))));
        // Wrapping: a timestamp just past 2^32 is newer.
        let late = PortHolder {
            close_tsval: u32::MAX - 5,
            ..old
        };
        assert!(time_wait_accepts(&late, &syn(10, Some(3))));
        // Equal timestamps, or one side without: the sequence number decides.
        assert!(time_wait_accepts(&old, &syn(1_001, Some(50_000))));
        assert!(!time_wait_accepts(&old, &syn(999, Some(50_000))));
        assert!(time_wait_accepts(&old, &syn(1_001, None)));
        assert!(!time_wait_accepts(&old, &syn(1_000, None)));
        let no_ts = PortHolder {
            close_tsval: 0,
            ..old
        };
        assert!(!time_wait_accepts(&no_ts, &syn(999, Some(60_000))));
        // Sequence numbers wrap too.
        let wrapped = PortHolder {
            close_tsval: 0,
            close_seq: u32::MAX - 1,
            ..old
        };
        assert!(time_wait_accepts(&wrapped, &syn(7, None)));
    }
}
