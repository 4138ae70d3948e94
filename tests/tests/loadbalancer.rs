//! LoadBalancer packet path end to end: a client namespace, node namespaces
//! running `sluice-agent`, pods in their own namespaces, real TCP and UDP.
//!
//! Every scenario is written once as `fn(Engine, Family)` and instantiated
//! per engine and address family by `engine_tests!` at the bottom, so the
//! test names read `emulated::tcp_reaches_pod::v4`,
//! `kernel::cluster_remote_pod_sees_node_ip::v6`, ... Each runs twice:
//! with the test bed's links offloading nothing (`emulated::…`,
//! `kernel::…`) and with offloads on as deployed
//! (`emulated_offloads::…`, `kernel_offloads::…`; see
//! [`sluice_tests::Offloads`]).
//!
//! Needs root and `target/<profile>/sluice-agent` (`cargo build -p
//! sluice-agent`) or `SLUICE_AGENT_BIN`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use sluice_tests::frames::{self, Hostile, RawLink, Targets};
use sluice_tests::{
    tcp_request, udp_request, Cluster, ClusterSpec, EndpointSpec, Engine, Family, Offloads, Policy,
    Reply, ServiceSpec, TcpConn, TcpOutcome, UdpOutcome,
};

thread_local! {
    /// The offloads of the running test's bed: set by the test function
    /// `instantiate!` writes (each test runs on its own thread), read by
    /// [`start`], so a scenario is written once for both settings.
    static OFFLOADS: Cell<Offloads> = const { Cell::new(Offloads::Off) };
}

fn start(tag: &str, engine: Engine, f: Family, spec: ClusterSpec) -> Cluster {
    let offloads = OFFLOADS.with(Cell::get);
    let tag = format!(
        "{tag}{}{}",
        match f {
            Family::V4 => "4",
            Family::V6 => "6",
        },
        match offloads {
            Offloads::Off => "",
            Offloads::On => "o",
        }
    );
    Cluster::start(&tag, engine, spec.offloads(offloads))
        .expect("cluster starts and every agent applies its state")
}

/// Runs `scenario` on a bed with `offloads`.
fn with_offloads(offloads: Offloads, scenario: impl FnOnce()) {
    OFFLOADS.with(|o| o.set(offloads));
    scenario();
}

fn web(policy: Policy) -> ServiceSpec {
    ServiceSpec::lb("web", 1)
        .policy(policy)
        .tcp("http", 80, 8080)
}

/// One TCP request to `svc`'s VIP; the pod's answer and the connected peer.
fn ask(c: &Cluster, svc: &str, f: Family, port: u16) -> (Reply, SocketAddr) {
    let vip = c.vip(svc, f, port).expect("service exists");
    let out = tcp_request(c.client_ns(), vip).expect("client runs");
    match out {
        TcpOutcome::Reply { reply, peer } => (reply, peer),
        other => panic!("TCP to {vip}: expected an answer from a pod, got {other:?}"),
    }
}

// spec: P1, P2
/// A TCP client reaching the VIP gets a real answer from the pod, which was
/// reached on its own IP and the targetPort (8080, not 80).
fn tcp_reaches_pod(engine: Engine, f: Family) {
    let c = start(
        "tcp",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::ready("web-1"))),
    );
    let vip = c.vip("web", f, 80).expect("vip");
    let (reply, peer) = ask(&c, "web", f, 80);
    assert_eq!(reply.pod, "web-1");
    assert_eq!(
        reply.local,
        SocketAddr::new(c.pod_ip("web-1", f).expect("pod ip"), 8080),
        "P2: DNAT to the pod's IP and targetPort"
    );
    assert_eq!(peer, vip, "the client talks to the VIP");
}

// spec: P1, P2
/// Same over UDP: a connected socket only accepts the answer from VIP:port.
fn udp_reaches_pod(engine: Engine, f: Family) {
    let c = start(
        "udp",
        engine,
        f,
        ClusterSpec::new(1).pod("web-1", 1).service(
            ServiceSpec::lb("dns", 1)
                .udp("dns", 53, 5353)
                .endpoint(EndpointSpec::ready("web-1")),
        ),
    );
    let vip = c.vip("dns", f, 53).expect("vip");
    match udp_request(c.client_ns(), vip, 3).expect("client runs") {
        UdpOutcome::Reply { reply, peer } => {
            assert_eq!(reply.pod, "web-1");
            assert_eq!(
                reply.local,
                SocketAddr::new(c.pod_ip("web-1", f).expect("pod ip"), 5353)
            );
            assert_eq!(peer, vip);
        }
        other => panic!("UDP to {vip}: expected an answer, got {other:?}"),
    }
}

// spec: P3
/// `Cluster`, pod on the receiving node: the pod sees the node's IP as the
/// source; the client sees the VIP as the reply source.
fn cluster_local_pod_sees_node_ip(engine: Engine, f: Family) {
    let c = start(
        "p3l",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::ready("web-1"))),
    );
    for _ in 0..3 {
        let (reply, peer) = ask(&c, "web", f, 80);
        assert_eq!(reply.pod, "web-1");
        assert_eq!(reply.peer.ip(), f.node_ip(1), "P3: SNAT to the node IP");
        assert_eq!(
            peer,
            c.vip("web", f, 80).expect("vip"),
            "reply source = VIP"
        );
    }
}

// spec: P3
/// `Cluster`, the only pod on another node: node 1 receives, SNATs to its own
/// IP and forwards to node 2; the reply comes back through node 1, which
/// answers the client from the VIP.
fn cluster_remote_pod_sees_node_ip(engine: Engine, f: Family) {
    let c = start(
        "p3r",
        engine,
        f,
        ClusterSpec::new(2)
            .pod("web-2", 2)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::ready("web-2")))
            .via(1),
    );
    for _ in 0..3 {
        let (reply, peer) = ask(&c, "web", f, 80);
        assert_eq!(reply.pod, "web-2");
        assert_eq!(
            reply.peer.ip(),
            f.node_ip(1),
            "P3: the pod sees the receiving node's IP"
        );
        assert_eq!(
            reply.local,
            SocketAddr::new(c.pod_ip("web-2", f).expect("pod ip"), 8080)
        );
        assert_eq!(
            peer,
            c.vip("web", f, 80).expect("vip"),
            "reply source = VIP"
        );
    }
}

// spec: P4
/// `Local`: no SNAT, the pod sees the client's own IP; the client still sees
/// the VIP as the reply source (DSR).
fn local_pod_sees_client_ip(engine: Engine, f: Family) {
    let c = start(
        "p4",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Local).endpoint(EndpointSpec::ready("web-1"))),
    );
    for _ in 0..3 {
        let (reply, peer) = ask(&c, "web", f, 80);
        assert_eq!(reply.pod, "web-1");
        assert_eq!(reply.peer.ip(), f.client_ip(), "P4: client IP preserved");
        assert_eq!(
            peer,
            c.vip("web", f, 80).expect("vip"),
            "reply source = VIP"
        );
    }
}

// spec: P4, P6
/// `Local` on a node without any pod of the Service: the node does not
/// forward to the other node's pod; it resets.
fn local_without_local_pod_resets(engine: Engine, f: Family) {
    let c = start(
        "p4r",
        engine,
        f,
        ClusterSpec::new(2)
            .pod("web-2", 2)
            .service(web(Policy::Local).endpoint(EndpointSpec::ready("web-2")))
            .via(1),
    );
    let vip = c.vip("web", f, 80).expect("vip");
    let out = tcp_request(c.client_ns(), vip).expect("client runs");
    assert!(
        matches!(out, TcpOutcome::Refused),
        "P4/P6: expected a reset from node 1, got {out:?}"
    );
}

