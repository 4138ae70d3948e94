//! Writing objects over the store: create, update with the
//! resourceVersion check, patch (every format, server-side apply
//! included), delete (graceful deletion and finalizers, `deletion.rs`
//! deciding), for every resource of the table and its status
//! subresource. Every create, update and patch records its manager's
//! fields in `managedFields` (`apply/`). Whether a write is made or only
//! run (`dryRun=All`) is not decided here: a dry run is given objects
//! whose store makes no write (`dry_run.rs`).

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use sluice_model::decode::FieldValidation;
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use sluice_store::StoreError;

use super::apply::{self, Writer};
use super::meta;
use super::objects::{
    bad_request, decode_stored, encode, fetch, json_response, key, random, read_body, store_error,
    Objects,
};
use super::path::Target;
use super::status::ApiError;
use super::{
    defaults, deletion, fields, maintenance, namespaces, patch, services, strategic, subsetting,
};

/// Services are written with their allocations (`services.rs`).
fn is_service(t: &Target) -> bool {
    t.resource.group.is_empty() && t.resource.kind == "Service"
}

/// Remove the object `obj` stored at `k` (at `rev`): a Service releases
/// what it holds in the same transaction.
async fn remove(
    o: &Objects,
    t: &Target,
    k: &str,
    obj: &Value,
    rev: i64,
) -> Result<i64, StoreError> {
    if is_service(t) {
        services::remove(o.store.as_ref(), k, obj, rev).await
    } else {
        o.store.delete(k, Some(rev)).await.map(|(gone, _)| gone)
    }
}

/// Add kube-apiserver's `Warning` headers (unknown fields under `Warn`).
fn with_warnings(r: Response, unknown: &[String]) -> Response {
    append_warnings(r, &fields::warnings(unknown))
}

/// `r` with a `Warning` header per value (already in `299 - "..."` form).
pub(super) fn append_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = header::HeaderValue::from_str(w) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}

/// Create `body` in the collection `t`; `track`: the writer whose fields
/// the create records (none for an object a server-side apply made,
/// which carries its managedFields already).
pub(super) async fn create(
    o: &Objects,
    t: &Target,
    body: Value,
    mode: FieldValidation,
    track: Option<&Writer>,
) -> Result<Response, ApiError> {
    if t.resource.namespaced && t.namespace.is_none() {
        return Err(bad_request(format!(
            "{} must be created in a namespace",
            t.resource.name
        )));
    }
    // NamespaceLifecycle first, as upstream's admission runs before the
    // object is prepared and validated: a missing namespace is a 404
    // whatever is wrong with the object. Every create comes here: a POST
    // and a server-side apply that creates.
    if let Some(ns) = t.namespace.as_deref().filter(|_| t.resource.namespaced) {
        namespaces::admit_create(t, &body, namespaces::state(o, ns).await?)?;
    }
    let suffix = meta::name_suffix(&random::<5>());
    let obj = meta::prepare_create(
        t,
        body,
        &suffix,
        &meta::uuid(random::<16>()),
        &crate::clock::now_rfc3339(),
    )?;
    let mut obj = obj;
    let unknown = fields::check(t, &mut obj, mode, None)?;
    subsetting::admit(t, None, &mut obj, &crate::clock::now_rfc3339())?;
    maintenance::admit(t, None, &mut obj, false, &o.versions, crate::clock::now())?;
    defaults::apply(t.resource.kind, &mut obj, true);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let named = Target {
        name: Some(name.clone()),
        ..t.clone()
    };
    if let Some(w) = track {
        apply::record_update(&apply::Request::new(&named, false, w), None, &mut obj);
        meta::check_depth(t, &obj)?;
    }
    let k = key(t, Some(&name));
    let (obj, rev) = if is_service(t) {
        let (obj, rev) = services::write(o, &named, &k, None, obj, services::Own::Create).await?;
        (obj, rev.unwrap_or_default())
    } else {
        let rev = o
            .store
            .create(&k, encode(&obj))
            .await
            .map_err(|e| store_error(&named, e))?;
        (obj, rev)
    };
    Ok(with_warnings(
        json_response(StatusCode::CREATED, meta::with_resource_version(obj, rev)),
        &unknown,
    ))
}

