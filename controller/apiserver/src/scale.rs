//! The scale subresource of Deployments and ReplicaSets
//! (`.../deployments/<name>/scale`), as kube-apiserver serves it: an
//! `autoscaling/v1` `Scale` made from the parent (`spec.replicas`,
//! `status.replicas`, `status.selector` as a label-selector string), read
//! with `get` and written with `update` or `patch` (merge, strategic,
//! JSON patch), which write only the parent's `spec.replicas`.
//!
//! A write goes through the parent's update (validation, defaults,
//! `generation`, `dryRun`), against the Scale's resourceVersion when it
//! sends one (409 when the parent moved), else against the parent as
//! read, read again when it moved meanwhile. Its manager owns the parent's
//! `spec.replicas` in an `Update` entry of subresource `scale`, taken from
//! whoever owned it, as kube-apiserver's scale handler records it. The
//! Scale answered carries no managedFields, as kube-apiserver's.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Map, Value};
use sluice_model::decode::FieldValidation;

use super::apply::{self, Writer};
use super::meta;
use super::objects::{bad_request, decode_stored, fetch, json_response, read_body, Objects};
use super::path::Target;
use super::status::ApiError;
use super::write::{self, Update};
use super::{dry_run, fields, patch, selector};

/// How often a write without a resourceVersion reads the parent again
/// after it moved meanwhile, before it answers 409.
const ATTEMPTS: usize = 5;

/// `GET`, `PUT` and `PATCH` of `<parent>/scale`.
pub async fn handle(
    o: &Objects,
    t: &Target,
    verb: &str,
    uri: &Uri,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let parent = Target {
        subresource: None,
        ..t.clone()
    };
    match verb {
        "get" => {
            let kv = fetch(o, &parent).await?;
            let live = meta::with_resource_version(decode_stored(&kv.value)?, kv.mod_rev);
            Ok(json_response(StatusCode::OK, scale_of(&live)))
        }
        "update" | "patch" => {
            let o = o.for_request(verb, &dry_run::query_values(uri)?)?;
            let mode = fields::mode(q)?;
            let change = match verb {
                "update" => Change::Replace,
                _ => match write::patch_format(headers)? {
                    patch::Format::Apply => {
                        return Err(ApiError::new(
                            StatusCode::UNSUPPORTED_MEDIA_TYPE,
                            "UnsupportedMediaType",
                            "server-side apply to the scale subresource is not served; use a merge, strategic merge or JSON patch",
                        ))
                    }
                    f => Change::Patch(f),
                },
            };
            let writer = write::writer_of(verb, false, q, headers)?;
            let body = read_body(headers, body).await?;
            let req = Write {
                parent: &parent,
                change,
                body: &body,
                writer: &writer,
                mode,
            };
            write_scale(&o, &req).await
        }
        _ => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("{verb} is not supported on {}/scale", t.resource.name),
        )),
    }
}

/// What a scale write sends: a whole Scale, or a patch of the current one.
#[derive(Clone, Copy)]
enum Change {
    Replace,
    Patch(patch::Format),
}

struct Write<'a> {
    parent: &'a Target,
    change: Change,
    body: &'a Value,
    writer: &'a Writer,
    mode: FieldValidation,
}

async fn write_scale(o: &Objects, req: &Write<'_>) -> Result<Response, ApiError> {
    let t = req.parent;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let kv = fetch(o, t).await?;
        let stored = decode_stored(&kv.value)?;
        let live = meta::with_resource_version(stored.clone(), kv.mod_rev);
        let current = scale_of(&live);
        let sent = match req.change {
            Change::Replace => req.body.clone(),
            Change::Patch(format) => {
                let mut s = current.clone();
                write::apply_patch(t, &mut s, format, req.body, req.writer, false)?;
                s
            }
        };
        let wanted = Wanted::read(t, &sent)?;
        let (parent, pinned) = scaled(&stored, &wanted, kv.mod_rev);
        let mut parent = parent;
        apply::record_update(
            &apply::Request::scale(t, req.writer),
            Some(&stored),
            &mut parent,
        );
        let update = Update {
            status_only: false,
            mode: req.mode,
            track: None,
        };
        match write::replace_object(o, t, parent, &update).await {
            Ok(w) => return Ok(json_response(w.code, scale_of(&w.obj))),
            // The parent moved between the read and the write, and the
            // Scale asked for no version: scale what it is now.
            Err(e) if e.code == StatusCode::CONFLICT && !pinned && attempt < ATTEMPTS => {}
            Err(e) => return Err(e),
        }
    }
}

