//! The load balancer end to end over veths, under each engine and family:
//! `kernel::v4`, `kernel::v6`, `emulated::v4`, `emulated::v6`.
//!
//! One L2 segment (a bridge in its own namespace) joins a client, the load
//! balancer (one interface, `eth0`) and three nodes. The nodes stand in for
//! the agent: each owns the VIP on `lo` (with `arp_ignore=1` and
//! `arp_announce=2`, so none answers ARP for it) and runs a who-am-I
//! server on VIP:80 (TCP) and VIP:53 (UDP) answering with its node name
//! and the client address it saw. The client routes the VIP via the load
//! balancer's address; the engine runs in the load balancer's namespace,
//! started through `start_kernel` / `start_emulated` as the control side
//! starts it.
//!
//! Checked: connections spread over the nodes and reach them with the
//! client's own address (passthrough); replies go straight from the node
//! to the client (the bridge sends the load balancer the client's frames
//! only, and the engine's counters account for exactly those); a
//! long-lived connection stays on its node while another backend is
//! removed and while its own turns unhealthy, when new connections avoid
//! it; with every backend unhealthy new connections still go to all; the
//! counters; shutdown (v4) and drop (v6) give the interface back
//! (emulated) or detach the program (kernel), after which the VIP no
//! longer answers and no `clsact` qdisc is left.
//!
//! Needs root; the kernel instances need the object
//! (`cargo xtask build-ebpf --release`, which `cargo xtask test` runs).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sluice_lb::desired::{Backend, Frontend, LbDesired, LbService, Protocol};
use sluice_lb::engine::{start_emulated, start_kernel, LbCounters, LbEngine};
use sluice_tests::{
    tcp_request, udp_request, Netns, TcpConn, TcpOutcome, Traffic, UdpOutcome, WhoAmI,
};

const NODES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Kernel,
    Emulated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn cidr(self, host: u8) -> String {
        match self {
            Family::V4 => format!("192.0.2.{host}/24"),
            Family::V6 => format!("2001:db8::{host:x}/64"),
        }
    }
    fn addr(self, host: u8) -> IpAddr {
        match self {
            Family::V4 => format!("192.0.2.{host}").parse().unwrap(),
            Family::V6 => format!("2001:db8::{host:x}").parse().unwrap(),
        }
    }
    fn vip(self) -> IpAddr {
        match self {
            Family::V4 => "198.51.100.10".parse().unwrap(),
            Family::V6 => "2001:db8:100::10".parse().unwrap(),
        }
    }
    fn host_prefix(self) -> &'static str {
        match self {
            Family::V4 => "/32",
            Family::V6 => "/128",
        }
    }
}

const CLIENT: u8 = 2;
const LB: u8 = 1;

fn node_host(i: usize) -> u8 {
    10 + i as u8
}

