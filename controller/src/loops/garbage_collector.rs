//! The garbage collector loop: every object of every kind that can own or
//! be owned is read from the caches, `sluice_lifecycle::garbage_collector`
//! (pure) decides, and this file makes the writes through the API.
//!
//! The decision is made over the whole graph at once (one key), woken by
//! any change of a watched kind and made at most once a second, so a burst
//! of changes is one pass and a pass that cannot act does not spin.
//!
//! The caches may lag: an owner just created may not be listed yet. So,
//! as upstream's `attemptToDeleteItem`, nothing is deleted or detached on
//! the caches' word alone: each owner a delete or a detach rests on is
//! read live first, and only a 404, another uid, or the owner's own
//! deletion lets the write go. Deletes carry the dependent's uid as a
//! precondition, patches its uid and resourceVersion.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use kube::Client;
use serde_json::{json, Value};
use sluice_lifecycle::garbage_collector::{self as gc, Action, Node, ObjectRef, Policy};
use sluice_model::k8s::{Event, ObjectMeta, OwnerReference};
use sluice_model::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use tracing::{debug, info};

use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::spec::{LoopSpec, Watched};
use super::wiring::Caches;
use super::{LoopError, MANAGER};
use crate::api::resources::{Resource, RESOURCES};

/// The loop's one key: the whole graph.
fn graph_key() -> Key {
    (String::new(), "graph".to_owned())
}

/// The shortest time between two passes.
const MIN_GAP: Duration = Duration::from_secs(1);

/// A pass that left a write undone (an owner the caches missed, read
/// live) looks again after this long, when the caches have caught up.
const RECHECK: Duration = Duration::from_secs(5);

/// Kinds whose content no loop reads: only their metadata is cached.
pub trait MetadataOnly {
    fn drop_content(&mut self);
}

impl MetadataOnly for ConfigMap {
    fn drop_content(&mut self) {
        self.data = None;
        self.binary_data = None;
    }
}

impl MetadataOnly for Secret {
    fn drop_content(&mut self) {
        // Secrets are never kept in the controller's memory beyond this.
        self.data = None;
        self.string_data = None;
    }
}

impl MetadataOnly for Event {
    fn drop_content(&mut self) {
        self.message = None;
        self.related = None;
        self.series = None;
    }
}

/// Keeps of `o` only what the garbage collector and the namespace loop
/// read (its metadata); an informer's trim.
pub fn metadata_only<K: MetadataOnly + kube::Resource>(o: &mut K) {
    o.drop_content();
    // Kubectl's last-applied copy repeats the content (a Secret's data).
    if let Some(a) = o.meta_mut().annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// One watched kind, as the graph reads it.
trait Source: Send + Sync {
    fn resource(&self) -> &'static Resource;
    /// Each cached object's metadata, given to `f`.
    fn each(&self, f: &mut dyn FnMut(&ObjectMeta));
}

struct Cached<K> {
    inf: Arc<Informer<K>>,
    res: &'static Resource,
}

impl<K: Watched> Source for Cached<K> {
    fn resource(&self) -> &'static Resource {
        self.res
    }

    fn each(&self, f: &mut dyn FnMut(&ObjectMeta)) {
        for o in self.inf.all() {
            f(o.meta());
        }
    }
}

/// The served resource (not a subresource) of `api_version` and `kind`.
pub fn served(api_version: &str, kind: &str) -> Option<&'static Resource> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    RESOURCES.iter().find(|r| {
        r.group == group && r.version == version && r.kind == kind && !r.name.contains('/')
    })
}

fn api_version(r: &Resource) -> String {
    if r.group.is_empty() {
        r.version.to_owned()
    } else {
        format!("{}/{}", r.group, r.version)
    }
}

