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
//! `--interleave ROUNDS` measures only the throughput, each configuration
//! against a ceiling bed that is up at the same time, in alternation
//! (`interleave.rs`): the figure for comparing ratios across changes.
//!
//! Everything lives behind the test bed's guards (namespaces, processes,
//! agents), so it is torn down on error and on Ctrl-C as well.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_tests::{Engine, Offloads};

mod interleave;
mod lb;
mod measure;
mod report;
mod rules;
mod sweep;
mod topology;

use measure::*;
use report::*;
use rules::*;
use topology::*;

pub(crate) use report::replace_section;
pub(crate) use topology::build_ebpf;

/// iperf3's port (TCP control and data, UDP data), the same on the VIP and
/// on the pod.
const IPERF_PORT: u16 = 5201;
/// Service port and pod port of the connect-latency server.
const CONNECT_PORT: u16 = 80;
const CONNECT_TARGET: u16 = 7000;
/// Upper bound of one connect-latency loop.
const CONNECT_LOOP_LIMIT: Duration = Duration::from_secs(15);
/// The connect server closes first, so each closed flow's SNAT port is
/// held for the pod's TIME_WAIT (60 s), free only for SYNs that TIME_WAIT
/// takes (about half, timestamps being random per connection). Loops
/// against the same backend are kept this far apart so each measures a node
/// whose ports are free, not the port space; the sustained-connect row
/// measures the port space on purpose (see docs/benchmarks.md). One second
/// past the engine's hold (66 s: the pod's TIME_WAIT timer fires up to a
/// few seconds after its 60).
const SLUICE_CT_COOLDOWN: Duration = Duration::from_secs(67);
/// Connections in flight in the sustained-connect measurement.
const SUSTAINED_IN_FLIGHT: usize = 64;
/// Answered this late, a connect waited for a retransmitted SYN (the
/// initial retransmission timeout is 1 s).
const SLOW_CONNECT: Duration = Duration::from_secs(1);

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
/// The same pod behind a Service with `externalTrafficPolicy: Local`
/// (Family::V4.vip(2)): the client's address reaches the pod, no SNAT.
const LOCAL_VIP: &str = "198.18.100.2";
const LOCAL_CLUSTER_IP: &str = "198.19.200.2";

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
    /// Seconds of the sustained-connect measurement (new connections,
    /// server closing first, to one endpoint through a `Cluster` VIP and
    /// through a `Local` one).
    #[arg(long)]
    pub sustained: Option<u64>,
    /// Instead of the whole-path runs: new connections at each of these
    /// steady rates per second (comma-separated, ascending), through the
    /// `Cluster` VIP of a fresh node per configuration.
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<u32>,
    /// Seconds per rate of `--sweep`.
    #[arg(long, default_value_t = 30)]
    pub sweep_secs: u64,
    /// Streams of the multi-stream TCP measurement.
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// The links' offloads: `off` (every veth sends complete MTU-sized
    /// frames), `on` (the kernel's defaults, GRO on the uplinks, as
    /// deployed), or `both`, each setting against its own ceiling.
    #[arg(long, value_enum, default_value_t = OffloadChoice::Both)]
    pub offloads: OffloadChoice,
    /// Print the table only; leave docs/benchmarks.md alone.
    #[arg(long)]
    pub no_write: bool,
    /// Measure the load balancer (`sluice-lb`) against kernel forwarding
    /// over the same hop instead of the node's paths.
    #[arg(long)]
    pub load_balancer: bool,
    /// Instead of the whole-path runs: each configuration's TCP and UDP
    /// throughput against the ceiling in this many rounds, the two beds
    /// up at once and measured in turn (`--duration` seconds each, 3 by
    /// default); the ratio is the median of the rounds' own.
    #[arg(long, value_name = "ROUNDS")]
    pub interleave: Option<u32>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadChoice {
    Off,
    On,
    Both,
}

impl OffloadChoice {
    fn settings(self) -> Vec<Offloads> {
        match self {
            OffloadChoice::Off => vec![Offloads::Off],
            OffloadChoice::On => vec![Offloads::On],
            OffloadChoice::Both => vec![Offloads::Off, Offloads::On],
        }
    }
}

/// How a setting is named in the output (`heading`: at a line's start).
fn offloads_word(o: Offloads, heading: bool) -> &'static str {
    match (o, heading) {
        (Offloads::Off, false) => "offloads off",
        (Offloads::Off, true) => "Offloads off",
        (Offloads::On, false) => "offloads on (as deployed)",
        (Offloads::On, true) => "Offloads on (as deployed)",
    }
}

struct Plan {
    duration: u64,
    connects: usize,
    streams: u32,
    counts: Vec<usize>,
    configs: Vec<Config>,
    /// How long the sustained-connect measurement runs.
    sustained: Duration,
    /// The offload settings, each a full pass over `configs`.
    offloads: Vec<Offloads>,
}

// --- signals ----------------------------------------------------------------

use crate::signals::{install as install_signal_handlers, interrupted};

fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
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

/// New connections sustained for a while, and what went wrong.
#[derive(Debug, Clone, Default)]
struct Sustained {
    secs: f64,
    ok: u64,
    /// Refused with a reset (ECONNREFUSED).
    reset: u64,
    /// No answer within the connect or read timeout.
    timed_out: u64,
    other: u64,
    /// Answered, but a second or more after the connect began (a SYN
    /// retransmitted).
    slow: u64,
    /// The client namespace's `TCPSynRetrans` over the run.
    syn_retrans: u64,
    /// The pod's side of those retransmits, over the run.
    pod: PodTcp,
}

