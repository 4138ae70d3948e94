//! Crafted frames (etherparse) and a decoder that re-checks every checksum.
#![allow(dead_code)]

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use sluice_datapath::env::Clock;
use sluice_datapath::host::{HostMaps, ServiceSpec, ServiceTables, TestClock, VecPacket};
use sluice_datapath::maps::{v4_mapped, Addr, Endpoint, NodeConfig, ServiceKey};
use sluice_datapath::{process, Hook, Outcome};

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// The link [`Env::run`] hands frames in on: at `FromPod`, the link of
/// the pod that sent them, which is only believed for addresses published
/// for it (`set_local_link` with this ifindex).
pub const POD_LINK: u32 = 7;

pub const SNAT_MIN: u16 = 32768;
pub const SNAT_MAX: u16 = 60999;

/// Addresses of one family: 198.18.0.0/15 or fd00::/8 only.
#[derive(Clone, Copy, Debug)]
pub struct Net {
    pub v6: bool,
}

impl Net {
    pub fn addr(&self, host: u16) -> Addr {
        if self.v6 {
            let mut a = [0u8; 16];
            a[0] = 0xfd;
            a[14] = (host >> 8) as u8;
            a[15] = host as u8;
            a
        } else {
            v4_mapped([198, 18, (host >> 8) as u8, host as u8])
        }
    }
    pub fn client(&self) -> Addr {
        self.addr(0x0010)
    }
    pub fn client_n(&self, n: u16) -> Addr {
        self.addr(0x0100 + n)
    }
    pub fn vip(&self) -> Addr {
        if self.v6 {
            let mut a = self.addr(0x0064);
            a[1] = 0xff;
            a
        } else {
            v4_mapped([198, 19, 0, 100])
        }
    }
    pub fn node(&self) -> Addr {
        self.addr(0x0002)
    }
    pub fn pod(&self, n: u16) -> Addr {
        self.addr(0x0a00 + n)
    }
    pub fn other(&self) -> Addr {
        self.addr(0x0050)
    }
}

pub fn v4(a: &Addr) -> [u8; 4] {
    [a[12], a[13], a[14], a[15]]
}

pub fn ep(addr: Addr, port: u16) -> Endpoint {
    Endpoint {
        addr,
        port,
        flags: 0,
        _pad: 0,
    }
}

pub fn svc_key(addr: Addr, port: u16, proto: u8) -> ServiceKey {
    ServiceKey {
        addr,
        port,
        proto,
        _pad: 0,
    }
}

pub fn spec(
    key: ServiceKey,
    flags: u32,
    ready: Vec<Endpoint>,
    terminating: Vec<Endpoint>,
) -> ServiceSpec {
    ServiceSpec {
        key,
        id: 0,
        flags,
        affinity_timeout_s: 0,
        ready,
        terminating,
    }
}

pub struct Env {
    pub maps: HostMaps,
    pub clock: TestClock,
}

impl Env {
    pub fn new(net: Net, specs: &[ServiceSpec]) -> Self {
        let mut maps = HostMaps::with_capacity(1 << 16, 1 << 12);
        maps.set_node(NodeConfig {
            addr4: if net.v6 { [0; 16] } else { net.node() },
            addr6: if net.v6 { net.node() } else { [0; 16] },
            snat_port_min: SNAT_MIN,
            snat_port_max: SNAT_MAX,
            _pad: 0,
        });
        maps.replace_services(ServiceTables::build(specs));
        Self {
            maps,
            clock: TestClock::new(42),
        }
    }

    pub fn set_services(&mut self, specs: &[ServiceSpec]) {
        self.maps.replace_services(ServiceTables::build(specs));
    }

    pub fn run(&mut self, frame: &[u8], hook: Hook) -> (Outcome, Vec<u8>) {
        self.run_on(frame, hook, POD_LINK)
    }

    /// [`Env::run`] on a frame that came in on link `link`.
    pub fn run_on(&mut self, frame: &[u8], hook: Hook, link: u32) -> (Outcome, Vec<u8>) {
        let mut p = VecPacket::new(frame.to_vec()).from_link(link);
        let o = process(&mut p, &mut self.maps, &mut self.clock, hook);
        (o, p.into_inner())
    }

    /// [`Env::run`] on a frame that arrived addressed to another host's MAC
    /// (the kernel's `PACKET_OTHERHOST`: flooded by a bridge).
    pub fn run_flooded(&mut self, frame: &[u8], hook: Hook) -> (Outcome, Vec<u8>) {
        let mut p = VecPacket::new(frame.to_vec()).flooded().from_link(POD_LINK);
        let o = process(&mut p, &mut self.maps, &mut self.clock, hook);
        (o, p.into_inner())
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }
}

