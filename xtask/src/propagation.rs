//! `cargo xtask bench-propagation`: how long a change of a Service's
//! endpoints takes from `kubectl apply` to every agent's datapath, with 20
//! real agents (release builds) on `netns` nodes of a controller-run
//! cluster.
//!
//! Each change applies the Service's EndpointSlice with one endpoint more
//! or fewer (1 ↔ 2). An agent has it when its status file, written after
//! each successful sync of the maps, counts the new number of endpoints;
//! the files are polled every 2 ms. Per change: from the start of `kubectl
//! apply` to the last agent (and to each agent). The baseline, from the
//! same run: how long `kubectl apply` itself takes to return (process
//! start, discovery, the write), which bounds from below what any watcher
//! of the change could see. A `kubectl get --watch` of the slice, started
//! before the changes, marks when a watcher of the API server first sees
//! each write: the agents' part is counted from there too. Prints the
//! table; nothing is timed in tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_tests::kube_cluster::{kubectl_bin, KubeCluster, KubeClusterSpec};
use sluice_tests::Engine;

use crate::bench::{build_agent, build_bin};

#[derive(Debug, Clone, clap::Args)]
pub struct PropagationOpts {
    /// Agents (nodes), split over two zones.
    #[arg(long, default_value_t = 20)]
    pub nodes: usize,
    /// Endpoint changes applied, one after the other.
    #[arg(long, default_value_t = 50)]
    pub changes: usize,
}

const SLICE_WAIT: Duration = Duration::from_secs(30);

