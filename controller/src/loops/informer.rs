//! One watched kind, cached and shared by every loop: the objects of the
//! last complete list plus every change since (kube-rs's watcher does the
//! list, the watch and the relist after a 410), kept ordered by
//! (namespace, name) so "the pods of a namespace" is a range, not a scan,
//! and each change told to the loops that follow the kind.
//!
//! A loop that falls behind the change feed (its broadcast lagged) is told
//! so and resynchronises from the cache; nothing it acts on is lost,
//! because what it acts on is the cache, not the feed.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tracing::warn;

/// (namespace, name); cluster-scoped objects have an empty namespace.
pub type Key = (String, String);

pub fn key_of<K: Resource>(obj: &K) -> Key {
    let m = obj.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

/// A change as the loops see it: the object after it (or, for a delete,
/// the last state seen).
#[derive(Debug, Clone)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
    /// The cache was rebuilt from a new list: anything may have changed.
    Relisted,
}

/// One informer's first complete list, whatever its kind.
pub struct Synced(watch::Receiver<bool>);

/// Waits until every one of `caches` has had its first complete list.
pub async fn all_synced(caches: Vec<Synced>) {
    for mut c in caches {
        let _ = c.0.wait_for(|r| *r).await;
    }
}

pub struct Informer<K> {
    objects: RwLock<BTreeMap<Key, Arc<K>>>,
    changes: broadcast::Sender<Change<K>>,
    ready: watch::Sender<bool>,
    /// Drops what no loop reads from each object before it is kept.
    trim: fn(&mut K),
}

/// How many changes a slow loop may be behind before it resynchronises.
const FEED: usize = 16 * 1024;

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Starts following `api` in `tasks` (it stops with them); the
    /// returned informer fills as the first list arrives
    /// ([`Informer::synced`]).
    pub fn start(api: Api<K>, config: watcher::Config, tasks: &mut JoinSet<()>) -> Arc<Self> {
        Self::start_trimmed(api, config, tasks, |_| {})
    }

    /// As [`Informer::start`], keeping each object as `trim` leaves it
    /// (beyond the managedFields every informer drops).
    pub fn start_trimmed(
        api: Api<K>,
        config: watcher::Config,
        tasks: &mut JoinSet<()>,
        trim: fn(&mut K),
    ) -> Arc<Self> {
        let (changes, _) = broadcast::channel(FEED);
        let (ready, _) = watch::channel(false);
        let inf = Arc::new(Informer {
            objects: RwLock::new(BTreeMap::new()),
            changes,
            ready,
            trim,
        });
        let me = inf.clone();
        tasks.spawn(async move {
            // The watcher alone retries at once after an error: with the
            // client gone (the runtime shutting down, the API server
            // away) that was a hot loop, one warning per retry, which
            // wrote 33 GB of log in an hour in a test. Back off as
            // client-go's reflector does (0.8 s doubling to 30 s, with
            // jitter; reset after a success).
            let mut stream = watcher::watcher(api, config).default_backoff().boxed();
            let mut relist: Option<BTreeMap<Key, Arc<K>>> = None;
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => me.apply(ev, &mut relist),
                    Err(e) => {
                        // Retried after the backoff above.
                        warn!(kind = %K::kind(&Default::default()), error = %e, "watch");
                    }
                }
            }
        });
        inf
    }

    fn apply(&self, ev: Event<K>, relist: &mut Option<BTreeMap<Key, Arc<K>>>) {
        // No loop reads managedFields, and they are most of a small
        // object: a cache of 100 000 pods holds half as much without.
        let ev = ev.modify(|o| {
            o.meta_mut().managed_fields = None;
            (self.trim)(o);
        });
        match ev {
            Event::Init => *relist = Some(BTreeMap::new()),
            Event::InitApply(o) => {
                if let Some(r) = relist.as_mut() {
                    r.insert(key_of(&o), Arc::new(o));
                }
            }
            Event::InitDone => {
                if let Some(r) = relist.take() {
                    *self.write() = r;
                }
                self.ready.send_replace(true);
                let _ = self.changes.send(Change::Relisted);
            }
            Event::Apply(o) => {
                let o = Arc::new(o);
                self.write().insert(key_of(o.as_ref()), o.clone());
                let _ = self.changes.send(Change::Applied(o));
            }
            Event::Delete(o) => {
                let o = Arc::new(o);
                self.write().remove(&key_of(o.as_ref()));
                let _ = self.changes.send(Change::Deleted(o));
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Key, Arc<K>>> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Key, Arc<K>>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle on the first complete list, for a loop waiting on several
    /// kinds ([`all_synced`]).
    pub fn synced(&self) -> Synced {
        Synced(self.ready.subscribe())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change<K>> {
        self.changes.subscribe()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.read()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every object of `namespace`, in name order.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let from = (namespace.to_owned(), String::new());
        self.read()
            .range(from..)
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// The keys of the objects of `namespace` that `keep` chooses, read
    /// under the lock without copying anything else (a pod's change is
    /// matched against every Service of its namespace).
    pub fn keys_in_namespace(&self, namespace: &str, keep: impl Fn(&K) -> bool) -> Vec<Key> {
        let from = (namespace.to_owned(), String::new());
        self.read()
            .range(from..)
            .take_while(|((ns, _), _)| ns == namespace)
            .filter(|(_, o)| keep(o))
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn all(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    pub fn keys(&self) -> Vec<Key> {
        self.read().keys().cloned().collect()
    }
}
