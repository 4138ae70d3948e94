//! Node loops: the node lifecycle (silent nodes marked Unknown and
//! tainted, their pods evicted when their tolerations run out) and pod
//! CIDRs for new Nodes. The decisions are `sluice_lifecycle`'s (pure);
//! this file feeds them the cache and writes through the API.
//!
//! The lifecycle decides over the whole cluster at once (zones are judged
//! together), so it is one key woken by Node and Lease changes and by its
//! own "next due" time, never more than once per [`MIN_PASS`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::json;
use sluice_lifecycle::node_lifecycle::{self, Config};
use sluice_lifecycle::pod_cidrs::Allocator;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Lease, Node, Pod};
use tracing::{info, warn};

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{requeue, LoopError, MANAGER};

/// The one key of the lifecycle loop.
pub fn cluster_key() -> Key {
    (String::new(), String::new())
}

/// Passes are at least this far apart: a storm of heartbeats is one pass.
pub const MIN_PASS: Duration = Duration::from_millis(500);

/// When nothing is due sooner, look again after this long anyway.
const IDLE_PASS: Duration = Duration::from_secs(5);

/// Node writes (conditions, taints) of one pass in flight at once.
const NODE_WRITERS: usize = 32;

pub struct Lifecycle {
    pub client: Client,
    pub nodes: Arc<Informer<Node>>,
    pub leases: Arc<Informer<Lease>>,
    pub pods: Arc<Informer<Pod>>,
    pub config: Config,
    /// Nodes named by pods but gone, since when (the pod GC's quarantine).
    pub missing: Mutex<sluice_lifecycle::pod_gc::MissingSince>,
    /// How long a Node must be gone before its pods are collected.
    pub pod_gc_quarantine: SignedDuration,
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

impl Lifecycle {
    pub async fn reconcile(&self) -> Result<Next, LoopError> {
        // Shared, not copied: 5 000 Nodes and Leases twice a second were
        // most of the controller's CPU with 5 000 nodes.
        let nodes = self.nodes.all();
        let leases = self.leases.in_namespace(node_lifecycle::LEASE_NAMESPACE);
        let now = Timestamp::now();
        // Pods matter only on nodes that are, or are about to be, silent or
        // tainted NoExecute: a first pass without pods says which nodes
        // change, and only those nodes' pods are copied out of the cache
        // (copying 100 000 pods every pass cost gigabytes).
        let first = node_lifecycle::reconcile::<_, _, Pod>(&nodes, &leases, &[], &self.config, now);
        let mut affected: std::collections::HashSet<String> =
            first.node_updates.iter().map(|u| u.node.clone()).collect();
        for n in &nodes {
            let tainted = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.effect == "NoExecute"));
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == "True");
            if tainted || !ready {
                affected.insert(n.metadata.name.clone().unwrap_or_default());
            }
        }
        // One read of the cache serves the evictions and the pod GC.
        let all_pods = self.pods.all();
        let pods = super::workloads::relevant(&all_pods, |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| affected.contains(n))
        });
        let plan = node_lifecycle::reconcile(&nodes, &leases, &pods, &self.config, now);
        // Nodes written NODE_WRITERS at a time (each node's own writes in
        // order): one at a time, an uncordon of 5 000 nodes took ~40 s to
        // lift their `unschedulable` taints, and the scheduler could use
        // none of them meanwhile (upstream runs 8 node-update workers).
        let node_api: Api<Node> = Api::all(self.client.clone());
        let writes: Vec<_> = plan
            .node_updates
            .iter()
            .map(|u| {
                let (node_api, node) = (node_api.clone(), u.node.clone());
                let conditions = u
                    .conditions
                    .as_ref()
                    .map(|c| json!({"status": {"conditions": c}}));
                let taints = u.taints.as_ref().map(|t| json!({"spec": {"taints": t}}));
                async move {
                    if let Some(patch) = conditions {
                        node_api
                            .patch_status(&node, &params(), &Patch::Merge(&patch))
                            .await?;
                    }
                    if let Some(patch) = taints {
                        node_api
                            .patch(&node, &params(), &Patch::Merge(&patch))
                            .await?;
                    }
                    Ok::<(), kube::Error>(())
                }
            })
            .collect();
        let written: Vec<Result<(), kube::Error>> = futures::stream::iter(writes)
            .buffer_unordered(NODE_WRITERS)
            .collect()
            .await;
        // Every node's writes were tried; the first failure retries the pass.
        written.into_iter().collect::<Result<Vec<()>, _>>()?;
        let now = now.to_string();
        for p in &plan.mark_not_ready {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &p.namespace);
            let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
                "reason": "NodeNotReady", "lastTransitionTime": now}]}});
            if let Err(e) = api
                .patch_status(&p.name, &params(), &Patch::Strategic(&patch))
                .await
            {
                warn!(pod = %p.name, error = %e, "marking a pod on a silent node not ready");
            }
        }
        for ev in &plan.evictions {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ev.pod.namespace);
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: ev.pod.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            info!(pod = %ev.pod.name, node = %ev.pod.node, "{}", ev.message());
            match api.delete(&ev.pod.name, &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                r => {
                    r?;
                }
            }
        }
        self.collect_orphans(&all_pods).await?;
        let next = requeue(plan.requeue_after).unwrap_or(IDLE_PASS);
        Ok(Some(next.max(MIN_PASS)))
    }

    /// Pods bound to Nodes gone for the quarantine: deleted outright, as
    /// upstream's pod GC does (their agent is gone and cannot finish a
    /// graceful deletion).
    async fn collect_orphans(&self, pods: &[Arc<Pod>]) -> Result<(), LoopError> {
        let orphans = {
            let mut missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
            sluice_lifecycle::pod_gc::orphaned(
                pods.iter().map(|p| p.as_ref()),
                |n| self.nodes.get("", n).is_some(),
                &mut missing,
                self.pod_gc_quarantine,
                Timestamp::now(),
            )
        };
        for p in orphans {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &p.namespace);
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: p.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            info!(pod = %p.name, node = %p.node, "deleting a pod whose node is gone");
            match api.delete(&p.name, &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }

    /// Any Node change may change the whole cluster's verdict.
    pub fn on_change<K>(&self, _: &Change<K>, queue: &Queue) {
        queue.add(cluster_key());
    }

    /// A Lease renewed for a Node that is Ready and untainted changes no
    /// verdict: only a Lease that stops being renewed does, and the
    /// passes' own timer ([`IDLE_PASS`], upstream's 5 s node monitor
    /// period) sees that. Waking on each renewal ran a pass over every
    /// Node, Lease and pod twice a second with 5 000 nodes (500 renewals
    /// a second). A renewal for a Node that is not Ready, or is tainted,
    /// may bring it back: that wakes the loop.
    pub fn on_lease(&self, change: &Change<Lease>, queue: &Queue) {
        // The cache holds every namespace's Leases (leader elections'
        // too, renewed every few seconds): only the Nodes' matter here.
        if let Change::Applied(l) | Change::Deleted(l) = change {
            if l.metadata.namespace.as_deref() != Some(node_lifecycle::LEASE_NAMESPACE) {
                return;
            }
        }
        if let Change::Applied(lease) = change {
            let name = lease.metadata.name.as_deref().unwrap_or_default();
            if self.nodes.get("", name).is_some_and(|n| healthy(&n)) {
                return;
            }
        }
        queue.add(cluster_key());
    }
}