/// What an update of `old` (as stored) to `new` writes, decided without
/// I/O: the status as the (sub)resource allows, the server-owned metadata
/// kept, the object checked (`fieldValidation`), the fields `track`
/// changed recorded as its own (none for a server-side apply, which did
/// its own bookkeeping); and the unknown fields to warn about.
pub fn updated(
    t: &Target,
    old: &Value,
    new: Value,
    status_only: bool,
    mode: FieldValidation,
    track: Option<&Writer>,
) -> Result<(Value, Vec<String>), ApiError> {
    // Found with the patch fuzz target: a body that is no object (a merge
    // patch `5`, a PUT of `[1]`) reached `m["status"] = ...` below, which
    // panics on anything but an object.
    let not_object = || bad_request(format!("the body must be a {} object", t.resource.kind));
    let (Value::Object(new_map), Value::Object(old_map)) = (new, old) else {
        return Err(not_object());
    };
    let (status, mut merged) = if status_only {
        // Only the status moves through the status subresource.
        (new_map.get("status").cloned(), old_map.clone())
    } else {
        // The main resource does not change the status of kinds that have
        // a status subresource (the one sent stays where none is stored).
        let status = old_map
            .get("status")
            .or_else(|| new_map.get("status"))
            .cloned();
        (status, new_map)
    };
    match status {
        Some(s) if !s.is_null() => {
            merged.insert("status".into(), s);
        }
        _ => {
            merged.remove("status");
        }
    }
    let mut merged = Value::Object(merged);
    namespaces::strategy(t, old, &mut merged);
    let mut merged = meta::prepare_update(t, old, merged)?;
    let unknown = fields::check(t, &mut merged, mode, Some(old))?;
    // The writer's time when there is one (the time its managedFields
    // record), so one write reads the clock once.
    let now = track.map_or_else(crate::clock::now_rfc3339, |w| w.now.clone());
    subsetting::admit(t, Some(old), &mut merged, &now)?;
    defaults::apply(t.resource.kind, &mut merged, false);
    if let Some(w) = track {
        let req = apply::Request::new(t, status_only, w);
        apply::record_update(&req, Some(old), &mut merged);
        meta::check_depth(t, &merged)?;
    }
    Ok((merged, unknown))
}

/// What a write answers: its code, the object with its resourceVersion,
/// and the unknown fields to warn about.
pub struct Written {
    pub code: StatusCode,
    pub obj: Value,
    pub unknown: Vec<String>,
}

impl Written {
    pub fn response(self) -> Response {
        with_warnings(json_response(self.code, self.obj), &self.unknown)
    }
}

/// Write `new` over the object at `t`, made against `expected` (the sent
/// resourceVersion) or, without one, against whatever is stored now.
pub async fn replace(
    o: &Objects,
    t: &Target,
    new: Value,
    status_only: bool,
    mode: FieldValidation,
    track: Option<&Writer>,
) -> Result<Response, ApiError> {
    let req = Update {
        status_only,
        mode,
        track,
    };
    Ok(replace_object(o, t, new, &req).await?.response())
}

/// How an update is made: through the status subresource or not, its
/// `fieldValidation`, and whose fields it records (`None`: recorded
/// already).
pub struct Update<'a> {
    pub status_only: bool,
    pub mode: FieldValidation,
    pub track: Option<&'a Writer>,
}

/// `replace`'s work, answering the object rather than a response.
pub async fn replace_object(
    o: &Objects,
    t: &Target,
    new: Value,
    req: &Update<'_>,
) -> Result<Written, ApiError> {
    let current = fetch(o, t).await?;
    replace_read(o, t, new, req, current).await
}

