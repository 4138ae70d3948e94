//! The kernel build of the load balancer's program against the host build.
//!
//! One corpus of crafted frames runs through both: the `sluice-lb` object's
//! classifier loaded into the kernel and run with `BPF_PROG_TEST_RUN`
//! (through the kernel engine's `LbProgram`, whose writer fills the maps),
//! and `sluice_datapath::lb::process_lb` over `HostLbMaps`. Both start from
//! the same `LbTables` and configuration, and get the same updates between
//! rounds (a backend joins, one turns unhealthy, one leaves, none is
//! healthy). Per frame the verdict, the output bytes and the event counted
//! must be identical; after each round, so must the flow tables (backend
//! ids exactly, last-seen times within a tolerance: each frame runs in the
//! kernel and then on the host, both reading `CLOCK_MONOTONIC`) and, at the
//! end, the per-backend counters.
//!
//! Needs root (BPF) and the object: `cargo xtask build-ebpf --release`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use etherparse::PacketBuilder;
use sluice_datapath::env::Clock;
use sluice_datapath::host::VecPacket;
use sluice_datapath::lb::host::{HostLbMaps, LbBackendSpec, LbServiceSpec, LbTables};
use sluice_datapath::lb::maps::{
    Addr, FlowKey, FlowValue, FrontendKey, LbConfig, PROTO_TCP, PROTO_UDP,
};
use sluice_datapath::lb::{process_lb, LbEvent, LbVerdict};
use sluice_datapath::maps::v4_mapped;
use sluice_lb::engine::kernel::{verdict_of, LbProgram};

const LB_MAC: [u8; 6] = [0x02, 0x1b, 0, 0, 0, 0x01];
const CLIENT_MAC: [u8; 6] = [0x02, 0xc1, 0, 0, 0, 0x01];

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// See the module documentation; a flow refreshed in the kernel just before
/// the one-second mark may be refreshed on the host just after it.
const TIME_TOLERANCE_NS: u64 = 1_200_000_000;

