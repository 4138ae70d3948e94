//! The health servers over real sockets on loopback, ephemeral ports only.
//! Bounded loops and generous socket timeouts; no assertion depends on timing.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sluice_agent::health::{
    service_health_entries, Deadline, HealthConfig, HealthHandle, Limits, ListenerCounters,
    ListenerKind, ManualClock, ServiceHealthEntry, ShedReason, TO_BE_DELETED_TAINT,
};
use sluice_agent::state::{DesiredState, EndpointInfo, ServiceInfo, TrafficPolicy};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const SYNC_PERIOD: Duration = Duration::from_secs(1);

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn start_with(limits: Limits) -> (HealthHandle, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(t0()));
    let mut cfg = HealthConfig::new(SYNC_PERIOD).on_ip(LOOPBACK, 0);
    cfg.limits = limits;
    let h = HealthHandle::start(cfg, clock.clone()).expect("health servers start");
    (h, clock)
}

fn start() -> (HealthHandle, Arc<ManualClock>) {
    start_with(Limits::default())
}

fn node_addr(h: &HealthHandle) -> SocketAddr {
    h.node_addrs()[0]
}

/// A port free right now (the kernel may hand it out again; the window is tiny).
fn free_port() -> u16 {
    let l = TcpListener::bind((LOOPBACK, 0)).expect("bind ephemeral");
    l.local_addr().expect("local addr").port()
}

#[derive(Debug)]
struct Resp {
    version: String,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body_str()))
    }
    fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Client { s, buf: Vec::new() }
    }
    fn send(&mut self, raw: &[u8]) {
        self.s.write_all(raw).expect("write");
    }
    fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 4096];
        match self.s.read(&mut tmp) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => false,
            Err(e) => panic!("read: {e}"),
        }
    }
    /// `None` when the server closed without (another) answer.
    fn response(&mut self, head_request: bool) -> Option<Resp> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end - 4]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default().to_string();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .expect("status code");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let len = if head_request { 0 } else { len };
        while self.buf.len() < end + len {
            if !self.fill() {
                panic!("connection closed mid-body");
            }
        }
        let body = self.buf[end..end + len].to_vec();
        self.buf.drain(..end + len);
        Some(Resp {
            version,
            status,
            headers,
            body,
        })
    }
    fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: node\r\n\r\n").as_bytes());
        self.response(false).expect("an answer")
    }
    /// True once the server has closed the connection (EOF or reset).
    fn closed_by_server(&mut self) -> bool {
        loop {
            if !self.fill() {
                return true;
            }
        }
    }
}

fn get(addr: SocketAddr, path: &str) -> Resp {
    Client::connect(addr).get(path)
}

fn raw(addr: SocketAddr, req: &[u8], head_request: bool) -> Resp {
    let mut c = Client::connect(addr);
    c.send(req);
    c.response(head_request).expect("an answer")
}

fn assert_json_headers(r: &Resp) {
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert!(r.header("Date").is_some());
}

fn entry(ns: &str, name: &str, port: Option<u16>, n: u32) -> ServiceHealthEntry {
    ServiceHealthEntry {
        namespace: ns.into(),
        name: name.into(),
        port,
        local_endpoints: n,
    }
}

// spec: H1, H2 — the node answers on its health port from the agent's own
// state: 200 in sync, 503 once an update waits longer than the timeout, 200
// again when synced; JSON and headers as kube-proxy's.
#[test]
fn node_healthz_and_livez_follow_the_sync() {
    let (h, clock) = start();
    let a = node_addr(&h);
    for path in ["/healthz", "/livez"] {
        let r = get(a, path);
        assert_eq!(r.status, 200, "{path} while starting");
        assert_json_headers(&r);
        let v = r.json();
        assert_eq!(v["healthy"], true);
        assert_eq!(v["lastUpdated"], v["currentTime"]);
        assert_eq!(v["currentTime"], "2023-11-14T22:13:20Z");
    }
    assert_eq!(get(a, "/healthz").json()["nodeEligible"], true);
    assert!(get(a, "/livez").json().get("nodeEligible").is_none());

    h.record_synced();
    clock.advance(Duration::from_secs(5));
    h.record_queued();
    clock.advance(Duration::from_millis(1999));
    assert_eq!(
        get(a, "/healthz").status,
        200,
        "pending but younger than 2 × period"
    );
    clock.advance(Duration::from_millis(1));
    for path in ["/healthz", "/livez"] {
        let r = get(a, path);
        assert_eq!(r.status, 503, "{path} with a late sync");
        assert_json_headers(&r);
        let v = r.json();
        assert_eq!(v["healthy"], false);
        assert_eq!(v["lastUpdated"], "2023-11-14T22:13:20Z", "the last sync");
        assert_eq!(v["currentTime"], "2023-11-14T22:13:27Z");
    }
    assert!(!h.is_healthy());
    h.record_synced();
    assert_eq!(get(a, "/healthz").status, 200, "back in sync");
    assert_eq!(get(a, "/livez").status, 200);
    h.shutdown();
}

