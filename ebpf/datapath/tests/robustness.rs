//! Random and mutated frames: the program never panics, never touches a byte
//! outside the frame, and keeps checksums as valid as they were.
//!
//! `FRAMES` (default 1 000 000) and `SEED` can be set in the environment.

mod common;

use common::*;
use sluice_datapath::env::{L4Csum, Packet};
use sluice_datapath::host::{HostMaps, ServiceTables, TestClock, VecPacket};
use sluice_datapath::maps::{NodeConfig, PROTO_TCP, PROTO_UDP, SVC_F_AFFINITY, SVC_F_LOCAL};
use sluice_datapath::{process, Event, Hook, Verdict};

/// Checks every access against the frame length itself, independently of
/// the packet implementation, and counts what it saw.
struct Guarded {
    inner: VecPacket,
    oob_attempts: std::cell::Cell<u64>,
    violations: u64,
}

impl Guarded {
    fn check<T>(&mut self, off: usize, n: usize, r: Option<T>) -> Option<T> {
        let in_bounds = off.checked_add(n).is_some_and(|e| e <= self.inner.len());
        if !in_bounds {
            self.oob_attempts.set(self.oob_attempts.get() + 1);
        }
        if in_bounds != r.is_some() {
            self.violations += 1;
        }
        r
    }
}

impl Packet for Guarded {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn load<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        let r = self.inner.load::<N>(off);
        let in_bounds = off.checked_add(N).is_some_and(|e| e <= self.inner.len());
        assert_eq!(in_bounds, r.is_some(), "load {off}+{N}");
        if !in_bounds {
            self.oob_attempts.set(self.oob_attempts.get() + 1);
        }
        r
    }
    fn store(&mut self, off: usize, bytes: &[u8]) -> Option<()> {
        let r = self.inner.store(off, bytes);
        self.check(off, bytes.len(), r)
    }
    fn l3_csum_apply(&mut self, off: usize, diff: u32) -> Option<()> {
        let r = self.inner.l3_csum_apply(off, diff);
        self.check(off, 2, r)
    }
    fn l4_csum_apply(&mut self, off: usize, diff: u32, how: L4Csum) -> Option<()> {
        let r = self.inner.l4_csum_apply(off, diff, how);
        self.check(off, 2, r)
    }
    fn resize(&mut self, new_len: usize) -> Option<()> {
        assert!(new_len <= self.inner.len() + 128, "resize {new_len}");
        self.inner.resize(new_len)
    }
    fn for_other_host(&self) -> bool {
        self.inner.for_other_host()
    }
    fn ingress_link(&self) -> u32 {
        self.inner.ingress_link()
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

fn fold_ok(mut s: u32) -> bool {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

fn sum(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// Whether the IPv4 header and L4 checksums verify; `None` when the frame is
/// not a plain (untagged or tagged) IP + TCP/UDP/ICMP packet.
fn checksums_ok(f: &[u8]) -> Option<bool> {
    let mut l3 = 14;
    let mut et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    if et == 0x8100 {
        et = u16::from_be_bytes([*f.get(16)?, *f.get(17)?]);
        l3 = 18;
    }
    let (l4, l4_end, proto, pseudo) = match et {
        0x0800 => {
            let ihl = usize::from(f.get(l3)? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*f.get(l3 + 2)?, *f.get(l3 + 3)?]));
            let h = f.get(l3..l3 + ihl)?;
            if ihl < 20 || total < ihl || l3 + total > f.len() || h[6] & 0x3f != 0 || h[7] != 0 {
                return None;
            }
            if !fold_ok(sum(h)) {
                return Some(false);
            }
            let proto = h[9];
            let len = (total - ihl) as u32;
            (
                l3 + ihl,
                l3 + total,
                proto,
                sum(&h[12..20]) + u32::from(proto) + len,
            )
        }
        0x86dd => {
            let h = f.get(l3..l3 + 40)?;
            let pl = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if l3 + 40 + pl > f.len() {
                return None;
            }
            let proto = h[6];
            (
                l3 + 40,
                l3 + 40 + pl,
                proto,
                sum(&h[8..40]) + u32::from(proto) + pl as u32,
            )
        }
        _ => return None,
    };
    let seg = f.get(l4..l4_end)?;
    match proto {
        6 if seg.len() >= 20 => Some(fold_ok(pseudo + sum(seg))),
        17 if seg.len() >= 8 => {
            if et == 0x0800 && seg[6] == 0 && seg[7] == 0 {
                return Some(true);
            }
            Some(fold_ok(pseudo + sum(seg)))
        }
        1 if seg.len() >= 8 => Some(fold_ok(sum(seg))),
        58 if seg.len() >= 8 => Some(fold_ok(pseudo + sum(seg))),
        _ => None,
    }
}

fn base_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for v6 in [false, true] {
        let net = Net { v6 };
        for dst in [net.vip(), net.other()] {
            for flags in [
                TCP_SYN,
                TCP_ACK,
                TCP_ACK | TCP_PSH,
                TCP_FIN | TCP_ACK,
                TCP_RST,
            ] {
                out.push(tcp(
                    net,
                    net.client(),
                    40000,
                    dst,
                    80,
                    &seg(flags, 1, 1, b"payload"),
                ));
            }
            out.push(udp(net, net.client(), 41000, dst, 53, b"query"));
            out.push(udp(net, net.client(), 41000, dst, 53, &[]));
        }
        // Replies of translated flows, both policies.
        out.push(tcp(
            net,
            net.pod(1),
            8080,
            net.node(),
            33000,
            &seg(TCP_SYN | TCP_ACK, 1, 2, b""),
        ));
        out.push(tcp(
            net,
            net.pod(1),
            8080,
            net.client(),
            40000,
            &seg(TCP_ACK, 1, 2, b"x"),
        ));
        out.push(udp(net, net.pod(1), 5353, net.node(), 33000, b"answer"));
        let base = udp(net, net.client(), 41000, net.vip(), 53, &[7; 40]);
        out.push(vlan_tag(&base, 5));
        if v6 {
            out.push(ipv6_fragment(&base, true, 0));
            out.push(ipv6_fragment(&base, false, 3));
        } else {
            out.push(with_ipv4_options(&base));
            out.push(ipv4_fragment(&base, true, 0));
            out.push(ipv4_fragment(&base, false, 3));
            let mut z = base.clone();
            z[40] = 0;
            z[41] = 0;
            out.push(z);
        }
    }
    out
}

