//! The health servers: listeners, connections, and the handle the sync loop
//! drives.
//!
//! Everything runs on a dedicated thread with its own tokio runtime, so the
//! agent's sync loop (which blocks while it applies a state) never delays a
//! health answer. Servers share one state: the proxier health behind a mutex
//! held for nanoseconds, node eligibility and endpoint counts in atomics.
//!
//! Defences, because any host on the network can reach these ports: a cap on
//! concurrent connections (extra ones are closed at once), a bounded request
//! head (431), a deadline from a request's first byte to its complete head
//! (slow senders are cut off), an idle deadline between keep-alive requests,
//! a write deadline, and every framing error answered 400 and closed.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::entries::ServiceHealthEntry;
use super::http::{
    clean_path, escape_path, parse_head, parse_target, write_response, BodyLen, ConnHeader, Head,
    Reject, RequestHead, Response, Target, CT_HTML, CT_JSON, CT_TEXT,
};
use super::logic::{
    node_answer, node_eligible, service_answer, service_body_prefix, Clock, IpFamily, NodeSnapshot,
    Probe, ProxierHealth, DEFAULT_NODE_HEALTH_PORT,
};
use super::time::{http_date, unix_secs, HTTP_DATE_LEN};

/// Path prefix on the node server for `Local` Services without a port.
const SERVICE_PATH: &[u8] = b"/service/";

/// Resource bounds of the servers.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections across all health servers; more are closed at once.
    pub max_connections: usize,
    /// Request line plus headers; larger heads get 431.
    pub max_head_bytes: usize,
    /// A request body up to this size is read and dropped so the connection
    /// can be reused; a larger one closes the connection after the answer.
    pub max_discard_body: u64,
    /// From the first byte of a request to its complete head.
    pub request_timeout: Duration,
    /// Between keep-alive requests.
    pub idle_timeout: Duration,
    /// To hand one batch of answers to the kernel.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_head_bytes: 8 * 1024,
            max_discard_body: 64 * 1024,
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// The node server (`/healthz`, `/livez`). `[::]` is dual-stack and falls
    /// back to `0.0.0.0` where IPv6 is off. Port 0 picks a free port.
    pub node_addrs: Vec<SocketAddr>,
    /// Addresses the per-Service servers listen on; the port is the
    /// Service's `healthCheckNodePort`.
    pub service_ips: Vec<IpAddr>,
    /// Pending-update age after which the datapath counts as unhealthy.
    pub health_timeout: Duration,
    /// Families listed in the node answers' `status` object.
    pub ip_families: Vec<IpFamily>,
    pub limits: Limits,
    /// Runtime threads for the servers (1: one core is plenty).
    pub worker_threads: usize,
}

impl HealthConfig {
    /// Defaults for a sync loop with period `sync_period`: health timeout
    /// 2 × period, port 10256 on every address.
    pub fn new(sync_period: Duration) -> Self {
        HealthConfig {
            node_addrs: vec![SocketAddr::new(
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                DEFAULT_NODE_HEALTH_PORT,
            )],
            service_ips: vec![IpAddr::V6(Ipv6Addr::UNSPECIFIED)],
            health_timeout: ProxierHealth::default_timeout(sync_period),
            ip_families: vec![IpFamily::IPv4],
            limits: Limits::default(),
            worker_threads: 1,
        }
    }

    /// Everything on one address (tests: `127.0.0.1`, node port 0).
    pub fn on_ip(mut self, ip: IpAddr, node_port: u16) -> Self {
        self.node_addrs = vec![SocketAddr::new(ip, node_port)];
        self.service_ips = vec![ip];
        self
    }
}

/// Answer counters of the node server, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub healthz_200: u64,
    pub healthz_503: u64,
    pub livez_200: u64,
    pub livez_503: u64,
    /// Unknown paths on the node server.
    pub not_found_404: u64,
    /// Unclean paths redirected, as Go's mux does.
    pub redirect_301: u64,
    /// 400, 431 and 505 on any server.
    pub rejected: u64,
    pub connections_accepted: u64,
    /// Closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Closed for a request, idle or write deadline.
    pub timeouts: u64,
}

/// Answer counters of one Service's health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceCounters {
    pub namespace: String,
    pub name: String,
    pub port: Option<u16>,
    pub answered_200: u64,
    pub answered_503: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthCounters {
    pub node: NodeCounters,
    pub services: Vec<ServiceCounters>,
}

