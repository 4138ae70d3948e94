//! Resizing without a rollout (upstream's `scale` and `isScalingEvent`):
//! when `spec.replicas` changes, or the Deployment is paused, the
//! ReplicaSets are resized in proportion to their share.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::annotations::{self, DESIRED_REPLICAS, MAX_REPLICAS};
use super::context::Ctx;
use super::status::DState;
use super::workset::{by_creation, spec_replicas, status_counts, Workset};

/// Upstream's `isScalingEvent`: some ReplicaSet with replicas was last
/// sized for another `spec.replicas` than the Deployment's.
pub(super) fn is_scaling_event(ctx: &Ctx, ws: &Workset) -> bool {
    ws.all().into_iter().any(|i| {
        let rs = ws.rs(i);
        spec_replicas(rs) > 0
            && annotations::replicas_annotation(rs, DESIRED_REPLICAS)
                .is_some_and(|d| d != ctx.replicas)
    })
}

/// Upstream's `FindActiveOrLatest`: the only ReplicaSet with replicas; with
/// none, the new one, else the newest old one; with several, none.
fn active_or_latest(ws: &Workset) -> Option<usize> {
    let active: Vec<usize> = ws
        .all()
        .into_iter()
        .filter(|i| spec_replicas(ws.rs(*i)) > 0)
        .collect();
    match active.len() {
        0 => ws.new.or_else(|| {
            ws.old()
                .into_iter()
                .max_by(|a, b| by_creation(ws.rs(*a), ws.rs(*b)))
        }),
        1 => Some(active[0]),
        _ => None,
    }
}

/// Upstream's `IsSaturated`: the new ReplicaSet is sized for the
/// Deployment and all its pods are available.
fn saturated(ctx: &Ctx, ws: &Workset) -> bool {
    ws.new.is_some_and(|i| {
        let rs = ws.rs(i);
        annotations::replicas_annotation(rs, DESIRED_REPLICAS) == Some(ctx.replicas)
            && spec_replicas(rs) == ctx.replicas
            && status_counts(rs).1 == ctx.replicas
    })
}

/// Resize to `spec.replicas`: a lone active ReplicaSet takes it all; a
/// saturated new one means the old ones go; otherwise, in a rolling
/// update, the difference is shared in proportion to each ReplicaSet's
/// size (the largest absorbs rounding), so a rollout in progress keeps
/// its mix.
pub(super) fn scale(ctx: &Ctx, ws: &mut Workset, dst: &DState) {
    if let Some(i) = active_or_latest(ws) {
        ws.scale_if_needed(ctx, i, ctx.replicas);
        return;
    }
    if saturated(ctx, ws) {
        for i in ws.active_old() {
            ws.scale_if_needed(ctx, i, 0);
        }
        return;
    }
    if !ctx.is_rolling() {
        return;
    }
    let mut active: Vec<usize> = ws
        .all()
        .into_iter()
        .filter(|i| spec_replicas(ws.rs(*i)) > 0)
        .collect();
    let current = ws.sum(&active, spec_replicas);
    let allowed = if ctx.replicas > 0 {
        ctx.replicas.saturating_add(ctx.max_surge())
    } else {
        0
    };
    let to_add = allowed - current;
    // Larger first; among equals, newer first when growing and older
    // first when shrinking.
    active.sort_by(|a, b| {
        let (ra, rb) = (ws.rs(*a), ws.rs(*b));
        let age = if to_add > 0 {
            by_creation(rb, ra)
        } else {
            by_creation(ra, rb)
        };
        spec_replicas(rb).cmp(&spec_replicas(ra)).then(age)
    });
    let mut sizes: Vec<i32> = active.iter().map(|i| spec_replicas(ws.rs(*i))).collect();
    if to_add != 0 {
        let mut added = 0;
        for (k, i) in active.iter().enumerate() {
            let share = proportion(ctx, dst, ws.rs(*i), to_add, added);
            sizes[k] += share;
            added += share;
        }
        if let Some(first) = sizes.first_mut() {
            *first = (*first + to_add - added).max(0);
        }
    }
    for (k, i) in active.iter().enumerate() {
        ws.scale(ctx, *i, sizes[k]);
    }
}

/// Upstream's `GetProportion`: this ReplicaSet's share of `to_add`, capped
/// by what is left of it.
fn proportion(ctx: &Ctx, dst: &DState, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(ctx, dst, rs);
    let left = to_add - added;
    if to_add > 0 {
        fraction.min(left)
    } else {
        fraction.max(left)
    }
}

/// Upstream's `getReplicaSetFraction`: how far a ReplicaSet moves when the
/// Deployment's `replicas + maxSurge` changes from what it was when the
/// ReplicaSet was last sized (its `max-replicas` annotation, else the
/// Deployment's `status.replicas`), rounded half away from zero. With
/// nothing to scale from, it gets no share (the largest takes the rest).
fn fraction(ctx: &Ctx, dst: &DState, rs: &ReplicaSet) -> i32 {
    let size = spec_replicas(rs);
    if ctx.replicas == 0 {
        return -size;
    }
    let target = i64::from(ctx.replicas.saturating_add(ctx.max_surge()));
    let was = annotations::replicas_annotation(rs, MAX_REPLICAS)
        .unwrap_or_else(|| dst.status.replicas.unwrap_or(0));
    let was = i64::from(was);
    if was <= 0 {
        return 0;
    }
    let scaled = i64::from(size) * target;
    let rounded = (2 * scaled + was) / (2 * was);
    i32::try_from(rounded - i64::from(size)).unwrap_or(0)
}
