//! `cargo xtask bench`: whole paths, one after the other, on the same veth
//! topology and with the same traffic generators.
//!
//! ```text
//!   client ns (eth0 198.18.0.2) ── fabric ns (br0) ── node ns (nic0 198.18.0.11) ── pod ns (eth0 198.19.1.10/32)
//! ```
//!
//! Configurations:
//! - `routing`: plain kernel forwarding, the client addresses the pod IP (the
//!   ceiling every other result is divided by);
//! - `iptables`: kube-proxy's iptables `nat` rules (KUBE-SERVICES →
//!   KUBE-EXT/KUBE-SVC → KUBE-SEP with DNAT, MASQUERADE for Cluster policy)
//!   in the node namespace;
//! - `nftables`: a kube-proxy-nftables-like ruleset (one verdict map lookup
//!   → service chain → endpoint chain with DNAT, masquerade) in the node;
//! - `kernel`: `sluice-agent --datapath kernel`;
//! - `emulated`: `sluice-agent --datapath emulated`.
//!
//! The three baselines build the topology here, wired the way the agent wires
//! a pod (veth, /32 address, gateway 198.19.1.1); the two Sluice ones use the
//! test bed's [`Cluster`] with one node and one pod. Metrics: iperf3 TCP with
//! one and several streams, iperf3 UDP with 64-byte payloads (received
//! packets per second), and the time of a connect plus a one-byte request and
//! answer, p50/p99, with 1, 1 000 and 10 000 Services installed (only one of
//! them gets traffic). Nothing is asserted: this is a measurement.
//!
//! Everything lives behind the test bed's guards (namespaces, processes,
//! agents), so it is torn down on error and on Ctrl-C as well.

use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use serde_json::Value;
use sluice_tests::netns::{spawn_in, stop_child};
use sluice_tests::{Cluster, ClusterSpec, EndpointSpec, Engine, Netns, ServiceSpec};

/// iperf3's port (TCP control and data, UDP data), the same on the VIP and
/// on the pod.
const IPERF_PORT: u16 = 5201;
/// Service port and pod port of the connect-latency server.
const CONNECT_PORT: u16 = 80;
const CONNECT_TARGET: u16 = 7000;
/// Upper bound of one connect-latency loop.
const CONNECT_LOOP_LIMIT: Duration = Duration::from_secs(15);
/// Sluice keeps a closed flow's SNAT port for 70 s (closing timeout 10 s,
/// then the endpoint's TIME_WAIT, 60 s) out of 4 536 ports per endpoint, and
/// the connect server closes first. Three loops of 2 000 connects in a row
/// would leave the last one mostly held ports, each a TIME_WAIT collision
/// at the pod (a reset and a SYN retransmit for the client). Loops against
/// the same backend are kept this far apart so each measures a node whose
/// ports are free, not the port space (see docs/benchmarks.md).
const SLUICE_CT_COOLDOWN: Duration = Duration::from_secs(71);

const CLIENT_IP: &str = "198.18.0.2";
const NODE_IP: &str = "198.18.0.11";
const POD_IP: &str = "198.19.1.10";
const POD_GW: &str = "198.19.1.1";
const POD_CIDR: &str = "198.19.1.0/24";
/// The Service that gets the traffic (Family::V4.vip(1) in the test bed).
const VIP: &str = "198.18.100.1";
const VIP_RANGE: &str = "198.18.100.0/24";
/// Its ClusterIP (kube-proxy writes a rule for it as well).
const CLUSTER_IP: &str = "198.19.200.1";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Config {
    /// Plain kernel forwarding to the pod IP, no NAT (the ceiling).
    Routing,
    /// kube-proxy-style iptables DNAT + MASQUERADE.
    Iptables,
    /// kube-proxy-nftables-style map-based DNAT + masquerade.
    Nftables,
    /// sluice-agent --datapath kernel.
    Kernel,
    /// sluice-agent --datapath emulated.
    Emulated,
}

impl Config {
    const ALL: [Config; 5] = [
        Config::Routing,
        Config::Iptables,
        Config::Nftables,
        Config::Kernel,
        Config::Emulated,
    ];

    fn label(self) -> &'static str {
        match self {
            Config::Routing => "kernel routing, no NAT (ceiling)",
            Config::Iptables => "iptables DNAT (kube-proxy)",
            Config::Nftables => "nftables DNAT (kube-proxy nftables-like)",
            Config::Kernel => "Sluice kernel engine",
            Config::Emulated => "Sluice emulated engine",
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchOpts {
    /// Seconds per iperf3 measurement.
    #[arg(long)]
    pub duration: Option<u64>,
    /// Fewer Services (1 and 1 000), 2 s measurements, 500 connects.
    #[arg(long)]
    pub quick: bool,
    /// Only these configurations (comma-separated); the ceiling (`routing`)
    /// always runs, every ratio needs it.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Config>,
    /// Connections per connect-latency measurement.
    #[arg(long)]
    pub connects: Option<usize>,
    /// Streams of the multi-stream TCP measurement.
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// Print the table only; leave docs/benchmarks.md alone.
    #[arg(long)]
    pub no_write: bool,
}

struct Plan {
    duration: u64,
    connects: usize,
    streams: u32,
    counts: Vec<usize>,
    configs: Vec<Config>,
}

// --- signals ----------------------------------------------------------------

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

fn install_signal_handlers() -> Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(sig, &action) }.with_context(|| format!("installing {sig} handler"))?;
    }
    Ok(())
}

// --- results ----------------------------------------------------------------

/// One measured number, or why there is none.
#[derive(Debug, Clone)]
enum M<T> {
    Ok(T),
    Err(String),
    Skipped,
}