/// `replace_object` over `current`, the object as just read.
async fn replace_read(
    o: &Objects,
    t: &Target,
    new: Value,
    req: &Update<'_>,
    current: sluice_store::Kv,
) -> Result<Written, ApiError> {
    let status_only = req.status_only;
    let name = t.name.clone().unwrap_or_default();
    let k = key(t, Some(&name));
    let sent = meta::sent_resource_version(&new)
        .map_err(|m| meta::invalid(t, &name, "metadata.resourceVersion", &m))?;
    let old = decode_stored(&current.value)?;
    let expected = sent.unwrap_or(current.mod_rev);
    // A write made against another version is a conflict before it is
    // validated, as kube-apiserver checks the resourceVersion first: a
    // stale object is the client's to refresh, whatever else is wrong.
    if expected != current.mod_rev {
        return Err(store_error(
            t,
            StoreError::Conflict {
                key: k.clone(),
                expected,
                current: current.mod_rev,
            },
        ));
    }
    let (mut merged, unknown) = updated(t, &old, new, status_only, req.mode, req.track)?;
    let now = crate::clock::now();
    maintenance::admit(t, Some(&old), &mut merged, status_only, &o.versions, now)?;
    super::operations::admit(t, &old, &merged, status_only)?;
    let ok = |obj: Value, rev: i64, unknown: Vec<String>| Written {
        code: StatusCode::OK,
        obj: meta::with_resource_version(obj, rev),
        unknown,
    };
    // Nothing changed: no new revision, as kube-apiserver.
    let unchanged = || ok(old.clone(), current.mod_rev, Vec::new());
    let (merged, rev) = if is_service(t) && !status_only {
        let own = services::Own::Update(expected);
        match services::write(o, t, &k, Some(&old), merged, own).await? {
            (_, None) => return Ok(unchanged()),
            (merged, Some(rev)) => (merged, rev),
        }
    } else {
        if merged == old {
            return Ok(unchanged());
        }
        let rev = o
            .store
            .update(&k, encode(&merged), expected)
            .await
            .map_err(|e| store_error(t, e))?;
        (merged, rev)
    };
    if deletion::finalized(t, &old, &merged) {
        // The last finalizer left an object being deleted: it goes now, as
        // kube-apiserver deletes during such an update. Against `rev`, so a
        // finalizer added meanwhile keeps it (that writer sees it pending).
        if let Ok(gone) = remove(o, t, &k, &merged, rev).await {
            return Ok(ok(merged, gone, Vec::new()));
        }
    }
    Ok(ok(merged, rev, unknown))
}

pub(super) async fn patch(
    o: &Objects,
    t: &Target,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Value,
    status_only: bool,
    mode: FieldValidation,
) -> Result<Response, ApiError> {
    let format = patch_format(headers)?;
    let is_apply = format == patch::Format::Apply;
    let writer = writer_of("patch", is_apply, q, headers)?;
    let name = t.name.clone().unwrap_or_default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let retry = attempt < PATCH_ATTEMPTS;
        let current = o
            .store
            .get(&key(t, Some(&name)))
            .await
            .map_err(|e| store_error(t, e))?;
        let Some(current) = current else {
            if !is_apply || status_only {
                return Err(store_error(t, StoreError::NotFound { key: name.clone() }));
            }
            // Server-side apply creates what is missing.
            let applied = apply::apply(&apply::Request::new(t, false, &writer), None, &body)?;
            let collection = Target {
                name: None,
                ..t.clone()
            };
            match create(o, &collection, applied, mode, None).await {
                // Created by another writer since the read: applied to
                // that one instead, as kube-apiserver's patcher does.
                Err(e) if e.reason == "AlreadyExists" && retry => continue,
                done => return done,
            }
        };
        let rev = current.mod_rev;
        let mut obj = meta::with_resource_version(decode_stored(&current.value)?, rev);
        apply_patch(t, &mut obj, format, &body, &writer, status_only)?;
        // A patch that names a resourceVersion is a precondition: its
        // conflict is the client's to see. Any other is applied again to
        // what is stored now (kube-apiserver retries such patches too).
        let pinned = matches!(meta::sent_resource_version(&obj), Ok(Some(v)) if v != rev);
        let req = Update {
            status_only,
            mode,
            track: (!is_apply).then_some(&writer),
        };
        match replace_read(o, t, obj, &req, current).await {
            Err(e) if e.reason == "Conflict" && !pinned && retry => {}
            done => return done.map(Written::response),
        }
    }
}

