//! Reading and writing objects over the store: get, list (paged, label and
//! field selectors), create, update with the resourceVersion check,
//! patch, delete, and status subresources. Every resource of the table is
//! served the same way; objects are stored as JSON under
//! `/registry/<group>/<plural>/[<namespace>/]<name>` and carry the
//! store's revision as their resourceVersion. Every create, update and
//! patch records its manager's fields in `managedFields` (`apply/`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sluice_model::k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use sluice_store::{Store, StoreError};

use super::apply::{self, Writer};
use super::meta;
use super::path::{resolve, Target};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::{
    allocate, authz, collection, defaults, deletion, eviction, fields, list, patch, services,
    strategic, table, watch,
};
use crate::identity::Identity;
use sluice_model::decode::FieldValidation;

/// kube-apiserver's limit on a request body (3 MiB); larger is a 413.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

#[derive(Clone)]
pub struct Objects {
    pub store: Arc<dyn Store>,
    /// Watch lines made once for every watcher with the same selectors.
    pub watch_lines: Arc<watch::Memo>,
    /// The ranges Services get their cluster IPs and node ports from.
    pub services: Arc<allocate::Config>,
}

impl Objects {
    pub fn new(store: Arc<dyn Store>, services: allocate::Config) -> Self {
        Objects {
            store,
            watch_lines: Arc::default(),
            services: Arc::new(services),
        }
    }
}

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

/// The storage key of one object, or the prefix of a collection.
pub fn key(t: &Target, name: Option<&str>) -> String {
    let g = if t.resource.group.is_empty() {
        "core"
    } else {
        t.resource.group
    };
    let mut k = format!("/registry/{g}/{}/", t.resource.name);
    if let Some(ns) = &t.namespace {
        k.push_str(ns);
        k.push('/');
    }
    if let Some(n) = name {
        k.push_str(n);
    }
    k
}

pub fn store_error(t: &Target, e: StoreError) -> ApiError {
    let kind = t.resource.kind;
    let name = t.name.clone().unwrap_or_default();
    let plural = t.resource.name;
    let details = json!({"name": name, "group": t.resource.group, "kind": plural});
    let mut err = match e {
        StoreError::NotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{plural} {name:?} not found"),
        ),
        StoreError::AlreadyExists { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{plural} {name:?} already exists"),
        ),
        StoreError::Conflict { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!("Operation cannot be fulfilled on {plural} {name:?}: the object has been modified; please apply your changes to the latest version and try again"),
        ),
        StoreError::Compacted { .. } => ApiError::new(
            StatusCode::GONE,
            "Expired",
            format!("too old resource version: {e}"),
        ),
        StoreError::FutureRevision { .. } => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Too large resource version: {e}"),
        ),
        other => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("{kind}: storage: {other}"),
        ),
    };
    err.details = Some(details);
    err
}

pub fn bad_request(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", m)
}

/// The body, bounded, decoded from JSON or YAML.
async fn read_body(headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes: Bytes = match limited.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Err(too_large())
        }
        Err(e) => return Err(bad_request(format!("reading the request body: {e}"))),
    };
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    decode_body(ctype, &bytes)
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        format!("the request body is larger than {MAX_BODY} bytes"),
    )
}

/// A body read in full, decoded as its `Content-Type` says: YAML for any
/// `*yaml*` type (`application/apply-patch+yaml`), JSON otherwise.
pub fn decode_body(ctype: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.len() > MAX_BODY {
        // `read_body` stops reading at the limit already; this keeps the
        // rule for callers that have the bytes some other way.
        return Err(too_large());
    }
    if bytes.is_empty() {
        return Err(bad_request("the request has no body"));
    }
    if ctype.contains("yaml") {
        serde_yaml::from_slice(bytes)
            .map_err(|e| bad_request(format!("the body is not valid YAML: {e}")))
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| bad_request(format!("the body is not valid JSON: {e}")))
    }
}

pub fn decode_stored(kv_value: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(kv_value).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("stored object unreadable: {e}"),
        )
    })
}

pub fn encode(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

pub(super) fn json_response(code: StatusCode, v: Value) -> Response {
    (code, axum::Json(v)).into_response()
}

pub(crate) fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // getrandom only fails where the kernel has no entropy source at all.
    let _ = getrandom::getrandom(&mut b);
    b
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The selectors of a list or watch, parsed (the default selects all).
#[derive(Default)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        Ok(Selectors {
            labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
                .map_err(|e| bad_request(format!("labelSelector: {e}")))?,
            fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
                .map_err(|e| bad_request(format!("fieldSelector: {e}")))?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(&labels_of(obj)) && self.fields.matches(obj)
    }
}

