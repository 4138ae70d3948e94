//! The per-eviction state machine, without I/O. The rules it runs on (the
//! reasons, their grace caps and PodDisruptionBudget handling, which pods a
//! drain may touch) are the model crate's `sluice_model::policy::eviction`,
//! re-exported here.
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

pub use sluice_model::policy::eviction::{
    drain_decision, effective_grace, DrainDecision, EvictionReason, PdbPolicy, PoolKind,
    CORDONED_AT_ANNOTATION, DRAIN_ANNOTATION, DRAIN_CORDONED_ANNOTATION, EVICT_ANNOTATION,
    EXTENDED_RUN, POOL_KIND_LABEL, SAFE_TO_EVICT,
};

/// Delay before retrying an eviction a PDB refused: every 5 s, as
/// `kubectl drain` retries a 429. (It once doubled to 60 s: a budget that
/// allowed the eviction a moment after the fourth refusal then held a node
/// upgrade's drain 40 s longer, 30 s per node instead of 11 in the
/// upgrade scene.)
pub const PDB_RETRY_INITIAL: Duration = Duration::from_secs(5);
/// Longest delay between two retries: the same, the delay does not grow.
pub const PDB_RETRY_MAX: Duration = PDB_RETRY_INITIAL;

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

    /// Since when the endpoints have been terminating, while SIGTERM has
    /// not gone out yet.
    pub fn marked_since(&self) -> Option<Instant> {
        match self.phase {
            Phase::Marked { since } => Some(since),
            _ => None,
        }
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
    crate::backoff::doubling(PDB_RETRY_INITIAL, PDB_RETRY_MAX, refusals.saturating_sub(1))
}
