//! Just enough HTTP/1.1 for health checks: request heads parsed with
//! `httparse` (no allocation), request targets decoded and cleaned the way
//! Go's `net/http` does (so paths route as they do on kube-proxy), responses
//! written into a reusable buffer.

use std::borrow::Cow;
use std::io::Write as _;

/// Header lines per request; health checkers send a handful.
pub const MAX_HEADERS: usize = 64;

/// Why a request is refused before routing. Every one closes the connection:
/// after a framing error the next request's start is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    BadRequest(&'static str),
    HeadersTooLarge,
    VersionNotSupported,
}

impl Reject {
    pub fn status(self) -> u16 {
        match self {
            Reject::BadRequest(_) => 400,
            Reject::HeadersTooLarge => 431,
            Reject::VersionNotSupported => 505,
        }
    }
    /// Plain-text body, as Go's server words it.
    pub fn body(self) -> &'static [u8] {
        match self {
            Reject::BadRequest(why) => why.as_bytes(),
            Reject::HeadersTooLarge => b"431 Request Header Fields Too Large",
            Reject::VersionNotSupported => {
                b"505 HTTP Version Not Supported: unsupported protocol version"
            }
        }
    }
}

/// Request body framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLen {
    /// `Content-Length` (0 when absent).
    Known(u64),
    /// `Transfer-Encoding`: not read; the connection closes after the answer.
    Unknown,
}

#[derive(Debug)]
pub struct RequestHead<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub http10: bool,
    /// Bytes of the head, including the blank line.
    pub head_len: usize,
    /// What the client asked for (HTTP/1.1 default on, HTTP/1.0 default off).
    pub keep_alive: bool,
    pub body: BodyLen,
}

#[derive(Debug)]
pub enum Head<'a> {
    Partial,
    Reject(Reject),
    Request(RequestHead<'a>),
}

/// Parses one request head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Head<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Head::Partial,
        Err(httparse::Error::TooManyHeaders) => return Head::Reject(Reject::HeadersTooLarge),
        Err(httparse::Error::Version) => return Head::Reject(version_reject(buf)),
        Err(_) => return Head::Reject(Reject::BadRequest("400 Bad Request")),
    };
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Head::Reject(Reject::BadRequest("400 Bad Request"));
    };
    let http10 = minor == 0;
    let mut keep_alive = !http10;
    let mut hosts = 0usize;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if h.name.eq_ignore_ascii_case("connection") {
            for tok in h.value.split(|&b| b == b',') {
                let tok = tok.trim_ascii();
                if tok.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    keep_alive = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let Some(n) = parse_decimal(h.value) else {
                return Head::Reject(Reject::BadRequest("400 Bad Request: bad Content-Length"));
            };
            // Several equal values are tolerated, differing ones are a
            // smuggling attempt.
            if content_length.is_some_and(|c| c != n) {
                return Head::Reject(Reject::BadRequest("400 Bad Request: bad Content-Length"));
            }
            content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        }
    }
    if !http10 && hosts == 0 {
        return Head::Reject(Reject::BadRequest(
            "400 Bad Request: missing required Host header",
        ));
    }
    if hosts > 1 {
        return Head::Reject(Reject::BadRequest("400 Bad Request: too many Host headers"));
    }
    // Both framings at once is ambiguous (request smuggling): refuse.
    if chunked && content_length.is_some() {
        return Head::Reject(Reject::BadRequest(
            "400 Bad Request: both Transfer-Encoding and Content-Length",
        ));
    }
    let body = if chunked {
        BodyLen::Unknown
    } else {
        BodyLen::Known(content_length.unwrap_or(0))
    };
    Head::Request(RequestHead {
        method,
        target,
        http10,
        head_len,
        keep_alive,
        body,
    })
}

/// `HTTP/2.0` and friends are well-formed but unsupported (505); anything
/// else that failed the version check is garbage (400).
fn version_reject(buf: &[u8]) -> Reject {
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line = buf[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&buf[..line_end]);
    let last = line.rsplit(|&b| b == b' ').next().unwrap_or(b"");
    match last {
        [b'H', b'T', b'T', b'P', b'/', maj, b'.', min]
            if maj.is_ascii_digit() && min.is_ascii_digit() && *maj != b'1' =>
        {
            Reject::VersionNotSupported
        }
        _ => Reject::BadRequest("400 Bad Request: malformed HTTP version"),
    }
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// The routable part of a request target.
#[derive(Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// Origin or absolute form: percent-decoded path and the raw query.
    Path { path: Cow<'a, [u8]>, query: &'a str },
    /// `*` (only meaningful for `OPTIONS`).
    Asterisk,
    /// Authority form (`CONNECT host:port`): no path at all.
    Authority,
}

