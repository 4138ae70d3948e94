//! `cargo xtask bench --sweep 100,250,500`: new connections at steady
//! rates, open loop, through the `Cluster` VIP, and what each rate costs the
//! clients: connects that failed, and connects answered only after a second
//! or more (a SYN retransmitted).
//!
//! The closed-loop sustained row finds the most a path sustains; this finds
//! the rates it serves *cleanly*. Each configuration gets a fresh node (no
//! conntrack entry, SNAT port or TIME_WAIT socket left from another
//! measurement), then the rates run in ascending order with no pause, each
//! inheriting the state the lower ones left, as a load that grows does.
//! Connects are scheduled at fixed times (open loop): a slow path does not
//! slow the offered load down, as it would with a fixed number of clients.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use sluice_tests::{Cluster, Engine, Offloads};

use super::*;

/// Threads that open the connections: the connects that may be open at
/// once. A rate is served cleanly long before they are all busy; a step
/// that runs out of them counts the connects it started late.
const WORKERS: usize = 256;
/// A connect started this long after its slot counts as late.
const LATE: Duration = Duration::from_millis(100);
/// Connect and read timeouts of one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Above this a 2-core machine measures its own client, not the path.
const MAX_RATE: u32 = 20_000;
const MAX_STEP_SECS: u64 = 600;

/// One rate, one configuration.
#[derive(Debug, Clone, Default)]
struct Step {
    /// Connects scheduled.
    offered: u64,
    counts: Sustained,
    /// Connects started more than [`LATE`] after their slot.
    late: u64,
    p99_us: f64,
    /// Sluice: SYNs refused for want of an SNAT port (the agent's
    /// `no_snat_port`), over the step.
    no_snat_port: Option<u64>,
}

impl Step {
    fn failed(&self) -> u64 {
        self.counts.reset + self.counts.timed_out + self.counts.other
    }
    fn clean(&self) -> bool {
        self.failed() == 0 && self.counts.slow == 0 && self.late == 0
    }
}

struct SweepResult {
    config: Config,
    unavailable: Option<String>,
    steps: Vec<M<Step>>,
}

pub(super) fn run(opts: &BenchOpts) -> Result<()> {
    let rates = rates(&opts.sweep)?;
    if opts.sweep_secs == 0 || opts.sweep_secs > MAX_STEP_SECS {
        bail!(
            "--sweep-secs {}: give 1 to {MAX_STEP_SECS}",
            opts.sweep_secs
        );
    }
    let step = Duration::from_secs(opts.sweep_secs);
    let configs = selected_configs(opts.only.clone());
    check_tools()?;
    let agent = agent_for(&configs)?;
    check_interrupted()?;
    let machine = machine_note();
    let started = Instant::now();
    println!("==> bench --sweep: {}", machine.one_line);
    println!(
        "    {} s per rate, rates {:?}/s, {WORKERS} connects at most in flight",
        step.as_secs(),
        rates
    );
    let mut results = Vec::new();
    for &config in &configs {
        check_interrupted()?;
        println!("==> {}", config.label());
        let r = match config {
            Config::Routing | Config::Iptables | Config::Nftables => {
                sweep_baseline(config, &rates, step)
            }
            Config::Kernel => sweep_sluice(Engine::Kernel, &rates, step, agent.as_deref()),
            Config::Emulated => sweep_sluice(Engine::Emulated, &rates, step, agent.as_deref()),
        };
        check_interrupted()?;
        results.push(match r {
            Ok(steps) => SweepResult {
                config,
                unavailable: None,
                steps,
            },
            Err(e) => {
                println!("    not available: {}", short_err(&e));
                SweepResult {
                    config,
                    unavailable: Some(short_err(&e)),
                    steps: Vec::new(),
                }
            }
        });
    }
    let elapsed = started.elapsed();
    let table = render(&results, &rates, step);
    println!();
    println!("{table}");
    println!("(total {:.0} s)", elapsed.as_secs_f64());
    if !opts.no_write {
        let heading = "## Steady connection rates (`cargo xtask bench --sweep`)";
        let rates_arg: Vec<String> = rates.iter().map(u32::to_string).collect();
        let section = format!(
            "{heading}\n\n\
```sh\nsudo cargo xtask bench --sweep {} --sweep-secs {}\n```\n\n\
New connections at steady rates, scheduled at fixed times (open loop, at\n\
most {WORKERS} in flight), each a connect, one byte each way and a close with\n\
the server closing first, to one endpoint through the `Cluster` VIP (the\n\
ceiling: to the pod directly). Each configuration starts on a fresh node;\n\
its rates run in ascending order with no pause between them, each\n\
inheriting the conntrack entries, SNAT ports and the pod's TIME_WAIT\n\
sockets the lower rates left.\n\n\
Run of {}, total {:.0} s. Machine: {}.\n\n{table}\n",
            rates_arg.join(","),
            step.as_secs(),
            machine.date,
            elapsed.as_secs_f64(),
            machine.one_line,
        );
        let path = workspace_root().join("docs").join("benchmarks.md");
        replace_section(&path, heading, &section)?;
        println!("==> wrote {}", path.display());
    }
    Ok(())
}

