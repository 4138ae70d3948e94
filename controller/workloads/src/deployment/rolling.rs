//! One step of a rolling update (upstream's `rolloutRolling`): grow the
//! new ReplicaSet within the surge, else shrink the old ones within the
//! availability budget, unhealthy replicas first.

use super::context::Ctx;
use super::new_rs::grow_within_surge;
use super::workset::{by_creation, spec_replicas, status_counts, Workset};

/// Upstream's `reconcileNewReplicaSet`: shrink the new ReplicaSet to
/// `spec.replicas` if over, else grow it as far as the surge allows.
/// Whether it was scaled.
pub(super) fn grow_new(ctx: &Ctx, ws: &mut Workset) -> bool {
    let Some(new) = ws.new else {
        return false;
    };
    let current = spec_replicas(ws.rs(new));
    if current == ctx.replicas {
        return false;
    }
    if current > ctx.replicas {
        return ws.scale_if_needed(ctx, new, ctx.replicas);
    }
    let all = ws.sum(&ws.all(), spec_replicas);
    let to = grow_within_surge(ctx, all, current);
    ws.scale_if_needed(ctx, new, to)
}

/// Upstream's `reconcileOldReplicaSets`: how many old replicas may go
/// without dropping under `replicas − maxUnavailable` (counting the new
/// ReplicaSet's not yet available ones as gone), spent first on old
/// replicas that are not available, then on available ones, oldest
/// ReplicaSet first. Whether any was scaled down.
pub(super) fn shrink_old(ctx: &Ctx, ws: &mut Workset) -> bool {
    let old = ws.active_old();
    if ws.sum(&old, spec_replicas) == 0 {
        return false;
    }
    let all = ws.sum(&ws.all(), spec_replicas);
    let min_available = ctx.replicas - ctx.max_unavailable();
    let new_unavailable = ws
        .new
        .map_or(0, |i| spec_replicas(ws.rs(i)) - status_counts(ws.rs(i)).1);
    let max_scaled_down = all - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    let cleaned = clean_up_unhealthy(ctx, ws, old, max_scaled_down);
    let scaled = scale_down_available(ctx, ws);
    cleaned + scaled > 0
}

fn oldest_first(ws: &Workset, mut ids: Vec<usize>) -> Vec<usize> {
    ids.sort_by(|a, b| by_creation(ws.rs(*a), ws.rs(*b)));
    ids
}

/// Upstream's `cleanupUnhealthyReplicas`: drop up to `budget` old replicas
/// that are not available; they serve nothing, so losing them costs no
/// availability. How many went.
fn clean_up_unhealthy(ctx: &Ctx, ws: &mut Workset, old: Vec<usize>, budget: i32) -> i32 {
    let mut done = 0;
    for i in oldest_first(ws, old) {
        if done >= budget {
            break;
        }
        let replicas = spec_replicas(ws.rs(i));
        let available = status_counts(ws.rs(i)).1;
        if replicas == 0 || replicas <= available {
            continue;
        }
        let down = (budget - done).min(replicas - available);
        ws.scale_if_needed(ctx, i, replicas - down);
        done += down;
    }
    done
}

/// Upstream's `scaleDownOldReplicaSetsForRollingUpdate`: scale old
/// ReplicaSets down by as many available pods as exceed
/// `replicas − maxUnavailable`, oldest first. How many went.
fn scale_down_available(ctx: &Ctx, ws: &mut Workset) -> i32 {
    let min_available = ctx.replicas - ctx.max_unavailable();
    let available = ws.sum(&ws.all(), |r| status_counts(r).1);
    if available <= min_available {
        return 0;
    }
    let budget = available - min_available;
    let mut done = 0;
    for i in oldest_first(ws, ws.active_old()) {
        if done >= budget {
            break;
        }
        let replicas = spec_replicas(ws.rs(i));
        if replicas == 0 {
            continue;
        }
        let down = replicas.min(budget - done);
        ws.scale_if_needed(ctx, i, replicas - down);
        done += down;
    }
    done
}