/// The patch format a request's `Content-Type` names (415 for others).
pub(super) fn patch_format(headers: &HeaderMap) -> Result<patch::Format, ApiError> {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    patch::Format::of(ctype).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({ctype}); supported: {}",
                patch::Format::SUPPORTED.join(", ")
            ),
        )
    })
}

/// The writer of a request (`verb`: create, update or patch), checked.
pub(super) fn writer_of(
    verb: &str,
    is_apply: bool,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Writer, ApiError> {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    apply::writer(verb, is_apply, q, ua, crate::clock::now_rfc3339())
}

/// Apply a decoded patch `body` of `format` to `obj` (the live object,
/// with its resourceVersion), without I/O; a server-side apply is made by
/// `writer` (to the status subresource with `status_only`) and records
/// its fields, the other formats only change the object.
pub fn apply_patch(
    t: &Target,
    obj: &mut Value,
    format: patch::Format,
    body: &Value,
    writer: &Writer,
    status_only: bool,
) -> Result<(), ApiError> {
    match format {
        patch::Format::Merge => patch::merge(obj, body),
        patch::Format::Strategic => strategic::apply(t.resource.kind, obj, body).map_err(|m| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("strategic merge patch: {m}"),
            )
        })?,
        patch::Format::Json => patch::json_patch(obj, body).map_err(|m| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("JSON patch: {m}"),
            )
        })?,
        patch::Format::Apply => {
            *obj = apply::apply(
                &apply::Request::new(t, status_only, writer),
                Some(obj),
                body,
            )?;
        }
    }
    Ok(())
}

/// The `DeleteOptions` a delete came with: kubectl sends a body, other
/// clients may send none (then the query's `gracePeriodSeconds` counts).
pub(super) async fn delete_options(
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Body,
) -> Result<DeleteOptions, ApiError> {
    let body = if axum::body::HttpBody::size_hint(&body).exact() == Some(0) {
        None
    } else {
        Some(read_body(headers, body).await?)
    };
    deletion::options(body, q)
}

/// How often a delete rereads the object after losing a race with a
/// concurrent write, before it answers 409.
const DELETE_ATTEMPTS: usize = 5;

/// Tries of a patch whose write lost a race. kube-apiserver's store loop
/// has no bound; this one has a generous one, so a hot object costs a
/// client a 409 after many lost races rather than a request that spins.
const PATCH_ATTEMPTS: usize = 32;

/// Delete the object at `t` as `opts` say (preconditions, graceful
/// deletion of bound pods, finalizers; `deletion.rs` decides). Every write
/// is made against the version read, so a concurrent change (a finalizer
/// added, a pod turned Ready) is never lost; on such a race the object is
/// read again. The eviction subresource deletes through this too.
pub async fn delete_with(
    o: &Objects,
    t: &Target,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let (code, obj) = delete_object(o, t, opts).await?;
    Ok(json_response(code, obj))
}

