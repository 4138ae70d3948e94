//! `sluice-controller serve`: the API server over HTTPS with the
//! credentials `init` made.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use crate::api::{self, auth::Authenticator, objects::Objects};
use crate::identity;
use crate::pending::{self, Pending, Slot};
use crate::prefixed::Prefixed;
use crate::providers::netns::{NetnsConfig, NetnsProvider};
use sluice_store::{EtcdStore, RedbOptions, RedbStore, Store, WatchCache, WatchCacheOptions};
use tokio::io::AsyncReadExt;

/// A client that opens a connection and sends nothing is dropped after
/// this, so idle sockets cannot pile up before TLS.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an HTTP/1 connection may take to send a request's headers,
/// waiting for the next request included (`--idle-timeout`); an HTTP/2
/// connection is pinged this often.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an HTTP/2 client has to answer a ping before its connection
/// is closed.
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// At most one log line this often about shed pending connections.
const SHED_LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, clap::Args)]
pub struct ServeOptions {
    /// What `init` wrote (certificates, tokens.csv).
    #[arg(long, default_value = "/etc/sluice/controller")]
    pub dir: PathBuf,
    /// Where to listen (kube-apiserver's secure port is 6443).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub bind: SocketAddr,
    /// Where the embedded store keeps its file (`store.redb`).
    #[arg(long, default_value = "/var/lib/sluice/controller")]
    pub data_dir: PathBuf,
    /// MiB of page cache of the embedded store (redb's own default, 1 GiB,
    /// would make it most of the controller's memory).
    #[arg(long, default_value_t = sluice_store::DEFAULT_CACHE_BYTES / (1024 * 1024))]
    pub store_cache_mib: usize,
    /// Use etcd instead of the embedded store (comma-separated URLs), as
    /// replicated controllers do.
    #[arg(long, value_delimiter = ',')]
    pub etcd_endpoints: Vec<String>,
    /// This controller's name in the leader election (default:
    /// `<hostname>-<pid>`).
    #[arg(long)]
    pub leader_identity: Option<String>,
    /// Seconds an HTTP/1 connection may take to send a request's headers
    /// (idle keep-alive connections included) before it is closed.
    #[arg(long, default_value_t = IDLE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: u64,
    /// The CIDR Services get their cluster IPs from, or two of them
    /// (comma-separated, one IPv4 and one IPv6: dual-stack, the first the
    /// primary family), as kube-apiserver's flag.
    #[arg(long, default_value = api::allocate::range::DEFAULT)]
    pub service_cluster_ip_range: String,
    /// The node ports NodePort and LoadBalancer Services get (and the
    /// health-check node ports of `externalTrafficPolicy: Local`).
    #[arg(long, default_value = api::allocate::ports::DEFAULT)]
    pub service_node_port_range: String,
    /// Allocate each Node's `spec.podCIDRs` from this CIDR, or two
    /// (comma-separated, one IPv4 and one IPv6), as kube-controller-
    /// manager's `--cluster-cidr` with `--allocate-node-cidrs`; unset, Nodes
    /// keep the podCIDRs they register with.
    #[arg(long, value_delimiter = ',')]
    pub cluster_cidr: Vec<String>,
    /// The prefix length of each Node's pod CIDR, per cluster CIDR in
    /// order (default /24 for IPv4, /64 for IPv6).
    #[arg(long, value_delimiter = ',')]
    pub node_cidr_mask_size: Vec<u8>,
    /// Seconds a Node may go without renewing its Lease before it is
    /// marked `Ready=Unknown` and tainted unreachable (kube-controller-
    /// manager's flag of the same name, 40 s).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub node_monitor_grace_period: u64,
    /// Seconds a Node must have been gone before the pods still bound to
    /// it are deleted outright (upstream's pod garbage collector waits
    /// 40 s and has no flag for it; the lab shortens it).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub pod_gc_quarantine: u64,
    /// How long a node must stay unneeded before the cluster autoscaler
    /// removes it (upstream's flag; `10m`, `30s`, `1h`). Unset: the
    /// autoscaling profile's (10 minutes for `balanced`). The lab
    /// shortens it so a scale-down scene takes seconds.
    #[arg(long, value_parser = parse_duration)]
    pub scale_down_unneeded_time: Option<Duration>,
    /// How long after a scale-up the cluster autoscaler removes no node
    /// (upstream's flag, 10 minutes). The lab shortens it too.
    #[arg(long, value_parser = parse_duration)]
    pub scale_down_delay_after_add: Option<Duration>,
    /// The cluster autoscaler's expanders, comma-separated and chained as
    /// upstream chains them: `random`, `most-pods`, `least-waste`,
    /// `least-nodes`, `price`, `priority`.
    #[arg(long, default_value = "least-waste", value_parser = parse_expander)]
    pub expander: sluice_autoscaler::expander::ExpanderChain,
    /// Where NodePools get their nodes: `none` (pools make no nodes),
    /// `sim` or `sim:<boot seconds>` (simulated nodes, registered and kept
    /// alive by the controller), `exec:<dir>` (the `create`, `delete` and
    /// `list` scripts in `dir`, see docs/node-providers.md),
    /// `netns:<file>` (the lab's: each node a network namespace running
    /// a real agent, configured by the YAML `file`).
    #[arg(long, default_value = "none")]
    pub node_provider: crate::loops::ProviderChoice,
    /// Run the decision loops while leading (`false`: serve the API only,
    /// as kube-apiserver without kube-controller-manager and
    /// kube-scheduler; the leader Lease is still kept).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub controllers: bool,
    /// The versions table (YAML or JSON): each minor's end of life and
    /// each release channel's versions, which a Cluster's maintenance
    /// exclusions are checked against (M7). Default: the shipped
    /// `controller/versions.example.yaml`, compiled in.
    #[arg(long)]
    pub versions: Option<PathBuf>,
}

