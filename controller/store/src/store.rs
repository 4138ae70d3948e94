//! The `Store` trait: what the API server needs from a store, whichever it
//! is (embedded redb or etcd).

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;

use crate::error::Result;
use crate::types::{Event, Kv, ListOptions, ListPage, Revision, Write};

/// Changes in revision order. An error is always the stream's last item:
/// `Compacted` when the watcher asked for, or fell behind into, history
/// that is gone (the API server's in-stream 410), or a backend error (etcd
/// unreachable); either way the caller watches again or relists.
///
/// Events are shared (`Arc`): the watch cache hands one event to every
/// watcher, and a copy of its values per watcher was most of the cost of a
/// write watched by many.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<Arc<Event>>> + Send>>;

/// A key-value store with one global revision, compare-and-swap writes and
/// watches from a revision: kube-apiserver's storage contract.
///
/// Every write makes the revision grow by exactly one and returns it; a
/// write that fails (conflict, not found, exists) changes nothing.
#[async_trait]
pub trait Store: Send + Sync {
    /// The key's current value, if it exists.
    async fn get(&self, key: &str) -> Result<Option<Kv>>;

    /// Keys under a prefix, in key order, as they were at one revision.
    /// A revision below the compacted one fails with `Compacted`, one above
    /// the current one with `FutureRevision`.
    async fn list(&self, opts: ListOptions<'_>) -> Result<ListPage>;

    /// Creates the key; `AlreadyExists` if it does. Returns the revision.
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision>;

    /// Replaces the value if the key is still at `expected_mod_rev`;
    /// `Conflict` (with the current revision) or `NotFound` otherwise.
    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    ) -> Result<Revision>;

    /// Deletes the key (if still at `expected_mod_rev`, when given) and
    /// returns the deletion's revision and the last value.
    async fn delete(&self, key: &str, expected_mod_rev: Option<Revision>)
        -> Result<(Revision, Kv)>;

    /// All of `writes` or none of them: each is checked as its single-key
    /// call would be, against the keys as they are before the transaction
    /// (each key at most once), and the first refused write's error is
    /// returned with nothing written. Returns each write's revision, in
    /// order. On etcd the writes share one revision; the embedded store
    /// gives them consecutive revisions, committed together, so no reader
    /// or watcher ever sees part of a transaction; a watcher gets one event
    /// per key written.
    async fn txn(&self, writes: Vec<Write>) -> Result<Vec<Revision>>;

    /// The revision of the last write (0 for an empty store).
    async fn current_revision(&self) -> Result<Revision>;

    /// Every change under `prefix` with a revision above `from_rev`, in
    /// order, then live changes, until the stream is dropped.
    async fn watch(&self, prefix: &str, from_rev: Revision) -> Result<WatchStream>;

    /// Forgets history before `rev`: lists at `rev` or later and watches
    /// from `rev - 1` or later keep working (as in etcd); a list at an older
    /// revision, or a watch from one, gets `Compacted`. Compacting to a
    /// revision already compacted is a no-op; beyond the current one,
    /// `FutureRevision`.
    async fn compact(&self, rev: Revision) -> Result<()>;
}
