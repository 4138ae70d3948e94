//! What a NIC would have finished for us: frames read from an `AF_PACKET`
//! socket with `PACKET_VNET_HDR` may still need their L4 checksum
//! (`CHECKSUM_PARTIAL`) or be TCP super-frames (GSO / TSO) that must be cut
//! into MSS-sized segments before anything else sees them.

/// `struct virtio_net_hdr` (legacy, host byte order on packet sockets).
pub const VNET_HDR_LEN: usize = 10;

pub const VNET_F_NEEDS_CSUM: u8 = 1;
/// Set by the kernel on a frame whose checksum it verified (a GRO
/// aggregate among them); never sent.
pub const VNET_F_DATA_VALID: u8 = 2;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
pub const GSO_ECN: u8 = 0x80;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    pub fn write(&self, b: &mut [u8]) {
        if b.len() < VNET_HDR_LEN {
            return;
        }
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }

    pub fn gso(&self) -> u8 {
        self.gso_type & !GSO_ECN
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadError {
    /// Checksum start/offset outside the frame.
    BadCsumOffsets,
    /// A GSO kind this engine does not segment (UDP fragmentation offload,
    /// UDP GSO).
    UnsupportedGso,
    /// The super-frame's headers are not Ethernet + IPv4/IPv6 (no extension
    /// headers) + TCP.
    BadGsoFrame,
}

/// One's-complement sum of `data` (big-endian 16-bit words, an odd last
/// byte padded) added to `sum`, folded to 16 bits but returned wide so a
/// caller can add a length or a protocol to it. Summed 32 bits at a time
/// into 64 (2^32 and 2^16 are both 1 modulo 0xffff, so the folds agree):
/// the coalescer verifies every segment's checksum with it on the relay's
/// path.
pub fn sum16(data: &[u8], sum: u32) -> u32 {
    let mut acc = u64::from(sum);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc += u64::from(u32::from_be_bytes(tail));
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Finish a `CHECKSUM_PARTIAL` frame: the field at `start + offset` holds
/// the pseudo-header sum; the checksum covers everything from `start`.
pub fn complete_csum(frame: &mut [u8], start: usize, offset: usize) -> Result<(), OffloadError> {
    let at = start
        .checked_add(offset)
        .filter(|&a| a + 2 <= frame.len() && start < frame.len())
        .ok_or(OffloadError::BadCsumOffsets)?;
    let mut c = !fold(sum16(&frame[start..], 0));
    // A zero UDP checksum means "none": send its one's-complement twin.
    if c == 0 && offset == 6 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

struct TcpLayout {
    l3: usize,
    l4: usize,
    payload: usize,
    v6: bool,
}

fn tcp_layout(frame: &[u8]) -> Option<TcpLayout> {
    let mut l3 = 14;
    let mut et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if et == 0x8100 || et == 0x88a8 {
        et = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    let (l4, v6) = match et {
        0x0800 => {
            let b = *frame.get(l3)?;
            if b >> 4 != 4 || *frame.get(l3 + 9)? != 6 {
                return None;
            }
            let ihl = usize::from(b & 0xf) * 4;
            if ihl < 20 {
                return None;
            }
            (l3 + ihl, false)
        }
        0x86dd => {
            if *frame.get(l3 + 6)? != 6 {
                return None;
            }
            (l3 + 40, true)
        }
        _ => return None,
    };
    let doff = usize::from(*frame.get(l4 + 12)? >> 4) * 4;
    if doff < 20 || l4 + doff > frame.len() {
        return None;
    }
    Some(TcpLayout {
        l3,
        l4,
        payload: l4 + doff,
        v6,
    })
}

fn tcp_checksum(seg: &mut [u8], lay: &TcpLayout) {
    let tcp_len = seg.len() - lay.l4;
    seg[lay.l4 + 16] = 0;
    seg[lay.l4 + 17] = 0;
    let mut sum = if lay.v6 {
        sum16(&seg[lay.l3 + 8..lay.l3 + 40], 0)
    } else {
        sum16(&seg[lay.l3 + 12..lay.l3 + 20], 0)
    };
    sum = sum.wrapping_add(6).wrapping_add(tcp_len as u32);
    sum = sum16(&seg[lay.l4..], sum);
    let c = !fold(sum);
    seg[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&c.to_be_bytes());
}

fn ipv4_checksum(seg: &mut [u8], lay: &TcpLayout) {
    seg[lay.l3 + 10] = 0;
    seg[lay.l3 + 11] = 0;
    let c = !fold(sum16(&seg[lay.l3..lay.l4], 0));
    seg[lay.l3 + 10..lay.l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Cut a TCP super-frame into segments of at most `gso_size` payload bytes,
/// as the kernel's software GSO does: per segment the IP length, the IPv4
/// id (+1 each), the sequence number and all checksums are rewritten; FIN
/// and PSH stay on the last segment only, CWR on the first only. Each
/// segment is handed to `emit` (a reused buffer).
pub fn segment_tcp(
    frame: &[u8],
    gso_size: usize,
    mut emit: impl FnMut(&mut Vec<u8>),
) -> Result<usize, OffloadError> {
    let lay = tcp_layout(frame).ok_or(OffloadError::BadGsoFrame)?;
    if gso_size == 0 {
        return Err(OffloadError::BadGsoFrame);
    }
    let payload = &frame[lay.payload..];
    let hdrs = &frame[..lay.payload];
    let seq0 = u32::from_be_bytes([
        frame[lay.l4 + 4],
        frame[lay.l4 + 5],
        frame[lay.l4 + 6],
        frame[lay.l4 + 7],
    ]);
    let id0 = u16::from_be_bytes([frame[lay.l3 + 4], frame[lay.l3 + 5]]);
    let flags0 = frame[lay.l4 + 13];
    let chunks: Vec<&[u8]> = if payload.is_empty() {
        vec![payload]
    } else {
        payload.chunks(gso_size).collect()
    };
    let n = chunks.len();
    let mut seg = Vec::with_capacity(hdrs.len() + gso_size);
    for (i, chunk) in chunks.into_iter().enumerate() {
        seg.clear();
        seg.extend_from_slice(hdrs);
        seg.extend_from_slice(chunk);
        let l3_payload = (seg.len() - lay.l4) as u16;
        if lay.v6 {
            seg[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&l3_payload.to_be_bytes());
        } else {
            let total = (seg.len() - lay.l3) as u16;
            seg[lay.l3 + 2..lay.l3 + 4].copy_from_slice(&total.to_be_bytes());
            seg[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            ipv4_checksum(&mut seg, &lay);
        }
        let seq = seq0.wrapping_add((i * gso_size) as u32);
        seg[lay.l4 + 4..lay.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = flags0;
        if i + 1 < n {
            flags &= !(0x01 | 0x08); // FIN, PSH
        }
        if i > 0 {
            flags &= !0x80; // CWR
        }
        seg[lay.l4 + 13] = flags;
        tcp_checksum(&mut seg, &lay);
        emit(&mut seg);
    }
    Ok(n)
}

/// Make a frame read with a vnet header whole. `Ok(None)`: the frame in
/// place is ready (checksum completed if it had to be). `Ok(Some(n))`: it was
/// a super-frame and `n` segments went to `emit` instead.
pub fn finish(
    hdr: &VnetHdr,
    frame: &mut [u8],
    emit: impl FnMut(&mut Vec<u8>),
) -> Result<Option<usize>, OffloadError> {
    match hdr.gso() {
        GSO_NONE => {
            if hdr.flags & VNET_F_NEEDS_CSUM != 0 {
                complete_csum(
                    frame,
                    usize::from(hdr.csum_start),
                    usize::from(hdr.csum_offset),
                )?;
            }
            Ok(None)
        }
        GSO_TCPV4 | GSO_TCPV6 => segment_tcp(frame, usize::from(hdr.gso_size), emit).map(Some),
        GSO_UDP | GSO_UDP_L4 => Err(OffloadError::UnsupportedGso),
        _ => Err(OffloadError::UnsupportedGso),
    }
}

/// How a frame read with a vnet header goes through the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intake {
    /// Complete: its checksums are final; it leaves with a zero header.
    Complete,
    /// Kept whole with its checksum left to the sender's offload
    /// (`CHECKSUM_PARTIAL`): the program runs once on it, a super-frame
    /// included, with partial checksum semantics
    /// ([`super::packet::FramePacket::csum_partial`]), and it leaves with
    /// this header for the next device or the stack to finish, as the
    /// kernel hands a GSO skb on and segments it only where a device
    /// cannot.
    Partial(VnetHdr),
    /// Not something to keep whole (a UDP super-frame, a partial checksum
    /// elsewhere than the TCP or UDP field, VLAN tags): [`finish`] it.
    Finish,
}

/// The transport header a partial checksum or a super-frame may describe:
/// untagged Ethernet, IPv4 (any options) or IPv6 without extension
/// headers, TCP or UDP. Returns (l3, l4, protocol, v6).
fn l4_of(frame: &[u8]) -> Option<(usize, usize, u8, bool)> {
    let l3 = 14;
    match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        0x0800 => {
            let b = *frame.get(l3)?;
            let ihl = usize::from(b & 0xf) * 4;
            (b >> 4 == 4 && ihl >= 20).then_some(())?;
            // A fragment has no transport header to sum.
            let frag = u16::from_be_bytes([*frame.get(l3 + 6)?, *frame.get(l3 + 7)?]);
            (frag & 0x3fff == 0).then_some(())?;
            Some((l3, l3 + ihl, *frame.get(l3 + 9)?, false))
        }
        0x86dd => Some((l3, l3 + 40, *frame.get(l3 + 6)?, true)),
        _ => None,
    }
}

/// The folded pseudo-header sum a `CHECKSUM_PARTIAL` TCP or UDP field
/// holds: the addresses, the protocol and the transport length.
fn pseudo_field(frame: &[u8], l3: usize, l4: usize, proto: u8, v6: bool) -> Option<u16> {
    let addrs = if v6 {
        frame.get(l3 + 8..l3 + 40)?
    } else {
        frame.get(l3 + 12..l3 + 20)?
    };
    let len = u32::try_from(frame.len().checked_sub(l4)?).ok()?;
    Some(fold(sum16(addrs, u32::from(proto) + len)))
}

/// Decide how a frame read with header `hdr` runs (see [`Intake`]). A TCP
/// super-frame whose checksum the kernel verified (a GRO aggregate,
/// `DATA_VALID`) has no checksum that holds for its segments: its field is
/// set to the pseudo-header sum and it goes on partial, which is what the
/// kernel does to such an skb when it must segment it.
pub fn intake(hdr: &VnetHdr, frame: &mut [u8]) -> Intake {
    let partial = hdr.flags & VNET_F_NEEDS_CSUM != 0;
    let gso = hdr.gso();
    if gso == GSO_NONE && !partial {
        return Intake::Complete;
    }
    let Some((l3, l4, proto, v6)) = l4_of(frame) else {
        return Intake::Finish;
    };
    let field = match proto {
        6 => 16,
        17 => 6,
        _ => return Intake::Finish,
    };
    let at = l4 + field;
    if at + 2 > frame.len() {
        return Intake::Finish;
    }
    let hdr_len = match gso {
        GSO_NONE => 0,
        GSO_TCPV4 | GSO_TCPV6 => {
            let Some(lay) = tcp_layout(frame) else {
                return Intake::Finish;
            };
            if proto != 6 || lay.v6 != (gso == GSO_TCPV6) || lay.l4 != l4 || hdr.gso_size == 0 {
                return Intake::Finish;
            }
            lay.payload as u16
        }
        _ => return Intake::Finish,
    };
    if partial {
        if usize::from(hdr.csum_start) != l4 || usize::from(hdr.csum_offset) != field {
            return Intake::Finish;
        }
    } else {
        let Some(p) = pseudo_field(frame, l3, l4, proto, v6) else {
            return Intake::Finish;
        };
        frame[at..at + 2].copy_from_slice(&p.to_be_bytes());
    }
    Intake::Partial(VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        gso_type: hdr.gso_type,
        hdr_len,
        gso_size: hdr.gso_size,
        csum_start: l4 as u16,
        csum_offset: field as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

    fn tcp4(payload: &[u8], fin_psh: bool) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .tcp(40000, 80, 1000, 65535)
            .ack(77);
        let b = if fin_psh { b.fin().psh() } else { b };
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn tcp6(payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6(
                [0xfd, 0, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0xfd, 0, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                64,
            )
            .tcp(40000, 80, 5000, 65535)
            .ack(1)
            .psh();
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn check_tcp(seg: &[u8]) -> (u32, u8, usize) {
        let p = SlicedPacket::from_ethernet(seg).unwrap();
        let Some(TransportSlice::Tcp(t)) = p.transport else {
            panic!("not tcp")
        };
        let ok = match &p.net {
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header().to_header();
                assert_eq!(ip.header().header_checksum(), h.calc_header_checksum());
                t.calc_checksum_ipv4(h.source, h.destination).unwrap()
            }
            Some(NetSlice::Ipv6(ip)) => {
                let h = ip.header().to_header();
                t.calc_checksum_ipv6(h.source, h.destination).unwrap()
            }
            _ => panic!("not ip"),
        };
        assert_eq!(ok, t.checksum(), "tcp checksum");
        let flags = seg[seg.len() - t.payload().len() - t.to_header().header_len() + 13];
        (t.sequence_number(), flags, t.payload().len())
    }

    fn partial_hdr(gso_type: u8, gso_size: u16) -> VnetHdr {
        VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type,
            gso_size,
            csum_start: 34,
            csum_offset: 16,
            hdr_len: 0,
        }
    }

    #[test]
    fn complete_frames_and_partial_ones_are_told_apart() {
        let mut f = tcp4(b"hello", false);
        assert_eq!(intake(&VnetHdr::default(), &mut f), Intake::Complete);
        let before = f.clone();
        let Intake::Partial(h) = intake(&partial_hdr(GSO_NONE, 0), &mut f) else {
            panic!("a partial TCP frame is kept whole")
        };
        assert_eq!(f, before, "a partial field is left as the sender wrote it");
        assert_eq!(
            (h.flags, h.gso_type, h.csum_start, h.csum_offset),
            (1, 0, 34, 16)
        );
        // A partial checksum somewhere else than the TCP field, a UDP
        // super-frame, a frame cut inside its headers: finished instead.
        let mut odd = partial_hdr(GSO_NONE, 0);
        odd.csum_offset = 10;
        assert_eq!(intake(&odd, &mut f), Intake::Finish);
        assert_eq!(
            intake(&partial_hdr(GSO_UDP_L4, 1000), &mut f),
            Intake::Finish
        );
        for cut in 0..40 {
            let mut short = before[..cut].to_vec();
            assert_eq!(
                intake(&partial_hdr(GSO_TCPV4, 1448), &mut short),
                Intake::Finish,
                "{cut}"
            );
        }
    }

    /// spec: P1 — a GRO aggregate (checksum verified, no partial field)
    /// kept whole: its field becomes the pseudo-header sum, and finishing
    /// it later gives exactly the segments finishing it at once gives.
    #[test]
    fn a_verified_super_frame_goes_on_partial() {
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
        for f in [tcp4(&payload, true), tcp6(&payload)] {
            let v6 = f[12] == 0x86;
            let (gso_type, l4) = if v6 { (GSO_TCPV6, 54) } else { (GSO_TCPV4, 34) };
            let gro = VnetHdr {
                flags: VNET_F_DATA_VALID,
                gso_type,
                gso_size: 1400,
                ..Default::default()
            };
            let mut direct = Vec::new();
            finish(&gro, &mut f.clone(), |s| direct.push(s.clone())).unwrap();
            let mut kept = f.clone();
            let Intake::Partial(h) = intake(&gro, &mut kept) else {
                panic!("kept whole")
            };
            assert_eq!(
                (h.flags, h.csum_start, h.csum_offset),
                (VNET_F_NEEDS_CSUM, l4, 16)
            );
            assert_eq!(
                (h.gso_type, h.gso_size, h.hdr_len),
                (gso_type, 1400, l4 + 20)
            );
            let mut later = Vec::new();
            finish(&h, &mut kept, |s| later.push(s.clone())).unwrap();
            assert_eq!(direct.len(), 3);
            assert_eq!(direct, later);
        }
    }

    #[test]
    fn completes_a_partial_tcp_checksum() {
        let mut f = tcp4(b"hello world", false);
        let good = f.clone();
        // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum.
        let mut ps = sum16(&f[26..34], 0);
        ps = ps + 6 + (f.len() - 34) as u32;
        f[50..52].copy_from_slice(&fold(ps).to_be_bytes());
        let hdr = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..Default::default()
        };
        let r = finish(&hdr, &mut f, |_| panic!("no segments")).unwrap();
        assert_eq!(r, None);
        assert_eq!(f, good);
    }

    #[test]
    fn bad_offsets_are_rejected_not_panicking() {
        let mut f = tcp4(b"x", false);
        assert_eq!(
            complete_csum(&mut f, 5000, 16),
            Err(OffloadError::BadCsumOffsets)
        );
        let l = f.len();
        assert_eq!(
            complete_csum(&mut f, l - 1, 1),
            Err(OffloadError::BadCsumOffsets)
        );
    }

    #[test]
    fn segments_tcp4_super_frame() {
        let payload: Vec<u8> = (0..3500u32).map(|i| i as u8).collect();
        let f = tcp4(&payload, true);
        let hdr = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
            hdr_len: 54,
        };
        let mut segs = Vec::new();
        let mut g = f.clone();
        let n = finish(&hdr, &mut g, |s| segs.push(s.clone())).unwrap();
        assert_eq!(n, Some(3));
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let (seq, flags, len) = check_tcp(s);
            assert_eq!(seq, 1000 + (i * 1448) as u32);
            let last = i == 2;
            assert_eq!(flags & 0x09 != 0, last, "FIN/PSH only on the last");
            assert_eq!(len, if last { 3500 - 2 * 1448 } else { 1448 });
            let id = u16::from_be_bytes([s[18], s[19]]);
            let id0 = u16::from_be_bytes([f[18], f[19]]);
            assert_eq!(id, id0.wrapping_add(i as u16));
            joined.extend_from_slice(&s[54..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn segments_tcp6_super_frame() {
        let payload = vec![7u8; 3000];
        let f = tcp6(&payload);
        let hdr = VnetHdr {
            gso_type: GSO_TCPV6,
            gso_size: 1428,
            ..Default::default()
        };
        let mut segs = Vec::new();
        let mut g = f.clone();
        let n = finish(&hdr, &mut g, |s| segs.push(s.clone())).unwrap();
        assert_eq!(n, Some(3));
        for s in &segs {
            check_tcp(s);
            let plen = u16::from_be_bytes([s[18], s[19]]) as usize;
            assert_eq!(plen, s.len() - 54);
        }
    }

    #[test]
    fn udp_gso_and_garbage_are_errors() {
        let hdr = VnetHdr {
            gso_type: GSO_UDP_L4,
            gso_size: 1000,
            ..Default::default()
        };
        let mut f = vec![0u8; 100];
        assert_eq!(
            finish(&hdr, &mut f, |_| {}),
            Err(OffloadError::UnsupportedGso)
        );
        let hdr = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1000,
            ..Default::default()
        };
        for len in 0..80 {
            let mut f = vec![0x45u8; len];
            let _ = finish(&hdr, &mut f, |_| {});
        }
    }

    #[test]
    fn vnet_header_round_trips() {
        let h = VnetHdr {
            flags: 1,
            gso_type: 4,
            hdr_len: 74,
            gso_size: 1428,
            csum_start: 54,
            csum_offset: 16,
        };
        let mut b = [0u8; VNET_HDR_LEN];
        h.write(&mut b);
        assert_eq!(VnetHdr::parse(&b), Some(h));
    }
}
