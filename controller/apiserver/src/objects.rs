//! Objects over the store: the one handler of every object path, which
//! routes by verb and subresource; reading (get; lists in `list.rs`,
//! watches in `watch/`) and what every handler shares (keys, bodies,
//! errors). Writes are in `write.rs`, the scale subresource in
//! `scale.rs`, eviction in `eviction.rs`. Every resource of the table is
//! served the same way; objects are stored as JSON under
//! `/registry/<group>/<plural>/[<namespace>/]<name>` and carry the
//! store's revision as their resourceVersion.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sluice_store::{Store, StoreError};

use super::meta;
use super::path::{resolve, Target};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::write::{self, delete_options};
use super::{
    allocate, authz, binding, collection, dry_run, duplicates, eviction, fields, list, namespaces,
    scale, table, watch,
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
    /// What a Cluster's maintenance exclusions are checked against (M7).
    pub versions: Arc<sluice_maintenance::Versions>,
}

impl Objects {
    pub fn new(
        store: Arc<dyn Store>,
        services: allocate::Config,
        versions: sluice_maintenance::Versions,
    ) -> Self {
        Objects {
            store,
            watch_lines: Arc::default(),
            services: Arc::new(services),
            versions: Arc::new(versions),
        }
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
        StoreError::FutureRevision { requested, current } => {
            // As kube-apiserver words it, with the cause client-go's
            // IsTooLargeResourceVersionError looks for.
            let mut err = ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!("Too large resource version: {requested}, current: {current}"),
            );
            let mut d = details;
            d["causes"] = json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]);
            d["retryAfterSeconds"] = json!(1);
            err.details = Some(d);
            return err;
        }
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
pub(super) async fn read_body(headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let (ctype, bytes) = read_bytes(headers, body).await?;
    decode_body(ctype, &bytes)
}

/// The body of a create, update or patch: decoded, with its duplicate
/// fields (`Strict` refuses them, naming each; `Warn` returns the warnings
/// to answer with; `Ignore` keeps the last of each, as the decoding did).
pub(super) async fn read_write_body(
    headers: &HeaderMap,
    body: Body,
    t: &Target,
    mode: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let (ctype, bytes) = read_bytes(headers, body).await?;
    let value = decode_body(ctype, &bytes)?;
    if mode == FieldValidation::Ignore {
        return Ok((value, Vec::new()));
    }
    let dups = duplicates::find(ctype.contains("yaml"), &bytes);
    if mode == FieldValidation::Strict && !dups.is_empty() {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .or(t.name.as_deref())
            .unwrap_or_default();
        let listed: Vec<String> = dups
            .iter()
            .map(|d| format!("duplicate field {d:?}"))
            .collect();
        let mut err = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!(
                "{} {name:?}: strict decoding error: {}",
                t.resource.kind,
                listed.join(", ")
            ),
        );
        let causes: Vec<Value> = dups
            .iter()
            .map(|d| json!({"reason": "FieldValueDuplicate", "field": d, "message": format!("strict decoding error: duplicate field {d:?}")}))
            .collect();
        err.details = Some(
            json!({"name": name, "group": t.resource.group, "kind": t.resource.kind, "causes": causes}),
        );
        return Err(err);
    }
    Ok((value, dups.iter().map(|d| duplicates::warning(d)).collect()))
}

/// A write's answer with the duplicate-field warnings its body earned.
fn warned(r: Result<Response, ApiError>, warnings: &[String]) -> Result<Response, ApiError> {
    r.map(|r| write::append_warnings(r, warnings))
}