fn maps(kind: usize) -> HostMaps {
    let mut specs = Vec::new();
    for v6 in [false, true] {
        let net = Net { v6 };
        let (ready, term): (Vec<u16>, Vec<u16>) = match kind {
            0 => (vec![1, 2, 3], vec![4]),
            1 => (vec![], vec![4, 5]),
            _ => (vec![], vec![]),
        };
        for (proto, port, flags) in [
            (PROTO_TCP, 80, if kind == 0 { SVC_F_AFFINITY } else { 0 }),
            (PROTO_UDP, 53, SVC_F_LOCAL),
        ] {
            let mut s = spec(
                svc_key(net.vip(), port, proto),
                flags,
                ready.iter().map(|&n| ep(net.pod(n), 8080)).collect(),
                term.iter().map(|&n| ep(net.pod(n), 8080)).collect(),
            );
            s.affinity_timeout_s = 5;
            specs.push(s);
        }
    }
    let mut m = HostMaps::with_capacity(4096, 256);
    m.set_node(NodeConfig {
        addr4: Net { v6: false }.node(),
        addr6: Net { v6: true }.node(),
        snat_port_min: 33000,
        snat_port_max: 33063,
        _pad: 0,
    });
    m.replace_services(ServiceTables::build(&specs));
    m
}

fn mutate(rng: &mut Rng, f: &mut Vec<u8>) {
    match rng.below(8) {
        0 => f.truncate(rng.below(f.len() + 1)),
        1 => {
            let n = rng.below(64);
            for _ in 0..n {
                f.push(rng.next() as u8);
            }
        }
        2..=4 => {
            // Bit flips, mostly in the headers where they matter.
            for _ in 0..1 + rng.below(4) {
                let span = if rng.below(4) == 0 {
                    f.len()
                } else {
                    f.len().min(80)
                };
                if span > 0 {
                    let i = rng.below(span);
                    f[i] ^= 1 << rng.below(8);
                }
            }
        }
        5 => {
            // A random byte in a length / offset / flag field.
            let fields = [14, 16, 17, 18, 19, 20, 21, 23, 46, 47, 50, 52, 53, 58, 59];
            let i = fields[rng.below(fields.len())];
            if let Some(b) = f.get_mut(i) {
                *b = rng.next() as u8;
            }
        }
        6 => {
            let i = rng.below(f.len() + 1);
            let n = rng.below(9);
            let end = (i + n).min(f.len());
            f.drain(i..end);
        }
        _ => {}
    }
}

