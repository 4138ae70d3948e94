//! The process: the configuration source, the engine, `/metrics`, and the
//! loop that runs probes, reads the neighbour table and hands the engine a
//! new desired state when (and only when) it changed. SIGTERM and SIGINT
//! end it: the engine is shut down (detached, its state removed) and the
//! watchers stopped.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::cli::{Args, EngineKind};
use crate::config::{self, LbConfig};
use crate::control::Control;
use crate::engine::{self, LbEngine};
use crate::health::{probe, ProbeKey};
use crate::ids::Ids;
use crate::metrics::{self, Shared, Snapshot};
use crate::neighbours;

/// The neighbour table is read this often while some backend has no MAC…
const NEIGH_UNRESOLVED: Duration = Duration::from_secs(1);
/// …and this often otherwise (a node replaced under the same address).
const NEIGH_RESOLVED: Duration = Duration::from_secs(10);
/// Engine counters for `/metrics`.
const COUNTERS_EVERY: Duration = Duration::from_secs(1);
/// A refused apply is tried again after this long.
const APPLY_RETRY: Duration = Duration::from_secs(1);

/// Where the configuration comes from.
pub enum Source {
    File(LbConfig),
    Api {
        rx: watch::Receiver<Option<LbConfig>>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    },
}

/// The source the flags name: the file read and checked, or the API's
/// watchers started.
pub async fn open_source(args: &Args) -> Result<Source> {
    if let Some(path) = &args.config {
        let cfg = config::file::load(path)?;
        info!(file = %path.display(), services = cfg.services.len(), "configuration read");
        return Ok(Source::File(cfg));
    }
    let Some(path) = &args.kubeconfig else {
        anyhow::bail!("neither --config nor --kubeconfig given");
    };
    let client = sluice_agent::state::api::client_from_kubeconfig(path).await?;
    let (rx, tasks) = config::watch::spawn(client);
    info!(kubeconfig = %path.display(), "watching the API's load-balancer objects");
    Ok(Source::Api { rx, tasks })
}

fn start_engine(args: &Args) -> Result<Box<dyn LbEngine>> {
    match args.engine {
        EngineKind::Kernel => engine::start_kernel(&args.interface, args.bpf_object.as_deref())
            .with_context(|| format!("starting the kernel engine on {}", args.interface)),
        EngineKind::Emulated => engine::start_emulated(&args.interface)
            .with_context(|| format!("starting the emulated engine on {}", args.interface)),
        EngineKind::Auto => {
            match engine::start_kernel(&args.interface, args.bpf_object.as_deref()) {
                Ok(e) => {
                    info!("auto: the kernel program loaded; using the kernel engine");
                    Ok(e)
                }
                Err(e) => {
                    warn!(
                        reason = %format!("{e:#}"),
                        "auto: the kernel engine is not available here; using the emulated engine"
                    );
                    engine::start_emulated(&args.interface).with_context(|| {
                        format!("starting the emulated engine on {}", args.interface)
                    })
                }
            }
        }
    }
}

/// A probe's result, back from its task.
struct ProbeDone {
    key: ProbeKey,
    seq: u64,
    outcome: probe::Outcome,
}

/// Runs until SIGTERM or SIGINT.
pub async fn run(args: Args) -> Result<()> {
    args.check()?;
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let source = open_source(&args).await?;
    // The engine first: after a SIGKILL the emulated engine gives the link
    // (and with it the addresses `/metrics` may bind) back when it starts.
    let engine = start_engine(&args)?;
    let listener = match metrics::bind(args.metrics_bind_address).await {
        Ok(l) => l,
        Err(e) => {
            if let Err(s) = engine.shutdown() {
                warn!(error = %format!("{s:#}"), "shutting the engine down");
            }
            return Err(e);
        }
    };
    info!(engine = engine.kind(), interface = %args.interface, "engine started");
    info!(address = %args.metrics_bind_address, "serving /metrics");
    let stop = async {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = int.recv() => info!("SIGINT: shutting down"),
        }
    };
    run_with(&args.interface, source, listener, engine, stop).await
}

/// Serves `source` with `engine`, probing from this thread's namespace and
/// reading `iface`'s neighbours, `/metrics` on `listener`, until `stop`
/// completes; then shuts the engine down.
pub async fn run_with(
    iface: &str,
    source: Source,
    listener: tokio::net::TcpListener,
    mut engine: Box<dyn LbEngine>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let shared: Shared = Arc::new(Mutex::new(Snapshot {
        engine: engine.kind().to_string(),
        ..Snapshot::default()
    }));
    let server = tokio::spawn(metrics::serve(listener, shared.clone()));
    let result = serve(iface, source, engine.as_mut(), &shared, stop).await;
    server.abort();
    let shut = engine.shutdown().context("shutting the engine down");
    result.and(shut)
}

