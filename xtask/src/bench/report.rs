//! The report: the table, the goals, and the section of
//! docs/benchmarks.md it is written into.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::{self};
use std::time::Duration;

use anyhow::{Context, Result};

use super::*;

// --- report -----------------------------------------------------------------

pub(super) struct Machine {
    pub(super) one_line: String,
    pub(super) date: String,
    pub(super) load_start: String,
}

pub(super) fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub(super) fn machine_note() -> Machine {
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

pub(super) fn fmt_gbps(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{v:.2} Gbit/s"),
        M::Err(e) => format!("error: {e}"),
        M::Skipped => "-".into(),
    }
}

pub(super) fn fmt_kpps(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{:.0} kpps", v / 1e3),
        M::Err(e) => format!("error: {e}"),
        M::Skipped => "-".into(),
    }
}

pub(super) fn fmt_secs(m: &M<f64>) -> String {
    match m {
        M::Ok(v) => format!("{v:.1} s"),
        M::Err(_) => "failed".into(),
        M::Skipped => "-".into(),
    }
}

pub(super) fn fmt_sustained(m: &M<Sustained>) -> String {
    match m {
        M::Ok(s) => format!(
            "{} in {:.0} s ({:.0}/s), reset {}, timed out {}, other {}, slow {}, SYN retransmits {}, pod: PAWS-refused SYNs {}, listen drops {}, TIME_WAIT overflow {}",
            s.ok,
            s.secs,
            s.ok as f64 / s.secs.max(1e-9),
            s.reset,
            s.timed_out,
            s.other,
            s.slow,
            s.syn_retrans,
            s.pod.paws_timewait,
            s.pod.listen_drops,
            s.pod.tw_overflow
        ),
        M::Err(e) => format!("failed: {e}"),
        M::Skipped => "-".into(),
    }
}

pub(super) fn fmt_lat(m: &M<Latency>) -> String {
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

pub(super) fn ratio(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
        _ => "-".into(),
    }
}

pub(super) fn cell_err<T>(m: &M<T>) -> Option<String> {
    match m {
        M::Err(e) => Some(format!("error: {}", truncate(e, 60))),
        M::Skipped => Some("-".into()),
        M::Ok(_) => None,
    }
}