fn random_frame(rng: &mut Rng, f: &mut Vec<u8>) {
    f.clear();
    let n = rng.below(130);
    for _ in 0..n {
        f.push(rng.next() as u8);
    }
    // Mostly IP ethertypes: random bytes are almost never IP otherwise.
    if f.len() >= 15 && rng.below(4) != 0 {
        if rng.below(2) == 0 {
            f[12] = 0x08;
            f[13] = 0x00;
            f[14] = 0x45;
        } else {
            f[12] = 0x86;
            f[13] = 0xdd;
            f[14] = 0x60;
        }
    }
}

#[test]
fn random_and_mutated_frames() {
    let frames: u64 = std::env::var("FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_1234_abcd);
    let bases = base_frames();
    let mut rng = Rng(seed | 1);
    let mut envs: Vec<(HostMaps, TestClock)> = (0..3)
        .map(|k| (maps(k), TestClock::new(seed + k as u64)))
        .collect();
    let hooks = [
        Hook::WireIngress,
        Hook::WireIngress,
        Hook::WireEgress,
        Hook::FromPod,
    ];
    let mut buf = Vec::with_capacity(256);
    let mut events = [0u64; Event::COUNT];
    let (mut oob, mut checked) = (0u64, 0u64);
    let start = std::time::Instant::now();
    for i in 0..frames {
        if i % 4 == 0 {
            random_frame(&mut rng, &mut buf);
        } else {
            buf.clear();
            buf.extend_from_slice(&bases[rng.below(bases.len())]);
            for _ in 0..rng.below(3) {
                mutate(&mut rng, &mut buf);
            }
        }
        let before_ok = checksums_ok(&buf);
        let input_len = buf.len();
        let (maps, clock) = &mut envs[rng.below(3)];
        clock.advance_ns(rng.below(2_000_000_000) as u64);
        // A quarter run as CHECKSUM_PARTIAL (the other helper semantics),
        // for bounds and answers; validity is a complete packet's notion.
        let partial = rng.below(4) == 0;
        let mut p = Guarded {
            inner: VecPacket {
                data: std::mem::take(&mut buf),
                other_host: rng.below(8) == 0,
                csum_partial: partial,
                rebuilt: false,
                // No pod's link: at `FromPod` only frames without a
                // believable source go on (link-local, cut short);
                // the rest is dropped as spoofed, which is fuzzed too.
                ingress_link: 0,
            },
            oob_attempts: Default::default(),
            violations: 0,
        };
        let hook = hooks[rng.below(hooks.len())];
        let o = process(&mut p, maps, clock, hook);
        assert_eq!(p.violations, 0, "frame {i}");
        oob += p.oob_attempts.get();
        events[o.event.index()] += 1;
        buf = p.inner.into_inner();
        match o.event {
            Event::NewFlow | Event::Established | Event::ReplyNat => {
                assert_eq!(o.verdict, Verdict::Pass);
                assert_eq!(buf.len(), input_len);
                if let (Some(ok), false) = (before_ok, partial) {
                    checked += 1;
                    assert_eq!(checksums_ok(&buf), Some(ok), "frame {i}: validity changed");
                }
            }
            Event::Reset | Event::Unreachable => {
                checked += 1;
                assert_eq!(checksums_ok(&buf), Some(true), "frame {i}: built answer");
            }
            Event::NotIp | Event::Unhandled | Event::NotService => {
                assert_eq!(o.verdict, Verdict::Pass);
                assert_eq!(buf.len(), input_len);
            }
            Event::Fragment | Event::Malformed => assert_eq!(buf.len(), input_len),
            _ => {}
        }
    }
    let summary: Vec<String> = Event::ALL
        .iter()
        .map(|e| format!("{}={}", e.name(), events[e.index()]))
        .collect();
    eprintln!(
        "{frames} frames in {:?}; {oob} out-of-bounds attempts refused; {checked} checksum checks; {}",
        start.elapsed(),
        summary.join(" ")
    );
    // Every path was exercised.
    for e in [
        Event::NotIp,
        Event::NotService,
        Event::Malformed,
        Event::Fragment,
        Event::NewFlow,
        Event::Established,
        Event::ReplyNat,
        Event::Reset,
        Event::Unreachable,
        Event::Spoofed,
    ] {
        assert!(events[e.index()] > 0, "{} never seen", e.name());
    }
}
