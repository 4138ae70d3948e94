//! The upgrade planner's actions made real: Node patches through the API,
//! instance calls through the node provider, the pool's spec written once
//! at the end. Every action is idempotent, so a pass cut short (an error,
//! a `kill -9`) is finished by the next one, which plans again from what it
//! finds: a deletion that finds nothing is done, a patch that finds no
//! Node is moot.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Map, Value};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::Node;
use sluice_model::node_pool::{NodePool, NodeTaint};
use sluice_model::policy::eviction::DRAIN_ANNOTATION;
use sluice_nodepools::reconcile::{self, Outcome};
use sluice_nodepools::{NodeProvider, ProviderError};
use sluice_upgrades::drain::DRAIN_STARTED_ANNOTATION;
use sluice_upgrades::{Action, InPlace, UPGRADING_ANNOTATION};

use crate::loops::{LoopError, MANAGER};

/// The drain reason an upgrade names (the agent's grace cap and budget
/// wait: 1 h, E1).
const NODE_UPGRADE: &str = "NodeUpgrade";

pub struct Executor<'a> {
    pub client: &'a Client,
    pub provider: &'a Arc<dyn NodeProvider>,
    pub operation: &'a str,
    pub pool: &'a str,
    /// The pool's Nodes as cached, for in-place taint changes (the list
    /// is written whole).
    pub nodes: &'a [Arc<Node>],
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

impl Executor<'_> {
    /// Runs `actions`: the provider calls first (every deletion, then
    /// every creation, as `sluice_nodepools::execute::run` does: a
    /// recreation's deletion frees the room its creation uses), then the
    /// Node patches in order, then the pool's spec. Returns the provider
    /// calls' outcomes, for the pool's quota backoff. A failed deletion,
    /// or a failed API write, ends the pass with the error (the next pass
    /// plans again from what is there).
    pub async fn run(&self, actions: &[Action]) -> Result<Vec<Outcome>, LoopError> {
        let calls = sluice_upgrades::provider_actions(actions, self.operation);
        let outcomes = sluice_nodepools::execute::run(self.provider.clone(), calls).await;
        for o in &outcomes {
            match (&o.action, &o.result) {
                (_, Ok(()))
                | (reconcile::Action::Delete { .. }, Err(ProviderError::NotFound(_))) => {}
                (reconcile::Action::Delete { name, .. }, Err(e)) => {
                    return Err(LoopError::Provider(format!("deleting {name}: {e}")));
                }
                (reconcile::Action::Create(c), Err(e)) => {
                    tracing::warn!(node = %c.name, pool = self.pool, error = %e, "surge node not created");
                }
            }
        }
        for a in actions {
            match a {
                Action::MarkUpgrading { node } => {
                    self.annotate(node, json!({ UPGRADING_ANNOTATION: self.operation }))
                        .await?
                }
                Action::Unmark { node } => {
                    self.annotate(node, json!({ UPGRADING_ANNOTATION: null }))
                        .await?
                }
                Action::Drain { node, started } => {
                    self.annotate(node, drain_marks(Some(*started))).await?
                }
                Action::Uncordon { node } => self.annotate(node, drain_marks(None)).await?,
                Action::ApplyInPlace(p) => self.in_place(p).await?,
                Action::CreateSurge(_)
                | Action::DeleteInstance { .. }
                | Action::Recreate { .. }
                | Action::SetPoolTarget { .. } => {}
            }
        }
        for a in actions {
            if let Action::SetPoolTarget { version, config } = a {
                let mut spec = Map::new();
                if let Some(v) = version {
                    spec.insert("version".into(), json!(v));
                }
                if let Some(c) = config {
                    spec.insert(
                        "config".into(),
                        serde_json::to_value(c).unwrap_or(Value::Null),
                    );
                }
                let api: Api<NodePool> = Api::all(self.client.clone());
                api.patch(self.pool, &params(), &Patch::Merge(json!({ "spec": spec })))
                    .await?;
            }
        }
        Ok(outcomes)
    }

    async fn annotate(&self, node: &str, annotations: Value) -> Result<(), LoopError> {
        self.patch_node(node, json!({"metadata": {"annotations": annotations}}))
            .await
    }

    async fn patch_node(&self, node: &str, patch: Value) -> Result<(), LoopError> {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.patch(node, &params(), &Patch::Merge(patch)).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    /// U7: labels set and removed by a merge patch; taints written whole
    /// (a merge patch replaces lists), the node's other taints kept.
    async fn in_place(&self, p: &InPlace) -> Result<(), LoopError> {
        let mut labels = Map::new();
        for (k, v) in &p.set_labels {
            labels.insert(k.clone(), json!(v));
        }
        for k in &p.remove_labels {
            labels.insert(k.clone(), Value::Null);
        }
        let mut patch = json!({"metadata": {"labels": labels}});
        if !p.add_taints.is_empty() || !p.remove_taints.is_empty() {
            let current = self
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(p.node.as_str()))
                .and_then(|n| n.spec.as_ref())
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            patch["spec"] = json!({"taints": taints_after(&current, p)});
        }
        self.patch_node(&p.node, patch).await
    }
}

/// The drain annotations: set with the start time, or removed.
fn drain_marks(started: Option<Timestamp>) -> Value {
    match started {
        Some(t) => {
            json!({ DRAIN_ANNOTATION: NODE_UPGRADE, DRAIN_STARTED_ANNOTATION: t.to_string() })
        }
        None => json!({ DRAIN_ANNOTATION: null, DRAIN_STARTED_ANNOTATION: null }),
    }
}

fn same_taint(k: &k8s_openapi::api::core::v1::Taint, t: &NodeTaint) -> bool {
    k.key == t.key && k.effect == t.effect.kubernetes()
}

/// The node's taints with `p`'s removed and added (a taint is its key
/// and effect, as `kubectl taint` sees it).
pub fn taints_after(current: &[k8s_openapi::api::core::v1::Taint], p: &InPlace) -> Vec<Value> {
    let kept = current
        .iter()
        .filter(|k| !p.remove_taints.iter().any(|t| same_taint(k, t)))
        .filter(|k| !p.add_taints.iter().any(|t| same_taint(k, t)))
        .map(|k| serde_json::to_value(k).unwrap_or(Value::Null));
    let added = p.add_taints.iter().map(|t| {
        let mut v = json!({"key": t.key, "effect": t.effect.kubernetes()});
        if !t.value.is_empty() {
            v["value"] = json!(t.value);
        }
        v
    });
    kept.chain(added).collect()
}
