//! A flood of silent connections does not lock clients out of the API
//! server. Before the pending budget, a server at the usual open-file limit
//! ran out of descriptors under a few thousand sockets that never spoke,
//! and kubectl (and the agents' Lease renewals) waited seconds behind them.
//!
//! The server runs under the usual soft limit, 1 024, as its hard limit too
//! (so it cannot raise it), and a bounded flood (1 600 sockets, 12 s) is
//! more than it can hold; probes are real TLS requests, each with a 5 s
//! bound, and every one must be answered. (The budget is then 384; a client
//! is shed only if it says nothing for as long as the flood takes to open
//! 384 more connections.)

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{ok, Server};

const NOFILE: u64 = 1024;
const FLOOD_THREADS: usize = 4;
const PER_THREAD: usize = 400;
const FLOOD_FOR: Duration = Duration::from_secs(12);
const MAX_PROBES: usize = 60;
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counts {
    connects: AtomicU64,
    closed_by_server: AtomicU64,
    open: AtomicU64,
    peak_open: AtomicU64,
}

/// Holds `PER_THREAD` silent sockets, replacing those the server closes,
/// until `stop`.
fn flood_worker(addr: SocketAddr, stop: &AtomicBool, counts: &Counts) {
    let mut socks: Vec<TcpStream> = Vec::with_capacity(PER_THREAD);
    let mut buf = [0u8; 16];
    while !stop.load(Relaxed) {
        socks.retain(|s| match s.peek(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => true,
            _ => {
                counts.closed_by_server.fetch_add(1, Relaxed);
                counts.open.fetch_sub(1, Relaxed);
                false
            }
        });
        while socks.len() < PER_THREAD && !stop.load(Relaxed) {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    socks.push(s);
                    counts.connects.fetch_add(1, Relaxed);
                    let now = counts.open.fetch_add(1, Relaxed) + 1;
                    counts.peak_open.fetch_max(now, Relaxed);
                }
                // A full accept queue drops the SYN: try again next sweep.
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    counts.open.fetch_sub(socks.len() as u64, Relaxed);
}

/// One request over its own TLS connection, all within `PROBE_TIMEOUT`
/// per step; the status line, or why there was none.
fn probe(s: &Server, token: &str) -> Result<String, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], s.port).into();
    let tcp =
        TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = tcp.set_write_timeout(Some(PROBE_TIMEOUT));
    let mut tls = s.tls_over(tcp, Some("http/1.1"));
    // The handshake on its own, so that a connection shed before it (see
    // `probe_retrying`) is told apart from a request that failed.
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("handshake: {e}"))?;
    }
    let req = format!(
        "GET /readyz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    tls.read_to_end(&mut out)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&out);
    Ok(text.lines().next().unwrap_or("").to_string())
}

/// A probe as a client library makes it: a connection reset before the
/// request went out (in the handshake or its write) is retried, up to twice, as
/// client-go and kube-rs retry an idempotent GET whose connection broke
/// before any answer. Under the flood a probe thread descheduled between
/// its connect and its ClientHello looks like one more silent connection
/// and may be shed; being locked out is failing three times in a row, or
/// any failure once the request was sent.
fn probe_retrying(s: &Server, token: &str) -> Result<String, String> {
    let mut last = Err(String::new());
    for _ in 0..3 {
        last = probe(s, token);
        match &last {
            Err(e)
                if e.starts_with("connect:")
                    || e.starts_with("handshake:")
                    || e.starts_with("write:") =>
            {
                continue
            }
            _ => return last,
        }
    }
    last
}

#[test]
fn a_flood_of_silent_connections_does_not_lock_clients_out() {
    // The flood's own sockets need more than the usual 1 024.
    let have = rlimit::increase_nofile_limit(u64::MAX).expect("RLIMIT_NOFILE");
    assert!(
        have >= (FLOOD_THREADS * PER_THREAD) as u64 + 256,
        "open-file limit {have} too low for the flood"
    );
    let s = Server::start_limited("flood", NOFILE);
    let token = s.admin_token();
    assert_eq!(
        probe(&s, &token).as_deref(),
        Ok("HTTP/1.1 200 OK"),
        "before the flood"
    );

    let addr: SocketAddr = ([127, 0, 0, 1], s.port).into();
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let workers: Vec<_> = (0..FLOOD_THREADS)
        .map(|_| {
            let (stop, counts) = (stop.clone(), counts.clone());
            std::thread::spawn(move || flood_worker(addr, &stop, &counts))
        })
        .collect();
    // Stop the flood also when an assertion below fails.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }
    let stopper = Stop(stop.clone());

    let started = Instant::now();
    let mut answers = Vec::new();
    while started.elapsed() < FLOOD_FOR && answers.len() < MAX_PROBES {
        std::thread::sleep(Duration::from_millis(200));
        answers.push(probe_retrying(&s, &token));
    }
    drop(stopper);
    for w in workers {
        w.join().expect("flood worker");
    }
    let (connects, closed, peak) = (
        counts.connects.load(Relaxed),
        counts.closed_by_server.load(Relaxed),
        counts.peak_open.load(Relaxed),
    );
    let summary =
        format!("flood: {connects} connects, {closed} closed by the server, peak {peak} open");
    let failed: Vec<_> = answers
        .iter()
        .filter(|a| a.as_deref() != Ok("HTTP/1.1 200 OK"))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} probes not answered 200 during the flood ({summary}): {failed:?}\n{}",
        failed.len(),
        answers.len(),
        s.log()
    );
    assert!(answers.len() >= 10, "only {} probes ran", answers.len());
    // The flood did press: far more sockets than the server may hold, and
    // the server closed silent ones to make room.
    assert!(peak > NOFILE, "{summary}");
    assert!(closed > 0, "{summary}");
    assert!(
        s.log().contains("pending connections over budget"),
        "no word of shedding in the log"
    );
    // kubectl too, after the flood.
    ok(&s, "admin", &["get", "namespaces"]);
}