impl<T> M<T> {
    fn from(r: Result<T>) -> M<T> {
        match r {
            Ok(v) => M::Ok(v),
            Err(e) => M::Err(short_err(&e)),
        }
    }
    fn ok(&self) -> Option<&T> {
        match self {
            M::Ok(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Latency {
    p50_us: f64,
    p99_us: f64,
    ok: usize,
    failed: usize,
    first_err: Option<String>,
}

#[derive(Debug, Clone)]
struct ConfigResult {
    config: Config,
    /// Set when the configuration could not run at all.
    unavailable: Option<String>,
    tcp1_gbps: M<f64>,
    tcpn_gbps: M<f64>,
    udp_pps: M<f64>,
    /// Per Service count: (count, time to apply, latency).
    connect: Vec<(usize, M<f64>, M<Latency>)>,
}

impl ConfigResult {
    fn new(config: Config) -> ConfigResult {
        ConfigResult {
            config,
            unavailable: None,
            tcp1_gbps: M::Skipped,
            tcpn_gbps: M::Skipped,
            udp_pps: M::Skipped,
            connect: Vec::new(),
        }
    }
}

fn short_err(e: &anyhow::Error) -> String {
    let s = format!("{e:#}");
    let line = s.lines().next().unwrap_or("").trim().to_string();
    truncate(&line, 160)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

// --- entry ------------------------------------------------------------------

pub fn run(opts: BenchOpts) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the bench creates network namespaces: run it as root");
    }
    install_signal_handlers()?;
    let mut configs: Vec<Config> = if opts.only.is_empty() {
        Config::ALL.to_vec()
    } else {
        let mut c = opts.only.clone();
        c.push(Config::Routing);
        c
    };
    configs.sort();
    configs.dedup();
    let plan = Plan {
        duration: opts
            .duration
            .unwrap_or(if opts.quick { 2 } else { 3 })
            .max(1),
        connects: opts
            .connects
            .unwrap_or(if opts.quick { 500 } else { 2000 })
            .max(10),
        streams: opts.streams.max(2),
        counts: if opts.quick {
            vec![1, 1000]
        } else {
            vec![1, 1000, 10000]
        },
        configs,
    };
    for tool in ["iperf3", "iptables-restore", "nft", "ip"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            bail!("{tool} is missing: run `cargo xtask setup` (or apt-get install -y iperf3 iptables nftables)");
        }
    }
    let needs_agent = plan
        .configs
        .iter()
        .any(|c| matches!(c, Config::Kernel | Config::Emulated));
    let agent = if needs_agent {
        Some(build_agent()?)
    } else {
        None
    };
    check_interrupted()?;

    let machine = machine_note();
    let started = Instant::now();
    println!("==> bench: {}", machine.one_line);
    println!(
        "    {} s per iperf3 run, {} connects per latency point, Services: {:?}",
        plan.duration, plan.connects, plan.counts
    );

    let mut results = Vec::new();
    for &config in &plan.configs {
        check_interrupted()?;
        println!("==> {}", config.label());
        let r = match config {
            Config::Routing | Config::Iptables | Config::Nftables => run_baseline(config, &plan),
            Config::Kernel => run_sluice(Engine::Kernel, config, &plan, agent.as_deref()),
            Config::Emulated => run_sluice(Engine::Emulated, config, &plan, agent.as_deref()),
        };
        check_interrupted()?;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                let full = format!("{e:#}");
                for l in full.lines().take(8) {
                    println!("    | {}", strip_ansi(l));
                }
                let mut r = ConfigResult::new(config);
                r.unavailable = Some(short_err(&e));
                r
            }
        };
        if let Some(why) = &r.unavailable {
            println!("    {}: not available ({why})", engine_word(config));
        }
        results.push(r);
    }
    let load_end = loadavg();
    let elapsed = started.elapsed();

    let tables = render(&results, &plan);
    println!();
    println!("{tables}");
    println!("(total {:.0} s)", elapsed.as_secs_f64());

    if !opts.no_write {
        let section = doc_section(&opts, &plan, &machine, &load_end, elapsed, &tables);
        let path = workspace_root().join("docs").join("benchmarks.md");
        write_section(&path, &section)?;
        println!("==> wrote {}", path.display());
    }
    Ok(())
}

fn engine_word(c: Config) -> &'static str {
    match c {
        Config::Kernel => "kernel engine",
        Config::Emulated => "emulated engine",
        _ => c.label(),
    }
}

pub(crate) fn workspace_root() -> PathBuf {
    if let Some(root) = std::env::var_os("SLUICE_WORKSPACE") {
        return PathBuf::from(root);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// `cargo build --release -p sluice-agent` (a debug build would measure the
/// compiler, not the engine); `SLUICE_AGENT_BIN` names a prebuilt agent.
pub(crate) fn build_agent() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("SLUICE_AGENT_BIN") {
        let bin = PathBuf::from(bin);
        println!("==> using SLUICE_AGENT_BIN={}", bin.display());
        return Ok(bin);
    }
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("==> cargo build --release -p sluice-agent");
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "sluice-agent"])
        .current_dir(&root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p sluice-agent failed ({status})");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("release").join("sluice-agent");
    if !bin.is_file() {
        bail!("{} missing after the build", bin.display());
    }
    Ok(bin)
}

// --- topology for the baselines ---------------------------------------------

/// client — fabric bridge — node — pod, as the test bed and the agent build
/// them (every veth with TX checksum offload, TSO and GSO off).
struct Topo {
    // Drop order: pod, node, client, fabric.
    pod: Netns,
    node: Netns,
    client: Netns,
    _fabric: Netns,
}

impl Topo {
    fn build() -> Result<Topo> {
        let fabric = Netns::new("bn-f")?;
        let client = Netns::new("bn-c")?;
        let node = Netns::new("bn-n1")?;
        let pod = Netns::new("bn-p10")?;
        fabric.bridge("br0")?;
        client.veth_to("eth0", &fabric, "c0")?;
        fabric.enslave("c0", "br0")?;
        client.addr_add("eth0", &format!("{CLIENT_IP}/24"))?;
        node.veth_to("nic0", &fabric, "n1")?;
        fabric.enslave("n1", "br0")?;
        node.addr_add("nic0", &format!("{NODE_IP}/24"))?;
        node.sysctl("net.ipv4.ip_forward", "1")?;
        // The pod link as the agent makes it: /32 on the pod, the gateway
        // address on the node end, a /32 route to the pod.
        node.veth_to("slpbench", &pod, "eth0")?;
        pod.addr_add("eth0", &format!("{POD_IP}/32"))?;
        pod.ip(&["route", "replace", POD_GW, "dev", "eth0", "scope", "link"])?;
        pod.ip(&["route", "replace", "default", "via", POD_GW, "dev", "eth0"])?;
        node.addr_add("slpbench", &format!("{POD_GW}/32"))?;
        node.ip(&[
            "route",
            "replace",
            &format!("{POD_IP}/32"),
            "dev",
            "slpbench",
        ])?;
        client.route_via(POD_CIDR, NODE_IP)?;
        client.route_via(VIP_RANGE, NODE_IP)?;
        Ok(Topo {
            pod,
            node,
            client,
            _fabric: fabric,
        })
    }
}

fn run_baseline(config: Config, plan: &Plan) -> Result<ConfigResult> {
    let topo = Topo::build()?;
    let mut r = ConfigResult::new(config);
    let (ip_dst, lat_dst): (Ipv4Addr, SocketAddr) = match config {
        Config::Routing => (
            POD_IP.parse()?,
            SocketAddr::new(POD_IP.parse()?, CONNECT_TARGET),
        ),
        _ => (VIP.parse()?, SocketAddr::new(VIP.parse()?, CONNECT_PORT)),
    };
    let apply = |n: usize| -> Result<f64> {
        match config {
            Config::Routing => Ok(0.0),
            Config::Iptables => apply_iptables(&topo.node, n),
            Config::Nftables => apply_nftables(&topo.node, n),
            _ => bail!("not a baseline"),
        }
    };
    let first = plan.counts.first().copied().unwrap_or(1);
    let t_apply = apply(first)?;
    measure(
        &mut r,
        plan,
        &topo.client,
        &topo.pod,
        ip_dst,
        lat_dst,
        t_apply,
        apply,
        None,
    )?;
    Ok(r)
}

// --- Sluice -----------------------------------------------------------------

fn sluice_spec() -> ClusterSpec {
    ClusterSpec::new(1).pod("bench", 1).service(
        ServiceSpec::lb("bench", 1)
            .tcp("iperf", IPERF_PORT, IPERF_PORT)
            .udp("iperf-udp", IPERF_PORT, IPERF_PORT)
            .tcp("connect", CONNECT_PORT, CONNECT_TARGET)
            .endpoint(EndpointSpec::ready("bench")),
    )
}

