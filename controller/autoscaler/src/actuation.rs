//! Carrying a [`crate::Decision`] out, the pure part, shared by the
//! controller's loop and the simulation: what a pool's model fields give
//! the autoscaler ([`extras`]), the taint writes ([`taint_patch`]), how
//! far a removal's drain has come ([`drain_step`]), and what the pool's
//! `status.autoscaler` becomes ([`pool_status`]).

use std::collections::{BTreeMap, HashSet};

use crate::snapshot::TO_BE_DELETED_TAINT;
use crate::state::Deletion;
use crate::{PoolExtras, ReservationAffinity, TpuSlice, ZoneTarget};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Node, Pod};
use sluice_model::node_pool::{AutoscalerStatus, NodePool, NodeToRemove, ReservationType};
use sluice_model::policy::eviction::PoolKind;

/// Upstream's `--max-pod-eviction-time`: evictions a budget refuses are
/// retried this long, then the removal is given up and the node kept.
pub const MAX_POD_EVICTION_TIME: SignedDuration = SignedDuration::from_secs(120);
/// Upstream's `--max-graceful-termination-sec` (GKE's fixed 10 minutes,
/// E1): an evicted pod's grace is at most this.
pub const MAX_GRACE_SECONDS: i64 = 600;
/// Upstream's headroom over the grace before the drain stops waiting.
pub const EVICTION_HEADROOM: SignedDuration = SignedDuration::from_secs(30);
/// A pod's grace when its spec gives none (Kubernetes' default).
const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The node label naming an Autopilot-style pool (E2).
pub const POOL_KIND_LABEL: &str = "sluice.dev/pool-kind";

/// What the pool's model fields give the autoscaler beyond the pool.
pub fn extras(pool: &NodePool) -> PoolExtras {
    let config = &pool.spec.config;
    let reservation_affinity = match config.reservation_affinity.as_ref() {
        None => ReservationAffinity::Any,
        Some(r) => match r.consume_reservation_type {
            ReservationType::AnyReservation => ReservationAffinity::Any,
            ReservationType::NoReservation => ReservationAffinity::None,
            ReservationType::SpecificReservation => ReservationAffinity::Specific(r.values.clone()),
        },
    };
    let tpu = pool
        .spec
        .placement_policy
        .as_ref()
        .and_then(|p| p.tpu_topology.clone())
        .map(|topology| TpuSlice {
            topology,
            // Admission requires it with a topology; a stored pool
            // without it is refused by the slice's own check.
            chips_per_host: config
                .capacity
                .tpu
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or(0),
        });
    let kind = config
        .labels
        .get(POOL_KIND_LABEL)
        .and_then(|v| PoolKind::from_label(v))
        .unwrap_or_default();
    let target_sizes = pool
        .status
        .as_ref()
        .and_then(|s| s.autoscaler.as_ref())
        .map(|a| a.target_sizes.clone())
        .unwrap_or_default();
    PoolExtras {
        price_per_hour: config.price_per_hour,
        reservation_affinity,
        tpu,
        kind,
        target_sizes,
    }
}

/// Where one removal's drain is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The taint is not in the cache yet: the scheduler may still place
    /// pods there, so nothing is evicted and nothing deleted.
    Wait,
    /// Evict these pods (`namespace/name`), each with its capped grace.
    Evict(Vec<(String, i64)>),
    /// Every pod is gone (or its grace ran out): the pool deletes it.
    HandOver,
    /// A budget still refuses after the retry window: keep the node.
    GiveUp(String),
}

/// A pod the drain must move: not a DaemonSet's or a mirror pod (they go
/// with the node), not finished.
fn must_move(pod: &Pod) -> bool {
    let daemon = pod.metadata.owner_references.as_ref().is_some_and(|o| {
        o.iter()
            .any(|r| r.controller == Some(true) && r.kind == "DaemonSet")
    });
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let done = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    !(daemon || mirror || done)
}

/// The grace an eviction gives `pod`: its own, at most 10 minutes (E1).
pub fn eviction_grace(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .clamp(0, MAX_GRACE_SECONDS)
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The next step of removing `node` (`pods`: those bound to it), started
/// as `deletion` says. Upstream's actuation: evictions retried until
/// [`MAX_POD_EVICTION_TIME`], then the evicted pods waited for up to the
/// capped grace plus headroom, then the node goes whatever is left (C4:
/// drained for at most 10 minutes, then forced). It is handed over only
/// once the load balancers have let it go (`released`, as
/// `OutOfBalancers::may_delete` answers), so none still sends it
/// connections as it goes.
pub fn drain_step(
    node: &Node,
    pods: &[&Pod],
    deletion: &Deletion,
    released: Result<(), Option<Timestamp>>,
    now: Timestamp,
) -> Step {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == TO_BE_DELETED_TAINT));
    if !tainted {
        return Step::Wait;
    }
    let hand_over = if released.is_ok() {
        Step::HandOver
    } else {
        Step::Wait
    };
    let moving: Vec<&Pod> = pods.iter().copied().filter(|p| must_move(p)).collect();
    if moving.is_empty() {
        return hand_over;
    }
    let refused: Vec<&Pod> = moving
        .iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let since = deletion.started_at;
    if !refused.is_empty() {
        if now >= since + MAX_POD_EVICTION_TIME {
            let names: Vec<String> = refused.iter().map(|p| key(p)).collect();
            return Step::GiveUp(format!(
                "failed to drain the node: pods could not be evicted within {}s: {}",
                MAX_POD_EVICTION_TIME.as_secs(),
                names.join(", ")
            ));
        }
        return Step::Evict(
            refused
                .iter()
                .map(|p| (key(p), eviction_grace(p)))
                .collect(),
        );
    }
    let deadline = since
        + MAX_POD_EVICTION_TIME
        + SignedDuration::from_secs(MAX_GRACE_SECONDS)
        + EVICTION_HEADROOM;
    if now >= deadline {
        hand_over
    } else {
        Step::Wait
    }
}

