//! Raw Ethernet frames for tests that attack a node: an `AF_PACKET` socket
//! on one link of the calling thread's namespace (send, or sniff what
//! arrives), builders for the headers a test forges (checksums computed, so
//! a frame is only as wrong as the test means it), a small deterministic
//! PRNG, and [`Hostile`], a generator of frames a hostile pod would send.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_ARP: u16 = 0x0806;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_ICMPV6: u8 = 58;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// An `AF_PACKET` raw socket bound to one link.
pub struct RawLink {
    fd: OwnedFd,
    ifindex: i32,
}

/// One frame [`RawLink::recv`] read, and whether the link sent it (a
/// sniffer sees its own namespace's outgoing frames too).
pub struct Received {
    pub len: usize,
    pub outgoing: bool,
}

impl RawLink {
    /// Open on `ifname` of the calling thread's network namespace (call it
    /// inside [`crate::in_ns`]). `sniff`: receive every frame of the link;
    /// otherwise the socket only sends (protocol 0: nothing is queued to it).
    pub fn open(ifname: &str, sniff: bool) -> io::Result<RawLink> {
        let proto = if sniff {
            (libc::ETH_P_ALL as u16).to_be()
        } else {
            0
        };
        // SAFETY: plain socket(2); the result is checked and then owned.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let name = std::ffi::CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in link name"))?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        let ifindex = i32::try_from(ifindex)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "ifindex too large"))?;
        let mut sll = sockaddr_ll(ifindex);
        sll.sll_protocol = proto;
        // SAFETY: bind with a valid sockaddr_ll of the right length.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RawLink { fd, ifindex })
    }

    /// Send `frame` as it is (Ethernet header included).
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        let sll = sockaddr_ll(self.ifindex);
        // SAFETY: sendto with our buffer and a valid sockaddr_ll.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Block at most `d` in [`RawLink::recv`].
    pub fn set_read_timeout(&self, d: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: a timeval option on our socket.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// One frame into `buf` (cut to its size).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: recvfrom into our buffer and address.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                &mut from as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                &mut len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Received {
            len: n as usize,
            outgoing: from.sll_pkttype == libc::PACKET_OUTGOING,
        })
    }
}

fn sockaddr_ll(ifindex: i32) -> libc::sockaddr_ll {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex;
    sll.sll_halen = 6;
    sll
}

/// xorshift64*: deterministic from its seed, so a failing flood can be
/// sent again frame for frame.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // Zero is the one state xorshift never leaves.
        XorShift(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// Uniform-ish in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One's-complement sum of `data` on top of `sum`, not yet folded.
fn sum16(data: &[u8], mut sum: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*last) << 8);
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum16(data, 0))
}

fn pseudo_sum(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> u32 {
    let mut p = Vec::with_capacity(40);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            p.extend_from_slice(&v6(src).octets());
            p.extend_from_slice(&v6(dst).octets());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
    }
    sum16(&p, 0)
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Fill in the L4 checksum at `csum_off` of `seg` (TCP, UDP, ICMPv6 use the
/// pseudo-header; ICMPv4 does not).
pub fn set_l4_checksum(src: IpAddr, dst: IpAddr, proto: u8, seg: &mut [u8], csum_off: usize) {
    if seg.len() < csum_off + 2 {
        return;
    }
    seg[csum_off] = 0;
    seg[csum_off + 1] = 0;
    let start = if proto == PROTO_ICMP {
        0
    } else {
        pseudo_sum(src, dst, proto, seg.len())
    };
    let mut c = fold(sum16(seg, start));
    if proto == PROTO_UDP && c == 0 {
        c = 0xffff;
    }
    seg[csum_off..csum_off + 2].copy_from_slice(&c.to_be_bytes());
}

/// A TCP segment with a correct checksum (no options).
#[allow(clippy::too_many_arguments)]
pub fn tcp(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut s = Vec::with_capacity(20 + payload.len());
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&seq.to_be_bytes());
    s.extend_from_slice(&ack.to_be_bytes());
    s.extend_from_slice(&[5 << 4, flags]);
    s.extend_from_slice(&64_240u16.to_be_bytes());
    s.extend_from_slice(&[0, 0, 0, 0]);
    s.extend_from_slice(payload);
    set_l4_checksum(src, dst, PROTO_TCP, &mut s, 16);
    s
}

/// A UDP datagram with a correct checksum.
pub fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(8 + payload.len());
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    s.extend_from_slice(&[0, 0]);
    s.extend_from_slice(payload);
    set_l4_checksum(src, dst, PROTO_UDP, &mut s, 6);
    s
}

