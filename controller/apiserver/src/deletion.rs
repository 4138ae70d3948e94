//! Deletion as kube-apiserver decides it, without I/O: `DeleteOptions`
//! preconditions (uid, resourceVersion: 409), graceful deletion of pods and
//! finalizers.
//!
//! - An object with `metadata.finalizers` is not removed: it gets a
//!   `deletionTimestamp` and stays until an update empties its finalizers
//!   ([`finalized`]), at which point it is removed.
//! - A Pod bound to a node and not terminal is deleted gracefully: its
//!   `deletionTimestamp` is now + grace (the request's `gracePeriodSeconds`,
//!   else the pod's `terminationGracePeriodSeconds`, else 30) and it stays
//!   for its node's agent to stop it and delete it with grace 0. A later
//!   delete may shorten the grace, never lengthen it. Unbound and terminal
//!   pods go at once, as does a grace of 0 (`kubectl delete --force
//!   --grace-period=0`).
//! - The garbage collector's finalizers are chosen here, as the generic
//!   store does: `propagationPolicy` (or the deprecated
//!   `orphanDependents`) first, else an `orphan` / `foregroundDeletion`
//!   finalizer the object has, else the kind's default (Background, which
//!   adds none; Events never get one). `Orphan` adds `orphan`,
//!   `Foreground` adds `foregroundDeletion`, and the object stays for the
//!   collector to release or delete its dependents first.
//! - A Namespace is never removed while `spec.finalizers` holds a token
//!   (`kubernetes` until its content is gone): its first delete sets the
//!   `deletionTimestamp` and `status.phase: Terminating`.

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{json, Value};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;

use super::namespaces;
use super::path::Target;
use super::status::ApiError;

/// The finalizer that has the garbage collector release an owner's
/// dependents before the owner goes (`metav1.FinalizerOrphanDependents`).
pub const ORPHAN: &str = "orphan";
/// The finalizer that holds an owner until its blocking dependents are
/// gone (`metav1.FinalizerDeleteDependents`).
pub const FOREGROUND: &str = "foregroundDeletion";

/// A pod's grace period when neither the request nor the pod says
/// (Kubernetes' default `terminationGracePeriodSeconds`).
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

pub use crate::clock::now;

/// What a delete does to the object as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Remove it now (against the revision read).
    Remove,
    /// Store this version of it: the deletion is pending (graceful or
    /// waiting for finalizers).
    Mark(Value),
    /// Its deletion is already pending and this request changes nothing.
    Pending,
}

/// The `DeleteOptions` of a request: the body's (kubectl sends one), else
/// the query's `gracePeriodSeconds` (kube-rs and curl users pass it there).
pub fn options(
    body: Option<Value>,
    q: &HashMap<String, String>,
) -> Result<DeleteOptions, ApiError> {
    let mut o: DeleteOptions = match body {
        None => DeleteOptions::default(),
        Some(v) => serde_json::from_value(v).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("the body is not a DeleteOptions: {e}"),
            )
        })?,
    };
    if o.grace_period_seconds.is_none() {
        if let Some(g) = q.get("gracePeriodSeconds") {
            o.grace_period_seconds = Some(g.parse().map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("gracePeriodSeconds: {g:?} is not a whole number"),
                )
            })?);
        }
    }
    validate_options(&o)?;
    Ok(o)
}

