//! The HTTP health probe: a real HTTP/1.1 `GET path` over TCP, one
//! connection per probe, as GCE's checkers send it. Success is status 200
//! (any 200: GCE does not read the body unless told to) within the
//! timeout; anything else fails, and the reason is kept for logs.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The status line must come within this many bytes.
const MAX_STATUS_LINE: usize = 1024;

/// How a probe ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Status 200.
    Healthy,
    /// Another status.
    Status(u16),
    /// No answer (connect, write or status line) within the timeout.
    TimedOut,
    /// The connection failed (refused, unreachable, reset).
    Connect(String),
    /// Something that is not an HTTP status line, or the peer closed first.
    Garbage(String),
}

impl Outcome {
    pub fn healthy(&self) -> bool {
        *self == Outcome::Healthy
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Healthy => write!(f, "200"),
            Outcome::Status(s) => write!(f, "status {s}"),
            Outcome::TimedOut => write!(f, "timed out"),
            Outcome::Connect(e) => write!(f, "connect: {e}"),
            Outcome::Garbage(e) => write!(f, "not HTTP: {e}"),
        }
    }
}

/// The request a probe sends.
pub fn request(addr: SocketAddr, path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sluice-lb/{}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The status code of an answer's first line, once it is complete:
/// `Ok(None)` means more bytes are needed.
pub fn status_of(buf: &[u8]) -> Result<Option<u16>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() >= MAX_STATUS_LINE {
            return Err(format!("no status line in {MAX_STATUS_LINE} bytes"));
        }
        // A proper status line is `HTTP/1.x NNN`: refuse early what cannot
        // become one.
        let n = buf.len().min(5);
        if buf[..n] != b"HTTP/"[..n] {
            return Err(format!("{:?}", String::from_utf8_lossy(buf)));
        }
        return Ok(None);
    };
    let line = &buf[..end];
    let text = std::str::from_utf8(line).map_err(|_| "status line is not UTF-8".to_string())?;
    let mut parts = text.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let code = parts.next().unwrap_or("");
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") || code.len() != 3 {
        return Err(format!("{text:?}"));
    }
    code.parse::<u16>()
        .ok()
        .filter(|c| (100..=599).contains(c))
        .map(Some)
        .ok_or_else(|| format!("{text:?}"))
}

/// Probes `addr` with `GET path`, all of it within `timeout`.
pub async fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> Outcome {
    match tokio::time::timeout(timeout, exchange(addr, path)).await {
        Ok(o) => o,
        Err(_) => Outcome::TimedOut,
    }
}

async fn exchange(addr: SocketAddr, path: &str) -> Outcome {
    let mut sock = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) => return Outcome::Connect(e.to_string()),
    };
    if let Err(e) = sock.write_all(request(addr, path).as_bytes()).await {
        return Outcome::Connect(e.to_string());
    }
    let mut buf = vec![0u8; MAX_STATUS_LINE];
    let mut len = 0;
    loop {
        let n = match sock.read(&mut buf[len..]).await {
            Ok(0) => return Outcome::Garbage("closed before a status line".to_string()),
            Ok(n) => n,
            Err(e) => return Outcome::Connect(e.to_string()),
        };
        len += n;
        match status_of(&buf[..len]) {
            Ok(None) => continue,
            Ok(Some(200)) => return Outcome::Healthy,
            Ok(Some(s)) => return Outcome::Status(s),
            Err(e) => return Outcome::Garbage(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_is_read_as_soon_as_it_is_whole() {
        assert_eq!(status_of(b"HTTP/1.1 2"), Ok(None));
        assert_eq!(status_of(b"HTT"), Ok(None));
        assert_eq!(status_of(b"HTTP/1.1 200 OK\r\n"), Ok(Some(200)));
        assert_eq!(status_of(b"HTTP/1.0 503 x\r\nA: b\r\n"), Ok(Some(503)));
        assert_eq!(status_of(b"HTTP/1.1 204\r\n"), Ok(Some(204)));
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n"[..],
            b"HTTP/2 200\r\n",
            b"HTTP/1.1 20x OK\r\n",
            b"HTTP/1.1 999 OK\r\n",
            b"hello",
        ] {
            assert!(
                status_of(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(status_of(&[b'H'; 5]).is_err());
        let long = [b"HTTP/1.1 200 ".as_slice(), &[b'x'; MAX_STATUS_LINE]].concat();
        assert!(status_of(&long).is_err(), "a status line never ending");
    }

    #[test]
    fn the_request_is_a_plain_get_that_closes() {
        let r = request("198.18.0.2:10256".parse().expect("addr"), "/healthz");
        assert!(r.starts_with("GET /healthz HTTP/1.1\r\nHost: 198.18.0.2:10256\r\n"));
        assert!(r.ends_with("Connection: close\r\n\r\n"));
    }
}
