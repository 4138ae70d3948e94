//! An agent killed with `kill -9` and started again keeps every established
//! connection: the kernel engine's program stays attached through pinned
//! TCX links and its conntrack lives in pinned maps, so packets are
//! translated while no agent runs, and the new agent adopts maps, links and
//! pod links in place.
//!
//! Only the kernel engine is tested. The emulated engine cannot pass this by
//! design: its relay (the thread that runs the program and moves every
//! frame) and its conntrack live in the agent's process, so `kill -9` stops
//! the node's load-balanced traffic and forgets every translation; the next
//! agent gives `nic0` back and starts over. That is the expected difference
//! between the engines, not a defect of this test.
//!
//! Needs root, `target/<profile>/sluice-agent` and the BPF object
//! (`cargo xtask build-ebpf --release`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sluice_tests::{
    tcp_request, AgentStatus, Cluster, ClusterSpec, EndpointSpec, Engine, Family, Policy,
    ServiceSpec, TcpConn, TcpOutcome, Traffic,
};

#[path = "../../agent/tests/common/manifests.rs"]
#[allow(dead_code)]
mod manifests;

/// Connections kept open through the restart (at least).
const CONNS: usize = 8;
/// More are opened while they all went to the same pod, up to this.
const MAX_CONNS: usize = 32;
/// Pause between two requests on one connection.
const PACE: Duration = Duration::from_millis(5);
/// Hard bounds of each connection's loop.
const MAX_REQUESTS: u64 = 50_000;
const MAX_RUN: Duration = Duration::from_secs(60);

struct Load {
    stop: Arc<AtomicBool>,
    /// Successful requests, over all connections.
    ok: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<Vec<String>>>,
}

impl Load {
    /// Open `CONNS` connections to `vip` and keep asking on each.
    fn start(c: &Cluster, vip: std::net::SocketAddr) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        let mut pods = std::collections::BTreeSet::new();
        let mut n = 0;
        // At least CONNS connections, and both pods among them (so both
        // reverse paths carry established flows), bounded.
        while n < CONNS || (pods.len() < 2 && n < MAX_CONNS) {
            let mut conn = match TcpConn::connect(c.client_ns(), vip).expect("client runs") {
                Ok(conn) => conn,
                Err(o) => panic!("connection {n} to {vip}: {o:?}"),
            };
            let first = conn.request().expect("first answer");
            pods.insert(first.pod.clone());
            n += 1;
            let (stop, ok) = (stop.clone(), ok.clone());
            threads.push(thread::spawn(move || {
                let mut errors = Vec::new();
                let started = Instant::now();
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed)
                    && sent < MAX_REQUESTS
                    && started.elapsed() < MAX_RUN
                {
                    sent += 1;
                    match conn.request() {
                        Ok(r) if r.pod == first.pod && r.peer == first.peer => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => {
                            errors.push(format!(
                                "conn {n}: answer from {} seen as {} (was {} as {})",
                                r.pod, r.peer, first.pod, first.peer
                            ));
                        }
                        Err(o) => {
                            errors.push(format!("conn {n}, request {sent}: {o:?}"));
                            // A reset connection stays broken: stop here.
                            break;
                        }
                    }
                    thread::sleep(PACE);
                }
                errors
            }));
        }
        assert_eq!(pods.len(), 2, "{n} connections, all to {pods:?}");
        Load { stop, ok, threads }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Wait until `n` more requests succeeded (bounded).
    fn wait_more(&self, n: u64, what: &str) {
        let from = self.ok();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.ok() < from + n {
            assert!(
                Instant::now() < deadline,
                "{what}: only {} requests succeeded in 10 s",
                self.ok() - from
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        std::mem::take(&mut self.threads)
            .into_iter()
            .flat_map(|t| {
                t.join()
                    .unwrap_or_else(|_| vec!["load thread panicked".into()])
            })
            .collect()
    }
}

impl Drop for Load {
    /// A failing test stops the loops too (they are bounded anyway).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The agent's text log without colour escapes (`ESC [ … m`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `Cluster` service with one pod on the receiving node (replies reversed
/// at the pod's link) and one on the other node (replies reversed at
/// `nic0`): both reverse paths run while the agent is dead.
fn kill9_keeps_connections(f: Family) {
    let tag = match f {
        Family::V4 => "k9r4",
        Family::V6 => "k9r6",
    };
    let mut c = Cluster::start(
        tag,
        Engine::Kernel,
        ClusterSpec::new(2)
            .pod("web-1", 1)
            .pod("web-2", 2)
            .service(
                ServiceSpec::lb("web", 1)
                    .policy(Policy::Cluster)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1"))
                    .endpoint(EndpointSpec::ready("web-2")),
            )
            .via(1),
    )
    .expect("cluster starts and every agent applies its state");
    let vip = c.vip("web", f, 80).expect("vip");

    let load = Load::start(&c, vip);
    load.wait_more(100, "before the kill");

    c.kill_agent(1).expect("kill -9 the agent of node 1");
    let pins = c.pin_dir(1).expect("pin dir").to_path_buf();
    assert!(
        pins.join("SLUICE_CT").exists() && pins.join("link-nic0-ingress").exists(),
        "the killed agent's maps and links stay pinned in {}",
        pins.display()
    );
    // Nobody runs the agent now: the pinned program keeps translating.
    load.wait_more(100, "with the agent dead");
    thread::sleep(Duration::from_secs(1));
    load.wait_more(100, "with the agent dead for a second");
    // New flows are served too: the maps hold the services.
    for _ in 0..3 {
        let out = tcp_request(c.client_ns(), vip).expect("client runs");
        assert!(
            matches!(out, TcpOutcome::Reply { .. }),
            "a new connection with the agent dead: {out:?}"
        );
    }

    let st = c
        .restart_agent(1)
        .expect("a new agent starts with the same flags and applies the state");
    assert_eq!(st.datapath.as_deref(), Some("kernel"));
    load.wait_more(200, "after the restart");

    let total = load.ok();
    let errors = load.finish();
    eprintln!("{total} requests on established connections across kill -9 and restart");
    assert!(
        errors.is_empty(),
        "established connections broke across kill -9 and restart ({total} requests fine):\n{}",
        errors.join("\n")
    );

    // The new agent replaced the programs in place and adopted the pod.
    let log = strip_ansi(&c.agent_log(1));
    assert!(
        log.matches("replaced=true").count() >= 3,
        "the restarted agent replaced the pinned programs (nic0 ×2, pod link):\n{log}"
    );
    assert!(
        log.contains("adopted the pod's link"),
        "pod link adopted:\n{log}"
    );

    // New connections work, on both pods.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        match tcp_request(c.client_ns(), vip).expect("client runs") {
            TcpOutcome::Reply { reply, peer } => {
                assert_eq!(peer, vip);
                seen.insert(reply.pod);
            }
            other => panic!("a new connection after the restart: {other:?}"),
        }
    }
    assert_eq!(seen.len(), 2, "both pods answer new connections: {seen:?}");
}

