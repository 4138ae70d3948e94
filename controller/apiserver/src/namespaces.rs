//! Namespaces' lifecycle at the API, as kube-apiserver's NamespaceLifecycle
//! admission plugin and the namespace registry decide it (pure but for
//! [`state`], which reads the namespace):
//!
//! - a namespaced object is created only in a namespace that exists (404
//!   `namespaces "X" not found`) and is not Terminating (403, with the
//!   `NamespaceTerminating` cause controllers look for); updates and
//!   deletes inside a Terminating namespace go on, so its content can be
//!   cleaned up;
//! - `default`, `kube-system` and `kube-public` may not be deleted (403);
//!   `kube-node-lease` may, as upstream;
//! - a namespace's `spec.finalizers` (the `kubernetes` token the namespace
//!   deletion loop removes once the namespace is empty) moves only through
//!   the `finalize` subresource, and its status only through `status`:
//!   the main resource keeps both as stored ([`strategy`]).

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::objects::{decode_stored, key, store_error, Objects};
use super::path::{resolve, Target};
use super::status::ApiError;

/// The namespaces that can never be deleted (upstream's immortal ones).
pub const IMMORTAL: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The finalizer token of `spec.finalizers` the namespace deletion loop
/// owns: created namespaces carry it, and it goes once their content is.
pub const KUBERNETES: &str = "kubernetes";

/// What a write finds of the namespace it targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Missing,
    Active,
    Terminating,
}

/// A namespace as stored: Terminating once its deletion began (the phase
/// is set with the deletionTimestamp, either marks it).
pub fn state_of(ns: Option<&Value>) -> State {
    match ns {
        None => State::Missing,
        Some(v) => {
            let phase = v.pointer("/status/phase").and_then(Value::as_str);
            if phase == Some("Terminating") || v.pointer("/metadata/deletionTimestamp").is_some() {
                State::Terminating
            } else {
                State::Active
            }
        }
    }
}

/// The namespace `name` as the store has it now. The store is read
/// directly, so there is no stale cache to wait for as upstream's plugin
/// must.
pub async fn state(o: &Objects, name: &str) -> Result<State, ApiError> {
    let t = namespace_target(name)?;
    let kv = o
        .store
        .get(&key(&t, Some(name)))
        .await
        .map_err(|e| store_error(&t, e))?;
    match kv {
        None => Ok(State::Missing),
        Some(kv) => Ok(state_of(Some(&decode_stored(&kv.value)?))),
    }
}

fn namespace_target(name: &str) -> Result<Target, ApiError> {
    resolve(&format!("/api/v1/namespaces/{name}")).map_err(|_| not_found(name))
}

/// `namespaces "X" not found`, as upstream's plugin returns the lookup's
/// NotFound unchanged.
pub fn not_found(ns: &str) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("namespaces {ns:?} not found"),
    );
    e.details = Some(json!({"name": ns, "kind": "namespaces"}));
    e
}

/// `<resource>[.<group>]`, as kube-apiserver names a resource in errors.
fn qualified(t: &Target) -> String {
    if t.resource.group.is_empty() {
        t.resource.name.to_string()
    } else {
        format!("{}.{}", t.resource.name, t.resource.group)
    }
}

/// The name admission errors give a new object: its name, else its
/// `generateName` (admission runs before a name is generated), else
/// `Unknown`.
fn admission_name(obj: &Value) -> String {
    let field = |f: &str| {
        obj.pointer(f)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    field("/metadata/name")
        .or_else(|| field("/metadata/generateName"))
        .unwrap_or_else(|| "Unknown".into())
}

/// Whether creating `obj` in the collection `t` may go on, given the state
/// of its namespace. Cluster-scoped kinds (Namespaces included) are not
/// checked.
pub fn admit_create(t: &Target, obj: &Value, ns: State) -> Result<(), ApiError> {
    let Some(namespace) = t.namespace.as_deref().filter(|_| t.resource.namespaced) else {
        return Ok(());
    };
    match ns {
        State::Active => Ok(()),
        State::Missing => Err(not_found(namespace)),
        State::Terminating => {
            let name = admission_name(obj);
            let mut e = ApiError::new(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "{} {name:?} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    qualified(t)
                ),
            );
            e.details = Some(json!({
                "name": name,
                "group": t.resource.group,
                "kind": t.resource.name,
                "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {namespace} is being terminated"),
                    "field": "metadata.namespace",
                }],
            }));
            Err(e)
        }
    }
}

/// Whether the namespace `t` names may be deleted (any other target may).
pub fn admit_delete(t: &Target) -> Result<(), ApiError> {
    let Some(name) = t.name.as_deref().filter(|_| is_namespace(t)) else {
        return Ok(());
    };
    if !IMMORTAL.contains(&name) {
        return Ok(());
    }
    let mut e = ApiError::new(
        StatusCode::FORBIDDEN,
        "Forbidden",
        format!("namespaces {name:?} is forbidden: this namespace may not be deleted"),
    );
    e.details = Some(json!({"name": name, "kind": "namespaces"}));
    Err(e)
}

/// Whether `t` is the Namespace resource (or one of its subresources).
pub fn is_namespace(t: &Target) -> bool {
    t.resource.group.is_empty() && t.resource.name == "namespaces"
}

/// Whether `t` is a namespace's `finalize` subresource.
pub fn is_finalize(t: &Target) -> bool {
    t.subresource
        .is_some_and(|s| s.name == "namespaces/finalize")
}

