//! The I/O side of [`super::KubeSource`]: one kube-rs watcher and reflector
//! per kind, a task that rebuilds the state when a store changed (after
//! [`Debounce`]), and the hand-over to the sync loop. Nothing here decides
//! what an object means; that is [`super::mapping`].

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tracing::warn;

use sluice_model::k8s::{EndpointSlice, Node, Pod, PodDisruptionBudget, Service};

use super::debounce::{Debounce, Pending};
use super::ipam::Ipam;
use super::mapping::{map_snapshot_assigning, Mapped, Snapshot};
use super::rewatch::Rewatch;

/// A build, and the batch of changes it includes (see [`Busy`]).
#[derive(Debug)]
pub(super) struct Built {
    pub mapped: Mapped,
    pub covers: u64,
}

/// Changes seen and not yet handed over: the newest batch's number and
/// when its first change came. Batch 0 is the initial lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Busy {
    pub batch: u64,
    pub since: Instant,
}

pub(super) type SharedBusy = Arc<Mutex<Option<Busy>>>;

/// The reflectors' stores, one per kind.
struct Stores {
    nodes: Store<Node>,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    pods: Store<Pod>,
    pdbs: Store<PodDisruptionBudget>,
}

impl Stores {
    /// Whether every initial list arrived (`false`: a watcher ended for
    /// good, which only happens when its task is gone).
    async fn ready(&self) -> bool {
        self.nodes.wait_until_ready().await.is_ok()
            && self.services.wait_until_ready().await.is_ok()
            && self.slices.wait_until_ready().await.is_ok()
            && self.pods.wait_until_ready().await.is_ok()
            && self.pdbs.wait_until_ready().await.is_ok()
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            nodes: self.nodes.state(),
            services: self.services.state(),
            slices: self.slices.state(),
            pods: self.pods.state(),
            pdbs: self.pdbs.state(),
        }
    }
}

/// Where builds go: the channel, and the sync loop's wake-up.
struct Out {
    tx: Sender<Built>,
    wake: Arc<Notify>,
}

/// Start the watchers and the builder on `rt`; builds go to `tx`, each
/// followed by a `wake`. Returns
/// the tasks, for the caller to abort.
pub(super) fn spawn(
    rt: &tokio::runtime::Handle,
    client: Client,
    node: &str,
    tx: Sender<Built>,
    wake: Arc<Notify>,
    busy: SharedBusy,
    debounce: Debounce,
) -> Vec<tokio::task::JoinHandle<()>> {
    let changed = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    let all = watcher::Config::default();
    // Only this node's pods, as the kubelet watches them.
    let bound_here = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let stores = Stores {
        nodes: reflect(
            rt,
            &mut tasks,
            Api::all(client.clone()),
            all.clone(),
            &changed,
        ),
        services: reflect(
            rt,
            &mut tasks,
            Api::all(client.clone()),
            all.clone(),
            &changed,
        ),
        slices: reflect(
            rt,
            &mut tasks,
            Api::all(client.clone()),
            all.clone(),
            &changed,
        ),
        pods: reflect(
            rt,
            &mut tasks,
            Api::all(client.clone()),
            bound_here,
            &changed,
        ),
        pdbs: reflect(rt, &mut tasks, Api::all(client), all, &changed),
    };
    let node = node.to_string();
    let out = Out { tx, wake };
    tasks.push(rt.spawn(build_loop(node, stores, changed, out, busy, debounce)));
    tasks
}

/// One kind's watcher feeding its store; every change wakes the builder.
fn reflect<K>(
    rt: &tokio::runtime::Handle,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    api: Api<K>,
    cfg: watcher::Config,
    changed: &Arc<Notify>,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let changed = changed.clone();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let run = watcher(api, cfg)
        // Reconnects with back-off (quick at first: see `rewatch`); the
        // store keeps what it had meanwhile.
        .backoff(Rewatch::default())
        // Nobody here reads them, and they are most of a large object.
        .modify(|o: &mut K| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .for_each(move |ev| {
            match ev {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))
                | Ok(watcher::Event::InitDone) => changed.notify_one(),
                Ok(_) => {}
                Err(e) => warn!(kind = %kind, error = %e, "watch failed; retrying"),
            }
            std::future::ready(())
        });
    tasks.push(rt.spawn(run));
    reader
}

/// Build once every initial list is in, then after each debounced batch of
/// changes. Ends when the receiver is gone.
async fn build_loop(
    node: String,
    stores: Stores,
    changed: Arc<Notify>,
    out: Out,
    busy: SharedBusy,
    debounce: Debounce,
) {
    if !stores.ready().await {
        return;
    }
    let mut batch = 0u64;
    // What this node's pods were given and their status does not show yet:
    // handed to each build and back, so a pod keeps its address.
    let mut ipam = Ipam::default();
    let node: std::sync::Arc<str> = node.into();
    loop {
        // Changes seen so far (the initial lists' own, those of the last
        // batch) are in the snapshot about to be taken: their wake-up would
        // only make a second, identical build.
        let _ = changed.notified().now_or_never();
        let snap = stores.snapshot();
        // Thousands of objects take a while to map: off the runtime's
        // worker, which also serves the watchers and `/metrics`.
        let n = node.clone();
        let build = move || {
            let mapped = map_snapshot_assigning(&snap, &n, &mut ipam);
            (mapped, ipam)
        };
        let Ok((mapped, back)) = tokio::task::spawn_blocking(build).await else {
            return;
        };
        ipam = back;
        if out
            .tx
            .send(Built {
                mapped,
                covers: batch,
            })
            .is_err()
        {
            return;
        }
        // The sync loop takes it now rather than at its next poll.
        out.wake.notify_one();
        // `notify_one` keeps a wake-up given while building, so no
        // change between the snapshot and here is lost.
        let built = Instant::now();
        changed.notified().await;
        batch += 1;
        let mut pending = Pending::new(Instant::now(), built, &debounce);
        set_busy(&busy, batch, pending.first);
        loop {
            let due = tokio::time::Instant::from_std(debounce.due(&pending));
            tokio::select! {
                _ = changed.notified() => pending.touch(Instant::now()),
                _ = tokio::time::sleep_until(due) => break,
            }
        }
    }
}

/// A new batch; the oldest change not handed over keeps its time.
fn set_busy(busy: &SharedBusy, batch: u64, since: Instant) {
    let mut b = busy.lock().unwrap_or_else(|p| p.into_inner());
    let since = b.map_or(since, |old| old.since);
    *b = Some(Busy { batch, since });
}