/// Node 1's agent started again after a `kill -9`; it applied its file
/// without an error (the agent's log in the panic when it did not).
fn restart_applying(c: &mut Cluster) -> AgentStatus {
    let st = c.restart_agent(1).unwrap_or_else(|e| {
        panic!(
            "the agent restarts and applies the file: {e:#}\n{}",
            c.agent_log(1)
        )
    });
    assert!(st.error.is_none(), "{st:?}");
    st
}

/// The looping client still gets answers half a second on, and no new
/// connection of its failed `across` what the test did.
fn served_throughout(c: &Cluster, traffic: Traffic, across: &str) {
    let answered_before = traffic.answered();
    thread::sleep(Duration::from_millis(500));
    let (answered, failed, errors) = traffic.finish();
    assert!(answered > answered_before, "still answering after {across}");
    assert_eq!(
        failed,
        0,
        "new connections failed across {across}: {errors:?}\n{}",
        c.agent_log(1)
    );
}

/// One node: web-1 behind the `Cluster` Service `web` (TCP 80 to 8080),
/// and the test pods `others` beside it.
fn web_on_one_node(others: &[&str]) -> ClusterSpec {
    let spec = others
        .iter()
        .fold(ClusterSpec::new(1).pod("web-1", 1), |s, p| s.pod(p, 1));
    spec.service(
        ServiceSpec::lb("web", 1)
            .tcp("http", 80, 8080)
            .endpoint(EndpointSpec::ready("web-1")),
    )
    .via(1)
}

