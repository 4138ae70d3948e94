//! Receive coalescing, as a link with GRO does it: consecutive TCP segments
//! of one flow, read in one batch, are merged into a super-frame before the
//! program sees them, so the program runs once for them and the node's
//! stack takes one packet (the emulated engine's relay, on links that hand
//! it complete frames).
//!
//! Only what the kernel's `tcp_gro_receive` would merge is merged, and
//! stricter: plain data segments (`ACK`, `PSH` ending an aggregate) of one
//! flow, in sequence, with the same acknowledgement, window and options
//! (timestamps included), an IPv4 header without options whose id counts
//! up by one, or an IPv6 header without extension headers, and every
//! checksum verified. The aggregate keeps the first segment's headers and
//! leaves as a verified GSO frame (`DATA_VALID`, TCPv4/v6, `gso_size` the
//! first segment's payload), which [`super::offload::intake`] passes on
//! partial; cut again by a device, it gives back the segments it was made
//! of. One segment alone leaves as it came.

use super::offload::{fold, sum16, VnetHdr, GSO_TCPV4, GSO_TCPV6, VNET_F_DATA_VALID};

const ETH: usize = 14;
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;
/// An aggregate's IP datagram stays within what IPv4's total length (and
/// IPv6's payload length) can say.
const MAX_IP_LEN: usize = 65_535;

/// What a segment is, read off its headers; `None` if it is not one the
/// coalescer takes.
#[derive(Clone, Copy, Debug)]
struct Segment {
    v6: bool,
    l4: usize,
    payload: usize,
    seq: u32,
    flags: u8,
    /// IPv4 id.
    id: u16,
}

fn segment_of(frame: &[u8], verify: bool) -> Option<Segment> {
    let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (v6, l4, ip_end) = match et {
        0x0800 => {
            let ip = frame.get(ETH..ETH + 20)?;
            // No options, not a fragment, TCP.
            if ip[0] != 0x45 || u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 || ip[9] != 6 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if verify && fold(sum16(ip, 0)) != 0xffff {
                return None;
            }
            (false, ETH + 20, ETH + total)
        }
        0x86dd => {
            let ip = frame.get(ETH..ETH + 40)?;
            if ip[6] != 6 {
                return None;
            }
            let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            (true, ETH + 40, ETH + 40 + payload)
        }
        _ => return None,
    };
    // Exactly the datagram: no Ethernet padding, nothing cut.
    if ip_end != frame.len() {
        return None;
    }
    let tcp = frame.get(l4..l4 + 20)?;
    let doff = usize::from(tcp[12] >> 4) * 4;
    let flags = tcp[13];
    let payload = l4 + doff;
    if doff < 20 || payload >= frame.len() || (flags != TCP_ACK && flags != TCP_ACK | TCP_PSH) {
        return None;
    }
    if verify {
        let addrs = if v6 {
            &frame[ETH + 8..ETH + 40]
        } else {
            &frame[ETH + 12..ETH + 20]
        };
        let pseudo = sum16(addrs, 6 + (frame.len() - l4) as u32);
        if fold(sum16(&frame[l4..], pseudo)) != 0xffff {
            return None;
        }
    }
    Some(Segment {
        v6,
        l4,
        payload,
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        flags,
        id: u16::from_be_bytes([frame[ETH + 4], frame[ETH + 5]]),
    })
}

/// What [`Coalescer::offer`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Held: merged into the aggregate, or the start of a new one.
    Held,
    /// It does not continue the held aggregate: [`Coalescer::take`] that
    /// one first, then offer the frame again.
    FlushFirst,
    /// Not a segment to coalesce: take the held aggregate (order), then
    /// handle the frame as it is.
    Refused,
}

/// The aggregate being built, in a buffer laid out as the relay's are: a
/// vnet header's room, then the frame.
pub struct Coalescer {
    buf: Vec<u8>,
    head: usize,
    len: usize,
    held: Option<Held>,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    first: Segment,
    next_seq: u32,
    last_id: u16,
    gso_size: usize,
    segments: u16,
    /// A short or `PSH` segment ended it: nothing more is merged.
    closed: bool,
}

impl Coalescer {
    /// `head` bytes of room in front of the frame; `cap` the largest frame.
    pub fn new(head: usize, cap: usize) -> Self {
        Coalescer {
            buf: vec![0; head + cap],
            head,
            len: 0,
            held: None,
        }
    }

    /// Offer a complete frame. `verified`: its checksums were checked
    /// already (`DATA_VALID`); otherwise they are here, and a segment that
    /// fails is refused (the stack will drop it, as GRO leaves it to).
    pub fn offer(&mut self, frame: &[u8], verified: bool) -> Offer {
        let Some(seg) = segment_of(frame, !verified) else {
            return Offer::Refused;
        };
        let Some(h) = self.held else {
            return if self.start(frame, seg) {
                Offer::Held
            } else {
                Offer::Refused
            };
        };
        if !self.continues(&h, frame, &seg) {
            return Offer::FlushFirst;
        }
        let payload = &frame[seg.payload..];
        let end = self.head + self.len + payload.len();
        if self.len + payload.len() - ETH > MAX_IP_LEN || end > self.buf.len() {
            return Offer::FlushFirst;
        }
        self.buf[self.head + self.len..end].copy_from_slice(payload);
        self.len += payload.len();
        let short = payload.len() < h.gso_size;
        let psh = seg.flags & TCP_PSH != 0;
        if psh {
            // The aggregate says PSH, as its last segment did.
            self.buf[self.head + h.first.l4 + 13] |= TCP_PSH;
        }
        self.held = Some(Held {
            next_seq: h.next_seq.wrapping_add(payload.len() as u32),
            last_id: seg.id,
            segments: h.segments + 1,
            closed: short || psh,
            ..h
        });
        Offer::Held
    }

