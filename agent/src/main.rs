use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tracing::{info, warn};

use sluice_agent::cli::{Args, CliError, DatapathMode, LogFormat};
use sluice_agent::engine;
use sluice_agent::health::{HealthConfig, HealthHandle, SystemClock};
use sluice_agent::metrics::MetricsSnapshot;
use sluice_agent::pods::{OsProber, OsProcessControl, PodManager, PoolKind};
use sluice_agent::register::{self, machine, RegisterConfig};
use sluice_agent::runner::Runner;
use sluice_agent::state::api::{
    client_with, config_from_kubeconfig, DrainCalls, KubeDrainer, KubeSource, KubeStatusSink,
    PodStatusSink,
};
use sluice_agent::state::source::StateSource;
use sluice_agent::state::watch::WatchedFile;

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

fn start_engine(args: &Args) -> Result<Box<dyn engine::Engine>> {
    let pin_dir = args
        .bpf_pin_dir
        .clone()
        .unwrap_or_else(|| engine::kernel::default_pin_dir(&args.node_name));
    let kernel = || -> Result<Box<dyn engine::Engine>> {
        let object = match &args.bpf_object {
            Some(p) => p.clone(),
            None => engine::kernel::default_object()?,
        };
        let sizes = engine::kernel::MapSizes {
            services: args.bpf_service_entries,
            endpoints: args.bpf_endpoint_entries,
            maglev: args.bpf_maglev_entries,
        };
        engine::start_kernel(&args.nic, &args.node_name, &object, &pin_dir, sizes).with_context(
            || {
                format!(
                    "starting the kernel datapath on {} with {}",
                    args.nic,
                    object.display()
                )
            },
        )
    };
    let emulated = || {
        engine::start_emulated(&args.nic, &args.node_name)
            .with_context(|| format!("starting the emulated datapath on {}", args.nic))
    };
    match args.datapath {
        DatapathMode::Kernel => kernel(),
        DatapathMode::Emulated => emulated(),
        // A previous kernel agent's pins: that datapath is running, and the
        // emulation must not start on top of it.
        DatapathMode::Auto if engine::kernel::pins::has_pins(&pin_dir) => {
            info!(pin_dir = %pin_dir.display(), "auto: adopting the pinned kernel datapath");
            kernel()
        }
        DatapathMode::Auto => match kernel() {
            Ok(e) => {
                info!("auto: the kernel program loaded; using the kernel datapath");
                Ok(e)
            }
            Err(e) => {
                warn!(
                    reason = %format!("{e:#}"),
                    "auto: the kernel datapath is not available here; using the emulated datapath"
                );
                emulated()
            }
        },
    }
}

/// Raises the soft limit on open files to the hard limit, as Go programs
/// (kube-proxy among them) do at start. Each health listener may hold 1024
/// connections, besides pods' links, probes and the packet sockets; the
/// usual soft limit of 1024 would have `accept` fail with EMFILE long before
/// a flood fills one budget. Failing to raise it is not fatal: the health
/// servers still shed connections and back off when descriptors run out.
fn raise_nofile_limit() {
    let before = rlimit::Resource::NOFILE.get().map(|(soft, _)| soft).ok();
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(now) if before.is_some_and(|b| b < now) => {
            info!(from = before, to = now, "raised the open-file limit");
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, soft = before, "raising RLIMIT_NOFILE"),
    }
}

fn start_health(args: &Args) -> Result<HealthHandle> {
    let mut cfg = HealthConfig::new(Duration::from_secs(args.sync_period_s));
    cfg.node_addrs = vec![args.healthz_bind_address];
    // Per-Service health ports listen on the same address as 10256.
    cfg.service_ips = vec![args.healthz_bind_address.ip()];
    HealthHandle::start(cfg, Arc::new(SystemClock))
        .with_context(|| format!("starting health servers on {}", args.healthz_bind_address))
}

/// Where the pods' status goes and where drains are asked: the API
/// server; none with a state file.
type Sink = Option<(Box<dyn PodStatusSink>, Box<dyn DrainCalls>)>;