async fn serve(
    iface: &str,
    source: Source,
    engine: &mut dyn LbEngine,
    shared: &Shared,
    stop: impl std::future::Future<Output = ()>,
) -> Result<()> {
    tokio::pin!(stop);
    let epoch = Instant::now();
    let now = || epoch.elapsed();
    let mut control = Control::new(Ids::default());
    let (mut api, tasks) = match source {
        Source::File(cfg) => {
            control.set_config(cfg, now());
            (None, Vec::new())
        }
        Source::Api { rx, tasks } => (Some(rx), tasks),
    };
    let (tx, mut results) = mpsc::unbounded_channel::<ProbeDone>();
    let mut neigh: Option<tokio::task::JoinHandle<Result<(neighbours::Macs, u64)>>> = None;
    let mut next_neigh = epoch;
    let mut next_counters = epoch;
    let mut retry: Option<Instant> = None;
    let iface = iface.to_string();
    loop {
        // Start what is due.
        for p in control.due(now()) {
            let tx = tx.clone();
            let addr = SocketAddr::new(IpAddr::V4(p.key.address), p.key.port);
            tokio::spawn(async move {
                let outcome = probe::probe(addr, &p.key.path, p.key.timeout).await;
                let _ = tx.send(ProbeDone {
                    key: p.key,
                    seq: p.seq,
                    outcome,
                });
            });
        }
        // A backend that appeared or turned healthy waits for a fresh read.
        if control.wants_neighbours() {
            next_neigh = next_neigh.min(Instant::now());
        }
        if neigh.is_none() && Instant::now() >= next_neigh {
            let iface = iface.clone();
            let read = control.neighbour_read_started();
            neigh = Some(tokio::task::spawn_blocking(move || {
                neighbours::read(&iface).map(|m| (m, read))
            }));
        }
        if Instant::now() >= next_counters {
            next_counters = Instant::now() + COUNTERS_EVERY;
            match engine.counters() {
                Ok(c) => {
                    let mut m = shared.lock().unwrap_or_else(|p| p.into_inner());
                    m.packets = c.packets_per_backend;
                    m.flows = c.flows;
                }
                Err(e) => debug!(error = %format!("{e:#}"), "engine counters"),
            }
        }
        apply(&mut control, engine, shared, &mut retry);

        let mut wake = next_counters.min(next_neigh);
        if let Some(t) = control.next_wakeup() {
            wake = wake.min(epoch + t);
        }
        if let Some(t) = retry {
            wake = wake.min(t);
        }
        tokio::select! {
            _ = &mut stop => break,
            Some(r) = results.recv() => {
                if !r.outcome.healthy() {
                    debug!(address = %r.key.address, port = r.key.port, outcome = %r.outcome, "probe failed");
                }
                control.report(&r.key, r.seq, r.outcome.healthy(), now());
            }
            changed = changed(&mut api) => match changed {
                Ok(Some(cfg)) => {
                    info!(services = cfg.services.len(), "configuration changed");
                    control.set_config(cfg, now());
                }
                Ok(None) => {}
                Err(()) => {
                    warn!("the API watchers stopped; keeping the last configuration");
                    api = None;
                }
            },
            r = finished(&mut neigh), if neigh.is_some() => {
                neigh = None;
                match r {
                    Ok(Ok((macs, read))) => control.set_macs(macs, read),
                    Ok(Err(e)) => warn!(error = %format!("{e:#}"), "reading the neighbour table"),
                    Err(e) => warn!(error = %e, "neighbour task"),
                }
                next_neigh = Instant::now()
                    + if control.unresolved() { NEIGH_UNRESOLVED } else { NEIGH_RESOLVED };
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

/// The next configuration from the API (`Ok(None)`: not complete yet);
/// pending forever for a file.
async fn changed(
    api: &mut Option<watch::Receiver<Option<LbConfig>>>,
) -> Result<Option<LbConfig>, ()> {
    let Some(rx) = api.as_mut() else {
        return std::future::pending().await;
    };
    rx.changed().await.map_err(|_| ())?;
    Ok(rx.borrow_and_update().clone())
}

/// The task's end; pending forever when there is none.
async fn finished<T>(
    task: &mut Option<tokio::task::JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    match task.as_mut() {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// Hands the engine the desired state if it changed, and refreshes the
/// configuration and health part of `/metrics`.
fn apply(
    control: &mut Control,
    engine: &mut dyn LbEngine,
    shared: &Shared,
    retry: &mut Option<Instant>,
) {
    if retry.is_some_and(|t| Instant::now() < t) {
        return;
    }
    *retry = None;
    if !control.dirty() {
        return;
    }
    if let Some(desired) = control.pending() {
        let ok = match engine.apply(&desired) {
            Ok(()) => true,
            Err(e) => {
                warn!(error = %format!("{e:#}"), "the engine refused the desired state; retrying");
                *retry = Some(Instant::now() + APPLY_RETRY);
                false
            }
        };
        control.applied(desired, ok);
        let mut m = shared.lock().unwrap_or_else(|p| p.into_inner());
        if ok {
            m.applies_ok += 1;
        } else {
            m.applies_failed += 1;
        }
    }
    let mut m = shared.lock().unwrap_or_else(|p| p.into_inner());
    control.fill(&mut m);
}
