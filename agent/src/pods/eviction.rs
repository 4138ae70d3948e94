//! Eviction decisions, without I/O: grace caps per reason, PodDisruptionBudget
//! handling, the per-eviction state machine and which pods a drain may touch.
//!
//! One eviction goes:
//!
//! ```text
//! Admission ──(PDB allows / ignored)──▶ Marked ──(signal)──▶ Terminating ──(exit)──▶ Done{Graceful}
//!     │  ▲                                                     │
//!     └──┘ refused: retry with backoff                         └──(deadline)──▶ Killing ──(exit)──▶ Done{Killed}
//!     └──(patience over, reason gives up)──▶ Done{Refused}
//! ```
//!
//! Entering `Marked` is the moment the pod's endpoints become terminating
//! (E6, H3: the `Local` health check stops counting the pod, P5: traffic
//! falls back to terminating pods only when nothing else serves). SIGTERM
//! follows only when the caller says the endpoints are out ([`Eviction::signal`]),
//! so new connections are steered away before the process starts closing;
//! the deadline is that moment plus min(terminationGracePeriodSeconds, cap
//! of the reason).

use std::time::{Duration, Instant};

const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// How long `safe-to-evict: "false"` protects a pod on Autopilot-style pools
/// (E2) and how long after cordon autoscaled blue-green leaves such pods (A3).
pub const EXTENDED_RUN: Duration = Duration::from_secs(7 * 86_400);

