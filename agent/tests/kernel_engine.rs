//! The kernel engine's life cycle on a veth in namespaces this test creates
//! (needs root and iproute2; skipped otherwise) and the release BPF object
//! (`cargo xtask build-ebpf --release`, or `SLUICE_BPF_OBJECT`).
//!
//! - a failed start leaves no pin and no attachment behind;
//! - dropping the engine without a shutdown (what `kill -9` amounts to)
//!   leaves the program attached and everything pinned; a new engine on the
//!   same pin directory adopts it: the programs are replaced in place (still
//!   exactly one per hook), the pod's veth is the same link;
//! - a shutdown removes every pin, attachment, pod link and sysctl change;
//! - large states (10 000 Services x 10 endpoints, 20 000 x 1) apply with
//!   the default map sizes, one service's change moves only its windows,
//!   and windows freed by updates are reused; a state over the limit is
//!   refused by `check_capacity` before anything changes, naming the map,
//!   the limit and the flag.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use std::time::Instant;

use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData};
use aya::programs::{SchedClassifier, TcAttachType};
use sluice_agent::engine::kernel::maps::P;
use sluice_agent::engine::kernel::MapSizes;
use sluice_agent::engine::{self, Engine, MapContent, PodLink};
use sluice_datapath::host::{ServiceSpec, ServiceTables};
use sluice_datapath::maps::{
    v4_mapped, Endpoint, MaglevChunk, NodeConfig, ServiceKey, ServiceValue, MAGLEV_CHUNK,
    MAP_ENDPOINTS, MAP_MAGLEV, MAP_SERVICES, PROTO_TCP,
};
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
        self.start_with(MapSizes::default())
    }

    fn start_with(&self, sizes: MapSizes) -> Box<dyn Engine> {
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

/// `n` Services of one VIP and one TCP port each, with `eps` ready
/// endpoints; `generation` moves every endpoint address (a state in which
/// every service changed).
fn large(n: u32, eps: u32, generation: u8) -> MapContent {
    let t = Instant::now();
    let specs: Vec<ServiceSpec> = (0..n).map(|i| large_spec(i, eps, generation)).collect();
    let c = MapContent {
        node: content().node,
        tables: ServiceTables::build(&specs),
    };
    eprintln!("{n} x {eps}: content built in {:?}", t.elapsed());
    c
}

fn large_spec(i: u32, eps: u32, generation: u8) -> ServiceSpec {
    let v = i.to_be_bytes();
    ServiceSpec {
        key: ServiceKey {
            addr: v4_mapped([10, v[1], v[2], v[3]]),
            port: 80,
            proto: PROTO_TCP,
            _pad: 0,
        },
        ready: (0..eps)
            .map(|e| {
                let a = (i * eps + e).to_be_bytes();
                Endpoint {
                    addr: v4_mapped([100 + generation, a[1], a[2], a[3]]),
                    port: 8080,
                    flags: 0,
                    _pad: 0,
                }
            })
            .collect(),
        ..Default::default()
    }
}

/// The pinned service maps, read the way the program reads them.
struct Pinned {
    services: BpfHashMap<MapData, P<ServiceKey>, P<ServiceValue>>,
    endpoints: Array<MapData, P<Endpoint>>,
    maglev: Array<MapData, MaglevChunk>,
}

impl Pinned {
    fn open(pins: &Path) -> Pinned {
        let data = |m: &str| MapData::from_pin(pins.join(m)).expect("opening a pinned map");
        Pinned {
            services: BpfHashMap::try_from(Map::HashMap(data(MAP_SERVICES))).expect("hash"),
            endpoints: Array::try_from(Map::Array(data(MAP_ENDPOINTS))).expect("array"),
            maglev: Array::try_from(Map::Array(data(MAP_MAGLEV))).expect("array"),
        }
    }

    /// The kernel's `memlock` of each service-side map (bytes), printed.
    fn report_memory(pins: &Path) {
        use std::os::fd::{AsFd, AsRawFd};
        for m in [MAP_SERVICES, MAP_ENDPOINTS, MAP_MAGLEV] {
            let data = MapData::from_pin(pins.join(m)).expect("opening a pinned map");
            let fd = data.fd().as_fd().as_raw_fd();
            let info =
                std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
            let memlock = info
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .map_or("?", str::trim)
                .to_string();
            eprintln!("{m}: memlock {memlock} bytes");
        }
    }

    fn value(&self, k: &ServiceKey) -> Option<ServiceValue> {
        self.services.get(&P(*k), 0).ok().map(|v| v.0)
    }

    /// Service `k`'s Maglev table and the endpoint behind each entry, as a
    /// packet would find them; compared with what `content` says.
    fn assert_serves(&self, content: &MapContent, k: &ServiceKey) {
        let want = content.tables.services[k];
        let got = self.value(k).expect("the service is in the map");
        assert_eq!((got.ready, got.maglev_size), (want.ready, want.maglev_size));
        for i in 0..want.maglev_size {
            let flat = got.maglev_base + i;
            let chunk = self.maglev.get(&(flat / MAGLEV_CHUNK), 0).expect("chunk");
            let off = chunk[(flat % MAGLEV_CHUNK) as usize];
            assert_eq!(
                off,
                content.tables.maglev[(want.maglev_base + i) as usize],
                "Maglev entry {i} of {k:?}"
            );
            let ep = self.endpoints.get(&(got.ep_base + off), 0).expect("slot").0;
            assert_eq!(ep, content.tables.endpoints[(want.ep_base + off) as usize]);
        }
    }
}

/// Apply and say how long it took (printed, never asserted).
fn timed_apply(e: &mut Box<dyn Engine>, c: &MapContent, what: &str) {
    let t = Instant::now();
    e.check_capacity(c).expect("fits");
    e.apply(c)
        .unwrap_or_else(|err| panic!("{what}: apply failed: {err:#}"));
    eprintln!("{what}: applied in {:?}", t.elapsed());
}

fn sample_keys(c: &MapContent, every: usize) -> Vec<ServiceKey> {
    let mut keys: Vec<ServiceKey> = c
        .tables
        .services
        .iter()
        .filter(|(_, v)| v.ready > 0)
        .map(|(k, _)| *k)
        .collect();
    keys.sort_by_key(|k| k.addr);
    keys.into_iter().step_by(every).collect()
}

// Issue 8: the kernel engine holds what validation accepts.
// spec: P1, P2 — every sampled frontend of a large state resolves, through
// the kernel maps the program reads, to its Maglev table and endpoints.
#[test]
fn large_states_apply_and_freed_windows_are_reused() {
    if !can_run() {
        return;
    }
    let bed = Bed::new();
    let mut e = bed.start();

    // 10 000 Services x 10 endpoints: 10 240 000 Maglev entries in blocks,
    // with the default 16 777 216 a second copy of everything would not
    // fit, so the second apply below only works as windows are freed.
    let a = large(10_000, 10, 0);
    timed_apply(&mut e, &a, "10000 x 10");
    let pinned = Pinned::open(&bed.pins);
    Pinned::report_memory(&bed.pins);
    for k in sample_keys(&a, 997) {
        pinned.assert_serves(&a, &k);
    }

    // One service changes: only its windows move.
    let mut specs: Vec<ServiceSpec> = (0..10_000).map(|i| large_spec(i, 10, 0)).collect();
    specs[4242].ready.pop();
    let one = MapContent {
        node: a.node,
        tables: ServiceTables::build(&specs),
    };
    let before: Vec<(ServiceKey, ServiceValue)> = sample_keys(&a, 101)
        .into_iter()
        .map(|k| (k, pinned.value(&k).expect("there")))
        .collect();
    timed_apply(&mut e, &one, "10000 x 10, one service changed");
    let changed = specs[4242].key;
    pinned.assert_serves(&one, &changed);
    for (k, v) in &before {
        if *k != changed {
            assert_eq!(pinned.value(k).as_ref(), Some(v), "{k:?} did not move");
        }
    }

    // Every service changes: live plus changed is more than the array.
    let b = large(10_000, 10, 1);
    timed_apply(&mut e, &b, "10000 x 10, every service changed");
    for k in sample_keys(&b, 997) {
        pinned.assert_serves(&b, &k);
    }

    // Then a small state, then 20 000 one-endpoint Services.
    timed_apply(&mut e, &content(), "one service");
    assert!(pinned.value(&sample_keys(&b, 1)[1]).is_none(), "gone");
    let c = large(20_000, 1, 2);
    timed_apply(&mut e, &c, "20000 x 1");
    for k in sample_keys(&c, 1999) {
        pinned.assert_serves(&c, &k);
    }

    // A restarted agent adopts the windows: the same state moves nothing.
    drop(e);
    let t = Instant::now();
    let mut e = bed.start();
    eprintln!(
        "restart with 20000 x 1 pinned: started in {:?}",
        t.elapsed()
    );
    let before: Vec<(ServiceKey, ServiceValue)> = sample_keys(&c, 97)
        .into_iter()
        .map(|k| (k, pinned.value(&k).expect("there")))
        .collect();
    timed_apply(&mut e, &c, "20000 x 1 after a restart");
    for (k, v) in &before {
        assert_eq!(pinned.value(k).as_ref(), Some(v), "{k:?} was not rewritten");
    }
    e.shutdown().expect("shutdown");
}

#[test]
fn a_state_over_the_limit_is_refused_before_anything_changes() {
    if !can_run() {
        return;
    }
    let bed = Bed::new();
    // Room for 16 one-endpoint Services' Maglev tables.
    let sizes = MapSizes {
        maglev: 16 * 256,
        ..MapSizes::default()
    };
    let mut e = bed.start_with(sizes);
    let fits = large(16, 1, 0);
    e.check_capacity(&fits).expect("16 fit");
    e.apply(&fits).expect("apply");

    let over = large(17, 1, 0);
    let err = format!("{:#}", e.check_capacity(&over).expect_err("17 do not fit"));
    for part in [
        "SLUICE_MAGLEV",
        "4096",
        "4352",
        "--bpf-maglev-entries",
        "SLUICE_BPF_MAGLEV_ENTRIES",
    ] {
        assert!(err.contains(part), "{part:?} in {err}");
    }
    // An apply of it is refused the same way, and the maps keep the state.
    let err = format!("{:#}", e.apply(&over).expect_err("refused"));
    assert!(err.contains("--bpf-maglev-entries"), "{err}");
    let pinned = Pinned::open(&bed.pins);
    assert!(pinned.value(&large_spec(16, 1, 0).key).is_none());
    for k in sample_keys(&fits, 1) {
        pinned.assert_serves(&fits, &k);
    }

    // The other limits name their own map and flag.
    let eps = MapContent {
        node: fits.node,
        tables: ServiceTables::build(&[large_spec(0, 600_000, 0)]),
    };
    let err = format!("{:#}", e.check_capacity(&eps).expect_err("too many slots"));
    assert!(
        err.contains("SLUICE_ENDPOINTS") && err.contains("--bpf-endpoint-entries"),
        "{err}"
    );
    e.shutdown().expect("shutdown");
}