/// What [`HealthHandle::set_services`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetServicesReport {
    pub opened: Vec<u16>,
    pub closed: Vec<u16>,
    /// Ports that could not be bound (retried on the next call).
    pub failed: Vec<(u16, String)>,
    /// Entries skipped: their port is taken by another entry or the node server.
    pub conflicts: Vec<(String, u16)>,
}

#[derive(Default)]
struct AtomicNodeCounters {
    healthz_200: AtomicU64,
    healthz_503: AtomicU64,
    livez_200: AtomicU64,
    livez_503: AtomicU64,
    not_found_404: AtomicU64,
    redirect_301: AtomicU64,
    rejected: AtomicU64,
    connections_accepted: AtomicU64,
    connections_refused: AtomicU64,
    timeouts: AtomicU64,
}

impl AtomicNodeCounters {
    fn snapshot(&self) -> NodeCounters {
        NodeCounters {
            healthz_200: self.healthz_200.load(Relaxed),
            healthz_503: self.healthz_503.load(Relaxed),
            livez_200: self.livez_200.load(Relaxed),
            livez_503: self.livez_503.load(Relaxed),
            not_found_404: self.not_found_404.load(Relaxed),
            redirect_301: self.redirect_301.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            connections_accepted: self.connections_accepted.load(Relaxed),
            connections_refused: self.connections_refused.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
        }
    }
}

struct Ident {
    namespace: String,
    name: String,
    prefix: Vec<u8>,
}

/// One Service's live health state, read by its server on every request.
struct ServiceSlot {
    port: Option<u16>,
    ident: RwLock<Arc<Ident>>,
    local_endpoints: AtomicU32,
    answered_200: AtomicU64,
    answered_503: AtomicU64,
}

impl ServiceSlot {
    fn new(e: &ServiceHealthEntry) -> Self {
        ServiceSlot {
            port: e.port,
            ident: RwLock::new(Arc::new(Ident {
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                prefix: service_body_prefix(&e.namespace, &e.name),
            })),
            local_endpoints: AtomicU32::new(e.local_endpoints),
            answered_200: AtomicU64::new(0),
            answered_503: AtomicU64::new(0),
        }
    }

    fn ident(&self) -> Arc<Ident> {
        // Poisoning cannot leave an Arc half-written; keep serving.
        self.ident.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The same port may pass to another Service: swap the name in place
    /// rather than rebinding the port.
    fn update(&self, e: &ServiceHealthEntry) {
        let cur = self.ident();
        if cur.namespace != e.namespace || cur.name != e.name {
            let mut g = self.ident.write().unwrap_or_else(|p| p.into_inner());
            *g = Arc::new(Ident {
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                prefix: service_body_prefix(&e.namespace, &e.name),
            });
        }
        self.local_endpoints.store(e.local_endpoints, Relaxed);
    }

    fn counters(&self) -> ServiceCounters {
        let id = self.ident();
        ServiceCounters {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            port: self.port,
            answered_200: self.answered_200.load(Relaxed),
            answered_503: self.answered_503.load(Relaxed),
        }
    }
}

struct Shared {
    clock: Arc<dyn Clock>,
    proxier: Mutex<ProxierHealth>,
    node_eligible: AtomicBool,
    families: Vec<IpFamily>,
    limits: Limits,
    conn_limit: Arc<Semaphore>,
    node: AtomicNodeCounters,
    /// `Local` Services without a port, keyed `namespace/name`.
    portless: RwLock<HashMap<Vec<u8>, Arc<ServiceSlot>>>,
}

impl Shared {
    fn proxier(&self) -> std::sync::MutexGuard<'_, ProxierHealth> {
        // The guarded value is plain data, valid even after a panic.
        self.proxier.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Few connection slots left (an eighth or less).
    fn under_pressure(&self) -> bool {
        self.conn_limit.available_permits() <= self.limits.max_connections / 8
    }

