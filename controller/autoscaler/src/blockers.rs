//! Which pods keep their node from scale-down (C5, E2, E3, E5), judged per
//! pod with upstream's drain rules in upstream's order; the first that
//! applies decides. Mirror, DaemonSet, finished and long-terminating pods
//! stay behind without needing a place; every other pod must move.

use std::time::Instant;

use serde::Serialize;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Pod;
use sluice_model::policy::eviction::{
    drain_decision, DrainDecision, EvictionReason, PoolKind, SAFE_TO_EVICT,
};

use crate::budgets::Budgets;
use crate::options::BLOCKING_SYSTEM_POD_TIMEOUT;
use crate::template::{controller_of, is_daemon_set_pod};

/// The annotation marking a static pod's mirror.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Volumes listed here (comma-separated) are not local storage.
const SAFE_LOCAL_VOLUMES: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// Added to a pod's grace before it counts as long-terminating.
const LONG_TERMINATING_EXTRA: SignedDuration = SignedDuration::from_secs(30);
/// Controllers whose pods are recreated elsewhere.
const REPLICATING_KINDS: [&str; 4] = ["ReplicationController", "Job", "ReplicaSet", "StatefulSet"];

/// Upstream's BlockingPodReason names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BlockingReason {
    NotReplicated,
    LocalStorageRequested,
    NotSafeToEvictAnnotation,
    UnmovableKubeSystemPod,
    NotEnoughPdb,
}

impl BlockingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockingReason::NotReplicated => "NotReplicated",
            BlockingReason::LocalStorageRequested => "LocalStorageRequested",
            BlockingReason::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            BlockingReason::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            BlockingReason::NotEnoughPdb => "NotEnoughPdb",
        }
    }

    /// GKE's visibility message id for it.
    pub fn message_id(self) -> &'static str {
        match self {
            BlockingReason::NotReplicated => "no.scale.down.node.pod.not.backed.by.controller",
            BlockingReason::LocalStorageRequested => "no.scale.down.node.pod.has.local.storage",
            BlockingReason::NotSafeToEvictAnnotation => {
                "no.scale.down.node.pod.not.safe.to.evict.annotation"
            }
            BlockingReason::UnmovableKubeSystemPod => {
                "no.scale.down.node.pod.kube.system.unmovable"
            }
            BlockingReason::NotEnoughPdb => "no.scale.down.node.pod.not.enough.pdb",
        }
    }
}

/// A pod that blocks its node, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingPod {
    /// `namespace/name`.
    pub pod: String,
    pub reason: BlockingReason,
    /// The budget, for `NotEnoughPdb`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// When the protection ends (E2's 7 days), if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

/// What a drain does with one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Drain {
    /// Stays behind and needs no place (mirror, DaemonSet, finished).
    Stays,
    /// Must be placed elsewhere.
    Moves,
    Blocks(BlockingPod),
}

/// What the rules need besides the pod.
pub(crate) struct Rules<'a> {
    pub kind: PoolKind,
    pub spot: bool,
    pub now: Timestamp,
    pub local_storage_blocks: bool,
    pub budgets: &'a Budgets,
}

fn annotation<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn long_terminating(pod: &Pod, now: Timestamp) -> bool {
    let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    deleted.0 + SignedDuration::from_secs(grace) + LONG_TERMINATING_EXTRA < now
}

fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// When the pod started: `status.startTime` (set before the image pull,
/// which E3 counts toward the 7 days), else its creation.
fn started(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
}

/// How long `safe-to-evict: "false"` holds the pod against scale-down:
/// `None` not at all, `Some(None)` for good, `Some(Some(t))` until `t`.
/// The rule is the model's drain rule for scale-down (E2, E5); the
/// `Instant` is only an origin for its offsets. Spot pods get no extended
/// run time on Autopilot-style pools (E3).
fn protection(kind: PoolKind, spot: bool, pod: &Pod, now: Timestamp) -> Option<Option<Timestamp>> {
    if kind == PoolKind::Autopilot && spot {
        return None;
    }
    let origin = Instant::now();
    match drain_decision(EvictionReason::ScaleDown, kind, true, origin, origin) {
        DrainDecision::Evict => None,
        DrainDecision::Protected { until: None } => Some(None),
        DrainDecision::Protected { until: Some(t) } => {
            let span =
                SignedDuration::try_from(t.duration_since(origin)).unwrap_or(SignedDuration::MAX);
            let until = started(pod).map_or(now + span, |s| s + span);
            (now < until).then_some(Some(until))
        }
    }
}

fn local_storage(pod: &Pod) -> bool {
    let safe: Vec<&str> = annotation(pod, SAFE_LOCAL_VOLUMES)
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter(|v| !safe.contains(&v.name.as_str()))
        .any(|v| {
            v.host_path.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
        })
}

/// Judges one pod of a candidate node.
pub(crate) fn judge(pod: &Pod, rules: &Rules<'_>) -> Drain {
    let key = sluice_scheduler::pod_key(pod);
    let block = |reason, budget, until| {
        Drain::Blocks(BlockingPod {
            pod: key.clone(),
            reason,
            budget,
            until,
        })
    };
    if annotation(pod, MIRROR_ANNOTATION).is_some() || long_terminating(pod, rules.now) {
        return Drain::Stays;
    }
    if is_daemon_set_pod(pod) {
        return Drain::Stays;
    }
    let safe = annotation(pod, SAFE_TO_EVICT);
    if safe == Some("true") {
        // Upstream lets this override the rules below, budgets included;
        // the eviction itself still honours them.
        return Drain::Moves;
    }
    if terminal(pod) {
        return Drain::Stays;
    }
    if !controller_of(pod).is_some_and(|(kind, _)| REPLICATING_KINDS.contains(&kind)) {
        return block(BlockingReason::NotReplicated, None, None);
    }
    if pod.metadata.namespace.as_deref() == Some("kube-system") && !rules.budgets.guarded(pod) {
        let young =
            started(pod).is_none_or(|s| rules.now.duration_since(s) < BLOCKING_SYSTEM_POD_TIMEOUT);
        if young {
            return block(BlockingReason::UnmovableKubeSystemPod, None, None);
        }
    }
    if safe == Some("false") {
        if let Some(until) = protection(rules.kind, rules.spot, pod, rules.now) {
            return block(BlockingReason::NotSafeToEvictAnnotation, None, until);
        }
    }
    if rules.local_storage_blocks && local_storage(pod) {
        return block(BlockingReason::LocalStorageRequested, None, None);
    }
    if let Some(name) = rules.budgets.exhausted(pod) {
        return block(BlockingReason::NotEnoughPdb, Some(name), None);
    }
    Drain::Moves
}
