//! A loop as data: its name, the caches it waits for, what wakes it, the
//! keys it starts with and its reconcile. [`super::wiring`] lists the
//! controller's loops this way and [`LoopSpec::start`] runs one, so adding
//! a loop is one more entry, not another copy of the plumbing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;

use super::informer::{self, Change, Informer, Key, Synced};
use super::queue::{Next, Queue};
use super::LoopError;

type Reconcile =
    Arc<dyn Fn(Key) -> Pin<Box<dyn Future<Output = Result<Next, LoopError>> + Send>> + Send + Sync>;
type Trigger = Box<dyn FnOnce(&mut JoinSet<()>, Arc<Queue>) + Send>;
type First = Box<dyn FnOnce() -> Vec<Key> + Send>;

/// A kind an informer can cache.
pub trait Watched:
    kube::Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// One decision loop.
pub struct LoopSpec {
    name: &'static str,
    queue: Arc<Queue>,
    waits_for: Vec<Synced>,
    triggers: Vec<Trigger>,
    first: First,
    reconcile: Reconcile,
}

impl LoopSpec {
    /// Loop `name`, reconciling each queued key with `reconcile` on the
    /// object `me` (shared by the loop's triggers and its worker).
    pub fn new<T, F, Fut>(name: &'static str, me: &Arc<T>, reconcile: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(Arc<T>, Key) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Next, LoopError>> + Send + 'static,
    {
        let me = me.clone();
        LoopSpec {
            name,
            queue: Queue::new(),
            waits_for: Vec::new(),
            triggers: Vec::new(),
            first: Box::new(Vec::new),
            reconcile: Arc::new(move |k| Box::pin(reconcile(me.clone(), k))),
        }
    }

    /// Works `queue` rather than a fresh one (a loop whose object queues
    /// keys itself).
    pub fn queue(mut self, queue: Arc<Queue>) -> Self {
        self.queue = queue;
        self
    }

    /// No key is worked before every one of these caches has had its first
    /// complete list: no loop decides on a partial picture (upstream's
    /// `WaitForCacheSync`). One kind's list often comes before another's,
    /// and after a restart a loop deciding in between wrote a Service's
    /// slice empty, gave a ReplicaSet new pods, deleted an upgrade's surge
    /// node or handed out a pod CIDR twice.
    pub fn waits_for(mut self, caches: impl IntoIterator<Item = Synced>) -> Self {
        self.waits_for.extend(caches);
        self
    }

    /// The keys worked once the caches are synced.
    pub fn first(mut self, keys: impl FnOnce() -> Vec<Key> + Send + 'static) -> Self {
        self.first = Box::new(keys);
        self
    }

    /// Each change of `inf` is given to `on` with the loop's queue, for as
    /// long as the informer lives; a lagging feed becomes a resync.
    pub fn on<K, F>(mut self, inf: &Arc<Informer<K>>, on: F) -> Self
    where
        K: Watched,
        F: Fn(&Change<K>, &Queue) + Send + 'static,
    {
        let mut rx = inf.subscribe();
        self.triggers.push(Box::new(move |tasks, queue| {
            tasks.spawn(async move {
                loop {
                    match rx.recv().await {
                        Ok(c) => on(&c, &queue),
                        Err(RecvError::Lagged(_)) => on(&Change::Relisted, &queue),
                        Err(RecvError::Closed) => return,
                    }
                }
            });
        }));
        self
    }

    /// The loop's own kind: a changed object queues its key, a relist all.
    pub fn on_objects<K>(self, inf: &Arc<Informer<K>>) -> Self
    where
        K: Watched,
    {
        let all = inf.clone();
        self.on(inf, move |c, q| match c {
            Change::Applied(o) | Change::Deleted(o) => q.add(informer::key_of(o.as_ref())),
            Change::Relisted => q.add_all(all.keys()),
        })
    }

    /// `key` is queued every `period`, whatever changes (a scan loop).
    pub fn every(mut self, period: Duration, key: Key) -> Self {
        self.triggers.push(Box::new(move |tasks, queue| {
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    queue.add(key.clone());
                }
            });
        }));
        self
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the loop in `tasks`: its triggers at once, its worker once its
    /// caches are synced.
    pub fn start(self, tasks: &mut JoinSet<()>) {
        for t in self.triggers {
            t(tasks, self.queue.clone());
        }
        let (q, name, inputs, first, reconcile) = (
            self.queue,
            self.name,
            self.waits_for,
            self.first,
            self.reconcile,
        );
        tasks.spawn(async move {
            informer::all_synced(inputs).await;
            q.add_all(first());
            q.work(name, move |k| reconcile(k)).await
        });
    }
}
