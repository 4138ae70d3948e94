//! A bounded hash map that evicts the least recently written entry when
//! full, like a BPF LRU hash map seen from the program's side: inserts never
//! fail, old flows make room for new ones.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Writes are queued with a generation; a queue entry whose generation no
/// longer matches the map is stale and skipped. Stale entries are compacted
/// away once they outnumber live ones, which keeps every operation O(1)
/// amortised.
#[derive(Clone, Debug)]
pub struct LruMap<K, V> {
    map: HashMap<K, (V, u64)>,
    order: VecDeque<(K, u64)>,
    capacity: usize,
    next_gen: u64,
    evictions: u64,
}

impl<K: Copy + Eq + Hash, V: Copy> LruMap<K, V> {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            map: HashMap::with_capacity(capacity.min(1 << 16)),
            order: VecDeque::new(),
            capacity,
            next_gen: 0,
            evictions: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries evicted to make room since creation.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    pub fn get(&self, k: &K) -> Option<V> {
        self.map.get(k).map(|(v, _)| *v)
    }

    pub fn contains(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    /// Insert or replace; evicts the oldest entry when full.
    pub fn insert(&mut self, k: K, v: V) {
        let gen = self.next_gen;
        self.next_gen += 1;
        if let Some(slot) = self.map.get_mut(&k) {
            *slot = (v, gen);
        } else {
            if self.map.len() >= self.capacity {
                self.evict_one();
            }
            self.map.insert(k, (v, gen));
        }
        self.order.push_back((k, gen));
        if self.order.len() > 2 * self.capacity + 64 {
            self.compact();
        }
    }

    /// Change the entry at `k` in place, if present, and count it as
    /// recently used (a BPF LRU map marks an element it looks up, and a
    /// write through the value's pointer follows a lookup).
    pub fn update(&mut self, k: &K, f: impl FnOnce(&mut V)) -> bool {
        let gen = self.next_gen;
        match self.map.get_mut(k) {
            Some((v, g)) => {
                f(v);
                *g = gen;
            }
            None => return false,
        }
        self.next_gen += 1;
        self.order.push_back((*k, gen));
        if self.order.len() > 2 * self.capacity + 64 {
            self.compact();
        }
        true
    }

    /// Insert only if absent.
    pub fn insert_new(&mut self, k: K, v: V) -> bool {
        if self.map.contains_key(&k) {
            return false;
        }
        self.insert(k, v);
        true
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k).map(|(v, _)| v)
    }

    /// Keep only the entries for which `keep` is true; returns how many went.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let before = self.map.len();
        self.map.retain(|k, (v, _)| keep(k, v));
        before - self.map.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter().map(|(k, (v, _))| (k, v))
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }

    fn evict_one(&mut self) {
        while let Some((k, gen)) = self.order.pop_front() {
            if matches!(self.map.get(&k), Some((_, g)) if *g == gen) {
                self.map.remove(&k);
                self.evictions += 1;
                return;
            }
        }
    }

    fn compact(&mut self) {
        let map = &self.map;
        self.order
            .retain(|(k, gen)| matches!(map.get(k), Some((_, g)) if g == gen));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_written() {
        let mut m = LruMap::new(3);
        m.insert(1, 'a');
        m.insert(2, 'b');
        m.insert(3, 'c');
        m.insert(1, 'A');
        m.insert(4, 'd');
        assert_eq!(m.get(&2), None);
        assert_eq!(m.get(&1), Some('A'));
        assert_eq!(m.len(), 3);
        assert!(!m.insert_new(3, 'x'));
        assert_eq!(m.evictions(), 1);
    }

    #[test]
    fn queue_stays_bounded_under_rewrites() {
        let mut m = LruMap::new(4);
        for i in 0..10_000u32 {
            m.insert(i % 4, i);
        }
        assert!(m.order.len() <= 2 * 4 + 64 + 1);
        assert_eq!(m.len(), 4);
    }
}
