//! Running a plan's actions through a provider: the only I/O step
//! between [`crate::reconcile::plan`] and [`crate::reconcile::record`].

use std::collections::HashMap;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::provider::{NodeProvider, ProviderError};
use crate::reconcile::{Action, Outcome};

/// Run `actions`: every deletion at once, then, once they are done (a
/// replaced instance may hold the quota its successor needs), every
/// creation at once. One outcome per action, in the order of `actions`;
/// a provider call that panics gives [`ProviderError::Failed`].
pub async fn run(provider: Arc<dyn NodeProvider>, actions: Vec<Action>) -> Vec<Outcome> {
    let (deletes, creates): (Vec<_>, Vec<_>) = actions
        .into_iter()
        .enumerate()
        .partition(|(_, a)| matches!(a, Action::Delete { .. }));
    let mut outcomes = Vec::new();
    for batch in [deletes, creates] {
        let mut calls = JoinSet::new();
        let mut started = HashMap::new();
        for (i, action) in batch {
            let provider = Arc::clone(&provider);
            let call = action.clone();
            let handle = calls.spawn(async move {
                match &call {
                    Action::Create(req) => provider.create(req.clone()).await.map(drop),
                    Action::Delete { name, .. } => provider.delete(name).await,
                }
            });
            started.insert(handle.id(), (i, action));
        }
        while let Some(joined) = calls.join_next_with_id().await {
            let (id, result) = match joined {
                Ok((id, result)) => (id, result),
                Err(e) => (
                    e.id(),
                    Err(ProviderError::Failed(format!(
                        "the provider call failed: {e}"
                    ))),
                ),
            };
            if let Some((i, action)) = started.remove(&id) {
                outcomes.push((i, Outcome { action, result }));
            }
        }
    }
    outcomes.sort_by_key(|(i, _)| *i);
    outcomes.into_iter().map(|(_, o)| o).collect()
}
