//! The embedded store: one redb file, ACID.
//!
//! Three tables, written together in one transaction per write:
//! - `kv`: key → current record (revisions and value);
//! - `history`: revision → the change made at it, with the previous record,
//!   which watchers replay and old lists undo;
//! - `meta`: the current revision and the compacted one.
//!
//! A write is acknowledged only after its transaction is committed with
//! `Durability::Immediate` (fsync), so `kill -9` loses nothing that was
//! acknowledged; redb's copy-on-write commit never leaves a torn file.
//! Concurrent writes share a transaction and its fsync (group commit, see
//! `writer.rs`).
//!
//! Watchers do not get events pushed: a `tokio::sync::watch` carries the
//! latest revision as a wake-up, and each watcher reads the history table
//! from where it is. A slow watcher therefore never loses events while
//! they are in the history, and gets `Compacted` once they are not.
//!
//! Automatic compaction keeps the last `keep_revisions` revisions (see
//! [`RedbOptions`]): each write trims what fell out of the window, one entry
//! in the steady state, so no write ever pays for a large trim.

mod codec;
mod ops;
mod snapshot;
mod writer;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use async_trait::async_trait;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::watch;

use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, WatchStream};
use crate::types::{Event, Kv, ListOptions, ListPage, Revision, Write};
use codec::{Change, Record};
use ops::Op;

const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
const HISTORY: TableDefinition<i64, &[u8]> = TableDefinition::new("history");
const META: TableDefinition<&str, i64> = TableDefinition::new("meta");
const META_REVISION: &str = "revision";
const META_COMPACTED: &str = "compacted";

/// How many history entries a watcher reads per transaction.
const WATCH_BATCH: usize = 512;

#[derive(Debug, Clone)]
pub struct RedbOptions {
    /// Revisions of history kept for watchers and old lists. Kubernetes
    /// keeps 5 minutes; a count is chosen here because it bounds the file's
    /// size whatever the write rate, and 20 000 revisions cover a relist of
    /// a large cluster with room to spare.
    pub keep_revisions: i64,
    /// Bytes of redb's page cache. redb's own default is 1 GiB, which a
    /// store of 100 000 Pods fills (the controller's RSS was 828 MiB in
    /// the API bench); the file's pages stay in the kernel's page cache
    /// anyway. 32 MiB: once Pods carried their managedFields (144 MB of
    /// JSON at 100 000 Pods), a 128 MiB cache filled and cost about twice
    /// its size in RSS (337 MiB in the API bench, 153 MiB at 32 MiB),
    /// with the same list time and watch latency (the kernel's page cache
    /// holds the file either way).
    pub cache_bytes: usize,
}

/// The default of [`RedbOptions::cache_bytes`]: 32 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 32 * 1024 * 1024;

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            keep_revisions: 20_000,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// The embedded store. Cheap to clone; all clones share one database.
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

struct Inner {
    core: Arc<Core>,
    /// Writes to the writer thread; `None` once dropping.
    queue: Option<mpsc::Sender<writer::Pending>>,
    writer: Option<JoinHandle<()>>,
}

/// What readers and the writer thread share.
struct Core {
    db: Database,
    opts: RedbOptions,
    /// The latest committed revision, to wake watchers.
    latest: watch::Sender<Revision>,
}

