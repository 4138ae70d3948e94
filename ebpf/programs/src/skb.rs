//! The skb as a [`Packet`].
//!
//! Every access goes through the skb helpers (`bpf_skb_load_bytes`,
//! `bpf_skb_store_bytes`): they check bounds in the kernel, work on
//! non-linear (GRO) skbs too, and take any offset the verifier can only
//! bound loosely, such as the L4 offset after a variable IHL. Checksums are
//! patched with the kernel's own incremental helpers, which keep a
//! CHECKSUM_PARTIAL skb's pseudo-header seed right for the device to finish.
//!
//! A CHECKSUM_COMPLETE skb (what a NIC's receive checksum and GRO hand the
//! wire hook) carries in `skb->csum` the sum of every byte from the network
//! header on, and the stack checks the L4 checksum against it: every write
//! must be counted there or the packet is dropped as corrupt. The helpers
//! count only the pseudo-header part of an L4 update, so this file counts
//! the rest: header bytes are stored with `BPF_F_RECOMPUTE_CSUM` (the MAC
//! addresses, before the network header, are outside the sum), and a
//! checksum field the helpers rewrite without counting it (the IPv4
//! header's, an L4 one for a port) is counted with `bpf_csum_update`. For
//! IPv4 the address change and the header checksum's cancel out; for IPv6,
//! with no header checksum, the stored address is what balances the
//! pseudo-header update.

use aya_ebpf::{
    bindings::{BPF_F_MARK_MANGLED_0, BPF_F_PSEUDO_HDR, BPF_F_RECOMPUTE_CSUM},
    helpers::{
        bpf_csum_update, bpf_l3_csum_replace, bpf_l4_csum_replace, bpf_skb_change_tail,
        bpf_skb_load_bytes, bpf_skb_store_bytes,
    },
    programs::TcContext,
    EbpfContext,
};
use sluice_datapath::{
    csum::wsum_le,
    env::{L4Csum, Packet},
};

/// Offsets beyond this are refused before reaching a helper (a frame is at
/// most 64 KiB); it also keeps every offset a small, bounded scalar.
const MAX_OFF: usize = 0xffff;

/// Where the MAC addresses end: bytes before are outside `skb->csum`. The
/// program writes them only as the 12 bytes of both addresses (or 6 of
/// one), never across into the header after.
const MACS_END: usize = 12;

/// `skb->pkt_type` of a frame addressed to another host (`linux/if_packet.h`).
const PACKET_OTHERHOST: u32 = 3;

pub struct SkbPacket {
    ctx: TcContext,
}

impl SkbPacket {
    #[inline(always)]
    pub fn new(ctx: TcContext) -> Self {
        Self { ctx }
    }

    #[inline(always)]
    fn skb(&self) -> *mut aya_ebpf::bindings::__sk_buff {
        self.ctx.as_ptr().cast()
    }

    /// Count in `skb->csum` a checksum field moved by the difference `to`
    /// (raw-word sum, as given to the helper): the field's sum moves by
    /// its one's-complement negation. The helper does nothing (and says
    /// so) unless the skb is CHECKSUM_COMPLETE.
    #[inline(always)]
    fn count_field_write(&mut self, to: u64) {
        let negated = !(to as u32);
        // SAFETY: plain scalars.
        let _ = unsafe { bpf_csum_update(self.skb().cast(), negated) };
    }
}

impl Packet for SkbPacket {
    #[inline(always)]
    fn len(&self) -> usize {
        self.ctx.len() as usize
    }

    #[inline(always)]
    fn load<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        if off > MAX_OFF {
            return None;
        }
        // Not zeroed first: the helper writes all N bytes (or fails), and
        // zeroing became `memset` calls (BPF functions costing stack).
        let mut buf = core::mem::MaybeUninit::<[u8; N]>::uninit();
        // SAFETY: `buf` is N writable bytes on the stack; the helper takes
        // uninitialised memory (ARG_PTR_TO_UNINIT_MEM).
        let r = unsafe {
            bpf_skb_load_bytes(
                self.skb().cast(),
                off as u32,
                buf.as_mut_ptr().cast(),
                N as u32,
            )
        };
        // SAFETY: on success all N bytes were written.
        (r == 0).then(|| unsafe { buf.assume_init() })
    }

    #[inline(always)]
    fn store(&mut self, off: usize, bytes: &[u8]) -> Option<()> {
        if off > MAX_OFF || bytes.is_empty() {
            return None;
        }
        let flags = if off >= MACS_END {
            u64::from(BPF_F_RECOMPUTE_CSUM)
        } else {
            0
        };
        // SAFETY: `bytes` is `bytes.len()` readable bytes.
        let r = unsafe {
            bpf_skb_store_bytes(
                self.skb().cast(),
                off as u32,
                bytes.as_ptr().cast(),
                bytes.len() as u32,
                flags,
            )
        };
        (r == 0).then_some(())
    }

    #[inline(always)]
    fn l3_csum_apply(&mut self, csum_off: usize, diff: u32) -> Option<()> {
        if csum_off > MAX_OFF {
            return None;
        }
        // Size 0: `to` is a ready difference, as a sum over raw (little-
        // endian) memory words: the datapath's big-endian-word diff swapped.
        let to = u64::from(wsum_le(diff));
        // SAFETY: plain scalars.
        let r = unsafe { bpf_l3_csum_replace(self.skb().cast(), csum_off as u32, 0, to, 0) };
        if r != 0 {
            return None;
        }
        self.count_field_write(to);
        Some(())
    }

    #[inline(always)]
    fn l4_csum_apply(&mut self, csum_off: usize, diff: u32, how: L4Csum) -> Option<()> {
        if csum_off > MAX_OFF {
            return None;
        }
        let to = u64::from(wsum_le(diff)); // as in `l3_csum_apply`
        let mut flags = 0u64; // size 0: `to` is a difference
        if how.pseudo {
            flags |= u64::from(BPF_F_PSEUDO_HDR);
        }
        // The helper counts a pseudo-header update itself; any other we
        // count below, unless the field is a UDP/IPv4 checksum of zero
        // ("none"), which the helper leaves alone (BPF_F_MARK_MANGLED_0):
        // nothing written, nothing to count. Read only when it matters.
        let count = !how.pseudo && !(how.udp4 && self.load::<2>(csum_off)? == [0, 0]);
        if how.udp4 {
            flags |= u64::from(BPF_F_MARK_MANGLED_0);
        }
        // SAFETY: plain scalars.
        let r = unsafe { bpf_l4_csum_replace(self.skb().cast(), csum_off as u32, 0, to, flags) };
        if r != 0 {
            return None;
        }
        if count {
            self.count_field_write(to);
        }
        Some(())
    }

    #[inline(always)]
    fn resize(&mut self, new_len: usize) -> Option<()> {
        if new_len > MAX_OFF {
            return None;
        }
        // SAFETY: plain scalars; every later access goes through helpers, so
        // no packet pointer outlives the change.
        let r = unsafe { bpf_skb_change_tail(self.skb().cast(), new_len as u32, 0) };
        (r == 0).then_some(())
    }

    #[inline(always)]
    fn for_other_host(&self) -> bool {
        // SAFETY: the context is a live `__sk_buff`; `pkt_type` is readable
        // at every TC hook.
        unsafe { (*self.skb()).pkt_type == PACKET_OTHERHOST }
    }

    #[inline(always)]
    fn ingress_link(&self) -> u32 {
        // SAFETY: as above; at a TC ingress hook `ifindex` is the link the
        // frame came in on (a pod's host-side veth at `FromPod`).
        unsafe { (*self.skb()).ifindex }
    }
}