    fn node_snapshot(&self) -> NodeSnapshot {
        let now = self.clock.now();
        let p = self.proxier();
        NodeSnapshot {
            proxier_healthy: p.is_healthy(now),
            node_eligible: self.node_eligible.load(Relaxed),
            last_updated: p.last_updated(),
            now,
        }
    }
}

#[derive(Clone)]
enum Site {
    Node,
    Service(Arc<ServiceSlot>),
}

struct PortServer {
    slot: Arc<ServiceSlot>,
    tasks: Vec<JoinHandle<()>>,
    /// Disconnects once the task has dropped its listener.
    done: Vec<mpsc::Receiver<()>>,
    addrs: Vec<SocketAddr>,
}

/// The running health servers. Dropping it stops them.
pub struct HealthHandle {
    shared: Arc<Shared>,
    rt: tokio::runtime::Handle,
    service_ips: Vec<IpAddr>,
    node_addrs: Vec<SocketAddr>,
    services: Mutex<BTreeMap<u16, PortServer>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HealthHandle {
    /// Binds the node server(s) and starts the server thread. Fails when a
    /// node address cannot be bound (the port is someone else's).
    pub fn start(config: HealthConfig, clock: Arc<dyn Clock>) -> io::Result<HealthHandle> {
        let mut listeners = Vec::new();
        for a in &config.node_addrs {
            listeners.push(bind_listener(*a)?);
        }
        let node_addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<Vec<_>>>()?;

        let (rt_tx, rt_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let threads = config.worker_threads.max(1);
        let thread = std::thread::Builder::new()
            .name("sluice-health".into())
            .spawn(move || {
                let rt = if threads == 1 {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                } else {
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(threads)
                        .thread_name("sluice-health")
                        .enable_all()
                        .build()
                };
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = rt_tx.send(Err(e));
                        return;
                    }
                };
                let _ = rt_tx.send(Ok(rt.handle().clone()));
                // Runs until stop (or the handle is dropped); dropping the
                // runtime then drops every listener and connection.
                rt.block_on(async {
                    let _ = stop_rx.await;
                });
            })?;
        let rt = match rt_rx.recv() {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("health server thread exited at start")),
        };