#[derive(Clone, Debug, Default)]
pub struct TcpSeg {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub payload: Vec<u8>,
    /// A timestamp option's `TSval`, laid out as Linux sends it.
    pub ts: Option<u32>,
}

impl TcpSeg {
    pub fn with_ts(self, ts: u32) -> Self {
        TcpSeg {
            ts: Some(ts),
            ..self
        }
    }
}

pub fn syn(seq: u32) -> TcpSeg {
    TcpSeg {
        flags: TCP_SYN,
        seq,
        ..Default::default()
    }
}

pub fn seg(flags: u8, seq: u32, ack: u32, payload: &[u8]) -> TcpSeg {
    TcpSeg {
        flags,
        seq,
        ack,
        payload: payload.to_vec(),
        ts: None,
    }
}

fn ip_builder(
    v6: bool,
    src: &Addr,
    dst: &Addr,
) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
    let b = PacketBuilder::ethernet2(MAC_A, MAC_B);
    if v6 {
        b.ipv6(*src, *dst, 64)
    } else {
        b.ipv4(v4(src), v4(dst), 64)
    }
}

pub fn tcp(net: Net, src: Addr, sport: u16, dst: Addr, dport: u16, s: &TcpSeg) -> Vec<u8> {
    let mut b = ip_builder(net.v6, &src, &dst).tcp(sport, dport, s.seq, 65535);
    if s.flags & TCP_SYN != 0 {
        b = b.syn();
    }
    if s.flags & TCP_ACK != 0 {
        b = b.ack(s.ack);
    }
    if s.flags & TCP_FIN != 0 {
        b = b.fin();
    }
    if s.flags & TCP_RST != 0 {
        b = b.rst();
    }
    if s.flags & TCP_PSH != 0 {
        b = b.psh();
    }
    if let Some(ts) = s.ts {
        use etherparse::TcpOptionElement::*;
        // Linux's layouts: MSS, SACK permitted, timestamp, NOP, window
        // scale on a SYN; two NOPs and the timestamp on other segments.
        let opts: &[_] = if s.flags & TCP_SYN != 0 {
            &[
                MaximumSegmentSize(1460),
                SelectiveAcknowledgementPermitted,
                Timestamp(ts, 0),
                Noop,
                WindowScale(7),
            ]
        } else {
            &[Noop, Noop, Timestamp(ts, 77)]
        };
        b = b.options(opts).expect("options fit");
    }
    let mut out = Vec::new();
    b.write(&mut out, &s.payload).unwrap();
    out
}

pub fn udp(net: Net, src: Addr, sport: u16, dst: Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let b = ip_builder(net.v6, &src, &dst).udp(sport, dport);
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

/// What a frame says, after every checksum was recomputed and compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub src: Addr,
    pub dst: Addr,
    pub ttl: u8,
    pub l4: L4,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp {
        sport: u16,
        dport: u16,
        flags: u8,
        seq: u32,
        ack: u32,
        payload: Vec<u8>,
    },
    Udp {
        sport: u16,
        dport: u16,
        csum: u16,
        payload: Vec<u8>,
    },
    Icmp {
        ty: u8,
        code: u8,
        payload: Vec<u8>,
    },
}

impl Decoded {
    pub fn ports(&self) -> (u16, u16) {
        match &self.l4 {
            L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport, .. } => (*sport, *dport),
            L4::Icmp { .. } => (0, 0),
        }
    }
}

