//! The watch cache's window: the most recent events under the cached
//! prefix, in revision order, and from which revision on it is complete.
//! Pure: no I/O, no locking (the cache holds it under its lock).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::types::{Event, Revision};

#[derive(Debug)]
pub struct Window {
    events: VecDeque<Arc<Event>>,
    capacity: usize,
    /// Every event with a revision above this one is in the window (or
    /// still to come): a watch from here or later can be replayed.
    complete_after: Revision,
}

impl Window {
    /// An empty window that is complete after `start` (the revision the
    /// cache's own store watch starts after).
    pub fn new(capacity: usize, start: Revision) -> Self {
        Window {
            events: VecDeque::with_capacity(capacity.min(1024)),
            capacity: capacity.max(1),
            complete_after: start,
        }
    }

    /// Adds the newest event; the oldest falls out when the window is full,
    /// and the window is then complete only after that one's revision.
    pub fn push(&mut self, ev: Arc<Event>) {
        if self.events.len() == self.capacity {
            if let Some(old) = self.events.pop_front() {
                self.complete_after = old.mod_rev;
            }
        }
        self.events.push_back(ev);
    }

    #[cfg(test)]
    pub fn complete_after(&self) -> Revision {
        self.complete_after
    }

    /// The events after `from` under `prefix`, oldest first; `None` when
    /// events after `from` may have fallen out already (the watch must
    /// then be served by the store, which may answer `Compacted`).
    pub fn replay(&self, prefix: &str, from: Revision) -> Option<Vec<Arc<Event>>> {
        if from < self.complete_after {
            return None;
        }
        let first = self.events.partition_point(|e| e.mod_rev <= from);
        Some(
            self.events
                .range(first..)
                .filter(|e| e.key.starts_with(prefix))
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::EventKind;

    fn ev(key: &str, rev: Revision) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Put,
            key: key.into(),
            value: b"v".to_vec(),
            prev_value: None,
            mod_rev: rev,
        })
    }

    fn revs(v: Option<Vec<Arc<Event>>>) -> Option<Vec<Revision>> {
        v.map(|v| v.iter().map(|e| e.mod_rev).collect())
    }

    #[test]
    fn replays_what_follows_a_revision_under_a_prefix() {
        let mut w = Window::new(10, 5);
        for (k, r) in [("/a/1", 6), ("/b/1", 8), ("/a/2", 9)] {
            w.push(ev(k, r));
        }
        assert_eq!(revs(w.replay("/a/", 5)), Some(vec![6, 9]));
        assert_eq!(revs(w.replay("/", 7)), Some(vec![8, 9]));
        // Ahead of the window: nothing yet, the live events will follow.
        assert_eq!(revs(w.replay("/", 12)), Some(vec![]));
        // Before the window's start: not the cache's to answer.
        assert_eq!(revs(w.replay("/", 4)), None);
    }

    #[test]
    fn a_full_window_forgets_the_oldest_and_says_so() {
        let mut w = Window::new(2, 0);
        for r in 1..=4 {
            w.push(ev("/k", r));
        }
        assert_eq!(w.complete_after(), 2);
        assert_eq!(revs(w.replay("/", 1)), None);
        assert_eq!(revs(w.replay("/", 2)), Some(vec![3, 4]));
    }
}