        let shared = Arc::new(Shared {
            clock,
            proxier: Mutex::new(ProxierHealth::new(config.health_timeout)),
            // Eligible until told otherwise, so a starting agent is not
            // drained before it has read its node.
            node_eligible: AtomicBool::new(true),
            families: config.ip_families.clone(),
            conn_limit: Arc::new(Semaphore::new(config.limits.max_connections.max(1))),
            limits: config.limits.clone(),
            node: AtomicNodeCounters::default(),
            portless: RwLock::new(HashMap::new()),
        });
        for l in listeners {
            let (tx, _rx) = mpsc::channel();
            rt.spawn(accept_loop(l, Site::Node, shared.clone(), tx));
        }
        info!(addrs = ?node_addrs, "health server listening");
        Ok(HealthHandle {
            shared,
            rt,
            service_ips: config.service_ips,
            node_addrs,
            services: Mutex::new(BTreeMap::new()),
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// A new desired state was seen and is not applied yet.
    pub fn record_queued(&self) {
        let now = self.shared.clock.now();
        self.shared.proxier().record_queued(now);
    }

    /// The desired state seen so far is applied.
    pub fn record_synced(&self) {
        let now = self.shared.clock.now();
        self.shared.proxier().record_synced(now);
    }

    pub fn set_node_eligible(&self, eligible: bool) {
        self.shared.node_eligible.store(eligible, Relaxed);
    }

    /// From the Node object: being deleted, and its taint keys.
    pub fn set_node_state<'a>(
        &self,
        being_deleted: bool,
        taint_keys: impl IntoIterator<Item = &'a str>,
    ) {
        self.set_node_eligible(node_eligible(being_deleted, taint_keys));
    }

    /// The proxier's health now (what `serviceProxyHealthy` reports).
    pub fn is_healthy(&self) -> bool {
        let now = self.shared.clock.now();
        self.shared.proxier().is_healthy(now)
    }

    /// Where the node server listens (ports resolved).
    pub fn node_addrs(&self) -> &[SocketAddr] {
        &self.node_addrs
    }

    /// Where each per-Service server listens.
    pub fn service_addrs(&self) -> BTreeMap<u16, Vec<SocketAddr>> {
        self.lock_services()
            .iter()
            .map(|(p, s)| (*p, s.addrs.clone()))
            .collect()
    }

    fn lock_services(&self) -> std::sync::MutexGuard<'_, BTreeMap<u16, PortServer>> {
        self.services.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the per-Service servers match `entries`: opens servers for new
    /// ports, closes those of ports no longer listed, updates counts and names
    /// in place for the rest. A port that fails to bind is reported and tried
    /// again on the next call, as kube-proxy does.
    pub fn set_services(&self, entries: &[ServiceHealthEntry]) -> SetServicesReport {
        let mut report = SetServicesReport::default();
        let mut desired: BTreeMap<u16, &ServiceHealthEntry> = BTreeMap::new();
        let mut portless: HashMap<Vec<u8>, &ServiceHealthEntry> = HashMap::new();
        for e in entries {
            let key = format!("{}/{}", e.namespace, e.name);
            match e.port {
                Some(p)
                    if self.node_addrs.iter().any(|a| a.port() == p)
                        || desired.contains_key(&p) =>
                {
                    warn!(service = %key, port = p, "health check port already in use; skipped");
                    report.conflicts.push((key, p));
                }
                Some(p) => {
                    desired.insert(p, e);
                }
                None => {
                    portless.insert(key.into_bytes(), e);
                }
            }
        }

        let mut servers = self.lock_services();
        let gone: Vec<u16> = servers
            .keys()
            .copied()
            .filter(|p| !desired.contains_key(p))
            .collect();
        let mut waits = Vec::new();
        for p in gone {
            if let Some(s) = servers.remove(&p) {
                for t in &s.tasks {
                    t.abort();
                }
                waits.extend(s.done);
                info!(port = p, "health check server closed");
                report.closed.push(p);
            }
        }
        // Let the aborted tasks release their ports before anything binds
        // again (a port may pass from one Service to the next); bounded, as
        // the runtime thread might be busy.
        let until = std::time::Instant::now() + Duration::from_secs(1);
        for rx in waits {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let _ = rx.recv_timeout(left);
        }

        for (p, e) in desired {
            if let Some(s) = servers.get(&p) {
                s.slot.update(e);
                continue;
            }
            let slot = Arc::new(ServiceSlot::new(e));
            match self.open_port(p, slot) {
                Ok(s) => {
                    info!(port = p, service = %format!("{}/{}", e.namespace, e.name), "health check server opened");
                    servers.insert(p, s);
                    report.opened.push(p);
                }
                Err(err) => {
                    warn!(port = p, error = %err, "health check server failed to open");
                    report.failed.push((p, err.to_string()));
                }
            }
        }
        drop(servers);

        let mut map = self
            .shared
            .portless
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut next = HashMap::with_capacity(portless.len());
        for (k, e) in portless {
            let slot = match map.remove(&k) {
                Some(s) => {
                    s.update(e);
                    s
                }
                None => Arc::new(ServiceSlot::new(e)),
            };
            next.insert(k, slot);
        }
        *map = next;
        report
    }

    fn open_port(&self, port: u16, slot: Arc<ServiceSlot>) -> io::Result<PortServer> {
        let mut listeners = Vec::new();
        for ip in &self.service_ips {
            // An error drops the listeners bound so far: all or nothing.
            listeners.push(bind_listener(SocketAddr::new(*ip, port))?);
        }
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<io::Result<Vec<_>>>()?;
        let mut tasks = Vec::new();
        let mut done = Vec::new();
        for l in listeners {
            let (tx, rx) = mpsc::channel();
            tasks.push(self.rt.spawn(accept_loop(
                l,
                Site::Service(slot.clone()),
                self.shared.clone(),
                tx,
            )));
            done.push(rx);
        }
        Ok(PortServer {
            slot,
            tasks,
            done,
            addrs,
        })
    }

    /// Answer counters, for `/metrics`.
    pub fn counters(&self) -> HealthCounters {
        let mut services: Vec<ServiceCounters> = self
            .lock_services()
            .values()
            .map(|s| s.slot.counters())
            .collect();
        services.extend(
            self.shared
                .portless
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .map(|s| s.counters()),
        );
        services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        HealthCounters {
            node: self.shared.node.snapshot(),
            services,
        }
    }

    /// Stops every server and waits for their thread: on return no port is
    /// held any more.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                warn!("health server thread panicked");
            }
        }
    }
}