/// kube-apiserver's checks of `DeleteOptions`' propagation fields.
pub fn validate_options(o: &DeleteOptions) -> Result<(), ApiError> {
    let Some(p) = o.propagation_policy.as_deref() else {
        return Ok(());
    };
    if o.orphan_dependents.is_some() {
        return Err(ApiError::invalid_options(
            "DeleteOptions",
            &[(
                "propagationPolicy",
                "FieldValueInvalid",
                format!("Invalid value: {p:?}: orphanDependents and deletionPropagation cannot be both set"),
            )],
        ));
    }
    if !matches!(p, "Foreground" | "Background" | "Orphan") {
        return Err(ApiError::invalid_options(
            "DeleteOptions",
            &[(
                "propagationPolicy",
                "FieldValueNotSupported",
                format!("Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
            )],
        ));
    }
    Ok(())
}

/// Whether the kind never gets the collector's finalizers (upstream's
/// `Unsupported` garbage collection policy: Events).
fn gc_unsupported(t: &Target) -> bool {
    t.resource.kind == "Event"
}

fn finalizers_of(obj: &Value) -> Vec<String> {
    strings_at(obj, "/metadata/finalizers")
}

/// The strings of the list at `pointer` in `obj` (none when absent).
pub fn strings_at(obj: &Value, pointer: &str) -> Vec<String> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The `metadata.finalizers` a delete leaves on `obj`: its own but for the
/// collector's two, then the one `opts` (else the object's, else the
/// kind's default, Background: none) asks for, as the generic store's
/// `deletionFinalizersForGarbageCollection`.
pub fn gc_finalizers(t: &Target, obj: &Value, opts: &DeleteOptions) -> Vec<String> {
    let current = finalizers_of(obj);
    if gc_unsupported(t) {
        return current;
    }
    let had = |f: &str| current.iter().position(|c| c == f);
    let policy = match (opts.orphan_dependents, opts.propagation_policy.as_deref()) {
        (Some(true), _) => Some(ORPHAN),
        (Some(false), _) => None,
        (None, Some("Orphan")) => Some(ORPHAN),
        (None, Some("Foreground")) => Some(FOREGROUND),
        (None, Some(_)) => None,
        // The first of the two on the object decides, as upstream reads
        // them in order.
        (None, None) => match (had(ORPHAN), had(FOREGROUND)) {
            (Some(o), Some(f)) if f < o => Some(FOREGROUND),
            (Some(_), _) => Some(ORPHAN),
            (None, Some(_)) => Some(FOREGROUND),
            (None, None) => None,
        },
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if let Some(p) = policy {
        out.push(p.to_string());
    }
    // Unchanged as a set: the object keeps its own order.
    let same = out.len() == current.len() && out.iter().all(|f| current.contains(f));
    if same {
        current
    } else {
        out
    }
}

fn conflict(t: &Target, name: &str, what: &str, want: &str, have: &str) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} {name:?}: Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}",
            t.resource.name
        ),
    );
    e.details = Some(json!({"name": name, "group": t.resource.group, "kind": t.resource.name}));
    e
}

/// Check `DeleteOptions.preconditions` against the object as read
/// (`mod_rev` is its resourceVersion).
pub fn check_preconditions(
    t: &Target,
    obj: &Value,
    mod_rev: i64,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let Some(p) = &opts.preconditions else {
        return Ok(());
    };
    let name = t.name.as_deref().unwrap_or_default();
    if let Some(want) = &p.uid {
        let have = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if want != have {
            return Err(conflict(t, name, "UID", want, have));
        }
    }
    if let Some(want) = &p.resource_version {
        let have = mod_rev.to_string();
        if *want != have {
            return Err(conflict(t, name, "ResourceVersion", want, &have));
        }
    }
    Ok(())
}

fn is_pod(t: &Target) -> bool {
    t.resource.group.is_empty() && t.resource.name == "pods"
}

/// The grace period this delete gives the object: 0 (at once) but for a
/// pod bound to a node and not terminal.
pub fn grace_seconds(t: &Target, obj: &Value, opts: &DeleteOptions) -> i64 {
    if !is_pod(t) {
        return 0;
    }
    let bound = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminal = matches!(
        obj.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !bound || terminal {
        return 0;
    }
    let g = opts.grace_period_seconds.unwrap_or_else(|| {
        obj.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_GRACE_SECONDS)
    });
    // As kube-apiserver: a negative grace is the shortest graceful one.
    if g < 0 {
        1
    } else {
        g
    }
}

fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

fn timestamp_at(obj: &Value) -> Option<Timestamp> {
    obj.pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
}

