//! Packets over byte buffers, with the checksum semantics of the kernel's
//! `bpf_l3_csum_replace` / `bpf_l4_csum_replace` given a precomputed diff.

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

fn l4_apply(bytes: &mut [u8], off: usize, diff: u32, how: L4Csum) -> Option<()> {
    let old = u16::from_be_bytes(load::<2>(bytes, off)?);
    // BPF_F_MARK_MANGLED_0: UDP/IPv4 "no checksum" stays so, and a computed
    // zero is sent as its one's-complement twin.
    if how.udp4 && old == 0 {
        return Some(());
    }
    let mut new = csum::apply(old, diff);
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
}

impl VecPacket {
    pub fn new(data: Vec<u8>) -> Self {
        Self {
            data,
            other_host: false,
        }
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
        l4_apply(&mut self.data, csum_off, diff, how)
    }

    fn resize(&mut self, new_len: usize) -> Option<()> {
        self.data.resize(new_len, 0);
        Some(())
    }

    fn for_other_host(&self) -> bool {
        self.other_host
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
}

impl<'a> FramePacket<'a> {
    /// `len` is clamped to the buffer.
    pub fn new(buf: &'a mut [u8], len: usize) -> Self {
        let len = len.min(buf.len());
        Self {
            buf,
            len,
            other_host: false,
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
        l4_apply(self.bytes(), csum_off, diff, how)
    }

    fn resize(&mut self, new_len: usize) -> Option<()> {
        if new_len > self.buf.len() {
            return None;
        }
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
