//! The scheduler loop: pending pods are decided one at a time by
//! `sluice_scheduler` (pure) over a [`Cluster`] view kept from the Node and
//! Pod caches, and bound through the Binding subresource, as
//! kube-scheduler's scheduling and binding cycles: a decision is taken
//! with every earlier decision already counted ("assumed"), and the
//! binding is written concurrently while the next pod is decided. A
//! failed binding forgets the assumption and tries the pod again.
//!
//! A pod that fits nowhere gets `PodScheduled=False` with reason
//! `Unschedulable` and kube-scheduler's message, and one `FailedScheduling`
//! Event per new message (the autoscaler reads the condition); it is
//! tried again when a Node changes, or after [`RETRY_UNSCHEDULABLE`].

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Pod};
use sluice_scheduler::{wants_scheduling, Cluster, Decision};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::informer::{key_of, Change, Informer, Key};
use super::queue::{Next, Queue};
use super::LoopError;

/// Upstream's scheduler name, in Events and as the field manager.
pub const SCHEDULER: &str = "default-scheduler";

/// An unschedulable pod is tried again at least this often (upstream's
/// `podMaxInUnschedulablePodsDuration` is 5 min; Sluice's clusters are
/// small and a minute keeps a stuck pod's message fresh).
const RETRY_UNSCHEDULABLE: Duration = Duration::from_secs(60);

/// Bindings written at once while the next pods are decided.
const BINDERS: usize = 64;

pub struct Scheduling {
    pub client: Client,
    pub nodes: Arc<Informer<Node>>,
    pub pods: Arc<Informer<Pod>>,
    pub view: Mutex<Cluster>,
    /// Pods that fit nowhere last time, tried again when a Node changes.
    pub waiting: Mutex<BTreeSet<Key>>,
    /// Pods decided and being bound, until the cache shows them bound: not
    /// decided again meanwhile.
    pub binding: Mutex<HashSet<Key>>,
    pub binders: Arc<Semaphore>,
    pub queue: Arc<Queue>,
}

impl Scheduling {
    pub fn new(
        client: Client,
        nodes: Arc<Informer<Node>>,
        pods: Arc<Informer<Pod>>,
        queue: Arc<Queue>,
    ) -> Self {
        Scheduling {
            client,
            nodes,
            pods,
            view: Mutex::new(Cluster::new()),
            waiting: Mutex::default(),
            binding: Mutex::default(),
            binders: Arc::new(Semaphore::new(BINDERS)),
            queue,
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<Key>> {
        self.binding.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn view(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The view from the caches, after a relist.
    pub fn rebuild(&self) {
        let (nodes, pods) = (self.nodes.all(), self.pods.all());
        let (view, problems) = Cluster::from_objects(
            nodes.iter().map(|n| n.as_ref()),
            pods.iter().map(|p| p.as_ref()),
        );
        for p in problems {
            debug!(error = %p, "scheduler view");
        }
        *self.view() = view;
    }

    pub async fn reconcile(self: &Arc<Self>, key: Key) -> Result<Next, LoopError> {
        let (ns, name) = &key;
        let Some(pod) = self.pods.get(ns, name) else {
            return Ok(None);
        };
        if !wants_scheduling(&pod) || self.in_flight().contains(&key) {
            return Ok(None);
        }
        let decision = sluice_scheduler::schedule(&mut self.view(), &pod);
        match decision {
            Decision::Bind { node } => {
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                self.in_flight().insert(key.clone());
                let permit = self.binders.clone().acquire_owned().await;
                let me = self.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = me.bind(&key, &node).await {
                        debug!(pod = %key.1, node, error = %e, "binding failed; trying again");
                        me.view().remove_pod(&key.0, &key.1);
                        me.in_flight().remove(&key);
                        me.queue.add_after(key, Duration::from_millis(200));
                    }
                });
                Ok(None)
            }
            Decision::Unschedulable { message, .. } => {
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key.clone());
                self.report_unschedulable(&pod, &message).await?;
                Ok(Some(RETRY_UNSCHEDULABLE))
            }
        }
    }

    async fn bind(&self, key: &Key, node: &str) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": key.1, "namespace": key.0},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        let pp = PostParams {
            field_manager: Some(SCHEDULER.into()),
            ..Default::default()
        };
        api.create_subresource::<serde_json::Value, serde_json::Value>(
            "binding", &key.1, &pp, &binding,
        )
        .await
        .map(|_| ())
    }

    /// `PodScheduled=False` and a `FailedScheduling` Event, unless the pod
    /// says so already with this message.
    async fn report_unschedulable(&self, pod: &Pod, message: &str) -> Result<(), LoopError> {
        let said = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
            .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message));
        if said {
            return Ok(());
        }
        let (ns, name) = key_of(pod);
        let now = Timestamp::now().to_string();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": message, "lastProbeTime": null,
            "lastTransitionTime": now}]}});
        let params = PatchParams {
            field_manager: Some(SCHEDULER.into()),
            ..Default::default()
        };
        match api
            .patch_status(&name, &params, &Patch::Strategic(&patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            r => {
                r?;
            }
        }
        let events: Api<sluice_model::k8s::Event> = Api::namespaced(self.client.clone(), &ns);
        let event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
                "uid": pod.metadata.uid},
            "reason": "FailedScheduling", "message": message, "type": "Warning",
            "source": {"component": SCHEDULER}, "reportingComponent": SCHEDULER,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1});
        match serde_json::from_value(event) {
            Ok(ev) => {
                if let Err(e) = events.create(&PostParams::default(), &ev).await {
                    warn!(pod = %name, error = %e, "FailedScheduling event");
                }
            }
            Err(e) => warn!(error = %e, "FailedScheduling event"),
        }
        Ok(())
    }

    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        match change {
            Change::Applied(p) => {
                let key = key_of(p.as_ref());
                if wants_scheduling(p) {
                    queue.add(key);
                } else {
                    self.in_flight().remove(&key);
                    if let Err(e) = self.view().add_pod(p) {
                        debug!(error = %e, "scheduler view");
                    }
                }
            }
            Change::Deleted(p) => {
                let (ns, name) = key_of(p.as_ref());
                self.view().remove_pod(&ns, &name);
                self.in_flight().remove(&(ns, name));
                // A freed node may take a waiting pod.
                self.wake_waiting(queue);
            }
            Change::Relisted => {
                self.rebuild();
                queue.add_all(
                    self.pods
                        .all()
                        .iter()
                        .filter(|p| wants_scheduling(p))
                        .map(|p| key_of(p.as_ref())),
                );
            }
        }
    }

    pub fn on_node(&self, change: &Change<Node>, queue: &Queue) {
        match change {
            Change::Applied(n) => {
                if let Err(e) = self.view().upsert_node(n) {
                    debug!(error = %e, "scheduler view");
                }
            }
            Change::Deleted(n) => {
                self.view().remove_node(&key_of(n.as_ref()).1);
            }
            Change::Relisted => self.rebuild(),
        }
        self.wake_waiting(queue);
    }

    fn wake_waiting(&self, queue: &Queue) {
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
        queue.add_all(waiting);
    }
}