// spec: H2 — a node being deleted or tainted by the autoscaler fails /healthz;
// /livez ignores it.
#[test]
fn node_marked_for_deletion_fails_healthz_only() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    h.set_node_state(
        false,
        ["node.kubernetes.io/unschedulable", TO_BE_DELETED_TAINT],
    );
    let r = get(a, "/healthz");
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["nodeEligible"], false);
    assert_eq!(r.json()["healthy"], true);
    assert_eq!(get(a, "/livez").status, 200);

    h.set_node_state(false, ["node.kubernetes.io/unschedulable"]);
    assert_eq!(get(a, "/healthz").status, 200);
    h.set_node_state(true, []);
    assert_eq!(get(a, "/healthz").status, 503, "being deleted");
    assert_eq!(get(a, "/livez").status, 200);
    h.set_node_eligible(true);
    assert_eq!(get(a, "/healthz").status, 200);
}

fn ep(addr: &str, node: &str, ready: bool, serving: bool, terminating: bool) -> EndpointInfo {
    EndpointInfo {
        addr: addr.parse().expect("address"),
        node: Some(node.into()),
        ready,
        serving,
        terminating,
        ports: Default::default(),
    }
}

fn state_with(policy: TrafficPolicy, hcnp: Option<u16>, eps: Vec<EndpointInfo>) -> DesiredState {
    let mut s = DesiredState::default();
    s.services.insert(
        "shop/web".into(),
        ServiceInfo {
            key: "shop/web".into(),
            policy,
            affinity_timeout_s: None,
            health_check_node_port: hcnp,
            vips: vec!["203.0.113.7".parse().expect("vip")],
            ports: Vec::new(),
            endpoints: eps,
        },
    );
    s
}

// spec: H3 — Local: the Service's health-check port passes only with a local
// ready, non-terminating endpoint; every transition through the real server.
#[test]
fn local_service_health_through_transitions() {
    let (h, clock) = start();
    let port = free_port();
    let sa = SocketAddr::new(LOOPBACK, port);
    let cases: Vec<(&str, Vec<EndpointInfo>, u16, u32)> = vec![
        ("no endpoint", vec![], 503, 0),
        (
            "only on another node",
            vec![ep("10.1.0.5", "node-b", true, true, false)],
            503,
            0,
        ),
        (
            "ready",
            vec![ep("10.0.0.5", "node-a", true, true, false)],
            200,
            1,
        ),
        (
            "two ready",
            vec![
                ep("10.0.0.5", "node-a", true, true, false),
                ep("10.0.0.6", "node-a", true, true, false),
            ],
            200,
            2,
        ),
        (
            "failing readiness",
            vec![ep("10.0.0.5", "node-a", false, false, false)],
            503,
            0,
        ),
        (
            "terminating only",
            vec![ep("10.0.0.5", "node-a", false, true, true)],
            503,
            0,
        ),
        (
            "ready again",
            vec![ep("10.0.0.5", "node-a", true, true, false)],
            200,
            1,
        ),
    ];
    for (what, eps, code, n) in cases {
        let st = state_with(TrafficPolicy::Local, Some(port), eps);
        let rep = h.set_services(&service_health_entries(&st, "node-a"));
        assert!(rep.failed.is_empty(), "{what}: {rep:?}");
        let r = get(sa, "/healthz");
        assert_eq!(r.status, code, "{what}");
        assert_json_headers(&r);
        assert_eq!(
            r.header("X-Load-Balancing-Endpoint-Weight"),
            Some(n.to_string().as_str()),
            "{what}"
        );
        let v = r.json();
        assert_eq!(v["service"]["namespace"], "shop");
        assert_eq!(v["service"]["name"], "web");
        assert_eq!(v["localEndpoints"], n);
        assert_eq!(v["serviceProxyHealthy"], true);
    }
    // A late sync fails the Service too, endpoints or not.
    h.record_queued();
    clock.advance(Duration::from_secs(3));
    let r = get(sa, "/");
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["serviceProxyHealthy"], false);
    assert_eq!(r.json()["localEndpoints"], 1);
    h.record_synced();
    assert_eq!(get(sa, "/").status, 200);
    // The node being drained does not change the Service's own answer.
    h.set_node_eligible(false);
    assert_eq!(get(sa, "/").status, 200);
    let c = h.counters();
    assert_eq!(c.services.len(), 1);
    assert!(
        c.services[0].answered_200 >= 4 && c.services[0].answered_503 >= 4,
        "{c:?}"
    );
}