/// A dynamic client of `r` in `namespace` (ignored for cluster-scoped
/// kinds).
pub fn dynamic(client: &Client, r: &Resource, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: r.group.to_owned(),
        version: r.version.to_owned(),
        api_version: api_version(r),
        kind: r.kind.to_owned(),
        plural: r.name.to_owned(),
    };
    match namespace {
        Some(ns) if r.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// What the writes need of an object beyond its graph node.
struct Held {
    res: &'static Resource,
    resource_version: Option<String>,
    owner_references: Vec<OwnerReference>,
    finalizers: Vec<String>,
}

/// An owner as a live read finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Live {
    /// 404, or another object (uid) by that name.
    Gone,
    /// Exists and is being deleted; `foreground`: waiting for its
    /// dependents.
    Deleting { foreground: bool },
    /// Exists, not being deleted (or of a kind not served: never acted on).
    Present,
}

pub struct GarbageCollector {
    client: Client,
    sources: Vec<Box<dyn Source>>,
    last_pass: Mutex<Option<Instant>>,
}

impl GarbageCollector {
    fn source<K: Watched>(&mut self, inf: &Arc<Informer<K>>) {
        let kind = K::kind(&());
        let version = K::api_version(&());
        if let Some(res) = served(&version, &kind) {
            self.sources.push(Box::new(Cached {
                inf: inf.clone(),
                res,
            }));
        }
    }

    /// The graph: every object that owns, is owned, or is being deleted
    /// with a collector's finalizer (the others cannot be acted on), and
    /// what the writes need of each.
    fn snapshot(&self) -> (Vec<Node>, HashMap<String, Held>) {
        let mut all: Vec<(Node, Held)> = Vec::new();
        let mut referenced: BTreeSet<String> = BTreeSet::new();
        for s in &self.sources {
            let res = s.resource();
            let version = api_version(res);
            s.each(&mut |m| {
                let owners = m.owner_references.as_deref().unwrap_or_default();
                referenced.extend(owners.iter().map(|o| o.uid.clone()));
                let node = Node::from_meta(&version, res.kind, m);
                let held = Held {
                    res,
                    resource_version: m.resource_version.clone(),
                    owner_references: owners.to_vec(),
                    finalizers: m.finalizers.clone().unwrap_or_default(),
                };
                all.push((node, held));
            });
        }
        let mut nodes = Vec::new();
        let mut held = HashMap::new();
        for (n, h) in all {
            let finalizing = n.being_deleted
                && n.finalizers
                    .iter()
                    .any(|f| f == gc::ORPHAN || f == gc::FOREGROUND);
            if n.owners.is_empty() && !finalizing && !referenced.contains(&n.id.uid) {
                continue;
            }
            held.insert(n.id.uid.clone(), h);
            nodes.push(n);
        }
        (nodes, held)
    }

