//! Watches as kube-apiserver streams them: one JSON object per line,
//! `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`, every
//! change after the requested resourceVersion in order, then live ones.
//!
//! - No resourceVersion (or `0`): the current objects as ADDED first.
//! - `sendInitialEvents=true`: the same, then a BOOKMARK annotated
//!   `k8s.io/initial-events-end` (what `kubectl delete` and kube-rs's
//!   streaming lists wait for) — implemented, never ignored.
//! - A resourceVersion the store has compacted: an in-stream ERROR with a
//!   410 `Status` (kube-rs relists on exactly that).
//! - `allowWatchBookmarks`: a BOOKMARK with the latest revision now and
//!   then; `timeoutSeconds` ends the stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use sluice_store::{Event, EventKind, ListOptions, StoreError};
use tokio::sync::mpsc;

use super::meta::api_version;
use super::objects::{key, store_error, Objects, Selectors};
use super::path::Target;
use super::status::ApiError;
use super::stored;

/// kube-apiserver's default upper bound of a watch (`--min-request-timeout`
/// is 1800 s; it picks a random time up to twice that).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often a bookmark goes out when asked for (kube-apiserver: about a
/// minute).
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// Lines buffered towards a slow client before the watch waits for it.
const BUFFER: usize = 256;

fn line(kind: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

fn bookmark(t: &Target, rev: i64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        json!({"kind": t.resource.kind, "apiVersion": api_version(t), "metadata": meta}),
    )
}

fn expired(e: &StoreError) -> Bytes {
    line(
        "ERROR",
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("too old resource version: {e}"), "reason": "Expired", "code": 410}),
    )
}

/// A line around an object already encoded: the same bytes `line` makes.
fn line_raw(kind: &str, object: &[u8]) -> Bytes {
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
fn event_line(ev: &Event, sel: &Selectors) -> Option<Bytes> {
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

pub async fn serve(
    o: &Objects,
    t: &Target,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let sel = Selectors::from_query(q)?;
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    let timeout = match q.get("timeoutSeconds").map(|v| v.parse::<u64>()) {
        None => DEFAULT_TIMEOUT,
        Some(Ok(s)) => Duration::from_secs(s),
        Some(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "timeoutSeconds: expected a whole number",
            ))
        }
    };
    let bookmarks = flag("allowWatchBookmarks");
    let send_initial = flag("sendInitialEvents");
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let prefix = key(t, None);
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFER);

    let mut initial = Vec::new();
    let from = if send_initial || rv.is_empty() || rv == "0" {
        let page = o
            .store
            .list(ListOptions {
                prefix: &prefix,
                limit: None,
                start_after: None,
                at_revision: None,
            })
            .await
            .map_err(|e| store_error(t, e))?;
        for kv in page.items {
            if let Ok(Some(obj)) = stored::render(&kv.value, kv.mod_rev, &sel) {
                initial.push(line_raw("ADDED", &obj));
            }
        }
        if send_initial {
            initial.push(bookmark(t, page.revision, true));
        }
        page.revision
    } else {
        rv.parse::<i64>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("resourceVersion: {rv:?} is not a resource version"),
            )
        })?
    };
    let stream = o.store.watch(&prefix, from).await;
    let t = t.clone();
    tokio::spawn(async move {
        for l in initial {
            if tx.send(l).await.is_err() {
                return;
            }
        }
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(expired(&e)).await;
                return;
            }
        };
        let mut last = from;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            let out = tokio::select! {
                _ = &mut deadline => return,
                _ = tick.tick(), if bookmarks => Some(bookmark(&t, last, false)),
                ev = stream.next() => match ev {
                    None => return,
                    // Too slow for the watch cache: end the stream, as
                    // kube-apiserver does; the client watches again from
                    // the last event it got (no 410, no relist).
                    Some(Err(StoreError::WatchClosed(_))) => return,
                    Some(Err(e)) => {
                        let _ = tx.send(expired(&e)).await;
                        return;
                    }
                    Some(Ok(ev)) => {
                        last = ev.mod_rev;
                        event_line(&ev, &sel)
                    }
                }
            };
            if let Some(l) = out {
                if tx.send(l).await.is_err() {
                    return;
                }
            }
        }
    });
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }));
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}
