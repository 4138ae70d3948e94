//! The lab's node provider (`--node-provider netns:<config.yaml>`): each
//! node is a network namespace on the lab's bridge running a real
//! `sluice-agent`, which registers its Node with a token minted for it.
//!
//! - [`config`]: the file, checked field by field;
//! - [`plan`]: names, addresses and the agent's command line (pure);
//! - [`credentials`]: the node's token (API and tokens.csv) and kubeconfig;
//! - [`system`]: `ip`, the agent process, removal.
//!
//! State is this process's memory, and a record per node in `stateDir`
//! (`<node>.json`, [`agent::NodeRecord`]). A node with a run limit (GKE's
//! `maxRunDuration`, carried in its spec) is removed at its end by a
//! thread of the provider, as a deletion would remove it; the end is in
//! its record, so a restarted controller still ends it then. When the
//! controller stops ([`NetnsProvider::shutdown`]) it removes every node it
//! has, so a lab leaves nothing behind. A controller killed outright leaves its nodes
//! running; the next one adopts those whose agent still runs in its
//! namespace (their tokens are in tokens.csv, which it read) and removes
//! the rest of what the previous run left.

pub mod agent;
pub mod config;
pub mod credentials;
pub mod plan;
pub mod system;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sluice_model::k8s::jiff::Timestamp;
use sluice_nodepools::{
    CreateNode, Instance, InstanceState, NodeProvider, ProviderError, ProviderFuture,
};
use tracing::{info, warn};

use crate::api::auth::Authenticator;
use agent::{Agent, NodeRecord};
pub use config::{ConfigError, NetnsConfig};
use credentials::Credentials;
use plan::NodeNames;

/// How long a stopping agent gets after SIGTERM (it hands its uplink
/// back and stops its pods) before SIGKILL.
const AGENT_GRACE: Duration = Duration::from_secs(10);
/// Where the agent's emulated datapath keeps its crash-recovery records.
const AGENT_RECORD_DIR: &str = "/run/sluice";
/// The quota's resource name, as the pool's `QuotaExceeded` shows it.
const QUOTA_RESOURCE: &str = "netns nodes";

/// One node the provider made.
struct Record {
    pool: String,
    zone: String,
    version: String,
    created_at: Timestamp,
    /// Its host index (its addresses).
    index: u32,
    /// When its run ends and it is removed (A5), if it has a limit.
    run_ends_at: Option<Timestamp>,
    names: NodeNames,
    phase: Phase,
}

enum Phase {
    /// Its network and agent are being made (by a `create` in flight).
    Making,
    /// Its agent was started (or adopted).
    Up { agent: Agent },
    /// Being removed.
    Removing,
    /// Removal failed part way; listed as failed, so it is deleted again.
    Broken(String),
}

struct Inner {
    cfg: NetnsConfig,
    creds: Credentials,
    nodes: Mutex<BTreeMap<String, Record>>,
    /// One past the address index handed out last (see `plan::allocate`).
    next_index: std::sync::atomic::AtomicU32,
    /// Every node made in this run: their logs stay until shutdown, for
    /// whoever looks into why a node failed.
    made: Mutex<BTreeSet<String>>,
    closed: AtomicBool,
}

