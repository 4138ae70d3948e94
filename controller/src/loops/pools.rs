//! The node-pool loop: each `NodePool` made real through a node provider
//! (`--node-provider`). A pass lists the pool's instances, decides with
//! `sluice_nodepools::reconcile::plan` (pure), runs the actions through
//! the provider, folds the outcomes into the status (quota backoff and
//! conditions) and writes it. Instances are polled, not watched, so a pass
//! asks to be run again after the plan's requeue-after.
//!
//! With the `sim` provider nothing boots, so this file also plays the
//! simulated nodes' kubelets ([`SimKubelets`]): each running instance's
//! Node is registered, its Lease renewed, and a gone instance's Node
//! deleted, which is what real agents and the node lifecycle would do.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::NodeAddress;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Lease, Node};
use sluice_model::node_pool::NodePool;
use sluice_nodepools::node_object::pool_of;
use sluice_nodepools::reconcile::{self, Config};
use sluice_nodepools::sim::SimProvider;
use sluice_nodepools::{execute, Instance, NodeProvider};
use tracing::{info, warn};

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{requeue, LoopError, MANAGER};

pub struct Pools {
    pub client: Client,
    pub pools: Arc<Informer<NodePool>>,
    pub nodes: Arc<Informer<Node>>,
    /// The upgrades, for the zones they hold (see [`super::upgrades`]).
    pub operations: Arc<Informer<sluice_model::operation::Operation>>,
    pub holds: Arc<super::upgrades::Holds>,
    pub provider: Arc<dyn NodeProvider>,
    pub config: Config,
    /// Whether each pool Node was Ready when last seen: what a plan reads
    /// of a Node, so only a change of it wakes the pool.
    pub seen_ready: std::sync::Mutex<std::collections::HashMap<String, bool>>,
}

impl Pools {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let Some(pool) = self.pools.get("", &key.1) else {
            return self.remove_orphans(&key.1).await;
        };
        let instances = self
            .provider
            .list(&key.1)
            .await
            .map_err(|e| LoopError::Provider(e.to_string()))?;
        let nodes = self.nodes.all();
        let now = Timestamp::now();
        let mut config = self.config.clone();
        config.held_zones = self.holds.of_pool(&pool, &self.operations, &self.config);
        let plan = reconcile::plan(&pool, &instances, &nodes, &config, now)?;
        let outcomes = execute::run(self.provider.clone(), plan.actions).await;
        let status = reconcile::record(&plan.status, &outcomes, &self.config, Timestamp::now());
        if pool.status.as_ref() != Some(&status) {
            let api: Api<NodePool> = Api::all(self.client.clone());
            let params = PatchParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            // `updateInfo` is the upgrade loop's: left out of the patch, so
            // that a stale copy in this cache never puts back what that
            // loop removed.
            // Likewise `autoscaler`, the autoscaler loop's.
            let mut body = status.clone();
            body.update_info = None;
            body.autoscaler = None;
            let patch = json!({ "status": body });
            match api
                .patch_status(&key.1, &params, &Patch::Merge(&patch))
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
        }
        // The provider is asked again only when this pass changed its
        // instances; otherwise the list above is current.
        let listed = if outcomes.is_empty() {
            instances
        } else {
            self.provider
                .list(&key.1)
                .await
                .map_err(|e| LoopError::Provider(e.to_string()))?
        };
        self.delete_stale_nodes(&key.1, &listed).await?;
        let poll = requeue(Some(self.config.poll_interval));
        Ok(requeue(plan.requeue_after).or(poll))
    }

    /// The Nodes of this pool whose instance the provider no longer lists
    /// and that are not Ready: deleted, as the cloud node lifecycle
    /// controller deletes a Node whose VM is gone (the pod GC then removes
    /// its pods). The provider is asked again after this pass's creates and
    /// deletes, so a node created in it is listed.
    async fn delete_stale_nodes(&self, pool: &str, listed: &[Instance]) -> Result<(), LoopError> {
        let names: BTreeSet<&str> = listed.iter().map(|i| i.name.as_str()).collect();
        let nodes = self.nodes.all();
        let api: Api<Node> = Api::all(self.client.clone());
        for name in stale_nodes(nodes.iter().map(|n| n.as_ref()), pool, &names) {
            info!(node = %name, pool, "deleting the Node of an instance that is gone");
            match api.delete(&name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }

    /// A pool deleted outright (it has no finalizer to wait on) leaves
    /// its instances: each is deleted, as GKE deletes a pool's VMs with it.
    async fn remove_orphans(&self, pool: &str) -> Result<Next, LoopError> {
        let instances = self
            .provider
            .list(pool)
            .await
            .map_err(|e| LoopError::Provider(e.to_string()))?;
        for i in instances {
            if i.state == sluice_nodepools::InstanceState::Deleting {
                continue;
            }
            match self.provider.delete(&i.name).await {
                Ok(()) | Err(sluice_nodepools::ProviderError::NotFound(_)) => {}
                Err(e) => return Err(LoopError::Provider(e.to_string())),
            }
        }
        Ok(None)
    }

    pub fn on_pool(&self, change: &Change<NodePool>, queue: &Queue) {
        match change {
            Change::Applied(p) | Change::Deleted(p) => {
                queue.add(super::informer::key_of(p.as_ref()))
            }
            Change::Relisted => queue.add_all(self.pools.keys()),
        }
    }

    /// A pool's Node going away, coming, or turning Ready or not changes
    /// what the pool needs; any other update (a cordon, a label) does not,
    /// and does not wake it: 5 000 cordons were 5 000 passes over every
    /// Node.
    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        let (n, ready) = match change {
            Change::Applied(n) => (n, Some(reconcile::is_node_ready(n))),
            Change::Deleted(n) => (n, None),
            Change::Relisted => return,
        };
        let Some(pool) = pool_of(n) else {
            return;
        };
        let name = n.metadata.name.clone().unwrap_or_default();
        let mut seen = self.seen_ready.lock().unwrap_or_else(|p| p.into_inner());
        let before = match ready {
            Some(r) => seen.insert(name, r),
            None => seen.remove(&name),
        };
        if before.is_none() || before != ready {
            queue.add((String::new(), pool.to_owned()));
        }
    }
}

