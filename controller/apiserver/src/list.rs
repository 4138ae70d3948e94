//! Lists: `limit`/`continue`, label and field selectors, resourceVersion
//! (`resourceVersionMatch=Exact`, 504 for one the store has not reached,
//! 410 for an expired `continue`), as kube-apiserver answers them.
//!
//! The body is streamed: the store is read in chunks at the revision of
//! the first one (one snapshot), and each chunk is written out as it is
//! read, with the stored bytes spliced in (`stored.rs`), so a list of
//! 100 000 Pods never holds all of them, decoded, at once. The first chunk
//! is read before the answer starts, so a refused list is still a status;
//! a later chunk that fails (the snapshot compacted away mid-list) cuts
//! the body short, which the client sees as an error and retries.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_store::{ListOptions, ListPage, Revision, Store, StoreError};

use super::meta::api_version;
use super::objects::{bad_request, key, store_error, Objects, Selectors};
use super::path::Target;
use super::status::ApiError;
use super::stored;

/// Keys read from the store per chunk of the body.
const CHUNK: usize = 1000;

/// `continue` tokens: the list's revision and the last key, opaque to
/// clients (hex), checked on the way back in.
pub fn encode_continue(rev: i64, last: &str) -> String {
    format!("{rev}\n{last}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn decode_continue(s: &str) -> Result<(i64, String), ApiError> {
    let bad = || bad_request("continue key is not valid: pass the one the previous page returned");
    // Pairs of bytes, not of string slices: slicing `s` at even offsets
    // panicked inside a multi-byte character (found by the query fuzz
    // target: a token with U+FFFD among the hex digits).
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes: Option<Vec<u8>> = s
        .as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => u8::try_from(hex(*hi)? * 16 + hex(*lo)?).ok(),
            _ => None,
        })
        .collect();
    let text = String::from_utf8(bytes.ok_or_else(bad)?).map_err(|_| bad())?;
    let (rev, key) = text.split_once('\n').ok_or_else(bad)?;
    Ok((rev.parse().map_err(|_| bad())?, key.to_string()))
}

/// Where a list reads: from which key, at which revision.
async fn start(
    o: &Objects,
    t: &Target,
    q: &HashMap<String, String>,
) -> Result<(Option<Revision>, Option<String>), ApiError> {
    if let Some(c) = q.get("continue").filter(|c| !c.is_empty()) {
        let (rev, k) = decode_continue(c)?;
        return Ok((Some(rev), Some(k)));
    }
    // resourceVersion on a list: not older than it (Exact: at it); one
    // the store has not reached yet is kube-apiserver's 504.
    let at = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => {
            let rv: i64 = rv.parse().map_err(|_| {
                bad_request(format!("resourceVersion: {rv:?} is not a resource version"))
            })?;
            let current = o
                .store
                .current_revision()
                .await
                .map_err(|e| store_error(t, e))?;
            if rv > current {
                return Err(store_error(
                    t,
                    StoreError::FutureRevision {
                        requested: rv,
                        current,
                    },
                ));
            }
            (q.get("resourceVersionMatch").map(String::as_str) == Some("Exact")).then_some(rv)
        }
    };
    Ok((at, None))
}

/// One list being written out: what is read, what is left.
struct Pager {
    store: Arc<dyn Store>,
    prefix: String,
    sel: Selectors,
    limit: Option<usize>,
    /// Items written so far (those the selectors chose).
    matched: usize,
    /// The snapshot's revision, once the first chunk fixed it.
    at: Option<Revision>,
    cursor: Option<String>,
    /// The kind and apiVersion of the list, for its envelope.
    kind: String,
    api_version: String,
    done: bool,
    /// The next chunk's read, started before this chunk is written out:
    /// the store reads (on its own thread) while the server renders and
    /// encrypts, instead of one after the other.
    ahead: Option<tokio::task::JoinHandle<Result<ListPage, StoreError>>>,
}

impl Drop for Pager {
    fn drop(&mut self) {
        // The client went away: no read for a chunk nobody will get.
        if let Some(a) = self.ahead.take() {
            a.abort();
        }
    }
}

impl Pager {
    async fn read(&mut self) -> Result<ListPage, StoreError> {
        let page = match self.ahead.take() {
            Some(a) => a
                .await
                .map_err(|e| StoreError::Corrupt(format!("a list read ended: {e}")))??,
            None => {
                let want = self.want();
                self.store
                    .list(ListOptions {
                        prefix: &self.prefix,
                        limit: Some(want),
                        start_after: self.cursor.as_deref(),
                        at_revision: self.at,
                    })
                    .await?
            }
        };
        self.at = Some(page.revision);
        Ok(page)
    }

    fn want(&self) -> usize {
        self.limit.map_or(CHUNK, |l| (l - self.matched).min(CHUNK))
    }

    /// Without a limit, a page with more after it is always followed by
    /// the next: its read starts before this page is rendered.
    fn read_ahead_of(&mut self, page: &ListPage) {
        if self.limit.is_none() && page.more {
            if let Some(last) = page.items.last() {
                self.cursor = Some(last.key.clone());
                self.read_ahead();
            }
        }
    }