/// The netns provider. Clones share the nodes.
#[derive(Clone)]
pub struct NetnsProvider {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NetnsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetnsProvider")
            .field("name_prefix", &self.inner.cfg.name_prefix)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the map whole; a panic in one must not
    // stop the lab from being cleaned up.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl NetnsProvider {
    /// A provider for `cfg`, minting tokens into `auth` and the
    /// controller's `dir` (`tokens.csv`, `ca.crt`). Removes what an
    /// earlier run with the same `namePrefix` and `stateDir` left.
    pub fn new(cfg: NetnsConfig, auth: Authenticator, dir: &Path) -> Result<NetnsProvider, String> {
        let creds = Credentials::new(auth, dir, &cfg.cluster, &cfg.server)?;
        std::fs::create_dir_all(&cfg.state_dir)
            .map_err(|e| format!("creating {}: {e}", cfg.state_dir.display()))?;
        let inner = Inner {
            cfg,
            creds,
            nodes: Mutex::new(BTreeMap::new()),
            next_index: std::sync::atomic::AtomicU32::new(0),
            made: Mutex::new(BTreeSet::new()),
            closed: AtomicBool::new(false),
        };
        inner.adopt_or_sweep();
        let used: BTreeSet<u32> = lock(&inner.nodes).values().map(|r| r.index).collect();
        inner
            .next_index
            .store(plan::resume_from(&used), Ordering::SeqCst);
        let inner = Arc::new(inner);
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("netns-run-ends".into())
            .spawn(move || end_runs_until_closed(weak))
            .map_err(|e| format!("starting the thread that ends nodes' runs: {e}"))?;
        Ok(NetnsProvider { inner })
    }

    /// Stop every agent and remove every node (namespaces, links,
    /// tokens, files); later creations are refused. Blocking.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

/// How often the end of nodes' runs is looked for: a node outlives its
/// `maxRunDuration` by at most this (and `list` already shows it
/// `DELETING` from the end on).
const RUN_END_CHECK: Duration = Duration::from_secs(1);

/// Ends nodes' runs (A5) until the provider stops or is dropped; holds it
/// only while ending some, so dropping it still shuts it down.
fn end_runs_until_closed(inner: std::sync::Weak<Inner>) {
    loop {
        std::thread::sleep(RUN_END_CHECK);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        inner.end_runs(Timestamp::now());
    }
}

fn failed(e: impl std::fmt::Display) -> ProviderError {
    ProviderError::Failed(e.to_string())
}

impl Inner {
    fn instance(&self, name: &str, r: &Record, state: InstanceState) -> Instance {
        Instance {
            name: name.to_string(),
            pool: r.pool.clone(),
            zone: r.zone.clone(),
            version: r.version.clone(),
            state,
            created_at: r.created_at,
        }
    }

