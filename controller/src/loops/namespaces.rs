//! The namespace loop: a Terminating namespace's content is read live
//! (every namespaced resource the API serves, as upstream lists each
//! group-version-resource: a cache could still miss what was created just
//! before the delete, and the namespace would go with it left behind),
//! `sluice_lifecycle::namespace_deletion` (pure) decides, and this file
//! makes the writes: `status.phase`, the deletes, the conditions, and the
//! `finalize` that lets the API server remove the namespace.
//!
//! As upstream, a namespace is first looked at 5 s after its deletion is
//! seen (`namespaceDeletionGracePeriod`, so every API server has seen the
//! deletion and admits nothing new into it), then after the plan's
//! `requeue_after`, or at once when one of its pods goes (the deletion
//! waits on its pods first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use serde_json::json;
use sluice_lifecycle::namespace_deletion::{self, Content, Plan};
use sluice_model::k8s::Pod;
use sluice_model::k8s_openapi::api::core::v1::Namespace;
use tracing::info;

use super::garbage_collector::dynamic;
use super::informer::{Change, Informer, Key};
use super::queue::{Next, Queue};
use super::spec::LoopSpec;
use super::wiring::Caches;
use super::{requeue, LoopError, MANAGER};
use crate::api::resources::{Resource, RESOURCES};

/// Upstream's `namespaceDeletionGracePeriod`.
pub const DELETION_DELAY: Duration = Duration::from_secs(5);

/// Plans made and carried out in one pass at most: pods, then the rest,
/// then the finalize (each round deletes what the last one let through).
const ROUNDS: usize = 3;

pub struct Namespaces {
    client: Client,
    namespaces: Arc<Informer<Namespace>>,
    queue: Arc<Queue>,
    /// What each namespace's last deletes failed with, for its conditions.
    errors: Mutex<HashMap<String, Vec<String>>>,
}

/// The namespaced resources whose objects a namespace's deletion removes.
fn content_resources() -> impl Iterator<Item = &'static Resource> {
    RESOURCES
        .iter()
        .filter(|r| r.namespaced && !r.name.contains('/') && r.verbs.contains(&"delete"))
}

fn is_pods(r: &Resource) -> bool {
    r.group.is_empty() && r.name == "pods"
}

fn terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
}