/// The desired state's source: the state file, or the API server (which
/// also registers the node and renews its Lease).
async fn start_source(args: &Args) -> Result<(Box<dyn StateSource>, Sink)> {
    if let Some(path) = &args.state {
        // Read and parsed off the sync loop, on inotify (a slow stat poll
        // as fallback): a large or hostile file never stalls a sync.
        let file = WatchedFile::new(path)
            .with_context(|| format!("watching the state file {}", path.display()))?;
        return Ok((Box::new(file), None));
    }
    let Some(kubeconfig) = &args.kubeconfig else {
        anyhow::bail!("no desired state: pass --state FILE or --kubeconfig FILE");
    };
    let mut cfg = config_from_kubeconfig(kubeconfig).await?;
    // Without kube's own retries (a 429, 503 or 504 retried up to 15 times
    // over minutes inside one call): every caller here retries on its own
    // terms — an Eviction's 429 is an answer the drain acts on (its
    // back-off, the reason's patience), the status writer backs off per
    // pod, the registration at its next renewal, the watchers with their
    // back-off — and a call held for minutes would stall the others queued
    // behind it.
    cfg.default_retry = false;
    let client = client_with(kubeconfig, cfg)?;
    let rt = tokio::runtime::Handle::current();
    let uplink = if args.node_ip.is_empty() {
        machine::link_addrs(&args.nic).unwrap_or_else(|e| {
            warn!(nic = %args.nic, error = %format!("{e:#}"), "no --node-ip and the uplink's addresses cannot be read");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    let cfg = RegisterConfig {
        name: args.node_name.clone(),
        node_ips: args.node_ip.clone(),
        cpu: args.cpu,
        memory: args.memory,
        labels: args.node_labels.iter().cloned().collect(),
        taints: args.register_with_taints.clone(),
        max_pods: args.max_pods,
        zone: args.zone.clone(),
        pool: args.pool.clone(),
        version: args.node_version.clone(),
        lease_duration_s: args.node_lease_duration_seconds,
    };
    let facts = register::facts(&cfg, machine::Machine::read(), uplink);
    if facts.addrs.is_empty() {
        warn!("registering the Node without an InternalIP: pass --node-ip");
    }
    // Runs as long as the agent: aborted with the runtime at exit.
    drop(register::spawn(
        &rt,
        client.clone(),
        facts,
        args.node_lease_duration_seconds,
    ));
    info!(kubeconfig = %kubeconfig.display(), "desired state from the API server");
    let sink: Box<dyn PodStatusSink> = Box::new(KubeStatusSink::spawn(&rt, client.clone()));
    let drains: Box<dyn DrainCalls> =
        Box::new(KubeDrainer::spawn(&rt, client.clone(), &args.node_name));
    let source = KubeSource::spawn(&rt, client, &args.node_name);
    Ok((Box::new(source), Some((sink, drains))))
}

// One worker thread serves /metrics while the sync loop runs on the main
// thread; the health servers have a thread of their own.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<()> {
    let args = match Args::load() {
        Ok(a) => a,
        Err(CliError::Clap(e)) => e.exit(),
        Err(CliError::Config(m)) => {
            eprintln!("sluice-agent: {m}");
            std::process::exit(2);
        }
    };
    init_logging(args.log_format);
    if args.node_name.is_empty() {
        anyhow::bail!("--node-name: the host name cannot be read to default to; name the node");
    }
    raise_nofile_limit();

    sluice_agent::pods::set_netns_prefix(&args.pod_netns_prefix)
        .map_err(|e| anyhow::anyhow!("--pod-netns-prefix: {e}"))?;
    let health = start_health(&args)?;
    let engine = start_engine(&args)?;
    info!(datapath = engine.kind(), node = %args.node_name, nic = %args.nic, "agent started");
    let metrics = Arc::new(Mutex::new(MetricsSnapshot::default()));
    let metrics_addr = args.metrics_bind_address;
    let served = metrics.clone();
    tokio::spawn(async move {
        if let Err(e) = sluice_agent::metrics::serve(metrics_addr, served).await {
            warn!(addr = %metrics_addr, error = %e, "metrics server stopped");
        }
    });
    let (source, sink) = start_source(&args).await?;
    let mut runner = Runner::new(
        args.node_name.clone(),
        source,
        engine,
        health,
        metrics,
        PodManager::new(
            Box::new(OsProcessControl::new(&args.pod_log_dir)),
            Box::new(OsProber::default()),
            PoolKind::Standard,
        ),
        args.status_file.clone(),
    );
    runner.set_shutdown_grace(Duration::from_secs(args.shutdown_grace));
    runner.set_snat_ports(args.snat_port_range);
    if let Ok(local) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range") {
        if let Some((a, b)) = args.snat_port_range.overlap_with_local(&local) {
            warn!(
                snat_port_range = %args.snat_port_range,
                ip_local_port_range = local.trim(),
                "SNAT ports {a}-{b} are also the node's ephemeral ports: a translated flow \
                 and a connection of the node's own to the same pod may collide"
            );
        }
    }
    if let Some((sink, drains)) = sink {
        runner.set_status_sink(sink);
        runner.set_drain_calls(drains);
    }

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let mut tick = tokio::time::interval(Duration::from_millis(args.poll_ms));
    // With the API as the source a new state is taken as soon as it is
    // built, not at the next poll (the poll stays for the pods' clock).
    let wake = runner
        .source_waker()
        .unwrap_or_else(|| Arc::new(tokio::sync::Notify::new()));
    loop {
        tokio::select! {
            _ = tick.tick() => runner.tick(),
            _ = wake.notified() => runner.tick(),
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    info!("shutting down");
    runner.shutdown()
}