/// RFC 3339, UTC, whole seconds, as Kubernetes writes timestamps.
fn rfc3339(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// Decide a delete of `obj` at `now`, preconditions already checked.
pub fn decide(t: &Target, obj: &Value, opts: &DeleteOptions, now: Timestamp) -> Outcome {
    if namespaces::is_namespace(t) {
        return decide_namespace(t, obj, opts, now);
    }
    let grace = grace_seconds(t, obj, opts);
    let existing = timestamp_at(obj);
    let existing_grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    // A graceful deletion under way keeps its finalizers: options cannot
    // change them then, as upstream.
    let graceful_pending = existing.is_some() && existing_grace.is_some_and(|g| g > 0);
    let finalizers = if graceful_pending {
        finalizers_of(obj)
    } else {
        gc_finalizers(t, obj, opts)
    };
    if grace == 0 && finalizers.is_empty() {
        return Outcome::Remove;
    }
    let due = now
        .checked_add(SignedDuration::from_secs(grace))
        .unwrap_or(now);
    let (at, g) = match (existing, existing_grace) {
        // Already pending: a shorter grace brings it forward, a longer
        // one changes nothing.
        (Some(at), Some(eg)) if grace >= eg => (at, eg),
        (Some(at), _) => (at.min(due), grace),
        (None, _) => (due, grace),
    };
    let same_finalizers = finalizers == finalizers_of(obj);
    if existing == Some(at) && existing_grace == Some(g) && same_finalizers {
        return Outcome::Pending;
    }
    let mut marked = obj.clone();
    if let Some(m) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("deletionTimestamp".into(), json!(rfc3339(at)));
        m.insert("deletionGracePeriodSeconds".into(), json!(g));
        if !same_finalizers {
            m.insert("finalizers".into(), json!(finalizers));
        }
    }
    Outcome::Mark(marked)
}

/// A Namespace's delete, as its registry decides it: marked Terminating
/// (now, once) while any finalizer holds it, `spec.finalizers` included,
/// and removed once none does.
fn decide_namespace(t: &Target, obj: &Value, opts: &DeleteOptions, now: Timestamp) -> Outcome {
    let existing = timestamp_at(obj);
    // Options only change the collector's finalizers when they name a
    // policy; otherwise those on the namespace stay.
    let explicit = opts.orphan_dependents.is_some() || opts.propagation_policy.is_some();
    let finalizers = if explicit {
        gc_finalizers(t, obj, opts)
    } else {
        finalizers_of(obj)
    };
    let held = !finalizers.is_empty() || !namespaces::spec_finalizers(obj).is_empty();
    if !held {
        return Outcome::Remove;
    }
    let terminating = obj.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
    let same_finalizers = finalizers == finalizers_of(obj);
    if existing.is_some() && terminating && same_finalizers {
        return Outcome::Pending;
    }
    let mut marked = obj.clone();
    if let Some(m) = marked.as_object_mut() {
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            let at = existing.unwrap_or(now);
            meta.insert("deletionTimestamp".into(), json!(rfc3339(at)));
            if !same_finalizers {
                meta.insert("finalizers".into(), json!(finalizers));
            }
        }
        let status = m.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            s.insert("phase".into(), json!("Terminating"));
        }
    }
    Outcome::Mark(marked)
}

