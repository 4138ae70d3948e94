//! The lines of a watch stream: one JSON object per line, an event type
//! and an object. Pure: no I/O.

use axum::body::Bytes;
use serde_json::{json, Value};
use sluice_store::{Event, EventKind, StoreError};

use crate::meta::api_version;
use crate::objects::Selectors;
use crate::path::Target;
use crate::status::ApiError;
use crate::stored;

pub fn line(kind: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

pub fn bookmark(t: &Target, rev: i64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        json!({"kind": t.resource.kind, "apiVersion": api_version(t), "metadata": meta}),
    )
}

/// An in-stream error with the `Status` a request would have answered.
pub fn error(e: &ApiError) -> Bytes {
    line("ERROR", e.body())
}

pub fn expired(e: &StoreError) -> Bytes {
    line(
        "ERROR",
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("too old resource version: {e}"), "reason": "Expired", "code": 410}),
    )
}

/// A line around an object already encoded: the same bytes `line` makes.
pub fn line_raw(kind: &str, object: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object.len() + 32);
    v.extend_from_slice(b"{\"object\":");
    v.extend_from_slice(object);
    v.extend_from_slice(b",\"type\":\"");
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\"}\n");
    Bytes::from(v)
}

/// What one change means to a watcher with these selectors: kube-apiserver
/// turns an object that leaves the selection into a DELETED, one that
/// enters it into an ADDED.
pub fn event_line(ev: &Event, sel: &Selectors) -> Option<Bytes> {
    let render =
        |bytes: &[u8], sel: &Selectors| stored::render(bytes, ev.mod_rev, sel).ok().flatten();
    if ev.kind == EventKind::Delete {
        let old = render(ev.prev_value.as_deref()?, sel)?;
        return Some(line_raw("DELETED", &old));
    }
    // Whether the previous object was selected: matched, not written out.
    let was = ev
        .prev_value
        .as_deref()
        .is_some_and(|p| stored::selects(p, sel));
    match (was, render(&ev.value, sel)) {
        (false, Some(new)) => Some(line_raw("ADDED", &new)),
        (true, Some(new)) => Some(line_raw("MODIFIED", &new)),
        // Left the selection: gone for this watcher.
        (true, None) => render(&ev.value, &Selectors::default()).map(|n| line_raw("DELETED", &n)),
        (false, None) => None,
    }
}
