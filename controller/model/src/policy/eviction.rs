//! Why pods are evicted and what each reason allows, without I/O: the
//! reasons a drain or an eviction names (the `sluice.dev/drain` and
//! `sluice.dev/evict` annotations), the grace-period cap and the
//! PodDisruptionBudget handling of each (E1, E6, B5, A2, C4, C5, U1), and
//! which pods a drain may touch under `safe-to-evict: "false"` (E2–E5, A3).
//!
//! The agent's eviction state machine (`agent/src/pods/eviction.rs`) runs
//! on these rules; the controller's decision loops read the same ones.

use std::time::{Duration, Instant};

/// Annotation on a Node asking its agent to drain it, naming the reason
/// (which sets the grace-period cap and PDB handling): `NodeUpgrade`,
/// `ScaleDown`, `BlueGreenDrain`, `BluePoolDeletion`, `AutoscaledBlueGreen`
/// or `UserDrain`.
pub const DRAIN_ANNOTATION: &str = "sluice.dev/drain";
/// Annotation an agent sets (`"true"`) on its Node with the cordon it made
/// for a drain through the API, so that only its own cordon is undone when
/// the drain ends, also after a restart (a user's cordon stays).
pub const DRAIN_CORDONED_ANNOTATION: &str = "sluice.dev/drain-cordoned";

/// When an upgrade cordoned the node (RFC 3339), written by the controller
/// with the cordon: the clock autoscaled blue-green's 7-day protection
/// counts from (A3), read by the planner and the node's agent alike, so
/// that neither an agent's restart nor its first sight of the drain moves
/// it.
pub const CORDONED_AT_ANNOTATION: &str = "sluice.dev/cordoned-at";
/// Annotation on a Pod asking the agent of its node to evict it once, with
/// the same reason names (and grace caps, PDB handling) as a drain.
pub const EVICT_ANNOTATION: &str = "sluice.dev/evict";
/// The annotation a pod uses to ask not to be evicted (E2–E5, A3, C5); only
/// `"false"` asks for anything.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Node label naming its pool's kind: `standard` (default) or `autopilot`.
pub const POOL_KIND_LABEL: &str = "sluice.dev/pool-kind";

const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// How long `safe-to-evict: "false"` protects a pod on Autopilot-style pools
/// (E2) and how long after cordon autoscaled blue-green leaves such pods (A3).
pub const EXTENDED_RUN: Duration = Duration::from_secs(7 * 86_400);

/// Why a pod is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EvictionReason {
    /// Surge / blue-green node upgrade drain: grace ≤ 1 h, PDBs honoured up
    /// to 1 h, then forced (U1, U2, E1).
    NodeUpgrade,
    /// Cluster-autoscaler scale-down: grace ≤ 10 min (C4, E1); a PDB that
    /// still refuses after 10 min makes the eviction give up (C5: the
    /// autoscaler does not break PDBs; the controller abandons the node).
    ScaleDown,
    /// Blue-green phase 3: blue drained in batches, budgets honoured for
    /// good and grace ≤ 60 min; never forced: what a budget holds or a long
    /// grace keeps is left for phase 5 (B3).
    BlueGreenDrain,
    /// Blue-green phase 5: the pods are deleted, not evicted: PDBs ignored,
    /// grace ≤ 60 min (B5).
    BluePoolDeletion,
    /// Autoscaled blue-green after the wait: grace ≤ 24 h, PDBs honoured up
    /// to 1 h, then forced (A2).
    AutoscaledBlueGreen,
    /// A user's drain (`kubectl drain`): the pod's own grace, PDBs retried
    /// for as long as it takes (kubectl's default has no timeout).
    UserDrain,
    /// The pod left the desired state (an API delete): the pod's own grace,
    /// no PDB check (deletes bypass the eviction API).
    Deletion,
}

/// What a refusing PodDisruptionBudget leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PdbPolicy {
    /// Not asked at all.
    Ignore,
    /// Retried with backoff until allowed.
    RetryForever,
    /// Retried until this long after the request, then evicted anyway.
    RetryThenForce(Duration),
    /// Retried until this long after the request, then abandoned.
    RetryThenGiveUp(Duration),
}

