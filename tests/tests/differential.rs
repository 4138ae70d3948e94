//! The kernel build of the packet program against the host build.
//!
//! One corpus of frames, generated here, runs through both: the three TC
//! programs of the release object loaded into the kernel and run with
//! `BPF_PROG_TEST_RUN`, and `sluice_datapath::process` over `HostMaps` and a
//! `VecPacket`. Both start from the same `ServiceTables` and node config.
//! Per frame the verdict, the output bytes and the event (the kernel's
//! per-CPU event counters) must be identical; at checkpoints and at the end,
//! so must the conntrack and affinity maps (time fields within a tolerance:
//! the host clock is `CLOCK_MONOTONIC`, which is what `bpf_ktime_get_ns`
//! reads, and each frame runs in the kernel and then on the host at once).
//!
//! Stateful sequences (replies, TCP state changes) are built from the
//! previous frame's translated output, so the corpus follows what the
//! program chose. Nothing is pinned and nothing is attached.
//!
//! Needs root (BPF) and the object: `cargo xtask build-ebpf --release`.

use std::collections::{BTreeMap, HashMap as StdHashMap};
use std::path::PathBuf;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::SchedClassifier;
use aya::{Ebpf, EbpfLoader, Pod};
use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use sluice_datapath::env::Clock;
use sluice_datapath::host::offload::{self, Intake, VnetHdr};
use sluice_datapath::host::{HostMaps, ServiceSpec, ServiceTables, VecPacket};
use sluice_datapath::maps::{
    v4_mapped, Addr, AffinityKey, AffinityValue, CtKey, CtValue, Endpoint, LocalKey, LocalLink,
    MaglevChunk, NodeConfig, ServiceKey, ServiceValue, SnatExhaustKey, MAGLEV_CHUNK, MAP_AFFINITY,
    MAP_CT, MAP_ENDPOINTS, MAP_EVENTS, MAP_LOCAL, MAP_MAGLEV, MAP_NODE, MAP_SERVICES,
    MAP_SNAT_EXHAUSTED, PROTO_TCP, PROTO_UDP, SVC_F_AFFINITY, SVC_F_LOCAL,
};
use sluice_datapath::{process, Event, Hook, Verdict};

const PROGRAMS: [(&str, Hook); 3] = [
    ("sluice_wire_ingress", Hook::WireIngress),
    ("sluice_wire_egress", Hook::WireEgress),
    ("sluice_from_pod", Hook::FromPod),
];

const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;
/// What `bpf_redirect_peer` returns (as `bpf_redirect` does); the test
/// run does not carry the redirect out, so the ifindex is not seen (it
/// comes from the same map value as the host's): verdicts are compared by
/// kind.
const TC_ACT_REDIRECT: u32 = 7;

/// Time fields may differ by the gap between the kernel run and the host
/// run of the same frame (microseconds); this is far below any timeout
/// class (10 s apart at least).
const TIME_TOLERANCE_NS: u64 = 200_000_000;

const SNAT_MIN: u16 = 61000;
const SNAT_MAX: u16 = 65535;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;

fn object() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace root")
        .join("target/bpf/bpfel-unknown-none/release/sluice")
}

/// Map keys and values as aya wants them.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
struct P<T>(T);
// SAFETY: `#[repr(C)]` plain old data with explicit padding (sluice_datapath::maps).
unsafe impl Pod for P<ServiceKey> {}
// SAFETY: as above.
unsafe impl Pod for P<ServiceValue> {}
// SAFETY: as above.
unsafe impl Pod for P<Endpoint> {}
// SAFETY: as above.
unsafe impl Pod for P<NodeConfig> {}
// SAFETY: as above.
unsafe impl Pod for P<CtKey> {}
// SAFETY: as above.
unsafe impl Pod for P<CtValue> {}
// SAFETY: as above.
unsafe impl Pod for P<AffinityKey> {}
// SAFETY: as above.
unsafe impl Pod for P<AffinityValue> {}
// SAFETY: as above.
unsafe impl Pod for P<LocalKey> {}
// SAFETY: as above.
unsafe impl Pod for P<SnatExhaustKey> {}
// SAFETY: as above.
unsafe impl Pod for P<LocalLink> {}

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
        assert_eq!(r, 0, "clock_gettime");
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

fn load() -> Ebpf {
    let path = object();
    assert!(
        path.exists(),
        "{} is missing: run `cargo xtask build-ebpf --release` first \
         (`cargo xtask test` does it)",
        path.display()
    );
    let mut bpf = EbpfLoader::new()
        .load_file(&path)
        .unwrap_or_else(|e| panic!("loading {} (needs root): {e}", path.display()));
    for (name, _) in PROGRAMS {
        let prog: &mut SchedClassifier = bpf
            .program_mut(name)
            .unwrap_or_else(|| panic!("{name} is not in the object"))
            .try_into()
            .unwrap_or_else(|e| panic!("{name} is not a classifier: {e}"));
        if let Err(e) = prog.load() {
            // The verifier log is in the error; keep its end, where the
            // reason is.
            let msg = format!("{e}");
            let tail = &msg[msg.len().saturating_sub(8000)..];
            panic!("the verifier rejected {name}:\n{tail}");
        }
    }
    bpf
}

/// The verifier accepts all three programs (also part of the differential
/// run; here on its own for a clear signal).
#[test]
fn verifier_accepts_all_programs() {
    let bpf = load();
    for (name, _) in PROGRAMS {
        let prog: &SchedClassifier = bpf.program(name).unwrap().try_into().unwrap();
        let info = prog.info().expect("program info");
        println!(
            "{name}: loaded; the verifier processed {} instructions (limit 1 000 000), \
             {} bytes translated",
            info.verified_instruction_count().unwrap_or(0),
            info.size_translated().unwrap_or(0)
        );
    }
}

// ---------------------------------------------------------------------------
// Addresses and services

#[derive(Clone, Copy, Debug)]
struct Net {
    v6: bool,
}

impl Net {
    fn addr(&self, host: u16) -> Addr {
        if self.v6 {
            let mut a = [0u8; 16];
            a[0] = 0xfd;
            a[1] = 0x18;
            a[14] = (host >> 8) as u8;
            a[15] = host as u8;
            a
        } else {
            v4_mapped([198, 18, (host >> 8) as u8, host as u8])
        }
    }
    fn vip(&self) -> Addr {
        if self.v6 {
            let mut a = self.addr(100);
            a[1] = 0x19;
            a
        } else {
            v4_mapped([198, 19, 0, 100])
        }
    }
    fn node(&self) -> Addr {
        self.addr(2)
    }
    fn client(&self, n: u16) -> Addr {
        self.addr(0x100 + n)
    }
    fn pod(&self, n: u16) -> Addr {
        self.addr(0xa00 + n)
    }
    fn other(&self) -> Addr {
        self.addr(0x50)
    }
    fn tag(&self) -> &'static str {
        if self.v6 {
            "v6"
        } else {
            "v4"
        }
    }
}

const PORT_CLUSTER: u16 = 80;
const PORT_LOCAL: u16 = 81;
const PORT_AFFINITY: u16 = 82;
const PORT_TERMINATING: u16 = 83;
const PORT_READY_FIRST: u16 = 84;
const PORT_NONE: u16 = 85;
const PORT_BAD_FAMILY: u16 = 86;
const PORT_UDP: u16 = 53;
const PORT_UDP_LOCAL: u16 = 54;
const PORT_UDP_NONE: u16 = 55;
const PORT_UDP_AFFINITY: u16 = 56;
const TARGET: u16 = 8080;

fn ep(addr: Addr, port: u16) -> Endpoint {
    Endpoint {
        addr,
        port,
        flags: 0,
        _pad: 0,
    }
}

fn spec(
    net: Net,
    port: u16,
    proto: u8,
    flags: u32,
    ready: &[u16],
    terminating: &[u16],
) -> ServiceSpec {
    ServiceSpec {
        key: ServiceKey {
            addr: net.vip(),
            port,
            proto,
            _pad: 0,
        },
        id: 0,
        flags,
        affinity_timeout_s: if flags & SVC_F_AFFINITY != 0 {
            10_800
        } else {
            0
        },
        ready: ready.iter().map(|&n| ep(net.pod(n), TARGET)).collect(),
        terminating: terminating
            .iter()
            .map(|&n| ep(net.pod(n), TARGET))
            .collect(),
    }
}

fn specs() -> Vec<ServiceSpec> {
    let mut v = Vec::new();
    for net in [Net { v6: false }, Net { v6: true }] {
        v.push(spec(net, PORT_CLUSTER, PROTO_TCP, 0, &[1, 2, 3], &[]));
        v.push(spec(net, PORT_LOCAL, PROTO_TCP, SVC_F_LOCAL, &[4, 5], &[]));
        v.push(spec(
            net,
            PORT_AFFINITY,
            PROTO_TCP,
            SVC_F_AFFINITY,
            &[1, 2, 3, 4],
            &[],
        ));
        v.push(spec(net, PORT_TERMINATING, PROTO_TCP, 0, &[], &[6, 7]));
        v.push(spec(net, PORT_READY_FIRST, PROTO_TCP, 0, &[1], &[6]));
        v.push(spec(net, PORT_NONE, PROTO_TCP, 0, &[], &[]));
        v.push(spec(net, PORT_UDP, PROTO_UDP, 0, &[1, 2], &[]));
        v.push(spec(net, PORT_UDP_LOCAL, PROTO_UDP, SVC_F_LOCAL, &[4], &[]));
        v.push(spec(net, PORT_UDP_NONE, PROTO_UDP, 0, &[], &[]));
        v.push(spec(
            net,
            PORT_UDP_AFFINITY,
            PROTO_UDP,
            SVC_F_AFFINITY | SVC_F_LOCAL,
            &[4, 5],
            &[],
        ));
        // An endpoint of the other family: a broken table must not produce
        // a garbage packet.
        let mut bad = spec(net, PORT_BAD_FAMILY, PROTO_TCP, 0, &[], &[]);
        bad.ready = vec![ep(Net { v6: !net.v6 }.pod(1), TARGET)];
        v.push(bad);
    }
    v
}

