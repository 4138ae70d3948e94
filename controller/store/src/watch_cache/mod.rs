//! One watch of the store shared by every watcher: kube-apiserver's watch
//! cache ("cacher"). Without it, each API watcher tailed the store on its
//! own, so one write woke (and on etcd, was sent to) every watcher's own
//! store watch.
//!
//! [`WatchCache`] wraps any [`Store`]: one store watch under a prefix
//! (`/registry/`) feeds a [`Window`] of the most recent events and a
//! broadcast channel. A watch from a revision the window still covers is
//! replayed from it and then follows the broadcast; an older one is passed
//! to the store (which answers `Compacted`, the API's 410, once that history
//! is gone). Everything else is passed through.
//!
//! Events stay in revision order and none is lost: the window and the
//! broadcast are updated under one lock, and a watcher subscribes under it.
//! A watcher that does not keep up is not waited for (that would stall
//! every other one): when it falls more than `buffer` events behind it is
//! ended with [`StoreError::WatchClosed`] after the events it did get, as
//! kube-apiserver ends a watcher whose buffer is full, and the client
//! watches again from the last revision it saw.

mod window;

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::broadcast;
use tracing::warn;

use crate::error::{Result, StoreError};
use crate::store::{Store, WatchStream};
use crate::types::{Event, Kv, ListOptions, ListPage, Revision, Write};
use window::Window;

/// How long the cache waits before watching the store again after its
/// watch failed (etcd unreachable).
const RETRY_AFTER: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct WatchCacheOptions {
    /// Events kept for watchers that start at an older revision (a client
    /// resuming after a dropped connection or after it was too slow).
    /// kube-apiserver sizes its window by time (75 s) with at least 100
    /// events; a count bounds the memory whatever the write rate.
    pub window: usize,
    /// How far (in events under the prefix) a watcher may fall behind the
    /// newest event before it is ended.
    pub buffer: usize,
}

impl Default for WatchCacheOptions {
    fn default() -> Self {
        WatchCacheOptions {
            window: 8192,
            buffer: 2048,
        }
    }
}

/// A [`Store`] whose watches under `prefix` share one store watch.
pub struct WatchCache {
    store: Arc<dyn Store>,
    prefix: String,
    shared: Arc<Shared>,
    feed: tokio::task::JoinHandle<()>,
}

struct Shared {
    state: Mutex<State>,
    buffer: usize,
    window: usize,
}

struct State {
    window: Window,
    live: broadcast::Sender<Arc<Event>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state as consistent as
        // between two events: keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, ev: Arc<Event>) {
        let mut s = self.lock();
        s.window.push(ev.clone());
        // No receiver is no error: nobody watches right now.
        let _ = s.live.send(ev);
    }

    /// Starts over after `start`, after a gap in the feed: watchers that
    /// follow the broadcast are ended (their channel closes), the window
    /// forgets what it held.
    fn restart(&self, start: Revision) {
        let mut s = self.lock();
        s.window = Window::new(self.window, start);
        s.live = broadcast::channel(self.buffer).0;
    }
}

impl WatchCache {
    /// Starts the shared watch at the store's current revision. Needs a
    /// tokio runtime; the feed stops when the cache is dropped.
    pub async fn start(
        store: Arc<dyn Store>,
        prefix: &str,
        opts: WatchCacheOptions,
    ) -> Result<Self> {
        let buffer = opts.buffer.max(1);
        let start = store.current_revision().await?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                window: Window::new(opts.window, start),
                live: broadcast::channel(buffer).0,
            }),
            buffer,
            window: opts.window,
        });
        let feed = tokio::spawn(feed(
            store.clone(),
            prefix.to_owned(),
            Arc::downgrade(&shared),
            start,
        ));
        Ok(WatchCache {
            store,
            prefix: prefix.to_owned(),
            shared,
            feed,
        })
    }
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        self.feed.abort();
    }
}

