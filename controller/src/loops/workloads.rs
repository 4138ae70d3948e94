//! The ReplicaSet and Deployment loops: the decisions are
//! `sluice_workloads`' (pure); this file feeds them the cached objects and
//! makes their writes through the API, as kube-controller-manager does.
//!
//! A ReplicaSet's pods are created with `generateName`, so a sync that ran
//! before its own creations were back in the cache would create them
//! again. As upstream, each ReplicaSet carries "expectations": the pods it
//! created or deleted and has not yet seen come back; its next sync waits
//! for them (or for five minutes, upstream's bound, in case a watch event
//! was lost): `sluice_workloads::replica_set::expectations`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Deployment, Pod, ReplicaSet};
use sluice_model::policy::disruption::Selector;
use sluice_workloads::deployment::{self, ReplicaSetAction};
use sluice_workloads::replica_set::expectations::{Expectations, Seen};
use sluice_workloads::replica_set::{self, PodAction};

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::{owner_of, requeue, LoopError, MANAGER};

pub struct ReplicaSets {
    pub client: Client,
    pub sets: Arc<Informer<ReplicaSet>>,
    pub pods: Arc<Informer<Pod>>,
    expected: Mutex<Expectations<Key>>,
}

impl ReplicaSets {
    pub fn new(client: Client, sets: Arc<Informer<ReplicaSet>>, pods: Arc<Informer<Pod>>) -> Self {
        ReplicaSets {
            client,
            sets,
            pods,
            expected: Mutex::default(),
        }
    }

    fn expected(&self) -> std::sync::MutexGuard<'_, Expectations<Key>> {
        self.expected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the writes of the last sync of `key` are all visible.
    fn satisfied(&self, key: &Key) -> bool {
        let ns = &key.0;
        let seen = |name: &str| match self.pods.get(ns, name) {
            None => Seen::Absent,
            Some(p) if p.metadata.deletion_timestamp.is_some() => Seen::Deleting,
            Some(_) => Seen::Present,
        };
        self.expected().satisfied(key, seen, Instant::now())
    }

    fn expect(&self, key: &Key, created: Vec<String>, deleted: Vec<String>) {
        self.expected()
            .expect(key, created, deleted, Instant::now());
    }

    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let (ns, name) = &key;
        let Some(rs) = self.sets.get(ns, name) else {
            self.expected().forget(&key);
            return Ok(None);
        };
        if !self.satisfied(&key) {
            return Ok(Some(Duration::from_millis(200)));
        }
        // Only the pods the decision can touch are copied out of the cache:
        // its own, and orphans its selector takes (a namespace may hold
        // 100 000 pods; copying them all per sync cost gigabytes).
        let selector = Selector::parse(&rs.spec.selector).ok();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let pods = relevant(&self.pods.in_namespace(ns), |p| {
            match controller_uid(&p.metadata) {
                Some(owner) => owner == uid,
                None => selector.as_ref().is_some_and(|s| takes(s, &p.metadata)),
            }
        });
        let plan = replica_set::reconcile(&rs, &pods, Timestamp::now())?;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        let (mut created, mut deleted) = (Vec::new(), Vec::new());
        let mut creations = Vec::new();
        let mut first_error = None;
        for action in plan.actions {
            let done = match action {
                PodAction::Create(pod) => {
                    creations.push(*pod);
                    Ok(())
                }
                PodAction::Delete { name, uid } => {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    let r = api.delete(&name, &dp).await.map(|_| ());
                    deleted.push(name);
                    ignore_gone(r)
                }
                PodAction::Adopt {
                    name,
                    uid,
                    owner_references,
                }
                | PodAction::Release {
                    name,
                    uid,
                    owner_references,
                } => {
                    let patch =
                        json!({"metadata": {"uid": uid, "ownerReferences": owner_references}});
                    let params = PatchParams {
                        field_manager: Some(MANAGER.into()),
                        ..Default::default()
                    };
                    ignore_gone(
                        api.patch(&name, &params, &Patch::Merge(&patch))
                            .await
                            .map(|_| ()),
                    )
                }
            };
            if let Err(e) = done {
                first_error.get_or_insert(e);
            }
        }
        // Slow start, as upstream: batches of 1, 2, 4, ... so a template
        // every create refuses costs one request, not hundreds.
        let mut pending = creations.into_iter();
        'batches: for size in replica_set::slow_start_batches(pending.len()) {
            let batch: Vec<Pod> = pending.by_ref().take(size).collect();
            let results = futures::future::join_all(batch.iter().map(|p| api.create(&pp, p))).await;
            for r in results {
                match r {
                    Ok(p) => created.push(p.metadata.name.unwrap_or_default()),
                    Err(e) => {
                        first_error.get_or_insert(e);
                        break 'batches;
                    }
                }
            }
        }
        self.expect(&key, created, deleted);
        if rs.status.as_ref() != Some(&plan.status) {
            let sets: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
            let patch = json!({"status": plan.status});
            let params = PatchParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            ignore_gone(
                sets.patch_status(name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            )?;
        }
        if let Some(e) = first_error {
            return Err(e.into());
        }
        Ok(requeue(plan.requeue_after))
    }

    /// The ReplicaSets to look at after a pod changed: its controller.
    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        match change {
            Change::Applied(p) | Change::Deleted(p) => {
                if let Some(owner) = owner_of(&p.metadata, "ReplicaSet") {
                    queue.add(owner);
                } else {
                    // An orphan may be adopted by any set of its namespace.
                    let ns = p.metadata.namespace.clone().unwrap_or_default();
                    for rs in self.sets.in_namespace(&ns) {
                        queue.add(super::informer::key_of(rs.as_ref()));
                    }
                }
            }
            Change::Relisted => queue.add_all(self.sets.keys()),
        }
    }
}