impl Drop for Inner {
    /// Closes the queue and waits for the writer thread to finish its
    /// batch and let go of the file, so the store can be opened again at
    /// once.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl RedbStore {
    /// Opens the file, creating it (and its tables) if missing.
    pub fn open(path: impl AsRef<Path>, opts: RedbOptions) -> Result<Self> {
        if opts.keep_revisions < 1 {
            return Err(StoreError::InvalidRequest(format!(
                "keep_revisions must be at least 1, not {}",
                opts.keep_revisions
            )));
        }
        let db = Database::builder()
            .set_cache_size(opts.cache_bytes)
            .create(path)?;
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        {
            txn.open_table(KV)?;
            txn.open_table(HISTORY)?;
            txn.open_table(META)?;
        }
        txn.commit()?;
        let rev = {
            let r = db.begin_read()?;
            meta_get(&r.open_table(META)?, META_REVISION)?
        };
        let (latest, _) = watch::channel(rev);
        let core = Arc::new(Core { db, opts, latest });
        let (queue, writes) = mpsc::channel();
        let writer = {
            let core = core.clone();
            std::thread::Builder::new()
                .name("redb-writer".into())
                .spawn(move || writer::run(core, writes))
                .map_err(|e| StoreError::Task(format!("starting the writer thread: {e}")))?
        };
        Ok(RedbStore {
            inner: Arc::new(Inner {
                core,
                queue: Some(queue),
                writer: Some(writer),
            }),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Core) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let core = self.inner.core.clone();
        tokio::task::spawn_blocking(move || f(&core))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Queues one write for the next batch and waits for its outcome.
    async fn write(&self, key: &str, op: Op) -> Result<(Revision, Option<Record>)> {
        let mut written = self.write_all(vec![(key.to_owned(), op)]).await?;
        written
            .pop()
            .ok_or_else(|| StoreError::Task("the writer answered no write".into()))
    }

    /// Queues writes made all or none for the next batch and waits.
    async fn write_all(
        &self,
        writes: Vec<(String, Op)>,
    ) -> Result<Vec<(Revision, Option<Record>)>> {
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let pending = writer::Pending { writes, reply };
        let gone = || StoreError::Task("the embedded store's writer has stopped".into());
        self.inner
            .queue
            .as_ref()
            .ok_or_else(gone)?
            .send(pending)
            .map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

impl Core {
    fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        at: Option<Revision>,
    ) -> Result<ListPage> {
        let txn = self.db.begin_read()?;
        let meta = txn.open_table(META)?;
        let current = meta_get(&meta, META_REVISION)?;
        let compacted = meta_get(&meta, META_COMPACTED)?;
        let at = at.unwrap_or(current);
        snapshot::check_list_revision(at, compacted, current)?;
        let start = keys::page_start(prefix, start_after);
        let end = keys::prefix_end(prefix.as_bytes()).map(String::from_utf8);
        let in_range = |k: &str| {
            k >= start.as_str()
                && match &end {
                    Some(Ok(e)) => k < e.as_str(),
                    _ => k.starts_with(prefix),
                }
        };
        let mut undo = snapshot::Undo::new();
        if at < current {
            let history = txn.open_table(HISTORY)?;
            for entry in history.range(at + 1..)? {
                let (_, v) = entry?;
                let change = codec::decode_change(v.value())?;
                if in_range(&change.key) {
                    snapshot::note_change(&mut undo, change);
                }
            }
        }
        let kv = txn.open_table(KV)?;
        let now = kv
            .range(start.as_str()..)?
            .map(|e| -> Result<(String, Record)> {
                let (k, v) = e?;
                Ok((k.value().to_owned(), codec::decode_record(v.value())?))
            })
            .take_while(|e| e.as_ref().map_or(true, |(k, _)| in_range(k)));
        let (items, more) = snapshot::merge_page(now, &undo, limit)?;
        Ok(ListPage {
            items,
            revision: at,
            more,
        })
    }

    /// History entries after `after`, under `prefix`, at most a batch; and
    /// the last revision looked at (so the watcher moves past entries of
    /// other keys too).
    fn history_after(&self, prefix: &str, after: Revision) -> Result<(Vec<Event>, Revision)> {
        let txn = self.db.begin_read()?;
        let meta = txn.open_table(META)?;
        let compacted = meta_get(&meta, META_COMPACTED)?;
        if after + 1 < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let history = txn.open_table(HISTORY)?;
        let mut events = Vec::new();
        let mut last = after;
        for entry in history.range(after + 1..)?.take(WATCH_BATCH) {
            let (rev, v) = entry?;
            last = rev.value();
            let change = codec::decode_change(v.value())?;
            if change.key.starts_with(prefix) {
                events.push(event(change, last));
            }
        }
        Ok((events, last))
    }
}

fn event(c: Change, rev: Revision) -> Event {
    Event {
        kind: c.kind,
        key: c.key,
        value: c.value,
        prev_value: c.prev.map(|p| p.value),
        mod_rev: rev,
    }
}

fn meta_get(meta: &impl ReadableTable<&'static str, i64>, name: &str) -> Result<i64> {
    Ok(meta.get(name)?.map_or(0, |v| v.value()))
}

/// Removes history before `keep_from` and records the new compacted
/// revision; never moves it backwards.
fn trim_history(
    history: &mut redb::Table<i64, &[u8]>,
    meta: &mut redb::Table<&str, i64>,
    keep_from: Revision,
) -> Result<()> {
    let compacted = meta_get(meta, META_COMPACTED)?;
    if keep_from <= compacted {
        return Ok(());
    }
    history.retain_in(..keep_from, |_, _| false)?;
    meta.insert(META_COMPACTED, keep_from)?;
    Ok(())
}

#[async_trait]
impl Store for RedbStore {
    async fn get(&self, key: &str) -> Result<Option<Kv>> {
        let key = key.to_owned();
        self.blocking(move |inner| {
            let txn = inner.db.begin_read()?;
            let kv = txn.open_table(KV)?;
            let rec = match kv.get(key.as_str())? {
                Some(v) => codec::decode_record(v.value())?,
                None => return Ok(None),
            };
            Ok(Some(snapshot::kv(key, rec)))
        })
        .await
    }

    async fn list(&self, opts: ListOptions<'_>) -> Result<ListPage> {
        let prefix = opts.prefix.to_owned();
        let start_after = opts.start_after.map(str::to_owned);
        let (limit, at) = (opts.limit.filter(|l| *l > 0), opts.at_revision);
        self.blocking(move |inner| inner.list(&prefix, start_after.as_deref(), limit, at))
            .await
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        Ok(self.write(key, Op::Create(value)).await?.0)
    }

    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    ) -> Result<Revision> {
        let op = Op::Update {
            value,
            expected_mod_rev,
        };
        Ok(self.write(key, op).await?.0)
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_rev: Option<Revision>,
    ) -> Result<(Revision, Kv)> {
        let (rev, prev) = self.write(key, Op::Delete { expected_mod_rev }).await?;
        let prev = prev.ok_or_else(|| {
            StoreError::Corrupt(format!("delete of {key} without a previous record"))
        })?;
        Ok((rev, snapshot::kv(key.to_owned(), prev)))
    }

    async fn txn(&self, writes: Vec<Write>) -> Result<Vec<Revision>> {
        crate::txn::check_keys(&writes)?;
        let units = writes
            .into_iter()
            .map(|w| match w {
                Write::Create { key, value } => (key, Op::Create(value)),
                Write::Update {
                    key,
                    value,
                    expected_mod_rev,
                } => (
                    key,
                    Op::Update {
                        value,
                        expected_mod_rev,
                    },
                ),
                Write::Delete {
                    key,
                    expected_mod_rev,
                } => (key, Op::Delete { expected_mod_rev }),
            })
            .collect();
        let written = self.write_all(units).await?;
        Ok(written.into_iter().map(|(rev, _)| rev).collect())
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.blocking(|inner| {
            let txn = inner.db.begin_read()?;
            meta_get(&txn.open_table(META)?, META_REVISION)
        })
        .await
    }

    async fn watch(&self, prefix: &str, from_rev: Revision) -> Result<WatchStream> {
        let state = WatchState {
            store: self.clone(),
            prefix: prefix.to_owned(),
            delivered: from_rev,
            buf: VecDeque::new(),
            latest: self.inner.core.latest.subscribe(),
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(state, WatchState::next)))
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        self.blocking(move |inner| {
            let mut txn = inner.db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            {
                let mut history = txn.open_table(HISTORY)?;
                let mut meta = txn.open_table(META)?;
                let current = meta_get(&meta, META_REVISION)?;
                if rev > current {
                    return Err(StoreError::FutureRevision {
                        requested: rev,
                        current,
                    });
                }
                trim_history(&mut history, &mut meta, rev)?;
            }
            txn.commit()?;
            Ok(())
        })
        .await
    }
}

/// One watcher: where it is in the history, and what it has read ahead.
struct WatchState {
    store: RedbStore,
    prefix: String,
    /// Every change up to this revision has been read (delivered or buffered).
    delivered: Revision,
    buf: VecDeque<Event>,
    latest: watch::Receiver<Revision>,
    done: bool,
}

impl WatchState {
    async fn next(mut self) -> Option<(Result<Arc<Event>>, Self)> {
        loop {
            if let Some(ev) = self.buf.pop_front() {
                return Some((Ok(Arc::new(ev)), self));
            }
            if self.done {
                return None;
            }
            // Seen before reading, so a write committed during the read
            // still wakes us below.
            let latest = *self.latest.borrow_and_update();
            if latest > self.delivered {
                let (prefix, after) = (self.prefix.clone(), self.delivered);
                let read = self
                    .store
                    .blocking(move |inner| inner.history_after(&prefix, after))
                    .await;
                match read {
                    Ok((events, last)) => {
                        self.delivered = last;
                        self.buf.extend(events);
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some((Err(e), self));
                    }
                }
            }
            if self.latest.changed().await.is_err() {
                return None;
            }
        }
    }
}
