//! The Deployment's status: counts summed from its ReplicaSets' statuses,
//! the `Available` condition, and the `Progressing` condition with its
//! deadline (upstream's `calculateStatus`, `syncRolloutStatus`,
//! `checkPausedConditions`, `requeueStuckDeployment`).

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::context::Ctx;
use super::workset::{spec_replicas, status_counts, Workset};

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";

/// The condition reasons upstream writes.
pub mod reasons {
    pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    pub const RS_UPDATED: &str = "ReplicaSetUpdated";
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    pub const PAUSED: &str = "DeploymentPaused";
    pub const RESUMED: &str = "DeploymentResumed";
    pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
    pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
}

/// A stuck rollout is looked at again no sooner than this (upstream
/// requeues with rate limiting when less than a second is left).
const MIN_PROGRESS_RECHECK: SignedDuration = SignedDuration::from_secs(1);

/// The Deployment as this sync changes it before its final status: the
/// status upstream writes along the way (conditions, collision count) and
/// the revision annotation.
pub(super) struct DState {
    pub status: DeploymentStatus,
    /// The revision annotation as it is, then as it should be.
    pub revision: Option<String>,
    pub revision_changed: bool,
}

impl DState {
    pub fn of(ctx: &Ctx) -> Self {
        DState {
            status: ctx.d.status.clone().unwrap_or_default(),
            revision: ctx
                .d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(super::annotations::REVISION))
                .cloned(),
            revision_changed: false,
        }
    }

    pub fn set_revision(&mut self, revision: Option<String>) {
        if revision.is_some() && revision != self.revision {
            self.revision = revision;
            self.revision_changed = true;
        }
    }

    pub fn set_condition(&mut self, c: DeploymentCondition) {
        set_condition(&mut self.status, c);
    }
}

pub(super) fn condition<'a>(
    s: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    s.conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some(type_))
}

pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some(type_.into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Upstream's `SetDeploymentCondition`: the same status and reason is no
/// change at all; the same status keeps its transition time.
pub(super) fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let type_ = c.type_.clone().unwrap_or_default();
    if let Some(cur) = condition(s, &type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &type_);
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

pub(super) fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_.as_deref() != Some(type_));
    }
}

/// Upstream's `checkPausedConditions`: with a deadline, mark `Progressing`
/// Unknown when paused or resumed, so the pause does not count against the
/// deadline; a timed-out rollout keeps saying so.
pub(super) fn note_pause(ctx: &Ctx, dst: &mut DState) {
    if ctx.progress_deadline().is_none() {
        return;
    }
    let reason = condition(&dst.status, PROGRESSING).and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(reasons::TIMED_OUT) {
        return;
    }
    let paused_noted = reason.as_deref() == Some(reasons::PAUSED);
    if ctx.paused() && !paused_noted {
        let c = new_condition(
            PROGRESSING,
            "Unknown",
            reasons::PAUSED,
            "Deployment is paused".into(),
            ctx.now,
        );
        dst.set_condition(c);
    } else if !ctx.paused() && paused_noted {
        let c = new_condition(
            PROGRESSING,
            "Unknown",
            reasons::RESUMED,
            "Deployment is resumed".into(),
            ctx.now,
        );
        dst.set_condition(c);
    }
}

/// Upstream's `calculateStatus`: counts from the ReplicaSets' statuses
/// (`updatedReplicas` the new one's pods), `Available` when at least
/// `replicas − maxUnavailable` pods are.
pub(super) fn calculate(ctx: &Ctx, ws: &Workset, dst: &DState) -> DeploymentStatus {
    let all = ws.all();
    let available = ws.sum(&all, |r| status_counts(r).1);
    let total = ws.sum(&all, spec_replicas);
    let mut s = DeploymentStatus {
        observed_generation: Some(ctx.generation()),
        replicas: Some(ws.sum(&all, |r| status_counts(r).0)),
        updated_replicas: Some(ws.new.map_or(0, |i| status_counts(ws.rs(i)).0)),
        ready_replicas: Some(ws.sum(&all, |r| status_counts(r).2)),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: dst.status.collision_count,
        conditions: dst.status.conditions.clone(),
        terminating_replicas: None,
    };
    let c = if available >= ctx.replicas - ctx.max_unavailable() {
        new_condition(
            AVAILABLE,
            "True",
            reasons::MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            ctx.now,
        )
    } else {
        new_condition(
            AVAILABLE,
            "False",
            reasons::MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            ctx.now,
        )
    };
    set_condition(&mut s, c);
    s
}