/// The rates asked for, ascending, each once.
fn rates(asked: &[u32]) -> Result<Vec<u32>> {
    if let Some(bad) = asked.iter().find(|&&r| r == 0 || r > MAX_RATE) {
        bail!("--sweep: rate {bad}/s: give rates from 1 to {MAX_RATE} per second");
    }
    let mut v = asked.to_vec();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

fn sweep_baseline(config: Config, rates: &[u32], step: Duration) -> Result<Vec<M<Step>>> {
    let topo = Topo::build(Offloads::Off)?;
    let dst = match config {
        Config::Routing => SocketAddr::new(POD_IP.parse::<Ipv4Addr>()?.into(), CONNECT_TARGET),
        Config::Iptables => {
            apply_iptables(&topo.node, 1)?;
            SocketAddr::new(VIP.parse::<Ipv4Addr>()?.into(), CONNECT_PORT)
        }
        Config::Nftables => {
            apply_nftables(&topo.node, 1)?;
            SocketAddr::new(VIP.parse::<Ipv4Addr>()?.into(), CONNECT_PORT)
        }
        _ => bail!("not a baseline"),
    };
    steps(
        topo.client.name(),
        topo.pod.name(),
        dst,
        rates,
        step,
        || None,
    )
}

fn sweep_sluice(
    engine: Engine,
    rates: &[u32],
    step: Duration,
    agent: Option<&Path>,
) -> Result<Vec<M<Step>>> {
    let agent = agent.ok_or_else(|| anyhow!("no agent binary"))?;
    if engine == Engine::Kernel {
        build_ebpf()?;
    }
    let spec = sluice_spec().offloads(Offloads::Off);
    let cluster = match Cluster::start_with("bw", engine, spec, Some(agent.to_path_buf())) {
        Ok(c) => c,
        Err(e) => bail!("{}", agent_failure(&e)),
    };
    let pod = cluster
        .pod("bench")
        .ok_or_else(|| anyhow!("no pod namespace"))?;
    let dst = SocketAddr::new(VIP.parse::<Ipv4Addr>()?.into(), CONNECT_PORT);
    let no_port = || cluster.agent_status(1).map(|s| s.counter("no_snat_port"));
    steps(cluster.client_ns(), pod.name(), dst, rates, step, no_port)
}

/// The connect server in `pod`, then each rate in turn.
fn steps(
    client: &str,
    pod: &str,
    dst: SocketAddr,
    rates: &[u32],
    step: Duration,
    no_snat_port: impl Fn() -> Option<u64>,
) -> Result<Vec<M<Step>>> {
    let server = ConnectServer::start(pod, CONNECT_TARGET)?;
    wait_reachable(client, dst)?;
    let mut out = Vec::new();
    for &rate in rates {
        check_interrupted()?;
        let before = no_snat_port();
        let mut s = M::from(paced(client, pod, dst, rate, step));
        if let (M::Ok(s), Some(b), Some(a)) = (&mut s, before, no_snat_port()) {
            s.no_snat_port = Some(a.saturating_sub(b));
        }
        println!("    {rate}/s: {}", fmt_step(&s));
        out.push(s);
    }
    drop(server);
    Ok(out)
}

/// `rate` connects a second for `duration`, each at its own time.
fn paced(client: &str, pod: &str, dst: SocketAddr, rate: u32, duration: Duration) -> Result<Step> {
    let pod_before = pod_tcp(pod)?;
    let offered = (u64::from(rate) * duration.as_millis() as u64 / 1000).max(1);
    let interval = Duration::from_secs(1) / rate;
    let mut step = sluice_tests::in_ns(client, move || -> Result<Step> {
        let retrans_before = sluice_tests::syn_retransmits()?;
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now() + Duration::from_millis(50);
        // Threads start in this thread's network namespace.
        let workers: Vec<_> = (0..WORKERS.min(offered as usize))
            .map(|_| {
                let next = next.clone();
                thread::spawn(move || {
                    let mut counts = Sustained::default();
                    let mut late = 0u64;
                    let mut times: Vec<u32> = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= offered || interrupted() {
                            break;
                        }
                        let due = start + interval * i as u32;
                        let now = Instant::now();
                        if due > now {
                            thread::sleep(due - now);
                        } else if now - due > LATE {
                            late += 1;
                        }
                        let t = Instant::now();
                        let r = short_request(dst, REQUEST_TIMEOUT);
                        let took = t.elapsed();
                        if r.is_ok() {
                            times.push(took.as_micros().min(u128::from(u32::MAX)) as u32);
                        }
                        counts.add(r, took);
                    }
                    (counts, late, times)
                })
            })
            .collect();
        let mut step = Step {
            offered,
            ..Step::default()
        };
        let mut times = Vec::new();
        for w in workers {
            let (c, late, t) = w.join().map_err(|_| anyhow!("a connect thread panicked"))?;
            step.counts.merge(&c);
            step.late += late;
            times.extend(t);
        }
        step.counts.secs = duration.as_secs_f64();
        step.counts.syn_retrans = sluice_tests::syn_retransmits()?.saturating_sub(retrans_before);
        times.sort_unstable();
        if let Some(&p99) = times.get((times.len() * 99 / 100).min(times.len().saturating_sub(1))) {
            step.p99_us = f64::from(p99);
        }
        Ok(step)
    })??;
    step.counts.pod = pod_tcp(pod)?.since(pod_before);
    check_interrupted()?;
    Ok(step)
}

