//! The handle the sync loop drives: starts the server thread, binds the node
//! server, opens and closes a server per Service health port, and collects
//! the counters.
//!
//! Everything runs on a dedicated thread with its own tokio runtime, so the
//! agent's sync loop (which blocks while it applies a state) never delays a
//! health answer. Each listener (the node server, each Service port) has its
//! own connection budget ([`super::budget`]); the connections themselves are
//! served in [`super::listener`].

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::budget::{Budget, ListenerCounters, ListenerKind};
use super::entries::ServiceHealthEntry;
use super::listener::{accept_loop, bind_listener};
use super::logic::{node_eligible, Clock, IpFamily, ProxierHealth, DEFAULT_NODE_HEALTH_PORT};
use super::requests::{
    AtomicNodeCounters, NodeCounters, ServiceCounters, ServiceSlot, Shared, Site,
};

/// Resource bounds of the servers.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections per listener (the node server; each Service's
    /// health port). When one is full, the connection that has waited
    /// longest for its request is dropped to make room (see
    /// [`super::budget`]); the newcomer is refused only when every
    /// connection is answering a request.
    pub max_connections: usize,
    /// Request line plus headers; larger heads get 431.
    pub max_head_bytes: usize,
    /// A request body up to this size is read and dropped so the connection
    /// can be reused; a larger one closes the connection after the answer.
    pub max_discard_body: u64,
    /// For a complete request head: from the accept for a connection's first
    /// request, from the first byte for later ones. Also bounds skipping a
    /// small body.
    pub request_timeout: Duration,
    /// Between keep-alive requests, until the next one's first byte.
    pub idle_timeout: Duration,
    /// To hand one batch of answers to the kernel.
    pub write_timeout: Duration,
    /// An answer not handed to the kernel after this long may be dropped to
    /// make room when no connection is waiting for a request.
    pub stalled_write: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // Per listener, so one port's flood cannot take another's room.
            // A budget is full only under a flood, and then shedding keeps
            // it serving; 1024 idle sockets cost about 8 MiB of buffers.
            max_connections: 1024,
            max_head_bytes: 8 * 1024,
            max_discard_body: 64 * 1024,
            // kube-proxy-style checkers send the whole request in one
            // segment right after the handshake. Two seconds leave room for
            // one retransmission (the initial RTO is 1 s) and cut an idle or
            // slowloris socket within two seconds of its accept.
            request_timeout: Duration::from_secs(2),
            // Shorter than the shortest usual probe interval (5 s; kube's
            // own load balancer checks use 8 s), so a checker that keeps its
            // connection between probes sees it closed well before its next
            // probe instead of racing the close; ample for clients that send
            // requests back to back.
            idle_timeout: Duration::from_secs(3),
            // An answer is under 1 KiB and fits any socket buffer: only a
            // client that does not read takes longer.
            write_timeout: Duration::from_secs(2),
            stalled_write: Duration::from_secs(1),
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

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthCounters {
    pub node: NodeCounters,
    pub services: Vec<ServiceCounters>,
    /// Connections per listener: the node server's first, then Services'
    /// by port.
    pub listeners: Vec<ListenerCounters>,
}

impl HealthCounters {
    pub fn listener(&self, kind: ListenerKind, port: u16) -> Option<&ListenerCounters> {
        self.listeners
            .iter()
            .find(|l| l.listener == kind && l.port == port)
    }
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

struct PortServer {
    slot: Arc<ServiceSlot>,
    budget: Arc<Budget>,
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
    /// One per node server port (the addresses of one port share it).
    node_budgets: Vec<Arc<Budget>>,
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
            limits: config.limits.clone(),
            node: AtomicNodeCounters::default(),
            portless: RwLock::new(HashMap::new()),
        });
        let mut node_budgets: BTreeMap<u16, Arc<Budget>> = BTreeMap::new();
        for (l, a) in listeners.into_iter().zip(&node_addrs) {
            let budget = node_budgets
                .entry(a.port())
                .or_insert_with(|| {
                    Arc::new(new_budget(ListenerKind::Node, a.port(), &config.limits))
                })
                .clone();
            let (tx, _rx) = mpsc::channel();
            rt.spawn(accept_loop(l, Site::Node, shared.clone(), budget, tx));
        }
        info!(addrs = ?node_addrs, "health server listening");
        Ok(HealthHandle {
            shared,
            rt,
            service_ips: config.service_ips,
            node_addrs,
            node_budgets: node_budgets.into_values().collect(),
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
        let budget = Arc::new(new_budget(ListenerKind::Service, port, &self.shared.limits));
        let mut tasks = Vec::new();
        let mut done = Vec::new();
        for l in listeners {
            let (tx, rx) = mpsc::channel();
            tasks.push(self.rt.spawn(accept_loop(
                l,
                Site::Service(slot.clone()),
                self.shared.clone(),
                budget.clone(),
                tx,
            )));
            done.push(rx);
        }
        Ok(PortServer {
            slot,
            budget,
            tasks,
            done,
            addrs,
        })
    }

    /// Answer and connection counters, for `/metrics`.
    pub fn counters(&self) -> HealthCounters {
        let mut listeners: Vec<ListenerCounters> =
            self.node_budgets.iter().map(|b| b.counters()).collect();
        let servers = self.lock_services();
        // Ordered by port: the map's order.
        listeners.extend(servers.values().map(|s| s.budget.counters()));
        let mut services: Vec<ServiceCounters> =
            servers.values().map(|s| s.slot.counters()).collect();
        drop(servers);
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
            listeners,
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

fn new_budget(kind: ListenerKind, port: u16, limits: &Limits) -> Budget {
    Budget::on_tokio_clock(kind, port, limits.max_connections, limits.stalled_write)
}