    pub async fn reconcile(&self, _key: Key) -> Result<Next, LoopError> {
        let wait = {
            let mut last = self.last_pass.lock().unwrap_or_else(|p| p.into_inner());
            let wait = last.map(|t| MIN_GAP.saturating_sub(t.elapsed()));
            *last = Some(Instant::now() + wait.unwrap_or_default());
            wait
        };
        if let Some(w) = wait.filter(|w| !w.is_zero()) {
            tokio::time::sleep(w).await;
        }
        let (nodes, held) = self.snapshot();
        let actions = gc::plan(&nodes, |v, k| served(v, k).map(|r| r.namespaced));
        let mut deferred = false;
        let mut first_error = None;
        for a in actions {
            match self.act(&a, &held).await {
                Ok(true) => {}
                Ok(false) => deferred = true,
                Err(e) => {
                    debug!(action = ?a, error = %e, "garbage collector write");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(deferred.then_some(RECHECK)),
        }
    }

    /// Carries `a` out; `false` when a live read kept it from going.
    async fn act(&self, a: &Action, held: &HashMap<String, Held>) -> Result<bool, LoopError> {
        match a {
            Action::Delete { object, policy } => {
                let Some(h) = held.get(&object.uid) else {
                    return Ok(false);
                };
                for r in &h.owner_references {
                    match self.live(object, r).await? {
                        Live::Gone | Live::Deleting { foreground: true } => {}
                        _ => return Ok(false),
                    }
                }
                self.delete(object, h, *policy).await?;
                Ok(true)
            }
            Action::RemoveOwnerReferences { object, owners } => {
                let Some(h) = held.get(&object.uid) else {
                    return Ok(false);
                };
                // Only an owner gone or being deleted is let go of: the
                // caches missing an owner never orphans its dependent.
                let mut going = Vec::new();
                for r in h
                    .owner_references
                    .iter()
                    .filter(|r| owners.contains(&r.uid))
                {
                    if self.live(object, r).await? != Live::Present {
                        going.push(r.uid.clone());
                    }
                }
                let all = going.len() == owners.len();
                if !going.is_empty() {
                    let kept: Vec<&OwnerReference> = h
                        .owner_references
                        .iter()
                        .filter(|r| !going.contains(&r.uid))
                        .collect();
                    let refs = if kept.is_empty() {
                        Value::Null
                    } else {
                        json!(kept)
                    };
                    self.patch_meta(object, h, json!({ "ownerReferences": refs }))
                        .await?;
                }
                Ok(all)
            }
            Action::UnblockOwnerReferences { object, owners } => {
                let Some(h) = held.get(&object.uid) else {
                    return Ok(false);
                };
                let refs: Vec<OwnerReference> = h
                    .owner_references
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        if owners.contains(&r.uid) {
                            r.block_owner_deletion = Some(false);
                        }
                        r
                    })
                    .collect();
                self.patch_meta(object, h, json!({ "ownerReferences": refs }))
                    .await?;
                Ok(true)
            }
            Action::RemoveFinalizer { object, finalizer } => {
                let Some(h) = held.get(&object.uid) else {
                    return Ok(false);
                };
                let kept: Vec<&String> = h
                    .finalizers
                    .iter()
                    .filter(|f| f.as_str() != *finalizer)
                    .collect();
                let value = if kept.is_empty() {
                    Value::Null
                } else {
                    json!(kept)
                };
                self.patch_meta(object, h, json!({ "finalizers": value }))
                    .await?;
                info!(kind = %object.kind, ns = ?object.namespace, name = %object.name, finalizer, "dependents done: finalizer removed");
                Ok(true)
            }
        }
    }