/// The Scale of a Deployment or ReplicaSet (with its resourceVersion).
pub fn scale_of(parent: &Value) -> Value {
    let m = |k: &str| parent.pointer(&format!("/metadata/{k}")).cloned();
    let mut metadata = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m(k) {
            metadata.insert(k.into(), v);
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas_of(parent)},
        "status": {
            "replicas": parent.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector::to_string(parent.pointer("/spec/selector")),
        },
    })
}

/// A Deployment's or ReplicaSet's `spec.replicas` (1 when unset, their
/// default).
fn replicas_of(parent: &Value) -> i64 {
    parent
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// What a Scale sent asks for, checked as kube-apiserver checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub replicas: i64,
    /// The Scale's resourceVersion: the parent must still be at it.
    pub resource_version: Option<i64>,
}

impl Wanted {
    /// Read a Scale sent to `t` (the parent): its kind, name and
    /// namespace must be the parent's (400), its `spec.replicas` a whole
    /// number ≥ 0 (absent: 0, as `autoscaling/v1` decodes it).
    pub fn read(t: &Target, scale: &Value) -> Result<Wanted, ApiError> {
        let name = t.name.as_deref().unwrap_or_default();
        if !scale.is_object() {
            return Err(bad_request("the body must be an autoscaling/v1 Scale"));
        }
        match scale.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(k)) if k == "Scale" => {}
            Some(other) => {
                return Err(bad_request(format!(
                    "the body must be an autoscaling/v1 Scale, not a {other}"
                )))
            }
        }
        let sent_name = scale
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if sent_name != name {
            return Err(bad_request(format!(
                "the name of the object ({sent_name}) does not match the name on the URL ({name})"
            )));
        }
        if let (Some(ns), Some(sent)) = (
            &t.namespace,
            scale.pointer("/metadata/namespace").and_then(Value::as_str),
        ) {
            if sent != ns {
                return Err(bad_request(format!(
                    "the namespace of the provided object ({sent}) does not match the namespace sent on the request ({ns})"
                )));
            }
        }
        let scale_t = |field: &str, message: &str| {
            let mut e = meta::invalid(t, name, field, message);
            e.message = format!("Scale.autoscaling {name:?} is invalid: {field}: {message}");
            if let Some(d) = e.details.as_mut() {
                d["group"] = json!("autoscaling");
                d["kind"] = json!("Scale");
            }
            e
        };
        let replicas = match scale.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_i64() {
                Some(n) if i32::try_from(n).is_ok() => n,
                _ => {
                    return Err(bad_request(format!(
                        "Scale spec.replicas: {v} is not a 32-bit whole number"
                    )))
                }
            },
        };
        if replicas < 0 {
            return Err(scale_t(
                "spec.replicas",
                &format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            ));
        }
        let resource_version = meta::sent_resource_version(scale)
            .map_err(|m| scale_t("metadata.resourceVersion", &m))?;
        Ok(Wanted {
            replicas,
            resource_version,
        })
    }
}

