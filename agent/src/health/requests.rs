//! Answering requests: routing a parsed request to its answer, and the
//! state those answers read (proxier health, node eligibility, per-Service
//! endpoint counts) with the answer counters.
//!
//! Pure of I/O: [`handle_one`] turns the bytes received so far into the
//! bytes to send; the connection loop in [`super::listener`] moves them.
//! Shared state is behind atomics and a mutex held for nanoseconds, so
//! every listener answers from the same state without waiting on the sync
//! loop.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use super::entries::ServiceHealthEntry;
use super::handle::Limits;
use super::http::{
    clean_path, escape_path, parse_head, parse_target, write_response, BodyLen, ConnHeader, Head,
    Reject, RequestHead, Response, Target, CT_HTML, CT_JSON, CT_TEXT,
};
use super::logic::{
    node_answer, service_answer, service_body_prefix, Clock, IpFamily, NodeSnapshot, Probe,
    ProxierHealth,
};
use super::time::{http_date, unix_secs, HTTP_DATE_LEN};

/// Path prefix on the node server for `Local` Services without a port.
const SERVICE_PATH: &[u8] = b"/service/";

/// Answer counters of the node server, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub healthz_200: u64,
    pub healthz_503: u64,
    pub livez_200: u64,
    pub livez_503: u64,
    /// Unknown paths on the node server.
    pub not_found_404: u64,
    /// Unclean paths redirected, as Go's mux does.
    pub redirect_301: u64,
    /// 400, 431 and 505 on any server.
    pub rejected: u64,
}

/// Answer counters of one Service's health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceCounters {
    pub namespace: String,
    pub name: String,
    pub port: Option<u16>,
    pub answered_200: u64,
    pub answered_503: u64,
}

#[derive(Default)]
pub(super) struct AtomicNodeCounters {
    healthz_200: AtomicU64,
    healthz_503: AtomicU64,
    livez_200: AtomicU64,
    livez_503: AtomicU64,
    not_found_404: AtomicU64,
    redirect_301: AtomicU64,
    pub(super) rejected: AtomicU64,
}

impl AtomicNodeCounters {
    pub(super) fn snapshot(&self) -> NodeCounters {
        NodeCounters {
            healthz_200: self.healthz_200.load(Relaxed),
            healthz_503: self.healthz_503.load(Relaxed),
            livez_200: self.livez_200.load(Relaxed),
            livez_503: self.livez_503.load(Relaxed),
            not_found_404: self.not_found_404.load(Relaxed),
            redirect_301: self.redirect_301.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
        }
    }
}

struct Ident {
    namespace: String,
    name: String,
    prefix: Vec<u8>,
}

/// One Service's live health state, read by its server on every request.
pub(super) struct ServiceSlot {
    port: Option<u16>,
    ident: RwLock<Arc<Ident>>,
    local_endpoints: AtomicU32,
    answered_200: AtomicU64,
    answered_503: AtomicU64,
}

impl ServiceSlot {
    pub(super) fn new(e: &ServiceHealthEntry) -> Self {
        ServiceSlot {
            port: e.port,
            ident: RwLock::new(Arc::new(Ident {
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                prefix: service_body_prefix(&e.namespace, &e.name),
            })),
            local_endpoints: AtomicU32::new(e.local_endpoints),
            answered_200: AtomicU64::new(0),
            answered_503: AtomicU64::new(0),
        }
    }