/// The kubelets of the simulated nodes.
pub struct SimKubelets {
    pub client: Client,
    pub sim: Arc<SimProvider>,
    pub pools: Arc<Informer<NodePool>>,
    pub nodes: Arc<Informer<Node>>,
    /// The InternalIP given to each simulated node, kept so a node whose
    /// registration is not in the cache yet is not given another.
    pub addresses: std::sync::Mutex<std::collections::HashMap<String, Ipv4Addr>>,
}

/// Where simulated nodes' InternalIPs come from (4 096 addresses in the
/// test range): a real node reports one, and the load balancers (issue
/// 11) send to it. Nothing is sent to a simulated node.
pub const SIM_NODE_ADDRESSES: (Ipv4Addr, u32) = (Ipv4Addr::new(198, 19, 240, 0), 4096);

/// The lowest address of `range` after its network address that `used`
/// does not hold; `None` when all are taken.
pub fn next_free(used: &BTreeSet<Ipv4Addr>, range: (Ipv4Addr, u32)) -> Option<Ipv4Addr> {
    let base = u32::from(range.0);
    (1..range.1.saturating_sub(1))
        .map(|i| Ipv4Addr::from(base.saturating_add(i)))
        .find(|a| !used.contains(a))
}

impl SimKubelets {
    /// The InternalIP for the simulated node `name`: the one it was given
    /// before, else the lowest free one (none when the range is full: the
    /// node registers without, and is no load-balancer backend).
    fn address_for(&self, name: &str, used: &mut BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        let mut given = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = given.get(name) {
            return Some(*a);
        }
        let a = next_free(used, SIM_NODE_ADDRESSES)?;
        used.insert(a);
        given.insert(name.to_string(), a);
        Some(a)
    }

    /// Every InternalIP the cached Nodes and this file's memory hold.
    fn used_addresses(&self) -> BTreeSet<Ipv4Addr> {
        let mut used: BTreeSet<Ipv4Addr> = self
            .nodes
            .all()
            .iter()
            .filter_map(|n| n.status.as_ref()?.addresses.clone())
            .flatten()
            .filter_map(|a| a.address.parse().ok())
            .collect();
        let given = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        used.extend(given.values().copied());
        used
    }
}

/// The label of the Nodes the simulated kubelets registered.
pub const SIMULATED_LABEL: &str = "sluice.dev/simulated";

/// Of `nodes`, those labelled with `pool` that the provider does not list
/// (`listed`) and that are not `Ready=True`: a Node still Ready has a live
/// agent whatever a provider's list says, so a list that comes back short
/// never deletes a working node.
pub fn stale_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pool: &str,
    listed: &BTreeSet<&str>,
) -> Vec<String> {
    nodes
        .into_iter()
        .filter(|n| pool_of(n) == Some(pool))
        .filter(|n| !reconcile::is_node_ready(n))
        .filter_map(|n| n.metadata.name.clone())
        .filter(|name| !listed.contains(name.as_str()))
        .collect()
}

/// How often a simulated kubelet renews its Lease (as the agent does).
const LEASE_EVERY: Duration = Duration::from_secs(10);

/// Requests the simulated kubelets have in flight at once.
const SIM_CONCURRENCY: usize = 64;

