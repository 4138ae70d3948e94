//! Node names: `<pool>-<zone tag>-<suffix>`, like GKE's
//! `gke-<cluster>-<pool>-<hash>-<suffix>`.
//!
//! - `<pool>` is the pool's name, cut so that the whole name fits a DNS
//!   label (63 characters), since the name is also the node's hostname;
//! - `<zone tag>` is the zone's last `-`-separated part (`europe-west1-b`
//!   gives `b`), lowercase letters and digits only, at most 8 of them
//!   (`z` if none is left);
//! - `<suffix>` is 4 characters (8 after 4 096 collisions) of an alphabet
//!   without vowels, as Kubernetes' `generateName` uses, so that no word
//!   is spelt by chance. It is a hash of the pool, the full zone, a salt
//!   (the planner's clock reading) and an attempt number.
//!
//! The salt keeps a replacement from taking the name of the node it
//! replaces, or of any recent one, as GKE's random suffixes do: the name
//! is what the load balancer's health board, the agents' routes and the
//! pool's status key a node by, and a reused name would have them take a
//! new node for a dead one. The same pool, zone, salt and names in use give
//! the same new names, so plans are deterministic; a name in use by an
//! instance or a Node is skipped by
//! trying the next attempt, so names are unique within the pool (and,
//! carrying the pool's name, across pools unless two long pool names share
//! their first 50 characters, which the used-name set still catches for
//! the Nodes passed in).

use std::collections::HashSet;

/// The longest node name: a DNS label, for the hostname.
pub const MAX_NAME_LEN: usize = 63;

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SHORT_SUFFIX: usize = 4;
const LONG_SUFFIX: usize = 8;
/// Attempts with a short suffix before lengthening it; 27^4 is 531 441
/// names, so a pool this crowded is very large indeed.
const SHORT_ATTEMPTS: u32 = 4096;
const MAX_ZONE_TAG: usize = 8;

/// The name of attempt `attempt` for a node of `pool` in `zone`, with
/// `salt` (see the module's notes).
pub fn node_name(pool: &str, zone: &str, salt: u64, attempt: u32) -> String {
    let tag = zone_tag(zone);
    let suffix_len = if attempt < SHORT_ATTEMPTS {
        SHORT_SUFFIX
    } else {
        LONG_SUFFIX
    };
    let suffix = suffix(pool, zone, salt, attempt, suffix_len);
    let room = MAX_NAME_LEN - tag.len() - suffix.len() - 2;
    let mut prefix: String = pool.chars().take(room).collect();
    // A cut name must still end in an alphanumeric character.
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    if prefix.is_empty() {
        prefix.push('n');
    }
    format!("{prefix}-{tag}-{suffix}")
}

/// `count` new names for `zone`, none of them in `taken`; each is added to
/// `taken`, so several calls (one per zone) never hand out one name twice.
pub fn fresh_names(
    pool: &str,
    zone: &str,
    salt: u64,
    count: usize,
    taken: &mut HashSet<String>,
) -> Vec<String> {
    let mut names = Vec::with_capacity(count);
    let mut attempt = 0u32;
    while names.len() < count {
        let name = node_name(pool, zone, salt, attempt);
        attempt = attempt.wrapping_add(1);
        if taken.insert(name.clone()) {
            names.push(name);
        }
    }
    names
}

/// The salt of names made at `now` (its nanoseconds, folded).
pub fn salt(now: k8s_openapi::jiff::Timestamp) -> u64 {
    let n = now.as_nanosecond();
    (n as u64) ^ ((n >> 64) as u64)
}

fn zone_tag(zone: &str) -> String {
    let last = zone.rsplit('-').next().unwrap_or(zone);
    let tag: String = last
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(MAX_ZONE_TAG)
        .collect();
    if tag.is_empty() {
        "z".into()
    } else {
        tag
    }
}

fn suffix(pool: &str, zone: &str, salt: u64, attempt: u32, len: usize) -> String {
    let mut h = Fnv::default();
    h.write(pool.as_bytes());
    h.write(&[0]);
    h.write(zone.as_bytes());
    h.write(&[0]);
    h.write(&salt.to_le_bytes());
    h.write(&attempt.to_le_bytes());
    let mut x = h.0;
    let base = ALPHABET.len() as u64;
    (0..len)
        .map(|_| {
            let c = ALPHABET[(x % base) as usize];
            x /= base;
            char::from(c)
        })
        .collect()
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms, unlike
/// `std`'s hasher, so names do not change with the toolchain.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_pool_zone_tag_and_a_suffix() {
        let name = node_name("pool-a", "europe-west1-b", 0, 0);
        let (head, suffix) = name.rsplit_once('-').unwrap();
        assert_eq!(head, "pool-a-b");
        assert_eq!(suffix.len(), 4);
        assert!(suffix.bytes().all(|c| ALPHABET.contains(&c)), "{name}");
        // Deterministic, and different per attempt and per zone.
        assert_eq!(name, node_name("pool-a", "europe-west1-b", 0, 0));
        assert_ne!(name, node_name("pool-a", "europe-west1-b", 0, 1));
        assert_ne!(name, node_name("pool-a", "us-east1-b", 0, 0));
    }

    #[test]
    fn long_pool_names_are_cut_to_a_dns_label() {
        // 63 - "zonea" - 4 - 2 dashes leaves 52 characters of the pool.
        let pool = format!("{}-xy", "p".repeat(51));
        let name = node_name(&pool, "Zone_A!", 0, 0);
        assert_eq!(name.len(), MAX_NAME_LEN - 1, "{name}");
        // The cut lands on the '-' and drops it; the odd zone becomes `zonea`.
        assert!(
            name.starts_with(&format!("{}-zonea-", "p".repeat(51))),
            "{name}"
        );
        assert_eq!(node_name("p", "---", 0, 0).split('-').nth(1), Some("z"));
        assert!(node_name(&"q".repeat(300), "a", 0, SHORT_ATTEMPTS).len() <= MAX_NAME_LEN);
    }

    #[test]
    fn a_later_salt_gives_other_names() {
        // A node replaced a moment later does not get its predecessor's name.
        let t = |s: i64| k8s_openapi::jiff::Timestamp::from_second(s).unwrap();
        let (a, b) = (salt(t(1_800_000_000)), salt(t(1_800_000_001)));
        assert_ne!(a, b);
        let early: HashSet<String> = (0..50).map(|i| node_name("p", "a", a, i)).collect();
        let late: HashSet<String> = (0..50).map(|i| node_name("p", "a", b, i)).collect();
        assert!(early.is_disjoint(&late));
    }

    #[test]
    fn fresh_names_skip_names_in_use_and_never_repeat() {
        let mut taken: HashSet<String> =
            [node_name("p", "a", 0, 0), node_name("p", "a", 0, 2)].into();
        let names = fresh_names("p", "a", 0, 3, &mut taken);
        assert_eq!(
            names,
            [
                node_name("p", "a", 0, 1),
                node_name("p", "a", 0, 3),
                node_name("p", "a", 0, 4)
            ]
        );
        let many = fresh_names("p", "a", 0, 5000, &mut taken);
        let unique: HashSet<_> = many.iter().collect();
        assert_eq!(unique.len(), 5000);
        assert!(names.iter().all(|n| !unique.contains(n)));
    }
}