/// The link `BPF_PROG_TEST_RUN` hands every frame in on (`skb->ifindex`:
/// the loopback). The local pods' links are all this one, so their frames
/// at `FromPod` are believed (the program checks a pod's source against
/// its link); the host runs every frame in on it too.
const TEST_RUN_IFINDEX: u32 = 1;

/// Pods 1, 4 and 5 of each family are on this node: their translated
/// packets go to their links (a `Cluster` endpoint and the `Local` ones).
fn local_links() -> Vec<(LocalKey, LocalLink)> {
    let mut v = Vec::new();
    for net in [Net { v6: false }, Net { v6: true }] {
        for n in [1u16, 4, 5] {
            let b = n as u8;
            v.push((
                LocalKey { addr: net.pod(n) },
                LocalLink {
                    ifindex: TEST_RUN_IFINDEX,
                    pod_mac: [0x02, 0x50, 0, 0, 0, b],
                    node_mac: [0x02, 0x4e, 0, 0, 0, b],
                },
            ));
        }
    }
    v
}

/// Pass, drop or redirect, without the ifindex (see [`TC_ACT_REDIRECT`]).
fn kind(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Drop => "drop",
        Verdict::Redirect { .. } => "redirect",
    }
}

fn node_config() -> NodeConfig {
    NodeConfig {
        addr4: Net { v6: false }.node(),
        addr6: Net { v6: true }.node(),
        snat_port_min: SNAT_MIN,
        snat_port_max: SNAT_MAX,
        _pad: 0,
    }
}

// ---------------------------------------------------------------------------
// Frames

fn v4(a: &Addr) -> [u8; 4] {
    [a[12], a[13], a[14], a[15]]
}

/// The destination MAC of frames for this node. `BPF_PROG_TEST_RUN`
/// classifies a frame (`skb->pkt_type`) against the device it runs on,
/// loopback when none is given, whose MAC is all zeros.
const NODE_MAC: [u8; 6] = [0; 6];
/// Another host's MAC: a frame to it reached the node only by flooding.
const OTHER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

/// What the kernel's `eth_type_trans` concludes on the test-run device:
/// unicast to a MAC not [`NODE_MAC`] is `PACKET_OTHERHOST`.
fn for_other_host(frame: &[u8]) -> bool {
    frame.len() >= 6 && frame[0] & 1 == 0 && frame[..6] != NODE_MAC
}

fn with_dst_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[..6].copy_from_slice(&mac);
    f
}

fn builder(
    v6: bool,
    src: &Addr,
    dst: &Addr,
) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xa], NODE_MAC);
    if v6 {
        b.ipv6(*src, *dst, 64)
    } else {
        b.ipv4(v4(src), v4(dst), 64)
    }
}

fn is_v6(a: &Addr) -> bool {
    a[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
}

#[allow(clippy::too_many_arguments)]
fn tcp(
    src: Addr,
    sport: u16,
    dst: Addr,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    let b = tcp_builder(src, sport, dst, dport, flags, seq, ack);
    let mut out = Vec::new();
    b.write(&mut out, payload).expect("tcp frame");
    out
}

/// A TCP frame's builder with `flags` set.
fn tcp_builder(
    src: Addr,
    sport: u16,
    dst: Addr,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
) -> etherparse::PacketBuilderStep<etherparse::TcpHeader> {
    let mut b = builder(is_v6(&src), &src, &dst).tcp(sport, dport, seq, 64240);
    if flags & TCP_SYN != 0 {
        b = b.syn();
    }
    if flags & TCP_ACK != 0 {
        b = b.ack(ack);
    }
    if flags & TCP_FIN != 0 {
        b = b.fin();
    }
    if flags & TCP_RST != 0 {
        b = b.rst();
    }
    if flags & TCP_PSH != 0 {
        b = b.psh();
    }
    b
}

/// A TCP frame carrying the timestamp option `ts` in Linux's layout (MSS,
/// SACK permitted, timestamp, NOP, window scale on a SYN; NOP, NOP,
/// timestamp otherwise), or the raw option bytes `raw` when given.
#[allow(clippy::too_many_arguments)]
fn tcp_opts(
    src: Addr,
    sport: u16,
    dst: Addr,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    ts: u32,
    raw: Option<&[u8]>,
) -> Vec<u8> {
    use etherparse::TcpOptionElement::*;
    let b = tcp_builder(src, sport, dst, dport, flags, seq, ack);
    let b = match raw {
        Some(bytes) => b.options_raw(bytes).expect("raw options fit"),
        None if flags & TCP_SYN != 0 => b
            .options(&[
                MaximumSegmentSize(1460),
                SelectiveAcknowledgementPermitted,
                Timestamp(ts, 0),
                Noop,
                WindowScale(7),
            ])
            .expect("options fit"),
        None => b
            .options(&[Noop, Noop, Timestamp(ts, 99)])
            .expect("options fit"),
    };
    let mut out = Vec::new();
    b.write(&mut out, b"").expect("tcp frame");
    out
}

fn udp(src: Addr, sport: u16, dst: Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    builder(is_v6(&src), &src, &dst)
        .udp(sport, dport)
        .write(&mut out, payload)
        .expect("udp frame");
    out
}

fn icmp_echo(src: Addr, dst: Addr) -> Vec<u8> {
    let mut out = Vec::new();
    let b = builder(is_v6(&src), &src, &dst);
    if is_v6(&src) {
        b.icmpv6_echo_request(7, 1)
            .write(&mut out, b"ping")
            .unwrap();
    } else {
        b.icmpv4_echo_request(7, 1)
            .write(&mut out, b"ping")
            .unwrap();
    }
    out
}

/// Source, source port, destination, destination port of a TCP/UDP frame.
fn tuple(frame: &[u8]) -> Option<(Addr, u16, Addr, u16)> {
    let sp = SlicedPacket::from_ethernet(frame).ok()?;
    let (src, dst) = match sp.net? {
        NetSlice::Ipv4(ip) => (
            v4_mapped(ip.header().source()),
            v4_mapped(ip.header().destination()),
        ),
        NetSlice::Ipv6(ip) => (ip.header().source(), ip.header().destination()),
    };
    let (sport, dport) = match sp.transport? {
        TransportSlice::Tcp(t) => (t.source_port(), t.destination_port()),
        TransportSlice::Udp(u) => (u.source_port(), u.destination_port()),
        _ => return None,
    };
    Some((src, sport, dst, dport))
}

fn ipv4_header_csum(h: &mut [u8]) {
    h[10] = 0;
    h[11] = 0;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let mut s = 0u32;
    for c in h[..ihl].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    let c = !(s as u16);
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// An IPv4 frame with the fragment field set (`mf`, offset in 8-byte units).
fn v4_fragment(mut f: Vec<u8>, mf: bool, offset: u16) -> Vec<u8> {
    let v = offset | if mf { 0x2000 } else { 0 };
    f[14 + 6..14 + 8].copy_from_slice(&v.to_be_bytes());
    ipv4_header_csum(&mut f[14..34]);
    f
}

/// Insert an IPv6 extension header (8 bytes) of type `kind` after the
/// fixed header; for a fragment header, `offset`/`mf` fill it.
fn v6_ext(f: &[u8], kind: u8, offset: u16, mf: bool) -> Vec<u8> {
    let next = f[14 + 6];
    let mut ext = [next, 0, 0, 0, 0, 0, 0, 0];
    if kind == 44 {
        let v = (offset << 3) | u16::from(mf);
        ext[2..4].copy_from_slice(&v.to_be_bytes());
        ext[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    } else {
        // PadN over the 6 option bytes.
        ext[2] = 1;
        ext[3] = 4;
    }
    let mut out = f[..54].to_vec();
    out[14 + 6] = kind;
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

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xa, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0xa, 198, 18, 1, 1]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 19, 0, 100]);
    f
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

/// `frame` (complete) as an offloading sender hands it over, and the vnet
/// header the emulated engine reads with it: the L4 checksum field holding
/// only the pseudo-header's sum (`CHECKSUM_PARTIAL`), and for `gso_size` >
/// 0 a TCP super-frame to cut into segments of that many bytes.
/// How a frame reaches the relay from a sender that offloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// Checksum left partial (a pod's or the node's socket).
    Partial,
    /// A GRO aggregate: its checksum verified (`DATA_VALID`), the field
    /// the first segment's (it holds for no segment once merged).
    Gro,
    /// A partial super-frame the relay cuts itself before the program, as
    /// it does with what it cannot keep whole: here its GSO type names the
    /// other family.
    Finished,
}