fn run_sluice(
    engine: Engine,
    config: Config,
    plan: &Plan,
    agent: Option<&Path>,
) -> Result<ConfigResult> {
    let agent = agent.ok_or_else(|| anyhow!("no agent binary"))?;
    if engine == Engine::Kernel {
        // The object the agent loads (found next to target/release).
        build_ebpf()?;
    }
    let cluster = match Cluster::start_with("bn", engine, sluice_spec(), Some(agent.to_path_buf()))
    {
        Ok(c) => c,
        Err(e) => bail!("{}", agent_failure(&e)),
    };
    if let Some(dp) = cluster.agent_status(1).and_then(|s| s.datapath) {
        println!("    agent datapath: {dp}");
        if dp != engine.as_str() {
            bail!("the agent runs the {dp} datapath, not {}", engine.as_str());
        }
    }
    let pod = cluster
        .pod("bench")
        .ok_or_else(|| anyhow!("no pod namespace"))?;
    let client = cluster.client();
    let base_yaml = cluster.manifests(1)?;
    let state = cluster.dir().join("node-1.yaml");
    let mut r = ConfigResult::new(config);
    let vip: Ipv4Addr = VIP.parse()?;
    let first = plan.counts.first().copied().unwrap_or(1);
    let t_apply = apply_sluice(&cluster, &state, &base_yaml, first)?;
    measure(
        &mut r,
        plan,
        client,
        pod,
        vip,
        SocketAddr::new(vip.into(), CONNECT_PORT),
        t_apply,
        |n| apply_sluice(&cluster, &state, &base_yaml, n),
        Some(SLUICE_CT_COOLDOWN),
    )?;
    drop(cluster);
    Ok(r)
}

/// `cargo xtask build-ebpf --release` (this same binary), its output kept
/// in a file; on failure, the compiler's reason in one line.
pub(crate) fn build_ebpf() -> Result<()> {
    println!("    cargo xtask build-ebpf --release");
    let exe = std::env::current_exe().context("current_exe")?;
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let log = dir.join(format!("{}-build-ebpf.log", std::process::id()));
    let out = fs::File::create(&log)?;
    let status = Command::new(exe)
        .args(["build-ebpf", "--release"])
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .status()
        .context("running xtask build-ebpf")?;
    let text = fs::read_to_string(&log).unwrap_or_default();
    let _ = fs::remove_file(&log);
    if status.success() {
        return Ok(());
    }
    let why = if text.contains("BPF stack limit is exceeded") {
        "LLVM: the BPF stack limit (512 B) is exceeded in sluice_datapath::process".to_string()
    } else {
        text.lines()
            .map(|l| strip_ansi(l).trim().to_string())
            .rfind(|l| l.starts_with("error") || l.starts_with("Error"))
            .unwrap_or_else(|| format!("exit {status}"))
    };
    bail!("the eBPF object does not build ({why})")
}

/// The agent's own words for why it did not start, in one line.
fn agent_failure(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    // The log tail may end in a backtrace (RUST_BACKTRACE): skip frames.
    let lines: Vec<String> = text
        .lines()
        .map(|l| strip_ansi(l).trim().to_string())
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !l.starts_with("Stack backtrace")
                && l.split_once(':')
                    .is_none_or(|(n, _)| n.parse::<u32>().is_err())
        })
        .collect();
    let pick = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Error:"))
        .map(|l| l.trim_start_matches("Error:").trim().to_string())
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| {
                    let l = l.to_ascii_lowercase();
                    l.contains("error") || l.contains("not available") || l.contains("failed")
                })
                .cloned()
        })
        .unwrap_or_else(|| lines.first().cloned().unwrap_or_default());
    truncate(&pick, 200)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for ch in s.chars() {
        if esc {
            if ch.is_ascii_alphabetic() {
                esc = false;
            }
        } else if ch == '\u{1b}' {
            esc = true;
        } else {
            out.push(ch);
        }
    }
    out
}

/// Rewrite node-1's state file with `n - 1` generated Services on top of the
/// measured one and wait until the agent applied it; seconds it took.
fn apply_sluice(cluster: &Cluster, state: &Path, base: &str, n: usize) -> Result<f64> {
    let mut yaml = String::with_capacity(base.len() + n * 900);
    yaml.push_str(base);
    for i in 1..n {
        let vip = dummy_vip(i);
        // Line by line: a `\` continuation would eat the YAML indentation.
        let doc = [
            "---".to_string(),
            "apiVersion: v1".into(),
            "kind: Service".into(),
            "metadata:".into(),
            format!("  name: filler-{i}"),
            "  namespace: default".into(),
            "spec:".into(),
            "  type: LoadBalancer".into(),
            "  externalTrafficPolicy: Cluster".into(),
            "  ipFamilies: [IPv4]".into(),
            "  ipFamilyPolicy: SingleStack".into(),
            "  ports:".into(),
            "  - name: http".into(),
            format!("    port: {CONNECT_PORT}"),
            format!("    targetPort: {CONNECT_TARGET}"),
            "    protocol: TCP".into(),
            "status:".into(),
            "  loadBalancer:".into(),
            "    ingress:".into(),
            format!("    - ip: {vip}"),
            "---".into(),
            "apiVersion: discovery.k8s.io/v1".into(),
            "kind: EndpointSlice".into(),
            "metadata:".into(),
            format!("  name: filler-{i}-v4"),
            "  namespace: default".into(),
            "  labels:".into(),
            format!("    kubernetes.io/service-name: filler-{i}"),
            "addressType: IPv4".into(),
            "ports:".into(),
            "- name: http".into(),
            format!("  port: {CONNECT_TARGET}"),
            "  protocol: TCP".into(),
            "endpoints:".into(),
            format!("- addresses: [\"{POD_IP}\"]"),
            "  conditions: {ready: true, serving: true, terminating: false}".into(),
            "  nodeName: node-1".into(),
            "  targetRef: {kind: Pod, name: bench, namespace: default}".into(),
        ];
        for l in doc {
            yaml.push_str(&l);
            yaml.push('\n');
        }
    }
    let before = cluster.agent_status(1);
    let prev = before.as_ref().map(|s| s.generation).unwrap_or(0);
    let prev_err = before.and_then(|s| s.error);
    let t = Instant::now();
    let tmp = state.with_extension("bench.tmp");
    fs::write(&tmp, &yaml).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, state).with_context(|| format!("renaming to {}", state.display()))?;
    if n == 1 && yaml == base && prev >= 1 {
        // Unchanged file: nothing to wait for.
        return Ok(0.0);
    }
    let deadline = t + Duration::from_secs(120);
    loop {
        check_interrupted()?;
        if let Some(s) = cluster.agent_status(1) {
            if s.generation > prev {
                return Ok(t.elapsed().as_secs_f64());
            }
            if let Some(e) = s.error.filter(|e| Some(e) != prev_err.as_ref()) {
                bail!("agent rejected {n} Services: {e}");
            }
        }
        if Instant::now() > deadline {
            bail!("agent did not apply {n} Services within 120 s");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// VIP of generated Service `i` (1-based): 198.18.128.0/17.
fn dummy_vip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 128, 0)) + i as u32)
}