/// Whether an update from `old` to `new` of `t` lets a pending deletion
/// finish: the last finalizer went from an object being deleted with no
/// grace left (kube-apiserver's `shouldDeleteDuringUpdate`; for a
/// Namespace, `spec.finalizers` count too). A pod still in its grace
/// period stays for its node to delete it.
pub fn finalized(t: &Target, old: &Value, new: &Value) -> bool {
    let held = |v: &Value| {
        has_finalizers(v)
            || (namespaces::is_namespace(t) && !namespaces::spec_finalizers(v).is_empty())
    };
    held(old)
        && !held(new)
        && new.pointer("/metadata/deletionTimestamp").is_some()
        && new
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_none_or(|g| g == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;
    use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

    fn now() -> Timestamp {
        "2026-11-23T10:00:00Z".parse().expect("ts")
    }

    fn pods() -> Target {
        resolve("/api/v1/namespaces/default/pods/web").expect("path")
    }

    fn grace(g: i64) -> DeleteOptions {
        DeleteOptions {
            grace_period_seconds: Some(g),
            ..Default::default()
        }
    }

    fn marked(o: Outcome) -> Value {
        match o {
            Outcome::Mark(v) => v["metadata"].clone(),
            other => panic!("expected a mark, got {other:?}"),
        }
    }

    #[test]
    fn bound_pods_wait_their_grace_and_unbound_ones_go() {
        let t = pods();
        let bound = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        let m = marked(decide(&t, &bound, &DeleteOptions::default(), now()));
        assert_eq!(m["deletionTimestamp"], "2026-11-23T10:00:30Z");
        assert_eq!(m["deletionGracePeriodSeconds"], 30);
        let mut own = bound.clone();
        own["spec"]["terminationGracePeriodSeconds"] = json!(5);
        let m = marked(decide(&t, &own, &DeleteOptions::default(), now()));
        assert_eq!(m["deletionGracePeriodSeconds"], 5);
        let m = marked(decide(&t, &own, &grace(12), now()));
        assert_eq!(m["deletionTimestamp"], "2026-11-23T10:00:12Z");
        assert_eq!(decide(&t, &bound, &grace(0), now()), Outcome::Remove);
        let unbound = json!({"metadata": {"name": "web"}, "spec": {}});
        assert_eq!(decide(&t, &unbound, &grace(30), now()), Outcome::Remove);
        let mut done = bound.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(
            decide(&t, &done, &DeleteOptions::default(), now()),
            Outcome::Remove
        );
        // Other kinds have no grace.
        let svc = resolve("/api/v1/namespaces/default/services/web").expect("path");
        assert_eq!(decide(&svc, &bound, &grace(30), now()), Outcome::Remove);
    }

    #[test]
    fn a_pending_deletion_is_only_ever_brought_forward() {
        let t = pods();
        let pending = json!({"metadata": {"name": "web", "deletionTimestamp": "2026-11-23T10:00:30Z", "deletionGracePeriodSeconds": 30}, "spec": {"nodeName": "n"}});
        assert_eq!(decide(&t, &pending, &grace(60), now()), Outcome::Pending);
        let m = marked(decide(&t, &pending, &grace(10), now()));
        assert_eq!(m["deletionTimestamp"], "2026-11-23T10:00:10Z");
        assert_eq!(m["deletionGracePeriodSeconds"], 10);
        assert_eq!(decide(&t, &pending, &grace(0), now()), Outcome::Remove);
    }

    #[test]
    fn finalizers_hold_an_object_until_an_update_empties_them() {
        let ns = resolve("/api/v1/namespaces/default/configmaps/x").expect("path");
        let held = json!({"metadata": {"name": "x", "finalizers": ["sluice.dev/hold"]}});
        let m = marked(decide(&ns, &held, &DeleteOptions::default(), now()));
        assert_eq!(m["deletionTimestamp"], "2026-11-23T10:00:00Z");
        assert_eq!(m["deletionGracePeriodSeconds"], 0);
        let mut marked_obj = held.clone();
        marked_obj["metadata"] = m;
        assert_eq!(
            decide(&ns, &marked_obj, &DeleteOptions::default(), now()),
            Outcome::Pending
        );
        let mut emptied = marked_obj.clone();
        emptied["metadata"]["finalizers"] = json!([]);
        assert!(finalized(&ns, &marked_obj, &emptied));
        assert!(!finalized(&ns, &marked_obj, &marked_obj));
        // Not being deleted: emptying finalizers is just an update.
        let mut plain = held.clone();
        plain["metadata"]["finalizers"] = json!([]);
        assert!(!finalized(&ns, &held, &plain));
        // A bound pod with a finalizer waits for its node too.
        let pod =
            json!({"metadata": {"name": "web", "finalizers": ["f"]}, "spec": {"nodeName": "n"}});
        let m = marked(decide(&pods(), &pod, &grace(0), now()));
        assert_eq!(m["deletionGracePeriodSeconds"], 0);
    }

    #[test]
    fn preconditions_and_options_are_checked() {
        let t = pods();
        let obj = json!({"metadata": {"name": "web", "uid": "u-1"}});
        let with = |uid: Option<&str>, rv: Option<&str>| DeleteOptions {
            preconditions: Some(Preconditions {
                uid: uid.map(String::from),
                resource_version: rv.map(String::from),
            }),
            ..Default::default()
        };
        assert!(check_preconditions(&t, &obj, 7, &with(Some("u-1"), Some("7"))).is_ok());
        let e = check_preconditions(&t, &obj, 7, &with(Some("u-2"), None)).expect_err("uid");
        assert_eq!(e.code, StatusCode::CONFLICT);
        assert!(
            e.message.contains("UID in precondition: u-2"),
            "{}",
            e.message
        );
        let e = check_preconditions(&t, &obj, 7, &with(None, Some("6"))).expect_err("rv");
        assert!(
            e.message.contains("ResourceVersion in precondition: 6"),
            "{}",
            e.message
        );

        let q: HashMap<String, String> =
            [("gracePeriodSeconds".to_string(), "0".to_string())].into();
        assert_eq!(options(None, &q).expect("q").grace_period_seconds, Some(0));
        let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 5, "propagationPolicy": "Background"});
        assert_eq!(
            options(Some(body), &q).expect("b").grace_period_seconds,
            Some(5)
        );
        assert!(options(Some(json!({"gracePeriodSeconds": "x"})), &HashMap::new()).is_err());
        let q: HashMap<String, String> =
            [("gracePeriodSeconds".to_string(), "x".to_string())].into();
        assert!(options(None, &q).is_err());
    }

    fn policy(p: &str) -> DeleteOptions {
        DeleteOptions {
            propagation_policy: Some(p.into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_propagation_policy_chooses_the_collectors_finalizer() {
        let d = resolve("/apis/apps/v1/namespaces/default/deployments/web").expect("path");
        let plain = json!({"metadata": {"name": "web"}});
        let mine = json!({"metadata": {"name": "web", "finalizers": ["example.com/keep"]}});
        let orphaned = json!({"metadata": {"name": "web", "finalizers": ["orphan"]}});
        let foreground = json!({"metadata": {"name": "web", "finalizers": ["foregroundDeletion"]}});
        let orphan_bool = |b: bool| DeleteOptions {
            orphan_dependents: Some(b),
            ..Default::default()
        };
        let none = DeleteOptions::default();
        // (rule, object, options, finalizers after the delete)
        let cases: [(&str, &Value, DeleteOptions, Vec<&str>); 9] = [
            (
                "background is the default: no finalizer",
                &plain,
                none.clone(),
                vec![],
            ),
            ("Background adds none", &plain, policy("Background"), vec![]),
            (
                "Orphan adds orphan",
                &plain,
                policy("Orphan"),
                vec!["orphan"],
            ),
            (
                "Foreground adds foregroundDeletion",
                &plain,
                policy("Foreground"),
                vec!["foregroundDeletion"],
            ),
            (
                "the object's own finalizers stay",
                &mine,
                policy("Orphan"),
                vec!["example.com/keep", "orphan"],
            ),
            (
                "an explicit policy replaces the object's",
                &orphaned,
                policy("Foreground"),
                vec!["foregroundDeletion"],
            ),
            (
                "without options the object's finalizer decides",
                &foreground,
                none.clone(),
                vec!["foregroundDeletion"],
            ),
            (
                "orphanDependents true is Orphan",
                &plain,
                orphan_bool(true),
                vec!["orphan"],
            ),
            (
                "orphanDependents false removes both",
                &orphaned,
                orphan_bool(false),
                vec![],
            ),
        ];
        for (rule, obj, opts, want) in cases {
            assert_eq!(gc_finalizers(&d, obj, &opts), want, "{rule}");
        }
        // Events never get them.
        let ev = resolve("/api/v1/namespaces/default/events/e").expect("path");
        assert!(gc_finalizers(&ev, &plain, &policy("Orphan")).is_empty());
    }

    #[test]
    fn an_owner_deleted_with_orphan_or_foreground_stays_marked() {
        let d = resolve("/apis/apps/v1/namespaces/default/deployments/web").expect("path");
        let obj = json!({"metadata": {"name": "web"}});
        assert_eq!(
            decide(&d, &obj, &policy("Background"), now()),
            Outcome::Remove
        );
        let m = marked(decide(&d, &obj, &policy("Orphan"), now()));
        assert_eq!(m["finalizers"], json!(["orphan"]));
        assert_eq!(m["deletionTimestamp"], "2026-11-23T10:00:00Z");
        assert_eq!(m["deletionGracePeriodSeconds"], 0);
        let m = marked(decide(&d, &obj, &policy("Foreground"), now()));
        assert_eq!(m["finalizers"], json!(["foregroundDeletion"]));
        // Deleted again with the same policy: nothing changes.
        let mut pending = obj.clone();
        pending["metadata"] = m;
        assert_eq!(
            decide(&d, &pending, &policy("Foreground"), now()),
            Outcome::Pending
        );
        // A pod in its grace period keeps the finalizers it has.
        let pod = json!({"metadata": {"name": "web", "deletionTimestamp": "2026-11-23T10:00:30Z",
            "deletionGracePeriodSeconds": 30}, "spec": {"nodeName": "n"}});
        assert_eq!(
            decide(&pods(), &pod, &policy("Orphan"), now()),
            Outcome::Pending
        );
    }

    #[test]
    fn delete_options_are_validated_as_upstream() {
        let both = json!({"propagationPolicy": "Foreground", "orphanDependents": true});
        let e = options(Some(both), &HashMap::new()).expect_err("both");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.ends_with(r#"propagationPolicy: Invalid value: "Foreground": orphanDependents and deletionPropagation cannot be both set"#),
            "{}",
            e.message
        );
        let e = options(
            Some(json!({"propagationPolicy": "Sideways"})),
            &HashMap::new(),
        )
        .expect_err("unsupported");
        assert!(
            e.message.contains(r#"Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil""#),
            "{}",
            e.message
        );
        for p in ["Foreground", "Background", "Orphan"] {
            assert!(options(Some(json!({"propagationPolicy": p})), &HashMap::new()).is_ok());
        }
    }

    #[test]
    fn a_namespace_terminates_while_its_finalizers_hold_it() {
        let ns = resolve("/api/v1/namespaces/team-a").expect("path");
        let active = json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"}});
        let Outcome::Mark(m) = decide(&ns, &active, &policy("Background"), now()) else {
            panic!("a namespace with finalizers is marked");
        };
        assert_eq!(m["metadata"]["deletionTimestamp"], "2026-11-23T10:00:00Z");
        assert!(m["metadata"].get("deletionGracePeriodSeconds").is_none());
        assert_eq!(m["status"]["phase"], "Terminating");
        assert_eq!(m["spec"]["finalizers"], json!(["kubernetes"]));
        // Deleted again: the first deletionTimestamp stays, nothing changes.
        let later = now().checked_add(SignedDuration::from_secs(9)).expect("ts");
        assert_eq!(
            decide(&ns, &m, &policy("Background"), later),
            Outcome::Pending
        );
        // The finalize left none: removed, by the update or by a delete.
        let mut emptied = m.clone();
        emptied["spec"]["finalizers"] = json!([]);
        assert!(finalized(&ns, &m, &emptied));
        assert_eq!(
            decide(&ns, &emptied, &DeleteOptions::default(), later),
            Outcome::Remove
        );
        // A namespace without finalizers goes at once.
        let bare = json!({"metadata": {"name": "team-a"}, "spec": {}});
        assert_eq!(
            decide(&ns, &bare, &DeleteOptions::default(), now()),
            Outcome::Remove
        );
        // Foreground holds it with the metadata finalizer too.
        let Outcome::Mark(m) = decide(&ns, &bare, &policy("Foreground"), now()) else {
            panic!("held by foregroundDeletion");
        };
        assert_eq!(m["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    }
}