fn offloaded_form(frame: &[u8], gso_size: u16, form: Form) -> Option<(Vec<u8>, VnetHdr)> {
    let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (v6, l3) = match et {
        0x0800 => (false, 14),
        0x86dd => (true, 14),
        _ => return None,
    };
    let (proto, l4, addrs) = if v6 {
        (*frame.get(l3 + 6)?, l3 + 40, frame.get(l3 + 8..l3 + 40)?)
    } else {
        let ihl = usize::from(frame.get(l3)? & 0xf) * 4;
        (*frame.get(l3 + 9)?, l3 + ihl, frame.get(l3 + 12..l3 + 20)?)
    };
    let csum_offset: u16 = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    let l4_len = frame.len().checked_sub(l4)?;
    let pseudo = offload::sum16(addrs, u32::from(proto) + l4_len as u32);
    let mut wire = frame.to_vec();
    let at = l4 + usize::from(csum_offset);
    let field = wire.get_mut(at..at + 2)?;
    match form {
        // Some value that is not the super-frame's checksum.
        Form::Gro => field.copy_from_slice(&[0x5a, 0xa5]),
        _ => field.copy_from_slice(&offload::fold(pseudo).to_be_bytes()),
    }
    let gso_type = match (gso_size, v6 != (form == Form::Finished)) {
        (0, _) => offload::GSO_NONE,
        (_, false) => offload::GSO_TCPV4,
        (_, true) => offload::GSO_TCPV6,
    };
    let hdr = match form {
        Form::Gro => VnetHdr {
            flags: offload::VNET_F_DATA_VALID,
            gso_type,
            gso_size,
            ..VnetHdr::default()
        },
        Form::Partial | Form::Finished => VnetHdr {
            flags: offload::VNET_F_NEEDS_CSUM,
            gso_type,
            hdr_len: 0,
            gso_size,
            csum_start: l4 as u16,
            csum_offset,
        },
    };
    Some((wire, hdr))
}

// ---------------------------------------------------------------------------
// The two engines side by side

struct Kernel {
    bpf: Ebpf,
    ct: HashMap<MapData, P<CtKey>, P<CtValue>>,
    affinity: HashMap<MapData, P<AffinityKey>, P<AffinityValue>>,
    node: Array<MapData, P<NodeConfig>>,
    events: PerCpuArray<MapData, u64>,
    snat_exhausted: PerCpuHashMap<MapData, P<SnatExhaustKey>, u64>,
    counts: Vec<u64>,
}

/// `BPF_F_TEST_SKB_CHECKSUM_COMPLETE` (Linux 6.13): the test skb arrives
/// `CHECKSUM_COMPLETE`, with `skb->csum` the sum of the frame from the
/// network header on, as a NIC or GRO hands it over; after the run the
/// kernel sums the output again and fails the run with `EBADMSG` if the
/// program's writes left `skb->csum` stale.
const CHECKSUM_COMPLETE: u32 = 1 << 2;

/// The `test` member of `union bpf_attr` for `BPF_PROG_TEST_RUN`, up to
/// `batch_size` (aya 0.14 sets no flags but XDP's).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// One run of `prog` on `frame` with `flags`: the return value and the
/// output frame, or the errno's error.
fn test_run_with_flags(
    prog: &SchedClassifier,
    frame: &[u8],
    flags: u32,
) -> std::io::Result<(u32, Vec<u8>)> {
    use std::os::fd::{AsFd, AsRawFd};
    const BPF_PROG_TEST_RUN: libc::c_long = 10;
    let fd = prog
        .fd()
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .as_fd()
        .as_raw_fd();
    let mut out = vec![0u8; frame.len() + 512];
    let mut attr = TestRunAttr {
        prog_fd: fd as u32,
        data_size_in: frame.len() as u32,
        data_size_out: out.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        flags,
        ..Default::default()
    };
    // SAFETY: the attr points at live buffers of the sizes it gives, and
    // the kernel writes only `out` and the attr.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    out.truncate(attr.data_size_out as usize);
    Ok((attr.retval, out))
}

impl Kernel {
    fn new(tables: &ServiceTables, node: NodeConfig) -> Self {
        let mut bpf = load();
        let mut services: HashMap<MapData, P<ServiceKey>, P<ServiceValue>> =
            HashMap::try_from(bpf.take_map(MAP_SERVICES).expect(MAP_SERVICES)).unwrap();
        for (k, v) in &tables.services {
            services.insert(P(*k), P(*v), 0).expect("service insert");
        }
        let mut endpoints: Array<MapData, P<Endpoint>> =
            Array::try_from(bpf.take_map(MAP_ENDPOINTS).expect(MAP_ENDPOINTS)).unwrap();
        for (i, e) in tables.endpoints.iter().enumerate() {
            endpoints.set(i as u32, P(*e), 0).expect("endpoint set");
        }
        // The kernel array packs MAGLEV_CHUNK entries per element; the
        // host reads the same flat indices from a Vec.
        let mut maglev: Array<MapData, MaglevChunk> =
            Array::try_from(bpf.take_map(MAP_MAGLEV).expect(MAP_MAGLEV)).unwrap();
        for (i, part) in tables.maglev.chunks(MAGLEV_CHUNK as usize).enumerate() {
            let mut chunk: MaglevChunk = [0; MAGLEV_CHUNK as usize];
            chunk[..part.len()].copy_from_slice(part);
            maglev.set(i as u32, chunk, 0).expect("maglev set");
        }
        let mut local: HashMap<MapData, P<LocalKey>, P<LocalLink>> =
            HashMap::try_from(bpf.take_map(MAP_LOCAL).expect(MAP_LOCAL)).unwrap();
        for (k, v) in local_links() {
            local.insert(P(k), P(v), 0).expect("local link insert");
        }
        let ct = HashMap::try_from(bpf.take_map(MAP_CT).expect(MAP_CT)).unwrap();
        let affinity = HashMap::try_from(bpf.take_map(MAP_AFFINITY).expect(MAP_AFFINITY)).unwrap();
        let node_map = Array::try_from(bpf.take_map(MAP_NODE).expect(MAP_NODE)).unwrap();
        let events = PerCpuArray::try_from(bpf.take_map(MAP_EVENTS).expect(MAP_EVENTS)).unwrap();
        let snat_exhausted =
            PerCpuHashMap::try_from(bpf.take_map(MAP_SNAT_EXHAUSTED).expect(MAP_SNAT_EXHAUSTED))
                .unwrap();
        let mut k = Kernel {
            bpf,
            ct,
            affinity,
            node: node_map,
            events,
            snat_exhausted,
            counts: vec![0; Event::COUNT],
        };
        k.set_node(node);
        // The services, endpoint and Maglev maps stay alive in the kernel
        // through the programs that use them.
        drop((services, endpoints, maglev, local));
        k
    }

    fn set_node(&mut self, node: NodeConfig) {
        self.node.set(0, P(node), 0).expect("node set");
    }

    /// Verdict, output frame and the event counted, run with the
    /// `BPF_PROG_TEST_RUN` `flags` (0 or [`CHECKSUM_COMPLETE`]).
    fn run(
        &mut self,
        frame: &[u8],
        hook: Hook,
        flags: u32,
    ) -> Result<(Verdict, Vec<u8>, Option<Event>), String> {
        let name = PROGRAMS.iter().find(|(_, h)| *h == hook).unwrap().0;
        let prog: &SchedClassifier = self.bpf.program(name).unwrap().try_into().unwrap();
        let (retval, out) = test_run_with_flags(prog, frame, flags).map_err(|e| {
            if e.raw_os_error() == Some(libc::EBADMSG) {
                "BPF_PROG_TEST_RUN: skb->csum left stale (EBADMSG)".to_owned()
            } else {
                format!("BPF_PROG_TEST_RUN with flags {flags:#x}: {e}")
            }
        })?;
        let verdict = match retval {
            TC_ACT_OK => Verdict::Pass,
            TC_ACT_SHOT => Verdict::Drop,
            TC_ACT_REDIRECT => Verdict::Redirect { ifindex: 0 },
            other => return Err(format!("unexpected TC verdict {other}")),
        };
        Ok((verdict, out, self.counted_event()))
    }

    /// The one event whose counter moved since the last call.
    fn counted_event(&mut self) -> Option<Event> {
        let mut moved = None;
        for e in Event::ALL {
            let i = e.index();
            let total: u64 = self
                .events
                .get(&(i as u32), 0)
                .map(|v| v.iter().sum())
                .unwrap_or(0);
            if total != self.counts[i] {
                moved = if moved.is_none() && total == self.counts[i] + 1 {
                    Some(*e)
                } else {
                    None
                };
                self.counts[i] = total;
            }
        }
        moved
    }

    /// New flows reset for want of a SNAT port, summed over CPUs.
    fn snat_exhausted(&self) -> StdHashMap<SnatExhaustKey, u64> {
        self.snat_exhausted
            .iter()
            .map(|r| r.expect("snat exhausted iter"))
            .map(|(k, v)| (k.0, v.iter().sum()))
            .collect()
    }

    fn ct(&self) -> StdHashMap<CtKey, CtValue> {
        self.ct
            .iter()
            .map(|r| r.expect("ct iter"))
            .map(|(k, v)| (k.0, v.0))
            .collect()
    }

    fn affinity(&self) -> StdHashMap<AffinityKey, AffinityValue> {
        self.affinity
            .iter()
            .map(|r| r.expect("affinity iter"))
            .map(|(k, v)| (k.0, v.0))
            .collect()
    }
}

struct Mismatch {
    frame: usize,
    name: String,
    what: String,
}

struct Driver {
    kernel: Kernel,
    host: HostMaps,
    clock: MonoClock,
    frames: usize,
    rules: BTreeMap<&'static str, usize>,
    events: BTreeMap<&'static str, usize>,
    verdicts: BTreeMap<&'static str, usize>,
    mismatches: Vec<Mismatch>,
    /// Frames the kernel's test run does not take.
    skipped: Vec<String>,
    /// `BPF_PROG_TEST_RUN` flags of every kernel run (see
    /// [`Driver::kernel_run`]).
    flags: u32,
    /// Frames run without `CHECKSUM_COMPLETE` because the program resized
    /// them (see [`Driver::kernel_run`]).
    resized: usize,
}

