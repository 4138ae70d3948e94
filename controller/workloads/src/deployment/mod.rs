//! The Deployment controller's decisions (upstream
//! `pkg/controller/deployment`): for one Deployment, the ReplicaSets of
//! its namespace and its pods, which ReplicaSets to create, update
//! (scale, annotate, adopt, release) and delete, and the Deployment's
//! status and revision.
//!
//! One call is one upstream sync: a rolling update moves by one step
//! (grow the new ReplicaSet within `maxSurge`, else shrink old ones within
//! `maxUnavailable`) and waits for the ReplicaSets' statuses to change
//! before the next. Recreate scales every old ReplicaSet to 0 and waits
//! until their pods are gone before making the new one whole. A paused
//! Deployment only resizes; a change of `spec.replicas` mid-rollout
//! resizes every ReplicaSet in proportion.
//!
//! Counts come from the ReplicaSets' statuses, as upstream: pods are read
//! only to know whether Recreate's old pods are gone.

mod annotations;
mod context;
mod hash;
mod history;
mod new_rs;
mod recreate;
mod rolling;
mod scale;
mod status;
mod workset;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::WorkloadError;
use context::{Ctx, Strategy};
use status::DState;
use workset::Workset;

pub use annotations::{DESIRED_REPLICAS, MAX_REPLICAS, REVISION, REVISION_HISTORY};
pub use context::check;
pub use hash::{pod_template_hash, POD_TEMPLATE_HASH_LABEL};
pub use status::{reasons, AVAILABLE, PROGRESSING};

/// One write to make for a Deployment.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaSetAction {
    /// Create this ReplicaSet (named `<deployment>-<pod-template-hash>`).
    Create(Box<ReplicaSet>),
    /// Replace this ReplicaSet with this object (its `resourceVersion` as
    /// read, so a concurrent change makes it a conflict and a new sync):
    /// resized, annotated, adopted or released.
    Update(Box<ReplicaSet>),
    /// Delete this ReplicaSet (an old revision beyond the history limit);
    /// `uid` is the precondition.
    Delete { name: String, uid: String },
}

/// What one sync of a Deployment decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Creations, then updates, then deletions, each sorted by name.
    pub actions: Vec<ReplicaSetAction>,
    /// The Deployment's `deployment.kubernetes.io/revision` annotation, when
    /// it must change (written with the status, as upstream).
    pub revision: Option<String>,
    /// The status to write (compare with the current one to skip a no-op
    /// write).
    pub status: DeploymentStatus,
    /// Sync again after this long even if nothing watched changes: when a
    /// stalled rollout reaches its progress deadline, or at once after a
    /// hash collision.
    pub requeue_after: Option<SignedDuration>,
}

/// What the sync ended with, for the status.
enum Ending {
    /// Counts and `Available` only (paused, resized, being deleted).
    Status,
    /// Counts and both conditions, with the progress deadline.
    Rollout,
    /// The new ReplicaSet's name is taken: only the raised
    /// `collisionCount` is written.
    Collision,
}

/// Decide one sync of `d`. `replica_sets` are the ReplicaSets of its
/// namespace (all of them: orphans matching its selector are adopted, and
/// a name collision is seen); `pods` those of its namespace (read by
/// Recreate only).
pub fn reconcile(
    d: &Deployment,
    replica_sets: &[ReplicaSet],
    pods: &[Pod],
    now: Timestamp,
) -> Result<Plan, WorkloadError> {
    let ctx = Ctx::of(d, now)?;
    let mut ws = Workset::claim(&ctx, replica_sets);
    let mut dst = DState::of(&ctx);
    let ending = decide(&ctx, &mut ws, &mut dst, replica_sets, pods);
    let (status, requeue_after) = match ending {
        Ending::Status => (status::calculate(&ctx, &ws, &dst), None),
        Ending::Rollout => {
            let s = status::rollout(&ctx, &ws, &dst);
            let recheck = status::progress_recheck(&ctx, &s);
            (s, recheck)
        }
        Ending::Collision => (dst.status.clone(), Some(SignedDuration::ZERO)),
    };
    Ok(Plan {
        actions: ws.into_actions(),
        revision: dst.revision_changed.then(|| dst.revision.clone()).flatten(),
        status,
        requeue_after,
    })
}

/// Upstream's `syncDeployment`, one branch per situation.
fn decide(
    ctx: &Ctx,
    ws: &mut Workset,
    dst: &mut DState,
    rss: &[ReplicaSet],
    pods: &[Pod],
) -> Ending {
    if ctx.deleting() {
        new_rs::sync(ctx, ws, dst);
        return Ending::Status;
    }
    status::note_pause(ctx, dst);
    new_rs::sync(ctx, ws, dst);
    if ctx.paused() || scale::is_scaling_event(ctx, ws) {
        scale::scale(ctx, ws, dst);
        if ctx.paused() {
            history::clean_up(ctx, ws);
        }
        return Ending::Status;
    }
    let result = match ctx.strategy {
        Strategy::Rolling { .. } => roll(ctx, ws, dst, rss),
        Strategy::Recreate => recreate(ctx, ws, dst, rss, pods),
    };
    match result {
        Ok(()) => Ending::Rollout,
        Err(new_rs::Collision) => Ending::Collision,
    }
}

/// Upstream's `rolloutRolling`: one scaling step, or the history cleanup
/// once the rollout is complete.
fn roll(
    ctx: &Ctx,
    ws: &mut Workset,
    dst: &mut DState,
    rss: &[ReplicaSet],
) -> Result<(), new_rs::Collision> {
    new_rs::ensure(ctx, ws, dst, rss)?;
    if rolling::grow_new(ctx, ws) || rolling::shrink_old(ctx, ws) {
        return Ok(());
    }
    if status::complete(ctx, &dst.status) {
        history::clean_up(ctx, ws);
    }
    Ok(())
}

/// Upstream's `rolloutRecreate`.
fn recreate(
    ctx: &Ctx,
    ws: &mut Workset,
    dst: &mut DState,
    rss: &[ReplicaSet],
    pods: &[Pod],
) -> Result<(), new_rs::Collision> {
    if recreate::scale_down_old(ctx, ws) || recreate::old_pods_running(ctx, ws, pods) {
        return Ok(());
    }
    new_rs::ensure(ctx, ws, dst, rss)?;
    if let Some(i) = ws.new {
        if ws.scale_if_needed(ctx, i, ctx.replicas) {
            return Ok(());
        }
    }
    if status::complete(ctx, &dst.status) {
        history::clean_up(ctx, ws);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
