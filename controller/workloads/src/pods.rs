//! What both controllers read of a pod: whether it still counts, whether it
//! is Ready and since when, and when it becomes available.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Counts towards a ReplicaSet: not Succeeded or Failed and not being
/// deleted. An evicted or deleted pod therefore gets a replacement at once.
pub(crate) fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// `status.phase`, empty when unset.
pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The `Ready` condition is `True`.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When a Ready pod turned Ready (`lastTransitionTime`), if it says.
pub(crate) fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// Whether a pod is available to its ReplicaSet at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Availability {
    /// Not Ready, or Ready without a transition time while
    /// `minReadySeconds` is set: nothing will change without a new status.
    No,
    Yes,
    /// Ready, and available once `now` is past this time.
    After(Timestamp),
}

/// Upstream's `IsPodAvailable`: Ready, and Ready for longer than
/// `minReadySeconds` (strictly: at exactly the boundary it is not yet).
pub(crate) fn availability(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Availability {
    if !is_ready(pod) {
        return Availability::No;
    }
    if min_ready_seconds <= 0 {
        return Availability::Yes;
    }
    let Some(since) = ready_since(pod) else {
        return Availability::No;
    };
    let at = since.saturating_add(SignedDuration::from_secs(i64::from(min_ready_seconds)));
    match at {
        Ok(at) if at < now => Availability::Yes,
        Ok(at) => Availability::After(at),
        Err(_) => Availability::No,
    }
}