/// The zone's size as the pool holds it now: the autoscaler's, else the
/// reconciler's target, else the nodes there.
fn current_size(pool: &NodePool, zone: &str, registered: usize) -> i32 {
    let status = pool.status.as_ref();
    status
        .and_then(|s| s.autoscaler.as_ref())
        .and_then(|a| a.target_sizes.get(zone).copied())
        .or_else(|| {
            status?
                .zones
                .iter()
                .find(|z| z.zone == zone)
                .map(|z| z.target_node_count)
        })
        .unwrap_or_else(|| i32::try_from(registered).unwrap_or(i32::MAX))
}

/// What one pass changes of a pool.
pub struct PoolChange<'a> {
    /// The decision's sizes for this pool.
    pub targets: Vec<&'a ZoneTarget>,
    /// Drained nodes to hand to the pool: (node, zone, nodes of the zone).
    pub handed_over: Vec<(&'a str, &'a str, usize)>,
    /// Node names that exist (in the cache, or as the pool's instances).
    pub live: &'a HashSet<&'a str>,
    pub memory: Option<serde_json::Value>,
}

/// The pool's `status.autoscaler` after this pass: the decision's sizes,
/// each handed-over node named with its zone one smaller (as upstream's
/// `DeleteNodes` lowers the group's target by the nodes it deletes), names
/// of nodes gone dropped, and the memory. `None` when nothing changes.
pub fn pool_status(pool: &NodePool, change: &PoolChange<'_>) -> Option<AutoscalerStatus> {
    let before = pool
        .status
        .as_ref()
        .and_then(|s| s.autoscaler.clone())
        .unwrap_or_default();
    let mut after = before.clone();
    let mut sizes: BTreeMap<String, i32> = after.target_sizes.clone();
    for t in &change.targets {
        sizes.insert(t.zone.clone(), t.to.max(0));
    }
    after
        .nodes_to_remove
        .retain(|n| change.live.contains(n.name.as_str()));
    for (node, zone, registered) in &change.handed_over {
        if after.nodes_to_remove.iter().any(|n| n.name == *node) {
            continue;
        }
        let now = sizes
            .get(*zone)
            .copied()
            .unwrap_or_else(|| current_size(pool, zone, *registered));
        sizes.insert(zone.to_string(), (now - 1).max(0));
        after.nodes_to_remove.push(NodeToRemove {
            name: node.to_string(),
            zone: zone.to_string(),
        });
    }
    after.target_sizes = sizes;
    after.memory = change.memory.clone();
    (after != before).then_some(after)
}

#[cfg(test)]
mod tests;

/// The merge patch that makes `change` on `node` (its whole taint list,
/// and the cordon), naming the resourceVersion it was decided on so a
/// node changed since refuses it (409) rather than losing a taint another
/// writer set; `None` when the node already is as asked.
pub fn taint_patch(node: &Node, change: &crate::TaintChange) -> Option<serde_json::Value> {
    use crate::TaintChange;
    let spec = node.spec.clone().unwrap_or_default();
    let mut taints = spec.taints.clone().unwrap_or_default();
    let cordoned = spec.unschedulable == Some(true);
    let (changed, unschedulable) = match change {
        TaintChange::Add { taint, cordon, .. } => {
            let has = taints
                .iter()
                .any(|t| t.key == taint.key && t.effect == taint.effect);
            if !has {
                taints.push(taint.clone());
            }
            (!has || (*cordon && !cordoned), *cordon || cordoned)
        }
        TaintChange::Remove { key, uncordon, .. } => {
            let before = taints.len();
            taints.retain(|t| t.key != *key);
            (
                taints.len() != before || (*uncordon && cordoned),
                cordoned && !*uncordon,
            )
        }
    };
    if !changed {
        return None;
    }
    let taints = serde_json::to_value(&taints).ok()?;
    Some(serde_json::json!({
        "metadata": {"resourceVersion": node.metadata.resource_version},
        "spec": {
            "taints": taints,
            "unschedulable": if unschedulable { serde_json::Value::Bool(true) } else { serde_json::Value::Null },
        }
    }))
}
