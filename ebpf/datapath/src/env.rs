//! What the packet program needs from the engine running it.
//!
//! The kernel engine implements these over the skb and aya maps; the
//! user-space engine over a byte buffer and in-memory maps (`host`).

use crate::conntrack::PortHolder;
use crate::maps::{
    AffinityKey, AffinityValue, CtKey, CtValue, Endpoint, LocalKey, LocalLink, NodeConfig,
    ServiceKey, ServiceValue, SnatExhaustKey,
};

/// One direction's sequence tracking (`CtValue::seq_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqTrack {
    /// 0: nothing seen (see `CtValue::seq_nxt`).
    pub nxt: u32,
    /// 0: no acknowledgment seen.
    pub ack: u32,
}

/// What one packet writes into an entry of its flow (see
/// [`Maps::ct_write_half`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtWrite {
    /// Whose half: `CT_DIR_FORWARD` (the client's) or `CT_DIR_REPLY`.
    pub dir: u8,
    pub state: u8,
    pub flags: u8,
    /// Write `close_seq` and `close_tsval` too.
    pub close: bool,
    pub close_seq: u32,
    pub close_tsval: u32,
    pub expires_ns: u64,
}

impl CtWrite {
    /// `w` applied to `v`, as both engines do it.
    #[inline(always)]
    pub fn apply(&self, v: &mut CtValue) {
        if self.dir == crate::maps::CT_DIR_FORWARD {
            v.state = self.state;
            v.flags = self.flags;
        } else {
            v.rep_state = self.state;
            v.rep_flags = self.flags;
        }
        if self.close {
            v.close_seq = self.close_seq;
            v.close_tsval = self.close_tsval;
        }
        v.expires_ns = self.expires_ns;
    }
}

/// How an L4 checksum update must be applied, mirroring the flags of
/// `bpf_l4_csum_replace` so the kernel engine maps them one to one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4Csum {
    /// The changed field is part of the pseudo-header (addresses).
    pub pseudo: bool,
    /// UDP over IPv4: a zero checksum means "none" and stays zero; a result
    /// of zero is written as 0xffff (BPF_F_MARK_MANGLED_0).
    pub udp4: bool,
}

/// A frame starting at the Ethernet header. Every access is bounds-checked by
/// the implementation and fails with `None` instead of reading past the end.
pub trait Packet {
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `N` bytes at `off`.
    fn load<const N: usize>(&self, off: usize) -> Option<[u8; N]>;

    /// Overwrite bytes at `off`; no checksum is touched.
    fn store(&mut self, off: usize, bytes: &[u8]) -> Option<()>;

    /// Apply a one's-complement difference (RFC 1624) to the IPv4 header
    /// checksum at `csum_off`.
    fn l3_csum_apply(&mut self, csum_off: usize, diff: u32) -> Option<()>;

    /// Apply a one's-complement difference to the TCP/UDP/ICMP checksum at
    /// `csum_off`.
    fn l4_csum_apply(&mut self, csum_off: usize, diff: u32, how: L4Csum) -> Option<()>;

    /// Grow or shrink the frame at its tail (`bpf_skb_change_tail`).
    fn resize(&mut self, new_len: usize) -> Option<()>;

    /// Whether the frame arrived addressed to another host: the kernel's
    /// `skb->pkt_type == PACKET_OTHERHOST`, decided from the destination
    /// MAC before any hook runs. Such a frame reaches the node only because
    /// a bridge or switch flooded it (unknown unicast); its real receiver
    /// answers it, so this node must not.
    fn for_other_host(&self) -> bool;

    /// The link the frame came in on, as [`LocalLink::ifindex`] names it:
    /// at [`crate::Hook::FromPod`], the sending pod's link (the kernel's
    /// `skb->ifindex`, the emulated engine's id of the pod link). The
    /// program only believes a pod's source address on that pod's link.
    fn ingress_link(&self) -> u32;
}

/// The maps the control side fills and the program reads (services,
/// endpoints, Maglev) and the ones the program owns (conntrack, affinity).
/// Values are returned by copy: it is what the verifier handles best, and
/// the host maps need no lifetimes tied to a lock.
pub trait Maps {
    fn node(&self) -> NodeConfig;
    fn service(&self, key: &ServiceKey) -> Option<ServiceValue>;
    fn endpoint(&self, slot: u32) -> Option<Endpoint>;
    fn maglev(&self, slot: u32) -> Option<u32>;

