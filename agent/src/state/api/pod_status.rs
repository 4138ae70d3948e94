//! The status a pod of this node should have, as the kubelet computes it
//! (pure): what the pod manager observes ([`PodObservation`]), the
//! addresses the pod was given and the node's, turned into a `PodStatus`;
//! and [`StatusBook`], which keeps what was last sent per pod and says
//! which writes (status, final delete) are due. The writes themselves are
//! in `status_writer.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Instant, SystemTime};

use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pods::runtime::ExitInfo;
use crate::pods::spec::RestartPolicy;
use crate::pods::{ContainerObservation, ContainerRunState, PodObservation};
use crate::state::model::ReportedStatus;

/// The manager's monotonic instants as wall-clock times: one anchor for the
/// agent's life, and whole seconds (the API's precision), so the same
/// instant always gives the same time and an unchanged pod computes an
/// unchanged status.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    mono: Instant,
    wall: SystemTime,
}

impl WallClock {
    pub fn new(mono: Instant, wall: SystemTime) -> Self {
        WallClock { mono, wall }
    }

    pub fn time(&self, at: Instant) -> Time {
        // Checked: an instant far from the anchor is no reason to panic.
        let wall = if at >= self.mono {
            self.wall.checked_add(at - self.mono)
        } else {
            self.wall.checked_sub(self.mono - at)
        };
        seconds(wall.unwrap_or(self.wall))
    }
}

/// `t` truncated to whole seconds, as the API stores times.
pub fn seconds(t: SystemTime) -> Time {
    let ts = Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH);
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// Everything the status is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodReport {
    /// `namespace/name`.
    pub key: String,
    pub uid: Option<String>,
    /// The pod's addresses (its status, or what the agent assigned).
    pub ips: Vec<IpAddr>,
    /// The node's InternalIPs.
    pub host_ips: Vec<IpAddr>,
    /// `spec.containers[].name`, for a pod the manager has not taken on.
    pub containers: Vec<String>,
    pub restart_policy: RestartPolicy,
    /// `None`: not taken on (held by a cordon, or just arrived).
    pub observed: Option<PodObservation>,
    /// The pod's API object is being deleted and nothing of it runs any
    /// more: time to remove the object.
    pub deletion_finished: bool,
    /// What the status read from the API says (kept by the first status
    /// an agent writes, e.g. after a restart).
    pub reported: ReportedStatus,
}

impl PodReport {
    /// The status read from the API, as far as the next one keeps it.
    fn seed(&self) -> PodStatus {
        let conditions = self
            .reported
            .conditions
            .iter()
            .map(|(type_, status, since)| PodCondition {
                type_: type_.clone(),
                status: status.clone(),
                last_transition_time: since.map(seconds),
                ..PodCondition::default()
            })
            .collect();
        PodStatus {
            start_time: self.reported.start_time.map(seconds),
            conditions: Some(conditions),
            ..PodStatus::default()
        }
    }
}

/// The phase, as the kubelet's `getPhase`: Pending while a container has
/// never started; Running while one runs or will restart; once nothing
/// runs and nothing will start again, Succeeded when every container
/// exited 0, else Failed (a deleted pod too: kubelets move deleted pods to
/// a terminal phase before removing them).
pub fn phase(obs: Option<&PodObservation>) -> &'static str {
    let Some(obs) = obs else {
        return "Pending";
    };
    let exited_ok = |c: &ContainerObservation| matches!(&c.state, ContainerRunState::Terminated { exit, .. } if exit.success());
    if obs.ended {
        return if obs.containers.iter().all(exited_ok) {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    let never_started = obs
        .containers
        .iter()
        .any(|c| matches!(c.state, ContainerRunState::Waiting { restarting: false }));
    if never_started {
        "Pending"
    } else {
        "Running"
    }
}

/// The exit code a container runtime reports: the process's own, or
/// 128 + the signal that ended it.
fn exit_code(e: &ExitInfo) -> i32 {
    e.code
        .or(e.signal.map(|s| 128 + s))
        .unwrap_or(128 + libc::SIGKILL)
}

fn terminated(e: &ExitInfo, started: Option<Time>, finished: Time) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit_code(e),
            signal: e.signal,
            reason: Some(if e.success() { "Completed" } else { "Error" }.into()),
            started_at: started,
            finished_at: Some(finished),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message: None,
        }),
        ..ContainerState::default()
    }
}

fn container_status(c: &ContainerObservation, clock: &WallClock) -> ContainerStatus {
    let state = match &c.state {
        ContainerRunState::Waiting { restarting: false } => waiting("ContainerCreating"),
        ContainerRunState::Waiting { restarting: true } => waiting("CrashLoopBackOff"),
        ContainerRunState::Running { since } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(clock.time(*since)),
            }),
            ..ContainerState::default()
        },
        ContainerRunState::Terminated {
            exit,
            started,
            finished,
        } => terminated(exit, started.map(|s| clock.time(s)), clock.time(*finished)),
    };
    let last_state = c
        .last
        .as_ref()
        .map(|(e, at)| terminated(e, None, clock.time(*at)));
    ContainerStatus {
        name: c.name.clone(),
        ready: c.ready,
        started: Some(matches!(c.state, ContainerRunState::Running { .. })),
        restart_count: i32::try_from(c.restarts).unwrap_or(i32::MAX),
        state: Some(state),
        last_state,
        ..ContainerStatus::default()
    }
}