/// The parent as stored with the replicas `wanted`, made against the
/// Scale's resourceVersion, else against `read_at` (the revision it was
/// read at); and whether the Scale pinned the version.
pub fn scaled(stored: &Value, wanted: &Wanted, read_at: i64) -> (Value, bool) {
    let mut parent = stored.clone();
    if let Some(spec) = parent
        .as_object_mut()
        .map(|p| p.entry("spec").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    {
        spec.insert("replicas".into(), json!(wanted.replicas));
    }
    let rev = wanted.resource_version.unwrap_or(read_at);
    (
        meta::with_resource_version(parent, rev),
        wanted.resource_version.is_some(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "web"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "tier": "fe"}}},
            "status": {"replicas": 2, "readyReplicas": 2}})
    }

    #[test]
    fn a_scale_is_the_parents_replicas_and_selector_without_the_rest() {
        let s = scale_of(&deployment());
        assert_eq!(
            s,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                    "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 3},
                "status": {"replicas": 2, "selector": "app=web,tier=fe"}})
        );
        let mut fresh = deployment();
        fresh["spec"].as_object_mut().map(|s| s.remove("replicas"));
        fresh.as_object_mut().map(|d| d.remove("status"));
        let s = scale_of(&fresh);
        assert_eq!(s["spec"]["replicas"], 1);
        assert_eq!(s["status"]["replicas"], 0);
    }

    #[test]
    fn scales_sent_are_checked_as_kube_apiserver_checks_them() {
        let t = resolve("/apis/apps/v1/namespaces/default/deployments/web").expect("path");
        let ok = |s: Value| Wanted::read(&t, &s).map_err(|e| (e.code, e.message));
        assert_eq!(
            ok(
                json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": {"replicas": 5}})
            ),
            Ok(Wanted {
                replicas: 5,
                resource_version: Some(7)
            })
        );
        assert_eq!(
            ok(json!({"kind": "Scale", "metadata": {"name": "web"}, "spec": {}})),
            Ok(Wanted {
                replicas: 0,
                resource_version: None
            })
        );
        let e =
            ok(json!({"metadata": {"name": "web"}, "spec": {"replicas": -1}})).expect_err("< 0");
        assert_eq!(e.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.1,
            "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        for (bad, code) in [
            (
                json!({"metadata": {"name": "db"}, "spec": {"replicas": 1}}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"metadata": {"name": "web", "namespace": "x"}}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"kind": "Deployment", "metadata": {"name": "web"}}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"metadata": {"name": "web"}, "spec": {"replicas": "3"}}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"metadata": {"name": "web"}, "spec": {"replicas": 1.5}}),
                StatusCode::BAD_REQUEST,
            ),
            (
                json!({"metadata": {"name": "web"}, "spec": {"replicas": 4294967296_i64}}),
                StatusCode::BAD_REQUEST,
            ),
            (json!([1]), StatusCode::BAD_REQUEST),
            (
                json!({"metadata": {"name": "web", "resourceVersion": "x"}}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
        ] {
            assert_eq!(ok(bad.clone()).map_err(|e| e.0), Err(code), "{bad}");
        }
    }

    #[test]
    fn scaling_changes_only_the_parents_replicas() {
        let mut stored = deployment();
        stored["metadata"]
            .as_object_mut()
            .map(|m| m.remove("resourceVersion"));
        let wanted = Wanted {
            replicas: 0,
            resource_version: None,
        };
        let (p, pinned) = scaled(&stored, &wanted, 42);
        assert!(!pinned);
        let mut expect = deployment();
        expect["spec"]["replicas"] = json!(0);
        assert_eq!(p, expect);
        let (p, pinned) = scaled(
            &stored,
            &Wanted {
                replicas: 9,
                resource_version: Some(40),
            },
            42,
        );
        assert!(pinned);
        assert_eq!(p["metadata"]["resourceVersion"], "40");
        assert_eq!(p["spec"]["replicas"], 9);
    }

    #[test]
    fn a_scale_write_owns_the_parents_replicas_only() {
        let t = resolve("/apis/apps/v1/namespaces/default/deployments/web").expect("path");
        let w = Writer {
            manager: "kubectl".into(),
            force: false,
            now: "2026-01-02T00:00:00Z".into(),
        };
        let mut stored = deployment();
        stored["metadata"]["managedFields"] = json!([{"manager": "kubectl-client-side-apply",
            "operation": "Update", "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:selector": {}}}}]);
        let (mut p, _) = scaled(
            &stored,
            &Wanted {
                replicas: 5,
                resource_version: None,
            },
            1,
        );
        apply::record_update(&apply::Request::scale(&t, &w), Some(&stored), &mut p);
        assert_eq!(
            p["metadata"]["managedFields"],
            json!([
                {"manager": "kubectl-client-side-apply", "operation": "Update",
                 "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:selector": {}}}},
                {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
                 "time": "2026-01-02T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
            ])
        );
    }
}