/// An untagged IPv4/IPv6 frame cut inside the fixed IP header.
fn l3_cut_short(frame: &[u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00]) => frame.len() < 14 + 20,
        Some([0x86, 0xdd]) => frame.len() < 14 + 40,
        _ => false,
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        return None;
    }
    Some(
        a.iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len())),
    )
}

impl Driver {
    fn new() -> Self {
        let tables = ServiceTables::build(&specs());
        let node = node_config();
        let kernel = Kernel::new(&tables, node);
        let mut host = HostMaps::new();
        host.set_node(node);
        host.replace_services(tables);
        for (k, v) in local_links() {
            host.set_local_link(k, v);
        }
        Driver {
            kernel,
            host,
            clock: MonoClock,
            frames: 0,
            rules: BTreeMap::new(),
            events: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            mismatches: Vec::new(),
            skipped: Vec::new(),
            flags: 0,
            resized: 0,
        }
    }

    fn set_node(&mut self, node: NodeConfig) {
        self.kernel.set_node(node);
        self.host.set_node(node);
    }

    fn mismatch(&mut self, name: &str, what: String) {
        self.mismatches.push(Mismatch {
            frame: self.frames,
            name: name.to_string(),
            what,
        });
    }

    /// The host program on `pkt`, its event and verdict tallied.
    fn host_run(&mut self, pkt: &mut VecPacket, hook: Hook) -> sluice_datapath::Outcome {
        pkt.ingress_link = TEST_RUN_IFINDEX;
        let o = process(pkt, &mut self.host, &mut self.clock, hook);
        *self.events.entry(o.event.name()).or_default() += 1;
        *self.verdicts.entry(kind(o.verdict)).or_default() += 1;
        o
    }

    /// Run one frame through both; the host's output (the same as the
    /// kernel's unless a mismatch was recorded).
    fn run(
        &mut self,
        rule: &'static str,
        name: &str,
        hook: Hook,
        frame: &[u8],
    ) -> (Event, Vec<u8>) {
        self.frames += 1;
        *self.rules.entry(rule).or_default() += 1;
        let mut pkt = VecPacket::new(frame.to_vec());
        pkt.other_host = for_other_host(frame);
        let o = self.host_run(&mut pkt, hook);
        let host_out = pkt.into_inner();
        let kernel = self.kernel_run(frame, hook, host_out.len() != frame.len());
        let name = format!("{name} [{rule}, {hook:?}]");
        match kernel {
            Err(_) if l3_cut_short(frame) => {
                // BPF_PROG_TEST_RUN refuses an IP frame without a complete
                // fixed IP header (EINVAL); the same cuts run VLAN-tagged.
                self.skipped.push(name);
            }
            Err(e) => self.mismatch(&name, format!("kernel run failed: {e}")),
            Ok((verdict, out, event)) => {
                if kind(verdict) != kind(o.verdict) {
                    self.mismatch(
                        &name,
                        format!("verdict: kernel {verdict:?}, host {:?}", o.verdict),
                    );
                }
                if event != Some(o.event) {
                    self.mismatch(
                        &name,
                        format!("event: kernel {event:?}, host {:?}", o.event),
                    );
                }
                if let Some(at) = first_difference(&out, &host_out) {
                    self.mismatch(
                        &name,
                        format!(
                            "output differs at byte {at} (kernel {} bytes: {:02x?}, host {} bytes: {:02x?})",
                            out.len(),
                            out.get(at..(at + 8).min(out.len())).unwrap_or(&[]),
                            host_out.len(),
                            host_out.get(at..(at + 8).min(host_out.len())).unwrap_or(&[]),
                        ),
                    );
                }
            }
        }
        (o.event, host_out)
    }

    /// The kernel's run of `frame` with this driver's flags. A frame the
    /// program `resized` (the resets and ICMP errors of P6, as the host's
    /// answer shows) leaves CHECKSUM_COMPLETE: `bpf_skb_change_tail` makes
    /// the skb CHECKSUM_NONE and the stack checks its checksum in software.
    /// The test run checks `skb->csum` whatever the skb became, so such a
    /// frame runs without that flag.
    fn kernel_run(
        &mut self,
        frame: &[u8],
        hook: Hook,
        resized: bool,
    ) -> Result<(Verdict, Vec<u8>, Option<Event>), String> {
        let mut flags = self.flags;
        if resized && flags & CHECKSUM_COMPLETE != 0 {
            flags &= !CHECKSUM_COMPLETE;
            self.resized += 1;
        }
        self.kernel.run(frame, hook, flags)
    }

    /// One frame as a sender with offloads hands it over (`form`):
    /// checksum-partial (`gso_size` 0) or a TCP super-frame of `gso_size`
    /// segments, partial or a verified GRO aggregate. The host reads it as
    /// the emulated engine's relay does ([`offload::intake`]): kept whole,
    /// the program runs once on it with partial checksum semantics and the
    /// next device's finishing (the checksum over the whole frame) follows;
    /// otherwise it is finished first and every piece runs. The kernel runs
    /// `frame` (complete, as the skb's data would read after the device or
    /// GRO) once, and its output (cut as the device would cut it, when the
    /// host cut too) must be the host's byte for byte.
    fn run_offloaded(
        &mut self,
        rule: &'static str,
        name: &str,
        hook: Hook,
        frame: &[u8],
        gso_size: u16,
        form: Form,
    ) -> Vec<Vec<u8>> {
        self.frames += 1;
        *self.rules.entry(rule).or_default() += 1;
        let name = format!("{name} [{rule}, {hook:?}, {form:?}]");
        let (mut wire, hdr) = match offloaded_form(frame, gso_size, form) {
            Some(w) => w,
            None => {
                self.mismatch(&name, "not a TCP/UDP frame to offload".into());
                return Vec::new();
            }
        };
        let mut host_outs = Vec::new();
        let mut host_results = Vec::new();
        let kept_whole = match offload::intake(&hdr, &mut wire) {
            Intake::Partial(h) => {
                let mut pkt = VecPacket::new(wire).partial();
                let o = self.host_run(&mut pkt, hook);
                host_results.push((o.verdict, o.event));
                let rebuilt = pkt.rebuilt;
                let mut out = pkt.into_inner();
                // An answer built in its place is complete already.
                if !rebuilt {
                    let (start, at) = (usize::from(h.csum_start), usize::from(h.csum_offset));
                    if let Err(e) = offload::complete_csum(&mut out, start, at) {
                        self.mismatch(&name, format!("the host's output does not finish: {e:?}"));
                    }
                }
                host_outs.push(out);
                true
            }
            intake => {
                let mut pieces: Vec<Vec<u8>> = Vec::new();
                let whole = match offload::finish(&hdr, &mut wire, |seg| pieces.push(seg.clone())) {
                    Ok(None) => true,
                    Ok(Some(_)) => false,
                    Err(e) => {
                        self.mismatch(
                            &name,
                            format!("the host could not finish it ({intake:?}): {e:?}"),
                        );
                        return Vec::new();
                    }
                };
                if whole {
                    pieces.push(wire);
                }
                for piece in pieces {
                    let mut pkt = VecPacket::new(piece);
                    let o = self.host_run(&mut pkt, hook);
                    host_results.push((o.verdict, o.event));
                    host_outs.push(pkt.into_inner());
                }
                whole
            }
        };
        if form != Form::Finished && !kept_whole {
            self.mismatch(&name, "the relay would not keep it whole".into());
        }
        let resized = gso_size == 0 && host_outs.iter().any(|o| o.len() != frame.len());
        let kernel = self.kernel_run(frame, hook, resized);
        let (verdict, out, event) = match kernel {
            Ok(k) => k,
            Err(e) => {
                self.mismatch(&name, format!("kernel run failed: {e}"));
                return host_outs;
            }
        };
        for (i, (hv, he)) in host_results.iter().enumerate() {
            if kind(verdict) != kind(*hv) {
                self.mismatch(
                    &name,
                    format!("piece {i}: verdict: kernel {verdict:?}, host {hv:?}"),
                );
            }
            if event != Some(*he) {
                self.mismatch(
                    &name,
                    format!("piece {i}: event: kernel {event:?}, host {he:?}"),
                );
            }
        }
        let kernel_pieces = if gso_size == 0 || kept_whole {
            vec![out]
        } else {
            let mut segs = Vec::new();
            if let Err(e) =
                offload::segment_tcp(&out, usize::from(gso_size), |seg| segs.push(seg.clone()))
            {
                self.mismatch(
                    &name,
                    format!("the kernel's output does not segment: {e:?}"),
                );
            }
            segs
        };
        if kernel_pieces.len() != host_outs.len() {
            self.mismatch(
                &name,
                format!(
                    "{} pieces from the kernel, {} from the host",
                    kernel_pieces.len(),
                    host_outs.len()
                ),
            );
        }
        for (i, (k, h)) in kernel_pieces.iter().zip(&host_outs).enumerate() {
            if let Some(at) = first_difference(k, h) {
                self.mismatch(
                    &name,
                    format!(
                        "piece {i} differs at byte {at} (kernel {:02x?}, host {:02x?})",
                        k.get(at..(at + 8).min(k.len())).unwrap_or(&[]),
                        h.get(at..(at + 8).min(h.len())).unwrap_or(&[]),
                    ),
                );
            }
        }
        host_outs
    }

