//! The load balancer's program on crafted frames.
//!
//! Katran-style fixtures first: a table of (description, map state, input
//! frame) → expected verdict, event, backend and output frame, where the
//! output of a delivered frame is the input with only the two MAC addresses
//! changed. Then sequences: stickiness while backends come and go, the
//! health rules, "send to all", last-seen refresh, and how many flows move
//! when one backend of ten leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use etherparse::PacketBuilder;

use super::host::{HostLbMaps, LbBackendSpec, LbServiceSpec, LbTables, LbTablesError};
use super::maps::*;
use super::*;
use crate::host::{TestClock, VecPacket};
use crate::maps::v4_mapped;

const LB_MAC: [u8; 6] = [0x02, 0x1b, 0, 0, 0, 0x01];
const CLIENT_MAC: [u8; 6] = [0x02, 0xc1, 0, 0, 0, 0x01];
const OTHER_MAC: [u8; 6] = [0x02, 0x99, 0, 0, 0, 0x01];

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_ACK: u8 = 0x10;

fn v6(last: u16) -> Addr {
    let mut a = [0u8; 16];
    a[0] = 0x20;
    a[1] = 0x01;
    a[2] = 0x0d;
    a[3] = 0xb8;
    a[14] = (last >> 8) as u8;
    a[15] = last as u8;
    a
}

#[derive(Clone, Copy)]
struct Fam {
    v6: bool,
}

const V4: Fam = Fam { v6: false };
const V6: Fam = Fam { v6: true };

impl Fam {
    fn vip(&self, n: u8) -> Addr {
        if self.v6 {
            v6(0x1000 + u16::from(n))
        } else {
            v4_mapped([198, 51, 100, n])
        }
    }
    fn client(&self, n: u16) -> Addr {
        if self.v6 {
            v6(0x2000 + n)
        } else {
            v4_mapped([203, 0, (n >> 8) as u8, n as u8])
        }
    }
    /// The load balancer's own address.
    fn lb(&self) -> Addr {
        if self.v6 {
            v6(1)
        } else {
            v4_mapped([192, 0, 2, 1])
        }
    }
    fn node(&self, n: u8) -> Addr {
        if self.v6 {
            v6(0x100 + u16::from(n))
        } else {
            v4_mapped([192, 0, 2, 100 + n])
        }
    }
}

fn is_v6(a: &Addr) -> bool {
    a[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
}

fn v4(a: &Addr) -> [u8; 4] {
    [a[12], a[13], a[14], a[15]]
}

fn builder(
    dst_mac: [u8; 6],
    src: &Addr,
    dst: &Addr,
) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, dst_mac);
    if is_v6(src) {
        b.ipv6(*src, *dst, 64)
    } else {
        b.ipv4(v4(src), v4(dst), 64)
    }
}

fn tcp_to(dst_mac: [u8; 6], src: Addr, sport: u16, dst: Addr, dport: u16, flags: u8) -> Vec<u8> {
    let mut b = builder(dst_mac, &src, &dst).tcp(sport, dport, 1000, 64240);
    if flags & TCP_SYN != 0 {
        b = b.syn();
    }
    if flags & TCP_ACK != 0 {
        b = b.ack(1);
    }
    if flags & TCP_FIN != 0 {
        b = b.fin();
    }
    let mut out = Vec::new();
    b.write(&mut out, b"payload").unwrap();
    out
}

fn tcp(src: Addr, sport: u16, dst: Addr, dport: u16, flags: u8) -> Vec<u8> {
    tcp_to(LB_MAC, src, sport, dst, dport, flags)
}

fn udp(src: Addr, sport: u16, dst: Addr, dport: u16) -> Vec<u8> {
    let mut out = Vec::new();
    builder(LB_MAC, &src, &dst)
        .udp(sport, dport)
        .write(&mut out, b"query")
        .unwrap();
    out
}

fn icmp_echo(src: Addr, dst: Addr) -> Vec<u8> {
    let mut out = Vec::new();
    let b = builder(LB_MAC, &src, &dst);
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

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT_MAC);
    f.extend_from_slice(&[203, 0, 0, 1, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1]);
    f
}

