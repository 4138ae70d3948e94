//! Desired state from the API server (`--kubeconfig`): [`KubeSource`], a
//! [`StateSource`] fed by kube-rs watchers of Nodes, Services,
//! EndpointSlices, the Pods bound to this node and PodDisruptionBudgets.
//! Only standard kinds and fields, so it works against kube-apiserver as
//! against `sluice-controller`.
//!
//! - `mapping.rs`: objects to a [`DesiredState`](super::DesiredState), pure;
//!   an invalid object is left out and reported, the others kept.
//! - `ipam.rs`: addresses for this node's pods that have none in their
//!   status, from the node's pod CIDRs (pure, kept across builds).
//! - `debounce.rs`: when a burst of changes is built (pure).
//! - `watchers.rs`: the watchers, reflectors and the builder task.
//! - `pod_status.rs`: the status each pod of this node should have (phase,
//!   conditions, addresses, container states), and which writes are due
//!   (pure); `status_writer.rs`: [`KubeStatusSink`], the task writing
//!   them (and the delete that ends a graceful deletion).
//!
//! The sync loop never waits on any of it: builds are made on the tokio
//! runtime given to [`KubeSource::spawn`] and taken by [`KubeSource::poll`]
//! from a channel; status writes go the other way through another.
//!
//! - `drain.rs`: the node's drains and `sluice.dev/evict` through the API
//!   (cordon, the Eviction API, forced deletes), pure; `drain_writer.rs`:
//!   [`KubeDrainer`], the task making those calls.

pub mod debounce;
pub mod drain;
mod drain_writer;
pub mod ipam;
pub mod mapping;
pub mod pod_status;
mod rewatch;
mod status_writer;
mod watchers;

pub use drain_writer::KubeDrainer;
pub use pod_status::PodReport;
pub use status_writer::KubeStatusSink;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::{info, warn};

use super::source::{StateSource, Update};
use debounce::Debounce;
use mapping::ObjectFault;
use watchers::{Built, Busy, SharedBusy};

/// Why no client could be made from a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig {path}: making the client: {source}")]
    Client { path: PathBuf, source: kube::Error },
}

/// A client for the cluster and user `path`'s current context names.
/// Must run on a tokio runtime (the client's connections live on it).
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, ClientError> {
    client_with(path, config_from_kubeconfig(path).await?)
}

/// The client configuration `path`'s current context names.
pub async fn config_from_kubeconfig(path: &Path) -> Result<kube::Config, ClientError> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let fail = |source| ClientError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let kc = Kubeconfig::read_from(path).map_err(fail)?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(fail)
}

/// A client made from `cfg` (read from `path`, named in errors). Must run
/// on a tokio runtime.
pub fn client_with(path: &Path, cfg: kube::Config) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(cfg).map_err(|source| ClientError::Client {
        path: path.to_path_buf(),
        source,
    })
}

/// The desired state as the API server's watchers see it.
pub struct KubeSource {
    node: String,
    rx: Receiver<Built>,
    busy: SharedBusy,
    /// Faults reported by the last build taken, so each is logged once
    /// while it lasts rather than at every build.
    reported: BTreeSet<ObjectFault>,
    /// Whether the builder's end has been reported.
    ended: bool,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Notified after each build is sent ([`StateSource::waker`]).
    wake: Option<Arc<tokio::sync::Notify>>,
}

impl KubeSource {
    /// Start watching through `client` on `rt` for node `node`. The first
    /// state comes once every kind's initial list arrived.
    pub fn spawn(rt: &tokio::runtime::Handle, client: kube::Client, node: &str) -> KubeSource {
        Self::spawn_with(rt, client, node, Debounce::default())
    }

    /// As [`KubeSource::spawn`], with another debounce.
    pub fn spawn_with(
        rt: &tokio::runtime::Handle,
        client: kube::Client,
        node: &str,
        debounce: Debounce,
    ) -> KubeSource {
        let (tx, rx) = mpsc::channel();
        // Until the initial lists are in, an update is awaited: a server
        // that never answers turns `/healthz` unhealthy, as a file that is
        // never read would.
        let busy: SharedBusy = Arc::new(Mutex::new(Some(Busy {
            batch: 0,
            since: Instant::now(),
        })));
        let wake = Arc::new(tokio::sync::Notify::new());
        let tasks = watchers::spawn(rt, client, node, tx, wake.clone(), busy.clone(), debounce);
        let mut s = KubeSource::from_parts(node, rx, busy, tasks);
        s.wake = Some(wake);
        s
    }

    fn from_parts(
        node: &str,
        rx: Receiver<Built>,
        busy: SharedBusy,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    ) -> KubeSource {
        KubeSource {
            node: node.to_string(),
            rx,
            busy,
            reported: BTreeSet::new(),
            ended: false,
            tasks,
            wake: None,
        }
    }

    /// Log the faults that are new since the last build taken, and those
    /// that went away.
    fn report(&mut self, faults: Vec<ObjectFault>) {
        let now: BTreeSet<ObjectFault> = faults.into_iter().collect();
        for f in now.difference(&self.reported) {
            warn!(object = %f.object, field = %f.field, "left out of the desired state: {f}");
        }
        for f in self.reported.difference(&now) {
            info!(object = %f.object, "no longer left out: {f}");
        }
        self.reported = now;
    }
}