/// A duration as Kubernetes' flags take it: `90s`, `10m`, `1h30m` (a Go
/// duration of whole seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration such as 30s, 10m or 1h30m");
    let mut total: u64 = 0;
    let mut digits = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        let unit = match ch {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() || s.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
#[test]
fn durations_read_as_kubernetes_flags_take_them() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    for bad in ["", "10", "5x", "m"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

fn parse_expander(s: &str) -> Result<sluice_autoscaler::expander::ExpanderChain, String> {
    sluice_autoscaler::expander::ExpanderChain::parse(s).map_err(|e| e.to_string())
}

/// The versions table `--versions` names, or the compiled-in example; a
/// bad file stops the start, naming what is wrong.
fn load_versions(path: Option<&Path>) -> Result<sluice_maintenance::Versions> {
    let text = match path {
        Some(p) => {
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
        }
        None => sluice_maintenance::versions::EXAMPLE.to_string(),
    };
    let source = path.map_or_else(
        || "the built-in versions table".to_string(),
        |p| p.display().to_string(),
    );
    sluice_maintenance::Versions::from_yaml(&text).with_context(|| source)
}

/// The store, and the etcd client when the store is etcd (for the
/// leader election).
async fn open_store(opts: &ServeOptions) -> Result<(Arc<dyn Store>, Option<etcd_client::Client>)> {
    if !opts.etcd_endpoints.is_empty() {
        let s = EtcdStore::connect(&opts.etcd_endpoints)
            .await
            .with_context(|| format!("connecting to etcd at {}", opts.etcd_endpoints.join(",")))?;
        let client = s.client();
        return Ok((Arc::new(s), Some(client)));
    }
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating {}", opts.data_dir.display()))?;
    let path = opts.data_dir.join("store.redb");
    let redb = RedbOptions {
        cache_bytes: opts.store_cache_mib.saturating_mul(1024 * 1024),
        ..RedbOptions::default()
    };
    let s = RedbStore::open(&path, redb)
        .with_context(|| format!("opening the store {}", path.display()))?;
    Ok((Arc::new(s), None))
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "controller".into());
    format!("{host}-{}", std::process::id())
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>> {
    let p = dir.join(name);
    std::fs::read(&p).with_context(|| {
        format!(
            "reading {} (run `sluice-controller init` first)",
            p.display()
        )
    })
}

fn tls_config(dir: &Path) -> Result<rustls::ServerConfig> {
    let certs = rustls_pemfile::certs(&mut read(dir, "apiserver.crt")?.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .context("apiserver.crt: not PEM certificates")?;
    let key = rustls_pemfile::private_key(&mut read(dir, "apiserver.key")?.as_slice())
        .context("apiserver.key: not a PEM key")?
        .context("apiserver.key: no private key in it")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("apiserver.crt and apiserver.key do not match")?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Raises the soft limit on open files to the hard limit, as the Go
/// runtime does for kube-apiserver at start: the usual soft limit of 1 024
/// is a few hundred watches and a small flood away from `accept` failing.
/// Returns the soft limit in force (1 024 if it cannot be read).
fn raise_nofile_limit() -> u64 {
    let before = rlimit::Resource::NOFILE.get().map(|(soft, _)| soft).ok();
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(now) => {
            if before.is_some_and(|b| b < now) {
                info!(from = before, to = now, "raised the open-file limit");
            }
            now
        }
        Err(e) => {
            warn!(error = %e, soft = before, "raising RLIMIT_NOFILE");
            before.unwrap_or(1024)
        }
    }
}

/// Whether the connection on `fd` has bytes waiting: asked of each one as
/// it is accepted (a real client sends its ClientHello with the handshake's
/// last ACK, so it has usually spoken by then), and of a silent one again
/// before it is shed (the accept loop can take hundreds of connections
/// before the tasks of the first run).
fn has_bytes(fd: std::os::fd::RawFd) -> bool {
    let mut b = 0u8;
    // SAFETY: a one-byte peek that never blocks (MSG_DONTWAIT) into a valid
    // buffer. `fd` is a connection the budget holds; if it has just closed
    // the call fails (EBADF), and if the number was reused the answer only
    // misjudges which connection to shed. Nothing is read or changed.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

/// A connection through TLS (within `TLS_HANDSHAKE_TIMEOUT`) that sent its
/// first bytes (within `idle`), with those bytes; `None` if it did not.
/// Its `slot` is marked talking once its first TLS bytes arrive.
async fn first_bytes(
    acceptor: &TlsAcceptor,
    tcp: tokio::net::TcpStream,
    idle: Duration,
    peer: SocketAddr,
    slot: &Slot,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Vec<u8>,
)> {
    let handshake = async {
        // Silent until the ClientHello starts; a client that connects and
        // says nothing is the first to go when the budget is full.
        tcp.readable().await?;
        if !slot.talking() {
            // Shed as silent a moment before its bytes came: no handshake.
            return Ok(None);
        }
        acceptor.accept(tcp).await.map(Some)
    };
    let mut tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(Some(t))) => t,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            info!(%peer, error = %e, "TLS handshake failed");
            return None;
        }
        Err(_) => return None,
    };
    // Neither HTTP/2 (before its preface) nor HTTP/1 (before its first
    // header byte, in hyper) has a timer here: read them within the bound
    // and put them back in front.
    let mut first = vec![0u8; 64];
    match tokio::time::timeout(idle, tls.read(&mut first)).await {
        Ok(Ok(n)) if n > 0 => {
            first.truncate(n);
            Some((tls, first))
        }
        _ => None,
    }
}

/// Serve until `shutdown` resolves.
pub async fn run(
    opts: &ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let services = api::allocate::Config::from_flags(
        &opts.service_cluster_ip_range,
        &opts.service_node_port_range,
    )
    .map_err(anyhow::Error::msg)?;
    let versions = load_versions(opts.versions.as_deref())?;
    let tokens_text =
        String::from_utf8(read(&opts.dir, "tokens.csv")?).context("tokens.csv: not UTF-8")?;
    let tokens = identity::parse(&tokens_text).context("tokens.csv")?;
    // One table of tokens: the API reads it, the netns provider adds its
    // nodes' tokens to it as it makes them.
    let auth = Authenticator::new(&tokens);
    let netns = match &opts.node_provider {
        crate::loops::ProviderChoice::Netns { config } => {
            // A bad file stops the start, naming the field, before the
            // store is opened.
            let cfg = NetnsConfig::load(config)?;
            Some(NetnsProvider::new(cfg, auth.clone(), &opts.dir).map_err(anyhow::Error::msg)?)
        }
        _ => None,
    };
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&opts.dir)?));
    let (store, etcd) = open_store(opts).await?;
    // Every object lives under /registry/: one store watch serves all
    // watchers (the leader election's keys are elsewhere).
    let store: Arc<dyn Store> = Arc::new(
        WatchCache::start(store, "/registry/", WatchCacheOptions::default())
            .await
            .context("starting the watch cache")?,
    );
    let identity = opts
        .leader_identity
        .clone()
        .unwrap_or_else(default_identity);
    crate::bootstrap::ensure_namespaces(store.as_ref()).await?;
    // Services stored without their allocation keys (before they were
    // kept) get them before anything new is handed out; then every 3 min.
    api::services::repair_logged(store.as_ref()).await;
    api::services::spawn_repair(store.clone());
    if !opts.cluster_cidr.is_empty() {
        // A bad flag stops the start, rather than a loop that never runs.
        let cidrs: Vec<&str> = opts.cluster_cidr.iter().map(String::as_str).collect();
        let masks: Vec<Option<u8>> = opts.node_cidr_mask_size.iter().map(|m| Some(*m)).collect();
        sluice_lifecycle::pod_cidrs::Allocator::new(&cidrs, &masks).map_err(anyhow::Error::msg)?;
    }
    let objects = Objects::new(store.clone(), services, versions);
    let loops = crate::leader::Loops {
        client: crate::loops::client::in_process(objects.clone()),
        config: crate::loops::LoopConfig {
            cluster_cidrs: opts.cluster_cidr.clone(),
            node_cidr_masks: (0..opts.cluster_cidr.len())
                .map(|i| opts.node_cidr_mask_size.get(i).copied())
                .collect(),
            node_monitor_grace_period: Duration::from_secs(opts.node_monitor_grace_period),
            pod_gc_quarantine: Duration::from_secs(opts.pod_gc_quarantine),
            provider: opts.node_provider.clone(),
            netns: netns.clone(),
            autoscaler: crate::loops::autoscaler::Config {
                unneeded_time: opts.scale_down_unneeded_time,
                delay_after_add: opts.scale_down_delay_after_add,
                expander: opts.expander.clone(),
            },
        },
    };
    crate::leader::spawn(store, etcd, identity, opts.controllers.then_some(loops));
    let app = api::router(auth, objects);
    let listener = TcpListener::bind(opts.bind)
        .await
        .with_context(|| format!("listening on {}", opts.bind))?;
    let nofile = raise_nofile_limit();
    let pending = Pending::new(pending::budget_for(nofile));
    info!(
        addr = %listener.local_addr()?,
        identities = tokens.len(),
        open_files = nofile,
        pending_budget = pending.cap(),
        "API server listening"
    );
    let mut last_shed_log: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: pause rather than spin.
                    warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Small writes go out at once, as Go's net package (and so
        // kube-apiserver) has them: with Nagle's algorithm a page's or a
        // watch event's last small segment waited for the client's delayed
        // ACK, 40 ms each (200 pages of a paged list took 8 s, not 1).
        if let Err(e) = tcp.set_nodelay(true) {
            warn!(error = %e, %peer, "TCP_NODELAY");
        }
        let (slot, shed, shed_one) = pending.admit(tcp.as_raw_fd(), has_bytes);
        if shed_one && last_shed_log.is_none_or(|t: Instant| t.elapsed() >= SHED_LOG_EVERY) {
            last_shed_log = Some(Instant::now());
            warn!(
                budget = pending.cap(),
                shed_total = pending.shed_total(),
                %peer,
                "pending connections over budget: closing the oldest silent ones"
            );
        }
        let acceptor = acceptor.clone();
        let idle = Duration::from_secs(opts.idle_timeout);
        let app = app.clone();
        tokio::spawn(async move {
            let got = tokio::select! {
                // A shed connection goes at its next poll, whatever step
                // of the handshake it is at.
                biased;
                _ = shed => None,
                r = first_bytes(&acceptor, tcp, idle, peer, &slot) => r,
            };
            // Through (or gone): its place in the budget is free.
            drop(slot);
            let Some((tls, first)) = got else { return };
            let svc = TowerToHyperService::new(app);
            // The protocol is the one ALPN chose, not guessed from the
            // first bytes: hyper-util's detection runs without a timer.
            // HTTP/1's header timeout starts again after each answer, so
            // idle keep-alive connections cannot pile up; an HTTP/2
            // connection is pinged instead. Watches are answers in
            // progress, not idle.
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
            let io = TokioIo::new(Prefixed::new(first, tls));
            let served = if h2 {
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .keep_alive_interval(Some(idle))
                    .keep_alive_timeout(HTTP2_PING_TIMEOUT)
                    .serve_connection(io, svc)
                    .await
            } else {
                hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(idle)
                    .serve_connection(io, svc)
                    .with_upgrades()
                    .await
            };
            if let Err(e) = served {
                info!(%peer, error = %e, "connection ended");
            }
        });
    }
    info!("API server stopped");
    if let Some(p) = netns {
        // The lab's agents and namespaces go with the controller.
        if let Err(e) = tokio::task::spawn_blocking(move || p.shutdown()).await {
            warn!(error = %e, "stopping the netns nodes");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::load_versions;

    #[test]
    fn versions_come_from_the_flag_or_the_built_in_table() {
        let built_in = load_versions(None).expect("the compiled-in example loads");
        assert!(built_in.end_of_life("1.35").is_some());
        let dir =
            std::env::temp_dir().join(format!("sluice-serve-versions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let bad = dir.join("bad.yaml");
        std::fs::write(
            &bad,
            "minors: {\"1.35\": {endOfLife: soon}}\nchannels: {}\n",
        )
        .expect("write");
        // A bad table stops the start, naming the file and the fault.
        let e = format!("{:#}", load_versions(Some(&bad)).expect_err("bad"));
        assert!(
            e.contains("bad.yaml") && e.contains("minors[1.35]: endOfLife"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            load_versions(Some(&dir.join("missing.yaml"))).expect_err("missing")
        );
        assert!(e.contains("missing.yaml"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