/// Decode and verify: IPv4 header checksum, TCP/UDP checksum with the
/// pseudo-header, ICMP (no pseudo-header) and ICMPv6 (pseudo-header).
pub fn decode(frame: &[u8]) -> Decoded {
    let sp = SlicedPacket::from_ethernet(frame).expect("frame parses");
    let (src, dst, ttl, v6) = match sp.net.as_ref().expect("ip") {
        NetSlice::Ipv4(ip) => {
            let h = ip.header().to_header();
            assert_eq!(
                h.header_checksum,
                h.calc_header_checksum(),
                "IPv4 header checksum"
            );
            (
                v4_mapped(h.source),
                v4_mapped(h.destination),
                h.time_to_live,
                false,
            )
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header().to_header();
            (h.source, h.destination, h.hop_limit, true)
        }
    };
    let l4 = match sp.transport.expect("transport") {
        TransportSlice::Tcp(t) => {
            let want = if v6 {
                t.calc_checksum_ipv6(src, dst).unwrap()
            } else {
                t.calc_checksum_ipv4(v4(&src), v4(&dst)).unwrap()
            };
            assert_eq!(t.checksum(), want, "TCP checksum");
            let mut flags = 0;
            for (on, bit) in [
                (t.fin(), TCP_FIN),
                (t.syn(), TCP_SYN),
                (t.rst(), TCP_RST),
                (t.psh(), TCP_PSH),
                (t.ack(), TCP_ACK),
            ] {
                if on {
                    flags |= bit;
                }
            }
            L4::Tcp {
                sport: t.source_port(),
                dport: t.destination_port(),
                flags,
                seq: t.sequence_number(),
                ack: t.acknowledgment_number(),
                payload: t.payload().to_vec(),
            }
        }
        TransportSlice::Udp(u) => {
            let h = u.to_header();
            if v6 {
                let want = h.calc_checksum_ipv6_raw(src, dst, u.payload()).unwrap();
                assert_eq!(u.checksum(), want, "UDP/IPv6 checksum");
            } else if u.checksum() != 0 {
                let want = h
                    .calc_checksum_ipv4_raw(v4(&src), v4(&dst), u.payload())
                    .unwrap();
                assert_eq!(u.checksum(), want, "UDP/IPv4 checksum");
            }
            L4::Udp {
                sport: u.source_port(),
                dport: u.destination_port(),
                csum: u.checksum(),
                payload: u.payload().to_vec(),
            }
        }
        TransportSlice::Icmpv4(i) => {
            let want = i.icmp_type().calc_checksum(i.payload());
            assert_eq!(i.checksum(), want, "ICMP checksum");
            L4::Icmp {
                ty: i.type_u8(),
                code: i.code_u8(),
                payload: i.payload().to_vec(),
            }
        }
        TransportSlice::Icmpv6(i) => {
            assert!(i.is_checksum_valid(src, dst), "ICMPv6 checksum");
            L4::Icmp {
                ty: i.type_u8(),
                code: i.code_u8(),
                payload: i.payload().to_vec(),
            }
        }
    };
    Decoded { src, dst, ttl, l4 }
}

/// Insert an 802.1Q tag after the MAC addresses.
pub fn vlan_tag(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    out.extend_from_slice(&[0x81, 0x00]);
    out.extend_from_slice(&vid.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    out
}

/// Rewrite the IPv4 header checksum of an untagged frame.
pub fn fix_ipv4_csum(frame: &mut [u8]) {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    frame[24] = 0;
    frame[25] = 0;
    let mut s = 0u32;
    for c in frame[14..14 + ihl].chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    let c = !(s as u16);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

/// Add 4 bytes of IPv4 options (NOPs) to an untagged IPv4 frame.
pub fn with_ipv4_options(frame: &[u8]) -> Vec<u8> {
    let mut out = frame[..34].to_vec();
    out.extend_from_slice(&[1, 1, 1, 1]);
    out.extend_from_slice(&frame[34..]);
    out[14] = 0x46;
    let total = u16::from_be_bytes([out[16], out[17]]) + 4;
    out[16..18].copy_from_slice(&total.to_be_bytes());
    fix_ipv4_csum(&mut out);
    out
}

/// Set IPv4 fragment fields of an untagged frame.
pub fn ipv4_fragment(frame: &[u8], more: bool, offset8: u16) -> Vec<u8> {
    let mut out = frame.to_vec();
    let v = (if more { 0x2000 } else { 0 }) | (offset8 & 0x1fff);
    out[20..22].copy_from_slice(&v.to_be_bytes());
    fix_ipv4_csum(&mut out);
    out
}

/// Insert an IPv6 fragment header into an untagged IPv6 frame.
pub fn ipv6_fragment(frame: &[u8], more: bool, offset8: u16) -> Vec<u8> {
    let next = frame[20];
    let mut out = frame[..54].to_vec();
    let fo = (offset8 << 3) | u16::from(more);
    out.extend_from_slice(&[next, 0]);
    out.extend_from_slice(&fo.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x12, 0x34]);
    out.extend_from_slice(&frame[54..]);
    out[20] = 44;
    let pl = u16::from_be_bytes([out[18], out[19]]) + 8;
    out[18..20].copy_from_slice(&pl.to_be_bytes());
    out
}