impl Namespaces {
    fn errors(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        self.errors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A namespace changed: looked at after the deletion delay once it is
    /// being deleted.
    pub fn on_namespace(&self, change: &Change<Namespace>) {
        match change {
            Change::Applied(ns) if terminating(ns) => {
                let key = (String::new(), ns.metadata.name.clone().unwrap_or_default());
                self.queue.add_after(key, DELETION_DELAY);
            }
            Change::Applied(_) => {}
            Change::Deleted(ns) => {
                if let Some(name) = &ns.metadata.name {
                    self.errors().remove(name);
                }
            }
            Change::Relisted => self.queue.add_all(self.terminating_keys()),
        }
    }

    /// A pod of a Terminating namespace gone: its deletion may go on.
    pub fn on_pod(&self, change: &Change<Pod>) {
        if let Change::Deleted(p) = change {
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            if self.namespaces.get("", ns).is_some_and(|n| terminating(&n)) {
                self.queue.add((String::new(), ns.to_owned()));
            }
        }
    }

    pub fn terminating_keys(&self) -> Vec<Key> {
        self.namespaces
            .all()
            .iter()
            .filter(|n| terminating(n))
            .map(|n| (String::new(), n.metadata.name.clone().unwrap_or_default()))
            .collect()
    }

    /// Everything still in `ns`, read live.
    async fn contents(&self, ns: &str) -> Result<Vec<Content>, LoopError> {
        let mut out = Vec::new();
        for r in content_resources() {
            if is_pods(r) {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
                out.extend(
                    pods.list(&ListParams::default())
                        .await?
                        .items
                        .iter()
                        .map(Content::from_pod),
                );
            } else {
                let api = dynamic(&self.client, r, Some(ns));
                out.extend(
                    api.list(&ListParams::default())
                        .await?
                        .items
                        .iter()
                        .map(|o| Content::from_meta(r.name, r.group, &o.metadata)),
                );
            }
        }
        Ok(out)
    }

    pub async fn reconcile(&self, key: Key) -> Result<Next, LoopError> {
        let name = key.1;
        let api: Api<Namespace> = Api::all(self.client.clone());
        for _ in 0..ROUNDS {
            let Some(ns) = api.get_opt(&name).await? else {
                self.errors().remove(&name);
                return Ok(None);
            };
            if !terminating(&ns) {
                return Ok(None);
            }
            let contents = self.contents(&name).await?;
            let errors = self.errors().get(&name).cloned().unwrap_or_default();
            let now = crate::clock::now();
            let Some(plan) = namespace_deletion::plan(&ns, &contents, &errors, now) else {
                return Ok(None);
            };
            let deleted_some = !plan.delete.is_empty();
            let after = self.carry_out(&api, &ns, plan).await?;
            // What was deleted may have gone at once: look again now, as
            // upstream lists again after its deletes.
            if !deleted_some {
                return Ok(after);
            }
        }
        Ok(Some(Duration::from_secs(1)))
    }

    async fn carry_out(
        &self,
        api: &Api<Namespace>,
        ns: &Namespace,
        plan: Plan,
    ) -> Result<Next, LoopError> {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let pp = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        if plan.set_terminating {
            let body = json!({"status": {"phase": "Terminating"}});
            api.patch_status(&name, &pp, &Patch::Merge(body)).await?;
        }
        let mut failed = Vec::new();
        for d in &plan.delete {
            let Some(r) = content_resources().find(|r| r.name == d.resource && r.group == d.group)
            else {
                continue;
            };
            // Each object with its own grace period (pods stop as their
            // spec says) and in the background, as upstream.
            let dp = DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Background),
                preconditions: Some(Preconditions {
                    uid: Some(d.uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match dynamic(&self.client, r, Some(&name))
                .delete(&d.name, &dp)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => failed.push(e.to_string()),
            }
        }
        failed.sort();
        failed.dedup();
        if failed.is_empty() {
            self.errors().remove(&name);
        } else {
            self.errors().insert(name.clone(), failed);
        }
        if let Some(conditions) = &plan.conditions {
            let body = json!({"status": {"conditions": conditions}});
            api.patch_status(&name, &pp, &Patch::Merge(body)).await?;
        }
        if let Some(left) = plan.finalize {
            // On the namespace as it is now (the status writes above moved
            // its resourceVersion), and only if it is still the same one.
            let Some(mut now) = api.get_opt(&name).await? else {
                return Ok(None);
            };
            if now.metadata.uid != ns.metadata.uid {
                return Ok(None);
            }
            now.spec.get_or_insert_with(Default::default).finalizers = Some(left);
            let post = PostParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            match api
                .replace_subresource("finalize", &name, &post, &now)
                .await
            {
                Ok(_) => info!(namespace = %name, "content gone: finalized"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(None);
        }
        Ok(requeue(plan.requeue_after))
    }
}

pub fn spec(client: &Client, c: &Caches) -> LoopSpec {
    let queue = Queue::new();
    let ns = Arc::new(Namespaces {
        client: client.clone(),
        namespaces: c.namespaces.clone(),
        queue: queue.clone(),
        errors: Mutex::default(),
    });
    let (n1, n2, first) = (ns.clone(), ns.clone(), ns.clone());
    LoopSpec::new("namespace", &ns, |n, k| async move { n.reconcile(k).await })
        .queue(queue)
        .on(&c.namespaces, move |ch, _| n1.on_namespace(ch))
        .on(&c.pods, move |ch, _| n2.on_pod(ch))
        .waits_for([c.namespaces.synced()])
        .first(move || first.terminating_keys())
}
