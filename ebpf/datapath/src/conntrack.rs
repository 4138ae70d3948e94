//! Connection tracking: TCP state, timeouts, and keeping the forward and
//! reply entries of a flow in step.

use crate::env::Maps;
use crate::maps::{
    CtKey, CtValue, CT_DIR_FORWARD, CT_DIR_REPLY, CT_F_FIN_FORWARD, CT_F_FIN_REPLY,
    CT_STATE_CLOSED, CT_STATE_CLOSING, CT_STATE_ESTABLISHED, CT_STATE_FIN_WAIT, CT_STATE_NONE,
    CT_STATE_SYN_SENT,
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

/// How long a SNAT port stays reserved after the entry of a flow that
/// closed with FINs expired. The endpoint that closed first keeps the tuple
/// in TIME_WAIT (Linux: 60 s) and answers a new SYN on it whose timestamp
/// is older (timestamps are randomised per connection) with an ACK, which
/// costs the client a reset and a SYN retransmit; nf_conntrack keeps such
/// tuples for 120 s for the same reason.
pub const SNAT_TIME_WAIT_HOLD_NS: u64 = 60 * NS_PER_S;

/// Whether a SNAT port whose reply entry is still in the map may be given
/// to a new flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortUse {
    /// Its flow is alive.
    Live,
    /// Its flow is over, but the endpoint may still hold the tuple in
    /// TIME_WAIT: a last resort.
    Held,
    Free,
}

/// How a SNAT port held by an entry (`expires_ns`, `state`) may be used.
#[inline(always)]
pub fn port_use(expires_ns: u64, state: u8, now: u64) -> PortUse {
    if expires_ns > now {
        return PortUse::Live;
    }
    let closed_by_fin = state == CT_STATE_FIN_WAIT || state == CT_STATE_CLOSING;
    if closed_by_fin && expires_ns.saturating_add(SNAT_TIME_WAIT_HOLD_NS) > now {
        PortUse::Held
    } else {
        PortUse::Free
    }
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

/// A live entry (present and not expired) for `e.key`, into `e.val`.
#[inline(always)]
pub fn lookup<M: Maps>(maps: &M, e: &mut CtEntry, now: u64) -> bool {
    maps.ct_get_into(&e.key, &mut e.val) && e.val.expires_ns > now
}

/// Record that `flow` was seen on entry `e` in its direction: advance the
/// TCP state, push expiry, and write both entries when anything changed
/// enough to matter. `e` keeps its orientation; its value is updated.
#[inline(never)]
pub fn touch<M: Maps>(maps: &mut M, e: &mut CtEntry, flow: &Flow, now: u64) {
    let (state, flags) = advance(e.val.state, e.val.flags, e.key.dir, flow);
    let expires = now.saturating_add(timeout_ns(flow.is_tcp(), state));
    let changed = state != e.val.state || flags != e.val.flags;
    // Closing states must not be extended by late packets beyond their own
    // short timeout, but a refresh within it is harmless.
    if !changed && expires < e.val.expires_ns.saturating_add(CT_REFRESH_NS) {
        return;
    }
    e.val.state = state;
    e.val.flags = flags;
    e.val.last_seen_ns = now;
    e.val.expires_ns = expires;
    maps.ct_put(&e.key, &e.val);
    e.flip();
    maps.ct_put(&e.key, &e.val);
    e.flip();
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_S;

    // spec: P3 (SNAT ports of FIN-closed flows are held for TIME_WAIT)
    #[test]
    fn port_use_follows_expiry_and_how_the_flow_ended() {
        let t = 1_000 * S;
        for state in [CT_STATE_FIN_WAIT, CT_STATE_CLOSING] {
            assert_eq!(port_use(t + 1, state, t), PortUse::Live);
            assert_eq!(port_use(t, state, t), PortUse::Held);
            assert_eq!(port_use(t - 59 * S, state, t), PortUse::Held);
            assert_eq!(port_use(t - 60 * S, state, t), PortUse::Free);
        }
        // A reset leaves no TIME_WAIT; neither do UDP, half-open or idle flows.
        for state in [
            CT_STATE_CLOSED,
            CT_STATE_NONE,
            CT_STATE_SYN_SENT,
            CT_STATE_ESTABLISHED,
        ] {
            assert_eq!(port_use(t + 1, state, t), PortUse::Live);
            assert_eq!(port_use(t, state, t), PortUse::Free);
        }
    }
}