    fn ct_get(&self, key: &CtKey) -> Option<CtValue>;
    /// [`Maps::ct_get`] into a caller's buffer (`false`: absent, `out`
    /// untouched). The program keeps one conntrack buffer for the whole
    /// run; the kernel adapter copies straight from the map value into it.
    fn ct_get_into(&self, key: &CtKey, out: &mut CtValue) -> bool {
        match self.ct_get(key) {
            Some(v) => {
                *out = v;
                true
            }
            None => false,
        }
    }
    /// What deciding whether the SNAT port of the entry at `key` is free
    /// needs, without copying the whole value out.
    fn ct_holder(&self, key: &CtKey) -> Option<PortHolder> {
        self.ct_get(key).map(|v| PortHolder::of(&v))
    }
    /// [`Maps::ct_get_into`], then, if `track` returns one, the entry's
    /// own sequence tracking (`seq_*`) replaced in place: one lookup for
    /// both. `out` holds the value as it was before.
    fn ct_get_tracking<F: FnOnce(&CtValue) -> Option<SeqTrack>>(
        &mut self,
        key: &CtKey,
        out: &mut CtValue,
        track: F,
    ) -> bool;
    /// The sequence tracking of the entry at `key`.
    fn ct_seq(&self, key: &CtKey) -> Option<SeqTrack> {
        self.ct_get(key).map(|v| SeqTrack {
            nxt: v.seq_nxt,
            ack: v.seq_ack,
        })
    }
    /// Write one direction's half of the state into the entry at `key` in
    /// place, never the whole value (see [`CtValue`]): `state`/`flags` of
    /// `w.dir`'s half, the client's close fields when `w.close`, and the
    /// expiry. The merged state read back after the write; `None`: no entry.
    fn ct_write_half(&mut self, key: &CtKey, w: &CtWrite) -> Option<u8>;
    /// Insert or replace.
    fn ct_put(&mut self, key: &CtKey, value: &CtValue) -> bool;
    /// Insert only when absent (BPF_NOEXIST): how SNAT ports are claimed
    /// without collision.
    fn ct_put_new(&mut self, key: &CtKey, value: &CtValue) -> bool;
    fn ct_delete(&mut self, key: &CtKey);

    fn affinity_get(&self, key: &AffinityKey) -> Option<AffinityValue>;
    fn affinity_put(&mut self, key: &AffinityKey, value: &AffinityValue);

    /// The link of a pod on this node, by its address.
    fn local_link(&self, key: &LocalKey) -> Option<LocalLink>;

    /// Count a new flow to `key`'s endpoint reset for want of a SNAT port.
    fn snat_exhausted(&mut self, key: &SnatExhaustKey);

    /// `body(self, i)` for `i` in `0..n` in order, stopping at the first
    /// `true`; whether there was one. The kernel adapter runs it through
    /// `bpf_loop`: the verifier then checks the body until its state stops
    /// changing (two or three walks), where an open-coded loop has it walk
    /// every iteration, each path of each, with the counter precise. The
    /// SNAT claim's 16 tries cost about 60 % of `sluice_wire_ingress`'s
    /// verification that way (`ebpf/programs/VERIFIER_NOTES.md`).
    #[inline(always)]
    fn first_of<F: FnMut(&mut Self, u32) -> bool>(&mut self, n: u32, mut body: F) -> bool
    where
        Self: Sized,
    {
        let mut i = 0;
        while i < n {
            if body(self, i) {
                return true;
            }
            i += 1;
        }
        false
    }
}

/// Time, injected so tests are deterministic. The program uses no
/// randomness: SNAT ports are derived from the flow's hash, so the kernel
/// and the host builds make the same choices (the differential test relies
/// on it).
pub trait Clock {
    /// Monotonic nanoseconds (`bpf_ktime_get_ns`, i.e. `CLOCK_MONOTONIC`).
    fn now_ns(&self) -> u64;
}
