//! Packets over byte buffers, with the checksum semantics of the kernel's
//! `bpf_l3_csum_replace` / `bpf_l4_csum_replace` given a precomputed diff,
//! on complete packets and on `CHECKSUM_PARTIAL` ones (what a sender that
//! offloads its checksum hands over, and what a super-frame kept whole
//! carries; see [`super::offload::intake`]).

use crate::csum;
use crate::env::{L4Csum, Packet};

#[inline]
fn load<const N: usize>(bytes: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    bytes.get(off..end)?.try_into().ok()
}

#[inline]
fn store(bytes: &mut [u8], off: usize, src: &[u8]) -> Option<()> {
    let end = off.checked_add(src.len())?;
    bytes.get_mut(off..end)?.copy_from_slice(src);
    Some(())
}

fn l3_apply(bytes: &mut [u8], off: usize, diff: u32) -> Option<()> {
    let old = u16::from_be_bytes(load::<2>(bytes, off)?);
    store(bytes, off, &csum::apply(old, diff).to_be_bytes())
}

/// With `partial`, the field holds the folded pseudo-header sum, not a
/// checksum: like the kernel's `inet_proto_csum_replace_by_diff` on a
/// `CHECKSUM_PARTIAL` skb, only a pseudo-header change (an address) is
/// added to it, uncomplemented; a port change is covered when the sender's
/// NIC (or the stack) sums the segment, so the field stays.
fn l4_apply(bytes: &mut [u8], off: usize, diff: u32, how: L4Csum, partial: bool) -> Option<()> {
    if partial && !how.pseudo {
        return Some(());
    }
    let old = u16::from_be_bytes(load::<2>(bytes, off)?);
    // BPF_F_MARK_MANGLED_0: UDP/IPv4 "no checksum" stays so, and a computed
    // zero is sent as its one's-complement twin.
    if how.udp4 && old == 0 {
        return Some(());
    }
    let mut new = if partial {
        !csum::apply(!old, diff)
    } else {
        csum::apply(old, diff)
    };
    if how.udp4 && new == 0 {
        new = 0xffff;
    }
    store(bytes, off, &new.to_be_bytes())
}

/// An owned frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VecPacket {
    pub data: Vec<u8>,
    /// The kernel's `PACKET_OTHERHOST`: see [`Packet::for_other_host`].
    pub other_host: bool,
    /// `CHECKSUM_PARTIAL`: the L4 checksum field holds the pseudo-header
    /// sum (see [`l4_apply`]).
    pub csum_partial: bool,
    /// The program resized it: see [`FramePacket::rebuilt`].
    pub rebuilt: bool,
    /// See [`Packet::ingress_link`]; 0: none (no pod's link).
    pub ingress_link: u32,
}

impl VecPacket {
    pub fn new(data: Vec<u8>) -> Self {
        Self {
            data,
            other_host: false,
            csum_partial: false,
            rebuilt: false,
            ingress_link: 0,
        }
    }

    /// The same frame, as read from link `link` (a pod's, at `FromPod`).
    pub fn from_link(mut self, link: u32) -> Self {
        self.ingress_link = link;
        self
    }

    /// The same frame, its L4 checksum left to the sender's offload.
    pub fn partial(mut self) -> Self {
        self.csum_partial = true;
        self
    }

    /// The same frame, as arrived addressed to another host (flooded).
    pub fn flooded(mut self) -> Self {
        self.other_host = true;
        self
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.data
    }
}

impl From<Vec<u8>> for VecPacket {
    fn from(data: Vec<u8>) -> Self {
        Self::new(data)
    }
}

impl Packet for VecPacket {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn load<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        load(&self.data, off)
    }

    fn store(&mut self, off: usize, bytes: &[u8]) -> Option<()> {
        store(&mut self.data, off, bytes)
    }

    fn l3_csum_apply(&mut self, csum_off: usize, diff: u32) -> Option<()> {
        l3_apply(&mut self.data, csum_off, diff)
    }

    fn l4_csum_apply(&mut self, csum_off: usize, diff: u32, how: L4Csum) -> Option<()> {
        l4_apply(&mut self.data, csum_off, diff, how, self.csum_partial)
    }

    fn resize(&mut self, new_len: usize) -> Option<()> {
        self.rebuilt = true;
        self.data.resize(new_len, 0);
        Some(())
    }

    fn for_other_host(&self) -> bool {
        self.other_host
    }

    fn ingress_link(&self) -> u32 {
        self.ingress_link
    }
}

/// A frame in a caller's buffer (a ring slot, a stack array): the first
/// `len` bytes are the frame, the rest of `buf` is room to grow into.
#[derive(Debug)]
pub struct FramePacket<'a> {
    pub buf: &'a mut [u8],
    pub len: usize,
    /// The kernel's `PACKET_OTHERHOST` (`sll_pkttype` of the socket that
    /// read it): see [`Packet::for_other_host`].
    pub other_host: bool,
    /// `CHECKSUM_PARTIAL`: the L4 checksum field holds the pseudo-header
    /// sum (see [`l4_apply`]).
    pub csum_partial: bool,
    /// The program resized the frame (a P6 answer built in its place, with
    /// complete checksums), even to the same length: what was said of the
    /// frame as it came (partial, a super-frame) no longer holds.
    pub rebuilt: bool,
    /// See [`Packet::ingress_link`]; 0: none (no pod's link).
    pub ingress_link: u32,
}