/// An IPv4 header (20 bytes plus `options`, padded to 4) with a correct
/// checksum, then `payload`. `frag`: flags and offset as on the wire.
pub fn ipv4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    ttl: u8,
    frag: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut opts = options.to_vec();
    opts.resize(options.len().div_ceil(4) * 4, 0);
    opts.truncate(40);
    let ihl = 20 + opts.len();
    let total = ihl + payload.len();
    let mut p = Vec::with_capacity(total);
    p.push(0x40 | (ihl / 4) as u8);
    p.push(0);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&0x5e1du16.to_be_bytes());
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[ttl, proto, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&opts);
    let c = checksum(&p[..ihl]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// An IPv6 header, then `payload` (extension headers included, `next` the
/// first of them).
pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(40 + payload.len());
    p.extend_from_slice(&[0x60, 0, 0, 0]);
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, hop]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

/// An IP packet of `src`'s family carrying `l4` (proto `proto`), and its
/// ethertype. Mixed families take `dst` mapped into `src`'s.
pub fn ip(src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> (u16, Vec<u8>) {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (ETH_P_IP, ipv4(s, d, proto, 64, 0x4000, &[], l4)),
        _ => (ETH_P_IPV6, ipv6(v6(src), v6(dst), proto, 64, l4)),
    }
}