// spec: P6
/// No endpoint, or only endpoints that are neither ready nor serving: the
/// connect fails at once with a reset (ECONNREFUSED), not a timeout.
fn no_endpoint_tcp_reset(engine: Engine, f: Family) {
    let c = start(
        "p6t",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(ServiceSpec::lb("empty", 1).tcp("http", 80, 8080))
            .service(
                ServiceSpec::lb("down", 2)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::not_ready("web-1")),
            ),
    );
    for svc in ["empty", "down"] {
        let vip = c.vip(svc, f, 80).expect("vip");
        let out = tcp_request(c.client_ns(), vip).expect("client runs");
        assert!(
            matches!(out, TcpOutcome::Refused),
            "P6: {svc} ({vip}): expected a reset, got {out:?}"
        );
    }
}

// spec: P6
/// UDP to a VIP port with no endpoint: ICMP port unreachable, which a
/// connected UDP socket reports as ECONNREFUSED.
fn no_endpoint_udp_unreachable(engine: Engine, f: Family) {
    let c = start(
        "p6u",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(ServiceSpec::lb("dns", 1).udp("dns", 53, 5353)),
    );
    let vip = c.vip("dns", f, 53).expect("vip");
    let out = udp_request(c.client_ns(), vip, 3).expect("client runs");
    assert!(
        matches!(out, UdpOutcome::Refused),
        "P6: expected ICMP port unreachable, got {out:?}"
    );
}

// spec: P5
/// Only serving-and-terminating endpoints: still served, for `Cluster` and
/// for `Local`.
fn only_terminating_endpoints_serve(engine: Engine, f: Family) {
    let c = start(
        "p5t",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::terminating("web-1")))
            .service(
                ServiceSpec::lb("web-local", 2)
                    .policy(Policy::Local)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::terminating("web-1")),
            ),
    );
    for svc in ["web", "web-local"] {
        let (reply, peer) = ask(&c, svc, f, 80);
        assert_eq!(reply.pod, "web-1", "P5 fallback for {svc}");
        assert_eq!(peer, c.vip(svc, f, 80).expect("vip"));
    }
}

// spec: P5
/// An established connection keeps its endpoint while that endpoint turns
/// terminating; new connections then go to the ready one.
fn established_survives_terminating(engine: Engine, f: Family) {
    let mut c = start(
        "p5e",
        engine,
        f,
        ClusterSpec::new(1).pod("web-1", 1).pod("web-2", 1).service(
            web(Policy::Cluster)
                .endpoint(EndpointSpec::ready("web-1"))
                .endpoint(EndpointSpec::ready("web-2")),
        ),
    );
    let vip = c.vip("web", f, 80).expect("vip");
    let mut conn = match TcpConn::connect(c.client_ns(), vip).expect("client runs") {
        Ok(conn) => conn,
        Err(o) => panic!("connect to {vip}: {o:?}"),
    };
    let first = conn.request().expect("first answer");
    let chosen = first.pod.clone();
    let other = if chosen == "web-1" { "web-2" } else { "web-1" };

    c.update(|s| {
        let svc = s.service_mut("web").expect("service web");
        *svc.endpoint_mut(&chosen).expect("endpoint") = EndpointSpec::terminating(&chosen);
    })
    .expect("agents apply the terminating endpoint");

    for _ in 0..3 {
        let again = conn
            .request()
            .expect("the established connection keeps working");
        assert_eq!(
            again.pod, chosen,
            "P5: same endpoint for the established flow"
        );
        assert_eq!(again.peer, first.peer, "same translated source");
    }
    assert_eq!(conn.peer_addr().expect("peer"), vip);

    for _ in 0..5 {
        let (reply, _) = ask(&c, "web", f, 80);
        assert_eq!(
            reply.pod, other,
            "new connections go to the ready endpoint, not the terminating {chosen}"
        );
    }
}

/// A port the Service does not expose is not load-balanced: nothing answers
/// from a pod (the pods do listen on 81, to catch a translation keeping the
/// port), while the Service's own port works.
fn wrong_port_not_balanced(engine: Engine, f: Family) {
    let c = start(
        "port",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::ready("web-1"))),
    );
    let (reply, _) = ask(&c, "web", f, 80);
    assert_eq!(reply.pod, "web-1");
    for port in [81, 8080] {
        let vip = c.vip("web", f, port).expect("vip");
        let out = tcp_request(c.client_ns(), vip).expect("client runs");
        assert!(
            !matches!(out, TcpOutcome::Reply { .. }),
            "{vip} is not a Service port, yet a pod answered: {out:?}"
        );
    }
}

// spec: P3
/// `Cluster` chooses among all ready pods cluster-wide: over 20 connections
/// through node 1, pods on both nodes answer, and both see node 1's IP.
fn cluster_spreads_over_nodes(engine: Engine, f: Family) {
    let c = start(
        "p3s",
        engine,
        f,
        ClusterSpec::new(2).pod("web-1", 1).pod("web-2", 2).service(
            web(Policy::Cluster)
                .endpoint(EndpointSpec::ready("web-1"))
                .endpoint(EndpointSpec::ready("web-2")),
        ),
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let (reply, peer) = ask(&c, "web", f, 80);
        assert_eq!(reply.peer.ip(), f.node_ip(1), "P3: SNAT to node 1's IP");
        assert_eq!(peer, c.vip("web", f, 80).expect("vip"));
        seen.insert(reply.pod);
    }
    // Maglev over random source ports: one pod taking all 20 has odds 2^-19.
    assert_eq!(seen.len(), 2, "both pods answered: {seen:?}");
}

// issue 2: sessionAffinity ClientIP
/// With `sessionAffinity: ClientIP`, every connection of one client goes to
/// the same pod.
fn client_ip_affinity_sticks(engine: Engine, f: Family) {
    let c = start(
        "aff",
        engine,
        f,
        ClusterSpec::new(1).pod("web-1", 1).pod("web-2", 1).service(
            web(Policy::Cluster)
                .affinity(60)
                .endpoint(EndpointSpec::ready("web-1"))
                .endpoint(EndpointSpec::ready("web-2")),
        ),
    );
    let (first, _) = ask(&c, "web", f, 80);
    for _ in 0..10 {
        let (reply, _) = ask(&c, "web", f, 80);
        assert_eq!(reply.pod, first.pod, "affinity keeps the client on one pod");
    }
}

/// On SIGTERM the agent exits cleanly and gives the node back as it found
/// it: `nic0` with its addresses in the node namespace, pods unplugged.
fn agent_restores_node_on_sigterm(engine: Engine, f: Family) {
    let mut c = start(
        "term",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(web(Policy::Cluster).endpoint(EndpointSpec::ready("web-1"))),
    );
    let (reply, _) = ask(&c, "web", f, 80);
    assert_eq!(reply.pod, "web-1");
    assert!(
        c.stop_agent(1).expect("agent running"),
        "agent exits with success on SIGTERM"
    );
    let node = c.node(1).expect("node 1");
    let addrs = node
        .ip(&["-o", "addr", "show", "dev", "nic0"])
        .expect("nic0 is back in the node namespace");
    for fam in Family::BOTH {
        assert!(
            addrs.contains(&format!("{} ", fam.node_ip(1)))
                || addrs.contains(&format!("{}/", fam.node_ip(1))),
            "nic0 keeps {}: {addrs}",
            fam.node_ip(1)
        );
    }
    let links = c
        .pod("web-1")
        .expect("pod")
        .ip(&["-o", "link", "show"])
        .expect("pod links");
    assert_eq!(
        links.lines().count(),
        1,
        "only lo is left in the pod namespace: {links}"
    );
}

