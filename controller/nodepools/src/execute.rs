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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::instance::{CreateNode, Instance, NodeSpec};
    use crate::provider::ProviderFuture;
    use crate::reconcile::DeleteReason;
    use crate::sim::{ManualClock, SimProvider};

    fn create(name: &str) -> Action {
        Action::Create(CreateNode {
            pool: "p".into(),
            zone: "zone-a".into(),
            name: name.into(),
            version: "1.33.2".into(),
            config: NodeSpec {
                cpu_milli: 1000,
                memory_bytes: 1 << 30,
                labels: Default::default(),
                taints: Vec::new(),
                spot: false,
            },
        })
    }

    #[tokio::test]
    async fn deletions_run_first_so_a_replacement_gets_the_quota_back() {
        let clock = Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH));
        let sim = Arc::new(SimProvider::new(clock));
        sim.set_quota(Some(1));
        let Action::Create(first) = create("old") else {
            unreachable!()
        };
        sim.create(first).await.unwrap();
        sim.mark_failed("old", "dead").unwrap();
        // The creation is listed first; it must still run second.
        let actions = vec![
            create("new"),
            Action::Delete {
                name: "old".into(),
                reason: DeleteReason::Failed("dead".into()),
            },
        ];
        let outcomes = run(sim.clone(), actions.clone()).await;
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[0].action, actions[0]);
        assert_eq!(outcomes[0].result, Ok(()));
        assert_eq!(outcomes[1].result, Ok(()));
        assert_eq!(sim.len(), 1);
    }

    struct Panicking;

    impl NodeProvider for Panicking {
        fn create(&self, _: CreateNode) -> ProviderFuture<'_, Instance> {
            Box::pin(async { panic!("provider bug") })
        }

        fn delete<'a>(&'a self, _: &'a str) -> ProviderFuture<'a, ()> {
            Box::pin(async { Ok(()) })
        }

        fn list<'a>(&'a self, _: &'a str) -> ProviderFuture<'a, Vec<Instance>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    #[tokio::test]
    async fn a_panicking_provider_call_is_a_failed_outcome() {
        let outcomes = run(Arc::new(Panicking), vec![create("n1")]).await;
        assert_eq!(outcomes.len(), 1);
        let Err(ProviderError::Failed(message)) = &outcomes[0].result else {
            panic!("{outcomes:?}");
        };
        assert!(message.contains("panicked"), "{message}");
    }
}