/// ClusterIP of generated Service `i`: 198.19.128.0/17.
fn dummy_cluster_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 128, 0)) + i as u32)
}

// --- measurements -----------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn measure(
    r: &mut ConfigResult,
    plan: &Plan,
    client: &Netns,
    pod: &Netns,
    dst: Ipv4Addr,
    lat_dst: SocketAddr,
    first_apply: f64,
    mut apply: impl FnMut(usize) -> Result<f64>,
    cooldown: Option<Duration>,
) -> Result<()> {
    pod.spawn(
        &["iperf3", "-s", "-p", &IPERF_PORT.to_string()],
        Stdio::null(),
        Stdio::null(),
    )?;
    let server = ConnectServer::start(pod.name(), CONNECT_TARGET)?;
    wait_reachable(client.name(), SocketAddr::new(dst.into(), IPERF_PORT))?;

    r.tcp1_gbps = best_of_2(|| iperf_tcp(client.name(), dst, 1, plan.duration));
    println!("    TCP 1 stream: {}", fmt_gbps(&r.tcp1_gbps));
    check_interrupted()?;
    r.tcpn_gbps = best_of_2(|| iperf_tcp(client.name(), dst, plan.streams, plan.duration));
    println!(
        "    TCP {} streams: {}",
        plan.streams,
        fmt_gbps(&r.tcpn_gbps)
    );
    check_interrupted()?;
    r.udp_pps = best_of_2(|| iperf_udp(client.name(), dst, plan.duration));
    println!("    UDP 64 B: {}", fmt_kpps(&r.udp_pps));
    check_interrupted()?;

    let mut last_loop: Option<Instant> = None;
    for (k, &n) in plan.counts.iter().enumerate() {
        let t_apply = if k == 0 {
            M::Ok(first_apply)
        } else {
            M::from(apply(n))
        };
        check_interrupted()?;
        if let M::Err(e) = &t_apply {
            println!("    {n} Services: could not apply ({e})");
            r.connect.push((n, t_apply, M::Skipped));
            continue;
        }
        if let (Some(cd), Some(at)) = (cooldown, last_loop) {
            let since = at.elapsed();
            if since < cd {
                thread::sleep(cd - since);
            }
        }
        // Let the previous traffic and the rule/state change settle.
        thread::sleep(Duration::from_secs(1));
        check_interrupted()?;
        let lat = M::from(connect_loop(client.name(), lat_dst, plan.connects));
        last_loop = Some(Instant::now());
        println!(
            "    {n} Services (applied in {}): connect {}",
            fmt_secs(&t_apply),
            fmt_lat(&lat)
        );
        r.connect.push((n, t_apply, lat));
    }
    drop(server);
    Ok(())
}

/// The better of two runs: on a shared machine a run loses, never gains,
/// from what else is running.
fn best_of_2(mut f: impl FnMut() -> Result<f64>) -> M<f64> {
    let a = f();
    if interrupted() {
        return M::from(a);
    }
    let b = f();
    match (a, b) {
        (Ok(x), Ok(y)) => M::Ok(x.max(y)),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => M::Ok(x),
        (Err(e), Err(_)) => M::Err(short_err(&e)),
    }
}

/// Until a TCP connect to `dst` from `ns` succeeds (at most 10 s).
fn wait_reachable(ns: &str, dst: SocketAddr) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        check_interrupted()?;
        let ok = sluice_tests::in_ns(ns, move || {
            TcpStream::connect_timeout(&dst, Duration::from_millis(500)).is_ok()
        })?;
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{dst} not reachable from the client within 10 s");
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Run `args` in `ns` with stdout to a file, bounded by `limit`; stdout.
fn run_bounded(ns: &str, args: &[&str], limit: Duration) -> Result<String> {
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let out_path = dir.join(format!("{}-{}.out", std::process::id(), unique()));
    let err_path = out_path.with_extension("err");
    let out = fs::File::create(&out_path)?;
    let err = fs::File::create(&err_path)?;
    let mut child = spawn_in(ns, args, Stdio::from(out), Stdio::from(err))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if interrupted() || Instant::now() > deadline {
            stop_child(&mut child, Duration::from_secs(1));
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let stdout = fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    match status {
        None if interrupted() => bail!("interrupted"),
        None => bail!("`{}` did not finish within {limit:?}", args.join(" ")),
        Some(st) if !st.success() => {
            // iperf3 -J reports its errors in the JSON.
            let msg = serde_json::from_str::<Value>(&stdout)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| stderr.trim().to_string());
            bail!("`{}` failed ({st}): {msg}", args[0])
        }
        Some(_) => Ok(stdout),
    }
}