fn object() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bpf/bpfel-unknown-none/release/sluice-lb");
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask build-ebpf --release` first (`cargo xtask test` does it)",
        p.display()
    );
    p
}

fn load() -> LbProgram {
    LbProgram::load(&object()).unwrap_or_else(|e| panic!("loading the program (needs root): {e:#}"))
}

/// The verifier accepts the classifier (also part of the differential
/// run; here on its own for a clear signal).
#[test]
fn verifier_accepts_the_lb_program() {
    let p = load();
    let (insns, bytes) = p.verifier_stats().expect("program info");
    println!(
        "sluice_lb_ingress: loaded; the verifier processed {insns} instructions \
         (limit 1 000 000), {bytes} bytes translated"
    );
}

/// `CLOCK_MONOTONIC`, the clock `bpf_ktime_get_ns` reads.
struct MonoClock;

impl Clock for MonoClock {
    fn now_ns(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out pointer.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        assert_eq!(r, 0);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

// ---------------------------------------------------------------------------
// Addresses, services, frames

fn addr(v6: bool, n: u16) -> Addr {
    if v6 {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[14] = (n >> 8) as u8;
        a[15] = n as u8;
        a
    } else {
        v4_mapped([198, 51, (n >> 8) as u8, n as u8])
    }
}

fn vip(v6: bool, n: u8) -> Addr {
    addr(v6, 0x6400 + u16::from(n))
}

fn client(v6: bool, n: u16) -> Addr {
    addr(v6, 0x0100 + n)
}

fn mac_of(id: u32) -> [u8; 6] {
    [0x02, 0x4e, 0, 0, (id >> 8) as u8, id as u8]
}

fn be(id: u32, healthy: bool) -> LbBackendSpec {
    LbBackendSpec {
        id,
        addr: v4_mapped([192, 0, 2, id as u8]),
        mac: mac_of(id),
        healthy,
    }
}

fn fe(addr: Addr, port: u16, proto: u8) -> FrontendKey {
    FrontendKey {
        addr,
        port,
        proto,
        _pad: 0,
    }
}

/// `web`: TCP 80 and UDP 53 on VIP 1 of both families; `sick`: TCP 443 on
/// VIP 2 with `sick` backends; `empty`: TCP 80 on VIP 3, no backend.
fn services(web: Vec<LbBackendSpec>, sick: Vec<LbBackendSpec>) -> Vec<LbServiceSpec> {
    let mut web_fes = Vec::new();
    for v6 in [false, true] {
        web_fes.push(fe(vip(v6, 1), 80, PROTO_TCP));
        web_fes.push(fe(vip(v6, 1), 53, PROTO_UDP));
    }
    vec![
        LbServiceSpec {
            id: LbTables::service_id("default/web"),
            frontends: web_fes,
            backends: web,
        },
        LbServiceSpec {
            id: LbTables::service_id("default/sick"),
            frontends: vec![
                fe(vip(false, 2), 443, PROTO_TCP),
                fe(vip(true, 2), 443, PROTO_TCP),
            ],
            backends: sick,
        },
        LbServiceSpec {
            id: LbTables::service_id("default/empty"),
            frontends: vec![fe(vip(false, 3), 80, PROTO_TCP)],
            backends: vec![],
        },
    ]
}

fn is_v6(a: &Addr) -> bool {
    a[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
}

fn builder(src: &Addr, dst: &Addr) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, LB_MAC);
    if is_v6(src) {
        b.ipv6(*src, *dst, 64)
    } else {
        b.ipv4(
            [src[12], src[13], src[14], src[15]],
            [dst[12], dst[13], dst[14], dst[15]],
            64,
        )
    }
}

fn tcp(src: Addr, sport: u16, dst: Addr, dport: u16, flags: u8) -> Vec<u8> {
    let mut b = builder(&src, &dst).tcp(sport, dport, 7, 64240);
    if flags & TCP_SYN != 0 {
        b = b.syn();
    }
    if flags & TCP_ACK != 0 {
        b = b.ack(1);
    }
    if flags & TCP_FIN != 0 {
        b = b.fin();
    }
    if flags & TCP_RST != 0 {
        b = b.rst();
    }
    let mut out = Vec::new();
    b.write(&mut out, b"data").unwrap();
    out
}

fn udp(src: Addr, sport: u16, dst: Addr, dport: u16) -> Vec<u8> {
    let mut out = Vec::new();
    builder(&src, &dst)
        .udp(sport, dport)
        .write(&mut out, b"q")
        .unwrap();
    out
}

fn icmp(src: Addr, dst: Addr) -> Vec<u8> {
    let mut out = Vec::new();
    let b = builder(&src, &dst);
    if is_v6(&src) {
        b.icmpv6_echo_request(1, 1)
            .write(&mut out, b"ping")
            .unwrap();
    } else {
        b.icmpv4_echo_request(1, 1)
            .write(&mut out, b"ping")
            .unwrap();
    }
    out
}

fn v4_fragment(mut f: Vec<u8>, mf: bool, offset: u16) -> Vec<u8> {
    let v = offset | if mf { 0x2000 } else { 0 };
    f[20..22].copy_from_slice(&v.to_be_bytes());
    f[24] = 0;
    f[25] = 0;
    let mut s = 0u32;
    for c in f[14..34].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    f[24..26].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f
}

fn v6_fragment(f: &[u8], offset: u16, mf: bool) -> Vec<u8> {
    let mut ext = [f[20], 0, 0, 0, 0, 0, 0, 9];
    ext[2..4].copy_from_slice(&((offset << 3) | u16::from(mf)).to_be_bytes());
    let mut out = f[..54].to_vec();
    out[20] = 44;
    let pl = u16::from_be_bytes([out[18], out[19]]) + 8;
    out[18..20].copy_from_slice(&pl.to_be_bytes());
    out.extend_from_slice(&ext);
    out.extend_from_slice(&f[54..]);
    out
}

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[198, 51, 1, 1, 0, 0, 0, 0, 0, 0, 198, 51, 0, 1]);
    f
}

/// An untagged IPv4/IPv6 frame cut inside the fixed IP header, or shorter
/// than an Ethernet header: `BPF_PROG_TEST_RUN` refuses those.
fn kernel_refuses(frame: &[u8]) -> bool {
    frame.len() < 14
        || match frame.get(12..14) {
            Some([0x08, 0x00]) => frame.len() < 14 + 20,
            Some([0x86, 0xdd]) => frame.len() < 14 + 40,
            _ => false,
        }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

// ---------------------------------------------------------------------------
// The two engines side by side

struct Driver {
    kernel: LbProgram,
    host: HostLbMaps,
    host_packets: BTreeMap<u32, u64>,
    counts: Vec<u64>,
    frames: usize,
    skipped: usize,
    events: BTreeMap<&'static str, usize>,
    mismatches: Vec<String>,
}

impl Driver {
    fn new(specs: &[LbServiceSpec]) -> Driver {
        let mut kernel = load();
        let config = LbConfig {
            mac: LB_MAC,
            _pad: [0; 2],
            ifindex: 1,
        };
        kernel.set_config(&config).unwrap();
        let mut host = HostLbMaps::new();
        host.set_config(config);
        let counts = kernel.event_counts();
        let mut d = Driver {
            kernel,
            host,
            host_packets: BTreeMap::new(),
            counts,
            frames: 0,
            skipped: 0,
            events: BTreeMap::new(),
            mismatches: Vec::new(),
        };
        d.apply(specs);
        d
    }

    /// The same update on both sides (the kernel through the engine's
    /// writer).
    fn apply(&mut self, specs: &[LbServiceSpec]) {
        let t = LbTables::build(specs).expect("tables");
        self.kernel.apply(t.clone()).expect("kernel maps written");
        self.host.replace_tables(Arc::new(t));
    }

    /// The one event and the one verdict counted since the last call.
    fn counted(&mut self) -> (Option<usize>, Option<usize>) {
        let now = self.kernel.event_counts();
        let moved: Vec<usize> = (0..now.len())
            .filter(|&i| now[i] != self.counts[i])
            .collect();
        self.counts = now;
        let ev = moved.iter().copied().find(|&i| i < LbEvent::COUNT);
        let verdict = moved.iter().copied().find(|&i| i >= LbEvent::COUNT);
        if moved.len() != 2 {
            return (None, None);
        }
        (ev, verdict)
    }

    /// Run one frame through both; record any difference.
    fn run(&mut self, what: &str, frame: &[u8]) -> Option<(LbVerdict, Vec<u8>)> {
        self.frames += 1;
        let mut p = VecPacket::new(frame.to_vec());
        if kernel_refuses(frame) {
            self.skipped += 1;
            process_lb(&mut p, &mut self.host, &MonoClock);
            return None;
        }
        let (rc, k_out) = match self.kernel.test_run(frame) {
            Ok(r) => r,
            Err(e) => {
                self.mismatches
                    .push(format!("{what}: the kernel refused the frame: {e:#}"));
                return None;
            }
        };
        let o = process_lb(&mut p, &mut self.host, &MonoClock);
        if o.verdict == LbVerdict::Tx {
            *self.host_packets.entry(o.backend).or_default() += 1;
        }
        *self.events.entry(o.event.name()).or_default() += 1;
        let (k_event, k_verdict) = self.counted();
        let mut diff = Vec::new();
        if verdict_of(rc) != Some(o.verdict) {
            diff.push(format!("verdict: kernel {rc}, host {:?}", o.verdict));
        }
        if k_event != Some(o.event.index()) {
            diff.push(format!("event: kernel {k_event:?}, host {:?}", o.event));
        }
        if k_verdict != Some(o.verdict.counter_index() as usize) {
            diff.push(format!(
                "verdict counter: kernel {k_verdict:?}, host {:?}",
                o.verdict
            ));
        }
        if k_out != p.data {
            diff.push("output bytes differ".to_string());
        }
        if !diff.is_empty() {
            self.mismatches.push(format!("{what}: {}", diff.join("; ")));
        }
        Some((o.verdict, p.data))
    }

    fn compare_flows(&mut self, at: &str) {
        let k: HashMap<FlowKey, FlowValue> = self.kernel.flows().into_iter().collect();
        let h: HashMap<FlowKey, FlowValue> = self.host.flows().into_iter().collect();
        if k.len() != h.len() {
            self.mismatches.push(format!(
                "{at}: {} flows in the kernel, {} on the host",
                k.len(),
                h.len()
            ));
        }
        for (key, hv) in &h {
            match k.get(key) {
                None => self
                    .mismatches
                    .push(format!("{at}: flow {key:?} only on the host")),
                Some(kv) => {
                    if kv.backend != hv.backend {
                        self.mismatches.push(format!(
                            "{at}: flow {key:?} on backend {} in the kernel, {} on the host",
                            kv.backend, hv.backend
                        ));
                    }
                    if kv.last_seen_ns.abs_diff(hv.last_seen_ns) > TIME_TOLERANCE_NS {
                        self.mismatches.push(format!(
                            "{at}: flow {key:?} last seen {} apart",
                            kv.last_seen_ns.abs_diff(hv.last_seen_ns)
                        ));
                    }
                }
            }
        }
    }
}

/// TCP and UDP flows of both families to `web`, and TCP to `sick`: a SYN
/// (or first datagram), then data, for `n` clients.
fn traffic(d: &mut Driver, round: &str, n: u16, syn: bool) {
    for v6 in [false, true] {
        for i in 0..n {
            let c = client(v6, i);
            let flags = if syn { TCP_SYN } else { TCP_ACK };
            d.run(
                &format!("{round}: TCP to web ({i}, v6 {v6})"),
                &tcp(c, 20_000 + i, vip(v6, 1), 80, flags),
            );
            d.run(
                &format!("{round}: UDP to web ({i}, v6 {v6})"),
                &udp(c, 30_000 + i, vip(v6, 1), 53),
            );
            d.run(
                &format!("{round}: TCP to sick ({i}, v6 {v6})"),
                &tcp(c, 40_000 + i, vip(v6, 2), 443, flags),
            );
        }
    }
}

fn odd_frames(d: &mut Driver) {
    for v6 in [false, true] {
        let c = client(v6, 900);
        let full = tcp(c, 1234, vip(v6, 1), 80, TCP_ACK);
        let dgram = udp(c, 1234, vip(v6, 1), 53);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "TCP to a VIP port without frontend",
                tcp(c, 1234, vip(v6, 1), 81, TCP_SYN),
            ),
            (
                "TCP RST to web",
                tcp(c, 1235, vip(v6, 1), 80, TCP_RST | TCP_ACK),
            ),
            ("ICMP to a VIP", icmp(c, vip(v6, 1))),
            ("ICMP to the load balancer", icmp(c, addr(v6, 1))),
            (
                "TCP to the load balancer",
                tcp(c, 1234, addr(v6, 1), 22, TCP_SYN),
            ),
            ("TCP cut in its header", full[..full.len() - 20].to_vec()),
            ("TCP to another MAC", {
                let mut f = full.clone();
                f[..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
                f
            }),
            (
                "first fragment",
                if v6 {
                    v6_fragment(&dgram, 0, true)
                } else {
                    v4_fragment(dgram.clone(), true, 0)
                },
            ),
            (
                "later fragment",
                if v6 {
                    v6_fragment(&dgram, 8, false)
                } else {
                    v4_fragment(dgram.clone(), false, 8)
                },
            ),
        ];
        for (what, f) in cases {
            d.run(what, &f);
        }
        if !v6 {
            d.run(
                "TCP to a VIP without backends",
                &tcp(c, 1234, vip(false, 3), 80, TCP_SYN),
            );
        }
    }
    d.run("ARP", &arp());
    d.run("Ethernet header only", &arp()[..14]);
    d.run("runt", &arp()[..10]);
}

/// Random damage to valid frames: truncation, byte flips in the headers.
fn mutations(d: &mut Driver, rng: &mut Rng, n: usize) {
    for i in 0..n {
        let v6 = rng.below(2) == 1;
        let c = client(v6, rng.below(40) as u16);
        let mut f = match rng.below(3) {
            0 => tcp(c, 20_000 + rng.below(40) as u16, vip(v6, 1), 80, TCP_ACK),
            1 => udp(c, 30_000 + rng.below(40) as u16, vip(v6, 1), 53),
            _ => tcp(c, 40_000, vip(v6, 2), 443, TCP_SYN),
        };
        if rng.below(2) == 0 {
            let cut = 14 + rng.below(f.len() - 14);
            f.truncate(cut);
        } else {
            for _ in 0..1 + rng.below(3) {
                let at = 12 + rng.below(f.len().min(80) - 12);
                f[at] ^= 1 << rng.below(8);
            }
        }
        d.run(&format!("mutation {i}"), &f);
    }
}

#[test]
fn kernel_and_host_agree() {
    let web3 = vec![be(11, true), be(12, true), be(13, true)];
    let sick = vec![be(21, false), be(22, false)];
    let mut d = Driver::new(&services(web3, sick.clone()));

    traffic(&mut d, "new flows", 40, true);
    traffic(&mut d, "established", 40, false);
    d.compare_flows("after the first flows");

    // A backend joins: established flows stay, the newcomer takes new ones.
    d.apply(&services(
        vec![be(11, true), be(12, true), be(13, true), be(14, true)],
        sick.clone(),
    ));
    traffic(&mut d, "after a join", 40, false);
    traffic(&mut d, "new flows after a join", 60, true);
    d.compare_flows("after a join");

    // One turns unhealthy: TCP stays, SYNs and UDP move.
    d.apply(&services(
        vec![be(11, true), be(12, false), be(13, true), be(14, true)],
        sick.clone(),
    ));
    traffic(&mut d, "12 unhealthy (data)", 60, false);
    traffic(&mut d, "12 unhealthy (SYN)", 60, true);
    d.compare_flows("after 12 turned unhealthy");

    // One leaves: its flows are chosen again.
    d.apply(&services(
        vec![be(11, true), be(12, false), be(14, true)],
        sick.clone(),
    ));
    traffic(&mut d, "13 removed", 60, false);
    d.compare_flows("after 13 left");

    // None healthy: to all; one of `sick` recovers.
    d.apply(&services(
        vec![be(11, false), be(12, false), be(14, false)],
        vec![be(21, false), be(22, true)],
    ));
    traffic(&mut d, "none healthy", 60, false);
    traffic(&mut d, "none healthy (SYN)", 60, true);
    d.compare_flows("with none healthy");

    odd_frames(&mut d);
    let mut rng = Rng(0x5eed_1b1b);
    mutations(&mut d, &mut rng, 300);
    d.compare_flows("the end");

    let kernel_packets = d.kernel.counters().expect("counters").packets_per_backend;
    for (id, n) in &d.host_packets {
        // Backends removed on the way lost their kernel counter with them.
        if let Some(k) = kernel_packets.get(id) {
            if k != n {
                d.mismatches.push(format!(
                    "backend {id}: {k} frames in the kernel, {n} on the host"
                ));
            }
        }
    }

    println!(
        "differential: {} frames ({} refused by BPF_PROG_TEST_RUN, host only), {} flows, events {:?}",
        d.frames,
        d.skipped,
        d.host.flows_len(),
        d.events
    );
    for e in [
        LbEvent::NewFlow,
        LbEvent::Established,
        LbEvent::Rechosen,
        LbEvent::NotFrontend,
        LbEvent::Fragment,
        LbEvent::Malformed,
        LbEvent::NotForUs,
        LbEvent::NoBackend,
        LbEvent::NotVip,
        LbEvent::NotIp,
    ] {
        assert!(
            d.events.contains_key(e.name()),
            "the corpus exercises {}",
            e.name()
        );
    }
    assert!(
        d.mismatches.is_empty(),
        "{} mismatches:\n{}",
        d.mismatches.len(),
        d.mismatches
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