fn slice(endpoints: usize) -> String {
    let eps: Vec<String> = (1..=endpoints)
        .map(|i| format!("- {{addresses: [198.19.250.{i}], conditions: {{ready: true}}}}"))
        .collect();
    format!(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: prop-1
  labels: {{kubernetes.io/service-name: prop, endpointslice.kubernetes.io/managed-by: bench.sluice.dev}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints:
{}
",
        eps.join("\n")
    )
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: prop}
spec:
  type: LoadBalancer
  ports: [{name: http, port: 80, targetPort: 8080}]
";

/// The endpoint count in an agent's status file, if readable.
fn endpoints_in(status: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(status).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["endpoints"].as_u64()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn run(opts: PropagationOpts) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the bench creates network namespaces: run it as root");
    }
    if opts.nodes < 2 || !opts.nodes.is_multiple_of(2) {
        bail!("--nodes: an even number of at least 2, not {}", opts.nodes);
    }
    let agent = build_agent(true)?;
    let controller = build_bin("sluice-controller", "sluice-controller", true)?;
    let mut spec = KubeClusterSpec::new(&["p-a", "p-b"], opts.nodes / 2);
    spec.engine = Engine::Emulated;
    spec.agent = Some(agent);
    spec.controller = Some(controller);
    println!("==> a controller-run cluster of {} agents", opts.nodes);
    let c = KubeCluster::start("prop", &spec)?;
    let statuses: Vec<PathBuf> = c
        .nodes()?
        .iter()
        .map(|n| {
            c.dir
                .join("nodes-netns")
                .join(format!("{}.status.json", n.name))
        })
        .collect();
    c.apply(SERVICE)?;
    c.set_vips("prop", 50)?;
    let slice_file = c.dir.join("prop-slice.yaml");
    let kc = c.dir.join("admin.kubeconfig");
    let ctl_ns = c.control_namespace().to_string();
    let apply = |n: usize| -> Result<(Instant, Duration)> {
        std::fs::write(&slice_file, slice(n))?;
        let t0 = Instant::now();
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &ctl_ns])
            .arg(kubectl_bin())
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["apply", "-f"])
            .arg(&slice_file)
            .output()
            .context("kubectl apply")?;
        if !out.status.success() {
            bail!("kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok((t0, t0.elapsed()))
    };
    let wait_all = |want: u64, t0: Instant| -> Result<Vec<Duration>> {
        let mut seen: Vec<Option<Duration>> = vec![None; statuses.len()];
        while seen.iter().any(Option::is_none) {
            if t0.elapsed() > SLICE_WAIT {
                bail!(
                    "{} of {} agents did not show {want} endpoints within {SLICE_WAIT:?}",
                    seen.iter().filter(|s| s.is_none()).count(),
                    statuses.len()
                );
            }
            for (i, s) in statuses.iter().enumerate() {
                if seen[i].is_none() && endpoints_in(s) == Some(want) {
                    seen[i] = Some(t0.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(seen.into_iter().flatten().collect())
    };
    // Warm up: the first apply creates the slice and kubectl's caches.
    let (t0, _) = apply(1)?;
    wait_all(1, t0)?;
    let watch = Watch::start(&ctl_ns, &kc)?;

    let mut last_agent = Vec::new();
    let mut every_agent = Vec::new();
    let mut kubectl = Vec::new();
    let mut after_ack = Vec::new();
    let mut after_watch = Vec::new();
    for i in 0..opts.changes {
        let n = if i % 2 == 0 { 2 } else { 1 };
        watch.clear();
        let (t0, ack) = apply(n)?;
        let arrivals = wait_all(n as u64, t0)?;
        let last = arrivals.iter().max().copied().unwrap_or_default();
        let seen = watch.next_after(t0)?;
        kubectl.push(ack);
        last_agent.push(last);
        after_ack.push(last.saturating_sub(ack));
        after_watch.push(last.saturating_sub(seen));
        every_agent.extend(arrivals);
    }
    drop(watch);
    for v in [
        &mut last_agent,
        &mut every_agent,
        &mut kubectl,
        &mut after_ack,
        &mut after_watch,
    ] {
        v.sort();
    }
    let k50 = ms(pct(&kubectl, 0.5));
    println!();
    println!("| agents | changes | `kubectl apply` returns p50 ms (baseline) | every agent has it p50 ms (ratio) | p99 ms | one agent p50 / p99 ms | after kubectl returned p50 / p99 ms | after a watcher saw the write p50 / p99 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {k50:.1} | {:.1} ({:.2}×) | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} |",
        statuses.len(),
        opts.changes,
        ms(pct(&last_agent, 0.5)),
        ms(pct(&last_agent, 0.5)) / k50,
        ms(pct(&last_agent, 0.99)),
        ms(pct(&every_agent, 0.5)),
        ms(pct(&every_agent, 0.99)),
        ms(pct(&after_ack, 0.5)),
        ms(pct(&after_ack, 0.99)),
        ms(pct(&after_watch, 0.5)),
        ms(pct(&after_watch, 0.99)),
    );
    Ok(())
}

/// `kubectl get --watch-only` of the bench's slice in the control
/// namespace: when each event reached a watcher. Killed when dropped.
struct Watch {
    child: std::process::Child,
    events: std::sync::mpsc::Receiver<Instant>,
}

impl Watch {
    fn start(ctl_ns: &str, kc: &Path) -> Result<Watch> {
        let mut child = std::process::Command::new("ip")
            .args(["netns", "exec", ctl_ns])
            .arg(kubectl_bin())
            .arg("--kubeconfig")
            .arg(kc)
            .args([
                "get",
                "endpointslice",
                "prop-1",
                "--watch-only",
                "-o",
                "jsonpath={.metadata.resourceVersion}{\"\\n\"}",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("kubectl get --watch-only")?;
        let out = child.stdout.take().context("the watch's stdout")?;
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                if line.is_err() || tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
        // The watch is open once kubectl has started and listed; a change
        // made before that would be missed.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Watch { child, events })
    }

    /// Forget events already seen.
    fn clear(&self) {
        while self.events.try_recv().is_ok() {}
    }

    /// When the first event after `t0` came, counted from `t0`.
    fn next_after(&self, t0: Instant) -> Result<Duration> {
        loop {
            let at = self
                .events
                .recv_timeout(SLICE_WAIT)
                .context("the watch saw no change")?;
            if at >= t0 {
                return Ok(at - t0);
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
