//! OpenAPI v3 as kubectl reads it before a write: `/openapi/v3` lists one
//! document per group-version, each with the resources' operations
//! (tagged `x-kubernetes-group-version-kind` and `x-kubernetes-action`,
//! carrying the `fieldValidation` parameter, which tells kubectl to let the
//! server validate with `fieldValidation=Strict`) and a schema per kind.
//! Built-in kinds get an open schema (the server checks them against their
//! types); `sluice.dev/v1` kinds the model crate's derived schemas.

use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::discovery::{KUBE_MAJOR, KUBE_MINOR};
use super::resources::{groups, in_group_version, Resource};
use super::status::ApiError;

/// `api/v1` or `apis/<group>/<version>`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn gvk(r: &Resource) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind})
}

fn op(r: &Resource, action: &str, writes: bool) -> Value {
    let mut params = vec![json!({"name": "pretty", "in": "query", "schema": {"type": "string"}})];
    if writes {
        for p in ["fieldValidation", "dryRun", "fieldManager"] {
            params.push(json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        }
    }
    json!({
        "operationId": format!("{action}{}", r.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(r),
    })
}

/// The schema component name of a built-in kind (`io.k8s.api.core.v1.Pod`).
fn component_name(r: &Resource) -> String {
    let g = match r.group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    format!("io.k8s.api.{g}.{}.{}", r.version, r.kind)
}

/// The document of one group-version, if it is served.
pub fn document(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<&Resource> = in_group_version(group, version)
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .collect();
    if resources.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in &resources {
        let ns = if r.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        paths.insert(
            format!("{base}{ns}/{}", r.name),
            json!({"get": op(r, "list", false), "post": op(r, "post", true)}),
        );
        paths.insert(
            format!("{base}{ns}/{}/{{name}}", r.name),
            json!({
                "get": op(r, "get", false),
                "put": op(r, "put", true),
                "patch": op(r, "patch", true),
                "delete": op(r, "delete", false),
            }),
        );
        if group == "sluice.dev" {
            schemas.extend(sluice_model::openapi::components());
        } else {
            schemas.insert(
                component_name(r),
                json!({
                    "type": "object",
                    "x-kubernetes-group-version-kind": [gvk(r)],
                    "x-kubernetes-preserve-unknown-fields": true,
                }),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

async fn index() -> Json<Value> {
    let mut gvs = vec![("", "v1")];
    gvs.extend(groups().into_iter().map(|g| (g, "v1")));
    let paths: Map<String, Value> = gvs
        .into_iter()
        .map(|(g, v)| {
            let p = gv_path(g, v);
            // The hash lets clients cache a document; the server's own
            // version changes it.
            let url = format!("/openapi/v3/{p}?hash=sluice-{}", env!("CARGO_PKG_VERSION"));
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    Json(json!({"paths": paths}))
}

async fn core(Path(version): Path<String>) -> Result<Json<Value>, ApiError> {
    document("", &version)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(&format!("/openapi/v3/api/{version}")))
}

async fn group(Path((group, version)): Path<(String, String)>) -> Result<Json<Value>, ApiError> {
    document(&group, &version)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(&format!("/openapi/v3/apis/{group}/{version}")))
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/openapi/v3", get(index))
        .route("/openapi/v3/api/{version}", get(core))
        .route("/openapi/v3/apis/{group}/{version}", get(group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_carry_field_validation_and_every_kind_has_a_schema() {
        let d = document("", "v1").expect("core");
        let post = &d["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"];
        assert_eq!(post["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert!(post["parameters"].to_string().contains("fieldValidation"));
        let patch = &d["paths"]["/api/v1/nodes/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert!(d["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
        let s = document("sluice.dev", "v1").expect("sluice");
        assert!(s["components"]["schemas"]["dev.sluice.v1.NodePool"]
            ["x-kubernetes-group-version-kind"]
            .is_array());
        assert!(document("nope", "v1").is_none());
    }
}
