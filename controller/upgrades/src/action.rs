//! What the planner asks the controller loop to do. Node actions are
//! patches of one Node (annotations, labels, taints); instance actions
//! go through the node provider; the pool action is a write of the pool's
//! spec. Each is idempotent: the next pass re-derives what is left from
//! what the loop managed to do.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use sluice_model::node_pool::{NodeConfig, NodeTaint};
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::{self, DeleteReason};
use sluice_nodepools::CreateNode;

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create a node through the provider: a surge node, the replacement
    /// of a node already deleted, a green node.
    CreateNode(CreateNode),
    /// Set [`crate::UPGRADING_ANNOTATION`] to the operation's name: the
    /// node's upgrade has started (it finishes even if cancelled, U6),
    /// and the autoscaler leaves it alone (U7).
    MarkUpgrading { node: String },
    /// Set `sluice.dev/drain: <reason>` and
    /// `sluice.dev/drain-started: <started>` (see [`crate::drain`]): the
    /// node's agent cordons it and evicts (or deletes) its pods as the
    /// reason says. Sent again, with the same or a new time, when the
    /// start time is missing, and with a new reason when the drain changes
    /// (blue-green phase 5 after phase 3).
    Drain {
        node: String,
        reason: EvictionReason,
        started: Timestamp,
    },
    /// Cordon the node without draining it (blue-green phase 2), recording
    /// that this operation did it and when ([`crate::CORDONED_BY_ANNOTATION`],
    /// [`crate::CORDONED_AT_ANNOTATION`]), so that only its own cordon is
    /// undone.
    Cordon { node: String, at: Timestamp },
    /// Undo [`Action::Cordon`]: schedulable again, the records removed.
    Uncordon { node: String },
    /// Delete the instance (its drain is over). `NotFound` counts as done.
    DeleteInstance { name: String },
    /// `maxUnavailable`'s in-place recreation (U2): delete `old` (drained),
    /// then create `new` in its zone; run the deletion first, the creation
    /// uses the capacity it frees.
    Recreate { old: String, new: CreateNode },
    /// Remove `sluice.dev/drain` and `sluice.dev/drain-started`: the agent
    /// stops evicting and lifts the cordon it made (a rollback).
    ReleaseDrain { node: String },
    /// Remove [`crate::UPGRADING_ANNOTATION`].
    Unmark { node: String },
    /// U7: labels and taints changed without a new node.
    ApplyInPlace(InPlace),
    /// The upgrade completed: write the pool's `spec.version` and
    /// `spec.config` (`None`: unchanged), so the pool reconciler makes new
    /// nodes like the upgraded ones.
    SetPoolTarget {
        version: Option<String>,
        config: Option<NodeConfig>,
    },
}

/// A Node's labels and taints brought to the pool's new config: the
/// pool's labels and taints that the new config drops are removed, the new
/// ones set; labels and taints others put on the node are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPlace {
    pub node: String,
    pub set_labels: BTreeMap<String, String>,
    pub remove_labels: Vec<String>,
    pub add_taints: Vec<NodeTaint>,
    pub remove_taints: Vec<NodeTaint>,
}

impl Action {
    /// The Node or instance the action is about (the pool's name is not
    /// one: `None`).
    pub fn subject(&self) -> Option<&str> {
        match self {
            Action::CreateNode(c) => Some(&c.name),
            Action::MarkUpgrading { node }
            | Action::Drain { node, .. }
            | Action::Cordon { node, .. }
            | Action::Uncordon { node }
            | Action::ReleaseDrain { node }
            | Action::Unmark { node } => Some(node),
            Action::DeleteInstance { name } => Some(name),
            Action::Recreate { old, .. } => Some(old),
            Action::ApplyInPlace(p) => Some(&p.node),
            Action::SetPoolTarget { .. } => None,
        }
    }
}

/// The provider calls among `actions`, for `sluice_nodepools::execute::run`
/// (deletions before creations, as a `Recreate` needs) and
/// `reconcile::record`, which turns a creation refused for quota into the
/// pool's backoff and `QuotaExceeded` condition that [`crate::Quota::of_pool`]
/// reads back. `operation`: the name given in the deletions' reason.
pub fn provider_actions(actions: &[Action], operation: &str) -> Vec<reconcile::Action> {
    let delete = |name: &str| reconcile::Action::Delete {
        name: name.to_owned(),
        reason: DeleteReason::Upgraded(operation.to_owned()),
    };
    actions
        .iter()
        .flat_map(|a| match a {
            Action::CreateNode(c) => vec![reconcile::Action::Create(c.clone())],
            Action::DeleteInstance { name } => vec![delete(name)],
            Action::Recreate { old, new } => {
                vec![delete(old), reconcile::Action::Create(new.clone())]
            }
            _ => Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nodepools::NodeSpec;

    fn create(name: &str) -> CreateNode {
        CreateNode {
            pool: "p".into(),
            zone: "a".into(),
            name: name.into(),
            version: "1.34.1".into(),
            config: NodeSpec {
                cpu_milli: 4000,
                memory_bytes: 1 << 34,
                labels: BTreeMap::new(),
                taints: Vec::new(),
                spot: false,
            },
        }
    }

    #[test]
    fn provider_calls_keep_a_recreation_s_deletion_first() {
        // spec: U2 — recreate: the old node goes, then the new one is made.
        let actions = [
            Action::MarkUpgrading { node: "n0".into() },
            Action::Recreate {
                old: "n1".into(),
                new: create("n2"),
            },
            Action::DeleteInstance { name: "n3".into() },
            Action::CreateNode(create("n4")),
        ];
        let calls = provider_actions(&actions, "op-1");
        let reason = DeleteReason::Upgraded("op-1".into());
        assert_eq!(
            calls,
            [
                reconcile::Action::Delete {
                    name: "n1".into(),
                    reason: reason.clone()
                },
                reconcile::Action::Create(create("n2")),
                reconcile::Action::Delete {
                    name: "n3".into(),
                    reason: reason.clone()
                },
                reconcile::Action::Create(create("n4")),
            ]
        );
        assert_eq!(reason.to_string(), "replaced by upgrade op-1");
    }
}