    /// Reserve the name and an address, or say why not; the node's
    /// creation time.
    fn reserve(&self, req: &CreateNode) -> Result<(u32, NodeNames, Timestamp), ProviderError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(failed("the controller is stopping"));
        }
        if !crate::identity::is_dns_subdomain(&req.name) || req.name.len() > 63 {
            return Err(failed(format!("{:?} is not a node name", req.name)));
        }
        let mut nodes = lock(&self.nodes);
        if nodes.contains_key(&req.name) {
            return Err(failed(format!("{} exists already", req.name)));
        }
        if let Some(limit) = self.cfg.max_nodes {
            let live = nodes
                .values()
                .filter(|r| !matches!(r.phase, Phase::Removing))
                .count();
            if live >= limit as usize {
                return Err(ProviderError::QuotaExhausted {
                    resource: QUOTA_RESOURCE.into(),
                    limit: u64::from(limit),
                });
            }
        }
        let used: BTreeSet<u32> = nodes.values().map(|r| r.index).collect();
        let from = self.next_index.load(Ordering::SeqCst);
        let index = plan::allocate(&self.cfg, &used, from)
            .ok_or_else(|| failed("no free address left in the configured prefixes"))?;
        self.next_index
            .store(index.saturating_add(1), Ordering::SeqCst);
        let names = plan::names(&self.cfg, &req.name);
        let created_at = Timestamp::now();
        nodes.insert(
            req.name.clone(),
            Record {
                pool: req.pool.clone(),
                zone: req.zone.clone(),
                version: req.version.clone(),
                created_at,
                index,
                run_ends_at: req.config.run_ends_at(created_at),
                names: names.clone(),
                phase: Phase::Making,
            },
        );
        Ok((index, names, created_at))
    }

    fn create(&self, req: CreateNode) -> Result<Instance, ProviderError> {
        let (index, names, created_at) = self.reserve(&req)?;
        lock(&self.made).insert(req.name.clone());
        let addrs = plan::addresses(&self.cfg, index);
        let argv = plan::agent_argv(&self.cfg, &req, &addrs, &names);
        let made = (|| -> Result<Agent, String> {
            // A namespace of this name is a previous run's: ours to replace.
            system::remove_namespace(&names.namespace)?;
            system::make_network(&self.cfg, &names, &addrs)?;
            self.creds.mint(&req.name, &names.kubeconfig)?;
            let child = system::spawn_agent(&names.namespace, &argv, &names.log)?;
            let record = NodeRecord {
                pool: req.pool.clone(),
                zone: req.zone.clone(),
                version: req.version.clone(),
                created_at: created_at.to_string(),
                index,
                pid: child.id(),
                run_ends_at: req.config.run_ends_at(created_at).map(|t| t.to_string()),
            };
            if let Err(e) = record.write(&names.record) {
                // The node works; only a restarted controller cannot adopt it.
                warn!(error = %e, "the node's record is not written");
            }
            Ok(Agent::Child(child))
        })();
        let mut nodes = lock(&self.nodes);
        match made {
            Ok(mut agent) if !self.closed.load(Ordering::SeqCst) => {
                info!(node = %req.name, pid = agent.id(), ips = ?addrs.ips(), "netns node made");
                let state = match agent.exited() {
                    Some(why) => InstanceState::Failed(why),
                    None => InstanceState::Creating,
                };
                let record = nodes.get_mut(&req.name).ok_or_else(|| failed("lost"))?;
                record.phase = Phase::Up { agent };
                Ok(self.instance(&req.name, record, state))
            }
            made => {
                // Failed, or made while the controller began stopping:
                // undo it here, as nobody else will.
                drop(nodes);
                let why = match made {
                    Ok(mut agent) => {
                        agent.stop(AGENT_GRACE);
                        "the controller is stopping".to_string()
                    }
                    Err(e) => e,
                };
                warn!(node = %req.name, error = %why, "netns node not made");
                if let Err(e) = self.teardown(&req.name, &names, None) {
                    warn!(node = %req.name, error = %e, "undoing a node not made");
                }
                lock(&self.nodes).remove(&req.name);
                Err(failed(why))
            }
        }
    }

    fn delete(&self, name: &str) -> Result<(), ProviderError> {
        let (names, agent) = {
            let mut nodes = lock(&self.nodes);
            let r = nodes
                .get_mut(name)
                .ok_or_else(|| ProviderError::NotFound(name.to_string()))?;
            match std::mem::replace(&mut r.phase, Phase::Removing) {
                Phase::Making => {
                    r.phase = Phase::Making;
                    return Err(failed(format!("{name} is still being made")));
                }
                Phase::Removing => return Ok(()),
                Phase::Up { agent } => (r.names.clone(), Some(agent)),
                Phase::Broken(_) => (r.names.clone(), None),
            }
        };
        let pid = agent.as_ref().map(Agent::id);
        if let Some(mut agent) = agent {
            agent.stop(AGENT_GRACE);
        }
        let done = self.teardown(name, &names, pid);
        let mut nodes = lock(&self.nodes);
        match done {
            Ok(()) => {
                nodes.remove(name);
                info!(node = %name, "netns node removed");
                Ok(())
            }
            Err(e) => {
                if let Some(r) = nodes.get_mut(name) {
                    r.phase = Phase::Broken(format!("removal failed: {e}"));
                }
                Err(failed(e))
            }
        }
    }

    /// Remove everything of node `name` but its log; its agent (`pid`)
    /// is stopped already. Each part is tried; the first error is returned.
    fn teardown(&self, name: &str, n: &NodeNames, pid: Option<u32>) -> Result<(), String> {
        let pid = pid.or_else(|| NodeRecord::read(&n.record).ok().map(|r| r.pid));
        let mut first: Option<String> = None;
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        // The credentials first: the agent is stopped already, and a node
        // whose namespace is seen gone must hold no credential any more.
        note(self.creds.revoke(name));
        // An agent killed outright leaves its pods' namespaces and its wire
        // namespace (holding the uplink). The node's namespace goes first:
        // removing it kills an agent still in it, whose wire namespace is
        // then found with the others of agents no longer running. (Found
        // only by the recorded pid, the wire namespace of an agent killed
        // before its record was written stayed behind.)
        for pod in system::namespaces_with_prefix(&format!("{}-", n.pod_netns_prefix)) {
            note(system::remove_namespace(&pod));
        }
        note(system::remove_namespace(&n.namespace));
        system::remove_link(&self.cfg.fabric_namespace, &n.fabric_veth);
        if let Some(pid) = pid {
            system::wait_gone(pid, Duration::from_secs(2));
        }
        let existing = system::namespaces_with_prefix("sluice-w-");
        for wire in plan::wire_namespaces_to_remove(name, pid, &existing, system::process_alive) {
            note(system::remove_namespace(&wire));
            let _ = std::fs::remove_file(Path::new(AGENT_RECORD_DIR).join(format!("{wire}.json")));
        }
        // The agent writes its status file through a temporary beside it
        // and renames it; an agent stopped mid-write leaves the temporary.
        let status_tmp = n.status.with_extension("tmp");
        for f in [&n.kubeconfig, &n.status, &status_tmp, &n.record] {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::remove_dir_all(&n.pod_logs);
        let _ = std::fs::remove_dir_all(&n.bpf_pin_dir);
        first.map_or(Ok(()), Err)
    }

    fn list(&self, pool: &str) -> Vec<Instance> {
        let now = Timestamp::now();
        let mut nodes = lock(&self.nodes);
        let mut out = Vec::new();
        for (name, r) in nodes.iter_mut().filter(|(_, r)| r.pool == pool) {
            let over = plan::run_over(r.run_ends_at, now);
            let state = match &mut r.phase {
                Phase::Making => InstanceState::Creating,
                Phase::Removing => InstanceState::Deleting,
                // Being ended (by `end_runs`, within a second): it no
                // longer counts, so the pool makes its successor now.
                Phase::Up { .. } if over => InstanceState::Deleting,
                Phase::Broken(why) => InstanceState::Failed(why.clone()),
                Phase::Up { agent } => {
                    if !system::netns_exists(&r.names.namespace) {
                        InstanceState::Failed(format!(
                            "its namespace {} is gone",
                            r.names.namespace
                        ))
                    } else if let Some(why) = agent.exited() {
                        InstanceState::Failed(why)
                    } else if r.names.status.exists() {
                        // The agent writes its status file after its first
                        // sync: it is up; its Node's readiness is the pool
                        // loop's to watch.
                        InstanceState::Running
                    } else {
                        InstanceState::Creating
                    }
                }
            };
            out.push(self.instance(name, r, state));
        }
        out
    }

    /// A5: remove every node whose run is over, as GKE deletes a
    /// flex-start VM at the end of its run: by the path `delete` takes
    /// (agent stopped, namespaces and files removed). A node being made
    /// is ended once it is up.
    fn end_runs(&self, now: Timestamp) {
        let over = {
            let nodes = lock(&self.nodes);
            let up = nodes
                .iter()
                .filter(|(_, r)| matches!(r.phase, Phase::Up { .. }))
                .map(|(name, r)| (name.as_str(), r.run_ends_at));
            plan::runs_over(up, now)
        };
        for name in over {
            info!(node = %name, "netns node: its run is over (maxRunDuration); removing it");
            match self.delete(&name) {
                Ok(()) | Err(ProviderError::NotFound(_)) => {}
                Err(e) => warn!(node = %name, error = %e, "ending a netns node's run"),
            }
        }
    }

    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let names: Vec<String> = lock(&self.nodes).keys().cloned().collect();
        info!(nodes = names.len(), "netns provider: removing its nodes");
        for name in names {
            match self.delete(&name) {
                Ok(()) | Err(ProviderError::NotFound(_)) => {}
                Err(e) => warn!(node = %name, error = %e, "removing a netns node"),
            }
        }
        // Creations in flight see `closed` and undo themselves.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !lock(&self.nodes).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        for name in std::mem::take(&mut *lock(&self.made)) {
            let _ = std::fs::remove_file(self.cfg.state_dir.join(format!("{name}.log")));
        }
        // Only if nothing else is in it.
        let _ = std::fs::remove_dir(&self.cfg.state_dir);
    }

    /// A controller killed outright (SIGKILL) left its nodes: adopt those
    /// whose agent still runs in their namespace, remove the rest (their
    /// namespaces, tokens and files) before making new ones.
    fn adopt_or_sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.cfg.state_dir) else {
            return;
        };
        let mut kept: Vec<String> = Vec::new();
        let mut removed = 0;
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            // Every node made has a kubeconfig until it is removed.
            let Some(node) = file.strip_suffix(".kubeconfig") else {
                continue;
            };
            let names = plan::names(&self.cfg, node);
            let record = NodeRecord::read(&names.record);
            if let Ok(r) = &record {
                if system::netns_exists(&names.namespace) && agent::runs_in(r.pid, &names.namespace)
                {
                    info!(
                        node,
                        pid = r.pid,
                        "netns provider: adopting a node a previous run made"
                    );
                    kept.push(names.namespace.clone());
                    lock(&self.made).insert(node.to_string());
                    lock(&self.nodes).insert(
                        node.to_string(),
                        Record {
                            pool: r.pool.clone(),
                            zone: r.zone.clone(),
                            version: r.version.clone(),
                            created_at: r.created_at.parse().unwrap_or_else(|_| Timestamp::now()),
                            index: r.index,
                            run_ends_at: plan::read_run_end(r.run_ends_at.as_deref()),
                            phase: Phase::Up {
                                agent: Agent::Adopted {
                                    pid: r.pid,
                                    namespace: names.namespace.clone(),
                                },
                            },
                            names,
                        },
                    );
                    continue;
                }
            }
            let pid = record.ok().map(|r| r.pid);
            if let Err(e) = self.teardown(node, &names, pid) {
                warn!(node, error = %e, "removing a node a previous run left");
            }
            let _ = std::fs::remove_file(&names.log);
            removed += 1;
        }
        // Namespaces of nodes whose files are gone; an adopted node's own
        // and its pods' stay.
        for ns in system::namespaces_with_prefix(&self.cfg.name_prefix) {
            let ours = kept
                .iter()
                .any(|k| ns == *k || ns.starts_with(&format!("{k}-p-")));
            if ours {
                continue;
            }
            if let Err(e) = system::remove_namespace(&ns) {
                warn!(ns, error = %e, "removing a namespace a previous run left");
            }
            removed += 1;
        }
        if removed > 0 {
            info!(removed, "netns provider: removed what a previous run left");
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Also when the controller's serve was not stopped in order.
        self.shutdown();
    }
}

impl NodeProvider for NetnsProvider {
    fn create(&self, req: CreateNode) -> ProviderFuture<'_, Instance> {
        let inner = self.inner.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || inner.create(req))
                .await
                .map_err(failed)?
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> ProviderFuture<'a, ()> {
        let inner = self.inner.clone();
        let name = name.to_string();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || inner.delete(&name))
                .await
                .map_err(failed)?
        })
    }

    fn list<'a>(&'a self, pool: &'a str) -> ProviderFuture<'a, Vec<Instance>> {
        let inner = self.inner.clone();
        let pool = pool.to_string();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || Ok(inner.list(&pool)))
                .await
                .map_err(failed)?
        })
    }

    /// `max_nodes` less the nodes not being removed.
    fn capacity(&self) -> ProviderFuture<'_, Option<u64>> {
        let room = self.inner.cfg.max_nodes.map(|limit| {
            let live = lock(&self.inner.nodes)
                .values()
                .filter(|r| !matches!(r.phase, Phase::Removing))
                .count();
            u64::from(limit).saturating_sub(live as u64)
        });
        Box::pin(std::future::ready(Ok(room)))
    }
}
