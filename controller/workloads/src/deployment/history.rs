//! Old ReplicaSets beyond `revisionHistoryLimit` (upstream's
//! `cleanupDeployment`).

use super::annotations;
use super::context::Ctx;
use super::workset::{by_creation, spec_replicas, status_counts, Change, Workset};

/// Delete the oldest revisions beyond the limit, skipping any that still
/// has pods, wants pods, has a spec change its controller has not seen, is
/// being deleted, or was changed by this sync.
pub(super) fn clean_up(ctx: &Ctx, ws: &mut Workset) {
    let Some(limit) = ctx.revision_history_limit() else {
        return;
    };
    let mut cleanable: Vec<usize> = ws
        .old()
        .into_iter()
        .filter(|i| ws.rs(*i).metadata.deletion_timestamp.is_none())
        .collect();
    let Some(excess) = cleanable.len().checked_sub(limit).filter(|e| *e > 0) else {
        return;
    };
    cleanable.sort_by(|a, b| {
        let (ra, rb) = (ws.rs(*a), ws.rs(*b));
        match (annotations::revision(ra), annotations::revision(rb)) {
            (Some(x), Some(y)) if x != y => x.cmp(&y),
            _ => by_creation(ra, rb),
        }
    });
    for i in cleanable.into_iter().take(excess) {
        let e = &ws.entries[i];
        let rs = &e.rs;
        let unseen = rs.metadata.generation.unwrap_or(0)
            > rs.status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
        if status_counts(rs).0 != 0 || spec_replicas(rs) != 0 || unseen || e.change != Change::None
        {
            continue;
        }
        ws.mark(i, Change::Deleted);
    }
}