fn unique() -> u64 {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn iperf(ns: &str, dst: Ipv4Addr, extra: &[&str], duration: u64) -> Result<Value> {
    let dst = dst.to_string();
    let port = IPERF_PORT.to_string();
    let t = duration.to_string();
    let mut args = vec![
        "iperf3",
        "-c",
        &dst,
        "-p",
        &port,
        "-t",
        &t,
        "-J",
        "--connect-timeout",
        "3000",
    ];
    // Client on CPU 0, server on CPU 1: the same placement in every
    // configuration (forwarding runs in the sender's softirq, an agent's
    // relay thread wherever the scheduler puts it).
    if thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        >= 2
    {
        args.extend_from_slice(&["-A", "0,1"]);
    }
    args.extend_from_slice(extra);
    let mut last = None;
    // One retry: the server may be between two tests.
    for _ in 0..2 {
        match run_bounded(ns, &args, Duration::from_secs(duration + 20)) {
            Ok(out) => {
                return serde_json::from_str(&out).context("parsing iperf3 -J output");
            }
            Err(e) => {
                check_interrupted()?;
                last = Some(e);
                thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Err(last.unwrap_or_else(|| anyhow!("iperf3 did not run")))
}

fn iperf_tcp(ns: &str, dst: Ipv4Addr, streams: u32, duration: u64) -> Result<f64> {
    let p = streams.to_string();
    let v = iperf(ns, dst, &["-P", &p], duration)?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e9)
        .ok_or_else(|| anyhow!("no end.sum_received.bits_per_second in iperf3 output"))
}

/// Received packets per second of a UDP run with 64-byte payloads and no
/// rate limit (`-b 0`).
fn iperf_udp(ns: &str, dst: Ipv4Addr, duration: u64) -> Result<f64> {
    let v = iperf(ns, dst, &["-u", "-l", "64", "-b", "0"], duration)?;
    // The receiver's view (iperf3 ≥ 3.10), else the combined summary.
    let sum = if v["end"]["sum_received"].is_object() {
        &v["end"]["sum_received"]
    } else {
        &v["end"]["sum"]
    };
    let packets = sum["packets"]
        .as_f64()
        .ok_or_else(|| anyhow!("no end.sum.packets in iperf3 output"))?;
    let lost = sum["lost_packets"].as_f64().unwrap_or(0.0);
    let secs = sum["seconds"].as_f64().unwrap_or(duration as f64).max(0.1);
    Ok((packets - lost).max(0.0) / secs)
}

/// The pod side of the connect-latency measurement: accept, read one byte,
/// answer one byte, close (the server closes first, so the client keeps no
/// TIME_WAIT sockets and never runs out of ports).
struct ConnectServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ConnectServer {
    fn start(ns: &str, port: u16) -> Result<ConnectServer> {
        let l = sluice_tests::in_ns(ns, move || {
            TcpListener::bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port))
        })??;
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("bench-connect-server".into())
            .spawn(move || serve_connects(l, &s))?;
        Ok(ConnectServer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ConnectServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_connects(l: TcpListener, stop: &AtomicBool) {
    let fd = l.as_raw_fd();
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the listener we own.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n <= 0 {
            continue;
        }
        while let Ok((mut s, _)) = l.accept() {
            let _ = s.set_nonblocking(false);
            let _ = s.set_nodelay(true);
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut b = [0u8; 1];
            if matches!(s.read(&mut b), Ok(1)) {
                let _ = s.write_all(&b);
            }
        }
    }
}

/// `n` times: connect, send one byte, read one byte back, close; the time of
/// each, from before connect to the answer. Bounded by
/// [`CONNECT_LOOP_LIMIT`].
fn connect_loop(ns: &str, dst: SocketAddr, n: usize) -> Result<Latency> {
    let (mut times, failed, first_err) = sluice_tests::in_ns(ns, move || {
        let mut times: Vec<f64> = Vec::with_capacity(n);
        let mut failed = 0usize;
        let mut first_err: Option<String> = None;
        // Warm-up, not timed: neighbour entries, caches, the agent's first
        // conntrack entries.
        for _ in 0..(n / 10).clamp(5, 100) {
            if let Ok(mut s) = TcpStream::connect_timeout(&dst, Duration::from_secs(1)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(b"x");
                let _ = s.read(&mut [0u8; 1]);
            }
        }
        let start = Instant::now();
        for _ in 0..n {
            if interrupted() || start.elapsed() > CONNECT_LOOP_LIMIT {
                break;
            }
            let t = Instant::now();
            let r = (|| -> std::io::Result<()> {
                let mut s = TcpStream::connect_timeout(&dst, Duration::from_secs(1))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(1)))?;
                s.write_all(b"x")?;
                let mut b = [0u8; 1];
                s.read_exact(&mut b)?;
                Ok(())
            })();
            match r {
                Ok(()) => times.push(t.elapsed().as_secs_f64() * 1e6),
                Err(e) => {
                    failed += 1;
                    first_err.get_or_insert_with(|| e.to_string());
                }
            }
        }
        (times, failed, first_err)
    })?;
    check_interrupted()?;
    if times.is_empty() {
        bail!(
            "no connection succeeded ({failed} failed: {})",
            first_err.unwrap_or_default()
        );
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: usize| times[((times.len() * p) / 100).min(times.len() - 1)];
    Ok(Latency {
        p50_us: pct(50),
        p99_us: pct(99),
        ok: times.len(),
        failed,
        first_err,
    })
}

// --- kube-proxy-style rules -------------------------------------------------

/// A kube-proxy-looking chain suffix for Service port `i`.
fn chain_id(i: usize, salt: u64) -> String {
    // splitmix64: stable, well spread, like kube-proxy's hashed names.
    let mut z = (i as u64)
        .wrapping_add(salt)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..16)
        .map(|k| alphabet[((z >> (k * 4)) & 31) as usize] as char)
        .collect()
}

/// One Service port as kube-proxy sees it.
struct SvcPort {
    name: String,
    cluster_ip: Ipv4Addr,
    vip: Ipv4Addr,
    proto: &'static str,
    port: u16,
    target: u16,
    id: usize,
}

/// `n - 1` generated Service ports first, then the measured Service's
/// ports last: the traffic walks past every other rule (the worst case of a
/// linear chain; with a map lookup position does not matter).
fn service_ports(n: usize) -> Vec<SvcPort> {
    let mut v = Vec::with_capacity(n + 2);
    for i in 1..n {
        v.push(SvcPort {
            name: format!("default/filler-{i}:http"),
            cluster_ip: dummy_cluster_ip(i),
            vip: dummy_vip(i),
            proto: "tcp",
            port: CONNECT_PORT,
            target: CONNECT_TARGET,
            id: i,
        });
    }
    let cip: Ipv4Addr = CLUSTER_IP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
    let vip: Ipv4Addr = VIP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
    for (k, (pname, proto, port, target)) in [
        ("iperf", "tcp", IPERF_PORT, IPERF_PORT),
        ("iperf-udp", "udp", IPERF_PORT, IPERF_PORT),
        ("connect", "tcp", CONNECT_PORT, CONNECT_TARGET),
    ]
    .into_iter()
    .enumerate()
    {
        v.push(SvcPort {
            name: format!("default/bench:{pname}"),
            cluster_ip: cip,
            vip,
            proto,
            port,
            target,
            id: 1_000_000 + k,
        });
    }
    v
}

/// The `nat` and `filter` tables kube-proxy (iptables mode) writes for
/// these Service ports, each with one endpoint (the pod), Cluster policy.
fn iptables_rules(n: usize) -> String {
    let ports = service_ports(n);
    let mut s = String::with_capacity(n * 1200);
    s.push_str("*filter\n:KUBE-FORWARD - [0:0]\n");
    s.push_str("-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n");
    s.push_str("-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n");
    s.push_str("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark 0x4000/0x4000 -j ACCEPT\n");
    s.push_str("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");
    s.push_str("COMMIT\n*nat\n");
    s.push_str(
        ":KUBE-SERVICES - [0:0]\n:KUBE-POSTROUTING - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-NODEPORTS - [0:0]\n",
    );
    for p in &ports {
        let id = chain_id(p.id, 0);
        let _ = writeln!(
            s,
            ":KUBE-SVC-{id} - [0:0]\n:KUBE-EXT-{id} - [0:0]\n:KUBE-SEP-{} - [0:0]",
            chain_id(p.id, 1)
        );
    }
    s.push_str(
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n",
    );
    s.push_str("-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n");
    s.push_str("-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n");
    s.push_str("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n");
    s.push_str("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n");
    s.push_str("-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n");
    s.push_str("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n");
    for p in &ports {
        let id = chain_id(p.id, 0);
        let sep = chain_id(p.id, 1);
        let (name, proto, port, target) = (&p.name, p.proto, p.port, p.target);
        let (cip, vip) = (p.cluster_ip, p.vip);
        let _ = write!(
            s,
            "-A KUBE-SERVICES -d {cip}/32 -p {proto} -m comment --comment \"{name} cluster IP\" -m {proto} --dport {port} -j KUBE-SVC-{id}\n\
-A KUBE-SERVICES -d {vip}/32 -p {proto} -m comment --comment \"{name} loadbalancer IP\" -m {proto} --dport {port} -j KUBE-EXT-{id}\n\
-A KUBE-EXT-{id} -m comment --comment \"masquerade traffic for {name} external destinations\" -j KUBE-MARK-MASQ\n\
-A KUBE-EXT-{id} -j KUBE-SVC-{id}\n\
-A KUBE-SVC-{id} ! -s {POD_CIDR} -d {cip}/32 -p {proto} -m comment --comment \"{name} cluster IP\" -m {proto} --dport {port} -j KUBE-MARK-MASQ\n\
-A KUBE-SVC-{id} -m comment --comment \"{name} -> {POD_IP}:{target}\" -j KUBE-SEP-{sep}\n\
-A KUBE-SEP-{sep} -s {POD_IP}/32 -m comment --comment \"{name}\" -j KUBE-MARK-MASQ\n\
-A KUBE-SEP-{sep} -p {proto} -m comment --comment \"{name}\" -m {proto} -j DNAT --to-destination {POD_IP}:{target}\n"
        );
    }
    s.push_str("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n");
    s.push_str("COMMIT\n");
    s
}

/// A kube-proxy-nftables-like ruleset: one verdict-map lookup on
/// (daddr, protocol, dport), then per-Service chains.
fn nftables_rules(n: usize) -> String {
    let ports = service_ports(n);
    let mut s = String::with_capacity(n * 700);
    s.push_str("flush ruleset\ntable ip kube-proxy {\n");
    s.push_str(
        "  map service-ips {\n    type ipv4_addr . inet_proto . inet_service : verdict\n  }\n",
    );
    s.push_str("  chain mark-for-masquerade {\n    meta mark set meta mark or 0x4000\n  }\n");
    s.push_str("  chain masquerading {\n    meta mark & 0x4000 == 0 return\n    meta mark set meta mark xor 0x4000\n    masquerade fully-random\n  }\n");
    s.push_str(
        "  chain services {\n    ip daddr . meta l4proto . th dport vmap @service-ips\n  }\n",
    );
    s.push_str("  chain nat-prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n    jump services\n  }\n");
    s.push_str("  chain nat-output {\n    type nat hook output priority -100; policy accept;\n    jump services\n  }\n");
    s.push_str("  chain nat-postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    jump masquerading\n  }\n");
    s.push_str("  chain filter-forward {\n    type filter hook forward priority -110; policy accept;\n    ct state invalid drop\n  }\n");
    for p in &ports {
        let id = chain_id(p.id, 0);
        let (proto, port, target, cip) = (p.proto, p.port, p.target, p.cluster_ip);
        let _ = write!(
            s,
            "  chain endpoint-{id} {{\n    ip saddr {POD_IP} jump mark-for-masquerade\n    meta l4proto {proto} dnat to {POD_IP}:{target}\n  }}\n\
  chain service-{id} {{\n    ip daddr {cip} {proto} dport {port} ip saddr != {POD_CIDR} jump mark-for-masquerade\n    numgen random mod 1 vmap {{ 0 : goto endpoint-{id} }}\n  }}\n\
  chain external-{id} {{\n    jump mark-for-masquerade\n    goto service-{id}\n  }}\n"
        );
    }
    s.push_str("}\n");
    // Map elements in batches (one huge line is slow to parse).
    for chunk in ports.chunks(500) {
        s.push_str("add element ip kube-proxy service-ips {\n");
        for p in chunk {
            let id = chain_id(p.id, 0);
            let _ = writeln!(
                s,
                "  {} . {} . {} : goto service-{id},\n  {} . {} . {} : goto external-{id},",
                p.cluster_ip, p.proto, p.port, p.vip, p.proto, p.port
            );
        }
        s.push_str("}\n");
    }
    s
}

fn load_file(node: &Netns, tool: &str, flag: Option<&str>, text: &str) -> Result<f64> {
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}-{}.rules", std::process::id(), unique()));
    fs::write(&path, text)?;
    let p = path.display().to_string();
    let mut args = vec![tool];
    if let Some(f) = flag {
        args.push(f);
    }
    args.push(&p);
    let t = Instant::now();
    let r = run_bounded(node.name(), &args, Duration::from_secs(180));
    let secs = t.elapsed().as_secs_f64();
    let _ = fs::remove_file(&path);
    r.with_context(|| format!("loading {} lines with {tool}", text.lines().count()))?;
    Ok(secs)
}

