//! The Binding subresource (`POST .../pods/<name>/binding`, a core `v1`
//! Binding): how a scheduler puts a pod on a node, as kube-scheduler does
//! against kube-apiserver. The pod gets `spec.nodeName` and a
//! `PodScheduled=True` condition in one write; a pod already bound, or
//! being deleted, is a 409 naming why. As upstream, the write goes to the
//! store directly, past the field manager (a binding records no
//! managedFields), and the Binding's annotations are copied onto the pod.
//! Only an admin may bind: a node identity is refused by `authz`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use sluice_store::StoreError;

use super::dry_run::Commit;
use super::objects::{decode_stored, encode, key, store_error, Objects};
use super::path::Target;
use super::status::ApiError;

/// Tries of a bind that loses the race for the pod to another write.
const ATTEMPTS: usize = 10;

fn bad_request(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn conflict(t: &Target, message: String) -> ApiError {
    let mut e = ApiError::new(StatusCode::CONFLICT, "Conflict", message);
    e.details = Some(json!({"name": t.name, "kind": "pods"}));
    e
}

/// What a Binding asks: the node, and annotations for the pod.
#[derive(Debug, PartialEq)]
pub struct Bind {
    pub node: String,
    pub annotations: Map<String, Value>,
}

/// Reads a Binding for the pod `pod`, naming what is wrong with it.
pub fn read(pod: &str, body: &Value) -> Result<Bind, ApiError> {
    let Some(obj) = body.as_object() else {
        return Err(bad_request("the body must be a Binding object".into()));
    };
    if let Some(kind) = obj.get("kind").and_then(Value::as_str) {
        if kind != "Binding" {
            return Err(bad_request(format!("kind: {kind:?} is not Binding")));
        }
    }
    if let Some(n) = body.pointer("/metadata/name").and_then(Value::as_str) {
        if n != pod {
            return Err(bad_request(format!(
                "name in URL does not match name in Binding object: {pod:?} and {n:?}"
            )));
        }
    }
    let target = body.get("target").and_then(Value::as_object);
    let node = target
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if node.is_empty() {
        return Err(invalid(pod, "target.name", "Required value"));
    }
    match target.and_then(|t| t.get("kind")).and_then(Value::as_str) {
        None | Some("") | Some("Node") => {}
        Some(k) => {
            return Err(invalid(
                pod,
                "target.kind",
                &format!("Unsupported value: {k:?}: supported values: \"Node\""),
            ))
        }
    }
    let annotations = match body.pointer("/metadata/annotations") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => m.clone(),
        Some(_) => {
            return Err(invalid(
                pod,
                "metadata.annotations",
                "must be a map of strings",
            ))
        }
    };
    Ok(Bind {
        node: node.to_owned(),
        annotations,
    })
}

fn invalid(pod: &str, field: &str, message: &str) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("Binding {pod:?} is invalid: {field}: {message}"),
    );
    e.details = Some(json!({"name": pod, "kind": "Binding",
        "causes": [{"reason": "FieldValueInvalid", "field": field, "message": message}]}));
    e
}

/// The pod bound as `bind` says, at `now`: `Err` with the conflict's
/// message when it cannot be.
pub fn bound(pod: &Value, bind: &Bind, now: &str) -> Result<Value, String> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    let on = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !on.is_empty() {
        return Err(format!("pod {name} is already assigned to node {on:?}"));
    }
    let mut pod = pod.clone();
    let Some(obj) = pod.as_object_mut() else {
        return Err(format!("pod {name} is not an object"));
    };
    if !bind.annotations.is_empty() {
        let meta = obj.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(ann) = ann.as_object_mut() {
                ann.extend(bind.annotations.clone());
            }
        }
    }
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("nodeName".into(), json!(bind.node));
    }
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if let Some(status) = status.as_object_mut() {
        let conds = status.entry("conditions").or_insert_with(|| json!([]));
        if let Some(conds) = conds.as_array_mut() {
            let scheduled = json!({"type": "PodScheduled", "status": "True",
                "lastProbeTime": null, "lastTransitionTime": now});
            match conds.iter_mut().find(|c| c["type"] == "PodScheduled") {
                // The transition time moves only when the status does.
                Some(c) if c["status"] == "True" => {}
                Some(c) => *c = scheduled,
                None => conds.push(scheduled),
            }
        }
    }
    Ok(pod)
}