// spec: H2 — Cluster: no per-Service server; every node passes on the node
// port, with or without serving pods.
#[test]
fn cluster_service_uses_the_node_port() {
    let (h, _clock) = start();
    let port = free_port();
    let st = state_with(
        TrafficPolicy::Cluster,
        Some(port),
        vec![ep("10.0.0.5", "node-a", false, true, true)],
    );
    let entries = service_health_entries(&st, "node-a");
    assert!(entries.is_empty());
    let rep = h.set_services(&entries);
    assert!(rep.opened.is_empty());
    assert!(
        TcpStream::connect((LOOPBACK, port)).is_err(),
        "nothing listens on the Service's port"
    );
    assert_eq!(get(node_addr(&h), "/healthz").status, 200);
}

// spec: H3 — servers open and close as Services come and go; counts and
// names update in place.
#[test]
fn service_servers_appear_and_disappear() {
    let (h, _clock) = start();
    let (p1, p2) = (free_port(), free_port());
    let a1 = SocketAddr::new(LOOPBACK, p1);
    let a2 = SocketAddr::new(LOOPBACK, p2);
    let rep = h.set_services(&[
        entry("ns", "one", Some(p1), 1),
        entry("ns", "two", Some(p2), 0),
    ]);
    assert_eq!(rep.opened, vec![p1.min(p2), p1.max(p2)]);
    assert_eq!(h.service_addrs().len(), 2);
    assert_eq!(get(a1, "/x").status, 200);
    assert_eq!(get(a2, "/x").status, 503);

    // A keep-alive connection to the Service being removed is closed too.
    let mut held = Client::connect(a2);
    assert_eq!(held.get("/").status, 503);

    let rep = h.set_services(&[entry("ns", "one", Some(p1), 0)]);
    assert_eq!(rep.closed, vec![p2]);
    assert!(rep.opened.is_empty());
    assert_eq!(get(a1, "/").status, 503, "count updated in place");
    assert!(TcpStream::connect(a2).is_err(), "port {p2} closed");
    assert!(held.closed_by_server());

    // The port passes to another Service: same server, new name.
    h.set_services(&[entry("ns", "renamed", Some(p1), 3)]);
    let r = get(a1, "/");
    assert_eq!(r.json()["service"]["name"], "renamed");
    assert_eq!(r.header("X-Load-Balancing-Endpoint-Weight"), Some("3"));

    // Back again on the port just closed.
    let rep = h.set_services(&[
        entry("ns", "renamed", Some(p1), 3),
        entry("ns", "two", Some(p2), 2),
    ]);
    assert_eq!(rep.opened, vec![p2], "{rep:?}");
    assert_eq!(get(a2, "/").status, 200);

    // Everything gone.
    let rep = h.set_services(&[]);
    assert_eq!(rep.closed.len(), 2);
    assert!(TcpStream::connect(a1).is_err());
    assert!(h.service_addrs().is_empty());
}