/// Node `node`'s counter `name` once it reached `at_least`, or its value
/// after a bounded wait (the status file is rewritten every poll).
fn counter_reaching(c: &Cluster, node: usize, name: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = c.agent_status(node).map_or(0, |s| s.counter(name));
        if n >= at_least || Instant::now() > deadline {
            return n;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

// spec: P2, P4
/// Packets for a pod on the entry node go straight to the pod's link (the
/// program addresses the frame and the engine hands it over, past the
/// node's routing); for a pod on another node they are routed there.
fn local_pod_reached_on_its_link(engine: Engine, f: Family) {
    const N: u64 = 5;
    let c = start(
        "lnk",
        engine,
        f,
        ClusterSpec::new(2)
            .pod("web-1", 1)
            .pod("web-2", 2)
            .service(web(Policy::Local).endpoint(EndpointSpec::ready("web-1")))
            .service(
                ServiceSpec::lb("far", 2)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-2")),
            ),
    );
    for _ in 0..N {
        let (reply, _) = ask(&c, "web", f, 80);
        assert_eq!(reply.pod, "web-1");
    }
    // A SYN, an ACK and a request at least, per connection.
    let redirected = counter_reaching(&c, 1, "verdict_redirect", 3 * N);
    assert!(
        redirected >= 3 * N,
        "{redirected} frames redirected for {N} connections"
    );

    let before = counter_reaching(&c, 1, "verdict_redirect", u64::MAX);
    for _ in 0..N {
        let (reply, _) = ask(&c, "far", f, 80);
        assert_eq!(reply.pod, "web-2", "routed to the other node");
    }
    let after = counter_reaching(&c, 1, "verdict_redirect", u64::MAX);
    assert_eq!(after, before, "nothing for a remote pod is redirected");
}

/// A pod-side server that answers one byte and closes first, so the pod
/// keeps every connection's tuple in TIME_WAIT. Stopped and joined on drop.
struct ClosesFirst {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClosesFirst {
    fn start(ns: &str, addr: SocketAddr) -> ClosesFirst {
        let l = sluice_tests::in_ns(ns, move || TcpListener::bind(addr))
            .expect("enter pod namespace")
            .expect("bind in pod");
        l.set_nonblocking(true).expect("non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.write_all(b"x");
                        // Dropping `c` sends the FIN: the pod closes first.
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        ClosesFirst {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ClosesFirst {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// SYNs the TIME_WAIT sockets of namespace `ns` turned away for an old
/// timestamp (PAWS).
fn pod_paws(ns: &str) -> u64 {
    sluice_tests::in_ns(ns, || sluice_tests::tcp_ext_counter("PAWSTimewait"))
        .and_then(|r| r)
        .expect("PAWSTimewait in the pod's netstat")
}

/// The agent's counters of frames its engine lost or cut short, non-zero
/// ones only: beside a retransmit, they tell a drop from a refusal.
fn engine_losses(c: &Cluster) -> Vec<(String, u64)> {
    c.agent_status(1)
        .map(|s| s.counters)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, v)| {
            *v > 0
                && ["drop", "error", "truncated", "panic"]
                    .iter()
                    .any(|w| k.contains(w))
        })
        .collect()
}

/// SYNs the calling thread's network namespace retransmitted.
fn syn_retransmits() -> u64 {
    sluice_tests::syn_retransmits().expect("TCPSynRetrans in netstat")
}

/// A `Cluster` Service `name` (VIP `vip`, one TCP port `port` of the same
/// name) whose one endpoint is web-1 at `target`.
fn cluster_to_web_1(name: &str, vip: u8, port: u16, target: u16) -> ServiceSpec {
    ServiceSpec::lb(name, vip)
        .policy(Policy::Cluster)
        .tcp(name, port, target)
        .endpoint(EndpointSpec::ready("web-1"))
}

/// Connect from `local` (a fixed port, SO_REUSEADDR) to `dst`, read the
/// server's byte and its FIN, close.
fn connect_from(local: SocketAddr, dst: SocketAddr) -> std::io::Result<()> {
    use nix::sys::socket::{
        bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType,
        SockaddrStorage,
    };
    let family = if dst.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrStorage::from(local),
    )?;
    connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrStorage::from(dst),
    )?;
    let mut s = TcpStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    if buf != b"x" {
        return Err(std::io::Error::other(format!("answer {buf:?}")));
    }
    Ok(())
}

/// One short connection to `vip` from an ephemeral port: the server's byte
/// and its FIN.
fn short_connect(vip: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&vip, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    Ok(())
}

/// [`connect_from`] as soon as `local` is free again: the previous
/// connection's tuple is the client's once the pod's last ACK arrived
/// (EADDRNOTAVAIL until then).
fn connect_again_from(local: SocketAddr, dst: SocketAddr) -> std::io::Result<()> {
    let mut r = connect_from(local, dst);
    for _ in 0..200 {
        match &r {
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
                thread::sleep(Duration::from_millis(5));
                r = connect_from(local, dst);
            }
            _ => break,
        }
    }
    r
}

// spec: P3
/// Short connections to a server that closes first: every new connection
/// must get a SNAT tuple the pod does not hold in TIME_WAIT. On a held
/// tuple the pod turns the SYN away (its timestamp is older: they are
/// random per connection), the client resets and retransmits the SYN,
/// which the client namespace's TCPSynRetrans counts.
fn snat_reconnect_avoids_time_wait(engine: Engine, f: Family) {
    const WAVE: usize = 300;
    const ROUNDS: usize = 24;
    let c = start(
        "tw",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(cluster_to_web_1("close", 1, 90, 9090)),
    );
    let pod_ip = c.pod_ip("web-1", f).expect("pod ip");
    let _server = ClosesFirst::start(
        c.pod("web-1").expect("pod namespace").name(),
        SocketAddr::new(pod_ip, 9090),
    );
    let vip = c.vip("close", f, 90).expect("vip");
    let local = SocketAddr::new(
        match f {
            Family::V4 => std::net::Ipv4Addr::UNSPECIFIED.into(),
            Family::V6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
        },
        47_000,
    );
    let (before, after, errors) = sluice_tests::in_ns(c.client_ns(), move || {
        let before = syn_retransmits();
        let mut errors = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        // Two waves from ephemeral ports, the second after the first's
        // conntrack entries expired (closing: 10 s) but well within the
        // pod's TIME_WAIT (60 s): each second-wave flow must get a port no
        // first-wave flow had.
        for wave in 0..2 {
            if wave == 1 {
                thread::sleep(Duration::from_secs(11));
            }
            for _ in 0..WAVE {
                if Instant::now() > deadline {
                    errors.push("out of time".to_string());
                    break;
                }
                if let Err(e) = short_connect(vip) {
                    errors.push(e.to_string());
                }
            }
        }
        // Then one port, connection after connection, faster than the
        // closing timeout: no incarnation may run out of SNAT candidates.
        for _ in 0..ROUNDS {
            if Instant::now() > deadline {
                errors.push("out of time".to_string());
                break;
            }
            if let Err(e) = connect_again_from(local, vip) {
                errors.push(e.to_string());
            }
        }
        (before, syn_retransmits(), errors)
    })
    .expect("client namespace");
    assert!(errors.is_empty(), "connections failed: {errors:?}");
    assert_eq!(
        after - before,
        0,
        "SYNs retransmitted: a reconnect was given a tuple the pod holds in TIME_WAIT"
    );
}

// spec: P3
/// Many short connections through a SNAT range of eight ports, to a pod
/// that closes first: a flow that ended hands its port on at once to a SYN
/// the pod's TIME_WAIT takes. Before, each port sat out the 10 s close
/// timeout and the ninth connect found none.
///
/// - From one client port: the client's sequence numbers and timestamps
///   grow from one connection to the next on one tuple, so every held port
///   is safe for it: all connect, none waits.
/// - From ephemeral ports: this kernel offsets timestamps per connection,
///   so a held port is safe for about half the SYNs. A SYN no candidate is
///   safe for is reset at once; none is left retransmitting into a
///   TIME_WAIT (no SYN retransmits, no timeouts).
/// - Every port held by an open flow: the connect is reset at once and
///   counted (`no_snat_port`).
///
/// Under load the pod's FIN is sometimes retransmitted and reordered
/// behind its last ACK; the client, closed by then, resets it one short of
/// the sequence number the pod's TIME_WAIT expects. That reset must not
/// free the port (1 run in 20 failed here beside three busy loops until
/// the engine ignored it).
fn snat_short_connections_on_a_small_range(engine: Engine, f: Family) {
    const CONNECTS: usize = 200;
    let c = start(
        "sr",
        engine,
        f,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .service(cluster_to_web_1("close", 1, 90, 9090))
            // Its own endpoint (another targetPort): eight ports of its own.
            .service(cluster_to_web_1("hold", 2, 91, 9091))
            .agent_arg("--snat-port-range=61000-61007"),
    );
    let pod_ip = c.pod_ip("web-1", f).expect("pod ip");
    let _server = ClosesFirst::start(
        c.pod("web-1").expect("pod namespace").name(),
        SocketAddr::new(pod_ip, 9090),
    );
    let _hold_server = ClosesFirst::start(
        c.pod("web-1").expect("pod namespace").name(),
        SocketAddr::new(pod_ip, 9091),
    );
    let vip = c.vip("close", f, 90).expect("vip");
    let hold_vip = c.vip("hold", f, 91).expect("vip");
    let pod_ns = c.pod("web-1").expect("pod namespace").name().to_string();
    let local = SocketAddr::new(
        match f {
            Family::V4 => std::net::Ipv4Addr::UNSPECIFIED.into(),
            Family::V6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
        },
        47_100,
    );
    let r = sluice_tests::in_ns(c.client_ns(), move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let before = syn_retransmits();
        let mut one_port_errors = Vec::new();
        for _ in 0..CONNECTS {
            if Instant::now() > deadline {
                one_port_errors.push("out of time".to_string());
                break;
            }
            if let Err(e) = connect_again_from(local, vip) {
                one_port_errors.push(e.to_string());
            }
        }
        let one_port_retransmits = syn_retransmits() - before;

        let before = syn_retransmits();
        let (mut answered, mut reset, mut other) = (0usize, 0usize, Vec::new());
        // Each connect that retransmitted its SYN, with what the pod's
        // TIME_WAIT sockets turned away meanwhile: tells a held tuple
        // handed out (PAWS counts it) from a frame lost on the way.
        let mut waited = Vec::new();
        for i in 0..CONNECTS {
            if Instant::now() > deadline {
                other.push("out of time".to_string());
                break;
            }
            let (syns, paws, t0) = (syn_retransmits(), pod_paws(&pod_ns), Instant::now());
            match short_connect(vip) {
                Ok(()) => answered += 1,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => reset += 1,
                Err(e) => other.push(e.to_string()),
            }
            let syns = syn_retransmits() - syns;
            if syns > 0 {
                waited.push(format!(
                    "connect {i}: {syns} SYN retransmits, {} PAWS refusals in the pod's TIME_WAIT, {:?}",
                    pod_paws(&pod_ns) - paws,
                    t0.elapsed()
                ));
            }
        }
        let ephemeral_retransmits = syn_retransmits() - before;

        // Eight flows to the other endpoint, which the client keeps open
        // after the pod's FIN, hold all its ports; the ninth connect has
        // none.
        let held: Vec<TcpStream> = (0..8)
            .filter_map(|_| TcpStream::connect_timeout(&hold_vip, Duration::from_secs(5)).ok())
            .collect();
        let held_count = held.len();
        let refused = TcpStream::connect_timeout(&hold_vip, Duration::from_secs(5))
            .err()
            .map(|e| e.kind());
        // Closed with the pod's byte unread: resets, which leave no
        // TIME_WAIT. The ports are free again at once.
        drop(held);
        thread::sleep(Duration::from_millis(200));
        let reopened = short_connect(hold_vip).is_ok();
        (
            one_port_errors,
            one_port_retransmits,
            (answered, reset, other, ephemeral_retransmits, waited),
            (held_count, refused, reopened),
        )
    })
    .expect("client namespace");
    let (one_port_errors, one_port_retransmits, ephemeral, exhausted) = r;
    assert!(
        one_port_errors.is_empty(),
        "from one client port, {} of {CONNECTS} connects failed, the first: {:?}",
        one_port_errors.len(),
        &one_port_errors[..one_port_errors.len().min(3)]
    );
    assert_eq!(
        one_port_retransmits, 0,
        "from one client port, a connect waited"
    );
    let (answered, reset, other, retransmits, waited) = ephemeral;
    assert!(
        other.is_empty(),
        "from ephemeral ports, connects neither answered nor reset: {:?}",
        &other[..other.len().min(3)]
    );
    assert_eq!(
        retransmits,
        0,
        "a SYN was given a tuple the pod holds against it: {waited:?}; engine: {:?}",
        engine_losses(&c)
    );
    // With all eight ports held, a SYN no held flow's TIME_WAIT would take
    // (its random timestamp and sequence number both behind) is reset:
    // about one connect in ten in runs of this test, 21 of 200 in the run
    // that failed a nine-in-ten bound. Three in four still fails a hold
    // that keeps safe ports back.
    assert!(
        answered >= CONNECTS * 3 / 4,
        "from ephemeral ports only {answered} of {CONNECTS} answered ({reset} reset)"
    );
    let (held, refused, reopened) = exhausted;
    assert_eq!(held, 8, "eight flows open");
    assert_eq!(
        refused,
        Some(std::io::ErrorKind::ConnectionRefused),
        "with every port held the connect is reset at once"
    );
    assert!(
        counter_reaching(&c, 1, "no_snat_port", 1) >= 1,
        "exhaustion counted"
    );
    assert!(reopened, "a port is free again once its flow ended");
    // Named in /metrics and in the agent's log: Service, port, endpoint.
    let endpoint = SocketAddr::new(pod_ip, 9091);
    let series = format!(
        "sluice_snat_port_exhaustion_total{{service=\"default/hold\",port=\"hold\",endpoint=\"{endpoint}\"}} "
    );
    let node_ns = c.node(1).expect("node 1").name().to_string();
    // `/metrics` listens on IPv4 (kube-proxy's 0.0.0.0:10249) in either family's test.
    let metrics_addr = SocketAddr::new(Family::V4.node_ip(1), 10249);
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let body = sluice_tests::http_get(&node_ns, metrics_addr, "/metrics")
            .map(|a| a.body)
            .unwrap_or_default();
        if body.contains(&series) || Instant::now() > deadline {
            break body;
        }
        thread::sleep(Duration::from_millis(100));
    };
    let resets: u64 = body
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series:?} in /metrics:\n{body}"));
    assert!(resets >= 1, "{resets} resets counted");
    let log = c.agent_log(1);
    assert!(
        log.lines()
            .any(|l| l.contains("SNAT ports to the endpoint ran out")
                && l.contains(&endpoint.to_string())
                && l.contains("default/hold")),
        "no log line names the endpoint"
    );
}

