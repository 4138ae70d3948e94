//! What the manager sees of each pod, for the pod status the agent writes
//! back to the API server (`state::api::pod_status` turns it into a
//! `PodStatus`): per container its state, readiness and restarts; per pod
//! whether it has ended for good. Plain data, times as the manager's
//! `Instant`s.

use std::time::{Duration, Instant};

use super::pod_state::{Ctr, Run, Slot};
use super::PodManager;
use crate::pods::eviction::Eviction;
use crate::pods::runtime::ExitInfo;
use crate::pods::spec::RestartPolicy;

/// One container as the kubelet would report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerRunState {
    /// Not running: never started yet (`ContainerCreating`), or waiting for
    /// a restart after `last` (`CrashLoopBackOff`).
    Waiting { restarting: bool },
    /// Running since `since` (a container without a command: since its
    /// namespace came up).
    Running { since: Instant },
    /// Ended and not to be started again.
    Terminated {
        exit: ExitInfo,
        started: Option<Instant>,
        finished: Instant,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerObservation {
    pub name: String,
    pub state: ContainerRunState,
    pub ready: bool,
    pub restarts: u32,
    /// How the previous run ended, for a running or waiting container that
    /// ran before (`lastState.terminated`).
    pub last: Option<(ExitInfo, Instant)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodObservation {
    pub key: String,
    /// When the agent took the pod on (`status.startTime`).
    pub since: Instant,
    pub containers: Vec<ContainerObservation>,
    /// Every container ready (the Ready condition).
    pub ready: bool,
    /// Being stopped (an eviction or deletion under way).
    pub stopping: bool,
    /// Nothing runs and nothing will start again: stopped per its
    /// `restartPolicy`, evicted, or deleted.
    pub ended: bool,
    pub restart_policy: RestartPolicy,
}

fn container(name: &str, c: &Ctr) -> ContainerObservation {
    let state = match c.run {
        Run::Running { since, .. } => ContainerRunState::Running { since },
        Run::Pending { .. } => ContainerRunState::Waiting {
            restarting: c.last_exit.is_some(),
        },
        Run::Stopped => match c.last_exit {
            Some((exit, finished)) => ContainerRunState::Terminated {
                exit,
                started: c.last_started,
                finished,
            },
            // Stopped before it ever ran (a pod deleted while pending):
            // the kubelet reports such a container as never started.
            None => ContainerRunState::Waiting { restarting: false },
        },
    };
    let last = match state {
        ContainerRunState::Terminated { .. } => None,
        _ => c.last_exit,
    };
    ContainerObservation {
        name: name.to_string(),
        state,
        ready: c.readiness.is_ready(),
        restarts: c.restarts,
        last,
    }
}

impl Slot {
    fn observe(&self) -> PodObservation {
        let containers = self
            .spec
            .containers
            .iter()
            .zip(&self.ctrs)
            .map(|(spec, c)| container(&spec.name, c))
            .collect();
        PodObservation {
            key: self.spec.key.clone(),
            since: self.first_seen,
            containers,
            ready: self.ready(),
            stopping: self.eviction.as_ref().is_some_and(|e| !e.is_done()),
            ended: self.stopped() && self.eviction.as_ref().is_none_or(Eviction::is_done),
            restart_policy: self.spec.restart_policy,
        }
    }
}

impl PodManager {
    /// What the manager sees of every pod it has taken on (not those a
    /// cordon holds back).
    pub fn observations(&self) -> Vec<PodObservation> {
        self.pods.values().map(Slot::observe).collect()
    }

    /// Whether `key` has nothing running and nothing to start any more (or
    /// is not known at all): a deleted pod can then be removed from the API.
    pub fn has_ended(&self, key: &str) -> bool {
        self.pods
            .get(key)
            .is_none_or(|s| s.stopped() && s.eviction.as_ref().is_none_or(Eviction::is_done))
    }

    /// Whether the manager has taken `key` on (a pod a cordon holds back
    /// has not been).
    pub fn knows(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// Stop `key` because its API object is being deleted: endpoints
    /// terminating, SIGTERM, SIGKILL after `grace` (what is left of the
    /// deletion's grace), as an eviction for `Deletion`. A later call with
    /// an earlier end shortens it, never lengthens it. The pod is not
    /// restarted; it stays known (ended) until it leaves the desired state.
    pub fn delete(&mut self, key: &str, grace: Duration, now: Instant) {
        use crate::pods::eviction::EvictionReason;
        // A pod held by a cordon never started: nothing to stop.
        self.held.remove(key);
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        if s.evicted || s.stopped() && s.eviction.is_none() {
            return;
        }
        match &mut s.eviction {
            Some(e) if !e.is_done() => e.tighten(EvictionReason::Deletion, grace, now),
            _ => s.eviction = Some(Eviction::new(EvictionReason::Deletion, grace, now)),
        }
        self.step(key, now);
    }
}
