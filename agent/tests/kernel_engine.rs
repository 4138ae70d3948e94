//! The kernel engine's life cycle on a veth in namespaces this test creates
//! (needs root and iproute2; skipped otherwise) and the release BPF object
//! (`cargo xtask build-ebpf --release`, or `SLUICE_BPF_OBJECT`).
//!
//! - a failed start leaves no pin and no attachment behind;
//! - dropping the engine without a shutdown (what `kill -9` amounts to)
//!   leaves the program attached and everything pinned; a new engine on the
//!   same pin directory adopts it: the programs are replaced in place (still
//!   exactly one per hook), the pod's veth is the same link;
//! - a shutdown removes every pin, attachment, pod link and sysctl change.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use aya::programs::{SchedClassifier, TcAttachType};
use sluice_agent::engine::{self, Engine, MapContent, PodLink};
use sluice_datapath::host::{ServiceSpec, ServiceTables};
use sluice_datapath::maps::{v4_mapped, Endpoint, NodeConfig, ServiceKey, PROTO_TCP};
use sluice_datapath::{Event, Verdict};

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
            .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: needs root and iproute2");
    }
    ok
}

fn object() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_BPF_OBJECT") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bpf/bpfel-unknown-none/release/sluice");
    assert!(
        p.is_file(),
        "no BPF object at {}: run `cargo xtask build-ebpf --release` (cargo xtask test does)",
        p.display()
    );
    p
}

/// A node namespace with `nic0` (veth to a client namespace) and a pod
/// namespace; all deleted on drop, with the pin directory.
struct Bed {
    node: String,
    client: String,
    pod: String,
    pins: PathBuf,
}

impl Bed {
    fn new() -> Bed {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let base = format!("sl-kern-{}-{n}", std::process::id());
        let b = Bed {
            node: format!("{base}-n"),
            client: format!("{base}-c"),
            pod: format!("{base}-p"),
            pins: Path::new("/sys/fs/bpf/sluice").join(format!("{base}-n")),
        };
        for ns in [&b.node, &b.client, &b.pod] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", "nic0", "netns", &b.node, "type", "veth", "peer", "name", "eth0",
            "netns", &b.client,
        ]);
        ip(&["-n", &b.node, "addr", "add", "198.18.0.2/24", "dev", "nic0"]);
        ip(&["-n", &b.node, "link", "set", "nic0", "up"]);
        ip(&["-n", &b.client, "link", "set", "eth0", "up"]);
        b
    }

    fn pod_link(&self) -> PodLink {
        PodLink {
            key: "default/web-1".into(),
            netns: Path::new("/run/netns").join(&self.pod),
            pod_ifname: "eth0".into(),
            host_ifname: "slpk0000001".into(),
            ipv4: Some(Ipv4Addr::new(198, 19, 1, 10)),
            ipv6: Some("fd00:19:1::10".parse().expect("literal")),
            gateway4: Some(Ipv4Addr::new(198, 19, 1, 1)),
        }
    }

    /// Run `f` on a thread inside the node namespace.
    fn in_node<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = Path::new("/run/netns").join(&self.node);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("open netns");
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("thread in namespace")
    }

    fn start(&self) -> Box<dyn Engine> {
        let (obj, pins) = (object(), self.pins.clone());
        self.in_node(move || engine::start_kernel("nic0", "kern", &obj, &pins, sizes))
            .expect("the kernel engine starts")
    }

    /// Programs attached (TCX) at nic0 ingress and egress.
    fn attached(&self, ifname: &'static str) -> (usize, usize) {
        self.in_node(move || {
            let n = |t| {
                SchedClassifier::query_tcx(ifname, t)
                    .map(|(_, p)| p.len())
                    .unwrap_or(0)
            };
            (n(TcAttachType::Ingress), n(TcAttachType::Egress))
        })
    }

    fn sysctl(&self, key: &str) -> String {
        let path = format!("/proc/sys/net/ipv4/conf/nic0/{key}");
        self.in_node(move || std::fs::read_to_string(path).unwrap_or_default())
    }

    fn host_link_index(&self) -> Option<String> {
        ip_out(&["-n", &self.node, "-o", "link", "show", "dev", "slpk0000001"])
            .split(':')
            .next()
            .map(str::to_string)
            .filter(|s| !s.is_empty())
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for ns in [&self.pod, &self.client, &self.node] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if let Ok(d) = std::fs::read_dir(&self.pins) {
            for e in d.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.pins);
    }
}

