//! The ReplicaSet controller's decisions (upstream
//! `pkg/controller/replicaset`): for one ReplicaSet and the pods of its
//! namespace, which pods to create, delete, adopt and release, and the
//! status to write.

mod burst;
pub mod expectations;
mod ranking;
mod status;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::owner::{self, Claim};
use crate::{pods, spec, WorkloadError};

pub use burst::{slow_start_batches, BURST_REPLICAS};
pub use ranking::DELETION_COST_ANNOTATION;

const KIND: &str = "ReplicaSet";

/// One write to make for a ReplicaSet.
#[derive(Debug, Clone, PartialEq)]
pub enum PodAction {
    /// Create this pod (it has `generateName`, no name).
    Create(Box<Pod>),
    /// Delete this pod; `uid` is the precondition.
    Delete { name: String, uid: String },
    /// Adopt an orphan: set its `metadata.ownerReferences` to
    /// `owner_references` (its own plus the ReplicaSet's controller
    /// reference), with `uid` as the precondition.
    Adopt {
        name: String,
        uid: String,
        owner_references: Vec<OwnerReference>,
    },
    /// Release a pod that no longer matches: set its
    /// `metadata.ownerReferences` to `owner_references` (without the
    /// ReplicaSet's), with `uid` as the precondition.
    Release {
        name: String,
        uid: String,
        owner_references: Vec<OwnerReference>,
    },
}

/// What one sync of a ReplicaSet decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Releases, then adoptions, then deletions or creations; each group
    /// sorted by pod name. Creations are at most [`BURST_REPLICAS`]; send
    /// them in [`slow_start_batches`].
    pub actions: Vec<PodAction>,
    /// The status as the pods passed in show it (before these actions).
    pub status: ReplicaSetStatus,
    /// Sync again after this long, when a Ready pod will have been Ready
    /// for `minReadySeconds` and so count as available.
    pub requeue_after: Option<SignedDuration>,
}

/// What apps/v1 validation checks of a ReplicaSet's spec, with the same
/// reading a sync makes (the template's pod is the caller's to check).
pub fn check(rs: &ReplicaSet) -> Result<(), WorkloadError> {
    let (meta, s) = (&rs.metadata, &rs.spec);
    spec::selector(KIND, meta, Some(&s.selector), s.template.as_ref())?;
    spec::replicas(KIND, meta, s.replicas)?;
    spec::non_negative(KIND, meta, "minReadySeconds", s.min_ready_seconds)
}

/// Decide one sync of `rs`. `pods` are the pods of its namespace (all of
/// them, so that orphans can be adopted and relabelled pods released);
/// pods of other namespaces are ignored.
///
/// A ReplicaSet being deleted creates and deletes nothing; its status is
/// still computed.
pub fn reconcile(rs: &ReplicaSet, pods: &[Pod], now: Timestamp) -> Result<Plan, WorkloadError> {
    let meta = &rs.metadata;
    let rs_spec = &rs.spec;
    let rs_name = spec::name(KIND, meta)?;
    let rs_uid = spec::uid(KIND, meta)?;
    let selector = spec::selector(
        KIND,
        meta,
        Some(&rs_spec.selector),
        rs_spec.template.as_ref(),
    )?;
    let replicas = spec::replicas(KIND, meta, rs_spec.replicas)?;

    let mut releases = Vec::new();
    let mut adoptions = Vec::new();
    let mut owned: Vec<&Pod> = Vec::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.namespace == meta.namespace && pods::is_active(p))
    {
        let pm = &pod.metadata;
        match owner::claim(meta, &selector, pm) {
            Claim::Owned => owned.push(pod),
            Claim::Adopt => {
                adoptions.push(PodAction::Adopt {
                    name: pod_name(pm),
                    uid: pm.uid.clone().unwrap_or_default(),
                    owner_references: owner::with_owner(pm, owner::controller_ref(KIND, meta)),
                });
                owned.push(pod);
            }
            Claim::Release => releases.push(PodAction::Release {
                name: pod_name(pm),
                uid: pm.uid.clone().unwrap_or_default(),
                owner_references: owner::without_owner(pm, rs_uid),
            }),
            Claim::Ignore => {}
        }
    }
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    releases.sort_by_key(action_pod_name);
    adoptions.sort_by_key(action_pod_name);

    let mut actions = releases;
    actions.append(&mut adoptions);
    if meta.deletion_timestamp.is_none() {
        let have = owned.len();
        let want = usize::try_from(replicas).unwrap_or(0);
        if have < want {
            let count = (want - have).min(BURST_REPLICAS);
            for _ in 0..count {
                actions.push(PodAction::Create(Box::new(pod_from_template(rs, rs_name))));
            }
        } else if have > want {
            let count = (have - want).min(BURST_REPLICAS);
            let mut doomed: Vec<PodAction> = ranking::pods_to_delete(&owned, count, now)
                .into_iter()
                .map(|p| PodAction::Delete {
                    name: pod_name(&p.metadata),
                    uid: p.metadata.uid.clone().unwrap_or_default(),
                })
                .collect();
            doomed.sort_by_key(action_pod_name);
            actions.append(&mut doomed);
        }
    }

    let (status, requeue_after) = status::of(rs, &owned, now);
    Ok(Plan {
        actions,
        status,
        requeue_after,
    })
}

fn pod_name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn action_pod_name(a: &PodAction) -> String {
    match a {
        PodAction::Create(p) => pod_name(&p.metadata),
        PodAction::Delete { name, .. }
        | PodAction::Adopt { name, .. }
        | PodAction::Release { name, .. } => name.clone(),
    }
}

/// A pod as upstream's `GetPodFromTemplate` makes it: the template's
/// labels, annotations, finalizers and spec, named `<rs-name>-<random>` by
/// the API server, controlled by the ReplicaSet.
fn pod_from_template(rs: &ReplicaSet, rs_name: &str) -> Pod {
    let template = rs.spec.template.clone().unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{rs_name}-")),
            namespace: rs.metadata.namespace.clone(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner::controller_ref(KIND, &rs.metadata)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

#[cfg(test)]
mod tests;
