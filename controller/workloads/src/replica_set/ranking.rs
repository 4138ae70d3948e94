//! Which pods go first when a ReplicaSet has too many: upstream's
//! `ActivePodsWithRanks` order, the cheapest pod to lose first.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::pods;

/// The annotation a user sets to say which pods to keep (higher cost) or
/// lose (lower) on scale-down.
pub const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The `count` pods of `owned` to delete, cheapest first:
///
/// 1. not on a node before on a node;
/// 2. Pending, then Unknown, then Running;
/// 3. not Ready before Ready;
/// 4. lower `pod-deletion-cost` first;
/// 5. on a node with more of this ReplicaSet's pods first (upstream counts
///    the pods of the Deployment's other ReplicaSets too; only this
///    ReplicaSet's pods are known here);
/// 6. both Ready: Ready more recently first, times compared on upstream's
///    logarithmic scale (`LogarithmicScaleDown`), so pods Ready for about as
///    long tie and are then picked by UID;
/// 7. more container restarts first (regular containers, then sidecars);
/// 8. created more recently first, on the same logarithmic scale.
///
/// Pods equal in all of these go by name, so the choice is deterministic.
pub(super) fn pods_to_delete<'a>(owned: &[&'a Pod], count: usize, now: Timestamp) -> Vec<&'a Pod> {
    let mut on_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in owned {
        *on_node.entry(node_of(p)).or_default() += 1;
    }
    let mut ranked: Vec<(&Pod, usize)> = owned
        .iter()
        .map(|p| (*p, on_node.get(node_of(p)).copied().unwrap_or(0)))
        .collect();
    ranked.sort_by(|a, b| {
        compare(a.0, a.1, b.0, b.1, now).then_with(|| a.0.metadata.name.cmp(&b.0.metadata.name))
    });
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_rank(pod: &Pod) -> u8 {
    // Upstream's table knows these three; any other phase reads as 0.
    match pods::phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// The annotation's value; absent or not an integer counts as 0, as
/// upstream ignores a value it cannot read.
pub(super) fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST_ANNOTATION))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

/// The highest restart count among regular containers, and among sidecars
/// (init containers with `restartPolicy: Always`).
fn max_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    (regular, sidecar)
}

/// `floor(log2(now - t))` in nanoseconds, -1 for a time not in the past:
/// the bucket upstream compares ages by.
fn log_bucket(t: Timestamp, now: Timestamp) -> i64 {
    let ns = now.duration_since(t).as_nanos();
    if ns > 0 {
        i64::from(ns.ilog2())
    } else {
        -1
    }
}

/// Order two times so the more recent comes first; an unknown time comes
/// before a known one. With `now`, times in the same logarithmic bucket
/// fall to the UID order.
fn more_recent_first(
    a: Option<Timestamp>,
    b: Option<Timestamp>,
    ua: &str,
    ub: &str,
    now: Timestamp,
) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) if x == y => Ordering::Equal,
        (Some(x), Some(y)) => match log_bucket(x, now).cmp(&log_bucket(y, now)) {
            Ordering::Equal => ua.cmp(ub),
            o => o,
        },
    }
}

fn compare(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize, now: Timestamp) -> Ordering {
    let (na, nb) = (node_of(a), node_of(b));
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let (ready_a, ready_b) = (pods::is_ready(a), pods::is_ready(b));
    let assigned = if na != nb && (na.is_empty() || nb.is_empty()) {
        (!na.is_empty()).cmp(&!nb.is_empty())
    } else {
        Ordering::Equal
    };
    assigned
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| ready_a.cmp(&ready_b))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| {
            if ready_a && ready_b {
                more_recent_first(
                    pods::ready_since(a),
                    pods::ready_since(b),
                    &uid(a),
                    &uid(b),
                    now,
                )
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| more_recent_first(created(a), created(b), &uid(a), &uid(b), now))
}
