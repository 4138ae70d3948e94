//! Finding, annotating and creating the new ReplicaSet: the one whose pod
//! template is the Deployment's (upstream's `getNewReplicaSet`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::annotations::{self, REVISION};
use super::context::{Ctx, Strategy, KIND};
use super::hash::{pod_template_hash, POD_TEMPLATE_HASH_LABEL};
use super::status::{self, reasons, DState};
use super::workset::{spec_replicas, Change, Workset};
use crate::owner;

/// The new ReplicaSet's name is taken by a ReplicaSet that is not it:
/// `status.collisionCount` was raised, so the next sync hashes to another
/// name.
pub(super) struct Collision;

/// Whether two templates are the same once the hash label is left out of
/// both (upstream's `EqualIgnoreHash`).
fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(POD_TEMPLATE_HASH_LABEL);
        }
        t
    };
    strip(a) == strip(b)
}

/// Find the new ReplicaSet (the oldest whose template matches) and bring
/// its revision annotations and `minReadySeconds` up to date, then the
/// Deployment's revision to it. Calling again in the same sync changes
/// nothing more.
pub(super) fn sync(ctx: &Ctx, ws: &mut Workset, dst: &mut DState) {
    if ws.new.is_none() {
        ws.new = (0..ws.entries.len()).find(|i| {
            ws.rs(*i)
                .spec
                .template
                .as_ref()
                .is_some_and(|t| equal_ignore_hash(t, &ctx.d.spec.template))
        });
    }
    let Some(i) = ws.new else {
        return;
    };
    let new_revision = next_revision(ws);
    let rs = &mut ws.entries[i].rs;
    let annotated = annotations::set_new_rs_annotations(
        ctx.d.metadata.annotations.as_ref(),
        rs,
        new_revision,
        true,
        desired_and_max(ctx),
    );
    let min_ready_changed = rs.spec.min_ready_seconds != ctx.min_ready_seconds();
    rs.spec.min_ready_seconds = ctx.min_ready_seconds();
    let name = rs.metadata.name.clone().unwrap_or_default();
    let revision = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .cloned();
    if annotated || min_ready_changed {
        ws.mark(i, Change::Updated);
    }
    dst.set_revision(revision);
    if ctx.progress_deadline().is_some()
        && status::condition(&dst.status, status::PROGRESSING).is_none()
    {
        dst.set_condition(status::new_condition(
            status::PROGRESSING,
            "True",
            reasons::FOUND_NEW_RS,
            format!("Found new replica set {name:?}"),
            ctx.now,
        ));
    }
}

/// One more than the highest revision of the old ReplicaSets.
fn next_revision(ws: &Workset) -> i64 {
    let max_old = ws
        .old()
        .iter()
        .filter_map(|i| annotations::revision(ws.rs(*i)))
        .max()
        .unwrap_or(0);
    max_old + 1
}

/// `desired-replicas` and `max-replicas` for the Deployment as it is.
fn desired_and_max(ctx: &Ctx) -> (i32, i32) {
    (ctx.replicas, ctx.replicas.saturating_add(ctx.max_surge()))
}

/// [`sync`], then make the new ReplicaSet if there is none, unless its
/// name is taken.
pub(super) fn ensure(
    ctx: &Ctx,
    ws: &mut Workset,
    dst: &mut DState,
    namespace_rss: &[ReplicaSet],
) -> Result<(), Collision> {
    sync(ctx, ws, dst);
    if ws.new.is_some() {
        return Ok(());
    }
    let new_revision = next_revision(ws);
    let hash = pod_template_hash(&ctx.d.spec.template, dst.status.collision_count);
    let name = format!("{}-{hash}", ctx.name);
    if namespace_rss.iter().any(|r| {
        r.metadata.name.as_deref() == Some(&name)
            && r.metadata.namespace == ctx.d.metadata.namespace
    }) {
        // Ours with the same template would have been found above: this
        // one is someone else's, or an older template's.
        let c = dst.status.collision_count.unwrap_or(0);
        dst.status.collision_count = Some(c.saturating_add(1));
        return Err(Collision);
    }
    let mut rs = build(ctx, &name, &hash);
    let replicas = first_size(ctx, ws, &rs);
    rs.spec.replicas = Some(replicas);
    annotations::set_new_rs_annotations(
        ctx.d.metadata.annotations.as_ref(),
        &mut rs,
        new_revision,
        false,
        desired_and_max(ctx),
    );
    let i = ws.add_created(rs);
    ws.new = Some(i);
    dst.set_revision(Some(new_revision.to_string()));
    if ctx.progress_deadline().is_some() {
        dst.set_condition(status::new_condition(
            status::PROGRESSING,
            "True",
            reasons::NEW_RS_CREATED,
            format!("Created new replica set {name:?}"),
            ctx.now,
        ));
    }
    Ok(())
}

/// The ReplicaSet for the Deployment's template: named
/// `<deployment>-<hash>`, the hash label added to its labels, its
/// selector and its template, controlled by the Deployment.
fn build(ctx: &Ctx, name: &str, hash: &str) -> ReplicaSet {
    let d = ctx.d;
    let mut template = d.spec.template.clone();
    let tmeta = template.metadata.get_or_insert_with(ObjectMeta::default);
    let labels = tmeta.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.into());
    let labels = labels.clone();
    let mut selector = d.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.into());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: d.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![owner::controller_ref(KIND, &d.metadata)]),
            // Only for ordering within this sync; dropped from the action.
            creation_timestamp: Some(Time(ctx.now)),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: d.spec.min_ready_seconds,
            selector,
            template: Some(template),
        },
        status: None,
    }
}

/// Upstream's `NewRSNewReplicas`: Recreate makes it whole at once; a
/// rolling update grows it by what the surge leaves over the ReplicaSets'
/// current sizes, up to `spec.replicas`.
pub(super) fn first_size(ctx: &Ctx, ws: &Workset, new: &ReplicaSet) -> i32 {
    match ctx.strategy {
        Strategy::Recreate => ctx.replicas,
        Strategy::Rolling { .. } => {
            let others: i32 = ws.entries.iter().map(|e| spec_replicas(&e.rs)).sum::<i32>();
            grow_within_surge(ctx, others + spec_replicas(new), spec_replicas(new))
        }
    }
}

/// The size of a new ReplicaSet at `current` when all ReplicaSets (it
/// included) sum to `all`: room under `replicas + maxSurge`, at most
/// `replicas`.
pub(super) fn grow_within_surge(ctx: &Ctx, all: i32, current: i32) -> i32 {
    let max_total = ctx.replicas.saturating_add(ctx.max_surge());
    if all >= max_total {
        return current;
    }
    let up = (max_total - all).min(ctx.replicas - current).max(0);
    current + up
}
