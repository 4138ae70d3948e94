//! Pods as processes: the agent's kubelet half.
//!
//! - [`spec`]: what a `Pod` manifest asks to run (every container),
//!   parsed with Kubernetes field names and defaults.
//! - [`env`]: a container's environment (the downward API's `fieldRef`,
//!   `$(VAR)` expansion of env values, command and args), pure.
//! - [`readiness`]: probe results to ready / serving / terminating, pure.
//! - [`eviction`]: the per-eviction state machine, pure, on the model
//!   crate's rules (`sluice_model::policy::eviction`, re-exported): grace
//!   caps per reason (E1, B5, A2, C4, U1), PodDisruptionBudget handling
//!   (E6, B5) and drain rules for `safe-to-evict: "false"` (E2–E5, A3, C5).
//! - [`disruption`]: the budgets and pods the agent knows, the evictions it
//!   allowed, and the gate the manager asks before an eviction (E6), pure,
//!   on the model crate's PodDisruptionBudget arithmetic.
//! - [`runtime`]: the I/O behind two traits, [`ProcessControl`] and
//!   [`Prober`], with the real implementations (namespaces via iproute2,
//!   processes with `setns` before `exec`, HTTP/TCP/exec probes).
//! - [`manager`]: [`PodManager`], the facade the sync loop drives.
//!
//! Time is never read inside the logic: callers pass a monotonic `Instant`
//! (from a [`MonoClock`]), so tests move it by hand and never sleep.

pub mod disruption;
pub mod env;
pub mod eviction;
pub mod manager;
pub mod probe_tls;
pub mod readiness;
pub mod runtime;
pub mod spec;

pub use disruption::{DisruptionBudgets, PdbSpec, PdbVerdict, PodHealth, SharedBudgets};
pub use eviction::{
    effective_grace, DrainDecision, EvictionOutcome, EvictionReason, NoPdb, PdbGate, PdbPolicy,
    PoolKind, EXTENDED_RUN,
};
pub use manager::{
    netns_name, set_netns_prefix, ContainerObservation, ContainerRunState, DrainProgress,
    EvictError, EvictionReport, EvictionState, PodEndpoint, PodEvent, PodManager, PodObservation,
    ShutdownReport, HELD_CORDONED, MAX_ADVERTISED_HOLD,
};
pub use readiness::EndpointConditions;
pub use runtime::{OsProber, OsProcessControl, Prober, ProcessControl};
pub use spec::{run_spec_from_manifest, PodRunSpec, Probe, ProbeAction, SpecError};

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A monotonic time source. The runner uses [`SystemMonoClock`]; tests use
/// [`ManualMonoClock`].
pub trait MonoClock: Send + Sync {
    fn now(&self) -> Instant;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMonoClock;

impl MonoClock for SystemMonoClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualMonoClock(Mutex<Instant>);

impl ManualMonoClock {
    pub fn new(start: Instant) -> Self {
        ManualMonoClock(Mutex::new(start))
    }
    pub fn advance(&self, d: Duration) {
        // A poisoned lock only means a test thread panicked holding it; the
        // Instant inside is still valid.
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *g += d;
    }
}

impl MonoClock for ManualMonoClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
