//! The EndpointSlice loop: each Service's slices as
//! `sluice_lifecycle::endpoint_slices` decides them (pure) from the cached
//! Services, pods, Nodes and slices, written through the API. A pod's
//! change wakes the Services of its namespace whose selector matches it
//! (before or after the change: a relabelled pod leaves one Service and
//! joins another). A Node whose zone label changes wakes the Services
//! with endpoints on it (each endpoint carries its node's zone).
//!
//! Slices are created with `generateName` and planned against the cache,
//! so a Service's sync first waits for this loop's own last writes to be
//! back in the cache (`endpoint_slices::tracker`, as upstream's
//! endpointSliceTracker): planning before that made a second slice and
//! split the Service's endpoints over the two.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use sluice_lifecycle::endpoint_slices::tracker::{Freshness, Tracker};
use sluice_model::k8s::{EndpointSlice, Node, Pod, Service};
use tracing::warn;

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{LoopError, MANAGER};

/// Whether a Service's `selector` takes `pod` (every pair present).
fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The label that ties a slice to its Service.
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The Service a slice belongs to (its label), if it names one.
pub fn service_of(slice: &EndpointSlice) -> Option<Key> {
    let svc = slice.metadata.labels.as_ref()?.get(SERVICE_NAME)?;
    Some((
        slice.metadata.namespace.clone().unwrap_or_default(),
        svc.clone(),
    ))
}

/// The label whose value each endpoint on the node carries as its zone.
const ZONE: &str = "topology.kubernetes.io/zone";

fn zone_of(node: &Node) -> Option<String> {
    node.metadata.labels.as_ref()?.get(ZONE).cloned()
}

pub struct EndpointSlices {
    pub client: Client,
    pub services: Arc<Informer<Service>>,
    pub pods: Arc<Informer<Pod>>,
    pub nodes: Arc<Informer<Node>>,
    pub slices: Arc<Informer<EndpointSlice>>,
    /// Each Node's zone as last seen, to tell a relabel from the many
    /// Node changes that are only heartbeats.
    pub zones: Mutex<HashMap<String, Option<String>>>,
    /// This loop's writes not yet back in the slice cache.
    pub tracker: Mutex<Tracker>,
}

/// When a Service whose last writes are not cached yet is looked at again
/// (their arrival wakes it too; this is the floor).
const STALE_RETRY: Duration = Duration::from_millis(200);

impl EndpointSlices {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let (ns, name) = &key;
        // A deleted Service's slices go with it (their owner reference),
        // by the deletion's garbage collection; nothing to publish.
        let Some(svc) = self.services.get(ns, name) else {
            self.tracker().forget(&key);
            return Ok(None);
        };
        // Only the pods the selector takes are copied out of the cache.
        let selector = svc
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        let pods = super::workloads::relevant(&self.pods.in_namespace(ns), |p| {
            !selector.is_empty() && selects(&selector, p)
        });
        // Only the selected pods' Nodes (their zones): copying all of a
        // large cluster's Nodes for each Service woken was most of the
        // loop's work.
        let on: BTreeSet<&str> = pods
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
            .collect();
        let nodes: Vec<Node> = on
            .into_iter()
            .filter_map(|n| self.nodes.get("", n))
            .map(|n| (*n).clone())
            .collect();
        let slices: Vec<EndpointSlice> = self
            .slices
            .in_namespace(ns)
            .iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME))
                    .is_some_and(|n| n == name)
            })
            .map(|s| (**s).clone())
            .collect();
        match self.tracker().freshness(&key, &slices, Instant::now()) {
            Freshness::Fresh => {}
            Freshness::Stale => return Ok(Some(STALE_RETRY)),
            Freshness::GaveUp => warn!(
                ns = %ns, service = %name,
                "slice writes not seen in the cache in time; syncing on what it holds"
            ),
        }
        let plan = sluice_lifecycle::endpoint_slices::reconcile(&svc, &pods, &nodes, &slices)?;
        if plan.is_empty() {
            return Ok(None);
        }
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        for s in &plan.create {
            let made = api.create(&pp, s).await?;
            self.tracker().written(&key, &made, Instant::now());
        }
        for s in &plan.update {
            let name = s.metadata.name.clone().unwrap_or_default();
            let made = api.replace(&name, &pp, s).await?;
            self.tracker().written(&key, &made, Instant::now());
        }
        for name in &plan.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
            let uid = slices
                .iter()
                .find(|s| s.metadata.name.as_ref() == Some(name))
                .and_then(|s| s.metadata.uid.as_deref());
            if let Some(uid) = uid {
                self.tracker().deleted(&key, uid, Instant::now());
            }
        }
        Ok(None)
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn selecting(&self, pod: &Pod) -> Vec<Key> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        self.services.keys_in_namespace(&ns, |s| {
            s.spec
                .as_ref()
                .and_then(|sp| sp.selector.as_ref())
                .is_some_and(|sel| !sel.is_empty() && selects(sel, pod))
        })
    }

    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        match change {
            Change::Applied(p) | Change::Deleted(p) => queue.add_all(self.selecting(p)),
            Change::Relisted => queue.add_all(self.services.keys()),
        }
    }

    /// A slice changed by someone else (or deleted) is put back; one of
    /// this loop's own writes arriving lets its Service sync again.
    pub fn on_slice(&self, change: &Change<EndpointSlice>, queue: &Queue) {
        match change {
            Change::Applied(s) => queue.add_all(service_of(s)),
            Change::Deleted(s) => {
                if let (Some(svc), Some(uid)) = (service_of(s), s.metadata.uid.as_deref()) {
                    // Whoever deleted it, it is not coming back.
                    self.tracker().gone(&svc, uid);
                }
                queue.add_all(service_of(s))
            }
            Change::Relisted => queue.add_all(self.services.keys()),
        }
    }

    /// A node's zone is in every endpoint on it: a relabel wakes the
    /// Services with endpoints there (a heartbeat, the same zone, does not).
    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        let relabelled = {
            let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
            match change {
                Change::Applied(n) => {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    let zone = zone_of(n);
                    match zones.insert(name.clone(), zone.clone()) {
                        Some(before) if before != zone => Some(name),
                        _ => None,
                    }
                }
                Change::Deleted(n) => {
                    zones.remove(n.metadata.name.as_deref().unwrap_or_default());
                    None
                }
                Change::Relisted => {
                    *zones = self
                        .nodes
                        .all()
                        .iter()
                        .map(|n| (n.metadata.name.clone().unwrap_or_default(), zone_of(n)))
                        .collect();
                    queue.add_all(self.services.keys());
                    None
                }
            }
        };
        if let Some(node) = relabelled {
            queue.add_all(self.services_on(&node));
        }
    }

    /// The Services whose slices have an endpoint on `node`.
    fn services_on(&self, node: &str) -> BTreeSet<Key> {
        self.slices
            .all()
            .iter()
            .filter(|s| {
                s.endpoints
                    .iter()
                    .flatten()
                    .any(|e| e.node_name.as_deref() == Some(node))
            })
            .filter_map(|s| {
                let svc = s.metadata.labels.as_ref()?.get(SERVICE_NAME)?;
                Some((
                    s.metadata.namespace.clone().unwrap_or_default(),
                    svc.clone(),
                ))
            })
            .collect()
    }
}