#[test]
fn port_conflicts_are_reported_not_fatal() {
    let (h, _clock) = start();
    let taken = TcpListener::bind((LOOPBACK, 0)).expect("bind");
    let taken_port = taken.local_addr().expect("addr").port();
    let p = free_port();
    let node_port = node_addr(&h).port();
    let rep = h.set_services(&[
        entry("ns", "a", Some(p), 1),
        entry("ns", "b", Some(p), 1),
        entry("ns", "c", Some(taken_port), 1),
        entry("ns", "d", Some(node_port), 1),
    ]);
    assert_eq!(rep.opened, vec![p]);
    assert_eq!(rep.conflicts.len(), 2, "{rep:?}");
    assert_eq!(rep.failed.len(), 1, "{rep:?}");
    drop(taken);
    // Retried on the next update, as kube-proxy does.
    let rep = h.set_services(&[
        entry("ns", "a", Some(p), 1),
        entry("ns", "c", Some(taken_port), 1),
    ]);
    assert_eq!(rep.opened, vec![taken_port], "{rep:?}");
}

// spec: H3 — a Local Service without its own port is checked on the node port.
#[test]
fn portless_local_service_on_the_node_port() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    let st = state_with(
        TrafficPolicy::Local,
        None,
        vec![ep("10.0.0.5", "node-a", true, true, false)],
    );
    h.set_services(&service_health_entries(&st, "node-a"));
    let r = get(a, "/service/shop/web");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Load-Balancing-Endpoint-Weight"), Some("1"));
    assert_eq!(r.json()["localEndpoints"], 1);
    let st = state_with(
        TrafficPolicy::Local,
        None,
        vec![ep("10.0.0.5", "node-a", true, true, true)],
    );
    h.set_services(&service_health_entries(&st, "node-a"));
    assert_eq!(get(a, "/service/shop/web").status, 503);
    assert_eq!(get(a, "/service/shop/other").status, 404);
    h.set_services(&[]);
    assert_eq!(get(a, "/service/shop/web").status, 404);
}

// Paths and methods as on kube-proxy (Go's ServeMux on the node port, one
// handler for everything on a Service's port).
#[test]
fn other_paths_and_methods() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    let r = get(a, "/metrics");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.body_str(), "404 page not found\n");
    assert_eq!(get(a, "/healthz/").status, 404);
    assert_eq!(get(a, "/healthz?verbose=1").status, 200);
    assert_eq!(get(a, "/health%7A").status, 200, "percent-decoded like Go");

    let r = get(a, "//healthz?x=1");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/healthz?x=1"));
    let r = get(a, "/a/../livez");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/livez"));

    for m in ["POST", "PUT", "DELETE", "PATCH", "FOO"] {
        let r = raw(
            a,
            format!("{m} /healthz HTTP/1.1\r\nHost: n\r\nContent-Length: 0\r\n\r\n").as_bytes(),
            false,
        );
        assert_eq!(r.status, 200, "{m}");
        assert_eq!(r.json()["healthy"], true);
    }
    let r = raw(a, b"HEAD /healthz HTTP/1.1\r\nHost: n\r\n\r\n", true);
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert!(
        r.header("Content-Length")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
            > 0
    );
    let r = raw(a, b"OPTIONS * HTTP/1.1\r\nHost: n\r\n\r\n", false);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Length"), Some("0"));
    let r = raw(
        a,
        b"GET http://node/livez HTTP/1.1\r\nHost: n\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 200, "absolute form");

    // HTTP/1.0: answered in kind, then closed.
    let mut c = Client::connect(a);
    c.send(b"GET /healthz HTTP/1.0\r\n\r\n");
    let r = c.response(false).expect("answer");
    assert_eq!((r.version.as_str(), r.status), ("HTTP/1.0", 200));
    assert!(c.closed_by_server());

    // Service port: every path and method gets the Service's answer.
    let p = free_port();
    h.set_services(&[entry("ns", "svc", Some(p), 1)]);
    let sa = SocketAddr::new(LOOPBACK, p);
    for req in [
        &b"GET /anything/at/all HTTP/1.1\r\nHost: n\r\n\r\n"[..],
        b"POST //x/../y HTTP/1.1\r\nHost: n\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /healthz HTTP/1.1\r\nHost: n\r\n\r\n",
    ] {
        let r = raw(sa, req, false);
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["service"]["name"], "svc");
    }
    let c = h.counters();
    assert!(
        c.node.not_found_404 >= 2 && c.node.redirect_301 == 2 && c.node.healthz_200 >= 8,
        "{c:?}"
    );
}