// spec: P1, P4, P6
/// A bridge floods a frame whose destination MAC it has not learnt to every
/// port. Only the host the frame is addressed to may act on it: here the
/// client sends to a MAC no node has, so no node may answer (a pod's
/// SYN-ACK, or a reset where nothing serves), and each counts the frame.
/// Before nodes checked, every node answered for node 1.
fn flooded_frames_left_to_their_node(engine: Engine, f: Family) {
    let c = start(
        "flood",
        engine,
        f,
        ClusterSpec::new(2)
            .pod("web-1", 1)
            .pod("web-2", 2)
            .service(web(Policy::Local).endpoint(EndpointSpec::ready("web-2")))
            .service(
                ServiceSpec::lb("spread", 2)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1"))
                    .endpoint(EndpointSpec::ready("web-2")),
            )
            .service(ServiceSpec::lb("empty", 3).tcp("http", 80, 8080))
            .via(1),
    );
    let node1 = f.node_ip(1).to_string();
    let before: Vec<u64> = (1..=2)
        .map(|n| c.agent_status(n).map_or(0, |s| s.counter("other_host")))
        .collect();
    c.client()
        .ip(&[
            "neigh",
            "replace",
            &node1,
            "lladdr",
            "02:00:5e:00:de:ad",
            "nud",
            "permanent",
            "dev",
            "eth0",
        ])
        .expect("static neighbour");
    for svc in ["web", "spread", "empty"] {
        let vip = c.vip(svc, f, 80).expect("vip");
        let out = tcp_request(c.client_ns(), vip).expect("client runs");
        assert!(
            matches!(out, TcpOutcome::TimedOut),
            "{svc} ({vip}) sent to a MAC no node has: expected no answer, got {out:?}"
        );
    }
    for (n, b) in (1..=2).zip(before) {
        let now = counter_reaching(&c, n, "other_host", b + 3);
        assert!(
            now >= b + 3,
            "node {n} counted {} flooded frames, expected the 3 SYNs at least",
            now - b
        );
    }
    // With node 1's MAC learnt again, node 1 answers as before: `spread`
    // from a pod, `web` (no pod of it on node 1) and `empty` with a reset.
    c.client()
        .ip(&["neigh", "del", &node1, "dev", "eth0"])
        .expect("neighbour removed");
    ask(&c, "spread", f, 80);
    for svc in ["web", "empty"] {
        let vip = c.vip(svc, f, 80).expect("vip");
        let out = tcp_request(c.client_ns(), vip).expect("client runs");
        assert!(
            matches!(out, TcpOutcome::Refused),
            "P4/P6: {svc}: got {out:?}"
        );
    }
}

