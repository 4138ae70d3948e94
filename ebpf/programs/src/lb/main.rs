//! The load balancer's packet path as a TC classifier (issue 11).
//!
//! A second object next to the agent's (`sluice-lb`, with maps of its own:
//! neither object creates the other's). One entry point, for TC ingress of
//! the load balancer's one interface: the skb as a [`Packet`], aya maps as
//! [`LbMaps`], `sluice_datapath::lb::process_lb` doing the work, and a
//! delivered frame sent back out of the interface it came in on with
//! `bpf_redirect(ifindex, 0)` (one-armed: to the interface's egress).
#![no_std]
#![no_main]

mod maps;
#[path = "../skb.rs"]
mod skb;

use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_SHOT},
    helpers::{bpf_ktime_get_ns, bpf_redirect},
    macros::classifier,
    programs::TcContext,
    EbpfContext,
};
use sluice_datapath::{
    env::Clock,
    lb::{process_lb, LbVerdict},
};

use crate::{maps::AyaLbMaps, skb::SkbPacket};

/// `bpf_ktime_get_ns` (`CLOCK_MONOTONIC`).
struct KernelClock;

impl Clock for KernelClock {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        // SAFETY: a helper without arguments.
        unsafe { bpf_ktime_get_ns() }
    }
}

/// TC ingress of the load balancer's interface.
#[classifier]
pub fn sluice_lb_ingress(ctx: TcContext) -> i32 {
    // SAFETY: the context is the skb of this run; `ifindex` is the device
    // the frame arrived on.
    let ifindex = unsafe { (*ctx.as_ptr().cast::<aya_ebpf::bindings::__sk_buff>()).ifindex };
    let mut pkt = SkbPacket::new(ctx);
    let mut maps = AyaLbMaps;
    let outcome = process_lb(&mut pkt, &mut maps, &KernelClock);
    maps::count(outcome.event as u32);
    maps::count(outcome.verdict.counter_index());
    match outcome.verdict {
        LbVerdict::Pass => TC_ACT_OK,
        LbVerdict::Drop => TC_ACT_SHOT,
        LbVerdict::Tx => {
            maps::count_backend(outcome.backend);
            // SAFETY: a helper taking an ifindex and flags (0: egress); it
            // returns TC_ACT_REDIRECT.
            unsafe { bpf_redirect(ifindex, 0) as i32 }
        }
    }
}

/// Read by the kernel at load time; none of the helpers used is GPL-only.
#[no_mangle]
#[link_section = "license"]
pub static LICENSE: [u8; 11] = *b"Apache-2.0\0";

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The datapath never panics; the verifier rejects the program if a
    // panic path survives optimisation and reaches here.
    // SAFETY: see above.
    unsafe { core::hint::unreachable_unchecked() }
}
