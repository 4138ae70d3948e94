//! The scheduler loop: pending pods are decided one at a time by
//! `sluice_scheduler` (pure) over a [`Cluster`] view kept from the Node and
//! Pod caches, and bound through the Binding subresource, as
//! kube-scheduler's scheduling and binding cycles: a decision is taken
//! with every earlier decision already counted ("assumed"), and the
//! binding is written concurrently while the next pod is decided. A
//! failed binding forgets the assumption and tries the pod again.
//!
//! A pod that fits nowhere gets `PodScheduled=False` with reason
//! `Unschedulable` and kube-scheduler's message (the autoscaler reads the
//! condition), and a `FailedScheduling` Event at most once per
//! [`EVENT_EVERY`] per pod (upstream's event correlator aggregates and
//! rate-limits them too). Those writes run beside the decisions, as the
//! bindings do, so a backlog of unschedulable pods does not hold back the
//! ones that fit. It is tried again when a Node changes, but not before
//! its backoff ([`backoff`], upstream's 1 s doubling to 10 s: a storm of
//! Node changes is not a storm of attempts and status writes), or after
//! [`RETRY_UNSCHEDULABLE`]. Its own status writes do not wake it: only a
//! change of its spec or labels does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Bindings written at once while the next pods are decided. Upstream
/// bounds them only by its client's rate; here a bind's latency under
/// load (the API's queueing and the store's group commit, tens of ms) with
/// 64 in flight held the loop to a few hundred binds a second while the
/// controller had CPU to spare; more in flight make bigger store batches.
const BINDERS: usize = 256;

/// Unschedulable reports (a status patch, maybe an Event) written at once.
const REPORTERS: usize = 16;

/// A pod's `FailedScheduling` Events are at least this far apart.
const EVENT_EVERY: Duration = Duration::from_secs(60);

/// Upstream's `podInitialBackoffDuration` and `podMaxBackoffDuration`.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// How long a pod that failed `failures` times in a row waits before it is
/// tried again on a cluster change: 1 s, doubled per failure, at most 10 s.
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(BACKOFF_MAX)
}

/// A pod that fit nowhere at its last attempt.
pub struct Waiting {
    /// The pod as it was decided: a change to its spec or labels may make
    /// it fit, any other update (its own status) does not.
    pub pod: Arc<Pod>,
    /// Failed attempts in a row, for the backoff.
    pub failures: u32,
    pub last_attempt: Instant,
    /// The last `FailedScheduling` Event written for it.
    pub last_event: Option<Instant>,
}

/// Whether an update from `old` to `new` can change where the pod fits.
fn may_fit_now(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec || old.metadata.labels != new.metadata.labels
}

