//! One's-complement checksum arithmetic (RFC 1071, RFC 1624).
//!
//! A *diff* here is an unfolded one's-complement sum over big-endian 16-bit
//! words: `sum(!old) + sum(new)` for an incremental update (RFC 1624 eqn. 3),
//! or plain `sum(bytes)` for a checksum computed from scratch. Sums stay far
//! below `u32::MAX` for the sizes used here (at most a few dozen words), so
//! plain addition never wraps before [`fold`].
//!
//! The kernel's csum helpers add a `__wsum` over raw memory, i.e. a sum of
//! little-endian words on bpfel; one's-complement sums commute with byte
//! swapping, so [`wsum_le`] converts a diff from here into that form.

/// Fold a 32-bit sum to 16 bits with end-around carry.
#[inline(always)]
pub fn fold(sum: u32) -> u16 {
    let s = (sum & 0xffff) + (sum >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The diff as the kernel's `bpf_l3/l4_csum_replace(.., 0, wsum, 0)` expect
/// it on a little-endian machine.
#[inline(always)]
pub fn wsum_le(diff: u32) -> u32 {
    u32::from(fold(diff).swap_bytes())
}

/// Sum of an even-length array as big-endian words.
#[inline(always)]
pub fn sum<const N: usize>(bytes: &[u8; N]) -> u32 {
    let mut s = 0u32;
    let mut i = 0;
    while i + 1 < N {
        s += u32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
        i += 2;
    }
    s
}

/// RFC 1624 difference for replacing `old` by `new` (both even length).
#[inline(always)]
pub fn diff<const N: usize>(old: &[u8; N], new: &[u8; N]) -> u32 {
    let mut s = 0u32;
    let mut i = 0;
    while i + 1 < N {
        s += u32::from(!u16::from_be_bytes([old[i], old[i + 1]]));
        s += u32::from(u16::from_be_bytes([new[i], new[i + 1]]));
        i += 2;
    }
    s
}

/// Difference for a 16-bit field.
#[inline(always)]
pub fn diff16(old: u16, new: u16) -> u32 {
    u32::from(!old) + u32::from(new)
}

/// Difference for a 32-bit field.
#[inline(always)]
pub fn diff32(old: u32, new: u32) -> u32 {
    diff16((old >> 16) as u16, (new >> 16) as u16) + diff16(old as u16, new as u16)
}

/// Sum of a 32-bit value as two words.
#[inline(always)]
pub fn sum32(v: u32) -> u32 {
    (v >> 16) + (v & 0xffff)
}

/// Apply a diff to a stored checksum (RFC 1624 eqn. 3): `HC' = ~(~HC + diff)`.
#[inline(always)]
pub fn apply(csum: u16, diff: u32) -> u16 {
    !fold(u32::from(!csum) + fold(diff) as u32)
}

/// The checksum field value for data whose words sum to `sum`.
#[inline(always)]
pub fn finish(sum: u32) -> u16 {
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(words: &[u8]) -> u16 {
        let mut s = 0u32;
        for c in words.chunks(2) {
            let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
            s += u32::from(w);
        }
        finish(s)
    }

    #[test]
    fn incremental_matches_full_recompute() {
        let mut data = [0u8; 20];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        let c0 = full(&data);
        let old: [u8; 4] = [data[4], data[5], data[6], data[7]];
        let new = [198, 18, 0, 7];
        data[4..8].copy_from_slice(&new);
        assert_eq!(apply(c0, diff(&old, &new)), full(&data));
        let c1 = full(&data);
        data[10] = 0xab;
        data[11] = 0xcd;
        let oldw = u16::from_be_bytes([data[10], data[11]]);
        let _ = oldw;
        let c2 = full(&data);
        assert_ne!(c1, c2);
    }

    #[test]
    fn diff32_matches_bytes() {
        let a = 0x1234_5678u32;
        let b = 0x9abc_def0u32;
        assert_eq!(
            fold(diff32(a, b)),
            fold(diff(&a.to_be_bytes(), &b.to_be_bytes()))
        );
    }

    #[test]
    fn wsum_le_is_byte_swapped_fold() {
        assert_eq!(wsum_le(0x1_0002), 0x0300);
    }
}
