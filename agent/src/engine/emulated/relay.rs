//! The relay loop: one thread polling the wire socket, the `nic0` TAP, every
//! pod's socket and TAP, and a wakeup eventfd. Every frame crossing a hook
//! runs the packet program; the maps are shared with `apply()` behind a
//! mutex taken once per frame.
//!
//! I/O is non-blocking: packet sockets are read a batch per `recvmmsg` and
//! small frames for one leave a batch per `sendmmsg`; TAPs take a `read` or
//! `write` per frame (no mmap rings yet).
//! Every fd carries virtio-net headers, TAPs included: a super-frame or a
//! frame with its checksum left to offload crosses the relay whole, the
//! program running once on it, as a TC program sees one GSO skb.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_datapath::env::Clock;
use sluice_datapath::host::{FramePacket, HostMaps, SystemClock};
use sluice_datapath::{process, Event, Hook, Verdict};
use tracing::{debug, warn};

use super::sys;
use sluice_datapath::host::gro::{Coalescer, Offer};
use sluice_datapath::host::offload::{self, Intake, VnetHdr, VNET_HDR_LEN};

/// Frames read per fd before moving to the next one.
const BATCH: usize = 64;
/// Frames one `recvmmsg` reads from a packet socket: each has a buffer
/// of `BUF_LEN` (pages are touched only as far as frames reach).
const RECV_BATCH: usize = 16;
/// Frames one `sendmmsg` sends to a packet socket, and the largest queued
/// (an MTU frame and its vnet header; larger ones are written at once).
const SEND_BATCH: usize = 32;
const SEND_FRAME_MAX: usize = VNET_HDR_LEN + 1_518;
/// Room for a 64 KiB GSO super-frame, its vnet header, and growth.
const BUF_LEN: usize = VNET_HDR_LEN + 65_536 + 512;
const AFFINITY_MAX_AGE_NS: u64 = 86_400 * 1_000_000_000;

macro_rules! engine_counters {
    ($($field:ident => $name:literal,)*) => {
        #[derive(Default)]
        pub struct EngineCounters { $(pub $field: AtomicU64,)* }
        impl EngineCounters {
            fn list(&self) -> Vec<(&'static str, u64)> {
                vec![$(($name, self.$field.load(Ordering::Relaxed)),)*]
            }
        }
    };
}

engine_counters! {
    // Checksums the relay completed itself.
    csum_completed => "engine_csum_completed",
    // Super-frames read at a hook (kept whole or cut).
    gso_frames => "engine_gso_frames",
    // Those of them read from the uplink (GRO aggregates of what the
    // wire brought).
    wire_gso_frames => "engine_wire_gso_frames",
    // Segments the relay cut itself, of super-frames it could not keep whole.
    gso_segments => "engine_gso_segments",
    // Aggregates the relay coalesced itself from complete segments read in
    // one batch, and the segments they hold.
    gro_frames => "engine_gro_frames",
    gro_segments => "engine_gro_segments",
    // Frames passed on with their checksum left partial (super-frames
    // kept whole among them), for the next device or stack to finish.
    partial_passed => "engine_partial_passed",
    offload_dropped => "engine_offload_dropped",
    rx_truncated => "engine_rx_truncated",
    rx_errors => "engine_rx_errors",
    tx_dropped => "engine_tx_dropped",
    tx_errors => "engine_tx_errors",
    panics => "engine_panics",
    ct_expired => "engine_ct_expired",
}

#[derive(Default)]
pub struct Counters {
    events: [AtomicU64; Event::COUNT],
    pass: AtomicU64,
    drop: AtomicU64,
    redirect: AtomicU64,
    pub engine: EngineCounters,
}

