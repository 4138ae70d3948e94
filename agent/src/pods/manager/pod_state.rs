//! What the manager keeps per pod (its slot), per container and per drain,
//! and the kubelet's restart back-off.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::netns::netns_name;
use super::reports::Finished;
use crate::pods::eviction::{Eviction, EvictionReason};
use crate::pods::readiness::{Readiness, Thresholds};
use crate::pods::runtime::{ExitInfo, ProcId, NETNS_DIR};
use crate::pods::spec::PodRunSpec;

/// The kubelet's crash-loop back-off: first delay, doubling, and its cap.
pub const RESTART_BACKOFF_INITIAL: Duration = Duration::from_secs(10);
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long resets the back-off.
pub const RESTART_BACKOFF_RESET: Duration = Duration::from_secs(600);

/// The kubelet's crash-loop delay before restart number `restarts`.
pub fn restart_backoff(restarts: u32) -> Duration {
    let shift = restarts.saturating_sub(1).min(16);
    RESTART_BACKOFF_INITIAL
        .saturating_mul(1u32 << shift)
        .min(RESTART_BACKOFF_MAX)
}

pub(super) struct Drain {
    pub(super) reason: EvictionReason,
    pub(super) cordoned_at: Instant,
    /// False once uncordoned: the record stays for the report.
    pub(super) cordoned: bool,
    pub(super) members: BTreeSet<String>,
    pub(super) outcomes: BTreeMap<String, Finished>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    /// Waiting for the namespace, the link or a restart.
    Pending { not_before: Instant },
    /// `proc` is `None` for sandbox-only pods (no command).
    Running {
        proc: Option<ProcId>,
        since: Instant,
    },
    /// Ended and not to be started again (restartPolicy, or evicted).
    Stopped,
}

/// One container of a pod: its own process, restarts and readiness.
pub(super) struct Ctr {
    pub(super) run: Run,
    pub(super) readiness: Readiness,
    /// The last probe started for it (unique within the pod).
    pub(super) probe_seq: u64,
    pub(super) restarts: u32,
    /// How its last process ended, and when (the pod status's
    /// `lastState` / `state.terminated`).
    pub(super) last_exit: Option<(ExitInfo, Instant)>,
    /// When its last process started.
    pub(super) last_started: Option<Instant>,
}

impl Ctr {
    pub(super) fn live_proc(&self) -> Option<ProcId> {
        match self.run {
            Run::Running { proc, .. } => proc,
            _ => None,
        }
    }

    pub(super) fn stop(&mut self) {
        self.run = Run::Stopped;
        self.readiness.stopped();
    }
}

pub(super) struct Slot {
    pub(super) spec: PodRunSpec,
    pub(super) first_seen: Instant,
    pub(super) netns: String,
    pub(super) owns_netns: bool,
    pub(super) sandbox: bool,
    pub(super) network_ready: bool,
    /// One per `spec.containers`, same order.
    pub(super) ctrs: Vec<Ctr>,
    pub(super) reported_ready: bool,
    pub(super) probe_seq: u64,
    pub(super) eviction: Option<Eviction>,
    pub(super) evicted: bool,
    pub(super) removed: bool,
    pub(super) replacement: Option<PodRunSpec>,
    /// The `sluice.dev/evict` reason already acted on, so a file re-read
    /// does not restart the eviction (and its PDB patience).
    pub(super) evict_requested: Option<EvictionReason>,
}

impl Slot {
    pub(super) fn new(spec: PodRunSpec, now: Instant) -> Self {
        let (netns, owns_netns) = match &spec.netns {
            Some(n) => (n.clone(), false),
            None => (netns_name(&spec.key), true),
        };
        let ctrs = spec
            .containers
            .iter()
            .map(|c| Ctr {
                run: Run::Pending { not_before: now },
                readiness: Readiness::new(c.readiness.as_ref().map(Thresholds::from)),
                probe_seq: 0,
                restarts: 0,
                last_exit: None,
                last_started: None,
            })
            .collect();
        Slot {
            spec,
            first_seen: now,
            netns,
            owns_netns,
            sandbox: false,
            network_ready: false,
            ctrs,
            reported_ready: false,
            probe_seq: 0,
            eviction: None,
            evicted: false,
            removed: false,
            replacement: None,
            evict_requested: None,
        }
    }

    pub(super) fn netns_path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.netns)
    }

    pub(super) fn terminating(&self) -> bool {
        self.eviction.as_ref().is_some_and(Eviction::is_terminating)
    }

    /// Some container runs (or, for a sandbox, the namespace is up).
    pub(super) fn running(&self) -> bool {
        self.ctrs
            .iter()
            .any(|c| matches!(c.run, Run::Running { .. }))
    }

    /// Every container ready, as the kubelet's pod Ready condition.
    pub(super) fn ready(&self) -> bool {
        !self.ctrs.is_empty() && self.ctrs.iter().all(|c| c.readiness.is_ready())
    }

    /// Nothing runs and nothing will start again.
    pub(super) fn stopped(&self) -> bool {
        self.ctrs.iter().all(|c| c.run == Run::Stopped)
    }

    pub(super) fn live_procs(&self) -> Vec<ProcId> {
        self.ctrs.iter().filter_map(Ctr::live_proc).collect()
    }

    pub(super) fn stop_all(&mut self) {
        self.ctrs.iter_mut().for_each(Ctr::stop);
    }
}
