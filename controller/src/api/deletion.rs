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

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{json, Value};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;

use super::path::Target;
use super::status::ApiError;

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
    Ok(o)
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
    let grace = grace_seconds(t, obj, opts);
    let finalizers = has_finalizers(obj);
    if grace == 0 && !finalizers {
        return Outcome::Remove;
    }
    let existing = timestamp_at(obj);
    let existing_grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
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
    if existing == Some(at) && existing_grace == Some(g) {
        return Outcome::Pending;
    }
    let mut marked = obj.clone();
    if let Some(m) = marked.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("deletionTimestamp".into(), json!(rfc3339(at)));
        m.insert("deletionGracePeriodSeconds".into(), json!(g));
    }
    Outcome::Mark(marked)
}

/// Whether an update from `old` to `new` lets a pending deletion finish:
/// the last finalizer went from an object being deleted with no grace left
/// (kube-apiserver's `shouldDeleteDuringUpdate`). A pod still in its grace
/// period stays for its node to delete it.
pub fn finalized(old: &Value, new: &Value) -> bool {
    has_finalizers(old)
        && !has_finalizers(new)
        && new.pointer("/metadata/deletionTimestamp").is_some()
        && new
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_none_or(|g| g == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::path::resolve;
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
        let ns = resolve("/api/v1/namespaces/x").expect("path");
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
        assert!(finalized(&marked_obj, &emptied));
        assert!(!finalized(&marked_obj, &marked_obj));
        // Not being deleted: emptying finalizers is just an update.
        let mut plain = held.clone();
        plain["metadata"]["finalizers"] = json!([]);
        assert!(!finalized(&held, &plain));
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
}