/// The one store watch: every event into the window and the broadcast;
/// when the watch fails, watch again from the last event, or, when that
/// history is gone, start over at the current revision.
async fn feed(store: Arc<dyn Store>, prefix: String, shared: Weak<Shared>, mut last: Revision) {
    loop {
        let ended = match store.watch(&prefix, last).await {
            Ok(mut events) => loop {
                match events.next().await {
                    Some(Ok(ev)) => {
                        let Some(shared) = shared.upgrade() else {
                            return;
                        };
                        last = ev.mod_rev;
                        shared.publish(ev);
                    }
                    Some(Err(e)) => break Some(e),
                    None => break None,
                }
            },
            Err(e) => Some(e),
        };
        if let Some(e) = &ended {
            warn!(error = %e, "the watch cache's store watch ended; watching again");
        }
        if let Some(StoreError::Compacted { .. }) = ended {
            match store.current_revision().await {
                Ok(now) => {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.restart(now);
                    last = now;
                }
                Err(e) => warn!(error = %e, "reading the store's revision"),
            }
        }
        if shared.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// A watcher served by the cache: the replayed events, then the live ones
/// under its prefix after its revision.
struct Follower {
    replay: std::vec::IntoIter<Arc<Event>>,
    live: broadcast::Receiver<Arc<Event>>,
    prefix: String,
    /// The revision the watch started after. Live events are filtered by
    /// it, not by the last one passed on: the writes of one etcd
    /// transaction share a revision, and each is an event. (Replay and
    /// live never overlap: the window and the broadcast change under one
    /// lock, and the watcher subscribed under it.)
    from: Revision,
    /// The last revision passed on, for where to resume.
    after: Revision,
    buffer: usize,
    done: bool,
}

impl Follower {
    async fn next(mut self) -> Option<(Result<Arc<Event>>, Self)> {
        if self.done {
            return None;
        }
        if let Some(ev) = self.replay.next() {
            self.after = ev.mod_rev;
            return Some((Ok(ev), self));
        }
        loop {
            let why = match self.live.recv().await {
                Ok(ev) if ev.mod_rev > self.from && ev.key.starts_with(&self.prefix) => {
                    self.after = ev.mod_rev;
                    return Some((Ok(ev), self));
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => format!(
                    "the watcher fell more than {} events behind; watch again from revision {}",
                    self.buffer, self.after
                ),
                Err(broadcast::error::RecvError::Closed) => format!(
                    "the watch cache restarted after a gap in the store's history; watch again from revision {}",
                    self.after
                ),
            };
            self.done = true;
            return Some((Err(StoreError::WatchClosed(why)), self));
        }
    }
}

#[async_trait]
impl Store for WatchCache {
    async fn get(&self, key: &str) -> Result<Option<Kv>> {
        self.store.get(key).await
    }

    async fn list(&self, opts: ListOptions<'_>) -> Result<ListPage> {
        self.store.list(opts).await
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        self.store.create(key, value).await
    }

    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    ) -> Result<Revision> {
        self.store.update(key, value, expected_mod_rev).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_rev: Option<Revision>,
    ) -> Result<(Revision, Kv)> {
        self.store.delete(key, expected_mod_rev).await
    }

    async fn txn(&self, writes: Vec<Write>) -> Result<Vec<Revision>> {
        self.store.txn(writes).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.store.current_revision().await
    }

    async fn watch(&self, prefix: &str, from_rev: Revision) -> Result<WatchStream> {
        if !prefix.starts_with(&self.prefix) {
            return self.store.watch(prefix, from_rev).await;
        }
        let subscribed = {
            let s = self.shared.lock();
            s.window
                .replay(prefix, from_rev)
                .map(|replay| (replay, s.live.subscribe()))
        };
        let Some((replay, live)) = subscribed else {
            return self.store.watch(prefix, from_rev).await;
        };
        let follower = Follower {
            replay: replay.into_iter(),
            live,
            prefix: prefix.to_owned(),
            from: from_rev,
            after: from_rev,
            buffer: self.shared.buffer,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(follower, Follower::next)))
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        self.store.compact(rev).await
    }
}