impl Counters {
    fn count(&self, event: Event, verdict: Verdict) {
        if let Some(c) = self.events.get(event.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        match verdict {
            Verdict::Pass => &self.pass,
            Verdict::Drop => &self.drop,
            Verdict::Redirect { .. } => &self.redirect,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn list(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = Event::ALL
            .iter()
            .map(|e| {
                (
                    e.name(),
                    self.events
                        .get(e.index())
                        .map_or(0, |c| c.load(Ordering::Relaxed)),
                )
            })
            .collect();
        for (verdict, c) in Verdict::KINDS
            .iter()
            .zip([&self.pass, &self.drop, &self.redirect])
        {
            v.push((verdict.name(), c.load(Ordering::Relaxed)));
        }
        v.extend(self.engine.list());
        v
    }
}

/// A plugged pod as the loop sees it.
pub struct PodIo {
    pub key: String,
    /// The id the program redirects to (`LocalLink::ifindex`): the ifindex
    /// of the link's host end in the wire namespace.
    pub link: u32,
    /// `AF_PACKET` on the pod link's host end (in the wire namespace).
    pub sock: OwnedFd,
    /// The node-side TAP.
    pub tap: OwnedFd,
}

pub struct Shared {
    pub maps: Mutex<HostMaps>,
    pub counters: Counters,
    pub stop: AtomicBool,
    pub wake: OwnedFd,
    pub pods: Mutex<Vec<Arc<PodIo>>>,
    /// Bumped on every change of `pods`; the loop publishes the generation it
    /// runs with in `pods_seen`.
    pub pods_gen: AtomicU64,
    pub pods_seen: AtomicU64,
}

impl Shared {
    pub fn new(wake: OwnedFd) -> Self {
        Shared {
            maps: Mutex::new(HostMaps::new()),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
            wake,
            pods: Mutex::new(Vec::new()),
            pods_gen: AtomicU64::new(0),
            pods_seen: AtomicU64::new(0),
        }
    }

    pub fn maps(&self) -> MutexGuard<'_, HostMaps> {
        self.maps.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pods(&self) -> MutexGuard<'_, Vec<Arc<PodIo>>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn wake(&self) {
        sys::eventfd_signal(self.wake.as_raw_fd());
    }

    /// Tell the loop the pod set changed and wait (bounded) until it runs
    /// with the new set, so fds removed from it are no longer in use.
    pub fn pods_changed(&self) {
        let gen = self.pods_gen.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake();
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.pods_seen.load(Ordering::SeqCst) < gen && Instant::now() < deadline {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Where a frame goes after the program passed it: a vnet header, then
/// the frame, either way.
#[derive(Clone, Copy)]
enum Out {
    /// A TAP in the node namespace: the node's kernel takes it.
    Tap(RawFd),
    /// An `AF_PACKET` socket: out of a link.
    Sock(RawFd),
}

/// How a frame came in: the hook to run (none on a pod's ingress) and
/// whether the kernel classified it as for another host.
#[derive(Clone, Copy)]
struct Rx {
    hook: Option<Hook>,
    other_host: bool,
}

pub struct Relay {
    pub shared: Arc<Shared>,
    /// `AF_PACKET` on the real `nic0` (in the wire namespace).
    pub wire: OwnedFd,
    /// The TAP named `nic0` in the node namespace.
    pub tap: OwnedFd,
}

struct Worker<'a> {
    shared: &'a Shared,
    /// The pods the loop polls, for redirects to their links.
    pods: Vec<Arc<PodIo>>,
    clock: SystemClock,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    /// Batched reads from packet sockets (TAPs are read one frame a call).
    batch: sys::RecvBatch,
    /// Small frames for a packet socket, sent together at the end of a
    /// drain (or when one for another socket comes).
    tx: sys::SendBatch,
    /// Receive coalescing of what one `drain` reads from a hooked socket;
    /// empty between drains.
    gro: Coalescer,
    /// The pod link the current `drain` reads (its `PodIo::link`), 0 for
    /// any other: what the program checks a pod's source addresses against.
    from_link: u32,
    logged_errors: u32,
}

impl Relay {
    pub fn run(self) {
        let shared = self.shared.clone();
        let mut w = Worker {
            shared: &shared,
            pods: Vec::new(),
            clock: SystemClock::new(),
            buf: vec![0u8; BUF_LEN],
            scratch: vec![0u8; BUF_LEN],
            batch: sys::RecvBatch::new(RECV_BATCH, BUF_LEN),
            tx: sys::SendBatch::new(SEND_BATCH, SEND_FRAME_MAX),
            gro: Coalescer::new(VNET_HDR_LEN, BUF_LEN - VNET_HDR_LEN),
            from_link: 0,
            logged_errors: 0,
        };
        let wire = self.wire.as_raw_fd();
        let tap = self.tap.as_raw_fd();
        let wake = shared.wake.as_raw_fd();
        let mut pods: Vec<Arc<PodIo>> = Vec::new();
        let mut seen_gen = u64::MAX;
        let mut last_expire = Instant::now();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        debug!("relay loop running");
        while !shared.stop.load(Ordering::SeqCst) {
            let gen = shared.pods_gen.load(Ordering::SeqCst);
            if gen != seen_gen {
                pods = shared.pods().clone();
                w.pods = pods.clone();
                seen_gen = gen;
                shared.pods_seen.store(gen, Ordering::SeqCst);
            }
            fds.clear();
            for fd in [wake, wire, tap] {
                fds.push(pollfd(fd));
            }
            for p in &pods {
                fds.push(pollfd(p.sock.as_raw_fd()));
                fds.push(pollfd(p.tap.as_raw_fd()));
            }
            // SAFETY: fds is a live, correctly sized pollfd array.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 500) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    warn!(error = %e, "relay poll failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            let ready = |i: usize| fds[i].revents & (libc::POLLIN | libc::POLLERR) != 0;
            if ready(0) {
                sys::eventfd_drain(wake);
            }
            if ready(1) {
                w.drain(wire, true, Some(Hook::WireIngress), Out::Tap(tap));
            }
            if ready(2) {
                w.drain(tap, false, Some(Hook::WireEgress), Out::Sock(wire));
            }
            for (i, p) in pods.iter().enumerate() {
                let (s, t) = (p.sock.as_raw_fd(), p.tap.as_raw_fd());
                if ready(3 + 2 * i) {
                    w.from_link = p.link;
                    w.drain(s, true, Some(Hook::FromPod), Out::Tap(t));
                    w.from_link = 0;
                }
                if ready(4 + 2 * i) {
                    // Node to pod: no hook (the pod's own ingress is not one).
                    w.drain(t, false, None, Out::Sock(s));
                }
                // A pod whose link vanished under us: stop polling it.
                if fds[3 + 2 * i].revents & (libc::POLLNVAL | libc::POLLHUP) != 0
                    || fds[4 + 2 * i].revents & (libc::POLLNVAL | libc::POLLHUP) != 0
                {
                    debug!(pod = %p.key, "pod link gone");
                }
            }
            if last_expire.elapsed() >= Duration::from_secs(1) {
                last_expire = Instant::now();
                let now = w.clock.now_ns();
                let mut maps = shared.maps();
                let n = maps.expire(now);
                maps.expire_affinity(now, AFFINITY_MAX_AGE_NS);
                shared
                    .counters
                    .engine
                    .ct_expired
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        debug!("relay loop stopped");
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

impl Worker<'_> {
    /// Read up to a batch of frames (each behind its vnet header) from
    /// `fd`, run `hook` on each (if any) and forward what passes to `out`.
    /// Complete TCP segments read from a hooked socket in one batch are
    /// coalesced first ([`sluice_datapath::host::gro`]), as a link with GRO
    /// would hand them over; the aggregate leaves before anything read
    /// after it, and at the end of the batch.
    fn drain(&mut self, fd: RawFd, from_socket: bool, hook: Option<Hook>, out: Out) {
        let coalesce = from_socket && hook.is_some();
        let mut left = BATCH;
        while left > 0 {
            if from_socket {
                // Packet sockets: a batch per system call.
                let got = match self.batch.recv(fd) {
                    Ok(n) => n,
                    Err(e) => {
                        self.rx_error(&e);
                        break;
                    }
                };
                for i in 0..got {
                    let rx = self.batch.got[i];
                    // Run it where every step expects it: in `buf`.
                    std::mem::swap(&mut self.buf, &mut self.batch.bufs[i]);
                    self.one(rx.len, rx.other_host, hook, out, coalesce);
                    std::mem::swap(&mut self.buf, &mut self.batch.bufs[i]);
                }
                left = left.saturating_sub(got);
                if got < self.batch.bufs.len() {
                    // Short: the queue is empty.
                    break;
                }
            } else {
                match sys::read_frame(fd, &mut self.buf, false) {
                    Ok(Some(rx)) => self.one(rx.len, rx.other_host, hook, out, coalesce),
                    Ok(None) => break,
                    Err(e) => {
                        self.rx_error(&e);
                        break;
                    }
                }
                left -= 1;
            }
        }
        if coalesce {
            self.flush(
                Rx {
                    hook,
                    other_host: false,
                },
                out,
            );
        }
        self.flush_tx();
    }

    /// Send the frames queued for a packet socket.
    fn flush_tx(&mut self) {
        if self.tx.is_empty() {
            return;
        }
        let loss = self.tx.flush();
        let c = &self.shared.counters.engine;
        c.tx_dropped
            .fetch_add(loss.dropped as u64, Ordering::Relaxed);
        if loss.failed > 0 {
            c.tx_errors.fetch_add(loss.failed as u64, Ordering::Relaxed);
            let e = std::io::Error::from_raw_os_error(loss.errno.unwrap_or(0));
            self.log_error("writing a frame", &e);
        }
    }

    fn rx_error(&mut self, e: &std::io::Error) {
        self.count(|c| &c.rx_errors);
        self.log_error("reading a frame", e);
    }

    /// The frame just read into `buf[..n]` (`n` as the read reported it,
    /// possibly past the buffer): header checked and parsed once, then
    /// coalesced or run.
    fn one(&mut self, n: usize, other_host: bool, hook: Option<Hook>, out: Out, coalesce: bool) {
        if n > self.buf.len() {
            self.count(|c| &c.rx_truncated);
            return;
        }
        let Some(hdr) = VnetHdr::parse(&self.buf[..n]) else {
            self.count(|c| &c.rx_errors);
            return;
        };
        if hook.is_some() && hdr.gso() != offload::GSO_NONE {
            self.count(|c| &c.gso_frames);
            if hook == Some(Hook::WireIngress) {
                self.count(|c| &c.wire_gso_frames);
            }
        }
        let rx = Rx { hook, other_host };
        if coalesce && !other_host && self.coalesced(hdr, n, rx, out) {
            return;
        }
        self.guarded(|w| w.frame_in(hdr, n, rx, out));
    }

    fn count(&self, which: impl Fn(&EngineCounters) -> &AtomicU64) {
        which(&self.shared.counters.engine).fetch_add(1, Ordering::Relaxed);
    }

    /// Run `f`, counting and logging a panic instead of dying of it.
    fn guarded(&mut self, f: impl FnOnce(&mut Self)) {
        if catch_unwind(AssertUnwindSafe(|| f(self))).is_err() {
            self.shared
                .counters
                .engine
                .panics
                .fetch_add(1, Ordering::Relaxed);
            warn!("a frame made the relay panic; dropped");
        }
    }

    /// Offer the frame in `buf[..n]` (read with `hdr`) to the coalescer:
    /// `true` if it took it; otherwise the held aggregate has left and the
    /// caller handles the frame.
    fn coalesced(&mut self, hdr: VnetHdr, n: usize, rx: Rx, out: Out) -> bool {
        // Only complete frames: what is partial or a super-frame already
        // goes whole as it is.
        if hdr.gso() != offload::GSO_NONE || hdr.flags & offload::VNET_F_NEEDS_CSUM != 0 {
            self.flush(rx, out);
            return false;
        }
        let verified = hdr.flags & offload::VNET_F_DATA_VALID != 0;
        loop {
            match self.gro.offer(&self.buf[VNET_HDR_LEN..n], verified) {
                Offer::Held => return true,
                Offer::FlushFirst => self.flush(rx, out),
                Offer::Refused => {
                    self.flush(rx, out);
                    return false;
                }
            }
        }
    }

    /// Send the held aggregate (if any) through the program and on.
    fn flush(&mut self, rx: Rx, out: Out) {
        let Some((hdr, len)) = self.gro.take() else {
            return;
        };
        if hdr.gso() != offload::GSO_NONE {
            self.count(|c| &c.gro_frames);
            let size = usize::from(hdr.gso_size.max(1));
            let payload = len.saturating_sub(usize::from(hdr.hdr_len));
            self.shared
                .counters
                .engine
                .gro_segments
                .fetch_add(payload.div_ceil(size) as u64, Ordering::Relaxed);
        }
        // The aggregate is laid out as `buf` is: run it in its place.
        self.gro.swap_buffer(&mut self.buf);
        self.guarded(|w| w.frame_in(hdr, VNET_HDR_LEN + len, rx, out));
        self.gro.swap_buffer(&mut self.buf);
    }

    /// A frame read with header `hdr` sits in `buf[..n]`, behind the
    /// header's bytes (checked by the caller: `n` fits `buf` and holds a
    /// header). Partial checksums and super-frames go through whole where
    /// they can ([`offload::intake`]); the rest is finished here first.
    fn frame_in(&mut self, hdr: VnetHdr, n: usize, rx: Rx, out: Out) {
        let c = &self.shared.counters.engine;
        if rx.hook.is_none() {
            // Node to pod: no hook, the frame and its header go on as the
            // node's stack made them.
            self.send(out, n);
            return;
        }
        let len = n - VNET_HDR_LEN;
        let frame = &mut self.buf[VNET_HDR_LEN..n];
        match offload::intake(&hdr, frame) {
            Intake::Complete => self.run_and_forward(None, len, rx, out, None),
            Intake::Partial(h) => {
                c.partial_passed.fetch_add(1, Ordering::Relaxed);
                self.run_and_forward(None, len, rx, out, Some(h));
            }
            Intake::Finish => self.finish_and_forward(hdr, len, rx, out),
        }
    }

    /// What cannot go on partial (a UDP super-frame, an odd checksum
    /// offset): checksum completed, or cut into segments, here.
    fn finish_and_forward(&mut self, hdr: VnetHdr, len: usize, rx: Rx, out: Out) {
        let c = &self.shared.counters.engine;
        let frame = &mut self.buf[VNET_HDR_LEN..VNET_HDR_LEN + len];
        let mut segments: Vec<Vec<u8>> = Vec::new();
        match offload::finish(&hdr, frame, |s| segments.push(s.clone())) {
            Ok(None) => {
                if hdr.flags & offload::VNET_F_NEEDS_CSUM != 0 {
                    c.csum_completed.fetch_add(1, Ordering::Relaxed);
                }
                self.run_and_forward(None, len, rx, out, None);
            }
            Ok(Some(k)) => {
                c.gso_segments.fetch_add(k as u64, Ordering::Relaxed);
                for s in &segments {
                    self.run_and_forward(Some(s), s.len(), rx, out, None);
                }
            }
            Err(e) => {
                c.offload_dropped.fetch_add(1, Ordering::Relaxed);
                debug!(?e, gso = hdr.gso_type, "frame needing offload dropped");
            }
        }
    }

    /// Run the program on a frame (in `buf[VNET_HDR_LEN..][..len]`, or a
    /// copy of `seg`) and forward it if it passes. `partial`: the frame's
    /// L4 checksum is left to the next device, and it leaves with this
    /// header, unless the program built an answer in its place.
    fn run_and_forward(
        &mut self,
        seg: Option<&Vec<u8>>,
        len: usize,
        rx: Rx,
        out: Out,
        partial: Option<VnetHdr>,
    ) {
        let shared = self.shared;
        if let Some(s) = seg {
            let Some(dst) = self.scratch.get_mut(VNET_HDR_LEN..VNET_HDR_LEN + s.len()) else {
                shared
                    .counters
                    .engine
                    .rx_truncated
                    .fetch_add(1, Ordering::Relaxed);
                return;
            };
            dst.copy_from_slice(s);
            std::mem::swap(&mut self.buf, &mut self.scratch);
        }
        self.run_in_buf(len, rx, out, partial);
        if seg.is_some() {
            std::mem::swap(&mut self.buf, &mut self.scratch);
        }
    }

    fn run_in_buf(&mut self, len: usize, rx: Rx, out: Out, partial: Option<VnetHdr>) {
        let shared = self.shared;
        let buf = &mut self.buf;
        let mut len = len;
        let mut out = out;
        let mut hdr = partial.unwrap_or_default();
        if let Some(hook) = rx.hook {
            // At a TC ingress hook the kernel has classified the frame
            // (pkt_type) from its destination MAC before the program runs,
            // so a program rewriting MACs (the P6 answers swap them) does not
            // change whether the node accepts it. A TAP classifies again
            // from the bytes: give the kernel the destination it was sent to.
            let mut dst_mac = [0u8; 6];
            let to_kernel = matches!(out, Out::Tap(_)) && len >= 14;
            if to_kernel {
                dst_mac.copy_from_slice(&buf[VNET_HDR_LEN..VNET_HDR_LEN + 6]);
            }
            let mut pkt = FramePacket::new(&mut buf[VNET_HDR_LEN..], len);
            pkt.other_host = rx.other_host;
            pkt.csum_partial = partial.is_some();
            pkt.ingress_link = self.from_link;
            let outcome = {
                let mut maps = shared.maps();
                process(&mut pkt, &mut *maps, &mut self.clock, hook)
            };
            len = pkt.len;
            if pkt.rebuilt {
                // A P6 answer: a new, complete frame.
                hdr = VnetHdr::default();
            }
            shared.counters.count(outcome.event, outcome.verdict);
            match outcome.verdict {
                Verdict::Drop => return,
                // The program built the frame for the pod's link: it goes
                // there as it is, past the node kernel.
                Verdict::Redirect { ifindex } => {
                    match self.pods.iter().find(|p| p.link == ifindex) {
                        Some(p) => out = Out::Sock(p.sock.as_raw_fd()),
                        None => {
                            shared
                                .counters
                                .engine
                                .tx_dropped
                                .fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
                Verdict::Pass => {
                    if to_kernel && len >= 14 {
                        buf[VNET_HDR_LEN..VNET_HDR_LEN + 6].copy_from_slice(&dst_mac);
                    }
                }
            }
        }
        hdr.write(&mut buf[..VNET_HDR_LEN]);
        self.send(out, VNET_HDR_LEN + len);
    }

    /// Write `buf[..n]` (a vnet header, then the frame) to `out`.
    fn send(&mut self, out: Out, n: usize) {
        let fd = match out {
            Out::Tap(fd) | Out::Sock(fd) => fd,
        };
        if let Out::Sock(fd) = out {
            // Small frames for a packet socket go out together.
            if n <= self.tx.frame_max() {
                if !self.tx.fits(fd, n) {
                    self.flush_tx();
                }
                self.tx.queue(fd, &self.buf[..n]);
                return;
            }
            // Larger ones at once, behind those queued for the same link.
            self.flush_tx();
        }
        if let Err(e) = sys::write_frame(fd, &self.buf[..n]) {
            let c = &self.shared.counters.engine;
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    c.tx_dropped.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    c.tx_errors.fetch_add(1, Ordering::Relaxed);
                    self.log_error("writing a frame", &e);
                }
            }
        }
    }

    fn log_error(&mut self, what: &str, e: &std::io::Error) {
        if self.logged_errors < 20 {
            self.logged_errors += 1;
            warn!(error = %e, "relay: {what}");
        }
    }
}