pub struct Deployments {
    pub client: Client,
    pub deployments: Arc<Informer<Deployment>>,
    pub sets: Arc<Informer<ReplicaSet>>,
    pub pods: Arc<Informer<Pod>>,
}

impl Deployments {
    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let (ns, name) = &key;
        let Some(d) = self.deployments.get(ns, name) else {
            return Ok(None);
        };
        let sets: Vec<ReplicaSet> = self
            .sets
            .in_namespace(ns)
            .iter()
            .map(|s| (**s).clone())
            .collect();
        // The pods of this Deployment's ReplicaSets, and any its selector
        // takes; not the whole namespace.
        let owned: std::collections::HashSet<String> = sets
            .iter()
            .filter(|s| controller_uid(&s.metadata).as_deref() == d.metadata.uid.as_deref())
            .filter_map(|s| s.metadata.uid.clone())
            .collect();
        let selector = Selector::parse(&d.spec.selector).ok();
        let pods = relevant(&self.pods.in_namespace(ns), |p| {
            controller_uid(&p.metadata).is_some_and(|u| owned.contains(&u))
                || selector.as_ref().is_some_and(|s| takes(s, &p.metadata))
        });
        let plan = deployment::reconcile(&d, &sets, &pods, Timestamp::now())?;
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        for action in plan.actions {
            match action {
                ReplicaSetAction::Create(rs) => match api.create(&pp, &rs).await {
                    // Made by an earlier sync this cache had not seen yet.
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    r => {
                        r?;
                    }
                },
                ReplicaSetAction::Update(rs) => {
                    let name = rs.metadata.name.clone().unwrap_or_default();
                    ignore_gone(api.replace(&name, &pp, &rs).await.map(|_| ()))?;
                }
                ReplicaSetAction::Delete { name, uid } => {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    ignore_gone(api.delete(&name, &dp).await.map(|_| ()))?;
                }
            }
        }
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        if let Some(rev) = &plan.revision {
            let patch = json!({"metadata": {"annotations": {deployment::REVISION: rev}}});
            ignore_gone(
                deployments
                    .patch(name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            )?;
        }
        if d.status.as_ref() != Some(&plan.status) {
            let patch = json!({"status": plan.status});
            ignore_gone(
                deployments
                    .patch_status(name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            )?;
        }
        Ok(requeue(plan.requeue_after))
    }

    pub fn on_set(&self, change: &Change<ReplicaSet>, queue: &Queue) {
        match change {
            Change::Applied(s) | Change::Deleted(s) => {
                if let Some(owner) = owner_of(&s.metadata, "Deployment") {
                    queue.add(owner);
                } else {
                    let ns = s.metadata.namespace.clone().unwrap_or_default();
                    for d in self.deployments.in_namespace(&ns) {
                        queue.add(super::informer::key_of(d.as_ref()));
                    }
                }
            }
            Change::Relisted => queue.add_all(self.deployments.keys()),
        }
    }

    /// A pod's readiness changes its Deployment's status: through its
    /// ReplicaSet's owner.
    pub fn on_pod(&self, change: &Change<Pod>, queue: &Queue) {
        if let Change::Applied(p) | Change::Deleted(p) = change {
            if let Some((ns, rs)) = owner_of(&p.metadata, "ReplicaSet") {
                if let Some(set) = self.sets.get(&ns, &rs) {
                    if let Some(owner) = owner_of(&set.metadata, "Deployment") {
                        queue.add(owner);
                    }
                }
            }
        }
    }
}

/// The uid of the controller (owner with `controller: true`) of `meta`.
fn controller_uid(meta: &sluice_model::k8s::ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Whether a compiled selector takes an object by its labels.
fn takes(selector: &Selector, meta: &sluice_model::k8s::ObjectMeta) -> bool {
    match &meta.labels {
        Some(l) => selector.matches(l),
        None => selector.matches(&Default::default()),
    }
}

/// Copies of the cached objects `keep` chooses.
pub(super) fn relevant<K: Clone>(cached: &[Arc<K>], keep: impl Fn(&K) -> bool) -> Vec<K> {
    cached
        .iter()
        .filter(|o| keep(o))
        .map(|o| (**o).clone())
        .collect()
}

/// A write to an object that is gone (or whose uid changed) is no error:
/// the next sync sees the world as it is.
fn ignore_gone(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}
