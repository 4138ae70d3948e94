//! The upgrade planner's actions made real: Node patches through the API
//! (each as `sluice_upgrades::interpret` writes it, the one reading of an
//! action the simulation and the tests share), instance calls through the
//! node provider, the pool's spec written once at the end. Every action is idempotent, so a pass cut short (an error,
//! a `kill -9`) is finished by the next one, which plans again from what it
//! finds: a deletion that finds nothing is done, a patch that finds no
//! Node is moot.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::Value;
use sluice_model::k8s::Node;
use sluice_model::node_pool::NodePool;
use sluice_nodepools::reconcile::{self, Outcome};
use sluice_nodepools::{NodeProvider, ProviderError};
use sluice_upgrades::{interpret, Action};

use crate::loops::{LoopError, MANAGER};

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
            let current = self
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == a.subject());
            if let Some(w) = interpret::node_write(a, self.operation, current.map(AsRef::as_ref)) {
                self.patch_node(&w.node, w.patch).await?;
            }
        }
        for patch in actions.iter().filter_map(interpret::pool_write) {
            let api: Api<NodePool> = Api::all(self.client.clone());
            api.patch(self.pool, &params(), &Patch::Merge(patch))
                .await?;
        }
        Ok(outcomes)
    }

    async fn patch_node(&self, node: &str, patch: Value) -> Result<(), LoopError> {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.patch(node, &params(), &Patch::Merge(patch)).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }
}