/// An Ethernet frame.
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The source address of an IP frame (one 802.1Q tag skipped), if whole.
pub fn ip_source(frame: &[u8]) -> Option<IpAddr> {
    let mut l3 = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    match ethertype {
        ETH_P_IP => {
            let b: [u8; 4] = frame.get(l3 + 12..l3 + 16)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        ETH_P_IPV6 => {
            let b: [u8; 16] = frame.get(l3 + 8..l3 + 24)?.try_into().ok()?;
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

/// Whether `hay` contains `needle`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// What a hostile pod knows and aims at, one family's worth each.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The pod's own MAC and the MAC its gateway answers from.
    pub own_mac: [u8; 6],
    pub gateway_mac: [u8; 6],
    /// The pod's own addresses (v4, v6).
    pub own: [IpAddr; 2],
    /// The IPv4 gateway the pod routes through (ARP claims aim at it).
    pub gateway4: Ipv4Addr,
    /// The Service's VIPs (v4, v6), its TCP and UDP ports.
    pub vips: [IpAddr; 2],
    pub tcp_port: u16,
    pub udp_port: u16,
    /// Addresses the pod pretends to be: other pods, the node, the client,
    /// the VIPs.
    pub spoofed: Vec<IpAddr>,
    /// Forged replies: (endpoint address:port the reply claims to come
    /// from, node address:port it goes to, TCP?). The ports of flows the
    /// node translates, known or guessed.
    pub replies: Vec<(std::net::SocketAddr, std::net::SocketAddr, bool)>,
    /// A SNAT port range to spray forged replies over.
    pub snat_ports: (u16, u16),
}

/// The kinds of frame [`Hostile`] sends, for the report.
pub const KINDS: [&str; 20] = [
    "random-short",
    "random-long",
    "odd-ethertype",
    "vlan-tagged",
    "ipv4-ihl-lt-5",
    "ipv4-bad-length",
    "ipv4-bad-csum",
    "ipv4-fragment",
    "ipv4-options",
    "tcp-bad-offset",
    "tcp-flood-vip",
    "udp-to-vip",
    "forged-reply",
    "spoofed-to-pod",
    "ipv6-truncated",
    "ipv6-ext-chain",
    "ipv6-fragment",
    "icmp-error",
    "arp-claim",
    "ndp-claim",
];

/// Frames a hostile pod sends: every one marked with `marker` where it has
/// a payload, so a sniffer elsewhere can tell them apart.
pub struct Hostile {
    pub rng: XorShift,
    pub t: Targets,
    pub marker: Vec<u8>,
}

impl Hostile {
    pub fn new(seed: u64, t: Targets, marker: &[u8]) -> Hostile {
        Hostile {
            rng: XorShift::new(seed),
            t,
            marker: marker.to_vec(),
        }
    }

    /// The next frame and the index of its kind in [`KINDS`].
    pub fn next_frame(&mut self) -> (usize, Vec<u8>) {
        let kind = self.rng.below(KINDS.len());
        let mut f = self.frame_of(kind);
        // Now and then a MAC the node does not own, or a forged source MAC.
        if f.len() >= 12 && self.rng.chance(16) {
            let b = self.rng.bytes(6);
            f[..6].copy_from_slice(&b);
        }
        if f.len() >= 12 && self.rng.chance(16) {
            let b = self.rng.bytes(6);
            f[6..12].copy_from_slice(&b);
        }
        (kind, f)
    }

    /// The addresses of one family the pod pretends to be.
    fn spoofed_in(&self, v4: bool) -> Vec<IpAddr> {
        self.t
            .spoofed
            .iter()
            .copied()
            .filter(|a| a.is_ipv4() == v4)
            .collect()
    }

    /// What ARP (`v4`) or NDP claims are made for: the gateway, the
    /// addresses the pod pretends to be, the VIP.
    fn claims(&self, v4: bool) -> Vec<IpAddr> {
        let gateway = if v4 {
            IpAddr::V4(self.t.gateway4)
        } else {
            IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1))
        };
        let mut c = vec![gateway];
        c.extend(self.spoofed_in(v4));
        c.push(self.t.vips[usize::from(!v4)]);
        c
    }

    fn src(&mut self, v4: bool) -> IpAddr {
        // Half from the pod's own address, half from one it is not.
        let own = self.t.own[usize::from(!v4)];
        let fam = self.spoofed_in(v4);
        if fam.is_empty() || self.rng.chance(2) {
            own
        } else {
            *self.rng.pick(&fam)
        }
    }

    fn payload(&mut self, max: usize) -> Vec<u8> {
        let mut p = self.marker.clone();
        let n = self.rng.below(max + 1);
        p.extend(self.rng.bytes(n));
        p
    }

    fn l2(&self, ethertype: u16, payload: &[u8]) -> Vec<u8> {
        eth(self.t.gateway_mac, self.t.own_mac, ethertype, payload)
    }

    fn tcp_to(&mut self, src: IpAddr, dst: IpAddr, dport: u16, flags: u8) -> Vec<u8> {
        let payload = self.payload(64);
        let sport = self.rng.next_u32() as u16;
        let (seq, ack) = (self.rng.next_u32(), self.rng.next_u32());
        tcp(src, dst, sport, dport, seq, ack, flags, &payload)
    }

    fn random_flags(&mut self) -> u8 {
        let any = self.rng.next_u32() as u8;
        *self.rng.pick(&[
            TCP_SYN,
            TCP_RST,
            TCP_FIN | TCP_ACK,
            TCP_RST | TCP_ACK,
            TCP_ACK | TCP_PSH,
            TCP_SYN | TCP_ACK,
            any,
        ])
    }

    fn frame_of(&mut self, kind: usize) -> Vec<u8> {
        let v4 = self.rng.chance(2);
        let vip = self.t.vips[usize::from(!v4)];
        match KINDS[kind] {
            "random-short" => {
                let n = self.rng.range(14, 60);
                let mut f = self.rng.bytes(n);
                f[..6].copy_from_slice(&self.t.gateway_mac);
                f
            }
            "random-long" => {
                let n = self.rng.range(14, 1514);
                let mut f = self.rng.bytes(n);
                f[..6].copy_from_slice(&self.t.gateway_mac);
                // Often with an IP ethertype, so the parser goes further in.
                if self.rng.chance(2) {
                    let et = if v4 { ETH_P_IP } else { ETH_P_IPV6 };
                    f[12..14].copy_from_slice(&et.to_be_bytes());
                }
                f
            }
            "odd-ethertype" => {
                let any = self.rng.next_u32() as u16;
                let et = *self.rng.pick(&[
                    0x88cc, 0x8035, 0x88a8, 0x8100, 0x9100, 0x0000, 0x05ff, 0xffff, any,
                ]);
                let p = self.payload(200);
                self.l2(et, &p)
            }
            "vlan-tagged" => {
                let src = self.src(v4);
                let seg = self.tcp_to(src, vip, self.t.tcp_port, TCP_SYN);
                let (et, pkt) = ip(src, vip, PROTO_TCP, &seg);
                let mut inner = vec![0, self.rng.below(4095) as u8];
                inner.extend_from_slice(&et.to_be_bytes());
                inner.extend_from_slice(&pkt);
                let outer = *self.rng.pick(&[0x8100u16, 0x88a8]);
                self.l2(outer, &inner)
            }
            "ipv4-ihl-lt-5" | "ipv4-bad-length" | "ipv4-bad-csum" | "ipv4-options" => {
                let src = self.src(true);
                let dst = self.t.vips[0];
                let seg = self.tcp_to(src, dst, self.t.tcp_port, TCP_SYN);
                let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) else {
                    return self.l2(ETH_P_IP, &seg);
                };
                let opts = if KINDS[kind] == "ipv4-options" {
                    // Record route, timestamp, or garbage; up to 40 bytes.
                    let n = self.rng.range(1, 40);
                    let mut o = self.rng.bytes(n);
                    o[0] = *self.rng.pick(&[7u8, 68, 0x94, 1, 0, o[0]]);
                    o
                } else {
                    Vec::new()
                };
                let mut p = ipv4(s, d, PROTO_TCP, 64, 0x4000, &opts, &seg);
                match KINDS[kind] {
                    "ipv4-ihl-lt-5" => p[0] = 0x40 | self.rng.below(5) as u8,
                    "ipv4-bad-length" => {
                        let len = *self.rng.pick(&[
                            0u16,
                            19,
                            (p.len() + 1) as u16,
                            (p.len() + 400) as u16,
                            0xffff,
                            (p.len() / 2) as u16,
                        ]);
                        p[2..4].copy_from_slice(&len.to_be_bytes());
                    }
                    "ipv4-bad-csum" => p[10] ^= 0x5a,
                    _ => {}
                }
                self.l2(ETH_P_IP, &p)
            }
            "ipv4-fragment" => {
                let src = self.src(true);
                let dst = *self.rng.pick(&[self.t.vips[0], self.t.own[0]]);
                let udp_ = self.rng.chance(2);
                let (proto, port) = if udp_ {
                    (PROTO_UDP, self.t.udp_port)
                } else {
                    (PROTO_TCP, self.t.tcp_port)
                };
                let seg = if udp_ {
                    let p = self.payload(300);
                    udp(src, dst, 5353, port, &p)
                } else {
                    self.tcp_to(src, dst, port, TCP_SYN)
                };
                let first = self.rng.chance(2);
                let frag = if first {
                    0x2000
                } else {
                    (self.rng.range(1, 0x1fff) as u16) | if self.rng.chance(2) { 0x2000 } else { 0 }
                };
                let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) else {
                    return self.l2(ETH_P_IP, &seg);
                };
                let p = ipv4(s, d, proto, 64, frag, &[], &seg);
                self.l2(ETH_P_IP, &p)
            }
            "tcp-bad-offset" => {
                let src = self.src(v4);
                let mut seg = self.tcp_to(src, vip, self.t.tcp_port, TCP_SYN);
                let off = *self.rng.pick(&[0u8, 1, 4, 15, 14]);
                seg[12] = off << 4;
                if self.rng.chance(2) {
                    // Cut the header short too.
                    seg.truncate(self.rng.range(1, 19));
                }
                let (et, p) = ip(src, vip, PROTO_TCP, &seg);
                self.l2(et, &p)
            }
            "tcp-flood-vip" => {
                let src = self.src(v4);
                let flags = self.random_flags();
                let seg = self.tcp_to(src, vip, self.t.tcp_port, flags);
                let (et, p) = ip(src, vip, PROTO_TCP, &seg);
                self.l2(et, &p)
            }
            "udp-to-vip" => {
                let src = self.src(v4);
                let p = self.payload(512);
                let mut seg = udp(src, vip, self.rng.next_u32() as u16, self.t.udp_port, &p);
                if self.rng.chance(4) {
                    seg[6] ^= 0xff; // a wrong checksum
                }
                if self.rng.chance(8) {
                    let l = self.rng.below(0x10000) as u16;
                    seg[4..6].copy_from_slice(&l.to_be_bytes());
                }
                let (et, pkt) = ip(src, vip, PROTO_UDP, &seg);
                self.l2(et, &pkt)
            }
            "forged-reply" => self.forged_reply(),
            "spoofed-to-pod" => {
                // From an address the pod is not, to the other pod (and the
                // node) directly: a source the node must not vouch for.
                let fam = self.spoofed_in(v4);
                if fam.is_empty() {
                    return self.l2(ETH_P_IP, &[]);
                }
                let dst = *self.rng.pick(&fam);
                let others: Vec<IpAddr> = fam.iter().copied().filter(|a| *a != dst).collect();
                let src = if others.is_empty() {
                    dst
                } else {
                    *self.rng.pick(&others)
                };
                let flags = self.random_flags();
                let port = *self.rng.pick(&[8080, 80, 5353]);
                let seg = self.tcp_to(src, dst, port, flags);
                let (et, p) = ip(src, dst, PROTO_TCP, &seg);
                self.l2(et, &p)
            }
            "ipv6-truncated" => {
                let src = self.src(false);
                let dst = self.t.vips[1];
                let seg = self.tcp_to(src, dst, self.t.tcp_port, TCP_SYN);
                let (_, mut p) = ip(src, dst, PROTO_TCP, &seg);
                match self.rng.below(3) {
                    0 => p.truncate(self.rng.range(1, 39)),
                    1 => {
                        let l = (p.len() + self.rng.range(1, 600)) as u16;
                        p[4..6].copy_from_slice(&l.to_be_bytes());
                    }
                    _ => {
                        // Cut inside the TCP header.
                        p.truncate(40 + self.rng.range(0, 19));
                    }
                }
                self.l2(ETH_P_IPV6, &p)
            }
            "ipv6-ext-chain" => {
                let src = self.src(false);
                let dst = *self.rng.pick(&[self.t.vips[1], self.t.own[1]]);
                let seg = self.tcp_to(src, dst, self.t.tcp_port, TCP_SYN);
                // Hop-by-hop first (as RFC 8200 wants), then destination
                // options, routing, unknown headers: up to 12 of them.
                let n = self.rng.range(1, 12);
                let kinds: Vec<u8> = (0..n)
                    .map(|i| {
                        if i == 0 {
                            0
                        } else {
                            *self.rng.pick(&[60u8, 60, 43, 0, 135, 253])
                        }
                    })
                    .collect();
                let mut chain = Vec::new();
                for (i, _) in kinds.iter().enumerate() {
                    let next = kinds.get(i + 1).copied().unwrap_or(PROTO_TCP);
                    let units = self.rng.below(3);
                    let mut h = vec![next, units as u8];
                    h.extend(
                        std::iter::repeat_n(1u8, units * 8 + 6)
                            .enumerate()
                            .map(|(j, b)| if j % 2 == 0 { b } else { 0 }),
                    );
                    chain.extend(h);
                }
                if self.rng.chance(3) {
                    // The chain's last header lies about its length.
                    if let Some(b) = chain.get_mut(1) {
                        *b = 0xff;
                    }
                }
                chain.extend(seg);
                let p = ipv6(v6(src), v6(dst), kinds[0], 64, &chain);
                self.l2(ETH_P_IPV6, &p)
            }
            "ipv6-fragment" => {
                let src = self.src(false);
                let dst = *self.rng.pick(&[self.t.vips[1], self.t.own[1]]);
                let seg = self.tcp_to(src, dst, self.t.tcp_port, TCP_SYN);
                let first = self.rng.chance(2);
                let off: u16 = if first {
                    1 // offset 0, more fragments
                } else {
                    ((self.rng.range(1, 0x1fff) as u16) << 3) | self.rng.below(2) as u16
                };
                let mut fh = vec![PROTO_TCP, 0];
                fh.extend_from_slice(&off.to_be_bytes());
                fh.extend_from_slice(&self.rng.next_u32().to_be_bytes());
                fh.extend(seg);
                let p = ipv6(v6(src), v6(dst), 44, 64, &fh);
                self.l2(ETH_P_IPV6, &p)
            }
            "icmp-error" => self.icmp_error(v4),
            "arp-claim" => {
                // "<address> is at <my MAC>", as a reply or a gratuitous
                // request, for the gateway, the node, the client, the VIP.
                let claims = self.claims(true);
                let IpAddr::V4(claim) = *self.rng.pick(&claims) else {
                    return self.rng.bytes(60);
                };
                let reply = self.rng.chance(2);
                let mut a = vec![0, 1, 8, 0, 6, 4, 0, if reply { 2 } else { 1 }];
                a.extend_from_slice(&self.t.own_mac);
                a.extend_from_slice(&claim.octets());
                let target = if reply { self.t.gateway_mac } else { [0; 6] };
                a.extend_from_slice(&target);
                let tip = if reply { self.t.gateway4 } else { claim };
                a.extend_from_slice(&tip.octets());
                let dst = if reply { self.t.gateway_mac } else { [0xff; 6] };
                eth(dst, self.t.own_mac, ETH_P_ARP, &a)
            }
            "ndp-claim" => {
                // Unsolicited neighbour advertisements (override) for the
                // router, the node, the VIP, or a router advertisement.
                let claims = self.claims(false);
                let IpAddr::V6(claim) = *self.rng.pick(&claims) else {
                    return self.rng.bytes(60);
                };
                let src: Ipv6Addr = if self.rng.chance(2) {
                    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xbad)
                } else {
                    claim
                };
                let all_nodes: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                let mut m = if self.rng.chance(4) {
                    // Router advertisement: lifetime, no options.
                    let mut m = vec![134, 0, 0, 0, 64, 0, 0xff, 0xff];
                    m.extend_from_slice(&[0; 8]);
                    m
                } else {
                    let mut m = vec![
                        136,
                        0,
                        0,
                        0,
                        0x20 | (0x80 * u8::from(self.rng.chance(2))),
                        0,
                        0,
                        0,
                    ];
                    m.extend_from_slice(&claim.octets());
                    m
                };
                m.extend_from_slice(&[2, 1]);
                m.extend_from_slice(&self.t.own_mac);
                set_l4_checksum(
                    IpAddr::V6(src),
                    IpAddr::V6(all_nodes),
                    PROTO_ICMPV6,
                    &mut m,
                    2,
                );
                let p = ipv6(src, all_nodes, PROTO_ICMPV6, 255, &m);
                eth([0x33, 0x33, 0, 0, 0, 1], self.t.own_mac, ETH_P_IPV6, &p)
            }
            _ => self.rng.bytes(60),
        }
    }

    /// A reply claiming to come from another pod's endpoint, to a node port
    /// a translated flow may hold.
    fn forged_reply(&mut self) -> Vec<u8> {
        if self.t.replies.is_empty() {
            return self.rng.bytes(60);
        }
        let (from, to, is_tcp) = *self.rng.pick(&self.t.replies.clone());
        let mut to = to;
        if self.rng.chance(2) {
            // Any port of the range: what an attacker not knowing the
            // flow's port would spray.
            let (lo, hi) = self.t.snat_ports;
            to.set_port(self.rng.range(usize::from(lo), usize::from(hi)) as u16);
        }
        let seg = if is_tcp {
            let flags = *self.rng.pick(&[
                TCP_RST,
                TCP_RST | TCP_ACK,
                TCP_FIN | TCP_ACK,
                TCP_ACK | TCP_PSH,
            ]);
            let payload = if flags & TCP_RST != 0 {
                Vec::new()
            } else {
                let mut p = b"pod=evil peer=0.0.0.0:1 local=0.0.0.0:1\n".to_vec();
                p.extend_from_slice(&self.marker);
                p
            };
            let (seq, ack) = (self.rng.next_u32(), self.rng.next_u32());
            let mut s = tcp(
                from.ip(),
                to.ip(),
                from.port(),
                to.port(),
                seq,
                ack,
                flags,
                &payload,
            );
            if self.rng.chance(4) {
                s[16] ^= 0xff; // a wrong checksum: must not count either
            }
            s
        } else {
            let mut p = b"pod=evil peer=0.0.0.0:1 local=0.0.0.0:1\n".to_vec();
            p.extend_from_slice(&self.marker);
            udp(from.ip(), to.ip(), from.port(), to.port(), &p)
        };
        let proto = if is_tcp { PROTO_TCP } else { PROTO_UDP };
        let (et, p) = ip(from.ip(), to.ip(), proto, &seg);
        self.l2(et, &p)
    }

    /// An ICMP error about a made-up flow (client to VIP, pod to node),
    /// sent to the node, the client or the VIP.
    fn icmp_error(&mut self, v4: bool) -> Vec<u8> {
        let fam = self.spoofed_in(v4);
        let own = self.t.own[usize::from(!v4)];
        let vip = self.t.vips[usize::from(!v4)];
        let a = fam.first().copied().unwrap_or(own);
        let b = fam.last().copied().unwrap_or(vip);
        let seg = self.tcp_to(a, vip, self.t.tcp_port, TCP_SYN);
        let (_, quoted) = ip(a, vip, PROTO_TCP, &seg);
        let cut = quoted.len().min(self.rng.range(8, 120));
        let src = self.src(v4);
        let dst = *self.rng.pick(&[b, vip, a]);
        let (kind, code) = if v4 {
            *self
                .rng
                .pick(&[(3u8, 3u8), (3, 4), (3, 1), (11, 0), (12, 0)])
        } else {
            *self.rng.pick(&[(1u8, 4u8), (1, 0), (2, 0), (3, 0), (4, 1)])
        };
        let mut m = vec![kind, code, 0, 0, 0, 0, 0x05, 0x78];
        m.extend_from_slice(&quoted[..cut]);
        let proto = if v4 { PROTO_ICMP } else { PROTO_ICMPV6 };
        set_l4_checksum(src, dst, proto, &mut m, 2);
        let (et, p) = ip(src, dst, proto, &m);
        self.l2(et, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_verify() {
        let s: IpAddr = "198.18.0.2".parse().unwrap();
        let d: IpAddr = "198.18.100.1".parse().unwrap();
        let seg = tcp(s, d, 1234, 80, 1, 2, TCP_SYN, b"hello");
        assert_eq!(fold(sum16(&seg, pseudo_sum(s, d, PROTO_TCP, seg.len()))), 0);
        let (_, p) = ip(s, d, PROTO_TCP, &seg);
        assert_eq!(checksum(&p[..20]), 0);
        let s6: IpAddr = "fd00:18::2".parse().unwrap();
        let d6: IpAddr = "fd00:18:100::1".parse().unwrap();
        let u = udp(s6, d6, 1, 53, b"x");
        assert_eq!(fold(sum16(&u, pseudo_sum(s6, d6, PROTO_UDP, u.len()))), 0);
    }

    #[test]
    fn the_generator_is_deterministic_and_bounded() {
        let t = Targets {
            own_mac: [2, 0, 0, 0, 0, 1],
            gateway_mac: [2, 0, 0, 0, 0, 2],
            own: [
                "198.19.1.11".parse().unwrap(),
                "fd00:19:1::11".parse().unwrap(),
            ],
            gateway4: "198.19.1.1".parse().unwrap(),
            vips: [
                "198.18.100.1".parse().unwrap(),
                "fd00:18:100::1".parse().unwrap(),
            ],
            tcp_port: 80,
            udp_port: 53,
            spoofed: vec!["198.18.0.2".parse().unwrap(), "fd00:18::2".parse().unwrap()],
            replies: vec![(
                "198.19.1.10:8080".parse().unwrap(),
                "198.18.0.11:61000".parse().unwrap(),
                true,
            )],
            snat_ports: (61_000, 65_535),
        };
        let mut a = Hostile::new(7, t.clone(), b"MARK");
        let mut b = Hostile::new(7, t, b"MARK");
        let mut seen = [0usize; KINDS.len()];
        for _ in 0..5_000 {
            let (k, f) = a.next_frame();
            assert_eq!((k, f.clone()), b.next_frame());
            assert!(f.len() >= 14 && f.len() <= 1514 + 18, "{} bytes", f.len());
            seen[k] += 1;
        }
        assert!(seen.iter().all(|n| *n > 0), "{seen:?}");
    }
}
