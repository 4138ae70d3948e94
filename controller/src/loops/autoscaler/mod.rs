//! The cluster autoscaler's loop: every 10 s (upstream's
//! `--scan-interval`), and as soon as a pod turns unschedulable, it builds
//! a `Snapshot` from the caches, asks `sluice_autoscaler::decide` with
//! the clock passed in, and carries the decision out:
//!
//! - taints: `ToBeDeletedByClusterAutoscaler` with a cordon on a node
//!   being removed (a failed write gives the removal up), the soft
//!   `DeletionCandidate` taint, stale taints taken back;
//! - drains (`sluice_autoscaler::actuation::drain_step`): pods evicted through the Eviction API,
//!   grace capped at 10 minutes, refusals retried; a budget still refusing
//!   after two minutes gives the node back, untainted;
//! - the pools (`status.autoscaler`): each zone's size, the drained nodes
//!   to delete, and the autoscaler's memory (`sluice_autoscaler::memory`),
//!   which a restarted controller and `sluice autoscaler` read back;
//! - each node's reasons as annotations (`sluice_autoscaler::explain`),
//!   written only when they change;
//! - `kube-system/cluster-autoscaler-status` in upstream's schema, written
//!   only when it says something new beyond the probe times, with the
//!   loop's flags for `sluice autoscaler` to decide as the loop does;
//! - the events, in upstream's wording.
//!
//! It is one key, so one pass at a time; the decision is pure and the
//! writes are [`write`]'s.

mod write;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use sluice_autoscaler::expander::ExpanderChain;
use sluice_autoscaler::live::Objects;
use sluice_autoscaler::memory;
use sluice_autoscaler::options::Flags;
use sluice_autoscaler::snapshot::{is_unschedulable, POOL_LABEL, TO_BE_DELETED_TAINT, ZONE_LABEL};
use sluice_autoscaler::{explain, Options, State, TaintChange};
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Node, Pod, PodDisruptionBudget};
use sluice_model::node_pool::NodePool;
use tracing::{debug, warn};

use super::informer::{key_of, Change, Informer, Key};
use super::queue::{Next, Queue};
use super::spec::LoopSpec;
use super::LoopError;
use sluice_autoscaler::actuation::{self as plan, Step};

/// Upstream's `--scan-interval`.
pub const SCAN_INTERVAL: Duration = Duration::from_secs(10);
/// How soon to look again while a removal is under way (upstream polls a
/// drain every 5 s).
const DRAIN_POLL: Duration = Duration::from_secs(5);
/// A refused eviction is tried again after this long (upstream's
/// `DefaultEvictionRetryTime`).
const EVICTION_RETRY: SignedDuration = SignedDuration::from_secs(10);

/// The loop's flags.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `--scale-down-unneeded-time`: overrides the profile's (10 minutes
    /// for `balanced`), so a lab scene takes seconds.
    pub unneeded_time: Option<Duration>,
    /// `--scale-down-delay-after-add`: overrides upstream's 10 minutes.
    pub delay_after_add: Option<Duration>,
    /// `--expander`: upstream's chain, `least-waste` by default.
    pub expander: ExpanderChain,
}

/// What the loop reads.
pub struct Caches {
    pub nodes: Arc<Informer<Node>>,
    pub pods: Arc<Informer<Pod>>,
    pub pools: Arc<Informer<NodePool>>,
    pub budgets: Arc<Informer<PodDisruptionBudget>>,
    pub clusters: Arc<Informer<Cluster>>,
    /// Whether the load balancers have let a drained node go.
    pub balancers: Arc<super::balancers::Balancers>,
}

pub struct Autoscaler {
    client: Client,
    c: Caches,
    options: Options,
    /// `options`' flags, published on the status ConfigMap.
    flags: String,
    /// `None` until the first pass reads it from the pools.
    state: Mutex<Option<State>>,
    /// Pods last seen unschedulable: one newly so wakes the loop.
    unschedulable: Mutex<HashSet<Key>>,
    /// When each pod's eviction was last asked for.
    evicted: Mutex<HashMap<String, Timestamp>>,
    /// The last scale-up event of each pending pod, so an unchanged answer
    /// is not written again every 10 s.
    told: Mutex<HashMap<String, String>>,
}