/// The object `t` names as stored, or the 404 `Status` naming it.
async fn fetch(o: &Objects, t: &Target) -> Result<sluice_store::Kv, ApiError> {
    let name = t.name.as_deref().unwrap_or_default();
    o.store
        .get(&key(t, Some(name)))
        .await
        .map_err(|e| store_error(t, e))?
        .ok_or_else(|| {
            store_error(
                t,
                StoreError::NotFound {
                    key: name.to_string(),
                },
            )
        })
}

async fn get(o: &Objects, t: &Target) -> Result<Response, ApiError> {
    let kv = fetch(o, t).await?;
    Ok(json_response(
        StatusCode::OK,
        meta::with_resource_version(decode_stored(&kv.value)?, kv.mod_rev),
    ))
}

/// Add kube-apiserver's `Warning` headers (unknown fields under `Warn`).
fn with_warnings(mut r: Response, unknown: &[String]) -> Response {
    for w in fields::warnings(unknown) {
        if let Ok(v) = header::HeaderValue::from_str(&w) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}

/// Create `body` in the collection `t`; `track`: the writer whose fields
/// the create records (none for an object a server-side apply made,
/// which carries its managedFields already).
async fn create(
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
    let suffix = meta::name_suffix(&random::<5>());
    let obj = meta::prepare_create(
        t,
        body,
        &suffix,
        &meta::uuid(random::<16>()),
        &crate::clock::now_rfc3339(),
    )?;
    let mut obj = obj;
    let unknown = fields::check(t, &mut obj, mode)?;
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
    let mut merged = meta::prepare_update(t, old, Value::Object(merged))?;
    let unknown = fields::check(t, &mut merged, mode)?;
    defaults::apply(t.resource.kind, &mut merged, false);
    if let Some(w) = track {
        let req = apply::Request::new(t, status_only, w);
        apply::record_update(&req, Some(old), &mut merged);
        meta::check_depth(t, &merged)?;
    }
    Ok((merged, unknown))
}

/// Write `new` over the object at `t`, made against `expected` (the sent
/// resourceVersion) or, without one, against whatever is stored now.
async fn replace(
    o: &Objects,
    t: &Target,
    new: Value,
    status_only: bool,
    mode: FieldValidation,
    track: Option<&Writer>,
) -> Result<Response, ApiError> {
    let name = t.name.clone().unwrap_or_default();
    let k = key(t, Some(&name));
    let sent = meta::sent_resource_version(&new)
        .map_err(|m| meta::invalid(t, &name, "metadata.resourceVersion", &m))?;
    let current = fetch(o, t).await?;
    let old = decode_stored(&current.value)?;
    let expected = sent.unwrap_or(current.mod_rev);
    let (merged, unknown) = updated(t, &old, new, status_only, mode, track)?;
    let unchanged = || {
        // Nothing changed: no new revision, as kube-apiserver.
        json_response(
            StatusCode::OK,
            meta::with_resource_version(old.clone(), current.mod_rev),
        )
    };
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
    if deletion::finalized(&old, &merged) {
        // The last finalizer left an object being deleted: it goes now, as
        // kube-apiserver deletes during such an update. Against `rev`, so a
        // finalizer added meanwhile keeps it (that writer sees it pending).
        if let Ok(gone) = remove(o, t, &k, &merged, rev).await {
            return Ok(json_response(
                StatusCode::OK,
                meta::with_resource_version(merged, gone),
            ));
        }
    }
    Ok(with_warnings(
        json_response(StatusCode::OK, meta::with_resource_version(merged, rev)),
        &unknown,
    ))
}

async fn patch(
    o: &Objects,
    t: &Target,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    body: Value,
    status_only: bool,
    mode: FieldValidation,
) -> Result<Response, ApiError> {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let format = patch::Format::of(ctype).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({ctype}); supported: {}",
                patch::Format::SUPPORTED.join(", ")
            ),
        )
    })?;
    let is_apply = format == patch::Format::Apply;
    let writer = writer_of("patch", is_apply, q, headers)?;
    let name = t.name.clone().unwrap_or_default();
    let current = o
        .store
        .get(&key(t, Some(&name)))
        .await
        .map_err(|e| store_error(t, e))?;
    if is_apply && current.is_none() && !status_only {
        // Server-side apply creates what is missing.
        let applied = apply::apply(&apply::Request::new(t, false, &writer), None, &body)?;
        let collection = Target {
            name: None,
            ..t.clone()
        };
        return create(o, &collection, applied, mode, None).await;
    }
    let current =
        current.ok_or_else(|| store_error(t, StoreError::NotFound { key: name.clone() }))?;
    let mut obj = meta::with_resource_version(decode_stored(&current.value)?, current.mod_rev);
    apply_patch(t, &mut obj, format, &body, &writer, status_only)?;
    let track = (!is_apply).then_some(&writer);
    replace(o, t, obj, status_only, mode, track).await
}