    fn start(&mut self, frame: &[u8], seg: Segment) -> bool {
        let room = self.buf.len() - self.head;
        if frame.len() > room {
            return false;
        }
        self.buf[self.head..self.head + frame.len()].copy_from_slice(frame);
        self.len = frame.len();
        let payload = frame.len() - seg.payload;
        self.held = Some(Held {
            first: seg,
            next_seq: seg.seq.wrapping_add(payload as u32),
            last_id: seg.id,
            gso_size: payload,
            segments: 1,
            closed: seg.flags & TCP_PSH != 0,
        });
        true
    }

    fn continues(&self, h: &Held, frame: &[u8], seg: &Segment) -> bool {
        if h.closed || seg.v6 != h.first.v6 || seg.payload != h.first.payload {
            return false;
        }
        let held = &self.buf[self.head..self.head + h.first.payload];
        let l3 = ETH;
        let same = |a: usize, b: usize| held.get(a..b) == frame.get(a..b);
        let ip_same = if seg.v6 {
            // Version, class, flow label; hop limit; addresses.
            same(l3, l3 + 4) && same(l3 + 6, l3 + 40)
        } else {
            // TOS; flags (DF); TTL, protocol; addresses; the id counts up.
            same(l3 + 1, l3 + 2)
                && same(l3 + 6, l3 + 10)
                && same(l3 + 12, l3 + 20)
                && seg.id == h.last_id.wrapping_add(1)
        };
        let l4 = h.first.l4;
        ip_same
            && same(0, 12)
            // Ports; acknowledgement; data offset; window; options.
            && same(l4, l4 + 4)
            && same(l4 + 8, l4 + 13)
            && same(l4 + 14, l4 + 16)
            && same(l4 + 20, h.first.payload)
            && seg.seq == h.next_seq
            && frame.len() - seg.payload <= h.gso_size
    }

    /// The held aggregate, which stays in `buffer()[head..][..len]` (or the
    /// buffer [`Coalescer::swap_buffer`] hands out) until the next offer:
    /// its header and length, or `None` when nothing is held. The IP length (and the IPv4 header checksum) are
    /// made whole here; more than one segment leaves as a verified GSO
    /// frame, one alone as it came (a zero header).
    pub fn take(&mut self) -> Option<(VnetHdr, usize)> {
        let h = self.held.take()?;
        let len = std::mem::take(&mut self.len);
        if h.segments == 1 {
            return Some((VnetHdr::default(), len));
        }
        let f = &mut self.buf[self.head..self.head + len];
        if h.first.v6 {
            let payload = (len - ETH - 40) as u16;
            f[ETH + 4..ETH + 6].copy_from_slice(&payload.to_be_bytes());
        } else {
            let total = (len - ETH) as u16;
            f[ETH + 2..ETH + 4].copy_from_slice(&total.to_be_bytes());
            f[ETH + 10..ETH + 12].fill(0);
            let c = !fold(sum16(&f[ETH..ETH + 20], 0));
            f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
        }
        let hdr = VnetHdr {
            flags: VNET_F_DATA_VALID,
            gso_type: if h.first.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: h.first.payload as u16,
            gso_size: h.gso_size as u16,
            csum_start: 0,
            csum_offset: 0,
        };
        Some((hdr, len))
    }

    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Swap the aggregate's buffer with `other` (laid out alike), so the
    /// caller runs the program on it in place; swap back after.
    pub fn swap_buffer(&mut self, other: &mut Vec<u8>) {
        std::mem::swap(&mut self.buf, other);
    }
}

#[cfg(test)]
mod tests {
    use super::super::offload::{self, Intake};
    use super::*;
    use etherparse::PacketBuilder;

    const MSS: usize = 1000;

