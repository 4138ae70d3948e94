//! The HTTP health probe against real servers, and the MAC a probe's
//! connection resolves, inside network namespaces the tests create
//! (198.18.0.0/15 only; everything goes with the guards).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use sluice_lb::health::probe::{probe, Outcome};
use sluice_lb::neighbours;
use sluice_tests::Netns;

mod control_support;

/// What a test server does with a connection.
#[derive(Clone, Copy)]
enum Server {
    Answer(&'static str),
    /// Reads the request and never answers.
    Hang,
    /// Closes at once.
    Close,
}

/// Serves `what` on `listener`, sending each request's head to `seen`.
async fn serve(listener: TcpListener, what: Server, seen: mpsc::UnboundedSender<String>) {
    let mut held = Vec::new();
    while let Ok((mut s, _)) = listener.accept().await {
        if let Server::Close = what {
            continue;
        }
        let mut buf = vec![0u8; 4096];
        let mut len = 0;
        while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
            match s.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
        }
        let _ = seen.send(String::from_utf8_lossy(&buf[..len]).into_owned());
        match what {
            Server::Answer(a) => {
                let _ = s.write_all(a.as_bytes()).await;
            }
            // Keep the connection open, unanswered.
            Server::Hang => held.push(s),
            Server::Close => {}
        }
    }
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
const GARBAGE: &str = "SSH-2.0-OpenSSH_9.2\r\n";
const TIMEOUT: Duration = Duration::from_secs(1);

#[test]
fn the_probe_passes_only_on_a_200_within_its_timeout() {
    // spec: H4 (a probe that fails counts towards the unhealthy threshold)
    let ns = Netns::new("lbprobe").expect("namespace");
    ns.addr_add("lo", "198.18.40.1/32").expect("address");
    let outcomes = ns
        .in_ns(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 40, 1));
                let (tx, mut seen) = mpsc::unbounded_channel();
                let mut addrs = Vec::new();
                for what in [
                    Server::Answer(OK),
                    Server::Answer(UNAVAILABLE),
                    Server::Hang,
                    Server::Answer(GARBAGE),
                    Server::Close,
                ] {
                    let l = TcpListener::bind(SocketAddr::new(ip, 0))
                        .await
                        .expect("bind");
                    addrs.push(l.local_addr().expect("addr"));
                    tokio::spawn(serve(l, what, tx.clone()));
                }
                // A port nobody listens on: bound, then closed.
                let gone = TcpListener::bind(SocketAddr::new(ip, 0))
                    .await
                    .expect("bind");
                addrs.push(gone.local_addr().expect("addr"));
                drop(gone);
                let mut out = Vec::new();
                for a in &addrs {
                    out.push(probe(*a, "/healthz", TIMEOUT).await);
                }
                let first = seen.recv().await.unwrap_or_default();
                (out, first)
            })
        })
        .expect("in the namespace");
    let (o, request) = outcomes;
    assert!(
        request.starts_with("GET /healthz HTTP/1.1\r\n"),
        "{request:?}"
    );
    assert!(request.contains("\r\nHost: 198.18.40.1:"), "{request:?}");
    assert_eq!(o[0], Outcome::Healthy);
    assert_eq!(o[1], Outcome::Status(503));
    assert_eq!(
        o[2],
        Outcome::TimedOut,
        "an unanswered probe fails at its timeout"
    );
    assert!(matches!(o[3], Outcome::Garbage(_)), "{:?}", o[3]);
    assert!(
        matches!(o[4], Outcome::Garbage(_) | Outcome::Connect(_)),
        "{:?}",
        o[4]
    );
    assert!(matches!(o[5], Outcome::Connect(_)), "{:?}", o[5]);
    assert!(o.iter().skip(1).all(|x| !x.healthy()));
}

#[test]
fn a_probe_resolves_the_backend_s_mac_in_the_neighbour_table() {
    let control_support::Segment {
        lb,
        node: _node,
        node_mac: mac,
        health: listener,
        health_addr: backend,
    } = control_support::segment("lbmac", 41);
    let before = lb
        .in_ns(|| neighbours::read("lb0"))
        .expect("in the lb")
        .expect("read");
    assert!(
        !before.contains_key(&backend.ip()),
        "resolved before any probe"
    );
    let outcome = lb
        .in_ns(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let l = TcpListener::from_std(listener).expect("listener");
                let (tx, _seen) = mpsc::unbounded_channel();
                tokio::spawn(serve(l, Server::Answer(OK), tx));
                probe(backend, "/healthz", TIMEOUT).await
            })
        })
        .expect("in the lb");
    assert_eq!(outcome, Outcome::Healthy);
    let after = lb
        .in_ns(|| neighbours::read("lb0"))
        .expect("in the lb")
        .expect("read");
    assert_eq!(after.get(&backend.ip()), Some(&mac));
}