pub struct Scheduling {
    pub client: Client,
    pub nodes: Arc<Informer<Node>>,
    pub pods: Arc<Informer<Pod>>,
    pub view: Mutex<Cluster>,
    /// Pods that fit nowhere last time, tried again when a Node changes
    /// (after their backoff), forgotten when bound or deleted.
    pub waiting: Mutex<HashMap<Key, Waiting>>,
    /// Those of `waiting` not queued yet: what the next cluster change
    /// wakes. Apart, so the 5 000 Node changes after the first wake do not
    /// each walk a backlog of 50 000.
    pub parked: Mutex<HashSet<Key>>,
    /// Pods decided and being bound, until the cache shows them bound: not
    /// decided again meanwhile.
    pub binding: Mutex<HashSet<Key>>,
    pub binders: Arc<Semaphore>,
    pub reporters: Arc<Semaphore>,
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
            parked: Mutex::default(),
            binding: Mutex::default(),
            binders: Arc::new(Semaphore::new(BINDERS)),
            reporters: Arc::new(Semaphore::new(REPORTERS)),
            queue,
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<Key>> {
        self.binding.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn parked(&self) -> std::sync::MutexGuard<'_, HashSet<Key>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
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
                self.waiting().remove(&key);
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
                let now = Instant::now();
                // A pod that says so already (its message unchanged) needs
                // no write, as upstream skips an unchanged condition.
                let report = !says_unschedulable(&pod, &message);
                let event = {
                    let mut waiting = self.waiting();
                    let w = waiting.entry(key.clone()).or_insert(Waiting {
                        pod: pod.clone(),
                        failures: 0,
                        last_attempt: now,
                        last_event: None,
                    });
                    w.pod = pod.clone();
                    w.failures = w.failures.saturating_add(1);
                    w.last_attempt = now;
                    let event = report
                        && w.last_event
                            .is_none_or(|at| now.duration_since(at) >= EVENT_EVERY);
                    if event {
                        w.last_event = Some(now);
                    }
                    event
                };
                self.parked().insert(key.clone());
                if report {
                    // Beside the decisions, as the bindings: the next pod
                    // need not wait for this one's writes.
                    let permit = self.reporters.clone().acquire_owned().await;
                    let me = self.clone();
                    tokio::spawn(async move {
                        let _permit = permit;
                        if let Err(e) = me.report_unschedulable(&pod, &message, event).await {
                            debug!(pod = %key.1, error = %e, "unschedulable status");
                        }
                    });
                }
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

    /// `PodScheduled=False` with `message`, and a `FailedScheduling`
    /// Event when `event`. The patch names the pod's resourceVersion as
    /// decided: a pod bound or changed since (a 409) keeps what it has,
    /// so a late report never marks a bound pod unscheduled, and is
    /// decided again.
    async fn report_unschedulable(
        &self,
        pod: &Pod,
        message: &str,
        event: bool,
    ) -> Result<(), LoopError> {
        let (ns, name) = key_of(pod);
        let now = Timestamp::now().to_string();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({"metadata": {"resourceVersion": pod.metadata.resource_version},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
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
            // Changed since it was decided (bound, or the cache was behind):
            // decided again on what it is now.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                self.queue.add((ns, name));
                return Ok(());
            }
            r => {
                r?;
            }
        }
        if !event {
            return Ok(());
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
                    if let Some(w) = self.waiting().get_mut(&key) {
                        if !may_fit_now(&w.pod, p) {
                            // Its own status write, say: nothing that
                            // changes where it fits; a Node change or the
                            // retry timer queues it. The newer object is
                            // kept so the older one can be freed.
                            w.pod = p.clone();
                            return;
                        }
                    }
                    queue.add(key);
                } else {
                    self.waiting().remove(&key);
                    self.in_flight().remove(&key);
                    if let Err(e) = self.view().add_pod(p) {
                        debug!(error = %e, "scheduler view");
                    }
                }
            }
            Change::Deleted(p) => {
                let (ns, name) = key_of(p.as_ref());
                self.view().remove_pod(&ns, &name);
                let key = (ns, name);
                self.waiting().remove(&key);
                self.in_flight().remove(&key);
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

    /// Queues every parked pod whose backoff is over, and the others when
    /// it will be.
    fn wake_waiting(&self, queue: &Queue) {
        let parked = std::mem::take(&mut *self.parked());
        if parked.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut later: Vec<(Duration, Key)> = Vec::new();
        {
            let waiting = self.waiting();
            for key in parked {
                // Gone from `waiting`: bound or deleted meanwhile.
                let Some(w) = waiting.get(&key) else {
                    continue;
                };
                let due = w.last_attempt + backoff(w.failures);
                match due.checked_duration_since(now) {
                    Some(d) if !d.is_zero() => later.push((d, key)),
                    _ => queue.add(key),
                }
            }
        }
        if later.is_empty() {
            return;
        }
        // One timer for the lot, not one per pod: a backlog of 50 000.
        later.sort_unstable_by_key(|(d, _)| *d);
        let queue = self.queue.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for (d, key) in later {
                tokio::time::sleep_until(start + d).await;
                queue.add(key);
            }
        });
    }
}

/// Whether the pod already says it is unschedulable, with `message`.
fn says_unschedulable(pod: &Pod, message: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_ten() {
        let got: Vec<u64> = (0..7).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(got, [1, 1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn only_spec_or_label_changes_may_make_a_pod_fit() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}))
        .expect("pod");
        let mut status = pod.clone();
        status.metadata.resource_version = Some("9".into());
        status.status = serde_json::from_value(json!({"conditions": [
            {"type": "PodScheduled", "status": "False", "message": "m"}]}))
        .expect("status");
        assert!(!may_fit_now(&pod, &status));
        let mut labels = pod.clone();
        labels.metadata.labels = None;
        assert!(may_fit_now(&pod, &labels));
        let mut spec = pod.clone();
        if let Some(s) = spec.spec.as_mut() {
            s.tolerations = Some(vec![Default::default()]);
        }
        assert!(may_fit_now(&pod, &spec));
        assert!(says_unschedulable(&status, "m"));
        assert!(!says_unschedulable(&status, "other"));
        assert!(!says_unschedulable(&pod, "m"));
    }
}
