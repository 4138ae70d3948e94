//! The controller's store (issue 9): keys and opaque values under one
//! global revision that only grows (kube-apiserver's resourceVersion),
//! compare-and-swap writes, consistent lists at a revision, watches from a
//! revision, and compaction of the history.
//!
//! Two implementations of [`Store`]: [`RedbStore`], one embedded file (the
//! default), and [`EtcdStore`], for controllers that run replicated;
//! [`WatchCache`] in front of either shares one store watch among all
//! watchers; [`DryRun`] over any answers writes without making them.

mod dry_run;
mod embedded;
mod error;
mod etcd;
mod keys;
pub mod leader;
mod store;
mod txn;
mod types;
mod watch_cache;

pub use dry_run::{dry_answer, DryRun, NO_REVISION};
pub use embedded::{RedbOptions, RedbStore, DEFAULT_CACHE_BYTES};
pub use error::{Result, StoreError};
pub use etcd::EtcdStore;
pub use store::{Store, WatchStream};
pub use types::{Event, EventKind, Kv, ListOptions, ListPage, Revision, Write};
pub use watch_cache::{WatchCache, WatchCacheOptions};

#[cfg(feature = "testing")]
pub mod testing;