fn content() -> MapContent {
    let ep = Endpoint {
        addr: v4_mapped([198, 19, 1, 10]),
        port: 8080,
        flags: 0,
        _pad: 0,
    };
    let spec = ServiceSpec {
        key: ServiceKey {
            addr: v4_mapped([198, 18, 100, 1]),
            port: 80,
            proto: PROTO_TCP,
            _pad: 0,
        },
        ready: vec![ep],
        ..Default::default()
    };
    MapContent {
        node: NodeConfig {
            addr4: v4_mapped([198, 18, 0, 2]),
            snat_port_min: 61_000,
            snat_port_max: 65_535,
            ..Default::default()
        },
        tables: ServiceTables::build(&[spec]),
    }
}

#[test]
fn failed_start_leaves_nothing_behind() {
    if !can_run() {
        return;
    }
    let bed = Bed::new();
    let bad = std::env::temp_dir().join(format!("sluice-bad-{}.o", std::process::id()));
    std::fs::write(&bad, b"not an ELF object").expect("writing a bad object");
    let pins = bed.pins.clone();
    let b2 = bad.clone();
    let err = bed
        .in_node(move || {
            engine::start_kernel("nic0", "kern", &b2, &pins, MapSizes::default()).map(|_| ())
        })
        .expect_err("a bad object is refused");
    let _ = std::fs::remove_file(&bad);
    assert!(format!("{err:#}").contains("sluice-bad"), "{err:#}");

    let (obj, pins) = (object(), bed.pins.clone());
    let err = bed
        .in_node(move || {
            engine::start_kernel("nope0", "kern", &obj, &pins, MapSizes::default()).map(|_| ())
        })
        .expect_err("no such link");
    assert!(format!("{err:#}").contains("nope0"), "{err:#}");
    assert!(!bed.pins.exists(), "no pin directory left");
    assert_eq!(bed.attached("nic0"), (0, 0));
}

#[test]
fn drop_keeps_the_datapath_restart_adopts_shutdown_removes_all() {
    if !can_run() {
        return;
    }
    let bed = Bed::new();
    let before: Vec<String> = ["rp_filter", "send_redirects", "accept_local"]
        .iter()
        .map(|k| bed.sysctl(k))
        .collect();
    let pod = bed.pod_link();

    let mut e = bed.start();
    assert_eq!(e.kind(), "kernel");
    e.apply(&content()).expect("apply");
    e.plug_pod(&pod).expect("plug");
    assert_eq!(bed.attached("nic0"), (1, 1));
    assert_eq!(bed.attached("slpk0000001"), (1, 0));
    let labels: Vec<&str> = e.counters().iter().map(|(l, _)| *l).collect();
    let names: Vec<&str> = Event::ALL
        .iter()
        .map(|e| e.name())
        .chain(Verdict::KINDS.iter().map(|v| v.name()))
        .collect();
    assert_eq!(labels, names, "the emulated engine's labels");
    for m in [
        "SLUICE_SERVICES",
        "SLUICE_ENDPOINTS",
        "SLUICE_MAGLEV",
        "SLUICE_CT",
        "SLUICE_AFFINITY",
        "SLUICE_NODE",
        "SLUICE_EVENTS",
        "link-nic0-ingress",
        "link-nic0-egress",
        "link-slpk0000001-ingress",
    ] {
        assert!(bed.pins.join(m).exists(), "{m} pinned");
    }
    let link = bed.host_link_index().expect("the pod's host link");

    // What kill -9 amounts to: no shutdown runs.
    drop(e);
    assert_eq!(
        bed.attached("nic0"),
        (1, 1),
        "still attached without an agent"
    );
    assert!(bed.pins.join("SLUICE_CT").exists());

    let mut e = bed.start();
    e.apply(&content()).expect("apply again");
    e.plug_pod(&pod).expect("plug again");
    assert_eq!(bed.attached("nic0"), (1, 1), "replaced, not duplicated");
    assert_eq!(bed.attached("slpk0000001"), (1, 0));
    assert_eq!(
        bed.host_link_index(),
        Some(link),
        "the pod's veth was adopted, not recreated"
    );

    e.shutdown().expect("shutdown");
    assert!(!bed.pins.exists(), "pin directory removed");
    assert_eq!(bed.attached("nic0"), (0, 0), "detached");
    assert_eq!(bed.host_link_index(), None, "pod link removed");
    let pod_links = ip_out(&["-n", &bed.pod, "-o", "link", "show"]);
    assert_eq!(
        pod_links.lines().count(),
        1,
        "only lo in the pod: {pod_links}"
    );
    let after: Vec<String> = ["rp_filter", "send_redirects", "accept_local"]
        .iter()
        .map(|k| bed.sysctl(k))
        .collect();
    assert_eq!(after, before, "nic0's sysctls restored");
}
