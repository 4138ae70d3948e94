//! The L4 load-balancer loop (issue 11): for each Service of type
//! LoadBalancer, its `L4LoadBalancer`, `HealthCheck` and (internal, with
//! subsetting on when it was made) per-zone `NetworkEndpointGroup`s; and
//! the shared per-zone `InstanceGroup`s while any LB uses them. The
//! decisions are `plan.rs`'s (pure, over `sluice-subsetting`); this file
//! reads the caches, writes the plan through the API and reports Events.
//!
//! Keys are Services (`namespace`, `name`); the empty key stands for the
//! instance groups, which belong to no Service. A Node wakes every LB and
//! the groups only when what the LBs read of it changed (zone, InternalIPs,
//! exclusions, deletion), not on each heartbeat.

pub(crate) mod inputs;
pub mod plan;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde::Serialize;
use serde_json::{json, Value};
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{EndpointSlice, Node, Service};
use sluice_model::load_balancer::{
    Backends, HealthCheck, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup,
};
use sluice_subsetting::lb_kind::Subsetting;
use tracing::warn;

pub use inputs::NodeFacts;
use inputs::{is_load_balancer, serving_nodes};
use plan::{Existing, Inputs, Plan, Report};

use super::informer::{key_of, Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{LoopError, MANAGER};

/// The label that ties an EndpointSlice to its Service.
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The key of the shared instance groups.
pub fn groups_key() -> Key {
    (String::new(), String::new())
}

pub struct LoadBalancers {
    pub client: Client,
    pub services: Arc<Informer<Service>>,
    pub nodes: Arc<Informer<Node>>,
    pub slices: Arc<Informer<EndpointSlice>>,
    pub clusters: Arc<Informer<Cluster>>,
    pub lbs: Arc<Informer<L4LoadBalancer>>,
    pub hcs: Arc<Informer<HealthCheck>>,
    pub negs: Arc<Informer<NetworkEndpointGroup>>,
    pub groups: Arc<Informer<InstanceGroup>>,
    /// Each Node's facts as last seen, to tell a change that matters from
    /// a heartbeat.
    pub facts: Mutex<HashMap<String, NodeFacts>>,
    /// What each Service's Events already reported (`Plan::reported`),
    /// kept across decisions because the cache may not hold the status
    /// written with them yet.
    pub reported: Mutex<HashMap<Key, BTreeSet<String>>>,
}

/// The cluster's subsetting state: from the `Cluster` named `default`
/// (else the only one). The API server stamps the time it was turned on;
/// an object stored before it did counts from its creation.
pub fn subsetting_of(clusters: &[Arc<Cluster>]) -> Subsetting {
    let cluster = clusters
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("default"))
        .or_else(|| clusters.first().filter(|_| clusters.len() == 1));
    let Some(c) = cluster else {
        return Subsetting::default();
    };
    let since = c
        .status
        .as_ref()
        .and_then(|s| s.l4ilb_subsetting_enabled_since.clone())
        .or_else(|| {
            c.spec
                .l4ilb_subsetting()
                .then(|| c.metadata.creation_timestamp.clone())
                .flatten()
        });
    Subsetting {
        enabled_since: since.map(|t| t.0.into()),
    }
}

fn params() -> PostParams {
    PostParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

/// A status as a merge patch that also clears what is now empty: the
/// types leave empty lists out, and a merge patch keeps what it omits.
fn status_patch<S: Serialize>(status: &S, lists: &[&str]) -> Value {
    let mut v = serde_json::to_value(status).unwrap_or_else(|_| json!({}));
    if let Some(m) = v.as_object_mut() {
        for l in lists {
            m.entry(*l).or_insert_with(|| json!([]));
        }
    }
    json!({ "status": v })
}

/// A deletion that found nothing is done.
async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), LoopError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(|_| ()).map_err(Into::into),
    }
}

/// A status write to an object that went meanwhile is moot.
async fn patch_status<K>(api: &Api<K>, name: &str, patch: &Value) -> Result<(), LoopError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api
        .patch_status(name, &patch_params(), &Patch::Merge(patch))
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        r => r.map(|_| ()).map_err(Into::into),
    }
}