pub fn parse_target<'a>(method: &str, target: &'a str) -> Result<Target<'a>, Reject> {
    let bad = Reject::BadRequest("400 Bad Request: malformed request target");
    if target == "*" {
        return Ok(Target::Asterisk);
    }
    if method == "CONNECT" && !target.starts_with('/') {
        return Ok(Target::Authority);
    }
    let rest = if target.starts_with('/') {
        target
    } else if let Some(i) = target.find("://") {
        // Absolute form: the path starts at the first '/' after the authority.
        let after = &target[i + 3..];
        after.find(['/', '?']).map_or("", |j| &after[j..])
    } else {
        return Err(bad);
    };
    let (raw_path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, q),
        None => (rest, ""),
    };
    let path = percent_decode(raw_path.as_bytes()).ok_or(bad)?;
    Ok(Target::Path { path, query })
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `None` on a broken escape (Go answers 400 to those).
pub fn percent_decode(p: &[u8]) -> Option<Cow<'_, [u8]>> {
    if !p.contains(&b'%') {
        return Some(Cow::Borrowed(p));
    }
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'%' {
            let hi = hex(*p.get(i + 1)?)?;
            let lo = hex(*p.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(p[i]);
            i += 1;
        }
    }
    Some(Cow::Owned(out))
}

/// Go's `ServeMux` path cleaning: a leading `/`, no empty, `.` or `..`
/// elements, a trailing `/` kept. Borrowed when already clean (the usual case).
pub fn clean_path(p: &[u8]) -> Cow<'_, [u8]> {
    if is_clean(p) {
        return Cow::Borrowed(p);
    }
    let mut stack: Vec<&[u8]> = Vec::new();
    for seg in p.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                stack.pop();
            }
            s => stack.push(s),
        }
    }
    let mut out = Vec::with_capacity(p.len() + 1);
    for s in &stack {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    // The root, or a trailing slash kept (Go keeps it, "/a/" is not "/a").
    if out.is_empty() || p.ends_with(b"/") {
        out.push(b'/');
    }
    Cow::Owned(out)
}

fn is_clean(p: &[u8]) -> bool {
    if p.first() != Some(&b'/') {
        return false;
    }
    // Every element after a '/' must be non-empty and not "." or "..", except
    // a final empty element (trailing slash).
    let mut segs = p[1..].split(|&b| b == b'/').peekable();
    while let Some(s) = segs.next() {
        let last = segs.peek().is_none();
        match s {
            b"" if last => {}
            b"" | b"." | b".." => return false,
            _ => {}
        }
    }
    true
}

