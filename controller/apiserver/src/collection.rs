//! `deletecollection`: `DELETE` on a collection deletes every object the
//! label and field selectors pick, each as a single delete would (graceful
//! deletion, finalizers), and answers the list of them as deleted or as
//! they now wait. kube-rs's `delete_collection` and `kubectl delete --all`
//! with `--raw` clients use it.
//!
//! Preconditions are checked on every object before the first is
//! deleted, so a request that names a wrong uid or resourceVersion deletes
//! nothing. Objects already gone when their turn comes are skipped, as
//! they are in kube-apiserver.

use std::collections::HashMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use sluice_store::ListOptions;

use super::deletion;
use super::meta::{api_version, with_resource_version};
use super::objects::{decode_stored, json_response, key, store_error, Objects, Selectors};
use super::path::Target;
use super::status::ApiError;
use super::write::delete_object;

/// Keys read per store page while collecting what to delete.
const PAGE: usize = 1000;

/// The objects `sel` picks under `t`, at one revision.
async fn matching(
    o: &Objects,
    t: &Target,
    sel: &Selectors,
) -> Result<(i64, Vec<(Value, i64)>), ApiError> {
    let prefix = key(t, None);
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut at = None;
    loop {
        let page = o
            .store
            .list(ListOptions {
                prefix: &prefix,
                limit: Some(PAGE),
                start_after: cursor.as_deref(),
                at_revision: at,
            })
            .await
            .map_err(|e| store_error(t, e))?;
        at = Some(page.revision);
        cursor = page.items.last().map(|kv| kv.key.clone());
        for kv in page.items {
            let obj = with_resource_version(decode_stored(&kv.value)?, kv.mod_rev);
            if sel.matches(&obj) {
                out.push((obj, kv.mod_rev));
            }
        }
        if !page.more {
            return Ok((page.revision, out));
        }
    }
}

fn target_of(t: &Target, obj: &Value) -> Target {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).map(str::to_string);
    Target {
        resource: t.resource,
        namespace: if t.resource.namespaced {
            s("/metadata/namespace").or_else(|| t.namespace.clone())
        } else {
            None
        },
        name: s("/metadata/name"),
        subresource: None,
    }
}

pub async fn delete(
    o: &Objects,
    t: &Target,
    q: &HashMap<String, String>,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    if t.resource.namespaced && t.namespace.is_none() {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!(
                "deletecollection of {} needs a namespace: /api[s]/.../namespaces/<namespace>/{}",
                t.resource.name, t.resource.name
            ),
        ));
    }
    let sel = Selectors::from_query(q)?;
    let (revision, objects) = matching(o, t, &sel).await?;
    for (obj, rev) in &objects {
        deletion::check_preconditions(&target_of(t, obj), obj, *rev, opts)?;
    }
    let mut items = Vec::with_capacity(objects.len());
    for (obj, _) in &objects {
        match delete_object(o, &target_of(t, obj), opts).await {
            Ok((_, deleted)) => items.push(deleted),
            // Deleted by someone else meanwhile: nothing left to do.
            Err(e) if e.code == StatusCode::NOT_FOUND => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        json!({
            "kind": format!("{}List", t.resource.kind),
            "apiVersion": api_version(t),
            "metadata": {"resourceVersion": revision.to_string()},
            "items": items,
        }),
    ))
}
