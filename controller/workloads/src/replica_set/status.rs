//! A ReplicaSet's status from the pods it owns, and when to look again for
//! pods that are Ready but not yet available.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::pods::{self, Availability};

/// How far past a pod's availability time to wake: availability is a
/// strict comparison, so waking at the very instant would find it not yet
/// available and wake again.
const PAST_BOUNDARY: SignedDuration = SignedDuration::from_millis(1);

/// The status of `rs` given its active owned pods, and the delay until the
/// first of them becomes available (Ready for `minReadySeconds`), if any
/// will. Conditions already on the status are kept.
pub(super) fn of(
    rs: &ReplicaSet,
    owned: &[&Pod],
    now: Timestamp,
) -> (ReplicaSetStatus, Option<SignedDuration>) {
    let spec = &rs.spec;
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);

    let mut fully_labeled = 0;
    let mut ready = 0;
    let mut available = 0;
    let mut next: Option<Timestamp> = None;
    for pod in owned {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        if template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        {
            fully_labeled += 1;
        }
        if pods::is_ready(pod) {
            ready += 1;
        }
        match pods::availability(pod, min_ready, now) {
            Availability::Yes => available += 1,
            Availability::After(at) => next = Some(next.map_or(at, |n| n.min(at))),
            Availability::No => {}
        }
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let status = ReplicaSetStatus {
        replicas: count(owned.len()),
        fully_labeled_replicas: Some(count(fully_labeled)),
        ready_replicas: Some(count(ready)),
        available_replicas: Some(count(available)),
        observed_generation: rs.metadata.generation,
        conditions: rs.status.as_ref().and_then(|s| s.conditions.clone()),
        terminating_replicas: None,
    };
    let requeue = next.map(|at| now.duration_until(at) + PAST_BOUNDARY);
    (status, requeue)
}
