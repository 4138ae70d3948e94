//! Discovery, as kubectl and kube-rs walk it: `/api`, `/apis`, `/api/v1`,
//! `/apis/<group>/<version>`, `/version`. Rendered from the resource table.

use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::resources::{groups, in_group_version, Resource};
use super::status::ApiError;

/// The Kubernetes release whose API this subset follows: the one the
/// workspace's `k8s-openapi` types are built for (`v1_37`) and the kubectl
/// the tests drive. kubectl warns when the server is more than one minor
/// release away from it (it said 1.33 until 2026-11-26).
pub const KUBE_MAJOR: &str = "1";
pub const KUBE_MINOR: &str = "37";

fn resource_json(r: &Resource) -> Value {
    let mut v = json!({
        "name": r.name,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    if let Some((g, ver)) = r.kind_group_version {
        v["group"] = json!(g);
        v["version"] = json!(ver);
    }
    v
}

fn resource_list(group_version: &str, resources: &[&Resource]) -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources.iter().map(|r| resource_json(r)).collect::<Vec<_>>(),
    })
}

async fn api() -> Json<Value> {
    Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}))
}

async fn apis() -> Json<Value> {
    let groups: Vec<Value> = groups()
        .into_iter()
        .map(|g| {
            let gv = json!({"groupVersion": format!("{g}/v1"), "version": "v1"});
            json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

async fn core_v1() -> Json<Value> {
    Json(resource_list("v1", &in_group_version("", "v1")))
}

async fn group_version(
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let rs = in_group_version(&group, &version);
    if rs.is_empty() {
        return Err(ApiError::not_found(&format!("/apis/{group}/{version}")));
    }
    Ok(Json(resource_list(&format!("{group}/{version}"), &rs)))
}

async fn group(Path(group): Path<String>) -> Result<Json<Value>, ApiError> {
    if !groups().contains(&group.as_str()) {
        return Err(ApiError::not_found(&format!("/apis/{group}")));
    }
    let gv = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    Ok(Json(json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": group,
        "versions": [gv.clone()], "preferredVersion": gv,
    })))
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0-sluice.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64",
    }))
}

/// The discovery routes (authenticated by the caller's layer).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/api", get(api))
        .route("/apis", get(apis))
        .route("/api/v1", get(core_v1))
        .route("/apis/{group}", get(group))
        .route("/apis/{group}/{version}", get(group_version))
        .route("/version", get(version))
        // kube-apiserver answers both; the Python client asks for the second.
        .route("/version/", get(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_all_category_names_what_kubectl_get_all_lists() {
        let names = |gv: Value| -> Vec<String> {
            gv["resources"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|r| r["categories"] == json!(["all"]))
                        .filter_map(|r| r["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let core = names(resource_list("v1", &in_group_version("", "v1")));
        assert_eq!(core, ["pods", "services"]);
        let apps = names(resource_list("apps/v1", &in_group_version("apps", "v1")));
        assert_eq!(apps, ["deployments", "replicasets"]);
        // Subresources and the other kinds carry no category.
        let v = resource_list("v1", &in_group_version("", "v1"));
        let events = v["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == "events"))
            .cloned()
            .expect("events");
        assert!(events.get("categories").is_none());
    }

    #[test]
    fn eviction_is_listed_under_pods_as_a_policy_kind() {
        let v = resource_list("v1", &in_group_version("", "v1"));
        let ev = v["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == "pods/eviction"))
            .cloned()
            .expect("pods/eviction");
        assert_eq!(ev["group"], "policy");
        assert_eq!(ev["kind"], "Eviction");
        assert_eq!(ev["verbs"], json!(["create"]));
    }

    #[test]
    fn workloads_list_their_scale_as_an_autoscaling_kind() {
        let v = resource_list("apps/v1", &in_group_version("apps", "v1"));
        for parent in ["deployments", "replicasets"] {
            let name = format!("{parent}/scale");
            let sc = v["resources"]
                .as_array()
                .and_then(|a| a.iter().find(|r| r["name"] == name.as_str()))
                .cloned()
                .unwrap_or_else(|| panic!("{name} listed"));
            assert_eq!(sc["group"], "autoscaling");
            assert_eq!(sc["version"], "v1");
            assert_eq!(sc["kind"], "Scale");
            assert_eq!(sc["verbs"], json!(["get", "patch", "update"]));
        }
    }
}
