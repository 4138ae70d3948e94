//! The Deployment's ReplicaSets as this sync changes them: working copies
//! that the steps scale and annotate as upstream would through the API,
//! turned into writes at the end.

use std::cmp::Ordering;

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::annotations;
use super::context::{Ctx, KIND};
use super::ReplicaSetAction;
use crate::owner::{self, Claim};

/// What this sync did to one ReplicaSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    None,
    /// To be written back whole (scaled, annotated, adopted).
    Updated,
    /// Made by this sync.
    Created,
    /// Removed by the history cleanup.
    Deleted,
}

pub(super) struct Entry {
    pub rs: ReplicaSet,
    pub change: Change,
}

/// The ReplicaSets the Deployment owns (after adoption and release).
pub(super) struct Workset {
    pub entries: Vec<Entry>,
    /// Index of the ReplicaSet whose template is the Deployment's.
    pub new: Option<usize>,
    /// ReplicaSets let go, with the Deployment's reference removed.
    released: Vec<ReplicaSet>,
}

/// `spec.replicas`, 1 when unset as the API server defaults it.
pub(super) fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

/// `status.replicas`, `status.availableReplicas`, `status.readyReplicas`.
pub(super) fn status_counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    rs.status.as_ref().map_or((0, 0, 0), |s| {
        (
            s.replicas,
            s.available_replicas.unwrap_or(0),
            s.ready_replicas.unwrap_or(0),
        )
    })
}

/// Oldest first; equal times by name (upstream's
/// `ReplicaSetsByCreationTimestamp`). No timestamp sorts first.
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

impl Workset {
    /// Claim from every ReplicaSet of the namespace: keep the owned ones
    /// that match, adopt matching orphans, release owned ones that no
    /// longer match.
    pub fn claim(ctx: &Ctx, all: &[ReplicaSet]) -> Self {
        let dm = &ctx.d.metadata;
        let mut entries = Vec::new();
        let mut released = Vec::new();
        for rs in all.iter().filter(|r| r.metadata.namespace == dm.namespace) {
            match owner::claim(dm, &ctx.selector, &rs.metadata) {
                Claim::Owned => entries.push(Entry {
                    rs: rs.clone(),
                    change: Change::None,
                }),
                Claim::Adopt => {
                    let mut rs = rs.clone();
                    rs.metadata.owner_references = Some(owner::with_owner(
                        &rs.metadata,
                        owner::controller_ref(KIND, dm),
                    ));
                    entries.push(Entry {
                        rs,
                        change: Change::Updated,
                    });
                }
                Claim::Release => {
                    let mut rs = rs.clone();
                    let uid = dm.uid.as_deref().unwrap_or_default();
                    rs.metadata.owner_references = Some(owner::without_owner(&rs.metadata, uid));
                    released.push(rs);
                }
                Claim::Ignore => {}
            }
        }
        entries.sort_by(|a, b| by_creation(&a.rs, &b.rs));
        Workset {
            entries,
            new: None,
            released,
        }
    }

    pub fn rs(&self, i: usize) -> &ReplicaSet {
        &self.entries[i].rs
    }

    /// Every ReplicaSet but the new one, oldest first.
    pub fn old(&self) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// The old ones with replicas (upstream's `FilterActiveReplicaSets`).
    pub fn active_old(&self) -> Vec<usize> {
        self.old()
            .into_iter()
            .filter(|i| spec_replicas(self.rs(*i)) > 0)
            .collect()
    }

    /// Every ReplicaSet, the new one last.
    pub fn all(&self) -> Vec<usize> {
        let mut all = self.old();
        all.extend(self.new);
        all
    }

    pub fn sum(&self, of: &[usize], f: impl Fn(&ReplicaSet) -> i32) -> i32 {
        of.iter().map(|i| f(self.rs(*i))).sum()
    }

    pub fn add_created(&mut self, rs: ReplicaSet) -> usize {
        self.entries.push(Entry {
            rs,
            change: Change::Created,
        });
        self.entries.len() - 1
    }

    pub fn mark(&mut self, i: usize, change: Change) {
        let e = &mut self.entries[i];
        if e.change != Change::Created {
            e.change = change;
        }
    }

    /// Upstream's `scaleReplicaSetAndRecordEvent`: nothing when already at
    /// `to`, else [`Workset::scale`]. Whether the size changed.
    pub fn scale_if_needed(&mut self, ctx: &Ctx, i: usize, to: i32) -> bool {
        spec_replicas(self.rs(i)) != to && self.scale(ctx, i, to)
    }

    /// Upstream's `scaleReplicaSet`: set the size, and the replica-count
    /// annotations to the Deployment's current ones. Whether the size
    /// changed.
    pub fn scale(&mut self, ctx: &Ctx, i: usize, to: i32) -> bool {
        let max = ctx.replicas.saturating_add(ctx.max_surge());
        let rs = &mut self.entries[i].rs;
        let resized = spec_replicas(rs) != to;
        rs.spec.replicas = Some(to);
        let annotated = annotations::set_replicas_annotations(rs, ctx.replicas, max);
        if resized || annotated {
            self.mark(i, Change::Updated);
        }
        resized
    }

    /// The writes: creations, then updates (releases included), then
    /// deletions, each sorted by name.
    pub fn into_actions(self) -> Vec<ReplicaSetAction> {
        let mut created = Vec::new();
        let mut updated: Vec<ReplicaSet> = self.released;
        let mut deleted = Vec::new();
        for e in self.entries {
            match e.change {
                Change::None => {}
                Change::Updated => updated.push(e.rs),
                Change::Created => {
                    let mut rs = e.rs;
                    // The working copy carried the sync's time for the
                    // age orderings; the API server sets the real one.
                    rs.metadata.creation_timestamp = None;
                    created.push(rs);
                }
                Change::Deleted => deleted.push(e.rs),
            }
        }
        let by_name = |a: &ReplicaSet, b: &ReplicaSet| a.metadata.name.cmp(&b.metadata.name);
        created.sort_by(by_name);
        updated.sort_by(by_name);
        deleted.sort_by(by_name);
        created
            .into_iter()
            .map(|r| ReplicaSetAction::Create(Box::new(r)))
            .chain(
                updated
                    .into_iter()
                    .map(|r| ReplicaSetAction::Update(Box::new(r))),
            )
            .chain(deleted.into_iter().map(|r| ReplicaSetAction::Delete {
                name: r.metadata.name.unwrap_or_default(),
                uid: r.metadata.uid.unwrap_or_default(),
            }))
            .collect()
    }
}