impl EvictionReason {
    pub const ALL: [EvictionReason; 7] = [
        EvictionReason::NodeUpgrade,
        EvictionReason::ScaleDown,
        EvictionReason::BlueGreenDrain,
        EvictionReason::BluePoolDeletion,
        EvictionReason::AutoscaledBlueGreen,
        EvictionReason::UserDrain,
        EvictionReason::Deletion,
    ];

    /// Upper bound on the grace period; `None`: the pod's own.
    pub fn grace_cap(self) -> Option<Duration> {
        match self {
            EvictionReason::NodeUpgrade => Some(HOUR),
            EvictionReason::ScaleDown => Some(10 * MIN),
            EvictionReason::BlueGreenDrain | EvictionReason::BluePoolDeletion => Some(60 * MIN),
            EvictionReason::AutoscaledBlueGreen => Some(DAY),
            EvictionReason::UserDrain | EvictionReason::Deletion => None,
        }
    }

    pub fn pdb_policy(self) -> PdbPolicy {
        match self {
            EvictionReason::NodeUpgrade | EvictionReason::AutoscaledBlueGreen => {
                PdbPolicy::RetryThenForce(HOUR)
            }
            EvictionReason::ScaleDown => PdbPolicy::RetryThenGiveUp(10 * MIN),
            EvictionReason::BluePoolDeletion | EvictionReason::Deletion => PdbPolicy::Ignore,
            EvictionReason::UserDrain | EvictionReason::BlueGreenDrain => PdbPolicy::RetryForever,
        }
    }

    /// The reason a `sluice.dev/drain` (Node) or `sluice.dev/evict` (Pod)
    /// annotation names; `Deletion` is not one (it is removing the Pod).
    pub fn from_annotation(value: &str) -> Option<Self> {
        match value {
            "NodeUpgrade" => Some(EvictionReason::NodeUpgrade),
            "ScaleDown" => Some(EvictionReason::ScaleDown),
            "BlueGreenDrain" => Some(EvictionReason::BlueGreenDrain),
            "BluePoolDeletion" => Some(EvictionReason::BluePoolDeletion),
            "AutoscaledBlueGreen" => Some(EvictionReason::AutoscaledBlueGreen),
            "UserDrain" => Some(EvictionReason::UserDrain),
            _ => None,
        }
    }

    /// The values [`Self::from_annotation`] accepts, for error messages.
    pub const ANNOTATION_VALUES: &'static str =
        "NodeUpgrade, ScaleDown, BlueGreenDrain, BluePoolDeletion, AutoscaledBlueGreen or UserDrain";

    pub fn as_str(self) -> &'static str {
        match self {
            EvictionReason::NodeUpgrade => "node-upgrade",
            EvictionReason::ScaleDown => "scale-down",
            EvictionReason::BlueGreenDrain => "blue-green-drain",
            EvictionReason::BluePoolDeletion => "blue-pool-deletion",
            EvictionReason::AutoscaledBlueGreen => "autoscaled-blue-green",
            EvictionReason::UserDrain => "user-drain",
            EvictionReason::Deletion => "deletion",
        }
    }
}

/// min(terminationGracePeriodSeconds, cap of the reason).
pub fn effective_grace(pod_grace: Duration, reason: EvictionReason) -> Duration {
    match reason.grace_cap() {
        Some(cap) => pod_grace.min(cap),
        None => pod_grace,
    }
}

/// The kind of node pool, which changes what `safe-to-evict: "false"` buys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolKind {
    #[default]
    Standard,
    Autopilot,
}

impl PoolKind {
    /// The value of the Node label `sluice.dev/pool-kind`.
    pub fn from_label(value: &str) -> Option<Self> {
        match value {
            "standard" => Some(PoolKind::Standard),
            "autopilot" => Some(PoolKind::Autopilot),
            _ => None,
        }
    }
}

/// Whether a drain may evict a pod now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainDecision {
    Evict,
    /// Not evicted by this drain until `until` (`None`: not by this kind of
    /// drain at all); reported so the controller can decide (E2–E5).
    Protected {
        until: Option<Instant>,
    },
}

