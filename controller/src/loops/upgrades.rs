//! The node-upgrade loop: each `Operation` of type `UPGRADE_NODES` or
//! `AUTO_UPGRADE_NODES` run to its end by `sluice_upgrades::plan` (pure).
//! A pass reads the operation, its pool, the provider's instances, the
//! pool's Nodes, the pods on them, the `Local` Services and the cluster's
//! maintenance policy ([`inputs`]); plans; runs the actions ([`execute`]);
//! writes the operation's status; and asks to be run again after the
//! plan's requeue-after. Nothing else is remembered between passes but
//! the zones each pool's upgrade holds ([`Holds`]), which the pool loop
//! reads so that it neither cuts surge nodes nor refills with the old
//! version; after a restart, until the first pass, a live upgrade holds
//! every zone of its pool.
//!
//! One upgrade per pool at a time, as GKE refuses a second operation on a
//! pool while one runs: the oldest live one runs, the others wait
//! `PENDING` and say which one they wait for.

pub mod execute;
pub mod inputs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{EndpointSlice, Node, Pod, PodDisruptionBudget, Service};
use sluice_model::node_pool::{BlueGreenInfo, NodePool, UpdateInfo};
use sluice_model::operation::{Operation, OperationState, OperationStatus};
use sluice_model::policy::eviction::{EvictionReason, DRAIN_ANNOTATION};
use sluice_nodepools::node_object::pool_of;
use sluice_nodepools::reconcile::{self, Config, ZoneHold};
use sluice_nodepools::NodeProvider;
use sluice_upgrades::{Inputs, Quota};

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{requeue, LoopError, MANAGER};

/// The zones each pool's running upgrade holds, by pool, as its latest
/// plan said.
#[derive(Debug, Default)]
pub struct Holds(Mutex<BTreeMap<String, BTreeMap<String, ZoneHold>>>);

impl Holds {
    fn set(&self, pool: &str, zones: BTreeMap<String, ZoneHold>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(pool.to_owned(), zones);
    }

    fn clear(&self, pool: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(pool);
    }

    /// The zones of `pool` held now: the latest plan's while an upgrade
    /// of it is live, every zone before its first plan, none otherwise.
    pub fn of_pool(
        &self,
        pool: &NodePool,
        operations: &Informer<Operation>,
        config: &Config,
    ) -> BTreeMap<String, ZoneHold> {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let live: Vec<Arc<Operation>> = operations
            .all()
            .into_iter()
            .filter(|o| inputs::live_upgrade(o) == Some(name))
            .collect();
        let Some(op) = live.first() else {
            return BTreeMap::new();
        };
        let planned = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match planned.get(name) {
            Some(zones) => zones.clone(),
            None => inputs::all_zones_held(
                op,
                &reconcile::zone_targets(&pool.spec, &config.cluster_locations),
            ),
        }
    }
}

