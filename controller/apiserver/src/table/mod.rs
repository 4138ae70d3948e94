//! Other shapes of the same objects, as a client's `Accept` header asks for
//! them on get, list and watch:
//!
//! - `as=Table;g=meta.k8s.io;v=v1` (what `kubectl get` asks for): rows of
//!   the columns kubectl prints (READY, STATUS, ...), each row carrying the
//!   object's metadata (`includeObject=Metadata`, the default), the whole
//!   object (`Object`) or nothing (`None`);
//! - `as=PartialObjectMetadata[List]` (metadata-only clients, kube-rs's
//!   `metadata_watcher`): the objects' metadata only.
//!
//! The objects are read and filtered as for JSON; the conversion happens on
//! the response, so every store path serves every shape. A header that
//! names nothing the server can produce is a 406.

pub mod age;
pub mod columns;
mod pod;

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};
use sluice_model::k8s::jiff::Timestamp;

use super::status::ApiError;
use columns::Column;

/// What a row carries of its object (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

/// The shape a response takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The objects themselves (JSON).
    Object,
    /// A `meta.k8s.io` Table of this version (`v1` or `v1beta1`).
    Table {
        version: &'static str,
        include: Include,
    },
    /// `PartialObjectMetadata[List]` of this version.
    Metadata { version: &'static str },
}

fn meta_version(v: Option<&str>) -> Option<&'static str> {
    match v {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    }
}

/// The first media range of `accept` the server can produce.
pub fn negotiate(headers: &HeaderMap, q: &HashMap<String, String>) -> Result<Shape, ApiError> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Ok(Shape::Object);
    };
    let accept = accept.to_str().map_err(|_| {
        ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            "Accept: not valid text",
        )
    })?;
    if accept.trim().is_empty() {
        return Ok(Shape::Object);
    }
    let include = match q.get("includeObject").map(String::as_str) {
        None | Some("") | Some("Metadata") => Include::Metadata,
        Some("None") => Include::None,
        Some("Object") => Include::Object,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("includeObject: {other:?} is not one of None, Metadata, Object"),
            ))
        }
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut params: HashMap<String, &str> = HashMap::new();
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                params.insert(k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
            }
        }
        if !matches!(
            media.as_str(),
            "application/json" | "application/*" | "*/*" | "application/yaml"
        ) {
            continue;
        }
        let version = meta_version(params.get("v").copied());
        let meta_group = params.get("g").copied() == Some("meta.k8s.io");
        match params.get("as").copied() {
            None => return Ok(Shape::Object),
            Some("Table") if meta_group => {
                if let Some(version) = version {
                    return Ok(Shape::Table { version, include });
                }
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta_group => {
                if let Some(version) = version {
                    return Ok(Shape::Metadata { version });
                }
            }
            Some(_) => {}
        }
    }
    Err(ApiError::new(
        StatusCode::NOT_ACCEPTABLE,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: application/json, \
             application/json;as=Table;v=v1;g=meta.k8s.io, \
             application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io (asked for {accept:?})"
        ),
    ))
}

fn partial(version: &str, obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The list metadata worth keeping (revision, continue token, count).
fn list_meta(list: &Value) -> Value {
    let mut m = Map::new();
    if let Some(src) = list.get("metadata").and_then(Value::as_object) {
        for k in ["resourceVersion", "continue", "remainingItemCount"] {
            if let Some(v) = src.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
    }
    Value::Object(m)
}

fn row(
    obj: &Value,
    cells: columns::Cells,
    include: Include,
    version: &str,
    now: Timestamp,
) -> Value {
    let mut r =
        json!({"cells": cells(obj, now).iter().map(columns::Cell::to_json).collect::<Vec<_>>()});
    match include {
        Include::None => {}
        Include::Metadata => r["object"] = partial(version, obj),
        Include::Object => r["object"] = obj.clone(),
    }
    r
}

fn table(version: &str, cols: &[Column], meta: Value, rows: Vec<Value>) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": meta,
        "columnDefinitions": cols.iter().map(Column::to_json).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// An object, or a list of `kind` (with `items`), in `shape`.
pub fn convert(value: Value, kind: &str, shape: Shape, now: Timestamp) -> Value {
    let is_list = value.get("items").is_some_and(Value::is_array);
    match shape {
        Shape::Object => value,
        Shape::Metadata { version } if is_list => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": list_meta(&value),
            "items": value["items"].as_array().into_iter().flatten()
                .map(|o| partial(version, o)).collect::<Vec<_>>(),
        }),
        Shape::Metadata { version } => partial(version, &value),
        Shape::Table { version, include } => {
            let (cols, cells) = columns::for_kind(kind);
            if is_list {
                let rows = value["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| row(o, cells, include, version, now))
                    .collect();
                table(version, &cols, list_meta(&value), rows)
            } else {
                let rv = value.pointer("/metadata/resourceVersion").cloned();
                let meta = rv.map_or_else(|| json!({}), |rv| json!({"resourceVersion": rv}));
                table(
                    version,
                    &cols,
                    meta,
                    vec![row(&value, cells, include, version, now)],
                )
            }
        }
    }
}

/// One watch event line in `shape`: errors pass as they are; a bookmark
/// keeps its revision in an empty table (or bare metadata).
pub fn convert_event(line: &[u8], kind: &str, shape: Shape, now: Timestamp) -> Option<Vec<u8>> {
    let mut ev: Value = serde_json::from_slice(line).ok()?;
    let kind_of_event = ev
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let object = ev.get_mut("object").map(Value::take).unwrap_or(Value::Null);
    ev["object"] = match (kind_of_event.as_str(), shape) {
        ("ERROR", _) => object,
        ("BOOKMARK", Shape::Table { version, .. }) => table(
            version,
            &[],
            object.get("metadata").cloned().unwrap_or_else(|| json!({})),
            vec![],
        ),
        _ => convert(object, kind, shape, now),
    };
    let mut out = serde_json::to_vec(&ev).ok()?;
    out.push(b'\n');
    Some(out)
}

/// `resp` (a get or list answer) in `shape`; answers other than 200 are
/// Status objects and stay as they are.
pub async fn respond(resp: Response, kind: &'static str, shape: Shape, watch: bool) -> Response {
    if shape == Shape::Object || resp.status() != StatusCode::OK {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    if watch {
        let mut pending: Vec<u8> = Vec::new();
        let lines = body.into_data_stream().map(move |chunk| {
            let chunk = chunk.unwrap_or_default();
            pending.extend_from_slice(&chunk);
            let mut out = Vec::new();
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if let Some(c) = convert_event(&line, kind, shape, crate::clock::now()) {
                    out.extend_from_slice(&c);
                }
            }
            Ok::<_, std::convert::Infallible>(Bytes::from(out))
        });
        // A chunk without a whole line yields nothing: send no empty frames.
        let lines = lines.filter(|c| std::future::ready(c.as_ref().is_ok_and(|b| !b.is_empty())));
        return Response::from_parts(parts, Body::from_stream(lines));
    }
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                format!("reading the response to convert it: {e}"),
            )
            .into_response()
        }
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let converted = convert(value, kind, shape, crate::clock::now());
    let mut resp = Response::from_parts(
        parts,
        Body::from(serde_json::to_vec(&converted).unwrap_or_default()),
    );
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}

#[cfg(test)]
mod tests;
