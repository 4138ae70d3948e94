//! A Terminating namespace's deletion, as kube-controller-manager's
//! namespace controller decides it, over the namespace and the objects
//! still in it:
//!
//! - its `status.phase` is made `Terminating` first;
//! - its pods are deleted first (ordered namespace deletion, on by default
//!   upstream since 1.33 and fixed since 1.34), each gracefully, with its
//!   own grace period; everything else waits until no pod is left;
//! - every other object is then deleted, in the background;
//! - while content remains, the five deletion conditions say why (types,
//!   reasons and messages as upstream), and the pass is made again after
//!   half the estimated wait plus a second: the longest grace period of
//!   the pods still running, counted from the namespace's
//!   `deletionTimestamp`, or 15 s when finalizers hold objects;
//! - once nothing is left, the `kubernetes` token leaves `spec.finalizers`
//!   (through the `finalize` subresource), and the API server removes the
//!   namespace when no finalizer is left.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};

/// The token of `spec.finalizers` this controller owns.
pub const KUBERNETES: &str = "kubernetes";

/// The wait estimated for objects held by finalizers (upstream's
/// `finalizerEstimateSeconds`).
pub const FINALIZER_ESTIMATE: SignedDuration = SignedDuration::from_secs(15);

/// A pod's grace period when it names none.
pub const DEFAULT_GRACE: i64 = 30;

/// One object still in the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// The resource's plural (`pods`) and group (`""` for core).
    pub resource: String,
    pub group: String,
    pub name: String,
    pub uid: String,
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub being_deleted: bool,
    /// For a pod: its grace period while it still runs, `None` once it is
    /// Succeeded or Failed (it has nothing left to stop).
    pub running_grace: Option<i64>,
}

impl Content {
    /// An object of `resource` in `group` with `meta`.
    pub fn from_meta(resource: &str, group: &str, meta: &ObjectMeta) -> Content {
        Content {
            resource: resource.to_string(),
            group: group.to_string(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
            being_deleted: meta.deletion_timestamp.is_some(),
            running_grace: None,
        }
    }

    /// A pod, with the grace period it runs under.
    pub fn from_pod(p: &Pod) -> Content {
        let mut c = Content::from_meta("pods", "", &p.metadata);
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if !matches!(phase, Some("Succeeded" | "Failed")) {
            let g = p
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(DEFAULT_GRACE);
            c.running_grace = Some(g.max(0));
        }
        c
    }

    fn is_pod(&self) -> bool {
        self.resource == "pods" && self.group.is_empty()
    }

    /// `<resource>.<group>`, as upstream's conditions name it (core's
    /// `pods.`).
    fn group_resource(&self) -> String {
        format!("{}.{}", self.resource, self.group)
    }
}

/// An object to delete (with `propagationPolicy: Background` and a uid
/// precondition; a pod with its own grace period).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub resource: String,
    pub group: String,
    pub name: String,
    pub uid: String,
}

/// What a pass over a namespace writes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Write `status.phase: Terminating` (first, through `status`).
    pub set_terminating: bool,
    /// Delete these, in order.
    pub delete: Vec<Delete>,
    /// The namespace's conditions as they should be (the five of the
    /// deletion, in upstream's order, after any others it has); `None`
    /// when they are as stored.
    pub conditions: Option<Vec<NamespaceCondition>>,
    /// The new `spec.finalizers` (without `kubernetes`, sorted, each
    /// once), to write through `finalize`; `None` while content remains.
    pub finalize: Option<Vec<String>>,
    /// Pass again after this long, content still remaining.
    pub requeue_after: Option<SignedDuration>,
}