// spec: P1, P3, P4
/// Megabytes both ways on one connection through each translation: DNAT
/// and SNAT to a pod on the receiving node, to a pod on another node, and
/// `Local` with the client's IP kept. Every byte is checked both ways. With
/// offloads on, the pods and the client send TSO/GSO super-frames with
/// partial checksums, the nodes receive GRO aggregates, and a checksum
/// left wrong by a translation is dropped by the receiver (see
/// `Offloads`), so this fails on a wrong checksum as well as a lost byte.
fn bulk_both_ways_through_every_translation(engine: Engine, f: Family) {
    const UP: usize = 3 << 20;
    const DOWN: usize = 6 << 20;
    let c = start(
        "bulk",
        engine,
        f,
        ClusterSpec::new(2)
            .pod("web-1", 1)
            .pod("web-2", 2)
            .service(
                ServiceSpec::lb("near", 1)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            .service(
                ServiceSpec::lb("far", 2)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-2")),
            )
            .service(
                ServiceSpec::lb("kept", 3)
                    .policy(Policy::Local)
                    .tcp("http", 80, 8080)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            .via(1),
    );
    for (svc, pod, source) in [
        ("near", "web-1", f.node_ip(1)),
        ("far", "web-2", f.node_ip(1)),
        ("kept", "web-1", f.client_ip()),
    ] {
        let vip = c.vip(svc, f, 80).expect("vip");
        let mut conn = match TcpConn::connect(c.client_ns(), vip).expect("client runs") {
            Ok(conn) => conn,
            Err(o) => panic!("{svc}: connect to {vip}: {o:?}"),
        };
        for round in 0..2 {
            let reply = conn
                .bulk(UP, DOWN)
                .unwrap_or_else(|o| panic!("{svc} ({vip}), round {round}: {o:?}"));
            assert_eq!(reply.pod, pod, "{svc}");
            assert_eq!(reply.peer.ip(), source, "{svc}: the source the pod saw");
        }
        assert_eq!(
            conn.peer_addr().expect("peer"),
            vip,
            "{svc}: reply source = VIP"
        );
    }
    // The bed did what it says: with offloads on, the entry node's uplink
    // handed the emulated engine GRO aggregates of the client's uploads
    // (it reads them with their GSO header and passes them on whole); with
    // them off, every frame arrived from the wire as sent. (Pods and the
    // node's stack hand it super-frames in both settings.)
    if engine == Engine::Emulated {
        // (With offloads off this waits out the bound: the status file is
        // current by then.)
        let aggregates = counter_reaching(&c, 1, "engine_wire_gso_frames", 1);
        match OFFLOADS.with(Cell::get) {
            Offloads::On => assert!(aggregates > 0, "no GSO frame reached node 1"),
            Offloads::Off => {
                assert_eq!(aggregates, 0, "GSO frames with offloads off");
                // So the relay coalesced the uploads' segments itself.
                let merged = counter_reaching(&c, 1, "engine_gro_frames", 1);
                assert!(merged > 0, "node 1 coalesced nothing");
            }
        }
    }
}

/// The hostile pod's flood: at most this many frames, for at most this
/// long, from this seed (printed; `SLUICE_HOSTILE_SEED` replays another).
const HOSTILE_FRAMES: u64 = 100_000;
const HOSTILE_TIME: Duration = Duration::from_secs(4);
const HOSTILE_SEED: u64 = 0x5eed_0bad_f00d_0001;
/// In every hostile frame with a payload: what the sniffers look for.
const HOSTILE_MARKER: &[u8] = b"SLUICE-HOSTILE-7f3a";

/// What the looping client and the victims counted.
#[derive(Debug, Default)]
struct Tally {
    answered: u64,
    failed: Vec<String>,
}

impl Tally {
    /// Every request answered, and enough of them to mean something.
    fn assert_all_answered(&self, who: &str) {
        assert!(
            self.failed.is_empty() && self.answered >= 20,
            "{who}: {} answered, {} failed: {:?}",
            self.answered,
            self.failed.len(),
            self.failed
        );
    }

    fn fail(&mut self, t0: Instant, what: String) {
        // The first few, with when: enough to read a failure.
        if self.failed.len() < 20 {
            self.failed
                .push(format!("{what} at {:.2} s", t0.elapsed().as_secs_f64()));
        } else {
            self.failed.push(String::new());
        }
    }
}

/// Frames sniffed on `ifname` in `ns` until `stop` that carry the hostile
/// marker and an IP source other than `allowed`: traffic the node forwarded
/// for an address the hostile pod does not own. Bounded by `stop` and 60 s.
fn sniff_forged(
    ns: &str,
    allowed: Vec<IpAddr>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<(u64, Vec<String>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let ns = ns.to_string();
    let h = thread::spawn(move || {
        sluice_tests::in_ns(&ns, move || {
            let link = match RawLink::open("eth0", true)
                .and_then(|l| l.set_read_timeout(Duration::from_millis(100)).map(|()| l))
            {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(());
                    return (u64::MAX, vec![format!("sniffer: {e}")]);
                }
            };
            let _ = tx.send(());
            let deadline = Instant::now() + Duration::from_secs(60);
            let (mut n, mut seen) = (0u64, Vec::new());
            let mut buf = vec![0u8; 65_536];
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let Ok(r) = link.recv(&mut buf) else { continue };
                let f = &buf[..r.len];
                if r.outgoing || !frames::contains(f, HOSTILE_MARKER) {
                    continue;
                }
                match frames::ip_source(f) {
                    Some(src) if allowed.contains(&src) => {}
                    src => {
                        n += 1;
                        if seen.len() < 5 {
                            seen.push(format!(
                                "{} bytes from {src:?}: {:02x?}",
                                f.len(),
                                &f[..f.len().min(80)]
                            ));
                        }
                    }
                }
            }
            (n, seen)
        })
        .unwrap_or_else(|e| (u64::MAX, vec![format!("sniffer: {e:#}")]))
    });
    // The sniffer is bound before the flood starts.
    let _ = rx.recv_timeout(Duration::from_secs(5));
    h
}

/// The MAC of `dev` in namespace `ns`.
fn link_mac(ns: &str, dev: &str) -> [u8; 6] {
    let out = sluice_tests::exec(ns, &["ip", "-o", "link", "show", "dev", dev]).expect("ip link");
    let text = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC in {out:?}"));
    parse_mac(text).unwrap_or_else(|| panic!("bad MAC {text:?}"))
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    v.try_into().ok()
}

/// Every counter of node `node`'s agent, once its status file was rewritten
/// after `settle` (the file is rewritten every poll).
fn counters_after(c: &Cluster, node: usize, settle: Duration) -> BTreeMap<String, u64> {
    thread::sleep(settle);
    c.agent_status(node)
        .map(|s| s.counters.into_iter().collect())
        .unwrap_or_default()
}

// spec: P1, P3
/// A hostile pod on the node floods its link with broken and forged frames
/// (see [`sluice_tests::frames::KINDS`]: random bytes of every length from
/// 14 bytes up, odd ethertypes, VLAN tags, broken IPv4 and IPv6 headers,
/// fragments, IP options, bad TCP offsets, SYN/RST/FIN floods to the VIP,
/// spoofed sources, forged replies of other pods' translated flows, ICMP
/// errors about made-up flows, ARP and NDP claims for the gateway, the node
/// and the VIP), from a fixed seed, while a client keeps asking a `Cluster`
/// Service over TCP and UDP and both families, and keeps one TCP connection
/// and one UDP socket per family open through it. Nothing of it may
/// disturb the node:
/// - every request is answered by web-1, from the node's address (SNAT);
/// - the open connections keep working, also after idling past the close
///   timeout (a forged reset of their flow must not end it), and no forged
///   datagram reaches the client's sockets;
/// - no frame the pod sent with an address it does not own leaves the node
///   (sniffed at the client and at web-1);
/// - the agent runs on, its status and metrics answer, and its counters
///   show the broken frames reached the engine.
///
/// Measured on a 2-core VM (seed 0x5eed0badf00d0001): 100 000 frames in
/// 1.2 to 1.8 s (55 000 to 85 000 frames/s, unthrottled), on either engine
/// 0 of 110 to 125 looping requests and 0 of 110 to 120 requests on the
/// open connections failed; the program counted every frame
/// (`spoofed` +44 485, `not_ip` +17 053, `malformed` +11 330, `fragment`
/// +4 761, the same on both engines); the test takes 16 to 18 s. Before
/// the program checked pods' sources, forged replies reached the client's
/// UDP sockets (560 to 720 datagrams) and about 2 700 spoofed frames the
/// client, 770 web-1, on both engines.
fn hostile_pod_does_not_disturb_the_node(engine: Engine) {
    let seed = std::env::var("SLUICE_HOSTILE_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(HOSTILE_SEED);
    eprintln!("hostile pod: seed {seed:#x} (SLUICE_HOSTILE_SEED={seed:x} replays it)");
    let started = Instant::now();
    let mut c = start(
        "evil",
        engine,
        Family::V4,
        ClusterSpec::new(1).pod("web-1", 1).pod("evil", 1).service(
            web(Policy::Cluster)
                .udp("dns", 53, 5353)
                .endpoint(EndpointSpec::ready("web-1")),
        ),
    );
    let fams = Family::BOTH;
    let node_ips: Vec<IpAddr> = fams.iter().map(|f| f.node_ip(1)).collect();
    let web_ips: Vec<IpAddr> = fams
        .iter()
        .map(|f| c.pod_ip("web-1", *f).expect("web-1 ip"))
        .collect();
    let evil_ips: Vec<IpAddr> = fams
        .iter()
        .map(|f| c.pod_ip("evil", *f).expect("evil ip"))
        .collect();
    let tcp_vips: Vec<SocketAddr> = fams
        .iter()
        .map(|f| c.vip("web", *f, 80).expect("vip"))
        .collect();
    let udp_vips: Vec<SocketAddr> = fams
        .iter()
        .map(|f| c.vip("web", *f, 53).expect("vip"))
        .collect();
    let client_ns = c.client_ns().to_string();
    let evil_ns = c.pod("evil").expect("evil pod").name().to_string();
    let web_ns = c.pod("web-1").expect("web-1 pod").name().to_string();

    // Before: both protocols and families answer; the hostile pod reaches
    // web-1 on its own addresses (which resolves its gateway's MAC).
    for (i, f) in fams.iter().enumerate() {
        let (reply, _) = ask(&c, "web", *f, 80);
        assert_eq!(
            (reply.pod.as_str(), reply.peer.ip()),
            ("web-1", node_ips[i])
        );
        let out = tcp_request(&evil_ns, SocketAddr::new(web_ips[i], 8080)).expect("evil runs");
        assert!(
            matches!(&out, TcpOutcome::Reply { reply, .. } if reply.peer.ip() == evil_ips[i]),
            "the pod reaches web-1 over {}: {out:?}",
            f.name()
        );
    }

    // The victims: one open TCP connection and one connected UDP socket
    // per family, whose SNAT ports the attacker is told (the worst case;
    // half its forged replies spray the whole range).
    let mut victims_tcp = Vec::new();
    let mut victims_udp = Vec::new();
    let mut replies = Vec::new();
    for i in 0..fams.len() {
        let mut conn = match TcpConn::connect(&client_ns, tcp_vips[i]).expect("client runs") {
            Ok(conn) => conn,
            Err(o) => panic!("connect to {}: {o:?}", tcp_vips[i]),
        };
        let first = conn.request().expect("victim's first answer");
        assert_eq!(first.peer.ip(), node_ips[i]);
        replies.push((SocketAddr::new(web_ips[i], 8080), first.peer, true));
        victims_tcp.push((conn, first.peer));
        let vip = udp_vips[i];
        let sock = sluice_tests::in_ns(&client_ns, move || -> std::io::Result<UdpSocket> {
            let any: SocketAddr = if vip.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let s = UdpSocket::bind(any)?;
            s.connect(vip)?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            Ok(s)
        })
        .expect("client namespace")
        .expect("UDP socket");
        let first = udp_ask(&sock).unwrap_or_else(|e| panic!("UDP victim to {vip}: {e}"));
        assert_eq!(first.peer.ip(), node_ips[i]);
        replies.push((SocketAddr::new(web_ips[i], 5353), first.peer, false));
        victims_udp.push((sock, first.peer));
    }

    let evil_mac = link_mac(&evil_ns, "eth0");
    let neigh =
        sluice_tests::exec(&evil_ns, &["ip", "neigh", "show", "dev", "eth0"]).expect("ip neigh");
    let gateway_mac = neigh
        .split_whitespace()
        .skip_while(|w| *w != "lladdr")
        .nth(1)
        .and_then(parse_mac)
        .unwrap_or_else(|| panic!("the pod resolved no gateway: {neigh:?}"));
    let route =
        sluice_tests::exec(&evil_ns, &["ip", "route", "show", "default"]).expect("ip route");
    let gateway4: Ipv4Addr = route
        .split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no IPv4 default route in the pod: {route:?}"));
    let mut spoofed: Vec<IpAddr> = Vec::new();
    for (i, f) in fams.iter().enumerate() {
        spoofed.extend([f.client_ip(), web_ips[i], node_ips[i], tcp_vips[i].ip()]);
    }
    let targets = Targets {
        own_mac: evil_mac,
        gateway_mac,
        own: [evil_ips[0], evil_ips[1]],
        gateway4,
        vips: [tcp_vips[0].ip(), tcp_vips[1].ip()],
        tcp_port: 80,
        udp_port: 53,
        spoofed,
        replies,
        snat_ports: (61_000, 65_535),
    };

    let before = counters_after(&c, 1, Duration::ZERO);
    let stop = Arc::new(AtomicBool::new(false));
    // Legitimate sources of marked frames: the pod itself, and the node
    // (its ICMP errors quote what the pod sent).
    let allowed: Vec<IpAddr> = evil_ips.iter().chain(&node_ips).copied().collect();
    let sniff_client = sniff_forged(&client_ns, allowed.clone(), stop.clone());
    let sniff_web = sniff_forged(&web_ns, allowed, stop.clone());

    // The looping client: new connections and datagrams, both families.
    let t0 = Instant::now();
    let looping = {
        let (stop, ns, tcp_vips, udp_vips, node_ips) = (
            stop.clone(),
            client_ns.clone(),
            tcp_vips.clone(),
            udp_vips.clone(),
            node_ips.clone(),
        );
        thread::spawn(move || {
            let mut t = Tally::default();
            for n in 0..2_000usize {
                if stop.load(Ordering::Relaxed) || t0.elapsed() > Duration::from_secs(60) {
                    break;
                }
                let i = n % 2;
                let got = if n % 4 < 2 {
                    match tcp_request(&ns, tcp_vips[i]) {
                        Ok(TcpOutcome::Reply { reply, .. }) => Ok(reply),
                        other => Err(format!("TCP {}: {other:?}", tcp_vips[i])),
                    }
                } else {
                    match udp_request(&ns, udp_vips[i], 1) {
                        Ok(UdpOutcome::Reply { reply, .. }) => Ok(reply),
                        other => Err(format!("UDP {}: {other:?}", udp_vips[i])),
                    }
                };
                match got {
                    Ok(r) if r.pod == "web-1" && r.peer.ip() == node_ips[i] => t.answered += 1,
                    Ok(r) => t.fail(t0, format!("answer from {r:?}")),
                    Err(e) => t.fail(t0, e),
                }
                thread::sleep(Duration::from_millis(10));
            }
            t
        })
    };
    // The victims: a request on each every 100 ms.
    let victims = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut t = Tally::default();
            let mut forged = Vec::new();
            for _ in 0..600 {
                if stop.load(Ordering::Relaxed) || t0.elapsed() > Duration::from_secs(60) {
                    break;
                }
                for (conn, peer) in victims_tcp.iter_mut() {
                    match conn.request() {
                        Ok(r) if r.pod == "web-1" && r.peer == *peer => t.answered += 1,
                        other => t.fail(t0, format!("open connection ({peer}): {other:?}")),
                    }
                }
                for (sock, peer) in &victims_udp {
                    match udp_ask_counting_forged(sock, &mut forged) {
                        Ok(r) if r.pod == "web-1" && r.peer == *peer => t.answered += 1,
                        other => t.fail(t0, format!("open UDP socket ({peer}): {other:?}")),
                    }
                }
                thread::sleep(Duration::from_millis(100));
            }
            (t, forged, victims_tcp, victims_udp)
        })
    };

    // The flood, from inside the hostile pod.
    thread::sleep(Duration::from_millis(300));
    let flood_start = Instant::now();
    let mut hostile = Hostile::new(seed, targets, HOSTILE_MARKER);
    let (sent, errors, per_kind, flood_time) = sluice_tests::in_ns(&evil_ns, move || {
        let link = RawLink::open("eth0", false).expect("AF_PACKET socket in the pod");
        let t = Instant::now();
        let (mut sent, mut errors) = (0u64, BTreeMap::<String, u64>::new());
        let mut per_kind = [0u64; frames::KINDS.len()];
        for _ in 0..HOSTILE_FRAMES {
            if t.elapsed() > HOSTILE_TIME {
                break;
            }
            let (kind, f) = hostile.next_frame();
            match link.send(&f) {
                Ok(_) => {
                    sent += 1;
                    per_kind[kind] += 1;
                }
                Err(e) => *errors.entry(e.to_string()).or_default() += 1,
            }
        }
        (sent, errors, per_kind, t.elapsed())
    })
    .expect("hostile pod namespace");
    let flood_end = flood_start.elapsed();
    // And a second after it.
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let looped = looping.join().expect("looping client");
    let (victim_tally, forged_udp, mut victims_tcp, victims_udp) = victims.join().expect("victims");
    let (forged_at_client, seen_client) = sniff_client.join().expect("sniffer");
    let (forged_at_web, seen_web) = sniff_web.join().expect("sniffer");
    let exited = c.agent_exited(1).expect("agent 1");
    let after = counters_after(&c, 1, Duration::from_millis(1_500));
    let delta = |k: &str| {
        after
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.get(k).copied().unwrap_or(0))
    };
    let deltas: Vec<String> = after
        .keys()
        .filter(|k| delta(k) > 0)
        .map(|k| format!("{k}+{}", delta(k)))
        .collect();
    let kinds: Vec<String> = frames::KINDS
        .iter()
        .zip(per_kind)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    eprintln!(
        "hostile pod ({}): sent {sent} frames in {:.2} s ({:.0}/s; send errors {errors:?}); {}",
        engine.as_str(),
        flood_time.as_secs_f64(),
        sent as f64 / flood_time.as_secs_f64().max(1e-3),
        kinds.join(" ")
    );
    eprintln!(
        "hostile pod: looping client {} answered, {} failed; victims {} answered, {} failed, {} forged datagrams; forged frames seen at the client {forged_at_client}, at web-1 {forged_at_web}; flood+1 s {:.2} s",
        looped.answered,
        looped.failed.len(),
        victim_tally.answered,
        victim_tally.failed.len(),
        forged_udp.len(),
        flood_end.as_secs_f64() + 1.0
    );
    eprintln!("hostile pod: counter deltas {}", deltas.join(" "));

    assert!(
        exited.is_none(),
        "the agent exited during the attack: {exited:?}"
    );
    assert!(
        sent >= 10_000,
        "the pod sent only {sent} frames ({errors:?}): no attack to speak of"
    );
    assert_eq!(delta("engine_panics"), 0, "the engine caught panics");
    looped.assert_all_answered("looping client");
    victim_tally.assert_all_answered("open connections");
    assert!(
        forged_udp.is_empty(),
        "forged replies reached the client's UDP sockets: {forged_udp:?}"
    );
    assert_eq!(
        (forged_at_client, forged_at_web),
        (0, 0),
        "frames with a source the hostile pod does not own left the node: at the client {seen_client:?}, at web-1 {seen_web:?}"
    );
    // The frames reached the program, which saw them for what they are:
    // each of these is 5 to 45 % of the flood (measured: every frame sent
    // was counted, on both engines), so a fiftieth is a loose floor.
    for counter in ["malformed", "fragment", "not_ip", "spoofed"] {
        assert!(
            delta(counter) >= sent / 50,
            "{counter} rose by {} (< {}): did the frames reach the engine? deltas {deltas:?}",
            delta(counter),
            sent / 50
        );
    }
    let status = c.agent_status(1).expect("the status file answers");
    assert!(
        status.generation >= 1 && status.error.is_none(),
        "status {status:?}"
    );
    let metrics = sluice_tests::http_get(
        c.node(1).expect("node 1").name(),
        SocketAddr::new(Family::V4.node_ip(1), 10249),
        "/metrics",
    )
    .expect("/metrics answers");
    assert!(
        metrics.body.contains("sluice_packets_total"),
        "/metrics: {}",
        metrics.body
    );

    // After: the open connections idle past the close timeout (a flow a
    // forged reset had marked closed would now be gone), then work on with
    // the same translation; new requests work in both families.
    thread::sleep(Duration::from_secs(11));
    for (conn, peer) in victims_tcp.iter_mut() {
        match conn.request() {
            Ok(r) => assert_eq!((r.pod.as_str(), r.peer), ("web-1", *peer)),
            Err(o) => panic!("the open connection to web-1 from {peer} broke: {o:?}"),
        }
    }
    for (sock, peer) in &victims_udp {
        let r = udp_ask(sock).unwrap_or_else(|e| panic!("the UDP socket ({peer}): {e}"));
        assert_eq!(r.pod, "web-1");
    }
    for (i, f) in fams.iter().enumerate() {
        let (reply, _) = ask(&c, "web", *f, 80);
        assert_eq!(
            (reply.pod.as_str(), reply.peer.ip()),
            ("web-1", node_ips[i])
        );
        match udp_request(&client_ns, udp_vips[i], 1).expect("client runs") {
            UdpOutcome::Reply { reply, .. } => assert_eq!(reply.pod, "web-1"),
            other => panic!("UDP to {} after the attack: {other:?}", udp_vips[i]),
        }
    }
    assert!(
        c.agent_exited(1).expect("agent 1").is_none(),
        "the agent exited"
    );
    eprintln!(
        "hostile pod ({}): passed in {:.1} s",
        engine.as_str(),
        started.elapsed().as_secs_f64()
    );
}