    /// Starts reading the next chunk after `cursor`, unless the list is
    /// written out or its read is already under way.
    fn read_ahead(&mut self) {
        if self.done || self.ahead.is_some() {
            return;
        }
        let (store, prefix, cursor, at, want) = (
            self.store.clone(),
            self.prefix.clone(),
            self.cursor.clone(),
            self.at,
            self.want(),
        );
        self.ahead = Some(tokio::spawn(async move {
            store
                .list(ListOptions {
                    prefix: &prefix,
                    limit: Some(want),
                    start_after: cursor.as_deref(),
                    at_revision: at,
                })
                .await
        }));
    }

    /// One chunk of the body from a page: its selected items, and the end
    /// of the list when the page ends it. Items after the first are
    /// preceded by a comma.
    fn chunk(&mut self, page: ListPage) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let last = page.items.last().map(|kv| kv.key.clone());
        for kv in page.items {
            if let Some(item) = stored::render(&kv.value, kv.mod_rev, &self.sel)? {
                if self.matched > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&item);
                self.matched += 1;
            }
        }
        let next = if !page.more {
            Some(None)
        } else if self.limit.is_some_and(|l| self.matched >= l) {
            Some(last.clone())
        } else {
            self.cursor = last;
            None
        };
        if let Some(next) = next {
            self.done = true;
            out.extend_from_slice(&self.tail(page.revision, next.as_deref()));
        }
        Ok(out)
    }

    /// `{"apiVersion":…,"items":[`: keys in the order `serde_json` writes
    /// them, as the whole list was written before it was streamed.
    fn head(&self) -> Vec<u8> {
        let mut h = b"{\"apiVersion\":".to_vec();
        h.extend_from_slice(&json_string(&self.api_version));
        h.extend_from_slice(b",\"items\":[");
        h
    }

    fn tail(&self, rev: Revision, next: Option<&str>) -> Vec<u8> {
        let mut meta = serde_json::Map::new();
        if let Some(last) = next {
            meta.insert("continue".into(), encode_continue(rev, last).into());
        }
        meta.insert("resourceVersion".into(), rev.to_string().into());
        let mut t = b"],\"kind\":".to_vec();
        t.extend_from_slice(&json_string(&self.kind));
        t.extend_from_slice(b",\"metadata\":");
        t.extend_from_slice(&serde_json::to_vec(&meta).unwrap_or_default());
        t.push(b'}');
        t
    }

    /// The next chunk of the body, read from the store.
    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        if self.done {
            return None;
        }
        let chunk = match self.read().await {
            Ok(page) => {
                self.read_ahead_of(&page);
                let chunk = self.chunk(page);
                self.read_ahead();
                chunk
            }
            Err(e) => Err(e.to_string()),
        };
        match chunk {
            Ok(c) => Some((Ok(Bytes::from(c)), self)),
            Err(e) => {
                self.done = true;
                Some((Err(std::io::Error::other(e)), self))
            }
        }
    }
}

fn json_string(s: &str) -> Vec<u8> {
    serde_json::to_vec(s).unwrap_or_default()
}

fn unreadable(e: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        format!("stored object unreadable: {e}"),
    )
}

pub async fn list(
    o: &Objects,
    t: &Target,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let sel = Selectors::from_query(q)?;
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None | Some(Ok(0)) => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return Err(bad_request("limit: expected a whole number")),
    };
    let (at, cursor) = start(o, t, q).await?;
    let mut pager = Pager {
        store: o.store.clone(),
        prefix: key(t, None),
        sel,
        limit,
        matched: 0,
        at,
        cursor,
        kind: format!("{}List", t.resource.kind),
        api_version: api_version(t),
        done: false,
        ahead: None,
    };
    // The first chunk before the status line: an expired `continue` is a
    // 410, a revision not reached a 504, an unreadable object a 500.
    let first = pager.read().await.map_err(|e| store_error(t, e))?;
    pager.read_ahead_of(&first);
    let mut body = pager.head();
    body.extend_from_slice(&pager.chunk(first).map_err(unreadable)?);
    pager.read_ahead();
    let first = futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(body)) });
    let rest = futures::stream::unfold(pager, Pager::next);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(futures::StreamExt::chain(first, rest)),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_refuse_junk() {
        let c = encode_continue(42, "/registry/core/pods/default/web-1");
        assert_eq!(
            decode_continue(&c).expect("ok"),
            (42, "/registry/core/pods/default/web-1".into())
        );
        // "6869" is "hi": no revision. "aéa" (a U+00E9 between hex digits)
        // panicked slicing at byte 2, and so did the query fuzz target's
        // `...2f7765\u{FFFD}\u{FFFD}31`.
        for bad in ["zz", "abc", "6869", "aéa", "2f7765\u{FFFD}\u{FFFD}31", "+f"] {
            assert!(decode_continue(bad).is_err(), "{bad}");
        }
    }
}