    /// The owner `r` of `dependent`, read live where the dependent sees
    /// it (a namespaced owner in the dependent's namespace).
    async fn live(&self, dependent: &ObjectRef, r: &OwnerReference) -> Result<Live, LoopError> {
        let Some(res) = served(&r.api_version, &r.kind) else {
            return Ok(Live::Present);
        };
        if res.namespaced && dependent.namespace.is_none() {
            return Ok(Live::Present);
        }
        let api = dynamic(&self.client, res, dependent.namespace.as_deref());
        let Some(o) = api.get_opt(&r.name).await? else {
            return Ok(Live::Gone);
        };
        if o.metadata.uid.as_deref() != Some(r.uid.as_str()) {
            return Ok(Live::Gone);
        }
        if o.metadata.deletion_timestamp.is_none() {
            return Ok(Live::Present);
        }
        let foreground = o
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == gc::FOREGROUND);
        Ok(Live::Deleting { foreground })
    }

    async fn delete(&self, object: &ObjectRef, h: &Held, policy: Policy) -> Result<(), LoopError> {
        let api = dynamic(&self.client, h.res, object.namespace.as_deref());
        let dp = DeleteParams {
            propagation_policy: Some(match policy {
                Policy::Background => PropagationPolicy::Background,
                Policy::Foreground => PropagationPolicy::Foreground,
                Policy::Orphan => PropagationPolicy::Orphan,
            }),
            preconditions: Some(Preconditions {
                uid: Some(object.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&object.name, &dp).await {
            Ok(_) => {
                info!(kind = %object.kind, ns = ?object.namespace, name = %object.name, policy = policy.as_str(), "owners gone: deleted");
                Ok(())
            }
            // Gone already, or another object by that name now.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A merge patch of `object`'s metadata with `fields`, on the uid and
    /// resourceVersion the decision read (a 409 decides again).
    async fn patch_meta(
        &self,
        object: &ObjectRef,
        h: &Held,
        fields: Value,
    ) -> Result<(), LoopError> {
        let mut meta = json!({ "uid": object.uid });
        if let (Some(m), Value::Object(f)) = (meta.as_object_mut(), fields) {
            m.extend(f);
            if let Some(rv) = &h.resource_version {
                m.insert("resourceVersion".into(), json!(rv));
            }
        }
        let api = dynamic(&self.client, h.res, object.namespace.as_deref());
        let pp = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        match api
            .patch(
                &object.name,
                &pp,
                &Patch::Merge(json!({ "metadata": meta })),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Any change of a watched kind: the graph is decided again.
fn wake<K>(_: &Change<K>, q: &Queue) {
    q.add(graph_key())
}

/// The heartbeat kinds (Nodes' status, Leases renewed, Events counted)
/// change many times a second in a large cluster and almost never in a
/// way the collector reads: only their going, a deletion begun, a
/// finalizer or a relist wake it. A new one with a dangling owner is found
/// by the next pass anything else starts.
fn wake_unless_heartbeat<K: kube::Resource>(c: &Change<K>, q: &Queue) {
    if let Change::Applied(o) = c {
        let m = o.meta();
        let finalizers = m.finalizers.as_ref().is_some_and(|f| !f.is_empty());
        if m.deletion_timestamp.is_none() && !finalizers {
            return;
        }
    }
    q.add(graph_key())
}

/// The loop over `c`'s caches: every kind the API serves that can carry
/// ownerReferences or be an owner.
pub fn spec(client: &Client, c: &Caches) -> LoopSpec {
    let mut g = GarbageCollector {
        client: client.clone(),
        sources: Vec::new(),
        last_pass: Mutex::new(None),
    };
    g.source(&c.namespaces);
    g.source(&c.nodes);
    g.source(&c.pods);
    g.source(&c.services);
    g.source(&c.events);
    g.source(&c.config_maps);
    g.source(&c.secrets);
    g.source(&c.deployments);
    g.source(&c.sets);
    g.source(&c.leases);
    g.source(&c.slices);
    g.source(&c.budgets);
    g.source(&c.clusters);
    g.source(&c.pools);
    g.source(&c.operations);
    g.source(&c.lbs);
    g.source(&c.hcs);
    g.source(&c.negs);
    g.source(&c.groups);
    let g = Arc::new(g);
    LoopSpec::new("garbage-collector", &g, |g, k| async move {
        g.reconcile(k).await
    })
    .on(&c.namespaces, wake)
    .on(&c.nodes, wake_unless_heartbeat)
    .on(&c.pods, wake)
    .on(&c.services, wake)
    .on(&c.events, wake_unless_heartbeat)
    .on(&c.config_maps, wake)
    .on(&c.secrets, wake)
    .on(&c.deployments, wake)
    .on(&c.sets, wake)
    .on(&c.leases, wake_unless_heartbeat)
    .on(&c.slices, wake)
    .on(&c.budgets, wake)
    .on(&c.clusters, wake)
    .on(&c.pools, wake)
    .on(&c.operations, wake)
    .on(&c.lbs, wake)
    .on(&c.hcs, wake)
    .on(&c.negs, wake)
    .on(&c.groups, wake)
    // An owner missing from a cache still filling would look gone.
    .waits_for([
        c.namespaces.synced(),
        c.nodes.synced(),
        c.pods.synced(),
        c.services.synced(),
        c.events.synced(),
        c.config_maps.synced(),
        c.secrets.synced(),
        c.deployments.synced(),
        c.sets.synced(),
        c.leases.synced(),
        c.slices.synced(),
        c.budgets.synced(),
        c.clusters.synced(),
        c.pools.synced(),
        c.operations.synced(),
        c.lbs.synced(),
        c.hcs.synced(),
        c.negs.synced(),
        c.groups.synced(),
    ])
    .first(|| vec![graph_key()])
}