impl SimKubelets {
    pub async fn run(self) {
        let mut last_renewal = tokio::time::Instant::now() - LEASE_EVERY;
        loop {
            let renew = last_renewal.elapsed() >= LEASE_EVERY;
            if renew {
                last_renewal = tokio::time::Instant::now();
            }
            if let Err(e) = self.pass(renew).await {
                warn!(error = %e, "simulated kubelets");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// One pass over every simulated node: register the missing, renew
    /// the Leases when due, delete the Nodes of gone instances. Requests
    /// run [`SIM_CONCURRENCY`] at a time (thousands of nodes renew within
    /// their 10 s, as thousands of kubelets would), and one failing request
    /// does not stop the others; the failures are counted and the first
    /// returned.
    async fn pass(&self, renew: bool) -> Result<(), kube::Error> {
        use futures::StreamExt;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        let pp = PostParams {
            field_manager: Some("sluice-sim-kubelet".into()),
            ..Default::default()
        };
        let mut running = BTreeSet::new();
        let mut work = Vec::new();
        let mut used = self.used_addresses();
        for pool in self.pools.all() {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let missing = |n: &str| self.nodes.get("", n).is_none();
            for (n, node) in self.sim.running(&name, missing) {
                running.insert(n.clone());
                match node {
                    Some(mut node) => {
                        node.metadata
                            .labels
                            .get_or_insert_with(Default::default)
                            .insert(SIMULATED_LABEL.into(), "true".into());
                        if let (Some(a), Some(status)) =
                            (self.address_for(&n, &mut used), node.status.as_mut())
                        {
                            status.addresses = Some(vec![NodeAddress {
                                type_: "InternalIP".into(),
                                address: a.to_string(),
                            }]);
                        }
                        work.push((Some(node), n));
                    }
                    None if renew => work.push((None, n)),
                    None => {}
                }
            }
        }
        let results: Vec<Result<(), kube::Error>> = futures::stream::iter(work)
            .map(|(node, n)| {
                let (nodes, leases, pp) = (&nodes, &leases, &pp);
                async move {
                    if let Some(node) = node {
                        match nodes.create(pp, &node).await {
                            Err(kube::Error::Api(s)) if s.code == 409 => {}
                            r => {
                                r?;
                            }
                        }
                    }
                    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": n, "namespace": "kube-node-lease"},
                        "spec": {"holderIdentity": n, "leaseDurationSeconds": 40,
                                 "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
                    let params = PatchParams::apply("sluice-sim-kubelet").force();
                    leases.patch(&n, &params, &Patch::Apply(&lease)).await?;
                    Ok(())
                }
            })
            .buffer_unordered(SIM_CONCURRENCY)
            .collect()
            .await;
        // A simulated node whose instance is gone: its Node goes too
        // (only Nodes this file registered, by their label).
        let gone: Vec<String> = self
            .nodes
            .all()
            .iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.get(SIMULATED_LABEL).is_some())
            })
            .filter_map(|n| n.metadata.name.clone())
            .filter(|name| !running.contains(name))
            .collect();
        let deleted: Vec<Result<(), kube::Error>> = futures::stream::iter(gone)
            .map(|name| {
                let nodes = &nodes;
                async move {
                    match nodes.delete(&name, &DeleteParams::default()).await {
                        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                        r => r.map(|_| ()),
                    }
                }
            })
            .buffer_unordered(SIM_CONCURRENCY)
            .collect()
            .await;
        let mut failures = results.into_iter().chain(deleted).filter_map(Result::err);
        let first = failures.next();
        let more = failures.count();
        match first {
            None => Ok(()),
            Some(e) => {
                if more > 0 {
                    warn!(failed = more + 1, "simulated kubelets: requests failed");
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, pool: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {sluice_nodepools::node_object::POOL_LABEL: pool}},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .expect("node")
    }

    #[test]
    fn simulated_nodes_get_the_lowest_free_address() {
        let range = (Ipv4Addr::new(198, 19, 240, 0), 4);
        let mut used = BTreeSet::new();
        assert_eq!(
            next_free(&used, range),
            Some(Ipv4Addr::new(198, 19, 240, 1))
        );
        used.insert(Ipv4Addr::new(198, 19, 240, 1));
        assert_eq!(
            next_free(&used, range),
            Some(Ipv4Addr::new(198, 19, 240, 2))
        );
        used.insert(Ipv4Addr::new(198, 19, 240, 2));
        // The network and broadcast addresses are never given.
        assert_eq!(next_free(&used, range), None);
    }

    #[test]
    fn only_unlisted_not_ready_nodes_of_the_pool_are_stale() {
        let nodes = [
            node("gone", "a", "Unknown"),
            node("listed", "a", "Unknown"),
            node("ready-unlisted", "a", "True"),
            node("other-pool", "b", "Unknown"),
        ];
        let listed: BTreeSet<&str> = ["listed"].into_iter().collect();
        assert_eq!(stale_nodes(&nodes, "a", &listed), vec!["gone".to_string()]);
    }
}
