//! A bounded HTTP/1.1 GET from inside a namespace: what a load balancer's
//! health checker does against a node.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use crate::netns::in_ns;

const TIMEOUT: Duration = Duration::from_secs(2);
const MAX_ANSWER: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(&self.body).with_context(|| format!("body is not JSON: {}", self.body))
    }
}

/// `GET path` against `addr` from namespace `ns`, one request per connection.
pub fn http_get(ns: &str, addr: SocketAddr, path: &str) -> Result<HttpAnswer> {
    let path = path.to_string();
    in_ns(ns, move || -> Result<HttpAnswer> {
        let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)
            .with_context(|| format!("connecting to {addr}"))?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.set_write_timeout(Some(TIMEOUT))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sluice-tests\r\nConnection: close\r\n\r\n"
        )?;
        let mut raw = Vec::new();
        s.take(MAX_ANSWER as u64)
            .read_to_end(&mut raw)
            .with_context(|| format!("reading the answer from {addr}"))?;
        parse(&raw)
    })?
}

fn parse(raw: &[u8]) -> Result<HttpAnswer> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of headers in {text:?}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line {status_line:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(HttpAnswer {
        status,
        headers,
        body: body.to_string(),
    })
}