/// What the pod's TCP stack counted (`/proc/net/netstat`), the usual
/// reasons a SYN goes unanswered there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PodTcp {
    /// SYNs a TIME_WAIT socket refused for an older timestamp
    /// (`PAWSTimewait`): the pod answers with an ACK for the old
    /// connection, the client resets it and sends the SYN again.
    paws_timewait: u64,
    /// SYNs dropped at a full accept queue or SYN queue (`ListenDrops`,
    /// which counts `ListenOverflows` too).
    listen_drops: u64,
    /// Connections closed without TIME_WAIT for want of buckets
    /// (`TCPTimeWaitOverflow`).
    tw_overflow: u64,
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
    sustained: M<Sustained>,
    /// The same through the `Local` VIP (not for the ceiling, which has no
    /// Service).
    sustained_local: M<Sustained>,
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
            sustained: M::Skipped,
            sustained_local: M::Skipped,
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
    if opts.load_balancer {
        return lb::run(&opts);
    }
    if !opts.sweep.is_empty() {
        return sweep::run(&opts);
    }
    if let Some(rounds) = opts.interleave {
        return interleave::run(&opts, rounds);
    }
    let configs = selected_configs(opts.only.clone());
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
        sustained: Duration::from_secs(
            opts.sustained
                .unwrap_or(if opts.quick { 10 } else { 60 })
                .max(1),
        ),
        offloads: opts.offloads.settings(),
    };
    check_tools()?;
    let agent = agent_for(&plan.configs)?;
    check_interrupted()?;

    let machine = machine_note();
    let started = Instant::now();
    println!("==> bench: {}", machine.one_line);
    println!(
        "    {} s per iperf3 run, {} connects per latency point, Services: {:?}",
        plan.duration, plan.connects, plan.counts
    );

    let mut passes: Vec<(Offloads, Vec<ConfigResult>)> = Vec::new();
    for (pass, &offloads) in plan.offloads.iter().enumerate() {
        // The sustained-connect row measures the SNAT port allocator, which
        // offloads do not touch: once, in the first pass.
        let sustained = pass == 0;
        let mut results = Vec::new();
        for &config in &plan.configs {
            check_interrupted()?;
            println!(
                "==> {} ({})",
                config.label(),
                offloads_word(offloads, false)
            );
            let r = match config {
                Config::Routing | Config::Iptables | Config::Nftables => {
                    run_baseline(config, &plan, offloads, sustained)
                }
                Config::Kernel => run_sluice(
                    Engine::Kernel,
                    config,
                    &plan,
                    agent.as_deref(),
                    offloads,
                    sustained,
                ),
                Config::Emulated => run_sluice(
                    Engine::Emulated,
                    config,
                    &plan,
                    agent.as_deref(),
                    offloads,
                    sustained,
                ),
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
        passes.push((offloads, results));
    }
    let load_end = loadavg();
    let elapsed = started.elapsed();

    let tables = passes
        .iter()
        .map(|(offloads, results)| {
            format!(
                "### {}\n\n{}",
                offloads_word(*offloads, true),
                render(results, &plan)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
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

/// `--only`'s configurations, or all, with the ceiling always: every ratio
/// needs it.
fn selected_configs(only: Vec<Config>) -> Vec<Config> {
    let mut configs = if only.is_empty() {
        Config::ALL.to_vec()
    } else {
        let mut c = only;
        c.push(Config::Routing);
        c
    };
    configs.sort();
    configs.dedup();
    configs
}

fn check_tools() -> Result<()> {
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
    Ok(())
}

/// The release agent, built when a Sluice configuration is among `configs`.
fn agent_for(configs: &[Config]) -> Result<Option<PathBuf>> {
    if configs
        .iter()
        .any(|c| matches!(c, Config::Kernel | Config::Emulated))
    {
        Ok(Some(build_agent(true)?))
    } else {
        Ok(None)
    }
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

/// `cargo build [--release] -p sluice-agent`; the binary's path.
/// `SLUICE_AGENT_BIN` names a prebuilt agent instead. Benchmarks build
/// `release` (a debug build would measure the compiler, not the engine);
/// the lab builds debug, as the tests do.
/// `cargo build [--release] -p <package> --bin <bin>`; the binary's path.
pub(crate) fn build_bin(package: &str, bin: &str, release: bool) -> Result<PathBuf> {
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut args = vec!["build", "-p", package, "--bin", bin];
    if release {
        args.insert(1, "--release");
    }
    println!("==> cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(&args)
        .current_dir(&root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let profile = if release { "release" } else { "debug" };
    let path = target.join(profile).join(bin);
    if !path.is_file() {
        bail!("{} missing after the build", path.display());
    }
    Ok(path)
}

pub(crate) fn build_agent(release: bool) -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("SLUICE_AGENT_BIN") {
        let bin = PathBuf::from(bin);
        println!("==> using SLUICE_AGENT_BIN={}", bin.display());
        return Ok(bin);
    }
    build_bin("sluice-agent", "sluice-agent", release)
}