/// The body's bytes, at most [`MAX_BODY`], and its `Content-Type`.
async fn read_bytes(headers: &HeaderMap, body: Body) -> Result<(&str, Bytes), ApiError> {
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
    Ok((ctype, bytes))
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
    let media = ctype.split(';').next().unwrap_or(ctype).trim();
    let unsupported = |why: String| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body's media type {media:?} is not supported: {why}"),
        )
    };
    if media == "application/vnd.kubernetes.protobuf" {
        // What client-go's typed clients (kubectl create <generator>)
        // send for built-in kinds, with no fallback to JSON.
        return sluice_wire::decode(bytes).map_err(|e| {
            if e.is_unsupported() {
                unsupported(format!("{e}; send application/json or application/yaml"))
            } else {
                bad_request(format!("the body is not valid Kubernetes protobuf: {e}"))
            }
        });
    }
    if ctype.contains("protobuf") || ctype.contains("cbor") {
        return Err(unsupported(
            "send application/json, application/yaml or application/vnd.kubernetes.protobuf".into(),
        ));
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

/// `N` random bytes (uids, generated names, bootstrap objects).
pub fn random<const N: usize>() -> [u8; N] {
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
pub(super) async fn fetch(o: &Objects, t: &Target) -> Result<sluice_store::Kv, ApiError> {
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
        authz::check(&o, &who, verb, &t, authz::selected_name(&q)).await?;
        let sub = t.subresource.map(|s| s.name);
        if verb == "create" && sub == Some("pods/eviction") {
            let dry = dry_run::query_values(&uri)?;
            return eviction::create(&o, &t, read_body(&headers, body).await?, dry).await;
        }
        if verb == "create" && sub == Some("pods/binding") {
            let dry = dry_run::query_values(&uri)?;
            return binding::create(&o, &t, read_body(&headers, body).await?, dry).await;
        }
        if sub.is_some_and(|s| s.ends_with("/scale")) {
            return scale::handle(&o, &t, verb, &uri, &q, &headers, body).await;
        }
        let status_only = sub.is_some_and(|s| s.ends_with("/status"));
        let finalize = verb == "update" && namespaces::is_finalize(&t);
        if let Some(sub) = sub {
            if !status_only && !finalize {
                return Err(ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    format!("{sub} is not served yet"),
                ));
            }
        }
        if matches!(verb, "get" | "list" | "watch") {
            // Tables and metadata-only answers (`kubectl get`, metadata
            // watchers) are converted from the JSON answer.
            let shape = table::negotiate(&headers, &q)?;
            let kind = t.resource.kind;
            let shaped = |r: Response| table::respond(r, kind, shape, verb == "watch");
            return match (verb, &t.name) {
                ("get", Some(_)) => Ok(shaped(get(&o, &t).await?).await),
                ("list", None) => Ok(shaped(list::list(&o, &t, &q).await?).await),
                ("watch", None) => Ok(shaped(watch::serve(&o, &t, &q).await?).await),
                _ => Err(not_allowed(&method, &uri)),
            };
        }
        // A write: made, or only run (`dryRun=All`), as decided here once.
        let dry = dry_run::query_values(&uri)?;
        match (verb, &t.name) {
            ("delete", _) | ("deletecollection", None) => {
                let opts = delete_options(&headers, &q, body).await?;
                let dry = dry_run::delete_values(opts.dry_run.as_ref(), dry);
                let o = o.for_request(verb, &dry)?;
                match t.name {
                    Some(_) => write::delete_with(&o, &t, &opts).await,
                    None => collection::delete(&o, &t, &q, &opts).await,
                }
            }
            ("create", None) => {
                let o = o.for_request(verb, &dry)?;
                let mode = fields::mode(&q)?;
                let w = write::writer_of("create", false, &q, &headers)?;
                let (new, dups) = read_write_body(&headers, body, &t, mode).await?;
                authz::check_created(&who, &t, &new)?;
                warned(write::create(&o, &t, new, mode, Some(&w)).await, &dups)
            }
            ("update", Some(_)) => {
                let o = o.for_request(verb, &dry)?;
                let mode = fields::mode(&q)?;
                let w = write::writer_of("update", false, &q, &headers)?;
                let (new, dups) = read_write_body(&headers, body, &t, mode).await?;
                warned(
                    write::replace(&o, &t, new, status_only, mode, Some(&w)).await,
                    &dups,
                )
            }
            ("patch", Some(_)) => {
                let o = o.for_request(verb, &dry)?;
                let mode = fields::mode(&q)?;
                let (patch_body, dups) = read_write_body(&headers, body, &t, mode).await?;
                let r = write::patch(&o, &t, &headers, &q, patch_body, status_only, mode).await;
                warned(r, &dups)
            }
            _ => Err(not_allowed(&method, &uri)),
        }
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

pub(super) fn not_allowed(method: &Method, uri: &Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{method} is not supported on {}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn keys_put_namespaces_under_the_resource() {
        let t = resolve("/api/v1/namespaces/default/pods/web").expect("path");
        assert_eq!(key(&t, Some("web")), "/registry/core/pods/default/web");
        let t = resolve("/apis/sluice.dev/v1/nodepools").expect("path");
        assert_eq!(key(&t, None), "/registry/sluice.dev/nodepools/");
    }
}
