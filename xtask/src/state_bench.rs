//! `cargo xtask bench-state`: what a large state costs the agent, each
//! figure against the same agent holding one Service, measured in the same
//! run: resident memory at 10 000 Services × 10 endpoints and after the
//! state shrinks back, kernel memory in BPF maps (counted apart), the time
//! to apply, and the CPU an unchanged 50 MB file costs while it sits there.
//!
//! Runs the release agent in a one-node test-bed cluster (network
//! namespaces, root), per engine; writes its table into docs/benchmarks.md.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sluice_tests::{Cluster, ClusterSpec, EndpointSpec, Engine, ServiceSpec};

use crate::bench::{build_agent, build_ebpf, replace_section, workspace_root};

#[path = "../../agent/tests/common/manifests.rs"]
#[allow(dead_code)]
mod manifests;

#[derive(Debug, Clone, clap::Args)]
pub struct StateBenchOpts {
    /// Services in the large state.
    #[arg(long, default_value_t = 10_000)]
    pub services: usize,
    /// Endpoints per Service in the large state.
    #[arg(long, default_value_t = 10)]
    pub endpoints: usize,
    /// Engines to measure (comma-separated: emulated, kernel).
    #[arg(long, default_value = "emulated,kernel", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Seconds over which idle CPU is measured.
    #[arg(long, default_value_t = 10)]
    pub cpu_window: u64,
    /// Print the table only; leave docs/benchmarks.md alone.
    #[arg(long)]
    pub no_write: bool,
}

const HEADING: &str = "## Agent memory and the state file (`cargo xtask bench-state`)";
/// The padded file of the idle-CPU measurement.
const LARGE_FILE_BYTES: usize = 50 * 1024 * 1024;
const APPLY_TIMEOUT: Duration = Duration::from_secs(300);

/// What /proc says of the agent at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    hwm_kib: u64,
    /// `memlock` of the BPF maps the agent holds open (kernel memory).
    bpf_kib: u64,
}

fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{key} missing in /proc/{pid}/status"))
}

fn bpf_map_kib(pid: u32) -> u64 {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let mut bytes = 0u64;
    for fd in fds.flatten() {
        let is_map = fs::read_link(fd.path())
            .map(|t| t.to_string_lossy().contains("bpf-map"))
            .unwrap_or(false);
        if !is_map {
            continue;
        }
        let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
        if let Ok(text) = fs::read_to_string(info) {
            bytes += text
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    bytes / 1024
}

fn sample(pid: u32) -> Result<Sample> {
    Ok(Sample {
        rss_kib: status_kib(pid, "VmRSS:")?,
        hwm_kib: status_kib(pid, "VmHWM:")?,
        bpf_kib: bpf_map_kib(pid),
    })
}

/// User + system CPU of `pid` in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("odd /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    let get = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Ok(get(14).unwrap_or(0) + get(15).unwrap_or(0))
}

fn cpu_share(pid: u32, window: Duration) -> Result<f64> {
    // SAFETY: sysconf reads a constant of the C library.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as f64,
        _ => 100.0,
    };
    let t0 = cpu_ticks(pid)?;
    let start = Instant::now();
    std::thread::sleep(window);
    let used = (cpu_ticks(pid)? - t0) as f64 / hz;
    Ok(used / start.elapsed().as_secs_f64())
}