/// First delay before retrying an eviction a PDB refused; doubles per refusal.
pub const PDB_RETRY_INITIAL: Duration = Duration::from_secs(5);
/// Longest delay between two retries.
pub const PDB_RETRY_MAX: Duration = Duration::from_secs(60);

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
    pub const ALL: [EvictionReason; 6] = [
        EvictionReason::NodeUpgrade,
        EvictionReason::ScaleDown,
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
            EvictionReason::BluePoolDeletion => Some(60 * MIN),
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
            EvictionReason::UserDrain => PdbPolicy::RetryForever,
        }
    }

    /// The reason a `sluice.dev/drain` (Node) or `sluice.dev/evict` (Pod)
    /// annotation names; `Deletion` is not one (it is removing the Pod).
    pub fn from_annotation(value: &str) -> Option<Self> {
        match value {
            "NodeUpgrade" => Some(EvictionReason::NodeUpgrade),
            "ScaleDown" => Some(EvictionReason::ScaleDown),
            "BluePoolDeletion" => Some(EvictionReason::BluePoolDeletion),
            "AutoscaledBlueGreen" => Some(EvictionReason::AutoscaledBlueGreen),
            "UserDrain" => Some(EvictionReason::UserDrain),
            _ => None,
        }
    }

    /// The values [`Self::from_annotation`] accepts, for error messages.
    pub const ANNOTATION_VALUES: &'static str =
        "NodeUpgrade, ScaleDown, BluePoolDeletion, AutoscaledBlueGreen or UserDrain";

    pub fn as_str(self) -> &'static str {
        match self {
            EvictionReason::NodeUpgrade => "node-upgrade",
            EvictionReason::ScaleDown => "scale-down",
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

/// Answers the question the Eviction API asks PodDisruptionBudgets. The
/// caller owns the budgets (and decrements them when it answers yes).
pub trait PdbGate: Send {
    fn allow(&mut self, key: &str, reason: EvictionReason) -> bool;
}

/// No budgets: every eviction is allowed.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPdb;

impl PdbGate for NoPdb {
    fn allow(&mut self, _key: &str, _reason: EvictionReason) -> bool {
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionOutcome {
    /// The process ended on its own after SIGTERM (or was not running).
    Graceful { after: Duration },
    /// The grace ran out; SIGKILL.
    Killed { after: Duration },
    /// A PDB kept refusing and the reason gives up (ScaleDown); the pod runs on.
    Refused { attempts: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the PDB; `refusals` so far, next try at `retry_at`.
    Admission {
        retry_at: Instant,
        refusals: u32,
    },
    /// Endpoints terminating since `since`; SIGTERM not sent yet (waits for
    /// [`Eviction::signal`]).
    Marked {
        since: Instant,
    },
    /// SIGTERM sent at `since`; SIGKILL at `deadline`.
    Terminating {
        since: Instant,
        deadline: Instant,
    },
    /// SIGKILL sent; waiting for the process to be reaped.
    Killing {
        since: Instant,
    },
    Done(EvictionOutcome),
}

/// What the caller must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Mark the pod's endpoints terminating; SIGTERM comes with `signal`.
    MarkTerminating {
        grace: Duration,
    },
    /// Send SIGTERM; SIGKILL at `deadline`.
    Terminate {
        grace: Duration,
        deadline: Instant,
    },
    /// A PDB refused; the eviction will be retried at `retry_at`.
    Blocked {
        refusals: u32,
        retry_at: Instant,
    },
    /// PDB patience over for a forcing reason: evicting anyway.
    Forced {
        refusals: u32,
    },
    /// Send SIGKILL.
    Kill,
    Finished(EvictionOutcome),
}

#[derive(Debug, Clone)]
pub struct Eviction {
    pub reason: EvictionReason,
    pub requested_at: Instant,
    pub grace: Duration,
    pub phase: Phase,
}

impl Eviction {
    pub fn new(reason: EvictionReason, pod_grace: Duration, now: Instant) -> Self {
        Eviction {
            reason,
            requested_at: now,
            grace: effective_grace(pod_grace, reason),
            phase: Phase::Admission {
                retry_at: now,
                refusals: 0,
            },
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// The endpoints are terminating (SIGTERM sent or about to be).
    pub fn is_terminating(&self) -> bool {
        matches!(
            self.phase,
            Phase::Marked { .. } | Phase::Terminating { .. } | Phase::Killing { .. }
        )
    }

    /// Endpoints are terminating and SIGTERM has not gone out yet.
    pub fn awaits_signal(&self) -> bool {
        matches!(self.phase, Phase::Marked { .. })
    }

    /// The pod's terminating endpoints are out (maps, health servers): time
    /// for SIGTERM. The grace runs from now. `None` unless
    /// [`Eviction::awaits_signal`].
    pub fn signal(&mut self, now: Instant) -> Option<Action> {
        let Phase::Marked { .. } = self.phase else {
            return None;
        };
        let deadline = now + self.grace;
        self.phase = Phase::Terminating {
            since: now,
            deadline,
        };
        Some(Action::Terminate {
            grace: self.grace,
            deadline,
        })
    }

    /// When this eviction next needs a `poll` without outside input.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Admission { retry_at, .. } => Some(retry_at),
            Phase::Terminating { deadline, .. } => Some(deadline),
            Phase::Marked { .. } | Phase::Killing { .. } | Phase::Done(_) => None,
        }
    }

    /// Shorten the grace (a second request with an earlier deadline wins, as
    /// a second delete with a shorter grace does in Kubernetes).
    pub fn tighten(&mut self, reason: EvictionReason, pod_grace: Duration, now: Instant) {
        let grace = effective_grace(pod_grace, reason);
        match &mut self.phase {
            Phase::Terminating { deadline, .. } => {
                if now + grace < *deadline {
                    *deadline = now + grace;
                    self.reason = reason;
                }
            }
            Phase::Marked { .. } => {
                if grace < self.grace {
                    self.grace = grace;
                    self.reason = reason;
                }
            }
            Phase::Admission { .. } => {
                // Not started: the new request replaces the old one, so a
                // PDB-ignoring reason (B5) is not held up by an earlier drain.
                *self = Eviction::new(reason, pod_grace, now);
            }
            Phase::Killing { .. } | Phase::Done(_) => {}
        }
    }

    /// Advance to `now`. `exited`: the process is no longer running (or never
    /// was). `pdb` is asked only while admission is pending and the reason
    /// honours budgets. Returns the actions to carry out, in order.
    pub fn poll(
        &mut self,
        key: &str,
        now: Instant,
        exited: bool,
        pdb: &mut dyn PdbGate,
    ) -> Vec<Action> {
        let finish = |o: EvictionOutcome| (Phase::Done(o), vec![Action::Finished(o)]);
        // One phase per call: marking the endpoints terminating is always a
        // step of its own, so the caller can publish them before any signal.
        let (phase, actions) = match self.phase {
            Phase::Admission { retry_at, .. } if now < retry_at => return Vec::new(),
            Phase::Admission { refusals, .. } => {
                let policy = self.reason.pdb_policy();
                let waited = now.saturating_duration_since(self.requested_at);
                let allowed = match policy {
                    PdbPolicy::Ignore => true,
                    _ => pdb.allow(key, self.reason),
                };
                let mark = Action::MarkTerminating { grace: self.grace };
                let marked = Phase::Marked { since: now };
                if allowed {
                    (marked, vec![mark])
                } else {
                    let refusals = refusals.saturating_add(1);
                    match policy {
                        PdbPolicy::RetryThenForce(p) if waited >= p => {
                            (marked, vec![Action::Forced { refusals }, mark])
                        }
                        PdbPolicy::RetryThenGiveUp(p) if waited >= p => {
                            finish(EvictionOutcome::Refused { attempts: refusals })
                        }
                        _ => {
                            let mut retry_at = now + backoff(refusals);
                            // Come back exactly when patience runs out.
                            if let PdbPolicy::RetryThenForce(p) | PdbPolicy::RetryThenGiveUp(p) =
                                policy
                            {
                                retry_at = retry_at.min(self.requested_at + p);
                            }
                            (
                                Phase::Admission { retry_at, refusals },
                                vec![Action::Blocked { refusals, retry_at }],
                            )
                        }
                    }
                }
            }
            // Ended on its own, signalled or not: nothing to wait for.
            Phase::Marked { since } | Phase::Terminating { since, .. } if exited => {
                finish(EvictionOutcome::Graceful {
                    after: now.saturating_duration_since(since),
                })
            }
            Phase::Terminating { since, deadline } if now >= deadline => {
                (Phase::Killing { since }, vec![Action::Kill])
            }
            Phase::Killing { since } if exited => finish(EvictionOutcome::Killed {
                after: now.saturating_duration_since(since),
            }),
            Phase::Marked { .. }
            | Phase::Terminating { .. }
            | Phase::Killing { .. }
            | Phase::Done(_) => return Vec::new(),
        };
        self.phase = phase;
        actions
    }
}

/// Delay before the next try after `refusals` refusals.
pub fn backoff(refusals: u32) -> Duration {
    let shift = refusals.saturating_sub(1).min(16);
    PDB_RETRY_INITIAL
        .saturating_mul(1u32 << shift)
        .min(PDB_RETRY_MAX)
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
        (EvictionReason::NodeUpgrade, PoolKind::Standard) => DrainDecision::Evict,
        (EvictionReason::ScaleDown | EvictionReason::NodeUpgrade, PoolKind::Autopilot) => {
            DrainDecision::Protected {
                until: Some(pod_started + EXTENDED_RUN),
            }
        }
    }
}