/// A namespace's finalizer tokens (`spec.finalizers`).
pub fn spec_finalizers(obj: &Value) -> Vec<String> {
    super::deletion::strings_at(obj, "/spec/finalizers")
}

/// The namespace registry's update strategy over `merged` (the update as
/// sent, `old` as stored): through `finalize` only `spec.finalizers`
/// moves; through the main resource they stay as stored. Other targets
/// are left alone.
pub fn strategy(t: &Target, old: &Value, merged: &mut Value) {
    if !is_namespace(t) {
        return;
    }
    let finalizers = |v: &Value| v.pointer("/spec/finalizers").cloned();
    if is_finalize(t) {
        let sent = finalizers(merged);
        *merged = old.clone();
        set_finalizers(merged, sent);
    } else if t.subresource.is_none() {
        set_finalizers(merged, finalizers(old));
    }
}

fn set_finalizers(obj: &mut Value, f: Option<Value>) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let spec = m.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        match f {
            Some(f) => {
                spec.insert("finalizers".into(), f);
            }
            None => {
                spec.remove("finalizers");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(p: &str) -> Target {
        resolve(p).expect("path")
    }

    #[test]
    fn creates_need_a_namespace_that_exists_and_is_not_terminating() {
        let pods = target("/api/v1/namespaces/team-a/pods");
        let pod = json!({"metadata": {"name": "web-0"}});
        assert!(admit_create(&pods, &pod, State::Active).is_ok());

        let e = admit_create(&pods, &pod, State::Missing).expect_err("missing");
        assert_eq!(e.code, StatusCode::NOT_FOUND);
        assert_eq!(e.reason, "NotFound");
        assert_eq!(e.message, r#"namespaces "team-a" not found"#);
        assert_eq!(
            e.details,
            Some(json!({"name": "team-a", "kind": "namespaces"}))
        );

        let e = admit_create(&pods, &pod, State::Terminating).expect_err("terminating");
        assert_eq!(e.code, StatusCode::FORBIDDEN);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(
            e.message,
            r#"pods "web-0" is forbidden: unable to create new content in namespace team-a because it is being terminated"#
        );
        let d = e.details.expect("details");
        assert_eq!(d["kind"], "pods");
        assert_eq!(d["causes"][0]["reason"], "NamespaceTerminating");
        assert_eq!(
            d["causes"][0]["message"],
            "namespace team-a is being terminated"
        );
        assert_eq!(d["causes"][0]["field"], "metadata.namespace");
    }

    #[test]
    fn the_forbidden_create_names_the_group_and_the_name_before_generation() {
        let deploys = target("/apis/apps/v1/namespaces/t/deployments");
        let e = admit_create(
            &deploys,
            &json!({"metadata": {"generateName": "web-"}}),
            State::Terminating,
        )
        .expect_err("terminating");
        assert!(
            e.message
                .starts_with(r#"deployments.apps "web-" is forbidden"#),
            "{}",
            e.message
        );
        let e = admit_create(&deploys, &json!({}), State::Terminating).expect_err("t");
        assert!(e.message.contains(r#""Unknown""#), "{}", e.message);
    }

    #[test]
    fn cluster_scoped_creates_are_not_checked() {
        for p in ["/api/v1/namespaces", "/api/v1/nodes"] {
            let t = target(p);
            assert!(admit_create(&t, &json!({}), State::Missing).is_ok(), "{p}");
        }
    }

    #[test]
    fn only_the_immortal_namespaces_are_protected() {
        for name in IMMORTAL {
            let e = admit_delete(&target(&format!("/api/v1/namespaces/{name}"))).expect_err(name);
            assert_eq!(e.code, StatusCode::FORBIDDEN);
            assert_eq!(
                e.message,
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
            );
        }
        for p in [
            "/api/v1/namespaces/kube-node-lease",
            "/api/v1/namespaces/team-a",
            "/api/v1/namespaces/default/pods/default",
        ] {
            assert!(admit_delete(&target(p)).is_ok(), "{p}");
        }
    }

    #[test]
    fn a_namespace_is_terminating_by_its_phase_or_its_deletion() {
        assert_eq!(state_of(None), State::Missing);
        assert_eq!(
            state_of(Some(&json!({"status": {"phase": "Active"}}))),
            State::Active
        );
        assert_eq!(
            state_of(Some(&json!({"status": {"phase": "Terminating"}}))),
            State::Terminating
        );
        assert_eq!(
            state_of(Some(
                &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
            )),
            State::Terminating
        );
    }

    #[test]
    fn finalizers_move_through_finalize_only() {
        let old = json!({"metadata": {"name": "x"}, "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Terminating"}});
        let sent = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"finalizers": []},
            "status": {"phase": "Active"}});
        let mut main = sent.clone();
        strategy(&target("/api/v1/namespaces/x"), &old, &mut main);
        assert_eq!(main["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(main["metadata"]["labels"]["a"], "b");

        let mut fin = sent.clone();
        strategy(&target("/api/v1/namespaces/x/finalize"), &old, &mut fin);
        assert_eq!(fin["spec"]["finalizers"], json!([]));
        assert_eq!(fin["status"]["phase"], "Terminating");
        assert!(fin["metadata"].get("labels").is_none());

        // Other kinds are not touched.
        let mut pod = sent.clone();
        strategy(&target("/api/v1/namespaces/x/pods/p"), &old, &mut pod);
        assert_eq!(pod, sent);
    }
}