/// The one-node cluster's own manifests plus `services` Services with
/// `endpoints` ready endpoints each (the agent tests' generator).
fn large_state(base: &str, services: usize, endpoints: usize) -> String {
    format!("{base}{}", manifests::many_services(services, endpoints))
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("bench.tmp");
    fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Write `text` and wait for the agent's next generation; the seconds it
/// took.
fn apply(c: &Cluster, path: &Path, text: &str) -> Result<f64> {
    let prev = c.agent_status(1).map(|s| s.generation).unwrap_or(0);
    let t = Instant::now();
    write_atomic(path, text)?;
    while t.elapsed() < APPLY_TIMEOUT {
        if let Some(s) = c.agent_status(1) {
            if s.generation > prev {
                return Ok(t.elapsed().as_secs_f64());
            }
            if let Some(e) = s.error.filter(|_| t.elapsed() > Duration::from_secs(1)) {
                bail!("the agent refused the state: {e}");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("not applied within {APPLY_TIMEOUT:?}")
}

struct Row {
    engine: &'static str,
    base: Sample,
    big: Sample,
    after: Sample,
    apply_s: f64,
    cpu_small: f64,
    cpu_large_file: f64,
}

fn measure(engine: Engine, opts: &StateBenchOpts, agent: &Path) -> Result<Row> {
    let spec = ClusterSpec::new(1).pod("web", 1).service(
        ServiceSpec::lb("web", 1)
            .tcp("http", 80, 8080)
            .endpoint(EndpointSpec::ready("web")),
    );
    let c = Cluster::start_with("bst", engine, spec, Some(agent.to_path_buf()))?;
    let pid = c.agent_pid(1).ok_or_else(|| anyhow!("no agent"))?;
    let path = c.dir().join("node-1.yaml");
    let base_yaml = c.manifests(1)?;
    std::thread::sleep(Duration::from_secs(2));
    let base = sample(pid)?;
    let window = Duration::from_secs(opts.cpu_window);
    let cpu_small = cpu_share(pid, window)?;

    let big_yaml = large_state(&base_yaml, opts.services, opts.endpoints);
    println!(
        "    {}: applying {} Services x {} endpoints ({:.1} MB)",
        engine.as_str(),
        opts.services,
        opts.endpoints,
        big_yaml.len() as f64 / 1e6
    );
    let apply_s = apply(&c, &path, &big_yaml)?;
    drop(big_yaml);
    std::thread::sleep(Duration::from_secs(2));
    let big = sample(pid)?;

    apply(&c, &path, &base_yaml)?;
    std::thread::sleep(Duration::from_secs(3));
    let after = sample(pid)?;

    // The same state padded with comments to 50 MB: read and parsed once,
    // then left alone.
    let pad_line = format!("# {}\n", "x".repeat(1021));
    let mut padded = base_yaml.clone();
    while padded.len() < LARGE_FILE_BYTES {
        padded.push_str(&pad_line);
    }
    write_atomic(&path, &padded)?;
    std::thread::sleep(Duration::from_secs(5));
    let cpu_large_file = cpu_share(pid, window)?;
    Ok(Row {
        engine: engine.as_str(),
        base,
        big,
        after,
        apply_s,
        cpu_small,
        cpu_large_file,
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn table(rows: &[Row], opts: &StateBenchOpts) -> String {
    let mut t = format!(
        "| engine | RSS 1 Service MiB | RSS {s} x {e} MiB (ratio) | peak MiB | RSS back at 1 Service MiB (ratio) | BPF maps MiB | apply s | CPU, small file | CPU, unchanged 50 MB file (ratio) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        s = opts.services,
        e = opts.endpoints
    );
    for r in rows {
        let ratio = |a: u64| a as f64 / r.base.rss_kib.max(1) as f64;
        t.push_str(&format!(
            "| {} | {:.1} | {:.1} ({:.2}) | {:.1} | {:.1} ({:.2}) | {:.1} | {:.1} | {:.2} % | {:.2} % ({:.2}) |\n",
            r.engine,
            mib(r.base.rss_kib),
            mib(r.big.rss_kib),
            ratio(r.big.rss_kib),
            mib(r.big.hwm_kib),
            mib(r.after.rss_kib),
            ratio(r.after.rss_kib),
            mib(r.big.bpf_kib),
            r.apply_s,
            r.cpu_small * 100.0,
            r.cpu_large_file * 100.0,
            r.cpu_large_file / r.cpu_small.max(1e-9),
        ));
    }
    t
}

pub fn run(opts: StateBenchOpts) -> Result<()> {
    let agent = build_agent(true)?;
    let mut rows = Vec::new();
    for name in &opts.engines {
        let engine = match name.as_str() {
            "emulated" => Engine::Emulated,
            "kernel" => {
                build_ebpf()?;
                Engine::Kernel
            }
            o => bail!("--engines: {o:?} is not emulated or kernel"),
        };
        println!("==> {name}");
        rows.push(measure(engine, &opts, &agent).with_context(|| format!("engine {name}"))?);
    }
    let t = table(&rows, &opts);
    println!("\n{t}");
    if opts.no_write {
        return Ok(());
    }
    let section = format!(
        "{HEADING}\n\n\
         ```sh\ncargo xtask bench-state   # root; --engines, --services, --endpoints, --cpu-window\n```\n\n\
         One agent per engine in a one-node test-bed cluster. Ratios are to the same \
         agent holding one Service, in the same run. RSS is the process's resident \
         memory (`VmRSS`), peak its high-water mark (`VmHWM`); BPF maps are kernel \
         memory the kernel engine's maps lock (`memlock` of the map fds), counted \
         apart. \"Back at 1 Service\" is after the large state was replaced by the \
         one-Service state. CPU is the agent's user + system time over {w} s while \
         the state file sits unchanged: first the small file, then the same state \
         padded with comments to 50 MB.\n\n{t}\n\
         The aim is at most 64 MiB for the process at 10 000 x 10. The kernel \
         engine's maps are kernel memory (the BPF column); the emulated engine's \
         are the process's own heap, so its RSS includes them: at 10 000 x 10 its \
         Maglev tables alone are 10.2 M entries x 4 B = 39 MiB, its endpoint slots \
         2.3 MiB. The rest is the validated state (about 18 MiB at that size: \
         100 000 endpoints) and the heap's fragmentation. The peak is the parse \
         (the YAML values of one document at a time, the typed objects) and the \
         sync's working copies, returned at the end of the tick.\n",
        w = opts.cpu_window
    );
    replace_section(
        &workspace_root().join("docs").join("benchmarks.md"),
        HEADING,
        &section,
    )
}