fn n(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// Upstream's `DeploymentComplete`: every replica updated and available,
/// none left over, and this generation observed.
pub(super) fn complete(ctx: &Ctx, s: &DeploymentStatus) -> bool {
    n(s.updated_replicas) == ctx.replicas
        && n(s.replicas) == ctx.replicas
        && n(s.available_replicas) == ctx.replicas
        && s.observed_generation.unwrap_or(0) >= ctx.generation()
}

/// Upstream's `DeploymentProgressing`: more updated, fewer old, more ready
/// or more available pods than the status last written says.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// When the `Progressing` condition's deadline passes, if it can.
fn deadline(ctx: &Ctx, s: &DeploymentStatus) -> Option<Timestamp> {
    let c = condition(s, PROGRESSING)?;
    let since = c.last_update_time.as_ref()?.0;
    since.checked_add(ctx.progress_deadline()?).ok()
}

/// Upstream's `DeploymentTimedOut`.
fn timed_out(ctx: &Ctx, s: &DeploymentStatus) -> bool {
    let Some(c) = condition(s, PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(reasons::NEW_RS_AVAILABLE) => false,
        Some(reasons::TIMED_OUT) => true,
        _ => deadline(ctx, s).is_some_and(|at| at < ctx.now),
    }
}

/// Upstream's `syncRolloutStatus`: the status of [`calculate`], with
/// `Progressing` saying whether the rollout is done, moving, or past its
/// deadline.
pub(super) fn rollout(ctx: &Ctx, ws: &Workset, dst: &DState) -> DeploymentStatus {
    let mut s = calculate(ctx, ws, dst);
    if ctx.progress_deadline().is_none() {
        remove_condition(&mut s, PROGRESSING);
        return s;
    }
    let current = condition(&dst.status, PROGRESSING).cloned();
    let already_complete = n(s.replicas) == n(s.updated_replicas)
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(reasons::NEW_RS_AVAILABLE);
    if already_complete {
        return s;
    }
    let subject = match ws.new {
        Some(i) => format!(
            "ReplicaSet {:?}",
            ws.rs(i).metadata.name.as_deref().unwrap_or("")
        ),
        None => format!("Deployment {:?}", ctx.name),
    };
    if complete(ctx, &s) {
        let c = new_condition(
            PROGRESSING,
            "True",
            reasons::NEW_RS_AVAILABLE,
            format!("{subject} has successfully progressed."),
            ctx.now,
        );
        set_condition(&mut s, c);
    } else if progressing(&dst.status, &s) {
        let mut c = new_condition(
            PROGRESSING,
            "True",
            reasons::RS_UPDATED,
            format!("{subject} is progressing."),
            ctx.now,
        );
        // Progress moves lastUpdateTime (and so the deadline) on; the
        // transition time stays while the condition stays True.
        if let Some(cur) = current.filter(|c| c.status.as_deref() == Some("True")) {
            c.last_transition_time = cur.last_transition_time;
        }
        remove_condition(&mut s, PROGRESSING);
        set_condition(&mut s, c);
    } else if timed_out(ctx, &s) {
        let c = new_condition(
            PROGRESSING,
            "False",
            reasons::TIMED_OUT,
            format!("{subject} has timed out progressing."),
            ctx.now,
        );
        set_condition(&mut s, c);
    }
    s
}

/// Upstream's `requeueStuckDeployment`: a rollout neither complete nor
/// timed out is looked at again when its deadline passes, even if nothing
/// it watches changes.
pub(super) fn progress_recheck(ctx: &Ctx, s: &DeploymentStatus) -> Option<SignedDuration> {
    let c = condition(s, PROGRESSING)?;
    if complete(ctx, s) || c.reason.as_deref() == Some(reasons::TIMED_OUT) {
        return None;
    }
    let at = deadline(ctx, s)?;
    Some(ctx.now.duration_until(at).max(MIN_PROGRESS_RECHECK))
}
