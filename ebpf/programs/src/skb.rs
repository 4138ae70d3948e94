//! The skb as a [`Packet`].
//!
//! Every access goes through the skb helpers (`bpf_skb_load_bytes`,
//! `bpf_skb_store_bytes`): they check bounds in the kernel, work on
//! non-linear (GRO) skbs too, and take any offset the verifier can only
//! bound loosely, such as the L4 offset after a variable IHL. Checksums are
//! patched with the kernel's own incremental helpers, which also keep
//! `skb->csum` right for CHECKSUM_COMPLETE and leave CHECKSUM_PARTIAL to the
//! device.

use aya_ebpf::{
    bindings::{BPF_F_MARK_MANGLED_0, BPF_F_PSEUDO_HDR},
    helpers::{
        bpf_l3_csum_replace, bpf_l4_csum_replace, bpf_skb_change_tail, bpf_skb_load_bytes,
        bpf_skb_store_bytes,
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
        // SAFETY: `bytes` is `bytes.len()` readable bytes.
        let r = unsafe {
            bpf_skb_store_bytes(
                self.skb().cast(),
                off as u32,
                bytes.as_ptr().cast(),
                bytes.len() as u32,
                0,
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
        (r == 0).then_some(())
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
        if how.udp4 {
            flags |= u64::from(BPF_F_MARK_MANGLED_0);
        }
        // SAFETY: plain scalars.
        let r = unsafe { bpf_l4_csum_replace(self.skb().cast(), csum_off as u32, 0, to, flags) };
        (r == 0).then_some(())
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
}
