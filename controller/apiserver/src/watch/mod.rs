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
//!
//! A watch is a stream the connection polls itself: no task and no channel
//! between the store's events and the response body. A client that reads
//! slowly is buffered by the watch cache, which ends it when it falls too
//! far behind (the client watches again from its last event). The line of
//! each change is made once for all watchers with the same selectors
//! ([`memo`]).

mod lines;
mod memo;

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sluice_store::{ListOptions, Revision, StoreError, WatchStream};

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

pub use memo::Memo;

/// What a watch stream holds between two lines.
struct Watching {
    /// The initial events (ADDED, then the initial-events-end BOOKMARK),
    /// then the store's.
    initial: std::vec::IntoIter<Bytes>,
    events: Option<WatchStream>,
    /// Why the store's watch could not start (an in-stream 410).
    refused: Option<StoreError>,
    target: Target,
    sel: Selectors,
    /// The selectors' text: the memo's key for lines this watcher shares.
    selection: Arc<str>,
    memo: Arc<Memo>,
    last: Revision,
    deadline: Pin<Box<tokio::time::Sleep>>,
    bookmarks: Option<tokio::time::Interval>,
}

impl Watching {
    /// The next line, or `None` when the watch is over.
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(l) = self.initial.next() {
            return Some(l);
        }
        if let Some(e) = self.refused.take() {
            return Some(match e {
                StoreError::FutureRevision { .. } => lines::error(&store_error(&self.target, e)),
                e => lines::expired(&e),
            });
        }
        loop {
            let events = self.events.as_mut()?;
            let tick = async {
                match self.bookmarks.as_mut() {
                    Some(t) => t.tick().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut self.deadline => return None,
                _ = tick => return Some(lines::bookmark(&self.target, self.last, false)),
                ev = events.next() => match ev {
                    None => return None,
                    // Too slow for the watch cache: end the stream, as
                    // kube-apiserver does; the client watches again from
                    // the last event it got (no 410, no relist).
                    Some(Err(StoreError::WatchClosed(_))) => return None,
                    Some(Err(e)) => {
                        self.events = None;
                        return Some(lines::expired(&e));
                    }
                    Some(Ok(ev)) => {
                        self.last = ev.mod_rev;
                        let sel = &self.sel;
                        if let Some(l) = self
                            .memo
                            .line(ev.mod_rev, &ev.key, &self.selection, || {
                                lines::event_line(&ev, sel)
                            })
                        {
                            return Some(l);
                        }
                    }
                }
            }
        }
    }
}

/// How long a watch from a resourceVersion the store has not reached
/// waits for it (kube-apiserver's watch cache waits as long) before it
/// answers with an in-stream 504: a client that read the version from
/// another server of a replicated controller is only a little ahead.
const FUTURE_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store has reached `rev`, for at most [`FUTURE_WAIT`].
async fn wait_for_revision(o: &Objects, rev: i64) -> Result<(), StoreError> {
    let give_up = tokio::time::Instant::now() + FUTURE_WAIT;
    loop {
        let current = o.store.current_revision().await?;
        if rev <= current {
            return Ok(());
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(StoreError::FutureRevision {
                requested: rev,
                current,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn serve(
    o: &Objects,
    t: &Target,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let sel = Selectors::from_query(q)?;
    let selection: Arc<str> = format!(
        "{}\0{}",
        q.get("labelSelector").map_or("", String::as_str),
        q.get("fieldSelector").map_or("", String::as_str)
    )
    .into();
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
    let send_initial = flag("sendInitialEvents");
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let prefix = key(t, None);

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
                initial.push(lines::line_raw("ADDED", &obj));
            }
        }
        if send_initial {
            initial.push(lines::bookmark(t, page.revision, true));
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
    // Only a version the client named can be ahead of the store.
    let named = !(send_initial || rv.is_empty() || rv == "0");
    let ahead = match named {
        true => wait_for_revision(o, from).await.err(),
        false => None,
    };
    let (events, refused) = match ahead {
        Some(e) => (None, Some(e)),
        None => match o.store.watch(&prefix, from).await {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        },
    };
    let bookmarks = flag("allowWatchBookmarks").then(|| {
        let start = tokio::time::Instant::now() + BOOKMARK_EVERY;
        tokio::time::interval_at(start, BOOKMARK_EVERY)
    });
    let watching = Watching {
        initial: initial.into_iter(),
        events,
        refused,
        target: t.clone(),
        sel,
        selection,
        memo: o.watch_lines.clone(),
        last: from,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        bookmarks,
    };
    let body = Body::from_stream(futures::stream::unfold(watching, |mut w| async move {
        w.next().await.map(|l| (Ok::<_, Infallible>(l), w))
    }));
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}