fn object() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bpf/bpfel-unknown-none/release/sluice-lb");
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask build-ebpf --release` first (`cargo xtask test` does it)",
        p.display()
    );
    p
}

fn mac_of(ns: &Netns, dev: &str) -> [u8; 6] {
    let out = ns.ip(&["-j", "link", "show", "dev", dev]).expect("ip link");
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    let text = v[0]["address"].as_str().expect("a MAC address").to_string();
    let mut mac = [0u8; 6];
    for (b, part) in mac.iter_mut().zip(text.split(':')) {
        *b = u8::from_str_radix(part, 16).expect("hex");
    }
    mac
}

/// Until no IPv6 address of `ns` is tentative (bounded).
fn wait_dad(ns: &Netns) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let out = ns
            .ip(&["-6", "addr", "show", "tentative"])
            .expect("ip addr");
        if out.trim().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("IPv6 addresses of {} still tentative after 10 s", ns.name());
}

/// Packets a bridge port sent (`tx`) or received (`rx`).
fn port_packets(br: &Netns, dev: &str, dir: &str) -> u64 {
    let out = br
        .ip(&["-s", "-j", "link", "show", "dev", dev])
        .expect("ip -s link");
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    v[0]["stats64"][dir]["packets"]
        .as_u64()
        .expect("packet counter")
}

/// The topology; fields drop in order: the engine before the namespaces.
struct Bed {
    engine: Option<Box<dyn LbEngine>>,
    _servers: Vec<WhoAmI>,
    f: Family,
    br: Netns,
    client: Netns,
    lb: Netns,
    nodes: Vec<Netns>,
    macs: Vec<[u8; 6]>,
}

impl Bed {
    fn new(tag: &str, engine: Engine, f: Family) -> Bed {
        let br = Netns::new(&format!("{tag}b")).expect("bridge namespace");
        br.bridge("br0").expect("bridge");
        let client = Netns::new(&format!("{tag}c")).expect("client namespace");
        let lb = Netns::new(&format!("{tag}l")).expect("load balancer namespace");
        let mut nodes = Vec::new();
        for i in 0..NODES {
            nodes.push(Netns::new(&format!("{tag}n{i}")).expect("node namespace"));
        }
        let mut ports = vec![("c0", &client, CLIENT), ("lb0", &lb, LB)];
        let names: Vec<String> = (0..NODES).map(|i| format!("n{i}")).collect();
        for (i, n) in nodes.iter().enumerate() {
            ports.push((names[i].as_str(), n, node_host(i)));
        }
        for (port, ns, host) in &ports {
            ns.veth_to("eth0", &br, port).expect("veth");
            br.enslave(port, "br0").expect("enslave");
            ns.addr_add("eth0", &f.cidr(*host)).expect("address");
        }
        let vip = f.vip();
        client
            .ip(&[
                "route",
                "replace",
                &format!("{vip}{}", f.host_prefix()),
                "via",
                &f.addr(LB).to_string(),
            ])
            .expect("the client's route to the VIP");
        let mut servers = Vec::new();
        let mut macs = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            for key in ["all", "eth0"] {
                n.sysctl(&format!("net.ipv4.conf.{key}.arp_ignore"), "1")
                    .unwrap();
                n.sysctl(&format!("net.ipv4.conf.{key}.arp_announce"), "2")
                    .unwrap();
            }
            n.addr_add("lo", &format!("{vip}{}", f.host_prefix()))
                .expect("VIP on lo");
            servers.push(
                WhoAmI::start(n.name(), &format!("node-{i}"), &[vip], &[80], &[53])
                    .expect("who-am-I server"),
            );
            macs.push(mac_of(n, "eth0"));
        }
        if f == Family::V6 {
            // A node answers a client it has not resolved yet from the VIP,
            // which is on `lo`: its neighbour solicitation then goes out
            // from its link-local address, and none leaves while that
            // address is tentative.
            for ns in [&client, &lb].into_iter().chain(nodes.iter()) {
                wait_dad(ns);
            }
        }
        let started = match engine {
            Engine::Kernel => {
                let obj = object();
                lb.in_ns(move || start_kernel("eth0", Some(&obj)))
            }
            Engine::Emulated => lb.in_ns(|| start_emulated("eth0")),
        }
        .expect("in the load balancer's namespace")
        .unwrap_or_else(|e| panic!("starting the {engine:?} engine: {e:#}"));
        Bed {
            engine: Some(started),
            _servers: servers,
            f,
            br,
            client,
            lb,
            nodes,
            macs,
        }
    }

    fn engine(&mut self) -> &mut Box<dyn LbEngine> {
        self.engine.as_mut().expect("engine running")
    }

    /// The Service with the given nodes as backends (id = node index + 1).
    fn desired(&self, backends: &[(usize, bool)]) -> LbDesired {
        let vip = self.f.vip();
        LbDesired {
            services: vec![LbService {
                name: "default/web".into(),
                frontends: vec![
                    Frontend {
                        address: vip,
                        port: 80,
                        protocol: Protocol::Tcp,
                    },
                    Frontend {
                        address: vip,
                        port: 53,
                        protocol: Protocol::Udp,
                    },
                ],
                backends: backends
                    .iter()
                    .map(|&(i, healthy)| Backend {
                        id: i as u32 + 1,
                        node: format!("node-{i}"),
                        address: self.f.addr(node_host(i)),
                        mac: self.macs[i],
                        healthy,
                    })
                    .collect(),
            }],
        }
    }

    fn apply(&mut self, backends: &[(usize, bool)]) {
        let d = self.desired(backends);
        self.engine().apply(&d).expect("apply");
    }

    fn vip(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.f.vip(), port)
    }

    /// One TCP request; the node that answered.
    fn ask(&self) -> String {
        let out = tcp_request(self.client.name(), self.vip(80)).expect("client runs");
        match out {
            TcpOutcome::Reply { reply, peer } => {
                assert_eq!(peer, self.vip(80), "the client talks to the VIP");
                assert_eq!(reply.local, self.vip(80), "the node was reached on the VIP");
                assert_eq!(
                    reply.peer.ip(),
                    self.f.addr(CLIENT),
                    "passthrough: the node sees the client"
                );
                reply.pod
            }
            other => panic!("TCP to the VIP: expected an answer, got {other:?}"),
        }
    }

    /// `n` new connections, counted by node.
    fn spread(&self, n: usize) -> BTreeMap<String, usize> {
        let mut seen = BTreeMap::new();
        for _ in 0..n {
            *seen.entry(self.ask()).or_default() += 1;
        }
        seen
    }

    fn counters(&self) -> LbCounters {
        self.engine
            .as_ref()
            .expect("engine")
            .counters()
            .expect("counters")
    }
}

fn connect(b: &Bed) -> TcpConn {
    TcpConn::connect(b.client.name(), b.vip(80))
        .expect("client runs")
        .unwrap_or_else(|o| panic!("connecting to the VIP: {o:?}"))
}

fn request(c: &mut TcpConn) -> String {
    c.request()
        .unwrap_or_else(|o| panic!("a request on the long-lived connection: {o:?}"))
        .pod
}

fn node_name(i: usize) -> String {
    format!("node-{i}")
}

fn scenario(engine: Engine, f: Family) {
    let tag = match (engine, f) {
        (Engine::Kernel, Family::V4) => "lbk4",
        (Engine::Kernel, Family::V6) => "lbk6",
        (Engine::Emulated, Family::V4) => "lbe4",
        (Engine::Emulated, Family::V6) => "lbe6",
    };
    let mut b = Bed::new(tag, engine, f);
    let all: Vec<(usize, bool)> = (0..NODES).map(|i| (i, true)).collect();
    b.apply(&all);

    // Connections spread over the nodes.
    let seen = b.spread(30);
    assert_eq!(
        seen.len(),
        NODES,
        "30 connections reach every node: {seen:?}"
    );
    // UDP too, with the client's address.
    for port in 0..5u16 {
        let _ = port;
        match udp_request(b.client.name(), b.vip(53), 3).expect("client runs") {
            UdpOutcome::Reply { reply, peer } => {
                assert_eq!(peer, b.vip(53));
                assert_eq!(reply.peer.ip(), f.addr(CLIENT));
            }
            other => panic!("UDP to the VIP: {other:?}"),
        }
    }

    // Direct server return: over 200 exchanges on one connection, the
    // bridge sends the load balancer the client's frames and nothing of
    // the node's answers, and the engine delivered exactly those.
    let mut conn = connect(&b);
    let home = request(&mut conn);
    let before = (
        port_packets(&b.br, "lb0", "tx"),
        port_packets(&b.br, "c0", "rx"),
        port_packets(&b.br, "c0", "tx"),
        b.counters().packets_per_backend.values().sum::<u64>(),
    );
    for _ in 0..200 {
        assert_eq!(request(&mut conn), home, "one connection, one node");
    }
    // Delayed ACKs settle.
    std::thread::sleep(Duration::from_millis(300));
    let to_lb = port_packets(&b.br, "lb0", "tx") - before.0;
    let from_client = port_packets(&b.br, "c0", "rx") - before.1;
    let to_client = port_packets(&b.br, "c0", "tx") - before.2;
    let delivered = b.counters().packets_per_backend.values().sum::<u64>() - before.3;
    assert!(
        to_client >= 200,
        "the client got the 200 answers ({to_client} frames)"
    );
    assert!(
        from_client >= 200,
        "the client sent the 200 requests ({from_client} frames)"
    );
    // Broadcasts and multicasts (ARP, neighbour discovery, MLD) reach
    // every port: a little slack, far below the 200 answers.
    assert!(
        to_lb <= from_client + 30,
        "the load balancer got {to_lb} frames while the client sent {from_client} and got \
         {to_client}: answers must not cross the load balancer"
    );
    assert!(
        delivered >= 200 && delivered <= from_client,
        "the engine delivered {delivered} frames for {from_client} from the client"
    );

    // Updates under traffic, no half state: health moves from node to node
    // while new connections keep coming; none fails, none meets a
    // frontend without backends.
    let traffic = Traffic::start(b.client.name(), b.vip(80));
    for k in 0..12 {
        let set: Vec<(usize, bool)> = (0..NODES).map(|i| (i, (i + k) % NODES != 0)).collect();
        b.apply(&set);
        std::thread::sleep(Duration::from_millis(60));
    }
    b.apply(&all);
    let (answered, failed, errors) = traffic.finish();
    assert!(answered >= 10, "connections during the updates: {answered}");
    assert_eq!(
        failed, 0,
        "connections failed during the updates: {errors:?}"
    );
    assert_eq!(b.counters().events["lb_no_backend"], 0);
    assert_eq!(
        request(&mut conn),
        home,
        "the long-lived connection lived through them"
    );

    // Another backend leaves: the connection stays on its node; new
    // connections never reach the one that left.
    let home_i = (0..NODES)
        .find(|&i| node_name(i) == home)
        .expect("a node name");
    let gone = (home_i + 1) % NODES;
    let rest: Vec<(usize, bool)> = (0..NODES)
        .filter(|&i| i != gone)
        .map(|i| (i, true))
        .collect();
    b.apply(&rest);
    for _ in 0..20 {
        assert_eq!(
            request(&mut conn),
            home,
            "the connection stays while another backend leaves"
        );
    }
    let seen = b.spread(20);
    assert!(
        !seen.contains_key(&node_name(gone)),
        "no new connection to the removed node: {seen:?}"
    );

    // Its own backend turns unhealthy: the connection stays (TCP), new
    // connections avoid it.
    let sick: Vec<(usize, bool)> = rest.iter().map(|&(i, _)| (i, i != home_i)).collect();
    b.apply(&sick);
    for _ in 0..20 {
        assert_eq!(
            request(&mut conn),
            home,
            "TCP stays on a backend that turned unhealthy"
        );
    }
    let seen = b.spread(20);
    assert!(
        !seen.contains_key(&home),
        "new connections avoid the unhealthy node: {seen:?}"
    );

    // Every backend unhealthy: traffic still goes to all.
    let none: Vec<(usize, bool)> = (0..NODES).map(|i| (i, false)).collect();
    b.apply(&none);
    let seen = b.spread(30);
    assert_eq!(
        seen.len(),
        NODES,
        "with none healthy, connections go to all: {seen:?}"
    );
    assert_eq!(request(&mut conn), home);

    let c = b.counters();
    assert_eq!(
        c.packets_per_backend
            .keys()
            .copied()
            .collect::<BTreeSet<_>>(),
        (1..=NODES as u32).collect::<BTreeSet<_>>(),
        "a counter per configured backend"
    );
    assert!(c.flows >= 100, "flows in the table: {}", c.flows);
    assert!(
        c.events["lb_tx"] >= 500 && c.events["lb_new_flow"] >= 100,
        "{:?}",
        c.events
    );
    assert!(
        c.events["lb_pass"] > 0,
        "ARP / neighbour discovery passed: {:?}",
        c.events
    );
    println!("{engine:?} {f:?}: {c:?}");
    drop(conn);

    // Shutdown (v4) or drop (v6), from this thread, which is not in the
    // load balancer's namespace: the program is gone and the interface is
    // the load balancer's again; the VIP no longer answers.
    let e = b.engine.take().expect("engine");
    match f {
        Family::V4 => e.shutdown().expect("shutdown"),
        Family::V6 => drop(e),
    }
    let qdiscs =
        b.lb.exec(&["tc", "qdisc", "show", "dev", "eth0"])
            .expect("tc");
    assert!(!qdiscs.contains("clsact"), "no clsact qdisc left: {qdiscs}");
    let out =
        b.lb.ip(&["-j", "addr", "show", "dev", "eth0"])
            .expect("eth0 is back");
    assert!(
        out.contains(&f.addr(LB).to_string()),
        "eth0 has its address again: {out}"
    );
    let started = Instant::now();
    match tcp_request(b.client.name(), b.vip(80)).expect("client runs") {
        TcpOutcome::Reply { reply, .. } => panic!("{} answered after the shutdown", reply.pod),
        _ => assert!(started.elapsed() < Duration::from_secs(10)),
    }
    // The load balancer's own stack still answers on its address (a reset
    // from a closed port).
    let closed = SocketAddr::new(f.addr(LB), 9);
    match tcp_request(b.client.name(), closed).expect("client runs") {
        TcpOutcome::Refused => {}
        other => panic!("the load balancer's address after the shutdown: {other:?}"),
    }
    let _ = &b.nodes;
}

mod kernel {
    use super::*;

    #[test]
    fn v4() {
        scenario(Engine::Kernel, Family::V4)
    }

    #[test]
    fn v6() {
        scenario(Engine::Kernel, Family::V6)
    }
}

mod emulated {
    use super::*;

    #[test]
    fn v4() {
        scenario(Engine::Emulated, Family::V4)
    }

    #[test]
    fn v6() {
        scenario(Engine::Emulated, Family::V6)
    }
}