/// The loop's one key.
pub fn key() -> Key {
    (String::new(), "cluster-autoscaler".into())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The loop as the wiring runs it.
pub fn spec(a: Autoscaler, all: &super::wiring::Caches) -> LoopSpec {
    let a = Arc::new(a);
    let inputs = [
        a.c.nodes.synced(),
        a.c.pods.synced(),
        a.c.pools.synced(),
        a.c.budgets.synced(),
        a.c.clusters.synced(),
    ];
    let on = a.clone();
    LoopSpec::new("cluster-autoscaler", &a, |a, _| async move {
        a.reconcile().await
    })
    .on(&all.pods, move |ch, q| on.on_pod(ch, q))
    .every(SCAN_INTERVAL, key())
    // A decision on a partial list would see pools without nodes (and
    // grow them) or pods without budgets (and evict them).
    .waits_for(inputs)
    .waits_for(a.c.balancers.synced())
    .first(|| vec![key()])
}

fn cloned<K: Clone>(items: Vec<Arc<K>>) -> Vec<K> {
    items.iter().map(|i| i.as_ref().clone()).collect()
}

fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

impl Autoscaler {
    pub fn new(client: Client, c: Caches, config: Config) -> Autoscaler {
        let defaults = Options::default();
        let options = Options {
            expander: config.expander,
            unneeded_time: config
                .unneeded_time
                .and_then(|d| SignedDuration::try_from(d).ok()),
            scale_down_delay_after_add: config
                .delay_after_add
                .and_then(|d| SignedDuration::try_from(d).ok())
                .unwrap_or(defaults.scale_down_delay_after_add),
            ..defaults
        };
        Autoscaler {
            client,
            c,
            flags: Flags::of(&options).to_annotation(),
            options,
            state: Mutex::new(None),
            unschedulable: Mutex::default(),
            evicted: Mutex::default(),
            told: Mutex::default(),
        }
    }

    /// A pod turning unschedulable (`PodScheduled=False`, `Unschedulable`)
    /// wakes the loop at once; one staying so does not.
    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        let mut seen = lock(&self.unschedulable);
        match change {
            Change::Applied(p) if is_unschedulable(p) => {
                if seen.insert(key_of(p.as_ref())) {
                    queue.add(key());
                }
            }
            Change::Applied(p) | Change::Deleted(p) => {
                seen.remove(&key_of(p.as_ref()));
            }
            Change::Relisted => queue.add(key()),
        }
    }

    pub async fn reconcile(&self) -> Result<Next, LoopError> {
        let now = Timestamp::now();
        let clusters = cloned(self.c.clusters.all());
        let objects = Objects::new(
            cloned(self.c.nodes.all()),
            cloned(self.c.pods.all()),
            cloned(self.c.pools.all()),
            cloned(self.c.budgets.all()),
            &clusters,
        );
        let state = lock(&self.state)
            .get_or_insert_with(|| {
                let (state, unreadable) = memory::read(&objects.pools);
                for pool in unreadable {
                    warn!(pool = %pool, "the autoscaler's memory of this pool is unreadable; starting it afresh");
                }
                state
            })
            .clone();
        let snapshot = objects.snapshot(&self.options);
        let decision = sluice_autoscaler::decide(&snapshot, &state, now);
        for e in &decision.errors {
            debug!(error = %e, "autoscaler: input skipped");
        }
        let (nodes, pods, pools) = (&objects.nodes, &objects.pods, &objects.pools);
        let mut state = decision.state.clone();
        let by_name: HashMap<&str, &Node> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
            .collect();
        self.taint(&decision.taints, &by_name, &mut state, now)
            .await;
        let handed = self.drain(pods, &by_name, &mut state, now).await;
        self.write_pools(pools, nodes, &decision.targets, &handed, &state)
            .await?;
        self.annotate(&decision, nodes).await;
        write::status(&self.client, &decision.status, &self.flags).await;
        self.tell(&decision, pods).await;
        let draining = !state.deleting.is_empty();
        *lock(&self.state) = Some(state);
        Ok(draining.then_some(DRAIN_POLL))
    }

    /// Each node's reasons as its annotations, where they changed.
    async fn annotate(&self, decision: &sluice_autoscaler::Decision, nodes: &[Node]) {
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let Some(patch) = explain::annotation_patch(node, decision.nodes.get(name)) else {
                continue;
            };
            if let Err(e) = write::node(&self.client, name, &patch).await {
                debug!(node = %name, error = %e, "autoscaler: node annotations");
            }
        }
    }

    /// The decision's taints; a removal whose taint cannot be written is
    /// given up (upstream rolls back and waits out the failure delay).
    async fn taint(
        &self,
        changes: &[TaintChange],
        nodes: &HashMap<&str, &Node>,
        state: &mut State,
        now: Timestamp,
    ) {
        for change in changes {
            let (name, removal) = match change {
                TaintChange::Add { node, taint, .. } => (node, taint.key == TO_BE_DELETED_TAINT),
                TaintChange::Remove { node, .. } => (node, false),
            };
            let Some(node) = nodes.get(name.as_str()) else {
                continue;
            };
            let Some(patch) = plan::taint_patch(node, change) else {
                continue;
            };
            if let Err(e) = write::node(&self.client, name, &patch).await {
                warn!(node = %name, error = %e, "autoscaler: taint");
                if removal {
                    state.removal_failed(name, now);
                    let why = format!("failed to mark the node as toBeDeleted/unschedulable: {e}");
                    write::node_event(&self.client, node, "ScaleDownFailed", &why).await;
                }
            }
        }
    }

    /// Each removal in flight one step on; the drained ones are returned
    /// as (pool, node, zone) for their pools.
    async fn drain(
        &self,
        pods: &[Pod],
        by_name: &HashMap<&str, &Node>,
        state: &mut State,
        now: Timestamp,
    ) -> Vec<(String, String, String)> {
        let mut on_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
        for p in pods {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                on_node.entry(n).or_default().push(p);
            }
        }
        let mut handed = Vec::new();
        let deleting = state.deleting.clone();
        let balancers = self.c.balancers.look(now);
        for (name, d) in &deleting {
            let Some(node) = by_name.get(name.as_str()) else {
                continue;
            };
            let here = on_node.get(name.as_str()).map_or(&[][..], Vec::as_slice);
            let released = balancers.may_delete(name, d.started_at, now);
            match plan::drain_step(node, here, d, released, now) {
                Step::Wait => {}
                Step::Evict(list) => self.evict(&list, now).await,
                Step::HandOver => {
                    let zone = label(node, ZONE_LABEL).unwrap_or_default().to_owned();
                    handed.push((d.pool.clone(), name.clone(), zone));
                }
                Step::GiveUp(why) => {
                    let back = TaintChange::Remove {
                        node: name.clone(),
                        key: TO_BE_DELETED_TAINT.into(),
                        uncordon: true,
                    };
                    if let Some(patch) = plan::taint_patch(node, &back) {
                        if let Err(e) = write::node(&self.client, name, &patch).await {
                            warn!(node = %name, error = %e, "autoscaler: untaint");
                        }
                    }
                    state.removal_failed(name, now);
                    write::node_event(&self.client, node, "ScaleDownFailed", &why).await;
                }
            }
        }
        handed
    }

    async fn evict(&self, list: &[(String, i64)], now: Timestamp) {
        for (pod, grace) in list {
            let due = lock(&self.evicted)
                .get(pod)
                .is_none_or(|t| now >= *t + EVICTION_RETRY);
            if !due {
                continue;
            }
            lock(&self.evicted).insert(pod.clone(), now);
            if let Err(e) = write::evict(&self.client, pod, *grace).await {
                debug!(pod = %pod, error = %e, "autoscaler: eviction refused; retrying");
            }
        }
    }

    /// Each pool's `status.autoscaler`: sizes, drained nodes, memory.
    async fn write_pools(
        &self,
        pools: &[NodePool],
        nodes: &[Node],
        targets: &[sluice_autoscaler::ZoneTarget],
        handed: &[(String, String, String)],
        state: &State,
    ) -> Result<(), LoopError> {
        let node_pool: HashMap<&str, &str> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, label(n, POOL_LABEL)?)))
            .collect();
        let mut per_zone: HashMap<(&str, &str), usize> = HashMap::new();
        for n in nodes {
            if let (Some(p), Some(z)) = (label(n, POOL_LABEL), label(n, ZONE_LABEL)) {
                *per_zone.entry((p, z)).or_default() += 1;
            }
        }
        let names: Vec<&str> = pools
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        let shares = memory::split(state, &names, &node_pool);
        for pool in pools {
            let Some(name) = pool.metadata.name.as_deref() else {
                continue;
            };
            let mut live: HashSet<&str> = node_pool.keys().copied().collect();
            if let Some(s) = &pool.status {
                live.extend(s.instances.iter().map(|i| i.name.as_str()));
            }
            let change = plan::PoolChange {
                targets: targets.iter().filter(|t| t.pool == name).collect(),
                handed_over: handed
                    .iter()
                    .filter(|(p, _, _)| p == name)
                    .map(|(_, n, z)| {
                        let count = per_zone.get(&(name, z.as_str())).copied().unwrap_or(0);
                        (n.as_str(), z.as_str(), count)
                    })
                    .collect(),
                live: &live,
                memory: shares.get(name).and_then(|m| serde_json::to_value(m).ok()),
            };
            if let Some(after) = plan::pool_status(pool, &change) {
                write::pool(&self.client, pool, &after).await?;
            }
        }
        Ok(())
    }

    /// The decision's events; a pending pod's only when its answer changed.
    async fn tell(&self, decision: &sluice_autoscaler::Decision, pods: &[Pod]) {
        let uids: HashMap<(&str, &str), &str> = pods
            .iter()
            .filter_map(|p| {
                let m = &p.metadata;
                Some((
                    (m.namespace.as_deref()?, m.name.as_deref()?),
                    m.uid.as_deref()?,
                ))
            })
            .collect();
        let mut fresh = Vec::new();
        {
            let mut told = lock(&self.told);
            told.retain(|k, _| decision.pods.contains_key(k));
            for e in &decision.events {
                if let sluice_autoscaler::Involved::Pod { namespace, name } = &e.involved {
                    let k = format!("{namespace}/{name}");
                    if told.get(&k) == Some(&e.message) {
                        continue;
                    }
                    told.insert(k, e.message.clone());
                }
                fresh.push(e);
            }
        }
        for e in fresh {
            write::event(&self.client, e, &uids).await;
        }
    }
}