    /// Conntrack and affinity: same keys, same values but for time fields.
    fn compare_maps(&mut self, at: &str) {
        let kct = self.kernel.ct();
        let hct: StdHashMap<CtKey, CtValue> = self.host.ct_snapshot().into_iter().collect();
        let mut problems = Vec::new();
        for (k, hv) in &hct {
            match kct.get(k) {
                None => problems.push(format!("conntrack {k:?} only on the host")),
                Some(kv) => {
                    let strip = |v: &CtValue| CtValue {
                        expires_ns: 0,
                        ..*v
                    };
                    if strip(kv) != strip(hv)
                        || kv.expires_ns.abs_diff(hv.expires_ns) > TIME_TOLERANCE_NS
                    {
                        problems.push(format!("conntrack {k:?}: kernel {kv:?}, host {hv:?}"));
                    }
                }
            }
        }
        for k in kct.keys().filter(|k| !hct.contains_key(k)) {
            problems.push(format!("conntrack {k:?} only in the kernel"));
        }
        let kex = self.kernel.snat_exhausted();
        let hex: StdHashMap<SnatExhaustKey, u64> =
            self.host.snat_exhausted_snapshot().into_iter().collect();
        if kex != hex {
            problems.push(format!(
                "SNAT exhaustion counts: kernel {kex:?}, host {hex:?}"
            ));
        }
        let kaf = self.kernel.affinity();
        let haf: StdHashMap<AffinityKey, AffinityValue> =
            self.host.affinity_snapshot().into_iter().collect();
        for (k, hv) in &haf {
            match kaf.get(k) {
                None => problems.push(format!("affinity {k:?} only on the host")),
                Some(kv) => {
                    let strip = |v: &AffinityValue| AffinityValue {
                        last_used_ns: 0,
                        ..*v
                    };
                    if strip(kv) != strip(hv)
                        || kv.last_used_ns.abs_diff(hv.last_used_ns) > TIME_TOLERANCE_NS
                    {
                        problems.push(format!("affinity {k:?}: kernel {kv:?}, host {hv:?}"));
                    }
                }
            }
        }
        for k in kaf.keys().filter(|k| !haf.contains_key(k)) {
            problems.push(format!("affinity {k:?} only in the kernel"));
        }
        for p in problems {
            self.mismatch(&format!("maps after {at}"), p);
        }
    }
}

// ---------------------------------------------------------------------------
// The corpus

/// A TCP connection through a frontend, client side and endpoint side
/// (as the program translated it).
struct Conn {
    client: Addr,
    cport: u16,
    vip: Addr,
    vport: u16,
    /// What the endpoint sees: (source, source port) of the translated
    /// packet and the endpoint itself.
    seen_src: Addr,
    seen_sport: u16,
    ep: Addr,
    ep_port: u16,
}

impl Conn {
    fn open(
        d: &mut Driver,
        rule: &'static str,
        client: Addr,
        cport: u16,
        vip: Addr,
        vport: u16,
    ) -> Option<Conn> {
        let f = tcp(client, cport, vip, vport, TCP_SYN, 1000, 0, b"");
        let (_, out) = d.run(rule, "SYN", Hook::WireIngress, &f);
        let (seen_src, seen_sport, ep, ep_port) = tuple(&out)?;
        Some(Conn {
            client,
            cport,
            vip,
            vport,
            seen_src,
            seen_sport,
            ep,
            ep_port,
        })
    }

    fn client(
        &self,
        d: &mut Driver,
        rule: &'static str,
        name: &str,
        flags: u8,
        payload: &[u8],
    ) -> Event {
        let f = tcp(
            self.client,
            self.cport,
            self.vip,
            self.vport,
            flags,
            1001,
            5001,
            payload,
        );
        d.run(rule, name, Hook::WireIngress, &f).0
    }

    fn server(
        &self,
        d: &mut Driver,
        rule: &'static str,
        name: &str,
        hook: Hook,
        flags: u8,
        payload: &[u8],
    ) -> Event {
        let f = tcp(
            self.ep,
            self.ep_port,
            self.seen_src,
            self.seen_sport,
            flags,
            5000,
            1001,
            payload,
        );
        d.run(rule, name, hook, &f).0
    }
}