fn apply_iptables(node: &Netns, n: usize) -> Result<f64> {
    load_file(node, "iptables-restore", None, &iptables_rules(n))
}

fn apply_nftables(node: &Netns, n: usize) -> Result<f64> {
    load_file(node, "nft", Some("-f"), &nftables_rules(n))
}

// --- report -----------------------------------------------------------------

struct Machine {
    one_line: String,
    date: String,
    load_start: String,
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn machine_note() -> Machine {
    let cpus = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let version = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .output()
            .ok()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default()
    };
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Machine {
        one_line: format!(
            "{cpus} vCPU {model}, Linux {kernel}, {}, {}, {}",
            version("iperf3", "--version"),
            version("iptables", "-V"),
            version("nft", "--version")
        ),
        date,
        load_start: loadavg(),
    }
}

fn fmt_gbps(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{v:.2} Gbit/s"),
        M::Err(e) => format!("error: {e}"),
        M::Skipped => "-".into(),
    }
}

fn fmt_kpps(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{:.0} kpps", v / 1e3),
        M::Err(e) => format!("error: {e}"),
        M::Skipped => "-".into(),
    }
}

fn fmt_secs(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{v:.1} s"),
        M::Err(_) => "failed".into(),
        M::Skipped => "-".into(),
    }
}

fn fmt_lat(m: &M<Latency>) -> String {
    match m {
        M::Ok(l) => {
            let mut s = format!("p50 {:.0} µs, p99 {:.0} µs", l.p50_us, l.p99_us);
            if l.failed > 0 {
                let _ = write!(
                    s,
                    " ({} of {} failed, first: {})",
                    l.failed,
                    l.failed + l.ok,
                    l.first_err.as_deref().unwrap_or("?")
                );
            }
            s
        }
        M::Err(e) => format!("error: {e}"),
        M::Skipped => "-".into(),
    }
}

fn ratio(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
        _ => "-".into(),
    }
}

fn cell_err<T>(m: &M<T>) -> Option<String> {
    match m {
        M::Err(e) => Some(format!("error: {}", truncate(e, 60))),
        M::Skipped => Some("-".into()),
        M::Ok(_) => None,
    }
}

fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{a0}');
        }
        out.push(ch);
    }
    out
}

