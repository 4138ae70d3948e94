//! What the autoscaler remembers between decisions, as plain data the loop
//! keeps (and may persist): when each node became unneeded, each pool's
//! backoff, the last scale-up and failed removal, the scale-ups and
//! removals in flight, and when each status last changed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sluice_model::k8s::jiff::Timestamp;

use crate::backoff::Backoff;

/// The remembered state; `Default` is a fresh start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Since when each node has been found removable, loop after loop.
    pub unneeded_since: BTreeMap<String, Timestamp>,
    /// Per pool.
    pub backoff: BTreeMap<String, Backoff>,
    pub last_scale_up: Option<Timestamp>,
    pub last_scale_down_failure: Option<Timestamp>,
    /// Scale-ups asked for whose nodes have not all registered.
    pub scale_ups: Vec<ScaleUpRequest>,
    /// Nodes being removed, by name.
    pub deleting: BTreeMap<String, Deletion>,
    /// Per pool, the pool reconciler's last creation failure already
    /// counted, so one failure backs the pool off once.
    pub seen_failures: BTreeMap<String, Timestamp>,
    /// Per status entry (`clusterWide.scaleUp`, `pool-a.health`, …): its
    /// value and since when it has held, for `lastTransitionTime`.
    pub transitions: BTreeMap<String, Transition>,
    /// Whether this process already took back the `ToBeDeleted` taints a
    /// previous run left. Upstream does it once, at its first loop, on
    /// every node; later, a taint it did not put there (an admin's, a
    /// test's) is left alone. Never remembered: a restart cleans again.
    #[serde(skip)]
    pub cleaned_up: bool,
    /// Nodes whose removal failed: the next decision gives them back,
    /// untainted.
    #[serde(skip)]
    pub released: BTreeSet<String>,
}

/// One zone's scale-up in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpRequest {
    pub pool: String,
    pub zone: String,
    pub from: i32,
    pub to: i32,
    pub requested_at: Timestamp,
}

/// A node the autoscaler decided to remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deletion {
    pub pool: String,
    pub started_at: Timestamp,
    /// Removed without a drain (no pods to move).
    pub empty: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub status: String,
    pub since: Timestamp,
}

impl State {
    /// The loop reports that removing `node` failed (a budget still
    /// refused after the retry window, or tainting failed): the node is
    /// kept, its unneeded time starts over, and scale-down pauses for the
    /// failure delay. The next decision untaints it.
    pub fn removal_failed(&mut self, node: &str, now: Timestamp) {
        self.deleting.remove(node);
        self.unneeded_since.remove(node);
        self.released.insert(node.to_owned());
        self.last_scale_down_failure = Some(now);
    }

    /// The status value of `key` at `now`, and since when it has held.
    pub(crate) fn transition(&mut self, key: &str, status: &str, now: Timestamp) -> Timestamp {
        match self.transitions.get(key) {
            Some(t) if t.status == status => t.since,
            _ => {
                self.transitions.insert(
                    key.to_owned(),
                    Transition {
                        status: status.to_owned(),
                        since: now,
                    },
                );
                now
            }
        }
    }
}