/// One request on a connected UDP socket: the who-am-I answer.
fn udp_ask(sock: &UdpSocket) -> Result<Reply, String> {
    let mut forged = Vec::new();
    let r = udp_ask_counting_forged(sock, &mut forged);
    if forged.is_empty() {
        r
    } else {
        Err(format!("forged datagrams {forged:?}"))
    }
}

/// [`udp_ask`], reading past datagrams that are not who-am-I answers (into
/// `forged`) until an answer or the socket's timeout.
fn udp_ask_counting_forged(sock: &UdpSocket, forged: &mut Vec<String>) -> Result<Reply, String> {
    sock.send(b"who\n").map_err(|e| format!("send: {e}"))?;
    let mut buf = [0u8; 2048];
    for _ in 0..16 {
        let n = sock.recv(&mut buf).map_err(|e| format!("recv: {e}"))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        match text.trim().parse::<Reply>() {
            Ok(r) if r.pod == "web-1" => return Ok(r),
            _ => forged.push(text.chars().take(80).collect()),
        }
    }
    Err("no answer among 16 datagrams".into())
}

/// Instantiate every scenario for one engine, one offload setting and both
/// families.
macro_rules! instantiate {
    ($module:ident, $engine:expr, $offloads:expr, $($name:ident),* $(,)?) => {
        mod $module {
            $(
                mod $name {
                    #[test]
                    fn v4() {
                        crate::with_offloads($offloads, || {
                            crate::$name($engine, crate::Family::V4)
                        })
                    }
                    #[test]
                    fn v6() {
                        crate::with_offloads($offloads, || {
                            crate::$name($engine, crate::Family::V6)
                        })
                    }
                }
            )*
        }
    };
}