/// Which pods a drain of `reason` may evict, on a pool of `pool`, for a pod
/// that started at `pod_started` on a node cordoned at `cordoned_at`.
///
/// - no `safe-to-evict: "false"`: evict;
/// - user drain, blue-pool deletion, pod deletion: evict (E4: user-initiated
///   drains are not held off; B5: phase 5 deletes pods);
/// - autoscaled blue-green: protected until 7 days after cordon (A3), on any
///   pool;
/// - scale-down: Standard: never by scale-down (C5, E5: the node stays);
///   Autopilot: protected until 7 days after the pod started (E2);
/// - node upgrade: Standard: evict (E5: no protection from upgrades);
///   Autopilot: protected until 7 days after the pod started (E2).
///
/// "Started" is when this agent first saw the pod, before its namespace and
/// process were made: the seed counts image pull time toward the 7 days (E3),
/// so the clock starts before the container runs.
pub fn drain_decision(
    reason: EvictionReason,
    pool: PoolKind,
    safe_to_evict_false: bool,
    pod_started: Instant,
    cordoned_at: Instant,
) -> DrainDecision {
    if !safe_to_evict_false {
        return DrainDecision::Evict;
    }
    match (reason, pool) {
        (
            EvictionReason::UserDrain | EvictionReason::BluePoolDeletion | EvictionReason::Deletion,
            _,
        ) => DrainDecision::Evict,
        (EvictionReason::AutoscaledBlueGreen, _) => DrainDecision::Protected {
            until: Some(cordoned_at + EXTENDED_RUN),
        },
        (EvictionReason::ScaleDown, PoolKind::Standard) => DrainDecision::Protected { until: None },
        (EvictionReason::NodeUpgrade | EvictionReason::BlueGreenDrain, PoolKind::Standard) => {
            DrainDecision::Evict
        }
        (
            EvictionReason::ScaleDown
            | EvictionReason::NodeUpgrade
            | EvictionReason::BlueGreenDrain,
            PoolKind::Autopilot,
        ) => DrainDecision::Protected {
            until: Some(pod_started + EXTENDED_RUN),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN_: Duration = Duration::from_secs(60);

    #[test]
    fn grace_is_capped_per_reason() {
        // spec: E1 — up to 1 h for node upgrades, up to 10 min for scale-down.
        let long = Duration::from_secs(7_200);
        assert_eq!(effective_grace(long, EvictionReason::NodeUpgrade), HOUR);
        assert_eq!(effective_grace(long, EvictionReason::ScaleDown), 10 * MIN_);
        // spec: B5 — phase 5 deletes with the grace capped at 60 min.
        assert_eq!(
            effective_grace(long, EvictionReason::BluePoolDeletion),
            HOUR
        );
        // spec: B3 — phase 3 gives no pod more than phase 5 would, and
        // retries budgets for good: what they hold is left for phase 5.
        assert_eq!(effective_grace(long, EvictionReason::BlueGreenDrain), HOUR);
        assert_eq!(
            EvictionReason::BlueGreenDrain.pdb_policy(),
            PdbPolicy::RetryForever
        );
        // spec: A2 — grace periods up to 24 h after the wait.
        let two_days = Duration::from_secs(2 * 86_400);
        assert_eq!(
            effective_grace(two_days, EvictionReason::AutoscaledBlueGreen),
            DAY
        );
        // spec: E6 — the pod's own grace when it is shorter than the cap,
        // and uncapped for a user's drain or a deletion.
        let short = Duration::from_secs(30);
        for r in EvictionReason::ALL {
            assert_eq!(effective_grace(short, r), short, "{r:?}");
        }
        assert_eq!(
            effective_grace(two_days, EvictionReason::UserDrain),
            two_days
        );
        assert_eq!(
            effective_grace(two_days, EvictionReason::Deletion),
            two_days
        );
    }

    #[test]
    fn budgets_are_honoured_per_reason() {
        // spec: U1, A2 — PDBs honoured up to 1 h, then forced.
        assert_eq!(
            EvictionReason::NodeUpgrade.pdb_policy(),
            PdbPolicy::RetryThenForce(HOUR)
        );
        assert_eq!(
            EvictionReason::AutoscaledBlueGreen.pdb_policy(),
            PdbPolicy::RetryThenForce(HOUR)
        );
        // spec: C5 — scale-down never breaks a budget: it gives up.
        assert_eq!(
            EvictionReason::ScaleDown.pdb_policy(),
            PdbPolicy::RetryThenGiveUp(10 * MIN_)
        );
        // spec: B5 — phase 5 deletes: budgets ignored.
        assert_eq!(
            EvictionReason::BluePoolDeletion.pdb_policy(),
            PdbPolicy::Ignore
        );
        assert_eq!(EvictionReason::Deletion.pdb_policy(), PdbPolicy::Ignore);
        // spec: E6 — a refused eviction is retried (kubectl drain: forever).
        assert_eq!(
            EvictionReason::UserDrain.pdb_policy(),
            PdbPolicy::RetryForever
        );
    }

    #[test]
    fn annotations_name_every_reason_but_deletion() {
        // spec: E6 — a drain or an eviction names its reason, which sets its
        // grace cap and budget handling; a deletion is not requested by
        // annotation (it is removing the Pod).
        let listed: Vec<&str> = EvictionReason::ANNOTATION_VALUES
            .split([',', ' '])
            .filter(|w| !w.is_empty() && *w != "or")
            .collect();
        for r in EvictionReason::ALL {
            let name = format!("{r:?}");
            let parsed = EvictionReason::from_annotation(&name);
            if r == EvictionReason::Deletion {
                assert_eq!(parsed, None);
                assert!(!listed.contains(&name.as_str()), "{listed:?}");
            } else {
                assert_eq!(parsed, Some(r));
                assert!(listed.contains(&name.as_str()), "{name}: {listed:?}");
            }
        }
        for bad in ["", "scale-down", "scaledown", " ScaleDown"] {
            assert_eq!(EvictionReason::from_annotation(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn safe_to_evict_false_protects_per_pool_and_reason() {
        let started = Instant::now();
        let cordoned = started + HOUR;
        let d = |r, pool, protected| drain_decision(r, pool, protected, started, cordoned);
        use EvictionReason::*;
        use PoolKind::*;
        // Without the annotation every drain evicts.
        for r in EvictionReason::ALL {
            assert_eq!(d(r, Autopilot, false), DrainDecision::Evict, "{r:?}");
        }
        // spec: E2 — Autopilot: protected from scale-down and upgrades for 7
        // days from the pod's start.
        let week_from_start = DrainDecision::Protected {
            until: Some(started + EXTENDED_RUN),
        };
        assert_eq!(d(ScaleDown, Autopilot, true), week_from_start);
        assert_eq!(d(NodeUpgrade, Autopilot, true), week_from_start);
        // spec: E5 — Standard: scale-down blocked indefinitely, upgrades not.
        assert_eq!(
            d(ScaleDown, Standard, true),
            DrainDecision::Protected { until: None }
        );
        assert_eq!(d(NodeUpgrade, Standard, true), DrainDecision::Evict);
        // spec: E4 — a user's drain is not held off; B5 deletes.
        for pool in [Standard, Autopilot] {
            assert_eq!(d(UserDrain, pool, true), DrainDecision::Evict);
            assert_eq!(d(BluePoolDeletion, pool, true), DrainDecision::Evict);
        }
        // spec: A3 — autoscaled blue-green leaves them 7 days from cordon.
        assert_eq!(
            d(AutoscaledBlueGreen, Standard, true),
            DrainDecision::Protected {
                until: Some(cordoned + EXTENDED_RUN)
            }
        );
    }

    #[test]
    fn pool_kind_label_values() {
        // spec: E2, E5 — the pool kind decides what safe-to-evict buys.
        assert_eq!(PoolKind::from_label("standard"), Some(PoolKind::Standard));
        assert_eq!(PoolKind::from_label("autopilot"), Some(PoolKind::Autopilot));
        assert_eq!(PoolKind::from_label("Autopilot"), None);
        assert_eq!(PoolKind::default(), PoolKind::Standard);
    }
}
