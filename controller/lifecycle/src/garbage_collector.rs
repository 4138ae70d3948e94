//! The garbage collector's decisions, as kube-controller-manager's makes
//! them, over one snapshot of every object that can own or be owned:
//!
//! - **Background** (the default): the owner is gone at once; each
//!   dependent whose owners are all gone is deleted, with the policy its
//!   own finalizers ask for (`orphan`: Orphan, `foregroundDeletion`:
//!   Foreground, else Background), so deletion cascades down the graph.
//! - **Foreground**: an owner being deleted with the `foregroundDeletion`
//!   finalizer waits. Its dependents with no other live owner are deleted
//!   (Foreground themselves when they have dependents of their own); a
//!   dependent that has a live owner besides only drops its reference.
//!   Once no dependent whose reference has `blockOwnerDeletion: true` is
//!   left, the finalizer goes and the API server removes the owner.
//! - **Orphan**: an owner being deleted with the `orphan` finalizer has
//!   its reference removed from every dependent, then the finalizer goes.
//!
//! An owner reference is *dangling* when no object of the snapshot has its
//! uid with its name and kind where the dependent can see it: a namespaced
//! owner is looked up in the dependent's namespace, a namespaced owner of
//! a cluster-scoped dependent is never an owner (that dependent is never
//! collected, as upstream). An object of the same name but another uid is
//! another object: the reference to the old uid is dangling.
//!
//! The snapshot is a cache: an owner just created may not be in it yet.
//! The caller must confirm with a live read that each owner a [`Action::Delete`]
//! rests on is really gone (404, or another uid) before deleting, and
//! delete with a uid precondition, as upstream's `attemptToDeleteItem` does.
//! Actions are to be applied in order; the plan is made again on the next
//! change, so a failed action is simply decided again.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `metav1.FinalizerOrphanDependents`.
pub const ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub const FOREGROUND: &str = "foregroundDeletion";

/// One object of the graph, by its coordinates and uid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

/// One of an object's `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: bool,
    pub block_owner_deletion: bool,
}

/// What the collector knows of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: ObjectRef,
    pub owners: Vec<OwnerRef>,
    /// `metadata.deletionTimestamp` is set.
    pub being_deleted: bool,
    pub finalizers: Vec<String>,
}

impl Node {
    /// The node of an object of `api_version` and `kind` with `meta`
    /// (missing names and uids read as empty, which match nothing).
    pub fn from_meta(api_version: &str, kind: &str, meta: &ObjectMeta) -> Node {
        let owners = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| OwnerRef {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                controller: o.controller == Some(true),
                block_owner_deletion: o.block_owner_deletion == Some(true),
            })
            .collect();
        Node {
            id: ObjectRef {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
                name: meta.name.clone().unwrap_or_default(),
                uid: meta.uid.clone().unwrap_or_default(),
            },
            owners,
            being_deleted: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        }
    }

    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Being deleted in the foreground: waiting for its dependents.
    fn deleting_dependents(&self) -> bool {
        self.being_deleted && self.has(FOREGROUND)
    }
}

/// A `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Background => "Background",
            Policy::Foreground => "Foreground",
            Policy::Orphan => "Orphan",
        }
    }
}

/// One write the collector makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete `object` (preconditions: its uid) with `policy`: all its
    /// owners are gone or being deleted in the foreground.
    Delete { object: ObjectRef, policy: Policy },
    /// Remove the references to these owner uids from `object`: dangling
    /// or waiting ones beside a live owner, or an orphaning owner's.
    RemoveOwnerReferences {
        object: ObjectRef,
        owners: Vec<String>,
    },
    /// Set `blockOwnerDeletion: false` on the references to these owner
    /// uids, before `object` is deleted in the foreground while one of its
    /// own dependents waits in the foreground too: two owners waiting on
    /// each other would never finish.
    UnblockOwnerReferences {
        object: ObjectRef,
        owners: Vec<String>,
    },
    /// Remove `finalizer` from `object`: its dependents are released or
    /// gone, and the API server removes it when no finalizer is left.
    RemoveFinalizer {
        object: ObjectRef,
        finalizer: &'static str,
    },
}

/// How a dependent sees one of its owner references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// Exists, not waiting for its dependents.
    Solid,
    /// Exists, being deleted in the foreground.
    Waiting,
    /// Gone (or another object now): no owner.
    Dangling,
}

