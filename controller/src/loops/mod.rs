//! The leader's decision loops, as kube-controller-manager runs them
//! against kube-apiserver: each kind the loops read is watched once
//! ([`informer`]) through the controller's own API, in process (no TCP,
//! no TLS: a kube-rs client over the axum router, see [`client`]), and
//! every write goes through that API too, so defaults, validation,
//! allocation, managedFields and watches are the same as for kubectl.
//!
//! Each loop is a queue of keys ([`queue`]) woken by the changes of the
//! kinds it follows, and a pure decision per key from the workspace's
//! decision crates:
//! - ReplicaSets and Deployments (`sluice_workloads`): [`workloads`];
//! - EndpointSlices of Services, node lifecycle, pod CIDRs
//!   (`sluice_lifecycle`): [`endpoints`], [`nodes`];
//! - the scheduler (`sluice_scheduler`): [`scheduling`];
//! - the L4 load balancers' objects (`sluice_subsetting`):
//!   [`loadbalancers`];
//! - node pools and their upgrades (`sluice_nodepools`,
//!   `sluice_upgrades`, `sluice_maintenance`): [`pools`], [`upgrades`];
//! - the cluster autoscaler (`sluice_autoscaler`): [`autoscaler`];
//! - which nodes the load balancers still send to, for the loops that
//!   delete drained nodes: [`balancers`];
//! - the garbage collector and namespace deletion (`sluice_lifecycle`):
//!   [`garbage_collector`], [`namespaces`].
//!
//! Each loop is a [`spec::LoopSpec`] (its caches, triggers and reconcile),
//! and [`wiring::loops`] is the table of them.

pub mod autoscaler;
pub mod balancers;
pub mod client;
pub mod compact;
pub mod endpoints;
pub mod garbage_collector;
pub mod informer;
pub mod loadbalancers;
pub mod namespaces;
pub mod nodes;
pub mod pools;
pub mod queue;
pub mod scheduling;
pub mod spec;
pub mod upgrades;
pub mod wiring;
pub mod workloads;

use std::time::Duration;

use kube::Client;
use sluice_model::k8s::jiff::SignedDuration;
use sluice_model::k8s::ObjectMeta;
use tokio::task::JoinSet;
use tracing::info;

use informer::Key;

/// The field manager of every write the loops make (upstream's controllers
/// write as `kube-controller-manager`).
pub const MANAGER: &str = "kube-controller-manager";

#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Workload(#[from] sluice_workloads::WorkloadError),
    #[error("{0}")]
    Lifecycle(#[from] sluice_lifecycle::LifecycleError),
    #[error("node provider: {0}")]
    Provider(String),
    #[error("{0}")]
    Pool(#[from] sluice_nodepools::PlanError),
}

impl LoopError {
    /// A write that lost a race (409): the normal cost of optimistic
    /// writes, retried without alarm.
    pub fn is_conflict(&self) -> bool {
        matches!(self, LoopError::Api(kube::Error::Api(s)) if s.code == 409)
    }
}

/// Where node pools get their nodes (`--node-provider`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderChoice {
    /// No provider: node pools are recorded but make no nodes.
    None,
    /// Simulated nodes, booting after this long.
    Sim { boot_delay: Duration },
    /// The user's create, delete and list scripts in this directory.
    Exec { dir: std::path::PathBuf },
    /// The lab's network namespaces, as this file configures them
    /// (`crate::providers::netns`).
    Netns { config: std::path::PathBuf },
}

impl std::str::FromStr for ProviderChoice {
    type Err = String;

    /// `none`, `sim`, `sim:<seconds>`, `exec:<dir>` or `netns:<file>`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "none" => Ok(ProviderChoice::None),
            None if s == "sim" => Ok(ProviderChoice::Sim {
                boot_delay: Duration::from_secs(5),
            }),
            Some(("sim", secs)) => secs
                .parse::<u64>()
                .map(|s| ProviderChoice::Sim {
                    boot_delay: Duration::from_secs(s),
                })
                .map_err(|_| {
                    format!("--node-provider sim:{secs}: the boot delay must be whole seconds")
                }),
            Some(("exec", dir)) if !dir.is_empty() => Ok(ProviderChoice::Exec { dir: dir.into() }),
            Some(("netns", file)) if !file.is_empty() => Ok(ProviderChoice::Netns {
                config: file.into(),
            }),
            _ => Err(format!(
                "--node-provider {s:?}: expected none, sim, sim:<seconds>, exec:<directory> or netns:<config file>"
            )),
        }
    }
}

/// What the loops are configured with (`serve`'s flags).
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Where node pools get their nodes.
    pub provider: ProviderChoice,
    /// How long a Node's Lease may go unrenewed before it is silent.
    pub node_monitor_grace_period: Duration,
    /// How long a Node must be gone before its pods are collected.
    pub pod_gc_quarantine: Duration,
    /// `--cluster-cidr`: pod CIDRs are allocated to Nodes when set.
    pub cluster_cidrs: Vec<String>,
    /// `--node-cidr-mask-size`: per family, in `cluster_cidrs`' order.
    pub node_cidr_masks: Vec<Option<u8>>,
    /// With `ProviderChoice::Netns`: the provider `serve` built at its
    /// start. It outlives the loops (a leadership lost and won again
    /// finds the same nodes), and `serve` removes its nodes as it stops.
    pub netns: Option<crate::providers::netns::NetnsProvider>,
    /// The cluster autoscaler's flags.
    pub autoscaler: autoscaler::Config,
}

/// The (namespace, name) of the controller of `meta` if it is a `kind`.
pub fn owner_of(meta: &ObjectMeta, kind: &str) -> Option<Key> {
    let owner = meta
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind)?;
    Some((
        meta.namespace.clone().unwrap_or_default(),
        owner.name.clone(),
    ))
}

/// A decision's "look again after" as the queue's delay.
pub fn requeue(after: Option<SignedDuration>) -> Option<Duration> {
    after.and_then(|d| Duration::try_from(d).ok())
}

/// Runs every loop until the returned set is dropped or aborted (the
/// leader aborts it when it loses the lease): the caches, then each loop
/// of [`wiring::loops`].
pub fn run(client: Client, config: &LoopConfig) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let caches = wiring::Caches::start(&client, &mut tasks);
    for spec in wiring::loops(&client, config, &caches, &mut tasks) {
        tracing::debug!(loop_ = spec.name(), "starting");
        spec.start(&mut tasks);
    }
    info!("decision loops running");
    tasks
}

#[cfg(test)]
mod tests {
    use super::ProviderChoice;
    use std::time::Duration;

    #[test]
    fn provider_choices_parse_and_bad_ones_say_what_is_expected() {
        let p = |s: &str| s.parse::<ProviderChoice>();
        assert_eq!(p("none"), Ok(ProviderChoice::None));
        assert_eq!(
            p("sim:3"),
            Ok(ProviderChoice::Sim {
                boot_delay: Duration::from_secs(3)
            })
        );
        assert_eq!(
            p("exec:/opt/scripts"),
            Ok(ProviderChoice::Exec {
                dir: "/opt/scripts".into()
            })
        );
        assert_eq!(
            p("netns:/etc/sluice/lab.yaml"),
            Ok(ProviderChoice::Netns {
                config: "/etc/sluice/lab.yaml".into()
            })
        );
        for bad in ["netns", "netns:", "vm:x", "exec:"] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains("netns:<config file>"), "{bad}: {e}");
        }
        assert!(p("sim:soon")
            .expect_err("sim:soon")
            .contains("whole seconds"));
    }
}