/// The condition `type_` with `status`, its transition time kept from
/// `prev` while its status stays.
fn condition(
    prev: Option<&PodStatus>,
    type_: &str,
    ok: bool,
    reason: Option<String>,
    now: &Time,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let since = prev
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == status))
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: Some(since),
        reason: if ok { None } else { reason },
        ..PodCondition::default()
    }
}

/// The status `r` calls for. `prev`: what was last computed for the pod
/// (transition times are kept from it); `now`: the time of a transition.
pub fn pod_status(
    r: &PodReport,
    prev: Option<&PodStatus>,
    clock: &WallClock,
    now: SystemTime,
) -> PodStatus {
    let now = seconds(now);
    let obs = r.observed.as_ref();
    let phase = phase(obs);
    let containers: Vec<ContainerStatus> = match obs {
        Some(o) => o
            .containers
            .iter()
            .map(|c| container_status(c, clock))
            .collect(),
        None => r
            .containers
            .iter()
            .map(|name| ContainerStatus {
                name: name.clone(),
                started: Some(false),
                state: Some(waiting("ContainerCreating")),
                ..ContainerStatus::default()
            })
            .collect(),
    };
    let ready = obs.is_some_and(|o| o.ready);
    let not_ready = if matches!(phase, "Succeeded" | "Failed") {
        Some("PodCompleted".to_string())
    } else {
        Some("ContainersNotReady".to_string())
    };
    let conditions = vec![
        condition(prev, "PodScheduled", true, None, &now),
        condition(prev, "Initialized", true, None, &now),
        condition(prev, "ContainersReady", ready, not_ready.clone(), &now),
        condition(prev, "Ready", ready, not_ready, &now),
    ];
    let addr = |ips: &[IpAddr]| ips.first().map(ToString::to_string);
    PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions),
        pod_ip: addr(&r.ips),
        pod_ips: (!r.ips.is_empty()).then(|| {
            r.ips
                .iter()
                .map(|ip| PodIP { ip: ip.to_string() })
                .collect()
        }),
        host_ip: addr(&r.host_ips),
        host_ips: (!r.host_ips.is_empty()).then(|| {
            r.host_ips
                .iter()
                .map(|ip| HostIP { ip: ip.to_string() })
                .collect()
        }),
        // A start time once taken on, kept from the last one computed (the
        // anchor would not move it, but a restarted agent's would).
        start_time: prev
            .and_then(|p| p.start_time.clone())
            .or_else(|| obs.map(|o| clock.time(o.since))),
        container_statuses: Some(containers),
        ..PodStatus::default()
    }
}

/// One write to the API server.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// `pods/<name>/status`.
    Status { key: String, status: Box<PodStatus> },
    /// Delete the pod with grace 0 and this uid as precondition: its
    /// graceful deletion is over.
    Delete { key: String, uid: String },
}

/// What was last sent per pod, so only changes are written.
#[derive(Debug, Default)]
pub struct StatusBook {
    /// Per pod key: the uid it was sent for (a new pod under an old name
    /// starts afresh) and the status.
    sent: BTreeMap<String, (Option<String>, PodStatus)>,
    /// Deletes already asked, by uid (a new pod under the same name has
    /// another uid and is deleted on its own).
    deleted: BTreeSet<String>,
}

impl StatusBook {
    /// The writes `reports` (every pod of this node the agent knows) call
    /// for. Pods not reported any more are forgotten.
    pub fn writes(
        &mut self,
        reports: &[PodReport],
        clock: &WallClock,
        now: SystemTime,
    ) -> Vec<Write> {
        let mut out = Vec::new();
        let keys: BTreeSet<&str> = reports.iter().map(|r| r.key.as_str()).collect();
        self.sent.retain(|k, _| keys.contains(k.as_str()));
        let uids: BTreeSet<&str> = reports.iter().filter_map(|r| r.uid.as_deref()).collect();
        self.deleted.retain(|u| uids.contains(u.as_str()));
        for r in reports {
            let seed;
            let sent = self.sent.get(&r.key).filter(|(uid, _)| *uid == r.uid);
            let prev = match sent {
                Some((_, p)) => p,
                None => {
                    seed = r.seed();
                    &seed
                }
            };
            let status = pod_status(r, Some(prev), clock, now);
            if sent.map(|(_, s)| s) != Some(&status) {
                self.sent
                    .insert(r.key.clone(), (r.uid.clone(), status.clone()));
                out.push(Write::Status {
                    key: r.key.clone(),
                    status: Box::new(status),
                });
            }
            let Some(uid) = r.uid.as_ref().filter(|_| r.deletion_finished) else {
                continue;
            };
            if self.deleted.insert(uid.clone()) {
                out.push(Write::Delete {
                    key: r.key.clone(),
                    uid: uid.clone(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "pod_status_tests.rs"]
mod tests;