    fn ident(&self) -> Arc<Ident> {
        // Poisoning cannot leave an Arc half-written; keep serving.
        self.ident.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The same port may pass to another Service: swap the name in place
    /// rather than rebinding the port.
    pub(super) fn update(&self, e: &ServiceHealthEntry) {
        let cur = self.ident();
        if cur.namespace != e.namespace || cur.name != e.name {
            let mut g = self.ident.write().unwrap_or_else(|p| p.into_inner());
            *g = Arc::new(Ident {
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                prefix: service_body_prefix(&e.namespace, &e.name),
            });
        }
        self.local_endpoints.store(e.local_endpoints, Relaxed);
    }

    pub(super) fn counters(&self) -> ServiceCounters {
        let id = self.ident();
        ServiceCounters {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            port: self.port,
            answered_200: self.answered_200.load(Relaxed),
            answered_503: self.answered_503.load(Relaxed),
        }
    }
}

pub(super) struct Shared {
    pub(super) clock: Arc<dyn Clock>,
    pub(super) proxier: Mutex<ProxierHealth>,
    pub(super) node_eligible: AtomicBool,
    pub(super) families: Vec<IpFamily>,
    pub(super) limits: Limits,
    pub(super) node: AtomicNodeCounters,
    /// `Local` Services without a port, keyed `namespace/name`.
    pub(super) portless: RwLock<HashMap<Vec<u8>, Arc<ServiceSlot>>>,
}

impl Shared {
    pub(super) fn proxier(&self) -> std::sync::MutexGuard<'_, ProxierHealth> {
        // The guarded value is plain data, valid even after a panic.
        self.proxier.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn node_snapshot(&self) -> NodeSnapshot {
        let now = self.clock.now();
        let p = self.proxier();
        NodeSnapshot {
            proxier_healthy: p.is_healthy(now),
            node_eligible: self.node_eligible.load(Relaxed),
            last_updated: p.last_updated(),
            now,
        }
    }
}

#[derive(Clone)]
pub(super) enum Site {
    Node,
    Service(Arc<ServiceSlot>),
}

thread_local! {
    static DATE: Cell<(i64, [u8; HTTP_DATE_LEN])> = const { Cell::new((i64::MIN, [0; HTTP_DATE_LEN])) };
}

/// The `Date` header, formatted once per second per thread.
fn date_header(now: SystemTime) -> [u8; HTTP_DATE_LEN] {
    let s = unix_secs(now);
    DATE.with(|c| {
        let (cs, d) = c.get();
        if cs == s {
            d
        } else {
            let d = http_date(s);
            c.set((s, d));
            d
        }
    })
}

/// answer, and body bytes still to discard from the stream.
pub(super) fn handle_one(
    sh: &Shared,
    site: &Site,
    limits: &Limits,
    input: &[u8],
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Option<(usize, bool, u64)> {
    let head = match parse_head(input) {
        Head::Partial => return None,
        Head::Reject(r) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(out, r, sh);
            return Some((input.len(), true, 0));
        }
        Head::Request(h) => h,
    };
    let target = match parse_target(head.method, head.target) {
        Ok(t) => t,
        Err(r) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(out, r, sh);
            return Some((input.len(), true, 0));
        }
    };
    // The body is read and dropped when small; otherwise the connection
    // cannot be reused.
    let (mut keep, body_len) = match head.body {
        BodyLen::Known(n) if n <= limits.max_discard_body => (head.keep_alive, n),
        _ => (false, 0),
    };
    let avail = (input.len() - head.head_len) as u64;
    let in_buf = body_len.min(avail);
    let consumed = head.head_len + in_buf as usize;
    let rest = body_len - in_buf;
    let conn = if !keep {
        ConnHeader::Close
    } else if head.http10 {
        ConnHeader::KeepAlive
    } else {
        ConnHeader::None
    };
    if !route(sh, site, &head, &target, conn, body, out) {
        keep = false;
    }
    Some((consumed, !keep, if keep { rest } else { 0 }))
}