/// Every scenario under every engine, with offloads off and on.
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        instantiate!(emulated, crate::Engine::Emulated, crate::Offloads::Off, $($name),*);
        instantiate!(kernel, crate::Engine::Kernel, crate::Offloads::Off, $($name),*);
        instantiate!(emulated_offloads, crate::Engine::Emulated, crate::Offloads::On, $($name),*);
        instantiate!(kernel_offloads, crate::Engine::Kernel, crate::Offloads::On, $($name),*);
    };
}

engine_tests!(
    tcp_reaches_pod,
    udp_reaches_pod,
    cluster_local_pod_sees_node_ip,
    cluster_remote_pod_sees_node_ip,
    cluster_spreads_over_nodes,
    local_pod_sees_client_ip,
    local_without_local_pod_resets,
    no_endpoint_tcp_reset,
    no_endpoint_udp_unreachable,
    only_terminating_endpoints_serve,
    established_survives_terminating,
    wrong_port_not_balanced,
    client_ip_affinity_sticks,
    agent_restores_node_on_sigterm,
    snat_reconnect_avoids_time_wait,
    snat_short_connections_on_a_small_range,
    local_pod_reached_on_its_link,
    flooded_frames_left_to_their_node,
    bulk_both_ways_through_every_translation,
);

/// Bounds of the talking pod's loop in [`replug_while_talking`].
const TALK_DATAGRAMS: u64 = 400_000;
const TALK_TIME: Duration = Duration::from_secs(30);

