//! The request pipeline without the network and the store, for the fuzz
//! targets (`controller/fuzz`): each entry point runs the same functions a
//! handler runs, in the same order, on bytes the target makes up, and
//! returns what would be stored or the `Status` the client would get. The
//! server does not call these; they only put its pure steps together.

use std::collections::HashMap;

use serde_json::Value;

use super::list::decode_continue;
use super::objects::{self, decode_body, Selectors};
use super::path::resolve;
use super::status::ApiError;
use super::{apply, defaults, deletion, fields, meta, patch};

/// The clock's reading and the random parts a create fills in: fixed, so
/// a crash reproduces.
const NOW: &str = "2026-01-01T00:00:00Z";
const UID: &str = "00000000-0000-4000-8000-000000000000";
const SUFFIX: &str = "bcdfg";
/// The User-Agent of the made-up requests (their manager when they name
/// none).
const USER_AGENT: &str = "fuzz/1.0";

fn query(field_validation: &str) -> HashMap<String, String> {
    HashMap::from([("fieldValidation".to_string(), field_validation.to_string())])
}

/// A create (`POST` to the collection `path`, as `resolve` reads it) with
/// `body` sent as `ctype` and `?fieldValidation=`: the object as it would
/// be stored, after a round trip through the store's encoding.
pub fn create(
    path: &str,
    ctype: &str,
    field_validation: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let t = resolve(path).map_err(|_| ApiError::not_found(path))?;
    let mode = fields::mode(&query(field_validation))?;
    // The duplicate-field walk sees every body the decoder does.
    let _ = super::duplicates::find(ctype.contains("yaml"), body);
    let body = decode_body(ctype, body)?;
    let q = query(field_validation);
    let writer = apply::writer("create", false, &q, USER_AGENT, NOW.into())?;
    let mut obj = meta::prepare_create(&t, body, SUFFIX, UID, NOW)?;
    fields::check(&t, &mut obj, mode, None)?;
    defaults::apply(t.resource.kind, &mut obj, true);
    let named = super::path::Target {
        name: obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(String::from),
        ..t.clone()
    };
    apply::record_update(&apply::Request::new(&named, false, &writer), None, &mut obj);
    meta::check_depth(&t, &obj)?;
    objects::decode_stored(&objects::encode(&obj))
}

/// A delete's body (`DeleteOptions`), as `DELETE` decodes it.
pub fn delete_options(ctype: &str, body: &[u8], grace: Option<&str>) -> Result<(), ApiError> {
    let mut q = HashMap::new();
    if let Some(g) = grace {
        q.insert("gracePeriodSeconds".to_string(), g.to_string());
    }
    deletion::options(Some(decode_body(ctype, body)?), &q).map(|_| ())
}

/// A patch (`PATCH` of the object `path` names, `status_only` for its
/// `/status`) with `body` sent as `ctype`, `?fieldManager=manager` and
/// `?force=true` with `force`, on the live object `live` (stored as JSON,
/// resourceVersion 7): the object as it would be stored.
#[allow(clippy::too_many_arguments)]
pub fn patch(
    path: &str,
    ctype: &str,
    field_validation: &str,
    manager: Option<&str>,
    force: bool,
    live: &Value,
    body: &[u8],
    status_only: bool,
) -> Result<Value, ApiError> {
    let t = resolve(path).map_err(|_| ApiError::not_found(path))?;
    let mode = fields::mode(&query(field_validation))?;
    let format = patch::Format::of(ctype).ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("unknown patch format {ctype}"),
        )
    })?;
    let mut q = query(field_validation);
    if let Some(m) = manager {
        q.insert("fieldManager".into(), m.into());
    }
    if force {
        q.insert("force".into(), "true".into());
    }
    let is_apply = format == patch::Format::Apply;
    let writer = apply::writer("patch", is_apply, &q, USER_AGENT, NOW.into())?;
    let body = decode_body(ctype, body)?;
    let mut obj = meta::with_resource_version(live.clone(), 7);
    super::write::apply_patch(&t, &mut obj, format, &body, &writer, status_only)?;
    meta::sent_resource_version(&obj)
        .map_err(|m| meta::invalid(&t, "", "metadata.resourceVersion", &m))?;
    let track = (!is_apply).then_some(&writer);
    let (merged, _unknown) = super::write::updated(&t, live, obj, status_only, mode, track)?;
    objects::decode_stored(&objects::encode(&merged))
}

/// A list's or watch's query: `labelSelector`, `fieldSelector` and
/// `continue`, parsed as `list` does, then matched against `obj`.
pub fn list_query(
    label_selector: &str,
    field_selector: &str,
    continue_token: &str,
    obj: &Value,
) -> Result<bool, ApiError> {
    let q = HashMap::from([
        ("labelSelector".to_string(), label_selector.to_string()),
        ("fieldSelector".to_string(), field_selector.to_string()),
    ]);
    let sel = Selectors::from_query(&q)?;
    if !continue_token.is_empty() {
        decode_continue(continue_token)?;
    }
    Ok(sel.matches(obj))
}