fn tcp_lifecycles(d: &mut Driver, net: Net) {
    let vip = net.vip();
    // P3 (Cluster, SNAT): handshake, data, orderly close; the endpoint
    // answers from a remote node (WireIngress) or from this one (FromPod).
    for (i, hook) in [Hook::WireIngress, Hook::FromPod].into_iter().enumerate() {
        let cport = 40000 + i as u16;
        let Some(c) = Conn::open(d, "P3", net.client(1), cport, vip, PORT_CLUSTER) else {
            continue;
        };
        c.client(d, "ct-state", "SYN retransmit", TCP_SYN, b"");
        c.server(d, "P3", "SYN-ACK", hook, TCP_SYN | TCP_ACK, b"");
        c.client(d, "ct-state", "ACK", TCP_ACK, b"");
        c.client(
            d,
            "P2",
            "data",
            TCP_ACK | TCP_PSH,
            b"GET / HTTP/1.1\r\n\r\n",
        );
        c.server(
            d,
            "P3",
            "data reply",
            hook,
            TCP_ACK | TCP_PSH,
            b"HTTP/1.1 200 OK\r\n\r\n",
        );
        c.client(d, "ct-state", "FIN", TCP_FIN | TCP_ACK, b"");
        c.server(d, "ct-state", "FIN-ACK", hook, TCP_FIN | TCP_ACK, b"");
        c.client(d, "ct-state", "last ACK", TCP_ACK, b"");
        // The tuple reused for a new connection: chosen again.
        c.client(d, "ct-state", "SYN reusing the tuple", TCP_SYN, b"");
    }
    // RST from the endpoint, then from the client.
    if let Some(c) = Conn::open(d, "P3", net.client(2), 41000, vip, PORT_CLUSTER) {
        c.server(
            d,
            "ct-state",
            "SYN-ACK",
            Hook::WireIngress,
            TCP_SYN | TCP_ACK,
            b"",
        );
        c.server(
            d,
            "ct-state",
            "RST from endpoint",
            Hook::WireIngress,
            TCP_RST,
            b"",
        );
        c.client(d, "ct-state", "ACK after RST", TCP_ACK, b"");
        c.client(d, "ct-state", "SYN after RST", TCP_SYN, b"");
    }
    if let Some(c) = Conn::open(d, "P3", net.client(2), 41001, vip, PORT_CLUSTER) {
        c.server(
            d,
            "ct-state",
            "SYN-ACK",
            Hook::FromPod,
            TCP_SYN | TCP_ACK,
            b"",
        );
        c.client(d, "ct-state", "ACK", TCP_ACK, b"");
        c.client(d, "ct-state", "RST from client", TCP_RST | TCP_ACK, b"");
        c.server(d, "ct-state", "late data", Hook::FromPod, TCP_ACK, b"late");
    }
    // A flow first seen mid-stream (no SYN): taken as established.
    let f = tcp(
        net.client(3),
        41002,
        vip,
        PORT_CLUSTER,
        TCP_ACK,
        7,
        7,
        b"mid",
    );
    d.run("ct-state", "mid-stream ACK", Hook::WireIngress, &f);
    let f = tcp(
        net.client(3),
        41003,
        vip,
        PORT_CLUSTER,
        TCP_FIN | TCP_ACK,
        7,
        7,
        b"",
    );
    d.run("ct-state", "mid-stream FIN", Hook::WireIngress, &f);
    let f = tcp(net.client(3), 41004, vip, PORT_CLUSTER, TCP_RST, 7, 7, b"");
    d.run("ct-state", "mid-stream RST", Hook::WireIngress, &f);

    // P4 (Local, no SNAT): replies from the pod (FromPod) and as the node
    // sends them (WireEgress).
    for (i, hook) in [Hook::FromPod, Hook::WireEgress, Hook::WireIngress]
        .into_iter()
        .enumerate()
    {
        let Some(c) = Conn::open(d, "P4", net.client(4), 42000 + i as u16, vip, PORT_LOCAL) else {
            continue;
        };
        c.server(d, "P4", "SYN-ACK", hook, TCP_SYN | TCP_ACK, b"");
        c.client(d, "P4", "ACK", TCP_ACK, b"");
        c.client(d, "P4", "data", TCP_ACK | TCP_PSH, b"hello");
        c.server(d, "P4", "data reply", hook, TCP_ACK | TCP_PSH, b"world");
        c.server(
            d,
            "ct-state",
            "FIN from endpoint",
            hook,
            TCP_FIN | TCP_ACK,
            b"",
        );
        c.client(d, "ct-state", "FIN-ACK", TCP_FIN | TCP_ACK, b"");
    }

    // P5: nothing ready, terminating endpoints serve; ready first.
    for i in 0..4u16 {
        let f = tcp(
            net.client(5),
            43000 + i,
            vip,
            PORT_TERMINATING,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("P5", "SYN, only terminating", Hook::WireIngress, &f);
        let f = tcp(
            net.client(5),
            43100 + i,
            vip,
            PORT_READY_FIRST,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("P5", "SYN, ready first", Hook::WireIngress, &f);
    }
    if let Some(c) = Conn::open(d, "P5", net.client(5), 43200, vip, PORT_TERMINATING) {
        c.server(
            d,
            "P5",
            "SYN-ACK from terminating",
            Hook::WireIngress,
            TCP_SYN | TCP_ACK,
            b"",
        );
        c.client(d, "P5", "ACK to terminating", TCP_ACK, b"");
    }

    // Session affinity: one client keeps its endpoint over new flows.
    for i in 0..4u16 {
        let f = tcp(
            net.client(6),
            44000 + i,
            vip,
            PORT_AFFINITY,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("affinity", "SYN, same client", Hook::WireIngress, &f);
    }
    for i in 0..4u16 {
        let f = tcp(
            net.client(10 + i),
            44100,
            vip,
            PORT_AFFINITY,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("affinity", "SYN, other clients", Hook::WireIngress, &f);
    }

    // Many clients: Maglev spread and SNAT ports.
    for i in 0..12u16 {
        let f = tcp(
            net.client(20 + i),
            45000 + i,
            vip,
            PORT_CLUSTER,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("P1", "SYN, many clients", Hook::WireIngress, &f);
    }
}

/// Frames from senders that offload, as the emulated engine reads them
/// (checksum-partial, TCP super-frames) against the kernel on the same
/// frames completed: through DNAT and SNAT, the replies' reverse NAT from
/// a remote endpoint and from a local pod, `Local`, UDP, and the reset of
/// P6 made from a partial frame.
fn offloaded(d: &mut Driver, net: Net) {
    const MSS: u16 = 1000;
    let vip = net.vip();
    let bulk: Vec<u8> = (0..3 * usize::from(MSS)).map(|i| (i % 251) as u8).collect();
    for (i, (port, hook)) in [
        (PORT_CLUSTER, Hook::WireIngress),
        (PORT_CLUSTER, Hook::FromPod),
        (PORT_LOCAL, Hook::FromPod),
    ]
    .into_iter()
    .enumerate()
    {
        let cport = 47000 + i as u16;
        let Some(c) = Conn::open(d, "offload", net.client(7), cport, vip, port) else {
            continue;
        };
        c.server(d, "offload", "SYN-ACK", hook, TCP_SYN | TCP_ACK, b"");
        c.client(d, "offload", "ACK", TCP_ACK, b"");
        let up = |payload: &[u8]| {
            tcp(
                c.client,
                c.cport,
                c.vip,
                c.vport,
                TCP_ACK | TCP_PSH,
                1001,
                5001,
                payload,
            )
        };
        let down = |payload: &[u8]| {
            tcp(
                c.ep,
                c.ep_port,
                c.seen_src,
                c.seen_sport,
                TCP_ACK | TCP_PSH,
                5001,
                1001,
                payload,
            )
        };
        let data = up(b"GET /");
        d.run_offloaded(
            "offload",
            "data",
            Hook::WireIngress,
            &data,
            0,
            Form::Partial,
        );
        for form in [Form::Partial, Form::Gro, Form::Finished] {
            let f = up(&bulk);
            d.run_offloaded(
                "offload",
                "data, super-frame",
                Hook::WireIngress,
                &f,
                MSS,
                form,
            );
        }
        let reply = down(b"200 OK");
        d.run_offloaded("offload", "reply", hook, &reply, 0, Form::Partial);
        for form in [Form::Partial, Form::Gro, Form::Finished] {
            d.run_offloaded(
                "offload",
                "reply, super-frame",
                hook,
                &down(&bulk),
                MSS,
                form,
            );
        }
    }
    // UDP: a partial datagram to the service and the pod's partial answer.
    let q = udp(net.client(7), 47100, vip, PORT_UDP, b"query");
    let out = d.run_offloaded("offload", "UDP", Hook::WireIngress, &q, 0, Form::Partial);
    if let Some((src, sport, ep, ep_port)) = out.first().and_then(|o| tuple(o)) {
        let a = udp(ep, ep_port, src, sport, b"answer");
        d.run_offloaded("offload", "UDP answer", Hook::FromPod, &a, 0, Form::Partial);
    }
    // P6 from a partial frame: the reset is built from it.
    let f = tcp(
        net.client(7),
        47200,
        vip,
        PORT_NONE,
        TCP_ACK | TCP_PSH,
        1,
        1,
        b"x",
    );
    d.run_offloaded(
        "offload",
        "data, no endpoint",
        Hook::WireIngress,
        &f,
        0,
        Form::Partial,
    );
}

fn udp_flows(d: &mut Driver, net: Net) {
    let vip = net.vip();
    for (port, rule) in [
        (PORT_UDP, "P3"),
        (PORT_UDP_LOCAL, "P4"),
        (PORT_UDP_AFFINITY, "affinity"),
    ] {
        for i in 0..3u16 {
            let f = udp(net.client(1 + i), 50000 + i, vip, port, b"query");
            let (_, out) = d.run(rule, "UDP request", Hook::WireIngress, &f);
            d.run(rule, "UDP request again", Hook::WireIngress, &f);
            if let Some((src, sport, dst, dport)) = tuple(&out) {
                let hook = if rule == "P3" {
                    Hook::WireIngress
                } else {
                    Hook::FromPod
                };
                let r = udp(dst, dport, src, sport, b"answer");
                d.run(rule, "UDP reply", hook, &r);
            }
        }
    }
    // A UDP datagram without checksum (IPv4 only allows it).
    let mut f = udp(net.client(7), 50100, vip, PORT_UDP, b"nocsum");
    if !net.v6 {
        f[14 + 20 + 6] = 0;
        f[14 + 20 + 7] = 0;
    }
    d.run("P2", "UDP without checksum", Hook::WireIngress, &f);
}

/// A frame with its TTL (hop limit) set to `ttl`, IPv4 checksum redone.
fn with_ttl(mut f: Vec<u8>, ttl: u8) -> Vec<u8> {
    if f[12..14] == [0x86, 0xdd] {
        f[14 + 7] = ttl;
    } else {
        f[14 + 8] = ttl;
        ipv4_header_csum(&mut f[14..34]);
    }
    f
}

// spec: P2, P4 (a pod on this node gets its packets on its own link)
fn local_delivery(d: &mut Driver, net: Net) {
    let vip = net.vip();
    for (port, rule) in [(PORT_LOCAL, "P4"), (PORT_CLUSTER, "P3")] {
        for (i, ttl) in [64u8, 2, 1].into_iter().enumerate() {
            let cport = 47000 + i as u16 + port * 8;
            let f = with_ttl(
                tcp(net.client(30), cport, vip, port, TCP_SYN, 9, 0, b""),
                ttl,
            );
            d.run(rule, &format!("SYN, TTL {ttl}"), Hook::WireIngress, &f);
            let f = with_ttl(
                tcp(net.client(30), cport, vip, port, TCP_ACK, 10, 1, b"x"),
                ttl,
            );
            d.run(rule, &format!("data, TTL {ttl}"), Hook::WireIngress, &f);
        }
    }
}

fn rejections(d: &mut Driver, net: Net) {
    let vip = net.vip();
    // P1: what is not a frontend passes untouched.
    let f = tcp(net.client(1), 46000, vip, 9999, TCP_SYN, 1, 0, b"");
    d.run("P1", "wrong port", Hook::WireIngress, &f);
    let f = udp(net.client(1), 46000, vip, PORT_CLUSTER, b"x");
    d.run("P1", "wrong protocol", Hook::WireIngress, &f);
    let f = tcp(
        net.client(1),
        46000,
        net.other(),
        PORT_CLUSTER,
        TCP_SYN,
        1,
        0,
        b"",
    );
    d.run("P1", "not a VIP", Hook::WireIngress, &f);
    let f = tcp(net.client(1), 46001, vip, PORT_CLUSTER, TCP_SYN, 1, 0, b"");
    d.run("P1", "VIP at WireEgress", Hook::WireEgress, &f);
    d.run("P1", "VIP at FromPod", Hook::FromPod, &f);
    d.run(
        "P1",
        "ICMP echo to VIP",
        Hook::WireIngress,
        &icmp_echo(net.client(1), vip),
    );
    let f = tcp(net.pod(1), TARGET, net.node(), 61000, TCP_ACK, 1, 1, b"");
    d.run("P1", "stray reply", Hook::FromPod, &f);

    // P6: nothing serves the frontend.
    let f = tcp(net.client(1), 47000, vip, PORT_NONE, TCP_SYN, 77, 0, b"");
    d.run("P6", "SYN, no endpoint", Hook::WireIngress, &f);
    let f = tcp(
        net.client(1),
        47001,
        vip,
        PORT_NONE,
        TCP_ACK | TCP_PSH,
        77,
        99,
        b"data",
    );
    d.run("P6", "data, no endpoint", Hook::WireIngress, &f);
    let f = tcp(net.client(1), 47002, vip, PORT_NONE, TCP_FIN, 77, 0, b"bye");
    d.run("P6", "FIN, no endpoint", Hook::WireIngress, &f);
    let f = tcp(net.client(1), 47003, vip, PORT_NONE, TCP_RST, 77, 0, b"");
    d.run("P6", "RST, no endpoint", Hook::WireIngress, &f);
    for len in [0usize, 1, 8, 100] {
        let f = udp(net.client(1), 47100, vip, PORT_UDP_NONE, &vec![0x5a; len]);
        d.run("P6", "UDP, no endpoint", Hook::WireIngress, &f);
    }
    let f = tcp(
        net.client(1),
        47200,
        vip,
        PORT_BAD_FAMILY,
        TCP_SYN,
        1,
        0,
        b"",
    );
    d.run("P6", "endpoint of the other family", Hook::WireIngress, &f);
}

/// Frames a bridge flooded to this node, addressed to another host: passed
/// untouched at both ingress hooks, whatever they carry; broadcast and
/// multicast destinations are not another host's.
fn flooded(d: &mut Driver, net: Net) {
    let vip = net.vip();
    for (port, what) in [
        (PORT_CLUSTER, "SYN to a Cluster VIP"),
        (PORT_LOCAL, "SYN to a Local VIP, pod on this node"),
        (PORT_NONE, "SYN, no endpoint"),
    ] {
        let f = tcp(net.client(40), 48000, vip, port, TCP_SYN, 1, 0, b"");
        d.run(
            "flooded",
            what,
            Hook::WireIngress,
            &with_dst_mac(f, OTHER_MAC),
        );
    }
    let f = udp(net.client(40), 48001, vip, PORT_UDP_NONE, b"x");
    d.run(
        "flooded",
        "UDP, no endpoint",
        Hook::WireIngress,
        &with_dst_mac(f, OTHER_MAC),
    );
    let f = tcp(net.pod(1), TARGET, net.node(), SNAT_MIN, TCP_ACK, 1, 2, b"");
    d.run(
        "flooded",
        "pod reply",
        Hook::FromPod,
        &with_dst_mac(f, OTHER_MAC),
    );
    let f = tcp(net.client(41), 48002, vip, PORT_CLUSTER, TCP_SYN, 1, 0, b"");
    d.run(
        "flooded",
        "to the node, at WireEgress",
        Hook::WireEgress,
        &with_dst_mac(f.clone(), OTHER_MAC),
    );
    d.run(
        "flooded",
        "broadcast MAC",
        Hook::WireIngress,
        &with_dst_mac(f, [0xff; 6]),
    );
    let f = tcp(net.client(42), 48003, vip, PORT_CLUSTER, TCP_SYN, 1, 0, b"");
    d.run(
        "flooded",
        "multicast MAC",
        Hook::WireIngress,
        &with_dst_mac(f, [1, 0, 0x5e, 0, 0, 1]),
    );
}

fn odd_frames(d: &mut Driver, net: Net) {
    let vip = net.vip();
    let syn = tcp(net.client(8), 48000, vip, PORT_CLUSTER, TCP_SYN, 1, 0, b"");
    let dgram = udp(net.client(8), 48001, vip, PORT_UDP, &[7; 64]);

    // Fragments.
    if net.v6 {
        let first = v6_ext(&dgram, 44, 0, true);
        d.run(
            "fragment",
            "first fragment to VIP",
            Hook::WireIngress,
            &first,
        );
        let later = v6_ext(&dgram, 44, 8, false);
        d.run(
            "fragment",
            "later fragment to VIP",
            Hook::WireIngress,
            &later,
        );
        let other = udp(net.client(8), 48001, net.other(), PORT_UDP, &[7; 64]);
        d.run(
            "fragment",
            "fragment elsewhere",
            Hook::WireIngress,
            &v6_ext(&other, 44, 8, true),
        );
        d.run("fragment", "fragment at FromPod", Hook::FromPod, &later);
        // Hop-by-hop options are skipped; the flow is translated.
        let hbh = v6_ext(&syn, 0, 0, false);
        d.run("P2", "hop-by-hop options", Hook::WireIngress, &hbh);
        // A routing header is not handled.
        d.run(
            "malformed",
            "routing header",
            Hook::WireIngress,
            &v6_ext(&syn, 43, 0, false),
        );
    } else {
        d.run(
            "fragment",
            "first fragment to VIP",
            Hook::WireIngress,
            &v4_fragment(dgram.clone(), true, 0),
        );
        d.run(
            "fragment",
            "later fragment to VIP",
            Hook::WireIngress,
            &v4_fragment(dgram.clone(), false, 8),
        );
        d.run(
            "fragment",
            "middle fragment to VIP",
            Hook::WireIngress,
            &v4_fragment(syn.clone(), true, 3),
        );
        let other = udp(net.client(8), 48001, net.other(), PORT_UDP, &[7; 64]);
        d.run(
            "fragment",
            "fragment elsewhere",
            Hook::WireIngress,
            &v4_fragment(other, true, 0),
        );
        d.run(
            "fragment",
            "fragment at WireEgress",
            Hook::WireEgress,
            &v4_fragment(dgram.clone(), true, 0),
        );
        // IPv4 options.
        let mut opt = syn[..34].to_vec();
        opt[14] = 0x46;
        let tl = u16::from_be_bytes([opt[16], opt[17]]) + 4;
        opt[16..18].copy_from_slice(&tl.to_be_bytes());
        opt.extend_from_slice(&[1, 1, 1, 0]);
        opt.extend_from_slice(&syn[34..]);
        ipv4_header_csum(&mut opt[14..38]);
        d.run("P2", "IPv4 options", Hook::WireIngress, &opt);
    }

    // VLAN tagged.
    let tagged = vlan(
        &tcp(net.client(8), 48002, vip, PORT_CLUSTER, TCP_SYN, 1, 0, b""),
        7,
    );
    d.run("P2", "VLAN tagged SYN", Hook::WireIngress, &tagged);

    // Truncated: cut anywhere from the end of the Ethernet header on
    // (a TC hook never sees less than an Ethernet header).
    let l3 = 14;
    let ip_len = if net.v6 { 40 } else { 20 };
    for cut in [
        l3,
        l3 + 1,
        l3 + 8,
        l3 + ip_len - 1,
        l3 + ip_len,
        l3 + ip_len + 4,
        l3 + ip_len + 19,
        syn.len() - 1,
    ] {
        d.run("truncated", "SYN cut short", Hook::WireIngress, &syn[..cut]);
        d.run(
            "truncated",
            "VLAN-tagged SYN cut short",
            Hook::WireIngress,
            &vlan(&syn[..cut], 9),
        );
    }
    for cut in [l3 + ip_len + 4, l3 + ip_len + 7, dgram.len() - 10] {
        d.run(
            "truncated",
            "UDP cut short",
            Hook::WireIngress,
            &dgram[..cut],
        );
    }

    // Malformed headers.
    let mut bad = syn.clone();
    bad[14] = (bad[14] & 0x0f) | 0x50; // version 5
    d.run("malformed", "bad IP version", Hook::WireIngress, &bad);
    let mut bad = syn.clone();
    bad[14 + ip_len + 12] = 0x20; // TCP data offset 2
    d.run("malformed", "TCP header too short", Hook::WireIngress, &bad);
    let mut bad = syn.clone();
    bad[14 + ip_len + 12] = 0xf0; // TCP data offset 15, past the end
    d.run(
        "malformed",
        "TCP header past the end",
        Hook::WireIngress,
        &bad,
    );
    let mut bad = dgram.clone();
    bad[14 + ip_len + 4] = 0xff; // UDP length past the end
    d.run("malformed", "UDP length too long", Hook::WireIngress, &bad);
    let mut bad = syn.clone();
    if net.v6 {
        bad[18] = 0xff; // payload length past the end
    } else {
        bad[16] = 0xff; // total length past the end
        ipv4_header_csum(&mut bad[14..34]);
    }
    d.run(
        "malformed",
        "IP length past the end",
        Hook::WireIngress,
        &bad,
    );
    if !net.v6 {
        let mut bad = syn.clone();
        bad[14] = 0x44; // IHL 4
        d.run("malformed", "IHL too small", Hook::WireIngress, &bad);
    }
    // Ethernet padding after a short IP packet is fine.
    let mut padded = udp(net.client(8), 48003, vip, PORT_UDP, b"");
    padded.resize(padded.len().max(60) + 4, 0);
    d.run("P2", "Ethernet padding", Hook::WireIngress, &padded);
}

/// Random byte flips in the headers of valid frames: whatever the program
/// makes of them, both builds must make the same.
fn mutations(d: &mut Driver, rng: &mut Rng, count: usize) {
    let mut bases = Vec::new();
    for net in [Net { v6: false }, Net { v6: true }] {
        let vip = net.vip();
        bases.push((
            tcp(
                net.client(9),
                49000,
                vip,
                PORT_CLUSTER,
                TCP_SYN,
                1,
                0,
                b"abc",
            ),
            Hook::WireIngress,
        ));
        bases.push((
            udp(net.client(9), 49001, vip, PORT_UDP, b"abcdefgh"),
            Hook::WireIngress,
        ));
        bases.push((
            tcp(net.client(9), 49002, vip, PORT_NONE, TCP_ACK, 1, 2, b"x"),
            Hook::WireIngress,
        ));
        bases.push((
            udp(net.client(9), 49003, vip, PORT_UDP_NONE, b"abcdefgh"),
            Hook::WireIngress,
        ));
        bases.push((
            tcp(net.pod(1), TARGET, net.node(), SNAT_MIN, TCP_ACK, 1, 2, b""),
            Hook::FromPod,
        ));
    }
    for _ in 0..count {
        let (base, hook) = &bases[rng.below(bases.len())];
        let mut f = base.clone();
        for _ in 0..1 + rng.below(3) {
            let at = 12 + rng.below(f.len().min(80) - 12);
            f[at] ^= 1 << rng.below(8);
        }
        d.run("mutated", "header bit flips", *hook, &f);
    }
}

fn exhaustion(d: &mut Driver) {
    // One SNAT port only: the second flow to the same endpoint finds it
    // taken; no IPv6 node address: IPv6 Cluster flows cannot be SNATed.
    let mut node = node_config();
    node.snat_port_min = 64000;
    node.snat_port_max = 64000;
    node.addr6 = [0; 16];
    d.set_node(node);
    let v4n = Net { v6: false };
    for i in 0..3u16 {
        let f = tcp(
            v4n.client(30 + i),
            51000,
            v4n.vip(),
            PORT_READY_FIRST,
            TCP_SYN,
            1,
            0,
            b"",
        );
        d.run("P3", "SYN, one SNAT port", Hook::WireIngress, &f);
    }
    let v6n = Net { v6: true };
    let f = tcp(
        v6n.client(30),
        51000,
        v6n.vip(),
        PORT_CLUSTER,
        TCP_SYN,
        1,
        0,
        b"",
    );
    d.run("P3", "SYN, no node address", Hook::WireIngress, &f);
    let f = tcp(
        v6n.client(30),
        51001,
        v6n.vip(),
        PORT_LOCAL,
        TCP_SYN,
        1,
        0,
        b"",
    );
    d.run(
        "P4",
        "Local SYN, no node address needed",
        Hook::WireIngress,
        &f,
    );
    d.set_node(node_config());
}

/// P3: SNAT ports of flows that ended, handed on as the endpoint's
/// TIME_WAIT allows (timestamps read from the options), on a two-port
/// range; and option areas a parser could trip on.
/// A SYN from client `client` (port 52000) to the Cluster VIP with
/// timestamp `ts`: the translated frame's tuple if it passed.
fn ts_syn(
    d: &mut Driver,
    net: Net,
    name: &str,
    client: u16,
    ts: u32,
) -> Option<(Addr, u16, Addr, u16)> {
    let f = tcp_opts(
        net.client(client),
        52000,
        net.vip(),
        PORT_CLUSTER,
        TCP_SYN,
        10,
        0,
        ts,
        None,
    );
    let (_, out) = d.run("P3", name, Hook::WireIngress, &f);
    tuple(&out)
}

/// A flow from client `client` at client time `ts` that the endpoint
/// closes first, to its end: handshake, FINs both ways (the client's at
/// seq 11) and the last ACK.
fn closed_by_the_endpoint(d: &mut Driver, net: Net, client: u16, ts: u32) {
    let vip = net.vip();
    let Some((node_addr, snat, ep, ep_port)) = ts_syn(d, net, "SYN with timestamp", client, ts)
    else {
        return;
    };
    let back = |flags, seq, ack| tcp(ep, ep_port, node_addr, snat, flags, seq, ack, b"");
    let fwd = |flags, seq, ack, ts| {
        tcp_opts(
            net.client(client),
            52000,
            vip,
            PORT_CLUSTER,
            flags,
            seq,
            ack,
            ts,
            None,
        )
    };
    d.run(
        "P3",
        "SYN-ACK",
        Hook::WireIngress,
        &back(TCP_SYN | TCP_ACK, 500, 11),
    );
    d.run(
        "P3",
        "ACK with timestamp",
        Hook::WireIngress,
        &fwd(TCP_ACK, 11, 501, ts + 1),
    );
    d.run(
        "P3",
        "endpoint FIN",
        Hook::WireIngress,
        &back(TCP_FIN | TCP_ACK, 501, 11),
    );
    let fin = fwd(TCP_FIN | TCP_ACK, 11, 502, ts + 2);
    d.run("P3", "client FIN with timestamp", Hook::WireIngress, &fin);
    d.run("P3", "last ACK", Hook::WireIngress, &back(TCP_ACK, 502, 12));
}

fn time_wait_reuse(d: &mut Driver, net: Net) {
    let mut node = node_config();
    node.snat_port_min = 64100;
    node.snat_port_max = 64101;
    d.set_node(node);
    let vip = net.vip();
    let syn = |d: &mut Driver, name: &str, client: u16, ts: u32| ts_syn(d, net, name, client, ts);
    // Two flows that the endpoint closes first, at client times 1 000 and
    // 9 000, each to its end: FINs both ways and the last ACK.
    for (client, ts) in [(40u16, 1_000u32), (41, 9_000)] {
        closed_by_the_endpoint(d, net, client, ts);
    }
    // Newer than the first only, newer than both, older than both.
    syn(d, "SYN a TIME_WAIT takes", 42, 5_000);
    syn(d, "SYN both TIME_WAITs take", 43, 20_000);
    syn(d, "SYN no TIME_WAIT takes", 44, 10);
    // Option areas: EOL first, a zero length, a length past the header,
    // a timestamp of the wrong length, NOPs only.
    let odd: [&[u8]; 5] = [
        &[0, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0],
        &[8, 0, 0, 0],
        &[1, 1, 8, 30, 0, 0, 0, 1],
        &[8, 6, 0, 0, 0, 1, 1, 1],
        &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    ];
    for (i, raw) in odd.iter().enumerate() {
        let f = tcp_opts(
            net.client(50 + i as u16),
            52000,
            vip,
            PORT_CLUSTER,
            TCP_SYN,
            10,
            0,
            0,
            Some(raw),
        );
        d.run("P3", "SYN with odd options", Hook::WireIngress, &f);
    }
    d.set_node(node_config());
}

/// Resets from a client after its FIN, one port held by the endpoint's
/// TIME_WAIT: one short of the sequence number the TIME_WAIT expects
/// leaves the port held against an older SYN; exactly that number ends it.
fn stale_resets(d: &mut Driver, net: Net) {
    let mut node = node_config();
    node.snat_port_min = 64200;
    node.snat_port_max = 64200;
    d.set_node(node);
    closed_by_the_endpoint(d, net, 60, 1_000);
    let rst = |seq| {
        tcp(
            net.client(60),
            52000,
            net.vip(),
            PORT_CLUSTER,
            TCP_RST,
            seq,
            0,
            b"",
        )
    };
    d.run("P3", "stale reset after FIN", Hook::WireIngress, &rst(11));
    ts_syn(d, net, "SYN after a stale reset", 61, 500);
    d.run("P3", "reset TIME_WAIT takes", Hook::WireIngress, &rst(12));
    ts_syn(d, net, "SYN after the reset", 62, 500);
    d.set_node(node_config());
}

#[test]
fn kernel_and_host_agree() {
    agree_on_the_corpus(0);
}

/// The whole corpus again with every kernel run on a `CHECKSUM_COMPLETE`
/// skb (what a NIC's receive checksum or GRO hands the wire hook): the
/// translations, resets and ICMP replies must keep `skb->csum` in step
/// with what they write, or the run fails; the output must still be the
/// host's byte for byte.
#[test]
fn kernel_and_host_agree_on_checksum_complete_skbs() {
    let d = Driver::new();
    let probe = udp(
        v4_mapped([198, 18, 0, 1]),
        1,
        v4_mapped([198, 18, 0, 2]),
        2,
        b"x",
    );
    let name = PROGRAMS[0].0;
    let prog: &SchedClassifier = d.kernel.bpf.program(name).unwrap().try_into().unwrap();
    if let Err(e) = test_run_with_flags(prog, &probe, CHECKSUM_COMPLETE) {
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EINVAL),
            "probing BPF_F_TEST_SKB_CHECKSUM_COMPLETE: {e}"
        );
        println!("SKIPPED: this kernel has no BPF_F_TEST_SKB_CHECKSUM_COMPLETE (Linux 6.13+)");
        return;
    }
    drop(d);
    agree_on_the_corpus(CHECKSUM_COMPLETE);
}

fn agree_on_the_corpus(flags: u32) {
    let mut d = Driver::new();
    d.flags = flags;
    let mut rng = Rng(0x5eed_d1ff);
    for net in [Net { v6: false }, Net { v6: true }] {
        tcp_lifecycles(&mut d, net);
        d.compare_maps(&format!("TCP flows ({})", net.tag()));
        udp_flows(&mut d, net);
        local_delivery(&mut d, net);
        rejections(&mut d, net);
        flooded(&mut d, net);
        odd_frames(&mut d, net);
        d.compare_maps(&format!("odd frames ({})", net.tag()));
        time_wait_reuse(&mut d, net);
        d.compare_maps(&format!("TIME_WAIT reuse ({})", net.tag()));
        stale_resets(&mut d, net);
        d.compare_maps(&format!("stale resets ({})", net.tag()));
        offloaded(&mut d, net);
        d.compare_maps(&format!("offloaded frames ({})", net.tag()));
    }
    d.run("non-IP", "ARP", Hook::WireIngress, &arp());
    let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 0xa, 0x88, 0xcc];
    lldp.extend_from_slice(&[0; 32]);
    d.run("non-IP", "LLDP", Hook::WireIngress, &lldp);
    d.run(
        "non-IP",
        "Ethernet header only",
        Hook::WireEgress,
        &lldp[..14],
    );
    mutations(&mut d, &mut rng, 120);
    d.compare_maps("mutations");
    exhaustion(&mut d);
    d.compare_maps("the end");

    println!(
        "differential (test-run flags {flags:#x}): {} frames, {} conntrack entries, {} affinity entries, {} mismatches",
        d.frames,
        d.host.ct_len(),
        d.host.affinity_len(),
        d.mismatches.len()
    );
    println!(
        "  {} frames the kernel's test run refuses (IP header cut short; run VLAN-tagged instead)",
        d.skipped.len()
    );
    if flags & CHECKSUM_COMPLETE != 0 {
        println!(
            "  {} frames resized by the program (P6 answers) ran without CHECKSUM_COMPLETE",
            d.resized
        );
    }
    println!("  rules:  {:?}", d.rules);
    println!("  events: {:?}", d.events);
    println!("  verdicts: {:?}", d.verdicts);
    for m in d.mismatches.iter().take(40) {
        println!("  MISMATCH frame {} {}: {}", m.frame, m.name, m.what);
    }
    assert!(d.frames >= 300, "the corpus has only {} frames", d.frames);
    let required = [
        Event::NotIp,
        Event::Unhandled,
        Event::NotService,
        Event::Fragment,
        Event::Malformed,
        Event::ReplyNat,
        Event::Established,
        Event::NewFlow,
        Event::Reset,
        Event::Unreachable,
        Event::NoEndpoint,
        Event::NoSnatPort,
        Event::NoNodeAddr,
        Event::BadEndpoint,
        Event::OtherHost,
        Event::Spoofed,
    ];
    for e in required {
        assert!(
            d.events.contains_key(e.name()),
            "the corpus never produced {e:?}"
        );
    }
    for v in ["pass", "drop", "redirect"] {
        assert!(
            d.verdicts.contains_key(v),
            "the corpus never produced the verdict {v}"
        );
    }
    if let Some(m) = d.mismatches.first() {
        panic!(
            "{} mismatches between the kernel and the host builds; first: frame {} {}: {}",
            d.mismatches.len(),
            m.frame,
            m.name,
            m.what
        );
    }
}