fn ipv4_header_csum(h: &mut [u8]) {
    h[10] = 0;
    h[11] = 0;
    let mut s = 0u32;
    for c in h[..20].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    h[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

/// An IPv4 frame turned into a fragment (`mf`, offset in 8-byte units).
fn v4_fragment(mut f: Vec<u8>, mf: bool, offset: u16) -> Vec<u8> {
    let v = offset | if mf { 0x2000 } else { 0 };
    f[20..22].copy_from_slice(&v.to_be_bytes());
    ipv4_header_csum(&mut f[14..34]);
    f
}

/// An IPv6 frame with a fragment header inserted after the fixed header.
fn v6_fragment(f: &[u8], offset: u16, mf: bool) -> Vec<u8> {
    let next = f[20];
    let mut ext = [next, 0, 0, 0, 0, 0, 0, 7];
    ext[2..4].copy_from_slice(&((offset << 3) | u16::from(mf)).to_be_bytes());
    let mut out = f[..54].to_vec();
    out[20] = 44;
    let pl = u16::from_be_bytes([out[18], out[19]]) + 8;
    out[18..20].copy_from_slice(&pl.to_be_bytes());
    out.extend_from_slice(&ext);
    out.extend_from_slice(&f[54..]);
    out
}

fn vlan(f: &[u8], id: u16) -> Vec<u8> {
    let mut out = f[..12].to_vec();
    out.extend_from_slice(&0x8100u16.to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&f[12..]);
    out
}

fn with_dst_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[..6].copy_from_slice(&mac);
    f
}

// ---------------------------------------------------------------------------
// Map state

fn mac_of(id: u32) -> [u8; 6] {
    [0x02, 0x4e, 0, 0, (id >> 8) as u8, id as u8]
}

fn backend(id: u32, node: u8, healthy: bool) -> LbBackendSpec {
    LbBackendSpec {
        id,
        addr: V4.node(node),
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

const WEB: u32 = 0x11;
const ALL_SICK: u32 = 0x22;
const EMPTY: u32 = 0x33;

/// Service `WEB`: TCP 80 and UDP 53 on VIP 10 of both families, backends
/// 11, 12, 13 (healthy). `ALL_SICK`: TCP 443 on VIP 20, backends 21, 22,
/// both unhealthy. `EMPTY`: TCP 80 on VIP 30, no backend.
fn services() -> Vec<LbServiceSpec> {
    let mut web_fes = Vec::new();
    for f in [V4, V6] {
        web_fes.push(fe(f.vip(10), 80, PROTO_TCP));
        web_fes.push(fe(f.vip(10), 53, PROTO_UDP));
    }
    vec![
        LbServiceSpec {
            id: WEB,
            frontends: web_fes,
            backends: vec![
                backend(11, 1, true),
                backend(12, 2, true),
                backend(13, 3, true),
            ],
        },
        LbServiceSpec {
            id: ALL_SICK,
            frontends: vec![fe(V4.vip(20), 443, PROTO_TCP)],
            backends: vec![backend(21, 1, false), backend(22, 2, false)],
        },
        LbServiceSpec {
            id: EMPTY,
            frontends: vec![fe(V4.vip(30), 80, PROTO_TCP)],
            backends: vec![],
        },
    ]
}

fn config() -> LbConfig {
    LbConfig {
        mac: LB_MAC,
        _pad: [0; 2],
        ifindex: 7,
    }
}

struct Lb {
    maps: HostLbMaps,
    clock: TestClock,
}

impl Lb {
    fn new(services: &[LbServiceSpec]) -> Lb {
        let mut maps = HostLbMaps::new();
        maps.set_config(config());
        maps.replace_tables(Arc::new(LbTables::build(services).unwrap()));
        Lb {
            maps,
            clock: TestClock::default(),
        }
    }

    fn apply(&mut self, services: &[LbServiceSpec]) {
        self.maps
            .replace_tables(Arc::new(LbTables::build(services).unwrap()));
    }

    fn run(&mut self, frame: &[u8]) -> (LbOutcome, Vec<u8>) {
        let mut p = VecPacket::new(frame.to_vec());
        let o = process_lb(&mut p, &mut self.maps, &self.clock);
        (o, p.data)
    }

    /// The backend a frame is delivered to (panics otherwise).
    fn to(&mut self, frame: &[u8]) -> (u32, LbEvent) {
        let (o, out) = self.run(frame);
        assert_eq!(o.verdict, LbVerdict::Tx, "{o:?}");
        assert_delivered(frame, &out, o.backend);
        (o.backend, o.event)
    }
}

/// Only the MACs changed: destination the backend's, source ours.
fn assert_delivered(input: &[u8], output: &[u8], backend: u32) {
    assert_eq!(output.len(), input.len());
    assert_eq!(&output[..6], &mac_of(backend), "destination MAC");
    assert_eq!(&output[6..12], &LB_MAC, "source MAC");
    assert_eq!(
        &output[12..],
        &input[12..],
        "everything after the MACs unchanged"
    );
}

// ---------------------------------------------------------------------------
// Fixtures

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Delivered to one of these backends, with this event.
    Tx(&'static [u32], LbEvent),
    Pass(LbEvent),
    Drop(LbEvent),
}

struct Fixture {
    what: &'static str,
    frame: Vec<u8>,
    expect: Expect,
}

fn fx(what: &'static str, frame: Vec<u8>, expect: Expect) -> Fixture {
    Fixture {
        what,
        frame,
        expect,
    }
}

const WEB_BACKENDS: &[u32] = &[11, 12, 13];
const SICK_BACKENDS: &[u32] = &[21, 22];

fn fixtures() -> Vec<Fixture> {
    use Expect::*;
    use LbEvent::*;
    let mut v = Vec::new();
    for f in [V4, V6] {
        let c = f.client(1);
        let vip = f.vip(10);
        v.push(fx(
            "TCP SYN to a frontend",
            tcp(c, 40000, vip, 80, TCP_SYN),
            Tx(WEB_BACKENDS, NewFlow),
        ));
        v.push(fx(
            "TCP data without an entry (another load balancer's flow)",
            tcp(c, 40001, vip, 80, TCP_ACK),
            Tx(WEB_BACKENDS, NewFlow),
        ));
        v.push(fx(
            "UDP to a frontend",
            udp(c, 5000, vip, 53),
            Tx(WEB_BACKENDS, NewFlow),
        ));
        v.push(fx(
            "VLAN-tagged TCP",
            vlan(&tcp(c, 40002, vip, 80, TCP_SYN), 42),
            Tx(WEB_BACKENDS, NewFlow),
        ));
        v.push(fx(
            "TCP to the load balancer itself",
            tcp(c, 40000, f.lb(), 22, TCP_SYN),
            Pass(NotVip),
        ));
        v.push(fx(
            "UDP to a node",
            udp(c, 5000, f.node(1), 53),
            Pass(NotVip),
        ));
        v.push(fx(
            "ICMP echo to the load balancer",
            icmp_echo(c, f.lb()),
            Pass(NotVip),
        ));
        v.push(fx(
            "TCP to a VIP port without frontend",
            tcp(c, 40000, vip, 81, TCP_SYN),
            Drop(NotFrontend),
        ));
        v.push(fx(
            "UDP to the TCP frontend's port",
            udp(c, 5000, vip, 80),
            Drop(NotFrontend),
        ));
        v.push(fx(
            "ICMP echo to a VIP",
            icmp_echo(c, vip),
            Drop(NotFrontend),
        ));
        let full = tcp(c, 40003, vip, 80, TCP_ACK);
        v.push(fx(
            "TCP cut inside its header",
            full[..full.len() - 20].to_vec(),
            Drop(Malformed),
        ));
        let ip_end = if f.v6 { 14 + 40 } else { 14 + 20 };
        v.push(fx(
            "cut inside the IP header",
            full[..ip_end - 4].to_vec(),
            Pass(NotVip),
        ));
        v.push(fx(
            "VIP frame to another MAC",
            with_dst_mac(tcp(c, 40004, vip, 80, TCP_SYN), OTHER_MAC),
            Drop(NotForUs),
        ));
        v.push(fx(
            "VIP frame to the broadcast MAC",
            with_dst_mac(udp(c, 5001, vip, 53), [0xff; 6]),
            Drop(NotForUs),
        ));
        let dgram = udp(c, 5002, vip, 53);
        let other = udp(c, 5002, f.node(1), 53);
        if f.v6 {
            v.push(fx(
                "first fragment to a VIP",
                v6_fragment(&dgram, 0, true),
                Drop(Fragment),
            ));
            v.push(fx(
                "non-first fragment to a VIP",
                v6_fragment(&dgram, 8, false),
                Drop(Fragment),
            ));
            v.push(fx(
                "fragment to a node",
                v6_fragment(&other, 8, false),
                Pass(NotVip),
            ));
        } else {
            v.push(fx(
                "first fragment to a VIP",
                v4_fragment(dgram.clone(), true, 0),
                Drop(Fragment),
            ));
            v.push(fx(
                "non-first fragment to a VIP",
                v4_fragment(dgram, false, 8),
                Drop(Fragment),
            ));
            v.push(fx(
                "fragment to a node",
                v4_fragment(other, false, 8),
                Pass(NotVip),
            ));
        }
    }
    let c = V4.client(1);
    v.push(fx(
        "every backend unhealthy: sent to all",
        tcp(c, 40000, V4.vip(20), 443, TCP_SYN),
        Tx(SICK_BACKENDS, NewFlow),
    ));
    v.push(fx(
        "no backend",
        tcp(c, 40000, V4.vip(30), 80, TCP_SYN),
        Drop(NoBackend),
    ));
    v.push(fx("ARP", arp(), Pass(NotIp)));
    v.push(fx(
        "Ethernet header only",
        arp()[..14].to_vec(),
        Pass(NotIp),
    ));
    v.push(fx("empty frame", Vec::new(), Pass(NotIp)));
    v
}

#[test]
fn fixtures_give_the_expected_frames() {
    let mut failures = Vec::new();
    for (i, f) in fixtures().into_iter().enumerate() {
        // Each frame on fresh maps: the fixture is the whole state.
        let mut lb = Lb::new(&services());
        let (o, out) = lb.run(&f.frame);
        let ok = match f.expect {
            Expect::Tx(allowed, event) => {
                o.verdict == LbVerdict::Tx
                    && o.event == event
                    && allowed.contains(&o.backend)
                    && out.len() == f.frame.len()
                    && out[..6] == mac_of(o.backend)
                    && out[6..12] == LB_MAC
                    && out[12..] == f.frame[12..]
            }
            Expect::Pass(event) => {
                o.verdict == LbVerdict::Pass && o.event == event && out == f.frame
            }
            Expect::Drop(event) => {
                o.verdict == LbVerdict::Drop && o.event == event && out == f.frame
            }
        };
        if !ok {
            failures.push(format!(
                "#{i} {}: expected {:?}, got {o:?}",
                f.what, f.expect
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vip_frames_are_dropped_before_configuration() {
    let mut lb = Lb::new(&services());
    lb.maps.set_config(LbConfig::default());
    let (o, _) = lb.run(&tcp(V4.client(1), 40000, V4.vip(10), 80, TCP_SYN));
    assert_eq!((o.verdict, o.event), (LbVerdict::Drop, LbEvent::NoConfig));
    let (o, _) = lb.run(&tcp(V4.client(1), 40000, V4.lb(), 22, TCP_SYN));
    assert_eq!(
        o.verdict,
        LbVerdict::Pass,
        "the load balancer's own traffic still passes"
    );
}

#[test]
fn nothing_configured_passes_everything() {
    let mut lb = Lb::new(&[]);
    for f in [
        tcp(V4.client(1), 40000, V4.vip(10), 80, TCP_SYN),
        udp(V6.client(1), 5000, V6.vip(10), 53),
    ] {
        let (o, out) = lb.run(&f);
        assert_eq!((o.verdict, o.event), (LbVerdict::Pass, LbEvent::NotVip));
        assert_eq!(out, f);
    }
}

// ---------------------------------------------------------------------------
// Sequences

/// `n` TCP flows from distinct clients and ports of `fam` to WEB's TCP 80.
fn flows(fam: Fam, n: u16) -> Vec<(Addr, u16)> {
    (0..n)
        .map(|i| (fam.client(1 + i % 97), 10_000 + i))
        .collect()
}

fn web(backends: Vec<LbBackendSpec>) -> Vec<LbServiceSpec> {
    let mut s = services();
    s[0].backends = backends;
    s
}

#[test]
fn established_flows_stay_while_backends_come_and_go() {
    for fam in [V4, V6] {
        let mut lb = Lb::new(&services());
        let vip = fam.vip(10);
        let fl = flows(fam, 300);
        let first: Vec<u32> = fl
            .iter()
            .map(|&(c, p)| lb.to(&tcp(c, p, vip, 80, TCP_SYN)).0)
            .collect();
        let used: BTreeSet<u32> = first.iter().copied().collect();
        assert_eq!(used.len(), 3, "300 flows spread over the three backends");

        // A fourth backend joins: no established flow moves.
        lb.apply(&web(vec![
            backend(11, 1, true),
            backend(12, 2, true),
            backend(13, 3, true),
            backend(14, 4, true),
        ]));
        for (&(c, p), &b) in fl.iter().zip(&first) {
            assert_eq!(
                lb.to(&tcp(c, p, vip, 80, TCP_ACK)),
                (b, LbEvent::Established)
            );
        }
        // New flows do reach the newcomer.
        let newcomer = (0..200u16)
            .filter(|i| lb.to(&tcp(fam.client(500), 30_000 + i, vip, 80, TCP_SYN)).0 == 14)
            .count();
        assert!(
            newcomer > 20,
            "the new backend takes new flows ({newcomer} of 200)"
        );

        // Backend 12 leaves: its flows are chosen again, the others stay.
        lb.apply(&web(vec![
            backend(11, 1, true),
            backend(13, 3, true),
            backend(14, 4, true),
        ]));
        for (&(c, p), &b) in fl.iter().zip(&first) {
            let (now, ev) = lb.to(&tcp(c, p, vip, 80, TCP_ACK));
            if b == 12 {
                assert_eq!(ev, LbEvent::Rechosen);
                assert_ne!(now, 12);
            } else {
                assert_eq!((now, ev), (b, LbEvent::Established));
            }
        }
    }
}

#[test]
fn tcp_stays_on_an_unhealthy_backend_new_connections_avoid_it() {
    let mut lb = Lb::new(&services());
    let vip = V4.vip(10);
    let fl = flows(V4, 120);
    let first: Vec<u32> = fl
        .iter()
        .map(|&(c, p)| lb.to(&tcp(c, p, vip, 80, TCP_SYN)).0)
        .collect();
    lb.apply(&web(vec![
        backend(11, 1, true),
        backend(12, 2, false),
        backend(13, 3, true),
    ]));
    for (&(c, p), &b) in fl.iter().zip(&first) {
        // The connection goes on where it was, 12 included.
        assert_eq!(
            lb.to(&tcp(c, p, vip, 80, TCP_ACK)),
            (b, LbEvent::Established)
        );
        assert_eq!(lb.to(&tcp(c, p, vip, 80, TCP_ACK | TCP_FIN)).0, b);
        // A new connection on the same tuple (a pure SYN) avoids 12.
        let (now, ev) = lb.to(&tcp(c, p, vip, 80, TCP_SYN));
        if b == 12 {
            assert_eq!(ev, LbEvent::Rechosen);
            assert_ne!(now, 12);
        } else {
            assert_eq!(
                (now, ev),
                (b, LbEvent::Established),
                "a SYN to a healthy backend stays"
            );
        }
    }
    for i in 0..300u16 {
        let (b, _) = lb.to(&tcp(V4.client(700), 20_000 + i, vip, 80, TCP_SYN));
        assert_ne!(b, 12, "no new connection goes to the unhealthy backend");
    }
}

#[test]
fn udp_moves_off_an_unhealthy_backend_unless_none_is_healthy() {
    let mut lb = Lb::new(&services());
    let vip = V6.vip(10);
    let fl = flows(V6, 120);
    let first: Vec<u32> = fl
        .iter()
        .map(|&(c, p)| lb.to(&udp(c, p, vip, 53)).0)
        .collect();
    assert!(first.contains(&13));
    lb.apply(&web(vec![
        backend(11, 1, true),
        backend(12, 2, true),
        backend(13, 3, false),
    ]));
    let mut second = Vec::new();
    for (&(c, p), &b) in fl.iter().zip(&first) {
        let (now, ev) = lb.to(&udp(c, p, vip, 53));
        if b == 13 {
            assert_eq!(ev, LbEvent::Rechosen);
            assert_ne!(now, 13);
        } else {
            assert_eq!((now, ev), (b, LbEvent::Established));
        }
        second.push(now);
    }
    // Nothing healthy: flows stay where they are (no churn among the sick).
    lb.apply(&web(vec![
        backend(11, 1, false),
        backend(12, 2, false),
        backend(13, 3, false),
    ]));
    for (&(c, p), &b) in fl.iter().zip(&second) {
        assert_eq!(lb.to(&udp(c, p, vip, 53)), (b, LbEvent::Established));
    }
}

#[test]
fn none_healthy_spreads_over_all() {
    let mut lb = Lb::new(&web(vec![
        backend(11, 1, false),
        backend(12, 2, false),
        backend(13, 3, false),
    ]));
    let mut seen = BTreeMap::new();
    for (c, p) in flows(V4, 300) {
        *seen
            .entry(lb.to(&tcp(c, p, V4.vip(10), 80, TCP_SYN)).0)
            .or_insert(0) += 1;
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        vec![11, 12, 13],
        "{seen:?}"
    );
    // One recovers: new flows go to it alone.
    lb.apply(&web(vec![
        backend(11, 1, false),
        backend(12, 2, true),
        backend(13, 3, false),
    ]));
    for i in 0..100u16 {
        assert_eq!(
            lb.to(&tcp(V4.client(900), 50_000 + i, V4.vip(10), 80, TCP_SYN))
                .0,
            12
        );
    }
}

#[test]
fn entries_naming_removed_or_foreign_backends_are_chosen_again() {
    let mut lb = Lb::new(&services());
    let (c, vip) = (V4.client(1), V4.vip(10));
    let key = |sport| FlowKey {
        saddr: c,
        daddr: vip,
        sport,
        dport: 80,
        proto: PROTO_TCP,
        _pad: [0; 3],
    };
    let entry = |backend| FlowValue {
        backend,
        _pad: 0,
        last_seen_ns: 0,
    };
    // An id nobody has (a backend removed long ago).
    lb.maps.flow_put(&key(1111), &entry(99));
    let (b, ev) = lb.to(&tcp(c, 1111, vip, 80, TCP_ACK));
    assert_eq!(ev, LbEvent::Rechosen);
    assert!(WEB_BACKENDS.contains(&b));
    assert_eq!(
        lb.maps.flow_get(&key(1111)).unwrap().backend,
        b,
        "the entry now names it"
    );
    // A backend of another Service.
    lb.maps.flow_put(&key(2222), &entry(21));
    let (b, ev) = lb.to(&tcp(c, 2222, vip, 80, TCP_ACK));
    assert_eq!(ev, LbEvent::Rechosen);
    assert!(WEB_BACKENDS.contains(&b));
    // A backend that lost its MAC (neighbour entry gone).
    let (b, _) = lb.to(&tcp(c, 3333, vip, 80, TCP_SYN));
    let mut s = services();
    s[0].backends.iter_mut().find(|x| x.id == b).unwrap().mac = [0; 6];
    lb.apply(&s);
    let (now, ev) = lb.to(&tcp(c, 3333, vip, 80, TCP_ACK));
    assert_eq!(ev, LbEvent::Rechosen);
    assert_ne!(now, b);
}

#[test]
fn last_seen_is_refreshed_at_most_once_a_second() {
    let mut lb = Lb::new(&services());
    let (c, vip) = (V4.client(1), V4.vip(10));
    let key = FlowKey {
        saddr: c,
        daddr: vip,
        sport: 4242,
        dport: 80,
        proto: PROTO_TCP,
        _pad: [0; 3],
    };
    let t0 = lb.clock.now;
    lb.to(&tcp(c, 4242, vip, 80, TCP_SYN));
    assert_eq!(lb.maps.flow_get(&key).unwrap().last_seen_ns, t0);
    lb.clock.advance_ns(600_000_000);
    lb.to(&tcp(c, 4242, vip, 80, TCP_ACK));
    assert_eq!(
        lb.maps.flow_get(&key).unwrap().last_seen_ns,
        t0,
        "not rewritten within a second"
    );
    lb.clock.advance_ns(600_000_000);
    lb.to(&tcp(c, 4242, vip, 80, TCP_ACK));
    assert_eq!(
        lb.maps.flow_get(&key).unwrap().last_seen_ns,
        t0 + 1_200_000_000
    );
}

/// Backends 1..=n of one Service on VIP 10 TCP 80.
fn n_backends(ids: impl IntoIterator<Item = u32>) -> Vec<LbServiceSpec> {
    web(ids
        .into_iter()
        .map(|i| backend(100 + i, i as u8, true))
        .collect())
}

/// The backend of each of `n` flows, as SYNs on fresh maps (pure Maglev).
fn maglev_choices(services: &[LbServiceSpec], n: u16) -> Vec<u32> {
    let mut lb = Lb::new(services);
    flows(V4, n)
        .into_iter()
        .map(|(c, p)| lb.to(&tcp(c, p, V4.vip(10), 80, TCP_SYN)).0)
        .collect()
}

#[test]
fn one_backend_of_ten_leaving_moves_only_its_flows() {
    const N: u16 = 20_000;
    let ten = n_backends(1..=10);
    let nine = n_backends((1..=10).filter(|&i| i != 4));
    // With the flow table: established flows.
    let mut lb = Lb::new(&ten);
    let fl = flows(V4, N);
    let before: Vec<u32> = fl
        .iter()
        .map(|&(c, p)| lb.to(&tcp(c, p, V4.vip(10), 80, TCP_SYN)).0)
        .collect();
    lb.apply(&nine);
    let mut moved = 0;
    for (&(c, p), &b) in fl.iter().zip(&before) {
        let now = lb.to(&tcp(c, p, V4.vip(10), 80, TCP_ACK)).0;
        if now != b {
            assert_eq!(b, 104, "only the leaving backend's flows move");
            moved += 1;
        } else {
            assert_ne!(b, 104);
        }
    }
    let frac = moved as f64 / f64::from(N);
    assert!(
        (0.07..0.13).contains(&frac),
        "moved {frac:.4} of the flows, expected about 1/10"
    );

    // Without it (new flows only): Maglev alone moves the leaving backend's
    // share and a little more.
    let a = maglev_choices(&ten, N);
    let b = maglev_choices(&nine, N);
    let changed = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    let survivors_moved = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x != y && **x != 104)
        .count();
    assert!(
        (changed as f64 / f64::from(N)) < 0.16,
        "Maglev moved {changed} of {N}"
    );
    assert!(
        (survivors_moved as f64 / f64::from(N)) < 0.05,
        "Maglev moved {survivors_moved} flows of surviving backends"
    );
}

#[test]
fn tables_do_not_depend_on_backend_order() {
    let a = n_backends(1..=7);
    let mut b = a.clone();
    b[0].backends.reverse();
    assert_eq!(LbTables::build(&a).unwrap(), LbTables::build(&b).unwrap());
}

#[test]
fn tables_lay_out_windows_on_chunk_boundaries_with_markers() {
    let t = LbTables::build(&services()).unwrap();
    let web = t.frontends[&fe(V4.vip(10), 80, PROTO_TCP)];
    assert_eq!(web.maglev_base % MAGLEV_CHUNK, 0);
    assert_eq!((web.backends, web.healthy, web.maglev_size), (3, 3, 509));
    let sick = t.frontends[&fe(V4.vip(20), 443, PROTO_TCP)];
    assert_eq!(sick.maglev_base % MAGLEV_CHUNK, 0);
    assert_eq!((sick.backends, sick.healthy, sick.maglev_size), (2, 0, 251));
    assert_eq!(t.frontends[&fe(V4.vip(30), 80, PROTO_TCP)].maglev_size, 0);
    for f in [V4, V6] {
        assert_eq!(t.frontends[&vip_marker(&f.vip(10))].flags, FE_F_MARKER);
    }
    assert_eq!(t.maglev.len() % MAGLEV_CHUNK as usize, 0);
    // Every entry of a window names one of its Service's backends.
    for e in &t.maglev[web.maglev_base as usize..][..web.maglev_size as usize] {
        assert!(WEB_BACKENDS.contains(e));
    }
}

#[test]
fn tables_refuse_conflicts() {
    let mut s = services();
    s[1].frontends.push(fe(V4.vip(10), 80, PROTO_TCP));
    assert_eq!(
        LbTables::build(&s),
        Err(LbTablesError::DuplicateFrontend(fe(
            V4.vip(10),
            80,
            PROTO_TCP
        )))
    );
    let mut s = services();
    s[1].backends.push(backend(11, 9, true));
    assert_eq!(
        LbTables::build(&s),
        Err(LbTablesError::DuplicateBackend(11))
    );
    let mut s = services();
    s[2].frontends.push(fe(V4.vip(30), 0, PROTO_TCP));
    assert!(matches!(
        LbTables::build(&s),
        Err(LbTablesError::BadFrontend(_))
    ));
    let e = LbTables::build(&{
        let mut s = services();
        s[1].frontends.push(fe(V4.vip(10), 80, PROTO_TCP));
        s
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "two Services claim the frontend 198.51.100.10 port 80 TCP"
    );
}