// spec: P2, P4
/// A pod whose link is unplugged and plugged again while it talks loses no
/// frame as spoofed: the engine publishes its addresses before the program
/// checks its frames, and forgets them only once it no longer does. The
/// kernel engine used to forget them before deleting the link, and dropped
/// the frames in between (29 in one run). The pod is left out of the
/// node's file (unplugged: its link goes), then put back (plugged anew),
/// while it sends UDP to web-1 from both its addresses; web-1's answers
/// after the plug show the path is back.
fn replug_while_talking(engine: Engine) {
    let tag = match engine {
        Engine::Kernel => "rpk",
        _ => "rpe",
    };
    let mut c = Cluster::start(
        tag,
        engine,
        ClusterSpec::new(1)
            .pod("web-1", 1)
            .pod("talker", 1)
            .service(
                ServiceSpec::lb("web", 1)
                    .udp("dns", 53, 5353)
                    .endpoint(EndpointSpec::ready("web-1")),
            )
            .via(1),
    )
    .expect("cluster");
    let web: Vec<SocketAddr> = Family::BOTH
        .iter()
        .map(|f| SocketAddr::new(c.pod_ip("web-1", *f).expect("web-1 ip"), 5353))
        .collect();
    let talker = c.pod("talker").expect("talker").name().to_string();
    let before = counters_after(&c, 1, Duration::ZERO);

    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let talking = {
        let (stop, answers) = (stop.clone(), answers.clone());
        thread::spawn(move || {
            sluice_tests::in_ns(&talker, move || {
                let socks: Vec<UdpSocket> = ["0.0.0.0:0", "[::]:0"]
                    .iter()
                    .map(|a| {
                        let s = UdpSocket::bind(a).expect("a UDP socket in the pod");
                        s.set_nonblocking(true).expect("non-blocking");
                        s
                    })
                    .collect();
                let t = Instant::now();
                let (mut sent, mut failed) = (0u64, 0u64);
                let mut buf = [0u8; 512];
                for i in 0..TALK_DATAGRAMS {
                    if stop.load(Ordering::Relaxed) || t.elapsed() > TALK_TIME {
                        break;
                    }
                    let k = (i % 2) as usize;
                    // While unplugged the pod has no route: the send fails.
                    match socks[k].send_to(b"talk", web[k]) {
                        Ok(_) => sent += 1,
                        Err(_) => failed += 1,
                    }
                    while socks[k].recv(&mut buf).is_ok() {
                        answers.fetch_add(1, Ordering::Relaxed);
                    }
                    if i % 64 == 63 {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
                (sent, failed)
            })
            .expect("talker namespace")
        })
    };
    thread::sleep(Duration::from_millis(300));
    c.write_without_pods(1, &["talker"])
        .expect("the node's file without the talker: unplugged");
    thread::sleep(Duration::from_millis(300));
    c.write_without_pods(1, &[])
        .expect("the talker back in the file: plugged again");
    let answered_at_plug = answers.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while answers.load(Ordering::Relaxed) < answered_at_plug + 100 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let (sent, failed) = talking.join().expect("talking thread");
    let answered_after = answers.load(Ordering::Relaxed) - answered_at_plug;
    let after = counters_after(&c, 1, Duration::from_millis(1500));
    let delta = |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
    eprintln!(
        "talker: {sent} datagrams sent, {failed} sends failed (unplugged), {answered_after} answers after the plug; spoofed +{}",
        delta("spoofed")
    );
    assert!(
        answered_after >= 100,
        "web-1 answers the talker after it was plugged again ({answered_after} answers)"
    );
    assert_eq!(
        delta("spoofed"),
        0,
        "frames of the talker, from its own addresses, dropped as spoofed around its plug\n{}",
        c.agent_log(1)
    );
}

/// [`replug_while_talking`] once per engine: both families in one bed.
mod replug {
    #[test]
    fn emulated() {
        crate::replug_while_talking(crate::Engine::Emulated)
    }
    #[test]
    fn kernel() {
        crate::replug_while_talking(crate::Engine::Kernel)
    }
}

/// [`hostile_pod_does_not_disturb_the_node`] once per engine, offloads off:
/// it covers both families in one bed, and is too long to run eight times.
mod hostile {
    #[test]
    fn emulated() {
        crate::with_offloads(crate::Offloads::Off, || {
            crate::hostile_pod_does_not_disturb_the_node(crate::Engine::Emulated)
        })
    }
    #[test]
    fn kernel() {
        crate::with_offloads(crate::Offloads::Off, || {
            crate::hostile_pod_does_not_disturb_the_node(crate::Engine::Kernel)
        })
    }
}