impl LoadBalancers {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        if key == groups_key() {
            return self.reconcile_groups().await;
        }
        let (ns, name) = &key;
        let service = self.services.get(ns, name);
        let lb = self.lbs.get(ns, name);
        let hc = self.hcs.get(ns, name);
        let negs: Vec<Arc<NetworkEndpointGroup>> = self
            .negs
            .in_namespace(ns)
            .into_iter()
            .filter(|n| n.spec.service == *name)
            .collect();
        let neg_refs: Vec<&NetworkEndpointGroup> = negs.iter().map(AsRef::as_ref).collect();
        let nodes: Vec<NodeFacts> = self.nodes.all().iter().map(|n| NodeFacts::of(n)).collect();
        let slices: Vec<Arc<EndpointSlice>> = self
            .slices
            .in_namespace(ns)
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME))
                    .is_some_and(|n| n == name)
            })
            .collect();
        let inputs = Inputs {
            namespace: ns,
            name,
            service: service.as_deref(),
            nodes: &nodes,
            serving: serving_nodes(slices.iter().map(AsRef::as_ref)),
            subsetting: subsetting_of(&self.clusters.all()),
            existing: Existing {
                lb: lb.as_deref(),
                hc: hc.as_deref(),
                negs: &neg_refs,
            },
            reported: &self.reported_of(&key),
            now: Timestamp::now(),
        };
        let mut plan = plan::plan(&inputs);
        let reported = std::mem::take(&mut plan.reported);
        if !plan.is_empty() {
            self.write(ns, name, service.as_deref(), plan).await?;
        }
        self.remember(key, reported);
        Ok(None)
    }

    fn reported_of(&self, key: &Key) -> BTreeSet<String> {
        self.reported
            .lock()
            .map(|r| r.get(key).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Keeps what was reported for `key` once its plan is written (a
    /// failed write reported nothing).
    fn remember(&self, key: Key, reported: BTreeSet<String>) {
        if let Ok(mut r) = self.reported.lock() {
            if reported.is_empty() {
                r.remove(&key);
            } else {
                r.insert(key, reported);
            }
        }
    }

    /// Writes `plan`: the NEGs before the LB that names them, deletions
    /// last (an LB never names a NEG that is not there yet).
    async fn write(
        &self,
        ns: &str,
        name: &str,
        svc: Option<&Service>,
        plan: Plan,
    ) -> Result<(), LoopError> {
        let negs: Api<NetworkEndpointGroup> = Api::namespaced(self.client.clone(), ns);
        let lbs: Api<L4LoadBalancer> = Api::namespaced(self.client.clone(), ns);
        let hcs: Api<HealthCheck> = Api::namespaced(self.client.clone(), ns);
        for n in &plan.create_negs {
            negs.create(&params(), n).await?;
        }
        for n in &plan.update_negs {
            negs.replace(n.metadata.name.as_deref().unwrap_or_default(), &params(), n)
                .await?;
        }
        if let Some(hc) = &plan.create_hc {
            hcs.create(&params(), hc).await?;
        }
        if let Some(status) = &plan.hc_status {
            patch_status(&hcs, name, &status_patch(status, &[])).await?;
        }
        if let Some(lb) = &plan.create_lb {
            lbs.create(&params(), lb).await?;
        }
        if let Some(lb) = &plan.update_lb {
            lbs.replace(name, &params(), lb).await?;
        }
        if let Some(status) = &plan.lb_status {
            let patch = status_patch(status, &["conditions", "warnings"]);
            patch_status(&lbs, name, &patch).await?;
        }
        for n in &plan.delete_negs {
            delete(&negs, n).await?;
        }
        if plan.delete_lb {
            delete(&lbs, name).await?;
        }
        if plan.delete_hc {
            delete(&hcs, name).await?;
        }
        if let Some(svc) = svc {
            for r in &plan.events {
                self.report(ns, svc, r).await;
            }
        }
        Ok(())
    }

    /// A Warning Event on the Service; one that cannot be written is
    /// logged, not retried (the status says the same).
    async fn report(&self, ns: &str, svc: &Service, r: &Report) {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let now = Timestamp::now().to_string();
        let event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Service", "name": name,
                "namespace": ns, "uid": svc.metadata.uid},
            "reason": r.reason, "message": r.message, "type": "Warning",
            "source": {"component": "sluice-loadbalancer-controller"},
            "reportingComponent": "sluice-loadbalancer-controller",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1});
        let events: Api<sluice_model::k8s::Event> = Api::namespaced(self.client.clone(), ns);
        match serde_json::from_value(event) {
            Ok(ev) => {
                if let Err(e) = events.create(&PostParams::default(), &ev).await {
                    warn!(service = %name, error = %e, reason = r.reason, "load balancer event");
                }
            }
            Err(e) => warn!(error = %e, "load balancer event"),
        }
    }

    async fn reconcile_groups(&self) -> Result<Next, LoopError> {
        let needed = self
            .lbs
            .all()
            .iter()
            .any(|lb| lb.spec.backends == Backends::InstanceGroups);
        let nodes: Vec<NodeFacts> = self.nodes.all().iter().map(|n| NodeFacts::of(n)).collect();
        let stored = self.groups.all();
        let refs: Vec<&InstanceGroup> = stored.iter().map(AsRef::as_ref).collect();
        let plan = plan::plan_groups(&nodes, needed, &refs);
        if plan.is_empty() {
            return Ok(None);
        }
        let api: Api<InstanceGroup> = Api::all(self.client.clone());
        for g in &plan.create {
            api.create(&params(), g).await?;
        }
        for g in &plan.update {
            api.replace(g.metadata.name.as_deref().unwrap_or_default(), &params(), g)
                .await?;
        }
        for (name, status) in &plan.status {
            patch_status(&api, name, &status_patch(status, &["warnings"])).await?;
        }
        for name in &plan.delete {
            delete(&api, name).await?;
        }
        Ok(None)
    }

    /// Every Service an LB is (or was) made for, and the groups.
    pub fn all_keys(&self) -> Vec<Key> {
        let mut keys: BTreeSet<Key> = self.lbs.keys().into_iter().collect();
        keys.extend(
            self.services
                .all()
                .iter()
                .filter(|s| is_load_balancer(s))
                .map(|s| key_of(s.as_ref())),
        );
        keys.insert(groups_key());
        keys.into_iter().collect()
    }

    pub fn on_service(&self, change: &Change<Service>, queue: &Queue) {
        match change {
            Change::Applied(s) | Change::Deleted(s) => {
                let key = key_of(s.as_ref());
                // Only LoadBalancers, and Services that had one.
                if is_load_balancer(s) || self.lbs.get(&key.0, &key.1).is_some() {
                    queue.add(key);
                }
            }
            Change::Relisted => queue.add_all(self.all_keys()),
        }
    }

    /// One of the loop's own kinds changed (its own write, or someone
    /// else's, which is put back): its Service is decided again.
    pub fn on_owned<K: kube::Resource>(
        &self,
        change: &Change<K>,
        queue: &Queue,
        service: fn(&K) -> String,
    ) {
        match change {
            Change::Applied(o) | Change::Deleted(o) => {
                let ns = o.meta().namespace.clone().unwrap_or_default();
                queue.add((ns, service(o)));
            }
            Change::Relisted => queue.add_all(self.all_keys()),
        }
    }

    pub fn on_lb(&self, change: &Change<L4LoadBalancer>, queue: &Queue) {
        self.on_owned(change, queue, |lb| lb.spec.service.clone());
        // Whether instance groups are needed may have changed.
        queue.add(groups_key());
    }

    pub fn on_group(&self, _: &Change<InstanceGroup>, queue: &Queue) {
        queue.add(groups_key());
    }

    pub fn on_slice(&self, change: &Change<EndpointSlice>, queue: &Queue) {
        match change {
            Change::Applied(s) | Change::Deleted(s) => queue.add_all(
                super::endpoints::service_of(s).filter(|(ns, n)| self.lbs.get(ns, n).is_some()),
            ),
            Change::Relisted => queue.add_all(self.all_keys()),
        }
    }

    pub fn on_cluster(&self, _: &Change<Cluster>, queue: &Queue) {
        queue.add_all(self.all_keys());
    }

    /// A Node whose facts changed wakes every LB and the groups.
    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        let changed = {
            let mut facts = self.facts.lock().unwrap_or_else(|p| p.into_inner());
            match change {
                Change::Applied(n) => {
                    let f = NodeFacts::of(n);
                    facts.insert(f.name.clone(), f.clone()) != Some(f)
                }
                Change::Deleted(n) => {
                    facts.remove(n.metadata.name.as_deref().unwrap_or_default());
                    true
                }
                Change::Relisted => {
                    *facts = self
                        .nodes
                        .all()
                        .iter()
                        .map(|n| {
                            let f = NodeFacts::of(n);
                            (f.name.clone(), f)
                        })
                        .collect();
                    true
                }
            }
        };
        if changed {
            queue.add_all(self.all_keys());
        }
    }
}
