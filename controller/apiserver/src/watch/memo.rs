//! Each change rendered once per selection, not once per watcher.
//!
//! A hundred watchers of the same collection with the same selectors
//! (every kubelet-style client of one kind does this) all write out the
//! same line for one change: which of ADDED/MODIFIED/DELETED it is and the
//! object's bytes depend only on the change and the selectors. Rendering
//! it (splitting the stored JSON, matching the selectors against the old
//! and the new object, writing it back with its resourceVersion) was most
//! of the server's work per watcher. kube-apiserver's watch cache does the
//! same: it serializes an object once per encoding for all watchers.
//!
//! The memo is small and bounded twice: by entries and by bytes. What falls
//! out is rendered again, never wrong: a line is a pure function of its
//! key.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use sluice_store::Revision;

/// Changes kept: watchers of one change read it within moments of each
/// other, so only the most recent few are ever asked for again.
const ENTRIES: usize = 256;
/// Bytes kept in all (objects can be up to 3 MiB).
const BYTES: usize = 16 * 1024 * 1024;

/// The line a change makes for watchers with one selection (`None`: the
/// change means nothing to them).
type Line = Option<Bytes>;

#[derive(Default)]
pub struct Memo {
    inner: Mutex<Inner>,
}

/// A change (its revision and key: the writes of one etcd transaction
/// share a revision) and the selectors' text.
type Key = (Revision, String, Arc<str>);

#[derive(Default)]
struct Inner {
    lines: HashMap<Key, Line>,
    order: VecDeque<Key>,
    bytes: usize,
}

fn size(l: &Line) -> usize {
    l.as_ref().map_or(0, Bytes::len)
}

impl Memo {
    /// The line of the change of `key` at `rev` for `selection` (the
    /// selectors' text), made by `render` when no watcher with the same
    /// selection has made it yet.
    /// Rendering happens outside the lock: two threads may both render the
    /// same line once, which costs less than making the others wait.
    pub fn line(
        &self,
        rev: Revision,
        key: &str,
        selection: &Arc<str>,
        render: impl FnOnce() -> Line,
    ) -> Line {
        let key = (rev, key.to_owned(), selection.clone());
        if let Some(l) = self.lock().lines.get(&key) {
            return l.clone();
        }
        let line = render();
        if size(&line) <= BYTES / 4 {
            self.lock().insert(key, line.clone());
        }
        line
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The memo holds nothing a panic could leave half-made.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        let i = self.lock();
        (i.lines.len(), i.bytes)
    }
}

impl Inner {
    fn insert(&mut self, key: Key, line: Line) {
        if self.lines.contains_key(&key) {
            return;
        }
        self.bytes += size(&line);
        self.order.push_back(key.clone());
        self.lines.insert(key, line);
        while self.order.len() > ENTRIES || self.bytes > BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(l) = self.lines.remove(&old) {
                self.bytes -= size(&l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn one_render_per_change_and_selection() {
        let m = Memo::default();
        let (a, b): (Arc<str>, Arc<str>) = ("app=a".into(), "app=b".into());
        let renders = Cell::new(0);
        let render = |s: &'static str| {
            renders.set(renders.get() + 1);
            Some(Bytes::from_static(s.as_bytes()))
        };
        for _ in 0..100 {
            assert_eq!(m.line(7, "k", &a, || render("x")), Some(Bytes::from("x")));
        }
        assert_eq!(renders.get(), 1);
        // Another selection, another change: rendered on their own.
        assert_eq!(m.line(7, "k", &b, || render("y")), Some(Bytes::from("y")));
        assert_eq!(m.line(8, "k", &a, || render("z")), Some(Bytes::from("z")));
        assert_eq!(renders.get(), 3);
        // Another key at the same revision (one etcd transaction): its own.
        assert_eq!(
            m.line(8, "other", &a, || render("w")),
            Some(Bytes::from("w"))
        );
        assert_eq!(renders.get(), 4);
        // "Nothing for these watchers" is remembered too.
        assert_eq!(m.line(9, "k", &a, || None), None);
        assert_eq!(m.line(9, "k", &a, || render("never")), None);
        assert_eq!(renders.get(), 4);
    }

    #[test]
    fn bounded_by_entries_and_bytes() {
        let m = Memo::default();
        let s: Arc<str> = "".into();
        for rev in 0..(ENTRIES as i64 * 3) {
            m.line(rev, "k", &s, || Some(Bytes::from(vec![b'x'; 10])));
        }
        assert_eq!(m.len(), (ENTRIES, ENTRIES * 10));
        // The oldest fell out and is rendered again.
        let again = Cell::new(false);
        m.line(0, "k", &s, || {
            again.set(true);
            None
        });
        assert!(again.get());

        let big = Memo::default();
        for rev in 0..64 {
            big.line(rev, "k", &s, || Some(Bytes::from(vec![b'x'; 1024 * 1024])));
        }
        let (n, bytes) = big.len();
        assert!(bytes <= BYTES, "{bytes} bytes kept");
        assert_eq!(n, BYTES / (1024 * 1024));
        // A line too big to be worth keeping is not kept at all.
        big.line(100, "k", &s, || Some(Bytes::from(vec![b'x'; BYTES / 2])));
        assert!(big.len().1 <= BYTES);
        let again = Cell::new(false);
        big.line(100, "k", &s, || {
            again.set(true);
            None
        });
        assert!(again.get());
    }
}
