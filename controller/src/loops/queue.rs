//! A loop's work: keys to reconcile, each at most once in the queue (a
//! burst of changes to one object is one reconcile), in arrival order,
//! with delayed re-adds for "look again in N seconds" and for retries.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{debug, warn};

use super::informer::Key;
use super::LoopError;

#[derive(Default)]
pub struct Queue {
    state: Mutex<(VecDeque<Key>, HashSet<Key>)>,
    notify: Notify,
}

/// What a reconcile asks for next.
pub type Next = Option<Duration>;

/// A failed reconcile is tried again after this long (the object may be
/// fixed by then, or the conflict gone).
const RETRY: Duration = Duration::from_secs(2);

impl Queue {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn add(&self, key: Key) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.1.insert(key.clone()) {
            s.0.push_back(key);
            self.notify.notify_one();
        }
    }

    pub fn add_all(&self, keys: impl IntoIterator<Item = Key>) {
        for k in keys {
            self.add(k);
        }
    }

    pub fn add_after(self: &Arc<Self>, key: Key, delay: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            me.add(key);
        });
    }

    async fn next(&self) -> Key {
        loop {
            {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(k) = s.0.pop_front() {
                    s.1.remove(&k);
                    return k;
                }
            }
            self.notify.notified().await;
        }
    }

    /// Reconciles keys one at a time, forever.
    pub async fn work<F, Fut>(self: Arc<Self>, name: &'static str, reconcile: F)
    where
        F: Fn(Key) -> Fut,
        Fut: Future<Output = Result<Next, LoopError>>,
    {
        loop {
            let key = self.next().await;
            match reconcile(key.clone()).await {
                Ok(Some(after)) => self.add_after(key, after),
                Ok(None) => {}
                Err(e) => {
                    if e.is_conflict() {
                        debug!(loop_ = name, ns = %key.0, name = %key.1, error = %e, "retrying");
                    } else {
                        warn!(loop_ = name, ns = %key.0, name = %key.1, error = %e, "reconcile failed; retrying");
                    }
                    self.add_after(key, RETRY);
                }
            }
        }
    }
}
