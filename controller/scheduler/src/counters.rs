//! Per-node counts of bound pods, kept per selector and updated as pods
//! come and go, so a pod's topology spread and inter-pod affinity need one
//! pass over the nodes instead of one over every pod of the cluster.
//!
//! A counter is found by its key; the counters that may match a pod are
//! found through one label pair their selector requires (its "pin"), so
//! adding a pod does not try every selector of the cluster.

use std::collections::{BTreeMap, HashMap};

use crate::pod_terms::PodMatcher;

/// Counts per node slot of the pods that match every one of `matchers`
/// (or, in the set of existing anti-affinity terms, that own the term).
#[derive(Debug, Clone)]
pub(crate) struct Counter {
    pub matchers: Vec<PodMatcher>,
    /// The owners' topology key, for existing pods' anti-affinity terms.
    pub topology_key: String,
    pub counts: Vec<u32>,
}

impl Counter {
    pub(crate) fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.matchers.iter().all(|m| m.matches(namespace, labels))
    }
}

/// Counters by key, with the pin index.
#[derive(Debug, Clone, Default)]
pub(crate) struct CounterSet {
    entries: Vec<Counter>,
    by_key: HashMap<String, usize>,
    pinned: HashMap<String, HashMap<String, Vec<usize>>>,
    unpinned: Vec<usize>,
    topology_keys: std::collections::BTreeSet<String>,
}

impl CounterSet {
    pub(crate) fn get(&self, key: &str) -> Option<&Counter> {
        self.by_key.get(key).map(|&i| &self.entries[i])
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// Adds a counter with every count at zero.
    pub(crate) fn insert(
        &mut self,
        key: String,
        matchers: Vec<PodMatcher>,
        topology_key: String,
        slots: usize,
    ) {
        let i = self.entries.len();
        match matchers.first().and_then(PodMatcher::pin) {
            Some((k, v)) => self
                .pinned
                .entry(k.to_owned())
                .or_default()
                .entry(v.to_owned())
                .or_default()
                .push(i),
            None => self.unpinned.push(i),
        }
        if !topology_key.is_empty() {
            self.topology_keys.insert(topology_key.clone());
        }
        self.entries.push(Counter {
            matchers,
            topology_key,
            counts: vec![0; slots],
        });
        self.by_key.insert(key, i);
    }

    /// The counters that match a pod with these labels.
    pub(crate) fn matching<'a>(
        &'a self,
        namespace: &'a str,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Counter> + 'a {
        self.candidates(labels)
            .map(|i| &self.entries[i])
            .filter(move |c| c.matches(namespace, labels))
    }

    fn candidates<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = usize> + 'a {
        let pinned = labels.iter().flat_map(move |(k, v)| {
            self.pinned
                .get(k)
                .and_then(|by_value| by_value.get(v))
                .into_iter()
                .flatten()
                .copied()
        });
        self.unpinned.iter().copied().chain(pinned)
    }

    /// Adds `delta` on `slot` to every counter that matches the pod.
    pub(crate) fn bump_matching(
        &mut self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        slot: usize,
        delta: i32,
    ) {
        let hits: Vec<usize> = self
            .candidates(labels)
            .filter(|&i| self.entries[i].matches(namespace, labels))
            .collect();
        for i in hits {
            bump(self.entries[i].counts.get_mut(slot), delta);
        }
    }

    /// Adds `delta` on `slot` to the counter named `key`.
    pub(crate) fn bump_key(&mut self, key: &str, slot: usize, delta: i32) {
        if let Some(&i) = self.by_key.get(key) {
            bump(self.entries[i].counts.get_mut(slot), delta);
        }
    }

    /// Makes room for `slots` node slots.
    pub(crate) fn grow(&mut self, slots: usize) {
        for e in &mut self.entries {
            if e.counts.len() < slots {
                e.counts.resize(slots, 0);
            }
        }
    }
}

/// Counts are sized to the node slots when a slot or a counter is made,
/// so `count` is always there; a missing one is skipped, not a panic.
fn bump(count: Option<&mut u32>, delta: i32) {
    if let Some(c) = count {
        *c = c.saturating_add_signed(delta);
    }
}

impl CounterSet {
    /// The distinct topology keys of the counters (existing anti-affinity
    /// terms).
    pub(crate) fn topology_keys(&self) -> &std::collections::BTreeSet<String> {
        &self.topology_keys
    }
}
