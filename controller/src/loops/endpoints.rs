//! The EndpointSlice loop: each Service's slices as
//! `sluice_lifecycle::endpoint_slices` decides them (pure) from the cached
//! Services, pods, Nodes and slices, written through the API. A pod's
//! change wakes the Services of its namespace whose selector matches it
//! (before or after the change: a relabelled pod leaves one Service and
//! joins another).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use sluice_model::k8s::{EndpointSlice, Node, Pod, Service};

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

pub struct EndpointSlices {
    pub client: Client,
    pub services: Arc<Informer<Service>>,
    pub pods: Arc<Informer<Pod>>,
    pub nodes: Arc<Informer<Node>>,
    pub slices: Arc<Informer<EndpointSlice>>,
}

impl EndpointSlices {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let (ns, name) = &key;
        // A deleted Service's slices go with it (their owner reference),
        // by the deletion's garbage collection; nothing to publish.
        let Some(svc) = self.services.get(ns, name) else {
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
        let nodes: Vec<Node> = self.nodes.all().iter().map(|n| (**n).clone()).collect();
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
            api.create(&pp, s).await?;
        }
        for s in &plan.update {
            let name = s.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &pp, s).await?;
        }
        for name in &plan.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
        }
        Ok(None)
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

    /// A slice changed by someone else (or deleted) is put back.
    pub fn on_slice(&self, change: &Change<EndpointSlice>, queue: &Queue) {
        match change {
            Change::Applied(s) | Change::Deleted(s) => {
                let ns = s.metadata.namespace.clone().unwrap_or_default();
                if let Some(svc) = s.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME)) {
                    queue.add((ns, svc.clone()));
                }
            }
            Change::Relisted => queue.add_all(self.services.keys()),
        }
    }

    /// A node's zone is in every endpoint on it. Only a relist resyncs
    /// every Service: a zone relabel of a live node (rare, and every
    /// heartbeat is a Node change) reaches a slice with the next change of
    /// its Service or pods.
    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        if let Change::Relisted = change {
            queue.add_all(self.services.keys());
        }
    }
}