/// Escapes a cleaned path for a `Location` header.
pub fn escape_path(p: &[u8], out: &mut Vec<u8>) {
    for &b in p {
        if b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b) {
            out.push(b);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// What the `Connection` header of a response says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnHeader {
    /// HTTP/1.1 keep-alive: the default, nothing to say.
    None,
    Close,
    /// HTTP/1.0 client that asked to keep the connection.
    KeepAlive,
}

pub const CT_JSON: &str = "application/json";
pub const CT_TEXT: &str = "text/plain; charset=utf-8";
pub const CT_HTML: &str = "text/html; charset=utf-8";

pub struct Response<'a> {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub nosniff: bool,
    pub weight: Option<u32>,
    pub location: Option<&'a [u8]>,
    pub body: &'a [u8],
    /// `false` for HEAD: headers (Content-Length included) without the body.
    pub send_body: bool,
    pub conn: ConnHeader,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        400 => "Bad Request",
        404 => "Not Found",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Appends one response to `out`.
pub fn write_response(out: &mut Vec<u8>, http10: bool, r: &Response<'_>, date: &[u8]) {
    out.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    let _ = write!(out, "{} {}\r\n", r.status, reason(r.status));
    if let Some(ct) = r.content_type {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(ct.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if r.nosniff {
        out.extend_from_slice(b"X-Content-Type-Options: nosniff\r\n");
    }
    if let Some(w) = r.weight {
        let _ = write!(out, "X-Load-Balancing-Endpoint-Weight: {w}\r\n");
    }
    if let Some(loc) = r.location {
        out.extend_from_slice(b"Location: ");
        out.extend_from_slice(loc);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(date);
    let _ = write!(out, "\r\nContent-Length: {}\r\n", r.body.len());
    match r.conn {
        ConnHeader::None => {}
        ConnHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    if r.send_body {
        out.extend_from_slice(r.body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Head<'_> {
        parse_head(s.as_bytes())
    }

    #[test]
    fn parses_a_simple_get() {
        let Head::Request(r) = req("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") else {
            panic!("not parsed");
        };
        assert_eq!(
            (r.method, r.target, r.http10, r.keep_alive),
            ("GET", "/healthz", false, true)
        );
        assert_eq!(r.body, BodyLen::Known(0));
        assert_eq!(r.head_len, 34);
    }

    #[test]
    fn partial_and_garbage() {
        assert!(matches!(req("GET /healthz HTTP/1.1\r\nHo"), Head::Partial));
        assert!(matches!(
            req("\x00\x01garbage\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
        assert!(matches!(
            req("GET /healthz HTTP/2.0\r\n\r\n"),
            Head::Reject(Reject::VersionNotSupported)
        ));
        assert!(matches!(
            req("GET /healthz HTTX/1.1\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
        assert!(
            matches!(
                req("GET /healthz HTTP/1.1\r\n\r\n"),
                Head::Reject(Reject::BadRequest(_))
            ),
            "no Host"
        );
        assert!(matches!(
            req("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
        assert!(matches!(
            req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
        assert!(matches!(
            req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
        assert!(matches!(
            req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Head::Reject(Reject::BadRequest(_))
        ));
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |s: &str| match parse_head(s.as_bytes()) {
            Head::Request(r) => r.keep_alive,
            other => panic!("{other:?}"),
        };
        assert!(!ka("GET / HTTP/1.0\r\n\r\n"));
        assert!(ka("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!ka(
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n"
        ));
        assert!(ka("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    }

    #[test]
    fn targets() {
        let p = |t: &str| match parse_target("GET", t) {
            Ok(Target::Path { path, query }) => (
                String::from_utf8_lossy(&path).into_owned(),
                query.to_string(),
            ),
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(p("/healthz?a=b"), ("/healthz".into(), "a=b".into()));
        assert_eq!(p("/health%7a"), ("/healthz".into(), String::new()));
        assert_eq!(
            p("http://node:10256/livez"),
            ("/livez".into(), String::new())
        );
        assert_eq!(p("http://node:10256"), (String::new(), String::new()));
        assert_eq!(parse_target("OPTIONS", "*"), Ok(Target::Asterisk));
        assert_eq!(parse_target("CONNECT", "a:1"), Ok(Target::Authority));
        assert!(parse_target("GET", "/bad%zz").is_err());
        assert!(parse_target("GET", "nopath").is_err());
    }

    #[test]
    fn cleaning_like_go() {
        let c = |p: &str| String::from_utf8_lossy(&clean_path(p.as_bytes())).into_owned();
        assert_eq!(c("/healthz"), "/healthz");
        assert_eq!(c("/healthz/"), "/healthz/");
        assert_eq!(c("//healthz"), "/healthz");
        assert_eq!(c("/a/../healthz"), "/healthz");
        assert_eq!(c("/./livez"), "/livez");
        assert_eq!(c("/.."), "/");
        assert_eq!(c(""), "/");
        assert_eq!(c("healthz"), "/healthz");
        assert_eq!(c("/a/b/.."), "/a");
        assert_eq!(c("/a/b/../"), "/a/");
        assert!(matches!(clean_path(b"/service/ns/name"), Cow::Borrowed(_)));
    }

    #[test]
    fn response_bytes() {
        let mut out = Vec::new();
        write_response(
            &mut out,
            false,
            &Response {
                status: 503,
                content_type: Some(CT_JSON),
                nosniff: true,
                weight: Some(0),
                location: None,
                body: b"{}",
                send_body: true,
                conn: ConnHeader::Close,
            },
            b"Thu, 01 Jan 1970 00:00:00 GMT",
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: 0\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        );
    }
}