/// Ready, and without the node lifecycle's taints.
fn healthy(node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter().any(|t| {
                matches!(
                    t.key.as_str(),
                    "node.kubernetes.io/unreachable" | "node.kubernetes.io/not-ready"
                )
            })
        });
    ready && !tainted
}

/// Pod CIDRs (`--cluster-cidr`): a Node without `spec.podCIDRs` gets the
/// lowest free block of each cluster CIDR; the blocks in use are rebuilt
/// from the Nodes when the loop starts, and a deleted Node's freed.
pub struct PodCidrs {
    pub client: Client,
    pub nodes: Arc<Informer<Node>>,
    pub allocator: Mutex<Allocator>,
    /// Blocks handed to a Node that the cache has not shown on it yet, by
    /// node: a rebuild from the cache (a relist) while the write is in
    /// flight or unseen must not hand them out again to the next Node (two
    /// new Nodes got one block after a restart's relist).
    pub written: Mutex<BTreeMap<String, Vec<String>>>,
}

impl PodCidrs {
    /// The allocator with what the cached Nodes hold, and the blocks this
    /// loop wrote that the cache does not show yet.
    pub fn rebuild(&self) {
        let mut nodes: Vec<Node> = self.nodes.all().iter().map(|n| (**n).clone()).collect();
        let written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        for n in nodes.iter_mut() {
            let name = n.metadata.name.clone().unwrap_or_default();
            let has = n
                .spec
                .as_ref()
                .and_then(|s| s.pod_cidrs.as_ref())
                .is_some_and(|c| !c.is_empty());
            if let (false, Some(cidrs)) = (has, written.get(&name)) {
                n.spec.get_or_insert_with(Default::default).pod_cidrs = Some(cidrs.clone());
            }
        }
        drop(written);
        let mut a = self.allocator.lock().unwrap_or_else(|p| p.into_inner());
        for problem in a.rebuild(&nodes) {
            warn!(error = %problem, "a node's podCIDRs");
        }
    }

    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let Some(node) = self.nodes.get("", &key.1) else {
            return Ok(None);
        };
        let picked = {
            let mut a = self.allocator.lock().unwrap_or_else(|p| p.into_inner());
            let picked = a.allocate(&node)?;
            // Remembered before the write: a rebuild while it is in flight
            // (a relist) must not free the blocks for the next Node.
            if let Some(cidrs) = &picked {
                self.written
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key.1.clone(), cidrs.clone());
            }
            picked
        };
        let Some(cidrs) = picked else {
            return Ok(None);
        };
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs}});
        match api.patch(&key.1, &params(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                info!(node = %key.1, ?cidrs, "pod CIDRs allocated");
                Ok(None)
            }
            Err(e) => {
                // Not written: the blocks are free again.
                self.written
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key.1);
                let mut with = (*node).clone();
                with.spec.get_or_insert_with(Default::default).pod_cidrs = Some(cidrs);
                self.allocator
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .release(&with);
                Err(e.into())
            }
        }
    }

    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        match change {
            Change::Applied(n) => {
                let has = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.pod_cidrs.as_ref())
                    .is_some_and(|c| !c.is_empty());
                if has {
                    // The cache shows it now: nothing left to remember.
                    let name = n.metadata.name.as_deref().unwrap_or_default();
                    self.written
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(name);
                } else {
                    queue.add(super::informer::key_of(n.as_ref()));
                }
            }
            Change::Deleted(n) => {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                let written = self
                    .written
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(name);
                let mut gone = (**n).clone();
                if let Some(cidrs) = written {
                    gone.spec.get_or_insert_with(Default::default).pod_cidrs = Some(cidrs);
                }
                self.allocator
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .release(&gone)
            }
            Change::Relisted => {
                self.rebuild();
                queue.add_all(self.nodes.keys());
            }
        }
    }
}