/// The Markdown tables (also printed).
fn render(results: &[ConfigResult], plan: &Plan) -> String {
    let ceiling = results.iter().find(|r| r.config == Config::Routing);
    let base_tcp1 = ceiling.and_then(|c| c.tcp1_gbps.ok().copied());
    let base_tcpn = ceiling.and_then(|c| c.tcpn_gbps.ok().copied());
    let base_udp = ceiling.and_then(|c| c.udp_pps.ok().copied());
    // The ceiling has no Services; it is measured once per column anyway, at
    // about the same time of the run, and each column is divided by its own.
    let base_lat = |n: usize| {
        ceiling
            .and_then(|c| c.connect.iter().find(|(m, _, _)| *m == n))
            .and_then(|(_, _, l)| l.ok().cloned())
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        "Throughput (ratio = value ÷ ceiling, higher is better):\n"
    );
    let _ = writeln!(
        s,
        "| configuration | TCP 1 stream Gbit/s | × | TCP {} streams Gbit/s | × | UDP 64 B kpps received | × |",
        plan.streams
    );
    s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for r in results {
        if let Some(why) = &r.unavailable {
            let _ = writeln!(
                s,
                "| {}: not available ({}) | - | - | - | - | - | - |",
                engine_word(r.config),
                why.replace('|', "/")
            );
            continue;
        }
        let num = |m: &M<f64>, scale: f64, prec: usize| {
            cell_err(m)
                .unwrap_or_else(|| format!("{:.prec$}", m.ok().copied().unwrap_or(0.0) / scale))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.config.label(),
            num(&r.tcp1_gbps, 1.0, 2),
            ratio(r.tcp1_gbps.ok().copied(), base_tcp1),
            num(&r.tcpn_gbps, 1.0, 2),
            ratio(r.tcpn_gbps.ok().copied(), base_tcpn),
            num(&r.udp_pps, 1e3, 0),
            ratio(r.udp_pps.ok().copied(), base_udp),
        );
    }

    let _ = writeln!(
        s,
        "\nConnect + 1-byte request/answer, p50 / p99 µs (ratio = p50 ÷ the ceiling's p50 in the same column, lower is better), by Services installed:\n"
    );
    s.push_str("| configuration |");
    for n in &plan.counts {
        let _ = write!(s, " {} p50 / p99 µs | × |", group(*n));
    }
    s.push_str("\n|---|");
    for _ in &plan.counts {
        s.push_str("---:|---:|");
    }
    s.push('\n');
    for r in results {
        if let Some(why) = &r.unavailable {
            let _ = write!(
                s,
                "| {}: not available ({}) |",
                engine_word(r.config),
                why.replace('|', "/")
            );
            for _ in &plan.counts {
                s.push_str(" - | - |");
            }
            s.push('\n');
            continue;
        }
        let _ = write!(s, "| {} |", r.config.label());
        for n in &plan.counts {
            match r.connect.iter().find(|(m, _, _)| m == n) {
                Some((_, _, M::Ok(l))) => {
                    let fails = if l.failed > 0 {
                        format!(" ({} failed)", l.failed)
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        s,
                        " {:.0} / {:.0}{fails} | {} |",
                        l.p50_us,
                        l.p99_us,
                        ratio(Some(l.p50_us), base_lat(*n).map(|b| b.p50_us))
                    );
                }
                Some((_, t, m)) => {
                    let e = cell_err(m)
                        .filter(|e| e != "-")
                        .or_else(|| cell_err(t).map(|e| format!("apply {e}")))
                        .unwrap_or_else(|| "-".into());
                    let _ = write!(s, " {} | - |", e.replace('|', "/"));
                }
                None => s.push_str(" - | - |"),
            }
        }
        s.push('\n');
    }

    s.push_str(&goals(results, plan));
    let _ = writeln!(
        s,
        "\nTime to install the Services (iptables-restore, nft -f, or the agent applying its state file), seconds:\n"
    );
    s.push_str("| configuration |");
    for n in &plan.counts {
        let _ = write!(s, " {} |", group(*n));
    }
    s.push_str("\n|---|");
    for _ in &plan.counts {
        s.push_str("---:|");
    }
    s.push('\n');
    for r in results {
        if r.unavailable.is_some() || r.config == Config::Routing {
            continue;
        }
        let _ = write!(s, "| {} |", r.config.label());
        for n in &plan.counts {
            match r.connect.iter().find(|(m, _, _)| m == n) {
                Some((_, M::Ok(t), _)) => {
                    let _ = write!(s, " {t:.2} |");
                }
                Some((_, M::Err(_), _)) => s.push_str(" failed |"),
                _ => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s
}

/// Where each engine stands against the issue's goals, from this run.
fn goals(results: &[ConfigResult], plan: &Plan) -> String {
    let get = |c: Config| results.iter().find(|r| r.config == c);
    let ceiling = get(Config::Routing);
    let ipt = get(Config::Iptables);
    let tput = |r: &ConfigResult| -> Vec<Option<f64>> {
        let base = |f: fn(&ConfigResult) -> &M<f64>| ceiling.and_then(|c| f(c).ok().copied());
        [
            (r.tcp1_gbps.ok().copied(), base(|c| &c.tcp1_gbps)),
            (r.tcpn_gbps.ok().copied(), base(|c| &c.tcpn_gbps)),
            (r.udp_pps.ok().copied(), base(|c| &c.udp_pps)),
        ]
        .into_iter()
        .map(|(v, b)| match (v, b) {
            (Some(v), Some(b)) if b > 0.0 => Some(v / b),
            _ => None,
        })
        .collect()
    };
    let fmt = |v: &[Option<f64>]| {
        v.iter()
            .map(|x| x.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into()))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let worst = |v: &[Option<f64>]| v.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let p50s = |r: &ConfigResult| -> Vec<String> {
        plan.counts
            .iter()
            .map(|n| {
                r.connect
                    .iter()
                    .find(|(m, _, _)| m == n)
                    .and_then(|(_, _, l)| l.ok())
                    .map(|l| format!("{:.0}", l.p50_us))
                    .unwrap_or_else(|| "-".into())
            })
            .collect()
    };
    let mut s = String::from("\nAgainst the goals (throughput ratios TCP 1 / TCP N / UDP; connect p50 µs by Services):\n\n");
    for (c, goal) in [(Config::Kernel, 0.9), (Config::Emulated, 0.5)] {
        let Some(r) = get(c) else { continue };
        if let Some(why) = &r.unavailable {
            let _ = writeln!(s, "- {}: not measured — {why}.", engine_word(c));
            continue;
        }
        let t = tput(r);
        let met = worst(&t) >= goal;
        let _ = write!(
            s,
            "- {}: {} × ceiling — goal ≥ {goal}× {}",
            engine_word(c),
            fmt(&t),
            if met { "met" } else { "not met" }
        );
        if c == Config::Kernel {
            if let Some(i) = ipt {
                let ti = tput(i);
                let ahead = t
                    .iter()
                    .zip(&ti)
                    .all(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a >= b));
                let _ = write!(
                    s,
                    "; ahead of iptables ({}): {}",
                    fmt(&ti),
                    if ahead { "yes" } else { "no" }
                );
            }
        }
        let _ = writeln!(s, "; connect p50 {} µs.", p50s(r).join(" / "));
    }
    for c in [Config::Iptables, Config::Nftables] {
        if let Some(r) = get(c).filter(|r| r.unavailable.is_none()) {
            let _ = writeln!(
                s,
                "- {} for comparison: {} × ceiling; connect p50 {} µs.",
                c.label(),
                fmt(&tput(r)),
                p50s(r).join(" / ")
            );
        }
    }
    s
}

fn doc_section(
    opts: &BenchOpts,
    plan: &Plan,
    m: &Machine,
    load_end: &str,
    elapsed: Duration,
    tables: &str,
) -> String {
    let mut cmd = String::from("sudo cargo xtask bench");
    if opts.quick {
        cmd.push_str(" --quick");
    }
    if let Some(d) = opts.duration {
        let _ = write!(cmd, " --duration {d}");
    }
    if let Some(c) = opts.connects {
        let _ = write!(cmd, " --connects {c}");
    }
    if !opts.only.is_empty() {
        let names: Vec<String> = opts
            .only
            .iter()
            .map(|c| format!("{c:?}").to_lowercase())
            .collect();
        let _ = write!(cmd, " --only {}", names.join(","));
    }
    let counts: Vec<String> = plan.counts.iter().map(|n| group(*n)).collect();
    format!(
        "## Whole paths (`cargo xtask bench`)\n\n\
```sh\nsudo cargo xtask bench            # default: 3 s per iperf3 run, 1 / 1 000 / 10 000 Services, 2 000 connects\n\
sudo cargo xtask bench --quick    # 2 s, 1 / 1 000 Services, 500 connects\n\
sudo cargo xtask bench --only iptables,emulated --duration 5\n```\n\n\
One run measures five configurations one after the other on the same\n\
topology, built from veths in network namespaces:\n\n\
```text\nclient (198.18.0.2) ── bridge ── node (nic0 198.18.0.11) ── pod (198.19.1.10/32)\n```\n\n\
- **kernel routing, no NAT** — the client addresses the pod IP, the node\n  forwards it: the ceiling every ratio is taken against.\n\
- **iptables DNAT** — the `nat` and `filter` rules kube-proxy's iptables mode\n  writes for a LoadBalancer Service with `externalTrafficPolicy: Cluster`:\n  `KUBE-SERVICES` (a ClusterIP and a load-balancer-IP rule per Service port)\n  → `KUBE-EXT-…` (mark for masquerade) → `KUBE-SVC-…` → `KUBE-SEP-…` (DNAT),\n  `MASQUERADE --random-fully` in `KUBE-POSTROUTING`. One chain set per\n  Service; the measured Service's rules come *after* all the others (the worst\n  case of a linear chain). `iptables` here is the nf_tables backend, as on\n  current distributions.\n\
- **nftables DNAT** — a kube-proxy-nftables-like ruleset: one verdict-map\n  lookup on (daddr, protocol, port) → `external-…` → `service-…` (numgen) →\n  `endpoint-…` (dnat), masquerade on the mark.\n\
- **Sluice kernel engine** / **emulated engine** — `sluice-agent --datapath\n  kernel|emulated` (release build) on the node, driven by the test bed's\n  cluster builder (one node, one pod), the Services in its state file.\n\n\
Metrics, all from the client namespace towards the VIP (198.18.100.1) or, for\n\
the ceiling, the pod IP: iperf3 TCP with one stream and with {streams}\n\
(`-P {streams}`), iperf3 UDP with 64-byte payloads and no rate limit (`-u -l 64\n\
-b 0`, packets the server received per second), each {dur} s, the better of\n\
two runs, iperf3 client pinned to CPU 0 and server to CPU 1 (`-A 0,1`, the\n\
same in every configuration; an agent's threads go where the scheduler puts\n\
them); and the time of\n\
a TCP connect plus a 1-byte request and its 1-byte answer ({conns} in a row,\n\
p50/p99) with {counts} Services installed, only one of which gets traffic\n\
(every generated Service has its own VIP and one endpoint). IPv4 only.\n\n\
Offloads: every veth of the topology (client, bridge ports, `nic0`, both\n\
ends of the pod link) has TX checksum offload, TSO and GSO **off** in every\n\
configuration — that is how the test bed builds its links and how the agent\n\
makes a pod's link; it is not needed by the emulated engine (which completes\n\
partial checksums and segments GSO frames itself) but it keeps the five\n\
configurations identical. So the ceiling is per-MTU-packet forwarding, not\n\
64 KB GSO super-packets.\n\n\
Connect loops: the connect server closes first, so the pod keeps every\n\
connection in TIME_WAIT. Sluice holds a closed flow's SNAT port for 70 s\n\
(closing timeout, then the endpoint's TIME_WAIT) out of 4 536 ports per\n\
endpoint, so its loops against the same backend are started 71 s apart;\n\
back to back, the third loop would find mostly held ports and pay a reset\n\
and a SYN retransmit at each reuse. That is Sluice's capacity, stated\n\
rather than measured here: ~65 new server-closed connections per second\n\
per endpoint per node, where kube-proxy's MASQUERADE draws from the\n\
~28 000-port ephemeral range.\n\n\
Run of {date}, `{cmd}`, total {secs:.0} s.\n\
Machine: {machine}. **A shared 2-core VM; other engineers' builds may have\n\
been running** (load average {ls} at the start, {le} at the end): read the\n\
ratios within this run, not the absolute numbers, and expect a few percent\n\
of noise between runs.\n\n\
{tables}\n",
        streams = plan.streams,
        dur = plan.duration,
        conns = plan.connects,
        counts = counts.join(" / "),
        date = m.date,
        secs = elapsed.as_secs_f64(),
        machine = m.one_line,
        ls = m.load_start,
        le = load_end,
    )
}

/// Replace the section `## Whole paths (`cargo xtask bench`)` of the file
/// (up to the next `## ` heading), keeping everything else.
fn write_section(path: &Path, section: &str) -> Result<()> {
    replace_section(path, "## Whole paths (`cargo xtask bench`)", section)
}

/// Replace the section of `path` that starts with `heading` (up to the next
/// `## `) by `section`, or append it.
pub(crate) fn replace_section(path: &Path, heading: &str, section: &str) -> Result<()> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let new = match text.find(heading) {
        Some(start) => {
            let after = start + heading.len();
            let end = text[after..]
                .find("\n## ")
                .map(|i| after + i + 1)
                .unwrap_or(text.len());
            let mut out = String::new();
            out.push_str(&text[..start]);
            out.push_str(section.trim_end());
            out.push('\n');
            if end < text.len() {
                out.push('\n');
                out.push_str(&text[end..]);
            }
            out
        }
        None => format!("{}\n\n{}", text.trim_end(), section.trim_end()) + "\n",
    };
    fs::write(path, new).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_replaced_rest_kept() {
        let dir = std::env::temp_dir().join(format!("sluice-bench-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("b.md");
        fs::write(
            &p,
            "# B\n\n## A\n\nkeep\n\n## Whole paths (`cargo xtask bench`)\n\nold\n\n## Z\n\nkeep too\n",
        )
        .unwrap();
        write_section(&p, "## Whole paths (`cargo xtask bench`)\n\nnew\n").unwrap();
        let t = fs::read_to_string(&p).unwrap();
        assert_eq!(
            t,
            "# B\n\n## A\n\nkeep\n\n## Whole paths (`cargo xtask bench`)\n\nnew\n\n## Z\n\nkeep too\n"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn rulesets_have_one_chain_set_per_service() {
        let ipt = iptables_rules(3);
        // 2 generated + 3 ports of the measured Service.
        assert_eq!(ipt.matches("-j DNAT").count(), 5);
        let nft = nftables_rules(3);
        assert_eq!(nft.matches("dnat to").count(), 5);
        assert_ne!(chain_id(1, 0), chain_id(2, 0));
    }
}