fn fmt_step(m: &M<Step>) -> String {
    match m {
        M::Ok(s) => format!(
            "{} of {} answered, failed {} (reset {}, timed out {}, other {}), after ≥ 1 s {}, started late {}, p99 {:.1} ms, SYN retransmits {}, pod PAWS-rejected SYNs {}, listen drops {}{}",
            s.counts.ok,
            s.offered,
            s.failed(),
            s.counts.reset,
            s.counts.timed_out,
            s.counts.other,
            s.counts.slow,
            s.late,
            s.p99_us / 1000.0,
            s.counts.syn_retrans,
            s.counts.pod.paws_timewait,
            s.counts.pod.listen_drops,
            s.no_snat_port
                .map(|n| format!(", no SNAT port {n}"))
                .unwrap_or_default()
        ),
        M::Err(e) => format!("failed: {e}"),
        M::Skipped => "-".into(),
    }
}

/// Two tables (failed and slow connects with the p99, then where the
/// retransmits came from) and the verdict against iptables.
fn render(results: &[SweepResult], rates: &[u32], step: Duration) -> String {
    let mut s = String::new();
    let header = |s: &mut String| {
        s.push_str("| configuration |");
        for r in rates {
            let _ = write!(s, " {}/s |", group(*r as usize));
        }
        s.push_str("\n|---|");
        for _ in rates {
            s.push_str("---:|");
        }
        s.push('\n');
    };
    let _ = writeln!(
        s,
        "Failed connects + connects answered after ≥ 1 s, of {} s at each rate (p99 of the answered, ms); \"clean\" = none failed, none slow, none started late:\n",
        step.as_secs()
    );
    header(&mut s);
    for r in results {
        let _ = write!(s, "| {} |", r.config.label());
        if let Some(why) = &r.unavailable {
            let _ = write!(s, " not available ({}) |", why.replace('|', "/"));
            for _ in 1..rates.len() {
                s.push_str(" - |");
            }
            s.push('\n');
            continue;
        }
        for m in &r.steps {
            match m {
                M::Ok(st) if st.clean() => {
                    let _ = write!(s, " clean ({:.1}) |", st.p99_us / 1000.0);
                }
                M::Ok(st) => {
                    let late = if st.late > 0 {
                        format!(", {} late", st.late)
                    } else {
                        String::new()
                    };
                    let _ = write!(
                        s,
                        " {} + {}{late} ({:.1}) |",
                        st.failed(),
                        st.counts.slow,
                        st.p99_us / 1000.0
                    );
                }
                m => {
                    let e = cell_err(m).unwrap_or_else(|| "-".into());
                    let _ = write!(s, " {} |", e.replace('|', "/"));
                }
            }
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "\nWhere unanswered SYNs went: the client's SYN retransmits / SYNs the pod's TIME_WAIT refused (`PAWSTimewait`) / the pod's listen drops; for Sluice also SYNs reset for want of an SNAT port:\n"
    );
    header(&mut s);
    for r in results.iter().filter(|r| r.unavailable.is_none()) {
        let _ = write!(s, "| {} |", r.config.label());
        for m in &r.steps {
            match m {
                M::Ok(st) => {
                    let port = st
                        .no_snat_port
                        .map(|n| format!(" / {n}"))
                        .unwrap_or_default();
                    let _ = write!(
                        s,
                        " {} / {} / {}{port} |",
                        st.counts.syn_retrans,
                        st.counts.pod.paws_timewait,
                        st.counts.pod.listen_drops
                    );
                }
                _ => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s.push('\n');
    s.push_str(&verdict(results, rates));
    s
}

/// The highest rate iptables serves cleanly (with every rate below it), and
/// whether each Sluice engine is clean at every rate up to it.
fn verdict(results: &[SweepResult], rates: &[u32]) -> String {
    let clean_up_to = |r: &SweepResult| -> Option<u32> {
        let mut best = None;
        for (m, &rate) in r.steps.iter().zip(rates) {
            match m {
                M::Ok(st) if st.clean() => best = Some(rate),
                _ => break,
            }
        }
        best
    };
    let Some(ipt) = results
        .iter()
        .find(|r| r.config == Config::Iptables && r.unavailable.is_none())
    else {
        return "No iptables run to compare with.\n".into();
    };
    let Some(limit) = clean_up_to(ipt) else {
        return "iptables was not clean at the lowest rate: no rate to hold the engines to.\n"
            .into();
    };
    let mut s = format!("iptables serves every rate up to {limit}/s cleanly.\n");
    for r in results
        .iter()
        .filter(|r| matches!(r.config, Config::Kernel | Config::Emulated))
    {
        if let Some(why) = &r.unavailable {
            let _ = writeln!(s, "- {}: not available ({why}).", engine_word(r.config));
            continue;
        }
        let dirty: Vec<String> = r
            .steps
            .iter()
            .zip(rates)
            .filter(|(_, &rate)| rate <= limit)
            .filter_map(|(m, rate)| match m {
                M::Ok(st) if st.clean() => None,
                M::Ok(st) => Some(format!(
                    "{rate}/s: {} failed, {} slow, {} late",
                    st.failed(),
                    st.counts.slow,
                    st.late
                )),
                _ => Some(format!("{rate}/s: not measured")),
            })
            .collect();
        let top = clean_up_to(r).map_or("none".to_string(), |t| format!("{t}/s"));
        if dirty.is_empty() {
            let _ = writeln!(
                s,
                "- {}: clean at every rate up to {limit}/s, as the goal asks (clean up to {top} in this sweep).",
                engine_word(r.config)
            );
        } else {
            let _ = writeln!(
                s,
                "- {}: NOT clean at every rate iptables serves cleanly ({}).",
                engine_word(r.config),
                dirty.join("; ")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(rate: u32, failed: u64, slow: u64) -> M<Step> {
        M::Ok(Step {
            offered: u64::from(rate),
            counts: Sustained {
                ok: u64::from(rate) - failed,
                timed_out: failed,
                slow,
                ..Sustained::default()
            },
            ..Step::default()
        })
    }

    fn result(config: Config, steps: Vec<M<Step>>) -> SweepResult {
        SweepResult {
            config,
            unavailable: None,
            steps,
        }
    }

    #[test]
    fn rates_are_checked_sorted_and_deduplicated() {
        assert_eq!(rates(&[500, 100, 500]).unwrap(), vec![100, 500]);
        let e = rates(&[100, 0]).unwrap_err().to_string();
        assert!(e.contains("rate 0/s"), "{e}");
        assert!(rates(&[MAX_RATE + 1]).is_err());
    }

    #[test]
    fn the_engines_are_held_to_the_rates_iptables_serves_cleanly() {
        let rates = [100, 200, 400];
        let results = vec![
            // Clean at 100 and 200, not at 400: the limit is 200.
            result(
                Config::Iptables,
                vec![step(100, 0, 0), step(200, 0, 0), step(400, 3, 9)],
            ),
            // Dirty only above the limit: meets the goal.
            result(
                Config::Kernel,
                vec![step(100, 0, 0), step(200, 0, 0), step(400, 0, 2)],
            ),
            // One slow connect at 200: misses it.
            result(
                Config::Emulated,
                vec![step(100, 0, 0), step(200, 0, 1), step(400, 0, 0)],
            ),
        ];
        let v = verdict(&results, &rates);
        assert!(v.contains("up to 200/s cleanly"), "{v}");
        assert!(
            v.contains("kernel engine: clean at every rate up to 200/s"),
            "{v}"
        );
        assert!(
            v.contains("emulated engine: NOT clean") && v.contains("200/s: 0 failed, 1 slow"),
            "{v}"
        );
    }

    #[test]
    fn a_rate_iptables_fails_below_a_clean_one_ends_its_clean_range() {
        let rates = [100, 200];
        let results = vec![result(
            Config::Iptables,
            vec![step(100, 1, 0), step(200, 0, 0)],
        )];
        let v = verdict(&results, &rates);
        assert!(v.contains("not clean at the lowest rate"), "{v}");
    }
}
