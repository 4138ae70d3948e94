//! Where each service's endpoint slots and Maglev window live in the kernel
//! arrays: a buddy allocator over array indices. Pure logic, no I/O.
//!
//! Why a buddy allocator: windows come and go one service at a time (an
//! update writes only the services that changed, into free space, then
//! frees their old windows), so free space must merge back. Blocks are
//! powers of two aligned to their size, and a freed block merges with its
//! free buddy, so churn does not leave the array in splinters the way
//! first-fit does. The rounding is cheap where it matters: Maglev table
//! sizes are primes just below powers of two (251 → 256, 1021 → 1024),
//! and endpoint slots are 24 bytes.

use std::collections::BTreeSet;

/// A range of array indices `start .. start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Region {
    pub start: u32,
    pub len: u32,
}

impl Region {
    pub fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.len)
    }
}

/// A region could not be reserved: part of it is in use already, or it
/// lies past the end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("indices {}..{} are not free (capacity {capacity})", region.start, region.end())]
pub struct NotFree {
    pub region: Region,
    pub capacity: u32,
}

/// Free blocks of `capacity` indices, by order (`1 << order` indices).
#[derive(Clone, Debug)]
pub struct Buddy {
    capacity: u32,
    min_order: u32,
    /// `free[o]`: start of every free block of order `o`.
    free: Vec<BTreeSet<u32>>,
    free_total: u64,
}

/// The order of the smallest block holding `len` indices.
fn order_for(len: u32) -> u32 {
    len.max(1).next_power_of_two().trailing_zeros()
}

/// What a buddy allocator with blocks of at least `min_block` takes for
/// `len` indices: the next power of two.
pub fn block_len(len: u64, min_block: u32) -> u64 {
    len.max(u64::from(min_block)).max(1).next_power_of_two()
}

/// Cut `region` into maximal aligned power-of-two blocks, as (start, order).
fn aligned_blocks(region: Region) -> impl Iterator<Item = (u32, u32)> {
    let mut at = u64::from(region.start);
    let end = region.end();
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        // The largest block that starts at `at` (alignment) and ends by `end`.
        let align = if at == 0 { 63 } else { at.trailing_zeros() };
        let fit = 63 - (end - at).leading_zeros();
        let order = align.min(fit).min(31);
        let b = (at as u32, order);
        at += 1u64 << order;
        Some(b)
    })
}