/// `delete_with`'s work: the answer's code and the object as deleted or
/// as it stays, marked or waiting.
pub async fn delete_object(
    o: &Objects,
    t: &Target,
    opts: &DeleteOptions,
) -> Result<(StatusCode, Value), ApiError> {
    namespaces::admit_delete(t)?;
    let name = t.name.clone().unwrap_or_default();
    let k = key(t, Some(&name));
    // Still there after the delete: 200 with the object as upstream, 202
    // only for the deprecated `orphanDependents: false`.
    let kept = if opts.orphan_dependents == Some(false) {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = fetch(o, t).await?;
        let obj = decode_stored(&current.value)?;
        deletion::check_preconditions(t, &obj, current.mod_rev, opts)?;
        let now = deletion::now();
        let written = match deletion::decide(t, &obj, opts, now) {
            deletion::Outcome::Remove => remove(o, t, &k, &obj, current.mod_rev)
                .await
                .map(|rev| (StatusCode::OK, obj, rev)),
            deletion::Outcome::Mark(marked) => o
                .store
                .update(&k, encode(&marked), current.mod_rev)
                .await
                .map(|rev| (kept, marked, rev)),
            deletion::Outcome::Pending => Ok((kept, obj, current.mod_rev)),
        };
        match written {
            Ok((code, obj, rev)) => return Ok((code, meta::with_resource_version(obj, rev))),
            Err(StoreError::Conflict { .. }) if attempt < DELETE_ATTEMPTS => continue,
            Err(e) => return Err(store_error(t, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::resolve;
    use super::*;
    use serde_json::json;

    #[test]
    fn updates_with_a_body_that_is_no_object_are_refused() {
        // Found with the patch fuzz target: a merge patch `5` (or a PUT of
        // `[1]`) on a pod with a status panicked setting `status` on the
        // number.
        let t = resolve("/api/v1/namespaces/default/pods/web").expect("path");
        let old = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"}, "status": {"phase": "Running"}});
        for new in [json!(5), json!([1]), json!("x"), Value::Null] {
            for status_only in [false, true] {
                let e = updated(
                    &t,
                    &old,
                    new.clone(),
                    status_only,
                    FieldValidation::Strict,
                    None,
                )
                .expect_err("not an object");
                assert_eq!(e.code, StatusCode::BAD_REQUEST, "{new}");
            }
        }
        // A stored value that is no object (never written by the server)
        // is refused too, not a panic.
        assert!(updated(
            &t,
            &json!(1),
            json!({"status": {}}),
            true,
            FieldValidation::Strict,
            None
        )
        .is_err());
    }

    #[test]
    fn deep_unknown_fields_leave_no_deep_managed_fields() {
        // An object just within the store's depth, deep only in a field
        // the Pod does not have: its managedFields entry would name that
        // field four levels further down, where the store could never read
        // it back. Unknown fields are dropped before fields are recorded,
        // so neither is stored; were one recorded, the depth check after
        // recording refuses the write (422) rather than store it.
        let t = resolve("/api/v1/namespaces/default/pods/web").expect("path");
        let deep = (0..124).fold(json!(1), |v, _| json!({ "a": v }));
        let w = Writer {
            manager: "m".into(),
            force: false,
            now: "2026-11-23T10:00:00Z".into(),
        };
        let old = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "managedFields": [
                {"manager": "m", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let mut new = old.clone();
        new["spec"] = json!({"a": deep, "containers": [{"name": "c", "image": "x"}]});
        let (stored, _) = updated(&t, &old, new, false, FieldValidation::Ignore, Some(&w))
            .map_err(|e| e.message)
            .expect("the unknown field is dropped");
        assert!(stored["spec"].get("a").is_none());
        assert!(!stored["metadata"]["managedFields"]
            .to_string()
            .contains("f:a"));
        meta::check_depth(&t, &stored).expect("within the store's depth");

        let mut too_deep = stored;
        too_deep["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"] =
            (0..130).fold(json!({}), |v, _| json!({ "f:a": v }));
        let e = meta::check_depth(&t, &too_deep).expect_err("too deep");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.message.contains("levels deep"), "{}", e.message);
    }
}