// Malformed requests: 400 (or 431/505) and the connection closes; the server
// carries on.
#[test]
fn malformed_requests_are_refused_and_closed() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    let bad: [(&[u8], u16); 8] = [
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400), // a TLS hello
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400),                    // no Host
        (b"GET /healthz\r\n\r\n", 400),                               // HTTP/0.9
        (b"GET /healthz HTTP/2.0\r\nHost: n\r\n\r\n", 505),
        (b"GET  /healthz HTTP/1.1\r\nHost: n\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: n\r\nBad Header\r\n\r\n", 400),
        (b"POST /healthz HTTP/1.1\r\nHost: n\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"GET nopath HTTP/1.1\r\nHost: n\r\n\r\n", 400),
    ];
    for (req, code) in bad {
        let mut c = Client::connect(a);
        c.send(req);
        let r = c.response(false).expect("an answer");
        assert_eq!(r.status, code, "{:?}", String::from_utf8_lossy(req));
        assert_eq!(r.header("Connection"), Some("close"));
        assert!(
            c.closed_by_server(),
            "closed after {:?}",
            String::from_utf8_lossy(req)
        );
    }
    // A head larger than the limit.
    let mut c = Client::connect(a);
    let big = format!(
        "GET /healthz HTTP/1.1\r\nHost: n\r\nX-Big: {}\r\n\r\n",
        "a".repeat(10_000)
    );
    c.send(big.as_bytes());
    assert_eq!(c.response(false).expect("an answer").status, 431);
    assert!(c.closed_by_server());
    assert_eq!(get(a, "/healthz").status, 200);
    assert!(h.counters().node.rejected >= 9);
}