/// The deletion conditions, in upstream's order.
pub const CONDITION_TYPES: [&str; 5] = [
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// The pass over `ns` with `contents` (every object still in it) at
/// `now`; `errors`: what the previous pass's deletes failed with (as
/// text, each once). A namespace not being deleted, or already finalized
/// by this controller, gets no plan.
pub fn plan(
    ns: &Namespace,
    contents: &[Content],
    errors: &[String],
    now: Timestamp,
) -> Option<Plan> {
    let deleted_at = ns.metadata.deletion_timestamp.as_ref()?.0;
    let status = ns.status.as_ref();
    let set_terminating = status.and_then(|s| s.phase.as_deref()) != Some("Terminating");
    let finalizers: Vec<String> = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == KUBERNETES) {
        return set_terminating.then(|| Plan {
            set_terminating,
            ..Plan::default()
        });
    }
    let pods_left = contents.iter().any(Content::is_pod);
    let mut delete: Vec<Delete> = contents
        .iter()
        .filter(|c| !c.being_deleted && (c.is_pod() || !pods_left))
        .map(|c| Delete {
            resource: c.resource.clone(),
            group: c.group.clone(),
            name: c.name.clone(),
            uid: c.uid.clone(),
        })
        .collect();
    delete.sort_by(|a, b| {
        let pod_first = |d: &Delete| !(d.resource == "pods" && d.group.is_empty());
        (pod_first(a), &a.group, &a.resource, &a.name).cmp(&(
            pod_first(b),
            &b.group,
            &b.resource,
            &b.name,
        ))
    });

    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for c in contents {
        *remaining.entry(c.group_resource()).or_default() += 1;
        for f in &c.finalizers {
            *by_finalizer.entry(f.clone()).or_default() += 1;
        }
    }
    let conditions = conditions(ns, &remaining, &by_finalizer, errors, now);
    let stored = status
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let conditions = (conditions != stored).then_some(conditions);

    if contents.is_empty() && errors.is_empty() {
        let mut left: Vec<String> = finalizers.into_iter().filter(|f| f != KUBERNETES).collect();
        left.sort();
        left.dedup();
        return Some(Plan {
            set_terminating,
            delete,
            conditions,
            finalize: Some(left),
            requeue_after: None,
        });
    }
    let estimate = estimate(contents, deleted_at, now);
    Some(Plan {
        set_terminating,
        delete,
        conditions,
        finalize: None,
        requeue_after: Some(SignedDuration::from_secs(estimate / 2 + 1)),
    })
}

/// Seconds the content left may take to go: the longest grace period of
/// the pods still running, less the time since the namespace's deletion
/// began; at least the finalizers' estimate while finalizers hold objects.
fn estimate(contents: &[Content], deleted_at: Timestamp, now: Timestamp) -> i64 {
    let grace = contents
        .iter()
        .filter_map(|c| c.running_grace)
        .max()
        .unwrap_or(0);
    let elapsed = now.duration_since(deleted_at).as_secs();
    let pods = if elapsed >= grace { 0 } else { grace };
    let held = contents.iter().any(|c| !c.finalizers.is_empty());
    if held {
        pods.max(FINALIZER_ESTIMATE.as_secs())
    } else {
        pods
    }
}

fn condition(type_: &str, failing: bool, reason: &str, message: String) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.to_string(),
        status: if failing { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: None,
    }
}

/// The five conditions, with `lastTransitionTime` kept while a type's
/// status stays, after the namespace's other conditions.
fn conditions(
    ns: &Namespace,
    remaining: &BTreeMap<String, usize>,
    by_finalizer: &BTreeMap<String, usize>,
    errors: &[String],
    now: Timestamp,
) -> Vec<NamespaceCondition> {
    let content_failure = if errors.is_empty() {
        condition(
            CONDITION_TYPES[2],
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        )
    } else {
        let mut errs = errors.to_vec();
        errs.sort();
        condition(
            CONDITION_TYPES[2],
            true,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                errs.len(),
                errs.join(", ")
            ),
        )
    };
    let content_remaining = if remaining.is_empty() {
        condition(
            CONDITION_TYPES[3],
            false,
            "ContentRemoved",
            "All content successfully removed".into(),
        )
    } else {
        let listed: Vec<String> = remaining
            .iter()
            .map(|(gr, n)| format!("{gr} has {n} resource instances"))
            .collect();
        condition(
            CONDITION_TYPES[3],
            true,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", listed.join(", ")),
        )
    };
    let finalizers_remaining = if by_finalizer.is_empty() {
        condition(
            CONDITION_TYPES[4],
            false,
            "ContentRemoved",
            "All content successfully removed".into(),
        )
    } else {
        let listed: Vec<String> = by_finalizer
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        condition(
            CONDITION_TYPES[4],
            true,
            "SomeFinalizerRemain",
            format!("Some finalizers are remaining: {}", listed.join(", ")),
        )
    };
    // Sluice's resources are a fixed table: discovery and parsing never
    // fail, and say so as upstream's healthy conditions do.
    let ours = [
        condition(
            CONDITION_TYPES[0],
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
        condition(
            CONDITION_TYPES[1],
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        content_failure,
        content_remaining,
        finalizers_remaining,
    ];
    let stored = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut out: Vec<NamespaceCondition> = stored
        .iter()
        .filter(|c| !CONDITION_TYPES.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for mut c in ours {
        let before = stored.iter().find(|s| s.type_ == c.type_);
        c.last_transition_time = match before {
            Some(b) if b.status == c.status => b.last_transition_time.clone(),
            _ => Some(Time(Timestamp::from_second(now.as_second()).unwrap_or(now))),
        };
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