/// `kill -9` in the middle of a change, three times: while a large state (2 000
/// Services × 10 endpoints beside the served one) is read and applied, and
/// while it is replaced by the small one again. New connections to the VIP
/// loop throughout; the pinned program serves them while no agent runs,
/// each restarted agent adopts what the maps hold and applies the file as
/// it is, and nothing is lost or half applied.
fn kill9_mid_change(f: Family) {
    let tag = match f {
        Family::V4 => "k9c4",
        Family::V6 => "k9c6",
    };
    let mut c = Cluster::start(tag, Engine::Kernel, web_on_one_node(&[])).expect("cluster");
    let vip = c.vip("web", f, 80).expect("vip");
    let small = c.manifests(1).expect("manifests");
    let large = format!("{small}{}", manifests::many_services(2_000, 10));
    let traffic = Traffic::start(c.client_ns(), vip);

    // Kill points: soon after the write (reading or parsing), later (the
    // apply), and after the shrink.
    for (text, after) in [
        (&large, Duration::from_millis(300)),
        (&large, Duration::from_millis(1500)),
        (&small, Duration::from_millis(200)),
    ] {
        c.write_state_raw(1, Some(text)).expect("write");
        thread::sleep(after);
        c.kill_agent(1).expect("kill -9");
        thread::sleep(Duration::from_millis(500));
        let st = restart_applying(&mut c);
        assert_eq!(st.pods, 1, "the pod's link is adopted: {st:?}");
    }
    served_throughout(&c, traffic, "kill -9 mid-change");
}

// spec: P2, P4
/// A pod deleted while no agent runs: the next agent unplugs it. Its link
/// outlived the killed agent with the pinned program on it and its
/// addresses published, so until the fix it stayed wired for as long as
/// the new agent ran: it could reach the other pods, and the program went
/// on believing its addresses. A client loops through the VIP meanwhile.
fn a_pod_deleted_while_no_agent_runs_is_unplugged(f: Family) {
    let tag = match f {
        Family::V4 => "k9d4",
        Family::V6 => "k9d6",
    };
    let mut c = Cluster::start(tag, Engine::Kernel, web_on_one_node(&["gone-1"])).expect("cluster");
    let vip = c.vip("web", f, 80).expect("vip");
    let web = std::net::SocketAddr::new(c.pod_ip("web-1", f).expect("web-1 ip"), 8080);
    let gone_ns = c.pod("gone-1").expect("gone-1").name().to_string();
    let traffic = Traffic::start(c.client_ns(), vip);
    let out = tcp_request(&gone_ns, web).expect("client runs");
    assert!(
        matches!(out, TcpOutcome::Reply { .. }),
        "gone-1 reaches web-1 while it is a pod of the node: {out:?}"
    );

    c.kill_agent(1).expect("kill -9 the agent");
    c.write_without_pods(1, &["gone-1"])
        .expect("the file without gone-1");
    let st = restart_applying(&mut c);
    assert_eq!(st.pods, 1, "only web-1 is plugged: {st:?}");

    let log = strip_ansi(&c.agent_log(1));
    assert!(
        log.contains("removed a pod link no pod claims")
            && log.contains("forgot pod addresses no pod claims"),
        "the restarted agent released gone-1's link and addresses:\n{log}"
    );
    let link = sluice_tests::exec(&gone_ns, &["ip", "link", "show", "dev", "eth0"]);
    assert!(link.is_err(), "gone-1's link is gone: {link:?}");
    let out = tcp_request(&gone_ns, web).expect("client runs");
    assert!(
        !matches!(out, TcpOutcome::Reply { .. }),
        "gone-1 no longer reaches web-1: {out:?}"
    );

    // web-1 kept its link and serves on.
    served_throughout(&c, traffic, "the restart");
}

mod kernel {
    #[test]
    fn a_pod_deleted_while_no_agent_runs_is_unplugged_v4() {
        crate::a_pod_deleted_while_no_agent_runs_is_unplugged(crate::Family::V4)
    }

    #[test]
    fn a_pod_deleted_while_no_agent_runs_is_unplugged_v6() {
        crate::a_pod_deleted_while_no_agent_runs_is_unplugged(crate::Family::V6)
    }

    #[test]
    fn kill9_mid_change_v4() {
        crate::kill9_mid_change(crate::Family::V4)
    }

    #[test]
    fn kill9_keeps_connections_v4() {
        crate::kill9_keeps_connections(crate::Family::V4)
    }

    #[test]
    fn kill9_keeps_connections_v6() {
        crate::kill9_keeps_connections(crate::Family::V6)
    }
}