    fn seg4(seq: u32, id: u16, payload: &[u8], psh: bool) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(etherparse::IpHeaders::Ipv4(
                {
                    let mut h = etherparse::Ipv4Header::new(
                        0,
                        64,
                        etherparse::IpNumber::TCP,
                        [198, 18, 0, 1],
                        [198, 18, 0, 2],
                    )
                    .unwrap();
                    h.identification = id;
                    h.dont_fragment = true;
                    h
                },
                Default::default(),
            ))
            .tcp(40000, 80, seq, 512)
            .ack(77);
        let b = if psh { b.psh() } else { b };
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn seg6(seq: u32, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6(
                [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                64,
            )
            .tcp(40000, 80, seq, 512)
            .ack(77);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn data(n: usize, k: usize) -> Vec<u8> {
        (0..n).map(|i| ((i + k * 7) % 251) as u8).collect()
    }

    /// Coalesce `frames` in order; the aggregates (frames as they leave,
    /// each cut again if it is a super-frame) and the refused frames.
    fn run(frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, usize) {
        let mut c = Coalescer::new(10, 70_000);
        let mut out = Vec::new();
        let mut aggregates = 0;
        let take = |c: &mut Coalescer, out: &mut Vec<Vec<u8>>, aggregates: &mut usize| {
            if let Some((hdr, len)) = c.take() {
                let mut f = c.buffer()[10..10 + len].to_vec();
                if hdr.gso_type != 0 {
                    *aggregates += 1;
                    let Intake::Partial(p) = offload::intake(&hdr, &mut f) else {
                        panic!("an aggregate goes on partial")
                    };
                    offload::finish(&p, &mut f, |s| out.push(s.clone())).unwrap();
                } else {
                    out.push(f);
                }
            }
        };
        for f in frames {
            loop {
                match c.offer(f, false) {
                    Offer::Held => break,
                    Offer::FlushFirst => take(&mut c, &mut out, &mut aggregates),
                    Offer::Refused => {
                        take(&mut c, &mut out, &mut aggregates);
                        out.push(f.clone());
                        break;
                    }
                }
            }
        }
        take(&mut c, &mut out, &mut aggregates);
        (out, aggregates)
    }

    /// A run of full segments and a short PSH one: one aggregate, and cut
    /// again it gives back exactly the segments (headers, ids, checksums).
    #[test]
    fn a_run_of_segments_becomes_one_aggregate_and_back() {
        let mut frames = Vec::new();
        for i in 0..5u32 {
            let last = i == 4;
            let n = if last { 300 } else { MSS };
            frames.push(seg4(
                1000 + i * MSS as u32,
                7 + i as u16,
                &data(n, i as usize),
                last,
            ));
        }
        let (out, aggregates) = run(&frames);
        assert_eq!(aggregates, 1);
        assert_eq!(out, frames);
        let six: Vec<Vec<u8>> = (0..4u32)
            .map(|i| seg6(5 + i * MSS as u32, &data(MSS, i as usize)))
            .collect();
        let (out, aggregates) = run(&six);
        assert_eq!((aggregates, out), (1, six));
    }

    /// What must not merge: a gap in sequence, an id that does not count
    /// up, another flow, a bad checksum, a segment after PSH, a longer
    /// segment than the first, a SYN, a pure ACK. Nothing is lost and the
    /// order stays.
    #[test]
    fn what_must_not_merge_is_kept_apart_and_in_order() {
        let d = |k| data(MSS, k);
        let mut bad = seg4(4000, 4, &d(3), false);
        let at = bad.len() - 1;
        bad[at] ^= 0xff;
        let mut other_flow = seg4(5000, 5, &d(4), false);
        other_flow[14 + 12 + 3] = 9; // another source address
        let ip_csum = |f: &mut Vec<u8>| {
            f[24..26].fill(0);
            let c = !fold(sum16(&f[14..34], 0));
            f[24..26].copy_from_slice(&c.to_be_bytes());
        };
        ip_csum(&mut other_flow);
        let cases: Vec<Vec<Vec<u8>>> = vec![
            vec![seg4(1000, 1, &d(0), false), seg4(3000, 2, &d(1), false)],
            vec![seg4(1000, 1, &d(0), false), seg4(2000, 9, &d(1), false)],
            vec![seg4(3000, 3, &d(2), false), bad.clone()],
            vec![seg4(4000, 4, &d(2), false), other_flow.clone()],
            vec![seg4(1000, 1, &d(0), true), seg4(2000, 2, &d(1), false)],
            vec![
                seg4(1000, 1, &data(500, 0), false),
                seg4(1500, 2, &d(1), false),
            ],
            vec![seg4(1000, 1, &d(0), false), seg4(2000, 2, &[], false)],
        ];
        for (i, frames) in cases.iter().enumerate() {
            let (out, aggregates) = run(frames);
            assert_eq!(aggregates, 0, "case {i}");
            assert_eq!(&out, frames, "case {i}");
        }
    }

    /// Garbage, truncations and every cut of a segment are refused, never
    /// a panic; an aggregate never outgrows IPv4's total length.
    #[test]
    fn garbage_is_refused_and_aggregates_stay_bounded() {
        let f = seg4(1000, 1, &data(MSS, 0), false);
        let mut c = Coalescer::new(10, 70_000);
        for cut in 0..f.len() {
            assert_eq!(c.offer(&f[..cut], false), Offer::Refused, "{cut}");
        }
        assert!(c.take().is_none(), "nothing held");
        let mut frames = Vec::new();
        for i in 0..80u32 {
            frames.push(seg4(
                1000 + i * 1400,
                1 + i as u16,
                &data(1400, i as usize),
                false,
            ));
        }
        let (out, aggregates) = run(&frames);
        assert_eq!(out, frames);
        assert!(aggregates >= 2, "{aggregates}");
    }
}
