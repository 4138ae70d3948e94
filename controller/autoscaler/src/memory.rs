//! The autoscaler's remembered [`State`] kept in the pools it is about:
//! each pool's `status.autoscaler.memory` holds that pool's share (its
//! nodes' unneeded times and removals, its backoff and scale-ups in
//! flight) and the cluster-wide times (last scale-up, last failed
//! removal), so a restarted or newly elected controller goes on where the
//! last one was rather than starting every clock over; and `sluice
//! autoscaler` reads the same memory to explain and simulate what the loop
//! would decide. Pure.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::node_pool::NodePool;

use crate::backoff::Backoff;
use crate::state::{Deletion, ScaleUpRequest};
use crate::State;

/// One pool's share, as its status holds it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolMemory {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unneeded_since: BTreeMap<String, Timestamp>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleting: BTreeMap<String, Deletion>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_ups: Vec<ScaleUpRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_failure: Option<Timestamp>,
    /// Cluster-wide, written to every pool; the latest wins on reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_up: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_down_failure: Option<Timestamp>,
}

/// The state the pools remember, and the pools whose memory could not be
/// read: those are left out (a fresh start for that pool, never a stopped
/// loop), for the caller to report.
pub fn read(pools: &[impl std::borrow::Borrow<NodePool>]) -> (State, Vec<String>) {
    let mut state = State::default();
    let mut unreadable = Vec::new();
    for p in pools {
        let p = p.borrow();
        let Some(name) = p.metadata.name.clone() else {
            continue;
        };
        let Some(value) = p
            .status
            .as_ref()
            .and_then(|s| s.autoscaler.as_ref())
            .and_then(|a| a.memory.clone())
        else {
            continue;
        };
        let Ok(m) = serde_json::from_value::<PoolMemory>(value) else {
            unreadable.push(name);
            continue;
        };
        state.unneeded_since.extend(m.unneeded_since);
        state.deleting.extend(m.deleting);
        state.scale_ups.extend(m.scale_ups);
        if let Some(b) = m.backoff {
            state.backoff.insert(name.clone(), b);
        }
        if let Some(t) = m.seen_failure {
            state.seen_failures.insert(name, t);
        }
        state.last_scale_up = state.last_scale_up.max(m.last_scale_up);
        state.last_scale_down_failure =
            state.last_scale_down_failure.max(m.last_scale_down_failure);
    }
    (state, unreadable)
}

/// Each pool's share of `state`. `node_pools` names each node's pool (its
/// label); a node of no pool is not remembered (it is never autoscaled).
pub fn split(
    state: &State,
    pools: &[&str],
    node_pools: &HashMap<&str, &str>,
) -> BTreeMap<String, PoolMemory> {
    let mut out: BTreeMap<String, PoolMemory> = pools
        .iter()
        .map(|p| {
            let m = PoolMemory {
                backoff: state.backoff.get(*p).cloned(),
                seen_failure: state.seen_failures.get(*p).copied(),
                last_scale_up: state.last_scale_up,
                last_scale_down_failure: state.last_scale_down_failure,
                ..Default::default()
            };
            (p.to_string(), m)
        })
        .collect();
    for (node, since) in &state.unneeded_since {
        if let Some(m) = node_pools.get(node.as_str()).and_then(|p| out.get_mut(*p)) {
            m.unneeded_since.insert(node.clone(), *since);
        }
    }
    for (node, d) in &state.deleting {
        if let Some(m) = out.get_mut(&d.pool) {
            m.deleting.insert(node.clone(), d.clone());
        }
    }
    for r in &state.scale_ups {
        if let Some(m) = out.get_mut(&r.pool) {
            m.scale_ups.push(r.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_model::node_pool::{AutoscalerStatus, NodePoolSpec, NodePoolStatus};

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn stored(name: &str, m: &PoolMemory) -> NodePool {
        let mut p = NodePool::new(name, NodePoolSpec::default());
        p.status = Some(NodePoolStatus {
            autoscaler: Some(AutoscalerStatus {
                memory: Some(serde_json::to_value(m).expect("memory")),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    }

    #[test]
    fn what_a_restart_needs_comes_back_from_the_pools() {
        // spec: C4, C3 — unneeded times, removals in flight, backoff and
        // the scale-down delays survive a restart: written into the pools
        // and read back, the state is what it was.
        let mut state = State::default();
        state
            .unneeded_since
            .insert("a-1".into(), t("2026-01-01T00:00:00Z"));
        state
            .unneeded_since
            .insert("b-1".into(), t("2026-01-01T00:01:00Z"));
        state.deleting.insert(
            "a-2".into(),
            Deletion {
                pool: "a".into(),
                started_at: t("2026-01-01T00:02:00Z"),
                empty: false,
            },
        );
        state.scale_ups.push(ScaleUpRequest {
            pool: "b".into(),
            zone: "z1".into(),
            from: 1,
            to: 3,
            requested_at: t("2026-01-01T00:03:00Z"),
        });
        state.backoff.insert(
            "b".into(),
            Backoff::after_failure(None, t("2026-01-01T00:04:00Z"), "QUOTA_EXCEEDED", "quota"),
        );
        state
            .seen_failures
            .insert("b".into(), t("2026-01-01T00:04:00Z"));
        state.last_scale_up = Some(t("2026-01-01T00:03:00Z"));
        state.last_scale_down_failure = Some(t("2026-01-01T00:05:00Z"));
        let nodes = HashMap::from([("a-1", "a"), ("a-2", "a"), ("b-1", "b")]);
        let shares = split(&state, &["a", "b"], &nodes);
        let pools: Vec<NodePool> = shares.iter().map(|(n, m)| stored(n, m)).collect();
        assert_eq!(read(&pools), (state, Vec::new()));
        // A pool's share is only its own nodes'.
        assert_eq!(
            shares["a"].unneeded_since.keys().collect::<Vec<_>>(),
            ["a-1"]
        );
    }

    #[test]
    fn a_pool_whose_memory_is_unreadable_starts_afresh() {
        let mut bad = NodePool::new("a", NodePoolSpec::default());
        bad.status = Some(NodePoolStatus {
            autoscaler: Some(AutoscalerStatus {
                memory: Some(serde_json::json!({"unneededSince": 7})),
                ..Default::default()
            }),
            ..Default::default()
        });
        let good = stored(
            "b",
            &PoolMemory {
                last_scale_up: Some(t("2026-01-01T00:00:00Z")),
                ..Default::default()
            },
        );
        let (s, unreadable) = read(&[bad, good]);
        assert_eq!(unreadable, ["a"]);
        assert_eq!(s.last_scale_up, Some(t("2026-01-01T00:00:00Z")));
        assert!(s.unneeded_since.is_empty());
    }
}