impl Buddy {
    /// Every index of `0 .. capacity` free; blocks never smaller than
    /// `min_block` (a power of two; `capacity` must be a multiple of it).
    pub fn new(capacity: u32, min_block: u32) -> Buddy {
        let min_order = order_for(min_block);
        let mut b = Buddy {
            capacity,
            min_order,
            free: vec![BTreeSet::new(); 32],
            free_total: 0,
        };
        // A tail shorter than `min_block` is never handed out.
        let usable = capacity & !((1u32 << min_order) - 1);
        for (start, order) in aligned_blocks(Region {
            start: 0,
            len: usable,
        }) {
            b.insert(start, order);
        }
        b
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Indices free, in blocks of any size.
    pub fn free_total(&self) -> u64 {
        self.free_total
    }

    /// The largest block that could be handed out now.
    pub fn largest_free(&self) -> u32 {
        (0..32u32)
            .rev()
            .find(|o| !self.free[*o as usize].is_empty())
            .map_or(0, |o| 1 << o)
    }

    fn insert(&mut self, start: u32, order: u32) {
        self.free[order as usize].insert(start);
        self.free_total += 1u64 << order;
    }

    fn remove(&mut self, start: u32, order: u32) -> bool {
        let had = self.free[order as usize].remove(&start);
        if had {
            self.free_total -= 1u64 << order;
        }
        had
    }

    /// A block of at least `len` indices (lowest address among the
    /// smallest free blocks that fit), or `None`.
    pub fn alloc(&mut self, len: u32) -> Option<Region> {
        let want = order_for(len).max(self.min_order);
        if want > 31 {
            return None;
        }
        let have = (want..32).find(|o| !self.free[*o as usize].is_empty())?;
        let start = *self.free[have as usize].first()?;
        self.remove(start, have);
        // Split down, returning the upper halves.
        for o in (want..have).rev() {
            self.insert(start + (1 << o), o);
        }
        Some(Region {
            start,
            len: 1 << want,
        })
    }

    /// Give a region back (one from [`Buddy::alloc`] or
    /// [`Buddy::reserve`]); it merges with free neighbours.
    pub fn free(&mut self, region: Region) {
        for (start, order) in aligned_blocks(region) {
            self.free_block(start, order);
        }
    }

    fn free_block(&mut self, mut start: u32, mut order: u32) {
        while order < 31 {
            let buddy = start ^ (1 << order);
            if !self.remove(buddy, order) {
                break;
            }
            start = start.min(buddy);
            order += 1;
        }
        self.insert(start, order);
    }

    /// Mark `region` used (what a previous agent's services point at).
    /// Nothing is taken when any of it is not free.
    pub fn reserve(&mut self, region: Region) -> Result<(), NotFree> {
        let err = NotFree {
            region,
            capacity: self.capacity,
        };
        if region.end() > u64::from(self.capacity) {
            return Err(err);
        }
        let blocks: Vec<(u32, u32)> = aligned_blocks(region).collect();
        let mut taken = Vec::new();
        for &(start, order) in &blocks {
            if self.take(start, order) {
                taken.push((start, order));
            } else {
                for (s, o) in taken {
                    self.free_block(s, o);
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// Take the block (`start`, `order`) out of whichever free block holds
    /// it, splitting that one; false if no free block holds it whole.
    fn take(&mut self, start: u32, order: u32) -> bool {
        for o in order..32 {
            let outer = start & !((1u64 << o) - 1) as u32;
            if self.remove(outer, o) {
                // Split `outer` down to `start`, freeing the other halves.
                let mut at = outer;
                for s in (order..o).rev() {
                    let half = at + (1 << s);
                    if start >= half {
                        self.insert(at, s);
                        at = half;
                    } else {
                        self.insert(half, s);
                    }
                }
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u32, len: u32) -> Region {
        Region { start, len }
    }

    #[test]
    fn blocks_are_aligned_powers_of_two() {
        let mut b = Buddy::new(4096, 256);
        let a = b.alloc(251).unwrap();
        assert_eq!(a, r(0, 256));
        let c = b.alloc(1021).unwrap();
        assert_eq!(c, r(1024, 1024), "aligned to its size");
        let d = b.alloc(1).unwrap();
        assert_eq!(d.len, 256, "never below the minimum block");
        assert_eq!(b.free_total(), 4096 - 256 - 1024 - 256);
    }

    #[test]
    fn freeing_everything_merges_back_to_the_whole() {
        let mut b = Buddy::new(1 << 16, 1);
        let mut got = Vec::new();
        for i in 0..500u32 {
            got.push(b.alloc(1 + i % 37).unwrap());
        }
        // Free in an order unrelated to allocation.
        got.sort_by_key(|g| (g.start.wrapping_mul(2_654_435_761), g.len));
        for g in got {
            b.free(g);
        }
        assert_eq!(b.free_total(), 1 << 16);
        assert_eq!(b.largest_free(), 1 << 16);
    }

    #[test]
    fn a_capacity_not_a_power_of_two_is_used_whole() {
        let mut b = Buddy::new(3 * 1024 + 512, 256);
        assert_eq!(b.free_total(), 3584);
        let mut n = 0;
        while b.alloc(256).is_some() {
            n += 1;
        }
        assert_eq!(n, 14);
        assert!(b.alloc(1).is_none());
    }

    #[test]
    fn exhaustion_and_reuse() {
        let mut b = Buddy::new(1024, 256);
        let x: Vec<Region> = (0..4).map(|_| b.alloc(200).unwrap()).collect();
        assert!(b.alloc(1).is_none(), "full");
        b.free(x[1]);
        assert_eq!(b.alloc(256), Some(x[1]), "the freed block is reused");
        assert!(b.alloc(512).is_none());
        b.free(x[2]);
        b.free(x[3]);
        assert_eq!(b.alloc(512), Some(r(512, 512)), "buddies merged");
    }

    #[test]
    fn reserve_takes_exact_unaligned_regions_and_refuses_overlaps() {
        let mut b = Buddy::new(1024, 1);
        // An old, packed layout: windows of 3, 10 and 251 back to back.
        b.reserve(r(0, 3)).unwrap();
        b.reserve(r(3, 10)).unwrap();
        b.reserve(r(13, 251)).unwrap();
        assert_eq!(b.free_total(), 1024 - 264);
        assert_eq!(
            b.reserve(r(200, 100)),
            Err(NotFree {
                region: r(200, 100),
                capacity: 1024
            })
        );
        assert_eq!(
            b.free_total(),
            1024 - 264,
            "a refused reserve takes nothing"
        );
        assert!(b.reserve(r(1000, 100)).is_err(), "past the end");
        // Whatever is allocated now stays clear of the reserved windows.
        let a = b.alloc(256).unwrap();
        assert!(u64::from(a.start) >= 264);
        b.free(r(3, 10));
        b.free(r(0, 3));
        b.free(r(13, 251));
        b.free(a);
        assert_eq!(b.largest_free(), 1024, "everything merged again");
    }

    #[test]
    fn block_len_is_what_alloc_takes() {
        let mut b = Buddy::new(1 << 20, 256);
        for len in [1u32, 251, 1021, 131_071] {
            let want = block_len(u64::from(len), 256);
            assert_eq!(u64::from(b.alloc(len).unwrap().len), want, "{len}");
        }
        assert_eq!(block_len(251, 256), 256);
        assert_eq!(block_len(1021, 256), 1024);
        let mut e = Buddy::new(1 << 10, 1);
        assert_eq!(block_len(10, 1), 16);
        assert_eq!(e.alloc(10).unwrap().len, 16);
        assert_eq!(block_len(1, 1), 1);
    }
}