pub async fn create(
    o: &Objects,
    t: &Target,
    body: Value,
    dry: Vec<String>,
) -> Result<Response, ApiError> {
    Commit::of("CreateOptions", &dry)?;
    let o = &o.for_request("create", &dry)?;
    let name = t.name.clone().unwrap_or_default();
    let bind = read(&name, &body)?;
    let pod_t = Target {
        subresource: None,
        ..t.clone()
    };
    let k = key(&pod_t, Some(&name));
    for _ in 0..ATTEMPTS {
        let kv = o
            .store
            .get(&k)
            .await
            .map_err(|e| store_error(&pod_t, e))?
            .ok_or_else(|| store_error(&pod_t, StoreError::NotFound { key: name.clone() }))?;
        let pod = decode_stored(&kv.value)?;
        let new = bound(&pod, &bind, &crate::clock::now_rfc3339()).map_err(|m| conflict(t, m))?;
        match o.store.update(&k, encode(&new), kv.mod_rev).await {
            Ok(_) => {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "code": 201});
                return Ok((StatusCode::CREATED, axum::Json(status)).into_response());
            }
            // Another write came first: bind what is stored now (which
            // may be bound already: then the 409 above says to whom).
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(store_error(&pod_t, e)),
        }
    }
    Err(conflict(
        t,
        format!("pod {name}: the binding lost {ATTEMPTS} races for the pod; try again"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "x"}]},
               "status": {"phase": "Pending", "conditions": [
                   {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    }

    #[test]
    fn a_binding_sets_the_node_and_the_scheduled_condition() {
        let bind = read(
            "web",
            &json!({"kind": "Binding", "metadata": {"name": "web",
            "annotations": {"a": "b"}}, "target": {"kind": "Node", "name": "n1"}}),
        )
        .expect("binding");
        let got = bound(&pod(), &bind, "2026-11-23T00:00:00Z").expect("bound");
        assert_eq!(got["spec"]["nodeName"], "n1");
        assert_eq!(got["metadata"]["annotations"]["a"], "b");
        let conds = got["status"]["conditions"].as_array().expect("conditions");
        assert_eq!(conds.len(), 1, "{conds:?}");
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[0]["lastTransitionTime"], "2026-11-23T00:00:00Z");
    }

    #[test]
    fn a_bound_or_deleting_pod_is_a_conflict_naming_why() {
        let bind = read("web", &json!({"target": {"name": "n2"}})).expect("binding");
        let on = bound(&pod(), &bind, "t").expect("bound");
        let e = bound(&on, &bind, "t").expect_err("bound twice");
        assert_eq!(e, "pod web is already assigned to node \"n2\"");
        let mut deleting = pod();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-23T00:00:00Z");
        let e = bound(&deleting, &bind, "t").expect_err("deleting");
        assert!(e.contains("being deleted"), "{e}");
    }

    #[test]
    fn bad_bindings_are_named() {
        for (body, want) in [
            (json!([1]), "must be a Binding object"),
            (
                json!({"kind": "Pod", "target": {"name": "n"}}),
                "is not Binding",
            ),
            (
                json!({"metadata": {"name": "other"}, "target": {"name": "n"}}),
                "does not match",
            ),
            (json!({"target": {}}), "target.name"),
            (
                json!({"target": {"name": "n", "kind": "Pod"}}),
                "target.kind",
            ),
            (
                json!({"target": {"name": "n"}, "metadata": {"annotations": {"a": 1}}}),
                "annotations",
            ),
        ] {
            let e = read("web", &body).expect_err("refused");
            assert!(e.message.contains(want), "{want}: {}", e.message);
        }
    }
}