/// Writes the answer; `false` when the connection must close after it.
fn route(
    sh: &Shared,
    site: &Site,
    head: &RequestHead<'_>,
    target: &Target<'_>,
    conn: ConnHeader,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> bool {
    let send_body = head.method != "HEAD";
    let now_date = || date_header(sh.clock.now());
    let mut resp = Response {
        status: 200,
        content_type: None,
        nosniff: false,
        weight: None,
        location: None,
        body: &[],
        send_body,
        conn,
    };
    match (target, site) {
        // Go's server answers `OPTIONS *` itself, whatever the handler.
        (Target::Asterisk, _) if head.method == "OPTIONS" => {
            write_response(out, head.http10, &resp, &now_date());
            true
        }
        (Target::Asterisk, _) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(
                out,
                Reject::BadRequest("400 Bad Request: * is for OPTIONS"),
                sh,
            );
            false
        }
        // A Service's server answers every path and method alike.
        (_, Site::Service(slot)) => {
            write_service(sh, slot, head, conn, body, out);
            true
        }
        (Target::Authority, Site::Node) => {
            not_found(sh, head, conn, out);
            true
        }
        (Target::Path { path, query }, Site::Node) => {
            let clean = clean_path(path);
            if clean.as_ref() != path.as_ref() {
                // Go's mux redirects unclean paths to their clean form.
                sh.node.redirect_301.fetch_add(1, Relaxed);
                let mut loc = Vec::with_capacity(clean.len() + query.len() + 1);
                escape_path(&clean, &mut loc);
                if !query.is_empty() {
                    loc.push(b'?');
                    loc.extend_from_slice(query.as_bytes());
                }
                body.clear();
                if head.method == "GET" {
                    body.extend_from_slice(b"<a href=\"");
                    html_escape(&loc, body);
                    body.extend_from_slice(b"\">Moved Permanently</a>.\n\n");
                }
                resp.status = 301;
                resp.content_type = matches!(head.method, "GET" | "HEAD").then_some(CT_HTML);
                resp.location = Some(&loc);
                resp.body = body;
                write_response(out, head.http10, &resp, &now_date());
                return true;
            }
            match clean.as_ref() {
                b"/healthz" | b"/livez" => {
                    let probe = if clean.as_ref() == b"/healthz" {
                        Probe::Healthz
                    } else {
                        Probe::Livez
                    };
                    let snap = sh.node_snapshot();
                    let status = node_answer(probe, &snap, &sh.families, body);
                    let c = match (probe, status) {
                        (Probe::Healthz, 200) => &sh.node.healthz_200,
                        (Probe::Healthz, _) => &sh.node.healthz_503,
                        (Probe::Livez, 200) => &sh.node.livez_200,
                        (Probe::Livez, _) => &sh.node.livez_503,
                    };
                    c.fetch_add(1, Relaxed);
                    resp.status = status;
                    resp.content_type = Some(CT_JSON);
                    resp.nosniff = true;
                    resp.body = body;
                    write_response(out, head.http10, &resp, &date_header(snap.now));
                    true
                }
                p if p.starts_with(SERVICE_PATH) => {
                    let slot = sh
                        .portless
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&p[SERVICE_PATH.len()..])
                        .cloned();
                    match slot {
                        Some(slot) => write_service(sh, &slot, head, conn, body, out),
                        None => not_found(sh, head, conn, out),
                    }
                    true
                }
                _ => {
                    not_found(sh, head, conn, out);
                    true
                }
            }
        }
    }
}

fn write_service(
    sh: &Shared,
    slot: &ServiceSlot,
    head: &RequestHead<'_>,
    conn: ConnHeader,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    let now = sh.clock.now();
    let healthy = sh.proxier().is_healthy(now);
    let n = slot.local_endpoints.load(Relaxed);
    let status = {
        let id = slot.ident.read().unwrap_or_else(|p| p.into_inner());
        service_answer(&id.prefix, n, healthy, body)
    };
    if status == 200 {
        slot.answered_200.fetch_add(1, Relaxed);
    } else {
        slot.answered_503.fetch_add(1, Relaxed);
    }
    let resp = Response {
        status,
        content_type: Some(CT_JSON),
        nosniff: true,
        weight: Some(n),
        location: None,
        body,
        send_body: head.method != "HEAD",
        conn,
    };
    write_response(out, head.http10, &resp, &date_header(now));
}

fn not_found(sh: &Shared, head: &RequestHead<'_>, conn: ConnHeader, out: &mut Vec<u8>) {
    sh.node.not_found_404.fetch_add(1, Relaxed);
    let resp = Response {
        status: 404,
        content_type: Some(CT_TEXT),
        nosniff: true,
        weight: None,
        location: None,
        body: b"404 page not found\n",
        send_body: head.method != "HEAD",
        conn,
    };
    write_response(out, head.http10, &resp, &date_header(sh.clock.now()));
}

pub(super) fn write_reject(out: &mut Vec<u8>, r: Reject, sh: &Shared) {
    let resp = Response {
        status: r.status(),
        content_type: Some(CT_TEXT),
        nosniff: false,
        weight: None,
        location: None,
        body: r.body(),
        send_body: true,
        conn: ConnHeader::Close,
    };
    write_response(out, false, &resp, &date_header(sh.clock.now()));
}

fn html_escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&#34;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}
