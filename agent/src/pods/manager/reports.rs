//! What the manager tells the runner and the status file: pod events, the
//! endpoint state of each pod, and where evictions and drains stand.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pods::eviction::{Eviction, EvictionOutcome, EvictionReason, Phase};
use crate::pods::readiness::EndpointConditions;
use crate::pods::runtime::ExitInfo;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    /// The pod's namespace exists: plug its link.
    SandboxReady {
        key: String,
        netns: PathBuf,
    },
    Started {
        key: String,
        container: String,
        restarts: u32,
    },
    Exited {
        key: String,
        container: String,
        exit: ExitInfo,
    },
    ReadinessChanged {
        key: String,
        ready: bool,
    },
    /// The pod's endpoints are terminating (E6); SIGTERM follows once they
    /// are out (see [`PodManager::hold_sigterm`]).
    EndpointsTerminating {
        key: String,
        reason: EvictionReason,
        grace: Duration,
    },
    /// SIGTERM sent; SIGKILL at `deadline`.
    Terminating {
        key: String,
        reason: EvictionReason,
        grace: Duration,
        deadline: Instant,
    },
    /// A PodDisruptionBudget refused the eviction; retried at `retry_at`.
    EvictionBlocked {
        key: String,
        reason: EvictionReason,
        refusals: u32,
        retry_at: Instant,
    },
    /// PDB patience ran out for a reason that then forces (U1, A2).
    EvictionForced {
        key: String,
        reason: EvictionReason,
    },
    EvictionDone {
        key: String,
        reason: EvictionReason,
        outcome: EvictionOutcome,
    },
    /// The pod left the desired state and everything it had is gone: unplug.
    Removed {
        key: String,
    },
    Error {
        key: String,
        message: String,
    },
}

/// A pod's endpoint as the control side needs it (for the maps and the
/// `Local` health servers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEndpoint {
    pub key: String,
    pub ips: Vec<IpAddr>,
    pub conditions: EndpointConditions,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictError {
    UnknownPod(String),
}

impl std::fmt::Display for EvictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvictError::UnknownPod(k) => write!(f, "no pod {k} on this node"),
        }
    }
}

impl std::error::Error for EvictError {}

/// What [`PodManager::shutdown`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Processes sent SIGTERM.
    pub signalled: usize,
    /// Of those, still running after their grace: SIGKILL.
    pub killed: usize,
    /// Not reaped even after SIGKILL (should not happen).
    pub not_reaped: usize,
}

/// Where one pod's eviction stands, in the words of the status file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionState {
    /// Requested, the PodDisruptionBudget not asked yet.
    Pending,
    /// A PDB refused; retried (E6).
    RefusedByPdbRetrying,
    /// Endpoints terminating; SIGTERM sent or about to be.
    Terminating,
    ExitedGracefully,
    KilledAfterGrace,
    /// A PDB kept refusing and the reason gives up (scale-down, C5).
    RefusedByPdbGaveUp,
    /// `safe-to-evict: "false"` keeps it until `until` (`None`: this kind
    /// of drain never evicts it; E2–E5, A3).
    Protected {
        until: Option<Instant>,
    },
    /// The drain was called off (uncordon) before this pod was evicted.
    NotEvicted,
    /// Its API object went without this agent seeing its process stop:
    /// deleted meanwhile by someone else, or before it ever ran here.
    Deleted,
}

impl EvictionState {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionState::Pending => "pending",
            EvictionState::RefusedByPdbRetrying => "refused-by-pdb-retrying",
            EvictionState::Terminating => "terminating",
            EvictionState::ExitedGracefully => "exited-gracefully",
            EvictionState::KilledAfterGrace => "killed-after-grace",
            EvictionState::RefusedByPdbGaveUp => "refused-by-pdb-gave-up",
            EvictionState::Protected { .. } => "protected",
            EvictionState::NotEvicted => "not-evicted",
            EvictionState::Deleted => "deleted",
        }
    }

    pub fn of(o: EvictionOutcome) -> Self {
        match o {
            EvictionOutcome::Graceful { .. } => EvictionState::ExitedGracefully,
            EvictionOutcome::Killed { .. } => EvictionState::KilledAfterGrace,
            EvictionOutcome::Refused { .. } => EvictionState::RefusedByPdbGaveUp,
        }
    }
}

/// One pod's eviction (or why there is none yet), for the status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionReport {
    pub key: String,
    pub reason: EvictionReason,
    pub state: EvictionState,
    /// min(terminationGracePeriodSeconds, cap of the reason).
    pub grace: Duration,
    /// Since the eviction was requested; for an ended one, until it ended.
    pub elapsed: Duration,
    /// PodDisruptionBudget refusals so far.
    pub refusals: u32,
}

/// An eviction that ended, kept for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Finished {
    pub(super) reason: EvictionReason,
    pub(super) grace: Duration,
    pub(super) requested_at: Instant,
    pub(super) ended_at: Instant,
    pub(super) outcome: EvictionOutcome,
}

impl Finished {
    pub(super) fn report(&self, key: &str) -> EvictionReport {
        EvictionReport {
            key: key.to_string(),
            reason: self.reason,
            state: EvictionState::of(self.outcome),
            grace: self.grace,
            elapsed: self.ended_at.saturating_duration_since(self.requested_at),
            refusals: match self.outcome {
                EvictionOutcome::Refused { attempts } => attempts,
                _ => 0,
            },
        }
    }
}

/// How many ended evictions outside a drain (deletions, single evictions)
/// the report keeps.
pub(super) const SINGLE_REPORTS: usize = 32;

/// Why a pod assigned to this node does not run yet.
pub const HELD_CORDONED: &str = "node cordoned";

/// Where each pod of a drain stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrainProgress {
    pub reason: Option<EvictionReason>,
    /// The drain is in force (not uncordoned); its report stays after
    /// uncordon until the next drain begins.
    pub cordoned: bool,
    /// Every member pod, in key order.
    pub pods: Vec<EvictionReport>,
    /// Eviction requested, not yet admitted (no refusal yet).
    pub pending: Vec<String>,
    /// Refused by a PDB at least once; (key, refusals).
    pub blocked: Vec<(String, u32)>,
    pub terminating: Vec<String>,
    /// Ended, with how (a pod whose object went unseen has no outcome:
    /// it is only in `pods`, as [`EvictionState::Deleted`]).
    pub done: Vec<(String, EvictionOutcome)>,
    /// `safe-to-evict: "false"` pods this drain leaves alone; `until`: when
    /// the drain will evict them anyway (`None`: never by this drain).
    pub protected: Vec<(String, Option<Instant>)>,
    /// Nothing left that this drain will do by itself.
    pub finished: bool,
}

/// Where an eviction under way stands.
pub(super) fn live_report(key: &str, e: &Eviction, now: Instant) -> EvictionReport {
    let (state, refusals) = match e.phase {
        Phase::Admission { refusals: 0, .. } => (EvictionState::Pending, 0),
        Phase::Admission { refusals, .. } => (EvictionState::RefusedByPdbRetrying, refusals),
        Phase::Marked { .. } | Phase::Terminating { .. } | Phase::Killing { .. } => {
            (EvictionState::Terminating, 0)
        }
        Phase::Done(o) => (EvictionState::of(o), 0),
    };
    EvictionReport {
        key: key.to_string(),
        reason: e.reason,
        state,
        grace: e.grace,
        elapsed: now.saturating_duration_since(e.requested_at),
        refusals,
    }
}
