//! Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4): a
//! lookup table in which every backend owns a near-equal share of entries,
//! and removing one backend moves few entries of the others. The table
//! depends only on the backends' identities (address and port), so every
//! node builds the same table for the same set.

use crate::maps::Addr;

/// Table sizes: primes, so every skip value generates a full permutation.
pub const MAGLEV_PRIMES: [u32; 10] = [
    251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521, 131071,
];

/// Entries per backend at least; the paper's rule for a few-percent
/// imbalance.
const ENTRIES_PER_BACKEND: u64 = 100;

/// The smallest listed prime with at least 100 entries per ready endpoint
/// (capped at the largest).
pub fn maglev_table_size(n_ready: usize) -> u32 {
    let want = (n_ready as u64).saturating_mul(ENTRIES_PER_BACKEND);
    MAGLEV_PRIMES
        .iter()
        .copied()
        .find(|&p| u64::from(p) >= want)
        .unwrap_or(MAGLEV_PRIMES[MAGLEV_PRIMES.len() - 1])
}

/// FNV-1a over the identity, then a strong 64-bit finaliser (splitmix64);
/// the two seeds give Maglev's independent `h1`/`h2`.
fn hash(addr: &Addr, port: u16, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in addr.iter().chain(port.to_be_bytes().iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The table: `m` entries, each an index into `backends`. Empty when there
/// are no backends (the program then never reads it).
pub fn build_maglev(backends: &[(Addr, u16)], m: u32) -> Vec<u32> {
    let n = backends.len();
    if n == 0 || m < 2 {
        return Vec::new();
    }
    let m64 = u64::from(m);
    let perms: Vec<(u64, u64)> = backends
        .iter()
        .map(|(a, p)| {
            let offset = hash(a, *p, 0x5eed_0001) % m64;
            let skip = hash(a, *p, 0x5eed_0002) % (m64 - 1) + 1;
            (offset, skip)
        })
        .collect();
    let mut next = vec![0u64; n];
    let mut table = vec![u32::MAX; m as usize];
    let mut filled = 0usize;
    'fill: loop {
        for (i, &(offset, skip)) in perms.iter().enumerate() {
            // Walk backend i's permutation to its next free entry.
            let mut c = (offset + next[i] * skip) % m64;
            while table[c as usize] != u32::MAX {
                next[i] += 1;
                c = (offset + next[i] * skip) % m64;
            }
            table[c as usize] = i as u32;
            next[i] += 1;
            filled += 1;
            if filled == m as usize {
                break 'fill;
            }
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maps::v4_mapped;

    fn backends(n: usize) -> Vec<(Addr, u16)> {
        (0..n)
            .map(|i| {
                (
                    v4_mapped([198, 18, (i / 250) as u8, (i % 250) as u8 + 1]),
                    8080,
                )
            })
            .collect()
    }

    #[test]
    fn sizes() {
        assert_eq!(maglev_table_size(0), 251);
        assert_eq!(maglev_table_size(2), 251);
        assert_eq!(maglev_table_size(3), 509);
        assert_eq!(maglev_table_size(100), 16381);
        assert_eq!(maglev_table_size(1_000_000), 131071);
    }

    #[test]
    fn every_entry_filled_and_shares_near_equal() {
        for n in [1usize, 2, 3, 7, 10, 50] {
            let m = maglev_table_size(n);
            let t = build_maglev(&backends(n), m);
            assert_eq!(t.len(), m as usize);
            let mut counts = vec![0usize; n];
            for &e in &t {
                assert!((e as usize) < n);
                counts[e as usize] += 1;
            }
            let ideal = m as f64 / n as f64;
            for c in counts {
                // The paper's round-robin fill bounds imbalance to one entry
                // per round: well within a few percent at 100+ entries each.
                assert!(
                    (c as f64 - ideal).abs() <= ideal * 0.03 + 1.0,
                    "n={n} c={c} ideal={ideal}"
                );
            }
        }
    }

    #[test]
    fn deterministic() {
        let b = backends(5);
        assert_eq!(build_maglev(&b, 509), build_maglev(&b, 509));
    }

    #[test]
    fn minimal_disruption_on_removal() {
        let n = 10;
        let m = maglev_table_size(n);
        let all = backends(n);
        let before = build_maglev(&all, m);
        let removed = 3usize;
        let mut rest = all.clone();
        rest.remove(removed);
        let after = build_maglev(&rest, m);
        // Map indices of `after` back to identities of `all`.
        let id_after = |i: u32| if (i as usize) < removed { i } else { i + 1 };
        let mut moved = 0;
        for (b, a) in before.iter().zip(after.iter()) {
            if *b as usize != removed && *b != id_after(*a) {
                moved += 1;
            }
        }
        let kept_total = before.iter().filter(|&&b| b as usize != removed).count();
        // Entries of surviving backends that moved: a small fraction.
        assert!(
            (moved as f64) < kept_total as f64 * 0.1,
            "moved {moved} of {kept_total}"
        );
    }
}
