//! The emulated engine on real veth pairs in namespaces this test creates
//! (needs root and iproute2; skipped otherwise).
//!
//! client ns (eth0 198.18.0.1) ── veth ── node ns (nic0 198.18.0.2) ── pod ns

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sluice_agent::engine::{self, Engine, MapContent, PodLink};
use sluice_datapath::host::{ServiceSpec, ServiceTables};
use sluice_datapath::maps::{v4_mapped, Endpoint, NodeConfig, ServiceKey, EP_F_LOCAL, PROTO_TCP};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip_out(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn can_run() -> bool {
    // SAFETY: plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    let ok = root
        && Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
        && std::path::Path::new("/dev/net/tun").exists();
    if !ok {
        eprintln!("skipped: needs root, iproute2 and /dev/net/tun");
    }
    ok
}

/// Named namespaces, deleted on drop (also on panic).
struct Namespaces(Vec<String>);

impl Namespaces {
    fn new(roles: &[&str]) -> Self {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut me = Namespaces(Vec::new());
        for r in roles {
            let name = format!("sl-emu-{}-{n}-{r}", std::process::id());
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
            ip(&["netns", "add", &name]);
            me.0.push(name);
        }
        me
    }

    fn name(&self, i: usize) -> &str {
        &self.0[i]
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// Run `f` on a thread inside namespace `name`.
fn in_ns<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = PathBuf::from("/run/netns").join(name);
    std::thread::spawn(move || {
        let f2 = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&f2, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("thread in namespace")
}

/// client (0) and node (1) joined by a veth; the node side is `nic0`.
fn client_and_node(extra: &[&str]) -> Namespaces {
    let mut roles = vec!["c", "n"];
    roles.extend_from_slice(extra);
    let ns = Namespaces::new(&roles);
    let (c, n) = (ns.name(0), ns.name(1));
    ip(&[
        "link", "add", "nic0", "netns", n, "type", "veth", "peer", "name", "eth0", "netns", c,
    ]);
    for (ns_, dev, a4, a6) in [
        (c, "eth0", "198.18.0.1/24", "fd00:18::1/64"),
        (n, "nic0", "198.18.0.2/24", "fd00:18::2/64"),
    ] {
        ip(&["-n", ns_, "link", "set", "lo", "up"]);
        ip(&["-n", ns_, "link", "set", dev, "up"]);
        ip(&["-n", ns_, "addr", "add", a4, "dev", dev]);
        ip(&["-n", ns_, "addr", "add", a6, "dev", dev, "nodad"]);
    }
    // Something for the engine to carry over and give back.
    ip(&[
        "-n",
        n,
        "route",
        "add",
        "198.18.50.0/24",
        "via",
        "198.18.0.1",
    ]);
    ip(&[
        "-n",
        n,
        "-6",
        "route",
        "add",
        "fd00:50::/64",
        "via",
        "fd00:18::1",
    ]);
    ns
}

/// What must look the same before and after the engine.
fn node_view(n: &str) -> String {
    let addrs: Vec<String> = ip_out(&["-n", n, "-o", "addr", "show", "dev", "nic0"])
        .lines()
        .filter(|l| !l.contains("fe80::"))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let r4 = ip_out(&["-n", n, "route", "show"]);
    let r6: String = ip_out(&["-n", n, "-6", "route", "show"])
        .lines()
        .filter(|l| !l.starts_with("fe80"))
        .map(|l| format!("{l}\n"))
        .collect();
    let link = ip_out(&["-n", n, "-d", "-o", "link", "show", "dev", "nic0"]);
    let kind = if link.contains("veth") {
        "veth"
    } else {
        "other"
    };
    let mac = link
        .split("link/ether ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    format!("{kind} {mac}\n{}\n{r4}{r6}", addrs.join("\n"))
}

fn start(n: &str, node: &str) -> Box<dyn Engine> {
    let node = node.to_string();
    in_ns(n, move || engine::start_emulated("nic0", &node)).expect("start_emulated")
}

/// A server answering every connection with the peer's address, then the
/// number of bytes it read.
fn serve(ns: &str, addr: SocketAddr, conns: usize) -> std::thread::JoinHandle<()> {
    let l = in_ns(ns, move || TcpListener::bind(addr).expect("bind"));
    std::thread::spawn(move || {
        for _ in 0..conns {
            let Ok((mut s, peer)) = l.accept() else {
                return;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = vec![0u8; 65536];
            let mut total = 0usize;
            while let Ok(k) = s.read(&mut buf) {
                if k == 0 {
                    break;
                }
                total += k;
            }
            let _ = write!(s, "{} {}", peer.ip(), total);
        }
    })
}

/// Connect from `ns`, send `n` bytes, return the server's answer.
fn ask(ns: &str, to: SocketAddr, n: usize) -> std::io::Result<String> {
    in_ns(ns, move || {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let data = vec![0x5au8; n];
        s.write_all(&data)?;
        s.shutdown(std::net::Shutdown::Write)?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    })
}

fn counter(e: &dyn Engine, name: &str) -> u64 {
    e.counters()
        .into_iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| v)
}

#[test]
fn relays_node_traffic_and_gives_nic0_back() {
    if !can_run() {
        return;
    }
    let ns = client_and_node(&[]);
    let (c, n) = (ns.name(0).to_string(), ns.name(1).to_string());
    let before = node_view(&n);

    let e = start(&n, "emu-test");
    assert_eq!(e.kind(), "emulated");
    let link = ip_out(&["-n", &n, "-d", "link", "show", "dev", "nic0"]);
    assert!(link.contains("tun"), "nic0 is the engine's TAP: {link}");
    assert_eq!(
        node_view(&n).lines().skip(1).collect::<Vec<_>>(),
        before.lines().skip(1).collect::<Vec<_>>(),
        "the TAP carries nic0's addresses and routes"
    );

    // 1 MiB each way of the relay: TSO super-frames from the client's veth
    // are segmented by the engine.
    let v4: SocketAddr = "198.18.0.2:7000".parse().unwrap();
    let v6: SocketAddr = "[fd00:18::2]:7000".parse().unwrap();
    let s4 = serve(&n, v4, 1);
    let s6 = serve(&n, v6, 1);
    assert_eq!(ask(&c, v4, 1 << 20).expect("tcp v4"), "198.18.0.1 1048576");
    assert_eq!(ask(&c, v6, 1 << 20).expect("tcp v6"), "fd00:18::1 1048576");
    s4.join().unwrap();
    s6.join().unwrap();
    eprintln!("counters: {:?}", e.counters());
    assert!(counter(&*e, "not_service") > 0);
    assert_eq!(counter(&*e, "engine_panics"), 0);

    e.shutdown().expect("shutdown");
    assert_eq!(node_view(&n), before, "nic0 given back as it was");
    let left: Vec<_> = std::fs::read_dir("/run/netns")
        .unwrap()
        .filter_map(|d| d.ok())
        .map(|d| d.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&format!("sluice-w-emu-test-{}-", std::process::id())))
        .collect();
    assert!(left.is_empty(), "wire namespace removed: {left:?}");
    // And the node still talks to the client directly.
    let s4 = serve(&n, v4, 1);
    assert_eq!(ask(&c, v4, 1000).expect("after"), "198.18.0.1 1000");
    s4.join().unwrap();
}

#[test]
fn pod_behind_a_vip() {
    if !can_run() {
        return;
    }
    let ns = client_and_node(&["p"]);
    let (c, n, p) = (
        ns.name(0).to_string(),
        ns.name(1).to_string(),
        ns.name(2).to_string(),
    );
    let before = node_view(&n);
    let mut e = start(&n, "emu-pod");

    let pod_v4 = Ipv4Addr::new(198, 19, 1, 10);
    let pod_v6: Ipv6Addr = "fd00:19:1::10".parse().unwrap();
    let link = PodLink {
        key: "default/web".into(),
        netns: PathBuf::from("/run/netns").join(&p),
        pod_ifname: "eth0".into(),
        host_ifname: format!("slpt{}", SEQ.fetch_add(1, Ordering::Relaxed)),
        ipv4: Some(pod_v4),
        ipv6: Some(pod_v6),
        gateway4: Some(Ipv4Addr::new(198, 19, 1, 1)),
    };
    e.plug_pod(&link).expect("plug");
    e.plug_pod(&link).expect("plug again is a no-op");

    ip(&[
        "-n",
        &c,
        "route",
        "add",
        "198.19.0.0/16",
        "via",
        "198.18.0.2",
    ]);
    ip(&[
        "-n",
        &c,
        "route",
        "add",
        "198.18.100.0/24",
        "via",
        "198.18.0.2",
    ]);
    ip(&[
        "-n",
        &c,
        "-6",
        "route",
        "add",
        "fd00:19::/32",
        "via",
        "fd00:18::2",
    ]);
    ip(&[
        "-n",
        &c,
        "-6",
        "route",
        "add",
        "fd00:18:100::/64",
        "via",
        "fd00:18::2",
    ]);

    let srv4 = serve(
        &p,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080),
        3,
    );
    let srv6 = serve(
        &p,
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 8081),
        2,
    );

    // Routed straight to the pod: no translation, the client's address.
    assert_eq!(
        ask(&c, SocketAddr::new(pod_v4.into(), 8080), 100_000).expect("direct v4"),
        "198.18.0.1 100000"
    );
    assert_eq!(
        ask(&c, SocketAddr::new(pod_v6.into(), 8081), 100_000).expect("direct v6"),
        "fd00:18::1 100000"
    );

    // A Cluster VIP per family: DNAT to the pod, SNAT to the node address.
    let vip4 = Ipv4Addr::new(198, 18, 100, 1);
    let vip6: Ipv6Addr = "fd00:18:100::1".parse().unwrap();
    let dead4 = Ipv4Addr::new(198, 18, 100, 2);
    let spec = |vip: [u8; 16], port: u16, ep: Option<([u8; 16], u16)>| ServiceSpec {
        key: ServiceKey {
            addr: vip,
            port,
            proto: PROTO_TCP,
            _pad: 0,
        },
        ready: ep
            .map(|(a, p)| Endpoint {
                addr: a,
                port: p,
                flags: EP_F_LOCAL,
                _pad: 0,
            })
            .into_iter()
            .collect(),
        ..ServiceSpec::default()
    };
    let specs = [
        spec(
            v4_mapped(vip4.octets()),
            80,
            Some((v4_mapped(pod_v4.octets()), 8080)),
        ),
        spec(vip6.octets(), 80, Some((pod_v6.octets(), 8081))),
        spec(v4_mapped(dead4.octets()), 80, None),
    ];
    let content = MapContent {
        node: NodeConfig {
            addr4: v4_mapped([198, 18, 0, 2]),
            addr6: "fd00:18::2".parse::<Ipv6Addr>().unwrap().octets(),
            snat_port_min: 61000,
            snat_port_max: 65535,
            _pad: 0,
        },
        tables: ServiceTables::build(specs.iter()),
    };
    e.apply(&content).expect("apply");

    assert_eq!(
        ask(&c, SocketAddr::new(vip4.into(), 80), 200_000).expect("vip v4"),
        "198.18.0.2 200000",
        "the pod sees the node address (Cluster SNAT); the client got its answer from the VIP"
    );
    assert_eq!(
        ask(&c, SocketAddr::new(vip6.into(), 80), 200_000).expect("vip v6"),
        "fd00:18::2 200000"
    );
    // P6: nothing serves this VIP: refused at once by the program's reset.
    let t0 = std::time::Instant::now();
    let err = ask(&c, SocketAddr::new(dead4.into(), 80), 10).expect_err("no endpoint");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    assert!(t0.elapsed() < Duration::from_secs(2));

    eprintln!("counters: {:?}", e.counters());
    assert!(counter(&*e, "new_flow") >= 2);
    assert!(counter(&*e, "reply_nat") > 0);
    assert!(counter(&*e, "reset") >= 1);
    // Release the servers' remaining accept.
    let _ = ask(&c, SocketAddr::new(pod_v4.into(), 8080), 1);
    srv4.join().unwrap();
    srv6.join().unwrap();

    e.unplug_pod("default/web").expect("unplug");
    assert!(
        !ip_out(&["-n", &p, "link", "show"]).contains("eth0"),
        "pod link removed"
    );
    assert!(!ip_out(&["-n", &n, "link", "show"]).contains(&link.host_ifname));
    e.plug_pod(&link).expect("plug after unplug");
    e.shutdown().expect("shutdown");
    assert!(!ip_out(&["-n", &p, "link", "show"]).contains("eth0"));
    assert_eq!(node_view(&n), before, "nic0 given back as it was");
}

fn wire_namespaces(node: &str) -> Vec<String> {
    let prefix = format!("sluice-w-{node}-{}-", std::process::id());
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn failed_start_and_drop_leave_nothing_behind() {
    if !can_run() {
        return;
    }
    let ns = client_and_node(&[]);
    let n = ns.name(1).to_string();
    let before = node_view(&n);

    let err = in_ns(&n, || {
        engine::start_emulated("nope0", "emu-fail").map(|_| ())
    })
    .expect_err("no such link");
    assert!(format!("{err:#}").contains("nope0"), "{err:#}");
    assert!(wire_namespaces("emu-fail").is_empty());

    // Dropped without shutdown: Drop gives nic0 back too.
    let e = start(&n, "emu-drop");
    assert_eq!(wire_namespaces("emu-drop").len(), 1);
    drop(e);
    assert!(wire_namespaces("emu-drop").is_empty());
    assert_eq!(node_view(&n), before);
}