impl StateSource for KubeSource {
    fn poll(&mut self) -> Update {
        let mut newest = None;
        loop {
            match self.rx.try_recv() {
                Ok(b) => newest = Some(b),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if newest.is_none() && !self.ended {
                        self.ended = true;
                        return Update::Rejected(format!(
                            "{}: the watchers stopped; the running state is kept",
                            self.describe()
                        ));
                    }
                    break;
                }
            }
        }
        let Some(built) = newest else {
            return Update::Unchanged;
        };
        {
            let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
            if busy.is_some_and(|b| b.batch <= built.covers) {
                *busy = None;
            }
        }
        self.report(built.mapped.faults);
        Update::State(built.mapped.state)
    }

    fn describe(&self) -> String {
        format!("the API server (node {})", self.node)
    }

    fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        self.wake.clone()
    }

    fn busy_since(&self) -> Option<Instant> {
        let busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        busy.map(|b| b.since)
    }
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Where what the agent observes of its pods is written back to the API
/// server ([`KubeStatusSink`]): each pod's status through
/// `pods/<name>/status`, and the delete that ends a graceful deletion once
/// the pod's containers have stopped. With a file as the source there is
/// none.
pub trait PodStatusSink: Send {
    /// Every pod of this node the agent knows, as it sees them now. Called
    /// after every tick: only changes are written, and never from the
    /// caller's thread.
    fn report(&mut self, pods: &[PodReport]);
}

/// Where the agent's drain calls go ([`KubeDrainer`] makes them on the
/// API server); a test gives its own.
pub trait DrainCalls: Send {
    /// Make `req`; its answer comes back through [`DrainCalls::answers`].
    fn send(&self, req: drain::Request);
    /// The answers that came since the last call.
    fn answers(&self) -> Vec<(drain::Request, drain::Answer)>;
}

#[cfg(test)]
mod tests {
    use super::mapping::Mapped;
    use super::*;
    use crate::state::DesiredState;

    fn built(covers: u64, nodes: &[&str], faults: &[&str]) -> Built {
        let mut state = DesiredState::default();
        for n in nodes {
            let info = crate::state::NodeInfo {
                name: n.to_string(),
                addrs: Vec::new(),
                pod_cidrs: Vec::new(),
                taints: Vec::new(),
                deleting: false,
                unschedulable: false,
                drain: None,
                cordoned_by_agent: false,
                cordoned_at: None,
                pool: crate::pods::PoolKind::Standard,
            };
            state.nodes.insert(n.to_string(), info);
        }
        let faults = faults
            .iter()
            .map(|o| ObjectFault {
                object: o.to_string(),
                field: String::new(),
                message: "bad".into(),
            })
            .collect();
        Built {
            mapped: Mapped { state, faults },
            covers,
        }
    }

    fn source() -> (KubeSource, mpsc::Sender<Built>, SharedBusy) {
        let (tx, rx) = mpsc::channel();
        let busy: SharedBusy = Arc::new(Mutex::new(None));
        let s = KubeSource::from_parts("node-a", rx, busy.clone(), Vec::new());
        (s, tx, busy)
    }

    fn nodes(u: Update) -> Vec<String> {
        match u {
            Update::State(s) => s.nodes.into_keys().collect(),
            other => panic!("expected a state, got {other:?}"),
        }
    }

    #[test]
    fn a_poll_takes_the_newest_build_once() {
        let (mut s, tx, _) = source();
        assert!(matches!(s.poll(), Update::Unchanged));
        tx.send(built(0, &["old"], &[])).expect("send");
        tx.send(built(1, &["new"], &[])).expect("send");
        assert_eq!(nodes(s.poll()), vec!["new"]);
        assert!(matches!(s.poll(), Update::Unchanged));
    }

    #[test]
    fn busy_lasts_until_a_build_covering_the_newest_batch_is_taken() {
        let (mut s, tx, busy) = source();
        let since = Instant::now();
        *busy.lock().expect("lock") = Some(Busy { batch: 2, since });
        tx.send(built(1, &["a"], &[])).expect("send");
        let _ = s.poll();
        assert_eq!(s.busy_since(), Some(since), "batch 2 is not in build 1");
        tx.send(built(2, &["a"], &[])).expect("send");
        let _ = s.poll();
        assert_eq!(s.busy_since(), None);
    }

    #[test]
    fn faults_are_remembered_while_they_last() {
        let (mut s, tx, _) = source();
        tx.send(built(0, &[], &["Service default/x", "Pod default/p"]))
            .expect("send");
        let _ = s.poll();
        assert_eq!(s.reported.len(), 2);
        tx.send(built(1, &[], &["Pod default/p"])).expect("send");
        let _ = s.poll();
        let left: Vec<&str> = s.reported.iter().map(|f| f.object.as_str()).collect();
        assert_eq!(left, vec!["Pod default/p"]);
    }

    #[test]
    fn watchers_gone_is_reported_once_and_the_state_kept() {
        let (mut s, tx, _) = source();
        tx.send(built(0, &["a"], &[])).expect("send");
        drop(tx);
        // What was built before the end is still handed over.
        assert_eq!(nodes(s.poll()), vec!["a"]);
        match s.poll() {
            Update::Rejected(e) => assert!(e.contains("watchers stopped"), "{e}"),
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert!(matches!(s.poll(), Update::Unchanged));
    }
}
