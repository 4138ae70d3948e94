//! A ReplicaSet's "expectations", as upstream's `ControllerExpectations`:
//! the pods its last sync created or deleted and has not yet seen come back
//! through the cache.
//!
//! Pods are created with `generateName` and a sync plans against the cache,
//! not the store: a sync that ran before its own creations were cached
//! would see too few pods and create them again. So a ReplicaSet's next
//! sync waits until every pod it created is cached and every pod it
//! deleted is gone or marked for deletion, or until [`TIMEOUT`] has passed
//! since the first write still awaited (upstream's five minutes), in case
//! a watch event was lost.
//!
//! Pure: the time is passed in, the cache is asked through a closure.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How long expectations are trusted before a sync goes ahead anyway
/// (upstream `ExpectationsTimeout`).
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Where a pod stands in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Absent,
    Present,
    /// Present, with a deletion timestamp.
    Deleting,
}

#[derive(Debug)]
struct Pending {
    created: BTreeSet<String>,
    deleted: BTreeSet<String>,
    /// When the oldest write still awaited was made.
    since: Instant,
}

/// Expectations of every ReplicaSet, by key.
#[derive(Debug)]
pub struct Expectations<K> {
    all: HashMap<K, Pending>,
}

impl<K> Default for Expectations<K> {
    fn default() -> Self {
        Expectations {
            all: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> Expectations<K> {
    /// Remember that a sync of `key` at `now` created the pods `created`
    /// and deleted the pods `deleted` (by name). Added to what is still
    /// awaited; the timeout counts from the oldest.
    pub fn expect(
        &mut self,
        key: &K,
        created: impl IntoIterator<Item = String>,
        deleted: impl IntoIterator<Item = String>,
        now: Instant,
    ) {
        let (created, deleted): (BTreeSet<_>, BTreeSet<_>) =
            (created.into_iter().collect(), deleted.into_iter().collect());
        if created.is_empty() && deleted.is_empty() {
            return;
        }
        let e = self.all.entry(key.clone()).or_insert_with(|| Pending {
            created: BTreeSet::new(),
            deleted: BTreeSet::new(),
            since: now,
        });
        e.created.extend(created);
        e.deleted.extend(deleted);
    }

    /// Whether `key` may sync at `now`: every write awaited is in the cache
    /// as `seen` tells it, or the wait timed out. Either way the satisfied
    /// expectations are dropped.
    pub fn satisfied(&mut self, key: &K, seen: impl Fn(&str) -> Seen, now: Instant) -> bool {
        let Some(e) = self.all.get_mut(key) else {
            return true;
        };
        e.created.retain(|name| seen(name) == Seen::Absent);
        e.deleted.retain(|name| seen(name) == Seen::Present);
        let timed_out = now.saturating_duration_since(e.since) > TIMEOUT;
        if (e.created.is_empty() && e.deleted.is_empty()) || timed_out {
            self.all.remove(key);
            return true;
        }
        false
    }

    /// Drop what is awaited for `key` (its ReplicaSet is gone).
    pub fn forget(&mut self, key: &K) {
        self.all.remove(key);
    }

    /// ReplicaSets with writes still awaited.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn cache(pods: &[(&str, Seen)]) -> impl Fn(&str) -> Seen {
        let m: HashMap<String, Seen> = pods.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        move |n| m.get(n).copied().unwrap_or(Seen::Absent)
    }

    // upstream: a sync waits for the pods its last sync created
    #[test]
    fn created_pods_are_awaited_until_cached() {
        let t = Instant::now();
        let mut e = Expectations::default();
        e.expect(&"rs", names(&["a", "b"]), vec![], t);
        assert!(!e.satisfied(&"rs", cache(&[("a", Seen::Present)]), t));
        // A pod already being deleted was seen all the same.
        let both = cache(&[("a", Seen::Present), ("b", Seen::Deleting)]);
        assert!(e.satisfied(&"rs", both, t));
        assert!(e.is_empty());
    }

    // upstream: a sync waits for the pods its last sync deleted
    #[test]
    fn deleted_pods_are_awaited_until_gone_or_deleting() {
        let t = Instant::now();
        let mut e = Expectations::default();
        e.expect(&"rs", vec![], names(&["a", "b"]), t);
        let before = cache(&[("a", Seen::Present), ("b", Seen::Present)]);
        assert!(!e.satisfied(&"rs", before, t));
        assert!(!e.satisfied(&"rs", cache(&[("b", Seen::Present)]), t));
        assert!(e.satisfied(&"rs", cache(&[("b", Seen::Deleting)]), t));
    }

    // upstream: ExpectationsTimeout, five minutes from the oldest write
    #[test]
    fn the_wait_ends_after_the_timeout_from_the_oldest_write() {
        let t = Instant::now();
        let mut e = Expectations::default();
        e.expect(&"rs", names(&["a"]), vec![], t);
        // A later write does not restart the clock.
        e.expect(&"rs", names(&["b"]), vec![], t + Duration::from_secs(200));
        assert!(!e.satisfied(&"rs", cache(&[]), t + TIMEOUT));
        assert!(e.satisfied(&"rs", cache(&[]), t + TIMEOUT + Duration::from_secs(1)));
        // Dropped once given up: a new write starts a new wait.
        assert!(e.is_empty());
        let later = t + TIMEOUT * 2;
        e.expect(&"rs", names(&["c"]), vec![], later);
        assert!(!e.satisfied(&"rs", cache(&[]), later + Duration::from_secs(1)));
    }

    #[test]
    fn nothing_written_nothing_awaited() {
        let t = Instant::now();
        let mut e: Expectations<&str> = Expectations::default();
        e.expect(&"rs", vec![], vec![], t);
        assert!(e.is_empty());
        assert!(e.satisfied(&"other", cache(&[]), t));
    }

    #[test]
    fn keys_wait_apart_and_a_forgotten_one_waits_no_more() {
        let t = Instant::now();
        let mut e = Expectations::default();
        e.expect(&"a", names(&["p"]), vec![], t);
        e.expect(&"b", names(&["q"]), vec![], t);
        assert!(!e.satisfied(&"a", cache(&[("q", Seen::Present)]), t));
        assert!(e.satisfied(&"b", cache(&[("q", Seen::Present)]), t));
        assert_eq!(e.len(), 1);
        e.forget(&"a");
        assert!(e.satisfied(&"a", cache(&[]), t));
    }
}