/// The writer of a request (`verb`: create, update or patch), checked.
fn writer_of(
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
async fn delete_options(
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

/// `delete_with`'s work: the answer's code and the object as deleted (200)
/// or as it stays, marked or waiting (202).
pub async fn delete_object(
    o: &Objects,
    t: &Target,
    opts: &DeleteOptions,
) -> Result<(StatusCode, Value), ApiError> {
    let name = t.name.clone().unwrap_or_default();
    let k = key(t, Some(&name));
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
            // Still there: 202, as kube-apiserver answers a pending deletion.
            deletion::Outcome::Mark(marked) => o
                .store
                .update(&k, encode(&marked), current.mod_rev)
                .await
                .map(|rev| (StatusCode::ACCEPTED, marked, rev)),
            deletion::Outcome::Pending => Ok((StatusCode::ACCEPTED, obj, current.mod_rev)),
        };
        match written {
            Ok((code, obj, rev)) => return Ok((code, meta::with_resource_version(obj, rev))),
            Err(StoreError::Conflict { .. }) if attempt < DELETE_ATTEMPTS => continue,
            Err(e) => return Err(store_error(t, e)),
        }
    }
}

/// Every object path: `/api/v1/...` and `/apis/<group>/<version>/...`.
pub async fn handle(
    State(o): State<Objects>,
    Extension(who): Extension<Identity>,
    method: Method,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let t = resolve(uri.path()).map_err(|_| ApiError::not_found(uri.path()))?;
        let verb = authz::verb(
            &method,
            &t,
            q.get("watch").is_some_and(|w| w == "true" || w == "1"),
        );
        authz::check(&o, &who, verb, &t).await?;
        if verb == "create" && t.subresource.is_some_and(|s| s.name == "pods/eviction") {
            return eviction::create(&o, &t, read_body(&headers, body).await?).await;
        }
        let status_only = t.subresource.is_some_and(|s| s.name.ends_with("/status"));
        if let Some(sub) = t.subresource {
            if !status_only {
                return Err(ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    format!("{} is not served yet", sub.name),
                ));
            }
        }
        // Tables and metadata-only answers (`kubectl get`, metadata
        // watchers) are converted from the JSON answer.
        let shape = match verb {
            "get" | "list" | "watch" => table::negotiate(&headers, &q)?,
            _ => table::Shape::Object,
        };
        let kind = t.resource.kind;
        let shaped = |r: Response| table::respond(r, kind, shape, verb == "watch");
        match (verb, &t.name) {
            ("get", Some(_)) => Ok(shaped(get(&o, &t).await?).await),
            ("list", None) => Ok(shaped(list::list(&o, &t, &q).await?).await),
            ("watch", None) => Ok(shaped(watch::serve(&o, &t, &q).await?).await),
            ("deletecollection", None) => {
                let opts = delete_options(&headers, &q, body).await?;
                collection::delete(&o, &t, &q, &opts).await
            }
            ("create", None) => {
                let mode = fields::mode(&q)?;
                let w = writer_of("create", false, &q, &headers)?;
                create(&o, &t, read_body(&headers, body).await?, mode, Some(&w)).await
            }
            ("update", Some(_)) => {
                let mode = fields::mode(&q)?;
                let w = writer_of("update", false, &q, &headers)?;
                let new = read_body(&headers, body).await?;
                replace(&o, &t, new, status_only, mode, Some(&w)).await
            }
            ("patch", Some(_)) => {
                let mode = fields::mode(&q)?;
                let patch_body = read_body(&headers, body).await?;
                patch(&o, &t, &headers, &q, patch_body, status_only, mode).await
            }
            ("delete", Some(_)) => {
                delete_with(&o, &t, &delete_options(&headers, &q, body).await?).await
            }
            _ => Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                format!("{method} is not supported on {}", uri.path()),
            )),
        }
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]}});
        let mut new = old.clone();
        new["spec"] = json!({"a": deep});
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

    #[test]
    fn keys_put_namespaces_under_the_resource() {
        let t = resolve("/api/v1/namespaces/default/pods/web").expect("path");
        assert_eq!(key(&t, Some("web")), "/registry/core/pods/default/web");
        let t = resolve("/apis/sluice.dev/v1/nodepools").expect("path");
        assert_eq!(key(&t, None), "/registry/sluice.dev/nodepools/");
    }
}
