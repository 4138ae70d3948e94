//! Pods the agent runs itself, end to end: readiness probes steering the
//! packet path and the `Local` health check, and graceful eviction (spec H3,
//! P5, E1, E6).
//!
//! The pods run `sluice-whoami` (this crate's binary) inside namespaces the
//! agent makes; an exec readiness probe checks a file the test adds and
//! removes, every second.

use std::fs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use sluice_tests::{
    http_get, tcp_request, Cluster, ClusterSpec, EndpointSpec, Engine, Family, Policy, ServiceSpec,
    TcpConn, TcpOutcome, Traffic,
};

const WHOAMI: &str = env!("CARGO_BIN_EXE_sluice-whoami");
const HC_PORT: u16 = 30_124;
/// The bound within which a readiness change must reach the health check:
/// one probe period (1 s) plus a sync poll, with room for a loaded machine.
const FOLLOW_BOUND: Duration = Duration::from_secs(15);

/// Files the readiness probes look for; removed when the test ends.
struct ReadyFiles(PathBuf);

impl ReadyFiles {
    fn new(tag: &str) -> ReadyFiles {
        let dir = std::env::temp_dir().join(format!("sluice-ready-{tag}-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("ready dir");
        ReadyFiles(dir)
    }
    fn path(&self, pod: &str) -> PathBuf {
        self.0.join(pod)
    }
    fn set(&self, pod: &str, ready: bool) {
        if ready {
            fs::write(self.path(pod), b"ok").expect("ready file");
        } else {
            let _ = fs::remove_file(self.path(pod));
        }
    }
}

impl Drop for ReadyFiles {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn whoami(pod: &str) -> Vec<&str> {
    vec![
        WHOAMI, "--name", pod, "--ip", "{ip4}", "--ip", "{ip6}", "--tcp", "8080",
    ]
}

fn spec(files: &ReadyFiles, pods: &[&str]) -> ClusterSpec {
    let mut web = ServiceSpec::lb("web", 1)
        .policy(Policy::Local)
        .tcp("http", 80, 8080)
        .health_check_node_port(HC_PORT);
    let mut c = ClusterSpec::new(1);
    for p in pods {
        let cmd = whoami(p);
        c = c.agent_pod(p, 1, &cmd, &files.path(p));
        web = web.endpoint(EndpointSpec::ready(p));
    }
    c.service(web)
}

/// Poll the node's health check until `want(status, localEndpoints)` holds,
/// or fail after [`FOLLOW_BOUND`].
fn wait_health(c: &Cluster, what: &str, want: impl Fn(u16, u64) -> bool) -> Duration {
    let addr = SocketAddr::new(Family::V4.node_ip(1), HC_PORT);
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < FOLLOW_BOUND {
        if let Ok(a) = http_get(c.client_ns(), addr, "/") {
            let n = a
                .json()
                .ok()
                .and_then(|j| j["localEndpoints"].as_u64())
                .unwrap_or(u64::MAX);
            if want(a.status, n) {
                return start.elapsed();
            }
            last = Some((a.status, n));
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "health check did not reach {what} within {FOLLOW_BOUND:?} (last: {last:?})\n{}",
        c.agent_log(1)
    );
}

fn answers_from(c: &Cluster, vip: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| match tcp_request(c.client_ns(), vip).expect("client") {
            TcpOutcome::Reply { reply, .. } => reply.pod,
            other => panic!("VIP {vip}: {other:?}\n{}", c.agent_log(1)),
        })
        .collect()
}

#[test]
fn readiness_flips_reach_the_health_check_while_traffic_flows() {
    // spec: H3, P5 — pods' readiness drives the Local check and the maps.
    let files = ReadyFiles::new("flip");
    files.set("web-1", true);
    files.set("web-2", true);
    let c = Cluster::start("rdy", Engine::Emulated, spec(&files, &["web-1", "web-2"]))
        .expect("cluster");
    wait_health(&c, "two ready local endpoints", |s, n| s == 200 && n == 2);

    let vip = c.vip("web", Family::V4, 80).expect("vip");
    let mut held = match TcpConn::connect(c.client_ns(), vip).expect("client") {
        Ok(conn) => conn,
        Err(e) => panic!("connect: {e:?}"),
    };
    let held_pod = held.request().expect("first answer").pod;
    let traffic = Traffic::start(c.client_ns(), vip);

    // web-1 fails its probe: one local endpoint left, still healthy.
    files.set("web-1", false);
    let took = wait_health(&c, "one ready local endpoint", |s, n| s == 200 && n == 1);
    eprintln!("readiness → health check: {took:?}");
    let pods = answers_from(&c, vip, 10);
    assert!(
        pods.iter().all(|p| p == "web-2"),
        "new connections avoid the unready pod: {pods:?}"
    );
    // An established connection keeps its endpoint, whatever its readiness.
    assert_eq!(
        held.request().expect("held connection still answers").pod,
        held_pod
    );

    // Back: both again.
    files.set("web-1", true);
    wait_health(&c, "two ready local endpoints again", |s, n| {
        s == 200 && n == 2
    });
    let (ok, failed, errors) = traffic.finish();
    assert!(ok > 0, "traffic flowed");
    assert_eq!(
        failed, 0,
        "no connection failed while a pod was ready: {errors:?}"
    );

    // Neither ready: the check fails (H3) and the VIP resets (P6).
    files.set("web-1", false);
    files.set("web-2", false);
    wait_health(&c, "no ready local endpoint", |s, n| s == 503 && n == 0);
}

#[test]
fn a_drain_evicts_gracefully_and_fails_the_check_at_once() {
    // spec: E1, E6, H3 — eviction marks endpoints terminating before SIGTERM.
    let files = ReadyFiles::new("drain");
    files.set("web-1", true);
    let mut c = Cluster::start("drn", Engine::Emulated, spec(&files, &["web-1"])).expect("cluster");
    wait_health(&c, "one ready local endpoint", |s, n| s == 200 && n == 1);
    let vip = c.vip("web", Family::V4, 80).expect("vip");
    assert_eq!(answers_from(&c, vip, 3), ["web-1"; 3]);

    c.update(|s| {
        s.node_drains.insert(1, "UserDrain".into());
    })
    .expect("update");
    wait_health(&c, "the evicted pod out of the check", |s, n| {
        s == 503 && n == 0
    });

    // The pod ends on SIGTERM well before its grace; the drain reports it.
    let start = Instant::now();
    loop {
        let status = c.agent_status(1).expect("status");
        let drain = status.drain.clone().unwrap_or_default();
        if drain["finished"] == true {
            let pod = &drain["pods"][0];
            assert_eq!(pod["name"], "web-1", "{drain}");
            assert_eq!(pod["phase"], "exited-gracefully", "{drain}");
            assert_eq!(drain["totals"]["evicted"], 1, "{drain}");
            break;
        }
        assert!(
            start.elapsed() < FOLLOW_BOUND,
            "drain did not finish: {drain}\n{}",
            c.agent_log(1)
        );
        thread::sleep(Duration::from_millis(100));
    }
    // Nothing serves any more: a new connection is reset (P6).
    assert!(matches!(
        tcp_request(c.client_ns(), vip).expect("client"),
        TcpOutcome::Refused
    ));
}

#[test]
fn an_evict_annotation_evicts_one_pod_and_the_other_serves_on() {
    // spec: E1, E6, H3 — `sluice.dev/evict` on one pod: it leaves the check
    // and the VIP, the other pod keeps serving.
    let files = ReadyFiles::new("evict");
    files.set("web-1", true);
    files.set("web-2", true);
    let mut c = Cluster::start("evc", Engine::Emulated, spec(&files, &["web-1", "web-2"]))
        .expect("cluster");
    wait_health(&c, "two ready local endpoints", |s, n| s == 200 && n == 2);
    let vip = c.vip("web", Family::V4, 80).expect("vip");

    c.update(|s| {
        s.pod_evictions.insert("web-1".into(), "UserDrain".into());
    })
    .expect("update");
    wait_health(&c, "only web-2 in the check", |s, n| s == 200 && n == 1);
    let pods = answers_from(&c, vip, 10);
    assert!(
        pods.iter().all(|p| p == "web-2"),
        "new connections reach the remaining pod only: {pods:?}"
    );
    let status = c.agent_status(1).expect("status");
    assert!(status.synced && status.error.is_none(), "{status:?}");
}