/// The collector's decisions over `objects` (every object of the kinds it
/// watches). `namespaced` tells whether a kind (by apiVersion and kind) is
/// namespaced, `None` for a kind the API does not serve: objects that
/// name an unknown kind as owner are left as they are, as upstream keeps
/// retrying a REST mapping it cannot make. Sorted by the object acted on.
pub fn plan(objects: &[Node], namespaced: impl Fn(&str, &str) -> Option<bool>) -> Vec<Action> {
    let by_uid: BTreeMap<&str, &Node> = objects
        .iter()
        .filter(|n| !n.id.uid.is_empty())
        .map(|n| (n.id.uid.as_str(), n))
        .collect();
    // Dependents of each uid, with the reference that names it.
    let mut dependents: BTreeMap<&str, Vec<(&Node, &OwnerRef)>> = BTreeMap::new();
    for n in objects {
        for o in &n.owners {
            dependents.entry(o.uid.as_str()).or_default().push((n, o));
        }
    }
    let mut out = Vec::new();
    let mut sorted: Vec<&Node> = objects.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    for n in sorted {
        if n.being_deleted {
            owner_actions(n, &dependents, &mut out);
        } else {
            dependent_actions(n, &by_uid, &dependents, &namespaced, &mut out);
        }
    }
    out
}

/// An owner being deleted: release its dependents (orphan) or wait for
/// its blocking ones (foreground), then drop the finalizer.
fn owner_actions(
    n: &Node,
    dependents: &BTreeMap<&str, Vec<(&Node, &OwnerRef)>>,
    out: &mut Vec<Action>,
) {
    let deps = dependents.get(n.id.uid.as_str());
    let deps = deps.map(Vec::as_slice).unwrap_or_default();
    if n.has(ORPHAN) {
        let mut pending = false;
        for (d, _) in deps {
            pending = true;
            out.push(Action::RemoveOwnerReferences {
                object: d.id.clone(),
                owners: vec![n.id.uid.clone()],
            });
        }
        // Only once no dependent names it any more, so a dependent whose
        // patch failed is never left pointing at a gone owner.
        if !pending {
            out.push(Action::RemoveFinalizer {
                object: n.id.clone(),
                finalizer: ORPHAN,
            });
        }
        return;
    }
    if n.has(FOREGROUND) {
        let blocked = deps.iter().any(|(_, r)| r.block_owner_deletion);
        if !blocked {
            out.push(Action::RemoveFinalizer {
                object: n.id.clone(),
                finalizer: FOREGROUND,
            });
        }
    }
}

fn classify(
    dependent: &Node,
    r: &OwnerRef,
    by_uid: &BTreeMap<&str, &Node>,
    owner_namespaced: bool,
) -> Owner {
    let Some(o) = by_uid.get(r.uid.as_str()) else {
        return Owner::Dangling;
    };
    // Looked up by name where the dependent lives: another name, kind or
    // namespace is not this reference's owner.
    let seen_ns = if owner_namespaced {
        dependent.id.namespace.as_deref()
    } else {
        None
    };
    if o.id.name != r.name || o.id.kind != r.kind || o.id.namespace.as_deref() != seen_ns {
        return Owner::Dangling;
    }
    if o.deleting_dependents() {
        Owner::Waiting
    } else {
        Owner::Solid
    }
}

/// An object not being deleted: deleted once no owner is left, freed of
/// the references that no longer hold it while one is.
fn dependent_actions(
    n: &Node,
    by_uid: &BTreeMap<&str, &Node>,
    dependents: &BTreeMap<&str, Vec<(&Node, &OwnerRef)>>,
    namespaced: &impl Fn(&str, &str) -> Option<bool>,
    out: &mut Vec<Action>,
) {
    if n.owners.is_empty() {
        return;
    }
    let mut seen = Vec::new();
    for r in &n.owners {
        let Some(owner_namespaced) = namespaced(&r.api_version, &r.kind) else {
            return;
        };
        // A cluster-scoped object cannot have a namespaced owner: never
        // collected, whatever its other references say.
        if owner_namespaced && n.id.namespace.is_none() {
            return;
        }
        seen.push((r, classify(n, r, by_uid, owner_namespaced)));
    }
    let uids = |want: &[Owner]| -> Vec<String> {
        let set: BTreeSet<String> = seen
            .iter()
            .filter(|(_, c)| want.contains(c))
            .map(|(r, _)| r.uid.clone())
            .collect();
        set.into_iter().collect()
    };
    if seen.iter().any(|(_, c)| *c == Owner::Solid) {
        let gone = uids(&[Owner::Dangling, Owner::Waiting]);
        if !gone.is_empty() {
            out.push(Action::RemoveOwnerReferences {
                object: n.id.clone(),
                owners: gone,
            });
        }
        return;
    }
    let own = dependents.get(n.id.uid.as_str());
    let own = own.map(Vec::as_slice).unwrap_or_default();
    let waiting = uids(&[Owner::Waiting]);
    if !waiting.is_empty() && !own.is_empty() {
        if own.iter().any(|(d, _)| d.deleting_dependents()) {
            out.push(Action::UnblockOwnerReferences {
                object: n.id.clone(),
                owners: waiting,
            });
        }
        out.push(Action::Delete {
            object: n.id.clone(),
            policy: Policy::Foreground,
        });
        return;
    }
    let policy = if n.has(ORPHAN) {
        Policy::Orphan
    } else if n.has(FOREGROUND) {
        Policy::Foreground
    } else {
        Policy::Background
    };
    out.push(Action::Delete {
        object: n.id.clone(),
        policy,
    });
}

#[cfg(test)]
mod tests;
