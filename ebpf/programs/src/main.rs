//! The Sluice packet program as TC classifiers.
//!
//! Nothing but adapters: the skb as a [`Packet`], aya maps as [`Maps`], the
//! kernel clock as [`Clock`], and one entry point per hook calling
//! `sluice_datapath::process`. All the logic lives in `ebpf/datapath`, the
//! same source the user-space engine runs.
#![no_std]
#![no_main]

mod maps;
mod skb;

use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_SHOT},
    helpers::{bpf_ktime_get_ns, bpf_redirect_peer},
    macros::classifier,
    programs::TcContext,
};
use sluice_datapath::{env::Clock, process, Hook, Verdict};

use crate::{maps::AyaMaps, skb::SkbPacket};

/// `bpf_ktime_get_ns` (`CLOCK_MONOTONIC`).
struct KernelClock;

impl Clock for KernelClock {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        // SAFETY: a helper without arguments.
        unsafe { bpf_ktime_get_ns() }
    }
}

#[inline(always)]
fn run(ctx: TcContext, hook: Hook) -> i32 {
    let mut pkt = SkbPacket::new(ctx);
    let mut maps = AyaMaps;
    let mut clock = KernelClock;
    let outcome = process(&mut pkt, &mut maps, &mut clock, hook);
    maps::count(outcome.event as u32);
    maps::count(outcome.verdict.counter_index());
    match outcome.verdict {
        Verdict::Pass => TC_ACT_OK,
        Verdict::Drop => TC_ACT_SHOT,
        // Only `WireIngress` redirects (to a local pod's host-side veth),
        // and it runs at TC ingress: the peer redirect hands the frame to
        // the pod end's ingress in this same softirq, where a redirect to
        // the host end's egress would transmit it on the veth and queue it
        // again on the CPU's backlog (Cilium's host-routing fast path).
        // SAFETY: a helper taking an ifindex and flags; it returns
        // TC_ACT_REDIRECT, or TC_ACT_SHOT for an ifindex it cannot use.
        Verdict::Redirect { ifindex } => unsafe { bpf_redirect_peer(ifindex, 0) as i32 },
    }
}

/// TC ingress of `nic0`: VIP traffic and replies of remote endpoints.
#[classifier]
pub fn sluice_wire_ingress(ctx: TcContext) -> i32 {
    run(ctx, Hook::WireIngress)
}

/// TC egress of `nic0`: what the node sends.
#[classifier]
pub fn sluice_wire_egress(ctx: TcContext) -> i32 {
    run(ctx, Hook::WireEgress)
}

/// TC ingress of a pod's host-side link: replies of local endpoints.
#[classifier]
pub fn sluice_from_pod(ctx: TcContext) -> i32 {
    run(ctx, Hook::FromPod)
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