pub(super) fn group(n: usize) -> String {
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
pub(super) fn render(results: &[ConfigResult], plan: &Plan) -> String {
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

    s.push_str(&sustained_table(results, plan));
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

/// New connections sustained through the `Cluster` VIP and through the
/// `Local` one to one endpoint, each against iptables' rate with the same
/// policy in the same run.
fn sustained_table(results: &[ConfigResult], plan: &Plan) -> String {
    let mut s = String::new();
    // Not measured in this pass (it runs in the first only).
    if results.iter().all(|r| matches!(r.sustained, M::Skipped)) {
        return s;
    }
    type Pick = fn(&ConfigResult) -> &M<Sustained>;
    let rate = |m: &M<Sustained>| m.ok().map(|s| s.ok as f64 / s.secs.max(1e-9));
    let _ = writeln!(
        s,
        "\nShort connections, {} s sustained, {} in flight: connect, 1 byte each way, the server closes first; to one endpoint through the `Cluster` VIP (SNAT) and through the `Local` one (the client's address kept). × = rate ÷ iptables' rate with the same policy in this run; the ceiling goes to the pod directly. The last two columns are the pod's: SYNs its TIME_WAIT sockets refused (`PAWSTimewait`) and its listen drops:\n",
        plan.sustained.as_secs(),
        SUSTAINED_IN_FLIGHT
    );
    s.push_str("| configuration | policy | connects | per second | × iptables | reset | timed out | answered after ≥ 1 s | SYN retransmits | pod: PAWS-refused SYNs | pod: listen drops |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let policies: [(&str, Pick); 2] = [
        ("Cluster", |r| &r.sustained),
        ("Local", |r| &r.sustained_local),
    ];
    for (policy, pick) in policies {
        let base = results
            .iter()
            .find(|r| r.config == Config::Iptables)
            .and_then(|r| rate(pick(r)));
        for r in results {
            if r.unavailable.is_some() {
                continue;
            }
            let policy = if r.config == Config::Routing {
                if policy == "Local" {
                    continue;
                }
                "none (pod IP)"
            } else {
                policy
            };
            match pick(r) {
                M::Ok(v) => {
                    let _ = writeln!(
                        s,
                        "| {} | {policy} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                        r.config.label(),
                        v.ok,
                        v.ok as f64 / v.secs.max(1e-9),
                        ratio(rate(pick(r)), base),
                        v.reset,
                        v.timed_out + v.other,
                        v.slow,
                        v.syn_retrans,
                        v.pod.paws_timewait,
                        v.pod.listen_drops,
                    );
                }
                m => {
                    let e = cell_err(m).unwrap_or_else(|| "-".into());
                    let _ = writeln!(
                        s,
                        "| {} | {policy} | {} | - | - | - | - | - | - | - | - |",
                        r.config.label(),
                        e.replace('|', "/")
                    );
                }
            }
        }
    }
    s
}

/// Where each engine stands against the issue's goals, from this run.
pub(super) fn goals(results: &[ConfigResult], plan: &Plan) -> String {
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

pub(super) fn doc_section(
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
    if opts.offloads != OffloadChoice::Both {
        let _ = write!(
            cmd,
            " --offloads {}",
            format!("{:?}", opts.offloads).to_lowercase()
        );
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
Offloads, two passes, each against its own ceiling (`--offloads off|on|both`):\n\
- **off**: every veth of the topology (client, bridge ports, `nic0`, both\n  \
ends of the pod link) has TX checksum offload, TSO and GSO off, so every\n  \
frame is complete and MTU-sized: the ceiling is per-packet forwarding.\n\
- **on, as deployed**: the client's and the node's links keep the kernel's\n  \
defaults (TX checksum, TSO, GSO) and receive with GRO, as a NIC does; the\n  \
bridge ports finish frames as a wire would (checksummed, cut to the MTU);\n  \
the pod link is left as the kernel engine leaves it (the kernel's\n  \
defaults). Pods and the client send 64 KB super-frames, the node forwards\n  \
GRO aggregates: a higher ceiling. The emulated engine turns its pods' TX\n  \
offloads off and reads the wire with its GSO header (docs/architecture.md).\n\
The sustained-connect rows (through the `Cluster` VIP, which measures the\n\
SNAT port allocator, and through the `Local` one, the client's address\n\
kept) are not about offloads: they run in the first pass only. Steady\n\
rates: `--sweep` (its own section below).\n\n\
Connect loops: the connect server closes first, so the pod keeps every\n\
connection in TIME_WAIT, and Sluice hands such a port only to a SYN that\n\
TIME_WAIT takes (about half, timestamps being offset per connection). Its\n\
loops against the same backend are started 67 s apart so each measures\n\
free ports; the sustained-connect row measures the port space itself.\n\n\
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
pub(super) fn write_section(path: &Path, section: &str) -> Result<()> {
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
        // 2 generated + 3 ports of the measured Service + the Local one.
        assert_eq!(ipt.matches("-j DNAT").count(), 6);
        let nft = nftables_rules(3);
        assert_eq!(nft.matches("dnat to").count(), 6);
        // Local: outside clients skip the masquerade mark.
        let local = chain_id(2_000_000, 0);
        let ext: Vec<&str> = ipt
            .lines()
            .filter(|l| l.starts_with(&format!("-A KUBE-EXT-{local} ")))
            .collect();
        assert_eq!(
            ext.last(),
            Some(&format!("-A KUBE-EXT-{local} -j KUBE-SVL-{local}").as_str())
        );
        assert!(ext
            .iter()
            .all(|l| !l.ends_with("-j KUBE-MARK-MASQ") || l.contains("--src-type LOCAL")));
        assert!(nft.contains(&format!(
            "chain external-{local} {{\n    ip saddr {POD_CIDR} goto service-{local}"
        )));
        assert_ne!(chain_id(1, 0), chain_id(2, 0));
    }
}