impl Drop for HealthHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// A listening socket; `[::]` is made dual-stack explicitly (not left to the
/// `bindv6only` sysctl) and falls back to `0.0.0.0` where IPv6 is off.
fn bind_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    match bind_one(addr) {
        Err(e) if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) && ipv6_unavailable(&e) => {
            debug!(error = %e, "IPv6 unavailable; health server on 0.0.0.0 only");
            bind_one(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                addr.port(),
            ))
        }
        r => r,
    }
}

fn ipv6_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL) | Some(libc::EPROTONOSUPPORT)
    )
}

fn bind_one(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
        s.set_only_v6(false)?;
    }
    // Restarting agent: sockets of the old one in TIME_WAIT must not block.
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

async fn accept_loop(
    std_listener: std::net::TcpListener,
    site: Site,
    sh: Arc<Shared>,
    done: mpsc::Sender<()>,
) {
    // Declared first so it drops last: its disconnect tells `set_services`
    // the listener is closed.
    let _done = done;
    let listener = match TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            warn!(error = %e, "health listener unusable");
            return;
        }
    };
    // Dropping the set (task aborted) aborts every connection of this server.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            r = listener.accept() => match r {
                Ok((stream, _)) => match sh.conn_limit.clone().try_acquire_owned() {
                    Ok(permit) => {
                        sh.node.connections_accepted.fetch_add(1, Relaxed);
                        conns.spawn(serve_conn(stream, site.clone(), sh.clone(), permit));
                    }
                    Err(_) => {
                        // Over the cap: shed at once rather than queue.
                        sh.node.connections_refused.fetch_add(1, Relaxed);
                        drop(stream);
                    }
                },
                Err(e) => {
                    // Out of descriptors and the like: back off, don't spin.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

thread_local! {
    static DATE: Cell<(i64, [u8; HTTP_DATE_LEN])> = const { Cell::new((i64::MIN, [0; HTTP_DATE_LEN])) };
}

/// The `Date` header, formatted once per second per thread.
fn date_header(now: SystemTime) -> [u8; HTTP_DATE_LEN] {
    let s = unix_secs(now);
    DATE.with(|c| {
        let (cs, d) = c.get();
        if cs == s {
            d
        } else {
            let d = http_date(s);
            c.set((s, d));
            d
        }
    })
}

enum Step {
    /// Keep reading.
    More,
    /// Flush and close.
    Close,
}

async fn serve_conn(
    mut stream: TcpStream,
    site: Site,
    sh: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let limits = sh.limits.clone();
    let mut buf = vec![0u8; limits.max_head_bytes.max(256)];
    let mut filled = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(1024);
    let mut body: Vec<u8> = Vec::with_capacity(512);
    // Request-body bytes still to read and drop.
    let mut discard: u64 = 0;
    // Deadline of the request being received, from its first byte.
    let mut req_deadline: Option<Instant> = None;

    loop {
        // Answer everything complete in the buffer (pipelined requests too).
        let mut step = Step::More;
        while filled > 0 && discard == 0 {
            match handle_one(&sh, &site, &limits, &buf[..filled], &mut body, &mut out) {
                None => break,
                Some((consumed, close, rest_of_body)) => {
                    let consumed = consumed.min(filled);
                    buf.copy_within(consumed..filled, 0);
                    filled -= consumed;
                    discard = rest_of_body;
                    req_deadline = (filled > 0 || discard > 0)
                        .then(|| Instant::now() + limits.request_timeout);
                    if close {
                        step = Step::Close;
                        break;
                    }
                }
            }
        }
        if !out.is_empty() {
            match tokio::time::timeout(limits.write_timeout, stream.write_all(&out)).await {
                Ok(Ok(())) => out.clear(),
                Ok(Err(_)) => return,
                Err(_) => {
                    sh.node.timeouts.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
        if let Step::Close = step {
            close_gracefully(stream).await;
            return;
        }
        if filled == buf.len() {
            // A head that does not fit is refused whole.
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(&mut out, Reject::HeadersTooLarge, &sh);
            let _ = tokio::time::timeout(limits.write_timeout, stream.write_all(&out)).await;
            close_gracefully(stream).await;
            return;
        }
        let n = match read_some(&mut stream, &mut buf[filled..], req_deadline, &sh).await {
            Some(n) => n,
            None => return,
        };
        if req_deadline.is_none() {
            req_deadline = Some(Instant::now() + limits.request_timeout);
        }
        if discard > 0 {
            let drop_now = (discard.min(n as u64)) as usize;
            discard -= drop_now as u64;
            buf.copy_within(filled + drop_now..filled + n, filled);
            filled += n - drop_now;
            if discard == 0 && filled == 0 {
                req_deadline = None;
            }
        } else {
            filled += n;
        }
    }
}

/// One read. Within a request: until its deadline. Between keep-alive
/// requests: until the idle deadline, but checked every `request_timeout`
/// and cut short while connections are scarce, so idle sockets cannot hold
/// every slot for long. `None`: closed, failed or timed out.
async fn read_some(
    stream: &mut TcpStream,
    buf: &mut [u8],
    req_deadline: Option<Instant>,
    sh: &Shared,
) -> Option<usize> {
    let limits = &sh.limits;
    let idle_until = Instant::now() + limits.idle_timeout;
    loop {
        let until = match req_deadline {
            Some(d) => d,
            None => idle_until.min(Instant::now() + limits.request_timeout),
        };
        match tokio::time::timeout_at(until, stream.read(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => return Some(n),
            // Reading is cancel-safe: nothing is lost by waiting again.
            Err(_)
                if req_deadline.is_none()
                    && Instant::now() < idle_until
                    && !sh.under_pressure() => {}
            Err(_) => {
                sh.node.timeouts.fetch_add(1, Relaxed);
                debug!("health connection timed out");
                return None;
            }
        }
    }
}

/// Parses and answers one request at the start of `input`. `None`: the head
/// is incomplete. Otherwise: bytes consumed, whether to close after the
/// answer, and body bytes still to discard from the stream.
fn handle_one(
    sh: &Shared,
    site: &Site,
    limits: &Limits,
    input: &[u8],
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Option<(usize, bool, u64)> {
    let head = match parse_head(input) {
        Head::Partial => return None,
        Head::Reject(r) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(out, r, sh);
            return Some((input.len(), true, 0));
        }
        Head::Request(h) => h,
    };
    let target = match parse_target(head.method, head.target) {
        Ok(t) => t,
        Err(r) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(out, r, sh);
            return Some((input.len(), true, 0));
        }
    };
    // The body is read and dropped when small; otherwise the connection
    // cannot be reused.
    let (mut keep, body_len) = match head.body {
        BodyLen::Known(n) if n <= limits.max_discard_body => (head.keep_alive, n),
        _ => (false, 0),
    };
    let avail = (input.len() - head.head_len) as u64;
    let in_buf = body_len.min(avail);
    let consumed = head.head_len + in_buf as usize;
    let rest = body_len - in_buf;
    let conn = if !keep {
        ConnHeader::Close
    } else if head.http10 {
        ConnHeader::KeepAlive
    } else {
        ConnHeader::None
    };
    if !route(sh, site, &head, &target, conn, body, out) {
        keep = false;
    }
    Some((consumed, !keep, if keep { rest } else { 0 }))
}

/// Writes the answer; `false` when the connection must close after it.
fn route(
    sh: &Shared,
    site: &Site,
    head: &RequestHead<'_>,
    target: &Target<'_>,
    conn: ConnHeader,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> bool {
    let send_body = head.method != "HEAD";
    let now_date = || date_header(sh.clock.now());
    let mut resp = Response {
        status: 200,
        content_type: None,
        nosniff: false,
        weight: None,
        location: None,
        body: &[],
        send_body,
        conn,
    };
    match (target, site) {
        // Go's server answers `OPTIONS *` itself, whatever the handler.
        (Target::Asterisk, _) if head.method == "OPTIONS" => {
            write_response(out, head.http10, &resp, &now_date());
            true
        }
        (Target::Asterisk, _) => {
            sh.node.rejected.fetch_add(1, Relaxed);
            write_reject(
                out,
                Reject::BadRequest("400 Bad Request: * is for OPTIONS"),
                sh,
            );
            false
        }
        // A Service's server answers every path and method alike.
        (_, Site::Service(slot)) => {
            write_service(sh, slot, head, conn, body, out);
            true
        }
        (Target::Authority, Site::Node) => {
            not_found(sh, head, conn, out);
            true
        }
        (Target::Path { path, query }, Site::Node) => {
            let clean = clean_path(path);
            if clean.as_ref() != path.as_ref() {
                // Go's mux redirects unclean paths to their clean form.
                sh.node.redirect_301.fetch_add(1, Relaxed);
                let mut loc = Vec::with_capacity(clean.len() + query.len() + 1);
                escape_path(&clean, &mut loc);
                if !query.is_empty() {
                    loc.push(b'?');
                    loc.extend_from_slice(query.as_bytes());
                }
                body.clear();
                if head.method == "GET" {
                    body.extend_from_slice(b"<a href=\"");
                    html_escape(&loc, body);
                    body.extend_from_slice(b"\">Moved Permanently</a>.\n\n");
                }
                resp.status = 301;
                resp.content_type = matches!(head.method, "GET" | "HEAD").then_some(CT_HTML);
                resp.location = Some(&loc);
                resp.body = body;
                write_response(out, head.http10, &resp, &now_date());
                return true;
            }
            match clean.as_ref() {
                b"/healthz" | b"/livez" => {
                    let probe = if clean.as_ref() == b"/healthz" {
                        Probe::Healthz
                    } else {
                        Probe::Livez
                    };
                    let snap = sh.node_snapshot();
                    let status = node_answer(probe, &snap, &sh.families, body);
                    let c = match (probe, status) {
                        (Probe::Healthz, 200) => &sh.node.healthz_200,
                        (Probe::Healthz, _) => &sh.node.healthz_503,
                        (Probe::Livez, 200) => &sh.node.livez_200,
                        (Probe::Livez, _) => &sh.node.livez_503,
                    };
                    c.fetch_add(1, Relaxed);
                    resp.status = status;
                    resp.content_type = Some(CT_JSON);
                    resp.nosniff = true;
                    resp.body = body;
                    write_response(out, head.http10, &resp, &date_header(snap.now));
                    true
                }
                p if p.starts_with(SERVICE_PATH) => {
                    let slot = sh
                        .portless
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&p[SERVICE_PATH.len()..])
                        .cloned();
                    match slot {
                        Some(slot) => write_service(sh, &slot, head, conn, body, out),
                        None => not_found(sh, head, conn, out),
                    }
                    true
                }
                _ => {
                    not_found(sh, head, conn, out);
                    true
                }
            }
        }
    }
}

fn write_service(
    sh: &Shared,
    slot: &ServiceSlot,
    head: &RequestHead<'_>,
    conn: ConnHeader,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    let now = sh.clock.now();
    let healthy = sh.proxier().is_healthy(now);
    let n = slot.local_endpoints.load(Relaxed);
    let status = {
        let id = slot.ident.read().unwrap_or_else(|p| p.into_inner());
        service_answer(&id.prefix, n, healthy, body)
    };
    if status == 200 {
        slot.answered_200.fetch_add(1, Relaxed);
    } else {
        slot.answered_503.fetch_add(1, Relaxed);
    }
    let resp = Response {
        status,
        content_type: Some(CT_JSON),
        nosniff: true,
        weight: Some(n),
        location: None,
        body,
        send_body: head.method != "HEAD",
        conn,
    };
    write_response(out, head.http10, &resp, &date_header(now));
}

fn not_found(sh: &Shared, head: &RequestHead<'_>, conn: ConnHeader, out: &mut Vec<u8>) {
    sh.node.not_found_404.fetch_add(1, Relaxed);
    let resp = Response {
        status: 404,
        content_type: Some(CT_TEXT),
        nosniff: true,
        weight: None,
        location: None,
        body: b"404 page not found\n",
        send_body: head.method != "HEAD",
        conn,
    };
    write_response(out, head.http10, &resp, &date_header(sh.clock.now()));
}

fn write_reject(out: &mut Vec<u8>, r: Reject, sh: &Shared) {
    let resp = Response {
        status: r.status(),
        content_type: Some(CT_TEXT),
        nosniff: false,
        weight: None,
        location: None,
        body: r.body(),
        send_body: true,
        conn: ConnHeader::Close,
    };
    write_response(out, false, &resp, &date_header(sh.clock.now()));
}

fn html_escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&#34;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}

/// Half-close, then drain briefly so unread request bytes don't turn the
/// close into a reset that destroys the answer on its way (Go does the same).
async fn close_gracefully(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let until = Instant::now() + Duration::from_millis(500);
    let mut total = 0usize;
    while total < 256 * 1024 {
        match tokio::time::timeout_at(until, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
        }
    }
}