// A slow or stalled client holds its own connection only: others are answered
// at once, and the stalled one is cut at the request deadline.
#[test]
fn slow_clients_do_not_block_others() {
    let (h, _clock) = start_with(Limits {
        request_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let a = node_addr(&h);
    let mut slow: Vec<Client> = (0..50)
        .map(|i| {
            let mut c = Client::connect(a);
            c.send(&b"GET /healthz HTTP/1.1\r\nHo"[..(i % 20) + 1]);
            c
        })
        .collect();
    for _ in 0..20 {
        assert_eq!(get(a, "/healthz").status, 200);
    }
    // Byte-by-byte is fine as long as the head completes in time.
    let mut c = Client::connect(a);
    for b in b"GET /livez HTTP/1.1\r\nHost: n\r\n\r\n" {
        c.send(&[*b]);
    }
    assert_eq!(c.response(false).expect("answer").status, 200);
    // The stalled ones are closed by the server, not left hanging.
    for c in &mut slow {
        assert!(c.closed_by_server());
    }
    let l = node_listener(&h);
    assert!(l.timed_out(Deadline::Head) >= 50, "{l:?}");
}

// Keep-alive: many requests on one connection, sequential and pipelined;
// small bodies are skipped without breaking the framing.
#[test]
fn keep_alive_and_pipelining() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    let mut c = Client::connect(a);
    for i in 0..2000 {
        let path = if i % 2 == 0 { "/healthz" } else { "/livez" };
        let r = c.get(path);
        assert_eq!(r.status, 200);
        assert!(r.header("Connection").is_none());
    }
    let mut batch = Vec::new();
    for _ in 0..100 {
        batch.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: n\r\n\r\n");
        batch.extend_from_slice(
            b"POST /livez HTTP/1.1\r\nHost: n\r\nContent-Length: 11\r\n\r\nhello world",
        );
    }
    c.send(&batch);
    for _ in 0..200 {
        assert_eq!(c.response(false).expect("pipelined answer").status, 200);
    }
    // A body sent after the head, in pieces, is skipped too.
    c.send(b"POST /healthz HTTP/1.1\r\nHost: n\r\nContent-Length: 6000\r\n\r\n");
    c.send(&[b'x'; 3000]);
    c.send(&[b'y'; 3000]);
    assert_eq!(c.get("/livez").status, 200, "connection still in step");
    // HTTP/1.0 that asks for keep-alive gets it.
    let mut c10 = Client::connect(a);
    for _ in 0..3 {
        c10.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c10.response(false).expect("answer");
        assert_eq!(r.header("Connection"), Some("keep-alive"));
    }
    // A large body is not read: answered, then closed.
    let mut big = Client::connect(a);
    big.send(b"POST /healthz HTTP/1.1\r\nHost: n\r\nContent-Length: 10000000\r\n\r\n");
    let r = big.response(false).expect("answer");
    assert_eq!((r.status, r.header("Connection")), (200, Some("close")));
    assert!(h.counters().node.healthz_200 >= 1000);
}

// spec: H1, H4 — a full budget drops the connection that has waited longest
// for a request, not the newcomer: whoever opened sockets first cannot lock
// the load balancer's probes out.
#[test]
fn a_full_budget_sheds_the_longest_waiting_connection() {
    let (h, _clock) = start_with(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let a = node_addr(&h);
    let mut c1 = Client::connect(a);
    assert_eq!(c1.get("/healthz").status, 200);
    let mut c2 = Client::connect(a);
    assert_eq!(c2.get("/healthz").status, 200);
    let mut c3 = Client::connect(a);
    assert_eq!(c3.get("/healthz").status, 200, "the newcomer is served");
    assert!(c1.closed_by_server(), "the longest idle one gave way");
    assert_eq!(c2.get("/livez").status, 200);
    assert_eq!(c3.get("/livez").status, 200);
    let l = node_listener(&h);
    assert_eq!((l.shed(ShedReason::Idle), l.refused), (1, 0), "{l:?}");
}

// Shutdown releases every port before it returns.
#[test]
fn shutdown_releases_ports() {
    let (h, _clock) = start();
    let a = node_addr(&h);
    let p = free_port();
    h.set_services(&[entry("ns", "s", Some(p), 1)]);
    assert_eq!(get(SocketAddr::new(LOOPBACK, p), "/").status, 200);
    h.shutdown();
    assert!(TcpStream::connect(a).is_err());
    TcpListener::bind(a).expect("node port free again");
    TcpListener::bind((LOOPBACK, p)).expect("service port free again");
}

// spec: H1, H4 — slowloris sockets (a head that never completes) cannot
// hold a budget either, however long the head deadline: each probe takes the
// place of the oldest of them.
#[test]
fn slowloris_connections_give_way_to_probes() {
    let (h, _clock) = start_with(Limits {
        max_connections: 4,
        request_timeout: Duration::from_secs(3600),
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    });
    let a = node_addr(&h);
    let mut slow: Vec<Client> = (0..4)
        .map(|_| {
            let mut c = Client::connect(a);
            c.send(b"GET /healthz HTTP/1.1\r\nX-Slow: ");
            c
        })
        .collect();
    // The probes stay open, so every one of them needs room: each takes the
    // place of the oldest waiting connection, a slowloris every time (a
    // probe waits from its answer on, later than any slowloris' accept).
    let mut probes: Vec<Client> = Vec::new();
    for _ in 0..4 {
        let mut c = Client::connect(a);
        assert_eq!(c.get("/healthz").status, 200);
        probes.push(c);
    }
    for c in &mut slow {
        assert!(c.closed_by_server());
    }
    let l = node_listener(&h);
    assert_eq!((l.shed_total(), l.refused, l.open), (4, 0, 4), "{l:?}");
}

// spec: H1, H3 — every listener has a budget of its own: connections held on
// the node port take no room from a Service's port, and the other way round.
#[test]
fn each_listener_has_its_own_budget() {
    let (h, _clock) = start_with(Limits {
        max_connections: 4,
        ..Limits::default()
    });
    let node = node_addr(&h);
    let port = free_port();
    h.set_services(&[entry("ns", "s", Some(port), 1)]);
    let svc = SocketAddr::new(LOOPBACK, port);
    let mut held: Vec<Client> = Vec::new();
    for a in [node, svc] {
        for _ in 0..4 {
            let mut c = Client::connect(a);
            assert_eq!(c.get("/healthz").status, 200);
            held.push(c);
        }
    }
    // Eight open, four per listener: nobody had to give way.
    for c in &mut held {
        assert_eq!(c.get("/livez").status, 200, "still open");
    }
    let counters = h.counters();
    for kind_port in [
        (ListenerKind::Node, node.port()),
        (ListenerKind::Service, port),
    ] {
        let l = counters
            .listener(kind_port.0, kind_port.1)
            .expect("listener");
        assert_eq!((l.open, l.accepted, l.shed_total()), (4, 4, 0), "{l:?}");
    }
}

fn node_listener(h: &HealthHandle) -> ListenerCounters {
    let port = node_addr(h).port();
    h.counters()
        .listener(ListenerKind::Node, port)
        .cloned()
        .expect("node listener counters")
}
