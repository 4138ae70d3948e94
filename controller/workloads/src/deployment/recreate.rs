//! The Recreate strategy (upstream's `rolloutRecreate`): every old pod
//! gone before the new ReplicaSet gets any.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::context::Ctx;
use super::workset::{status_counts, Workset};
use crate::{owner, pods};

/// Scale every old ReplicaSet with replicas to 0. Whether any was.
pub(super) fn scale_down_old(ctx: &Ctx, ws: &mut Workset) -> bool {
    let mut scaled = false;
    for i in ws.active_old() {
        scaled |= ws.scale_if_needed(ctx, i, 0);
    }
    scaled
}

/// Upstream's `oldPodsRunning`: an old ReplicaSet still reports pods, or a
/// pod of the Deployment's selector controlled by one of its ReplicaSets
/// other than the new one is not yet Succeeded or Failed (one being
/// deleted still runs; Unknown might).
pub(super) fn old_pods_running(ctx: &Ctx, ws: &Workset, all_pods: &[Pod]) -> bool {
    if ws.sum(&ws.old(), |r| status_counts(r).0) > 0 {
        return true;
    }
    let new_uid = ws.new.and_then(|i| ws.rs(i).metadata.uid.clone());
    let old_uids: BTreeSet<String> = ws
        .old()
        .iter()
        .filter_map(|i| ws.rs(*i).metadata.uid.clone())
        .filter(|u| Some(u) != new_uid.as_ref())
        .collect();
    let empty = Default::default();
    all_pods.iter().any(|p| {
        p.metadata.namespace == ctx.d.metadata.namespace
            && ctx
                .selector
                .matches(p.metadata.labels.as_ref().unwrap_or(&empty))
            && owner::controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid))
            && !matches!(pods::phase(p), "Succeeded" | "Failed")
    })
}