pub struct Upgrades {
    pub client: Client,
    pub operations: Arc<Informer<Operation>>,
    pub pools: Arc<Informer<NodePool>>,
    pub nodes: Arc<Informer<Node>>,
    pub pods: Arc<Informer<Pod>>,
    /// For the budgets that hold a drain back (named in the status).
    pub budgets: Arc<Informer<PodDisruptionBudget>>,
    pub services: Arc<Informer<Service>>,
    pub slices: Arc<Informer<EndpointSlice>>,
    pub clusters: Arc<Informer<Cluster>>,
    pub provider: Arc<dyn NodeProvider>,
    pub config: Config,
    pub holds: Arc<Holds>,
    /// Whether the load balancers have let a drained node go.
    pub balancers: Arc<super::balancers::Balancers>,
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

impl Upgrades {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        if key.0 == AUTO {
            return self.auto_upgrade(&key.1).await;
        }
        if key.0 == ORPHANS {
            return self.release_orphans(&key.1).await;
        }
        if self.operations.get("", &key.1).is_none() {
            return Ok(None);
        }
        // Read fresh, not from the cache: a pass woken by the pool write
        // of the pass that finished the upgrade would otherwise see the
        // pool at the new version and the operation still running, and
        // plan it again as a change with nothing to recreate.
        let api: Api<Operation> = Api::all(self.client.clone());
        let Some(op) = api.get_opt(&key.1).await? else {
            return Ok(None);
        };
        let Some(pool_name) = inputs::live_upgrade(&op).map(str::to_owned) else {
            return Ok(None);
        };
        let now = Timestamp::now();
        let Some(pool) = self.pools.get("", &pool_name) else {
            let status = failed(&op, format!("node pool {pool_name:?} not found"), now);
            self.write_status(&op, &status).await?;
            return Ok(None);
        };
        if let Some(first) = self.running_before(&op, &pool_name) {
            let mut status = op.status.clone().unwrap_or_default();
            status.status = Some(OperationState::Pending);
            status.status_message = Some(format!(
                "waiting for operation {first} on node pool {pool_name} to finish"
            ));
            self.write_status(&op, &status).await?;
            return Ok(None);
        }
        let instances = self
            .provider
            .list(&pool_name)
            .await
            .map_err(|e| LoopError::Provider(e.to_string()))?;
        let nodes: Vec<Arc<Node>> = self
            .nodes
            .all()
            .into_iter()
            .filter(|n| pool_of(n) == Some(pool_name.as_str()))
            .collect();
        let names: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let draining: BTreeSet<String> = nodes
            .iter()
            .filter(|n| sluice_upgrades::drain::drain_mark(n).is_some())
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let pods = self.pods.all();
        let pod_refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
        let budgets = self.budgets.all();
        let budget_refs: Vec<&PodDisruptionBudget> = budgets.iter().map(AsRef::as_ref).collect();
        let pods = inputs::pods_by_node(&pod_refs, &names, &draining, &budget_refs);
        let services = self.services.all();
        let slices = self.slices.all();
        let slice_refs: Vec<&EndpointSlice> = slices.iter().map(AsRef::as_ref).collect();
        let locals = inputs::local_services(services.iter().map(AsRef::as_ref), &slice_refs);
        let cluster = self.clusters.get("", "default");
        let gate = sluice_upgrades::gate_of(&op, &pool, cluster.as_deref(), now);
        let quota = Quota::of_pool(&pool, &self.config, now);
        let capacity = match self.provider.capacity().await {
            Ok(room) => room.map(|r| usize::try_from(r).unwrap_or(usize::MAX)),
            Err(e) => {
                tracing::warn!(pool = %pool_name, error = %e, "node provider's capacity unknown");
                None
            }
        };
        let node_list: Vec<Node> = nodes.iter().map(|n| n.as_ref().clone()).collect();
        let balancers = self.balancers.look(now);
        let plan = sluice_upgrades::plan(
            &Inputs {
                operation: &op,
                pool: &pool,
                instances: &instances,
                nodes: &node_list,
                pods: &pods,
                quota: &quota,
                capacity,
                local_services: &locals,
                gate: &gate,
                balancers: &balancers,
                config: &self.config,
            },
            now,
        );
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                let status = failed(&op, e.to_string(), now);
                self.holds.clear(&pool_name);
                self.write_status(&op, &status).await?;
                return Ok(None);
            }
        };
        // The holds first: the pool loop must see a zone held before the
        // surge nodes this pass makes in it.
        self.holds.set(&pool_name, plan.held_zones.clone());
        let run = execute::Executor {
            client: &self.client,
            provider: &self.provider,
            operation: &key.1,
            pool: &pool_name,
            nodes: &nodes,
        };
        let outcomes = run.run(&plan.actions).await?;
        if outcomes.iter().any(|o| o.result.is_err()) {
            // The pool's creation backoff is the quota the next plan
            // reads (U4): the upgrade's refusals feed it as the pool
            // loop's do.
            let before = pool.status.clone().unwrap_or_default();
            let after = reconcile::record(&before, &outcomes, &self.config, Timestamp::now());
            if after != before {
                // The autoscaler's fields are its loop's: a stale copy
                // from this cache is not written back.
                let mut body = after;
                body.autoscaler = None;
                let api: Api<NodePool> = Api::all(self.client.clone());
                api.patch_status(
                    &pool_name,
                    &params(),
                    &Patch::Merge(json!({ "status": body })),
                )
                .await?;
            }
        }
        if plan.status.status.is_some_and(|s| s.is_final()) {
            self.holds.clear(&pool_name);
        }
        self.write_update_info(&pool, plan.blue_green_info.clone())
            .await?;
        self.write_status(&op, &plan.status).await?;
        Ok(requeue(plan.requeue_after))
    }

    /// Makes the automatic upgrade `pool` needs, if any
    /// (`sluice_upgrades::auto`); its fixed name makes a repeat a 409.
    async fn auto_upgrade(&self, pool: &str) -> Result<Next, LoopError> {
        let Some(pool) = self.pools.get("", pool) else {
            return Ok(None);
        };
        let ops = self.operations.all();
        let refs: Vec<&Operation> = ops.iter().map(AsRef::as_ref).collect();
        let cluster = self.clusters.get("", "default");
        let Some(op) = sluice_upgrades::auto::wanted(&pool, cluster.as_deref(), &refs) else {
            return Ok(None);
        };
        let api: Api<Operation> = Api::all(self.client.clone());
        match api.create(&kube::api::PostParams::default(), &op).await {
            Ok(_) => {
                tracing::info!(
                    operation = op.metadata.name.as_deref().unwrap_or_default(),
                    version = op.spec.node_version.as_deref().unwrap_or_default(),
                    "automatic node upgrade"
                );
                Ok(None)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Lifts the marks, cordons and upgrade drains an operation deleted
    /// mid-way left on `pool`'s Nodes: nothing would ever finish them, and
    /// a node left cordoned is a node lost. Its surge or green nodes are
    /// surplus to the pool loop once the operation no longer holds the
    /// zones (the newest go: blue stays).
    async fn release_orphans(&self, pool: &str) -> Result<Next, LoopError> {
        let api: Api<Operation> = Api::all(self.client.clone());
        let mut gone: BTreeMap<String, bool> = BTreeMap::new();
        for node in self.nodes.all() {
            if pool_of(&node) != Some(pool) {
                continue;
            }
            let annotations = node.metadata.annotations.clone().unwrap_or_default();
            let marked = annotations.get(sluice_upgrades::UPGRADING_ANNOTATION);
            let cordoned = annotations.get(sluice_upgrades::CORDONED_BY_ANNOTATION);
            let Some(op) = marked.or(cordoned) else {
                continue;
            };
            let missing = match gone.get(op) {
                Some(m) => *m,
                None => {
                    // Fresh, not the cache: a new operation may not be
                    // in it yet.
                    let m = api.get_opt(op).await?.is_none();
                    gone.insert(op.clone(), m);
                    m
                }
            };
            if !missing {
                continue;
            }
            let name = node.metadata.name.as_deref().unwrap_or_default();
            tracing::info!(node = name, operation = %op, "releasing a node of a deleted upgrade");
            let patch = orphan_release(&node, marked.is_some(), cordoned.is_some());
            let nodes: Api<Node> = Api::all(self.client.clone());
            match nodes.patch(name, &params(), &Patch::Merge(patch)).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
        }
        Ok(None)
    }

    /// The oldest other live upgrade of `pool`, when it is older than
    /// `op` (creation time, then name).
    fn running_before(&self, op: &Operation, pool: &str) -> Option<String> {
        let order = |o: &Operation| {
            (
                o.metadata.creation_timestamp.clone().map(|t| t.0),
                o.metadata.name.clone().unwrap_or_default(),
            )
        };
        self.operations
            .all()
            .into_iter()
            .filter(|o| inputs::live_upgrade(o) == Some(pool))
            .min_by_key(|o| order(o))
            .filter(|first| first.metadata.name != op.metadata.name)
            .and_then(|first| first.metadata.name.clone())
    }

    /// Publishes a blue-green upgrade's phase, sides and scaling rules in
    /// the pool's `status.updateInfo` (GKE's), or removes it once the
    /// upgrade is over; the pool loop keeps what is there.
    async fn write_update_info(
        &self,
        pool: &NodePool,
        info: Option<BlueGreenInfo>,
    ) -> Result<(), LoopError> {
        let before = pool.status.as_ref().and_then(|s| s.update_info.clone());
        let after = info.map(|i| UpdateInfo {
            blue_green_info: Some(i),
        });
        if before == after {
            return Ok(());
        }
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let value = serde_json::to_value(&after).unwrap_or(Value::Null);
        let api: Api<NodePool> = Api::all(self.client.clone());
        let patch = json!({ "status": { "updateInfo": value } });
        match api
            .patch_status(name, &params(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    /// Writes `status` if it differs from the stored one, as a merge
    /// patch that also removes what the new status leaves out.
    async fn write_status(
        &self,
        op: &Operation,
        status: &OperationStatus,
    ) -> Result<(), LoopError> {
        let before =
            serde_json::to_value(op.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
        let after = serde_json::to_value(status).unwrap_or(Value::Null);
        if before == after {
            return Ok(());
        }
        let name = op.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Operation> = Api::all(self.client.clone());
        let patch = json!({ "status": merge_diff(&before, &after) });
        match api
            .patch_status(name, &params(), &Patch::Merge(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    /// Every operation, and per pool the automatic-upgrade check and the
    /// release of marks a deleted operation left (after a restart too).
    pub fn all_keys(&self) -> Vec<Key> {
        let mut keys = self.operations.keys();
        for (_, p) in self.pools.keys() {
            keys.push((ORPHANS.to_owned(), p.clone()));
            keys.push(auto_key(&p));
        }
        keys
    }

    pub fn on_operation(&self, change: &Change<Operation>, queue: &Queue) {
        match change {
            // Another operation of the same pool may be waiting on this
            // one: wake them all.
            Change::Applied(o) | Change::Deleted(o) => {
                match inputs::live_upgrade(o).or_else(|| o.spec.node_pool()) {
                    Some(pool) => queue.add_all(self.keys_of_pool(pool)),
                    None => queue.add(super::informer::key_of(o.as_ref())),
                }
                if let (Change::Deleted(_), Some(pool)) = (change, o.spec.node_pool()) {
                    queue.add((ORPHANS.to_owned(), pool.to_owned()));
                }
            }
            Change::Relisted => queue.add_all(self.all_keys()),
        }
    }

    /// A Node of a pool changing (a new one registering, Ready, gone, its
    /// drain annotations) moves that pool's upgrade on.
    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        let node = match change {
            Change::Applied(n) | Change::Deleted(n) => n,
            Change::Relisted => return queue.add_all(self.all_keys()),
        };
        if let Some(pool) = pool_of(node) {
            queue.add_all(self.live_keys_of_pool(pool));
        }
    }

    /// A pod leaving a node being drained moves its upgrade on.
    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        let Change::Deleted(pod) = change else {
            return;
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return;
        };
        let pool = self
            .nodes
            .get("", node)
            .and_then(|n| pool_of(&n).map(str::to_owned));
        if let Some(pool) = pool {
            queue.add_all(self.live_keys_of_pool(&pool));
        }
    }

    pub fn on_pool(&self, change: &Change<NodePool>, queue: &Queue) {
        match change {
            Change::Applied(p) | Change::Deleted(p) => {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                queue.add_all(self.live_keys_of_pool(name));
                if matches!(change, Change::Applied(_)) {
                    queue.add(auto_key(name));
                }
            }
            Change::Relisted => queue.add_all(self.all_keys()),
        }
    }

    /// A node leaving (or joining) a NEG or an instance group may let a
    /// drained node go: every live upgrade looks again.
    pub fn on_backends<K>(&self, _change: &Change<K>, queue: &Queue) {
        let live: Vec<Key> = self
            .operations
            .all()
            .iter()
            .filter(|o| inputs::live_upgrade(o).is_some())
            .map(|o| super::informer::key_of(o.as_ref()))
            .collect();
        queue.add_all(live);
    }

    /// A change of the maintenance policy opens or closes every gate; a
    /// new control-plane version may call for automatic upgrades.
    pub fn on_cluster(&self, change: &Change<Cluster>, queue: &Queue) {
        if !matches!(change, Change::Relisted) {
            queue.add_all(self.all_keys());
        }
    }

    fn keys_of_pool(&self, pool: &str) -> Vec<Key> {
        self.operations
            .all()
            .iter()
            .filter(|o| o.spec.node_pool() == Some(pool))
            .map(|o| super::informer::key_of(o.as_ref()))
            .collect()
    }

    fn live_keys_of_pool(&self, pool: &str) -> Vec<Key> {
        self.operations
            .all()
            .iter()
            .filter(|o| inputs::live_upgrade(o) == Some(pool))
            .map(|o| super::informer::key_of(o.as_ref()))
            .collect()
    }
}

/// The patch that frees a node a deleted operation left: its mark, its
/// cordon (blue-green's, the records with it) and the drains an upgrade
/// asked for. A user's drain or cordon stays.
fn orphan_release(node: &Node, marked: bool, cordoned: bool) -> Value {
    let mut annotations = serde_json::Map::new();
    if marked {
        annotations.insert(sluice_upgrades::UPGRADING_ANNOTATION.into(), Value::Null);
    }
    let upgrade_drain = sluice_upgrades::drain::drain_mark(node).is_some_and(|d| {
        matches!(
            d.reason,
            Some(
                EvictionReason::NodeUpgrade
                    | EvictionReason::BlueGreenDrain
                    | EvictionReason::BluePoolDeletion
            )
        )
    });
    if upgrade_drain {
        annotations.insert(DRAIN_ANNOTATION.into(), Value::Null);
        annotations.insert(
            sluice_upgrades::drain::DRAIN_STARTED_ANNOTATION.into(),
            Value::Null,
        );
    }
    let mut patch = json!({"metadata": {"annotations": annotations}});
    if cordoned {
        patch["metadata"]["annotations"][sluice_upgrades::CORDONED_BY_ANNOTATION] = Value::Null;
        patch["metadata"]["annotations"][sluice_upgrades::CORDONED_AT_ANNOTATION] = Value::Null;
        patch["spec"] = json!({"unschedulable": null});
    }
    patch
}

/// The namespace part of the keys that ask for a pool's automatic-upgrade
/// check (operations are cluster-scoped: their keys have none).
const AUTO: &str = "auto-upgrade";

/// The namespace part of the keys that release the nodes a deleted
/// operation left marked.
const ORPHANS: &str = "orphaned-marks";

fn auto_key(pool: &str) -> Key {
    (AUTO.to_owned(), pool.to_owned())
}

/// The operation's status after an error that no pass can get past (a
/// missing pool, settings the planner refuses): `FAILED`, with why.
fn failed(op: &Operation, why: String, now: Timestamp) -> OperationStatus {
    let mut status = op.status.clone().unwrap_or_default();
    status.status = Some(OperationState::Failed);
    status.status_message = Some(why);
    status.end_time = Some(sluice_model::k8s::Time(now));
    status
}

/// The RFC 7386 merge patch that turns `before` into `after`: changed
/// and new members as they are, members gone as `null`, objects
/// recursively, anything else (lists included) whole.
pub fn merge_diff(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut out = serde_json::Map::new();
            for (k, av) in a {
                match b.get(k) {
                    Some(bv) if bv == av => {}
                    Some(bv) => {
                        out.insert(k.clone(), merge_diff(bv, av));
                    }
                    None => {
                        out.insert(k.clone(), av.clone());
                    }
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => after.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::{merge_diff, orphan_release};
    use serde_json::json;

    #[test]
    fn a_deleted_blue_green_upgrade_s_cordon_and_drain_are_lifted() {
        // spec: B6 — nothing is left cordoned by an upgrade that is gone.
        let node: sluice_model::k8s::Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "annotations": {
                "sluice.dev/cordoned-by": "op", "sluice.dev/cordoned-at": "2026-12-01T00:00:00Z",
                "sluice.dev/drain": "BlueGreenDrain", "sluice.dev/drain-started": "2026-12-01T00:00:00Z"}},
            "spec": {"unschedulable": true}
        }))
        .unwrap();
        let p = orphan_release(&node, false, true);
        let after = sluice_upgrades::interpret::apply(&node, &p).unwrap();
        assert!(after.metadata.annotations.unwrap_or_default().is_empty());
        assert_eq!(after.spec.unwrap_or_default().unschedulable, None);
        // A user's drain is not an upgrade's: it stays.
        let mut user = node.clone();
        user.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("sluice.dev/drain".into(), "UserDrain".into());
        let after =
            sluice_upgrades::interpret::apply(&user, &orphan_release(&user, false, true)).unwrap();
        assert_eq!(
            after.metadata.annotations.unwrap()["sluice.dev/drain"],
            "UserDrain"
        );
    }

    #[test]
    fn a_merge_diff_removes_what_went_and_keeps_what_stayed() {
        let before =
            json!({"status": "RUNNING", "zone": "a", "progress": {"stages": [1, 2], "name": "x"}});
        let after = json!({"status": "DONE", "progress": {"stages": [1], "name": "x"}});
        let d = merge_diff(&before, &after);
        assert_eq!(
            d,
            json!({"status": "DONE", "zone": null, "progress": {"stages": [1]}})
        );
    }
}