impl<'a> FramePacket<'a> {
    /// `len` is clamped to the buffer.
    pub fn new(buf: &'a mut [u8], len: usize) -> Self {
        let len = len.min(buf.len());
        Self {
            buf,
            len,
            other_host: false,
            csum_partial: false,
            rebuilt: false,
            ingress_link: 0,
        }
    }

    pub fn frame(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

impl Packet for FramePacket<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn load<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        load(self.frame(), off)
    }

    fn store(&mut self, off: usize, bytes: &[u8]) -> Option<()> {
        store(self.bytes(), off, bytes)
    }

    fn l3_csum_apply(&mut self, csum_off: usize, diff: u32) -> Option<()> {
        l3_apply(self.bytes(), csum_off, diff)
    }

    fn l4_csum_apply(&mut self, csum_off: usize, diff: u32, how: L4Csum) -> Option<()> {
        let partial = self.csum_partial;
        l4_apply(self.bytes(), csum_off, diff, how, partial)
    }

    fn resize(&mut self, new_len: usize) -> Option<()> {
        if new_len > self.buf.len() {
            return None;
        }
        self.rebuilt = true;
        // Grown bytes must not leak a previous frame's contents.
        if new_len > self.len {
            self.buf[self.len..new_len].fill(0);
        }
        self.len = new_len;
        Some(())
    }

    fn for_other_host(&self) -> bool {
        self.other_host
    }

    fn ingress_link(&self) -> u32 {
        self.ingress_link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_packet_bounds() {
        let mut buf = [0u8; 8];
        let mut p = FramePacket::new(&mut buf, 4);
        assert!(p.load::<4>(0).is_some());
        assert!(p.load::<4>(1).is_none());
        assert!(p.load::<1>(usize::MAX).is_none());
        assert!(p.store(3, &[1, 2]).is_none());
        assert!(p.resize(9).is_none());
        p.resize(8).unwrap();
        assert_eq!(p.load::<4>(4), Some([0; 4]));
    }

    /// A partial field updated for an address change, then summed as the
    /// sender's offload would, gives the checksum a complete packet updated
    /// for the same change has; a port change leaves a partial field alone.
    #[test]
    fn partial_fields_take_only_pseudo_header_changes() {
        use crate::host::offload::{fold, sum16};
        // Pseudo header (two addresses, proto 6, length 8) and an 8-byte
        // "segment": ports 1000 -> 80, checksum field at 6.
        let (src, dst) = ([198u8, 18, 0, 1], [198u8, 18, 0, 9]);
        let seg = [0x03u8, 0xe8, 0x00, 0x50, 0x12, 0x34, 0, 0];
        let pseudo = |d: &[u8; 4]| sum16(&src, sum16(d, 6 + 8));
        let complete = |d: &[u8; 4], seg: &[u8]| !fold(sum16(seg, pseudo(d)));
        let new_dst = [198u8, 18, 1, 7];
        let diff = csum::sum32(u32::from_be_bytes(new_dst)) + csum::sum32(!u32::from_be_bytes(dst));
        // Complete: the field is the checksum, updated in place.
        let mut full = seg;
        full[6..8].copy_from_slice(&complete(&dst, &seg).to_be_bytes());
        let mut p = VecPacket::new(full.to_vec());
        let pseudo_change = L4Csum {
            pseudo: true,
            udp4: false,
        };
        p.l4_csum_apply(6, diff, pseudo_change).unwrap();
        // Partial: the field is the pseudo-header sum.
        let mut part = seg;
        part[6..8].copy_from_slice(&fold(pseudo(&dst)).to_be_bytes());
        let mut q = VecPacket::new(part.to_vec()).partial();
        q.l4_csum_apply(6, diff, pseudo_change).unwrap();
        assert_eq!(q.data[6..8], fold(pseudo(&new_dst)).to_be_bytes());
        let finished = !fold(sum16(&q.data, 0));
        assert_eq!(p.data[6..8], finished.to_be_bytes());
        // A port change: no pseudo-header part, the field stays.
        let before = q.data.clone();
        let port_change = L4Csum {
            pseudo: false,
            udp4: false,
        };
        q.l4_csum_apply(6, 0x1234, port_change).unwrap();
        assert_eq!(q.data, before);
    }

    #[test]
    fn udp4_zero_checksum_stays_zero() {
        let mut p = VecPacket::new(vec![0u8; 8]);
        let how = L4Csum {
            pseudo: true,
            udp4: true,
        };
        p.l4_csum_apply(6, 0x1234, how).unwrap();
        assert_eq!(p.load::<2>(6), Some([0, 0]));
    }

    #[test]
    fn udp4_zero_result_becomes_ffff() {
        // ~0x1234 + diff where diff makes the folded sum 0xffff.
        let mut p = VecPacket::new(vec![0, 0, 0, 0, 0, 0, 0x12, 0x34]);
        let how = L4Csum {
            pseudo: false,
            udp4: true,
        };
        p.l4_csum_apply(6, 0x1234, how).unwrap();
        assert_eq!(p.load::<2>(6), Some([0xff, 0xff]));
    }
}
