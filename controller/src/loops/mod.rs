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
//!   `sluice_upgrades`, `sluice_maintenance`): [`pools`], [`upgrades`].

pub mod client;
pub mod compact;
pub mod endpoints;
pub mod informer;
pub mod loadbalancers;
pub mod nodes;
pub mod pools;
pub mod queue;
pub mod scheduling;
pub mod upgrades;
pub mod workloads;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use sluice_lifecycle::pod_cidrs::Allocator;
use sluice_model::k8s::jiff::SignedDuration;
use sluice_model::k8s::{
    Deployment, EndpointSlice, Lease, Node, ObjectMeta, Pod, ReplicaSet, Service,
};
use sluice_model::load_balancer::{
    HealthCheck, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup,
};
use sluice_nodepools::sim::SimProvider;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;
use tracing::info;

use informer::{Change, Informer, Key};
use queue::Queue;

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
    /// `--cluster-cidr`: pod CIDRs are allocated to Nodes when set.
    pub cluster_cidrs: Vec<String>,
    /// `--node-cidr-mask-size`: per family, in `cluster_cidrs`' order.
    pub node_cidr_masks: Vec<Option<u8>>,
    /// With `ProviderChoice::Netns`: the provider `serve` built at its
    /// start. It outlives the loops (a leadership lost and won again
    /// finds the same nodes), and `serve` removes its nodes as it stops.
    pub netns: Option<crate::providers::netns::NetnsProvider>,
}

/// A node provider, and the simulator behind it when it is `sim`.
type Chosen = (
    Arc<dyn sluice_nodepools::NodeProvider>,
    Option<Arc<SimProvider>>,
);

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

/// Works loop `name`'s queue once every cache in `inputs` has had its first
/// complete list, starting with the keys `first` gives. No loop decides on
/// a partial picture (upstream's `WaitForCacheSync`): one kind's list often
/// comes before another's, and after a restart a loop deciding in between
/// wrote a Service's slice empty, gave a ReplicaSet new pods, deleted an
/// upgrade's surge node or handed out a pod CIDR twice.
fn work_when_synced<F, Fut>(
    tasks: &mut JoinSet<()>,
    q: Arc<Queue>,
    name: &'static str,
    inputs: Vec<informer::Synced>,
    first: impl FnOnce() -> Vec<Key> + Send + 'static,
    reconcile: F,
) where
    F: Fn(Key) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<queue::Next, LoopError>> + Send + 'static,
{
    tasks.spawn(async move {
        informer::all_synced(inputs).await;
        q.add_all(first());
        q.work(name, reconcile).await
    });
}

/// Feeds a loop's queue from one informer's changes, for as long as the
/// informer lives; a lagging feed becomes a resync.
fn follow<K, F>(tasks: &mut JoinSet<()>, inf: &Arc<Informer<K>>, queue: Arc<Queue>, on: F)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(&Change<K>, &Queue) + Send + 'static,
{
    let mut rx = inf.subscribe();
    tasks.spawn(async move {
        loop {
            match rx.recv().await {
                Ok(c) => on(&c, &queue),
                Err(RecvError::Lagged(_)) => on(&Change::Relisted, &queue),
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// Runs every loop until the returned set is dropped or aborted (the
/// leader aborts it when it loses the lease).
pub fn run(client: Client, config: &LoopConfig) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    let wc = watcher::Config::default();
    let pods = Informer::start_trimmed(
        Api::<Pod>::all(client.clone()),
        wc.clone(),
        &mut tasks,
        compact::trim_pod,
    );
    let nodes = Informer::start(Api::<Node>::all(client.clone()), wc.clone(), &mut tasks);
    let sets = Informer::start(
        Api::<ReplicaSet>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let deployments = Informer::start(
        Api::<Deployment>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let services = Informer::start(Api::<Service>::all(client.clone()), wc.clone(), &mut tasks);
    let slices = Informer::start(
        Api::<EndpointSlice>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let clusters = Informer::start(
        Api::<sluice_model::cluster::Cluster>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let lbs = Informer::start(
        Api::<L4LoadBalancer>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let hcs = Informer::start(
        Api::<HealthCheck>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let negs = Informer::start(
        Api::<NetworkEndpointGroup>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let groups = Informer::start(
        Api::<InstanceGroup>::all(client.clone()),
        wc.clone(),
        &mut tasks,
    );
    let leases = Informer::start(
        Api::<Lease>::namespaced(
            client.clone(),
            sluice_lifecycle::node_lifecycle::LEASE_NAMESPACE,
        ),
        wc,
        &mut tasks,
    );

    let rs = Arc::new(workloads::ReplicaSets::new(
        client.clone(),
        sets.clone(),
        pods.clone(),
    ));
    let q = Queue::new();
    let r = rs.clone();
    follow(&mut tasks, &pods, q.clone(), move |c, q| r.on_pod(c, q));
    let s = sets.clone();
    follow(&mut tasks, &sets, q.clone(), move |c, q| match c {
        Change::Applied(o) | Change::Deleted(o) => q.add(informer::key_of(o.as_ref())),
        Change::Relisted => q.add_all(s.keys()),
    });
    let r = rs.clone();
    let ss = sets.clone();
    work_when_synced(
        &mut tasks,
        q,
        "replicaset",
        vec![sets.synced(), pods.synced()],
        move || ss.keys(),
        move |k| {
            let r = r.clone();
            async move { r.reconcile(k).await }
        },
    );

    let dep = Arc::new(workloads::Deployments {
        client: client.clone(),
        deployments: deployments.clone(),
        sets: sets.clone(),
        pods: pods.clone(),
    });
    let q = Queue::new();
    let d = dep.clone();
    follow(&mut tasks, &sets, q.clone(), move |c, q| d.on_set(c, q));
    let d = dep.clone();
    follow(&mut tasks, &pods, q.clone(), move |c, q| d.on_pod(c, q));
    let ds = deployments.clone();
    follow(&mut tasks, &deployments, q.clone(), move |c, q| match c {
        Change::Applied(o) | Change::Deleted(o) => q.add(informer::key_of(o.as_ref())),
        Change::Relisted => q.add_all(ds.keys()),
    });
    let d = dep.clone();
    let ds = deployments.clone();
    work_when_synced(
        &mut tasks,
        q,
        "deployment",
        vec![deployments.synced(), sets.synced(), pods.synced()],
        move || ds.keys(),
        move |k| {
            let d = d.clone();
            async move { d.reconcile(k).await }
        },
    );

    let eps = Arc::new(endpoints::EndpointSlices {
        client: client.clone(),
        services: services.clone(),
        pods: pods.clone(),
        nodes: nodes.clone(),
        slices: slices.clone(),
        zones: Default::default(),
        tracker: Default::default(),
    });
    let q = Queue::new();
    let e = eps.clone();
    follow(&mut tasks, &pods, q.clone(), move |c, q| e.on_pod(c, q));
    let e = eps.clone();
    follow(&mut tasks, &slices, q.clone(), move |c, q| e.on_slice(c, q));
    let e = eps.clone();
    follow(&mut tasks, &nodes, q.clone(), move |c, q| e.on_node(c, q));
    let sv = services.clone();
    follow(&mut tasks, &services, q.clone(), move |c, q| match c {
        Change::Applied(o) | Change::Deleted(o) => q.add(informer::key_of(o.as_ref())),
        Change::Relisted => q.add_all(sv.keys()),
    });
    let e = eps.clone();
    let sv = services.clone();
    work_when_synced(
        &mut tasks,
        q,
        "endpointslice",
        vec![
            services.synced(),
            pods.synced(),
            nodes.synced(),
            slices.synced(),
        ],
        move || sv.keys(),
        move |k| {
            let e = e.clone();
            async move { e.reconcile(k).await }
        },
    );

    let lb = Arc::new(loadbalancers::LoadBalancers {
        client: client.clone(),
        services: services.clone(),
        nodes: nodes.clone(),
        slices: slices.clone(),
        clusters: clusters.clone(),
        lbs: lbs.clone(),
        hcs: hcs.clone(),
        negs: negs.clone(),
        groups: groups.clone(),
        facts: Default::default(),
    });
    let q = Queue::new();
    let l = lb.clone();
    follow(&mut tasks, &services, q.clone(), move |c, q| {
        l.on_service(c, q)
    });
    let l = lb.clone();
    follow(&mut tasks, &nodes, q.clone(), move |c, q| l.on_node(c, q));
    let l = lb.clone();
    follow(&mut tasks, &slices, q.clone(), move |c, q| l.on_slice(c, q));
    let l = lb.clone();
    follow(&mut tasks, &clusters, q.clone(), move |c, q| {
        l.on_cluster(c, q)
    });
    let l = lb.clone();
    follow(&mut tasks, &lbs, q.clone(), move |c, q| l.on_lb(c, q));
    let l = lb.clone();
    follow(&mut tasks, &hcs, q.clone(), move |c, q| {
        l.on_owned(c, q, |h| h.metadata.name.clone().unwrap_or_default())
    });
    let l = lb.clone();
    follow(&mut tasks, &negs, q.clone(), move |c, q| {
        l.on_owned(c, q, |n| n.spec.service.clone())
    });
    let l = lb.clone();
    follow(&mut tasks, &groups, q.clone(), move |c, q| l.on_group(c, q));
    // A decision needs every input: a Node missing from a cache still
    // filling would drop out of a NEG, a NEG missing would be made again.
    let inputs = vec![
        services.synced(),
        nodes.synced(),
        slices.synced(),
        clusters.synced(),
        lbs.synced(),
        hcs.synced(),
        negs.synced(),
        groups.synced(),
    ];
    let l = lb.clone();
    let keys = lb.clone();
    work_when_synced(
        &mut tasks,
        q,
        "loadbalancer",
        inputs,
        move || keys.all_keys(),
        move |k| {
            let l = l.clone();
            async move { l.reconcile(k).await }
        },
    );

    let life = Arc::new(nodes::Lifecycle {
        client: client.clone(),
        nodes: nodes.clone(),
        leases: leases.clone(),
        pods: pods.clone(),
        config: sluice_lifecycle::node_lifecycle::Config {
            grace_period: SignedDuration::try_from(config.node_monitor_grace_period)
                .unwrap_or(SignedDuration::from_secs(40)),
            // A restart (kill -9 included) is not the nodes' silence.
            watching_since: Some(crate::clock::now()),
            ..Default::default()
        },
        missing: Default::default(),
    });
    let q = Queue::new();
    let l = life.clone();
    follow(&mut tasks, &nodes, q.clone(), move |c, q| l.on_change(c, q));
    let l = life.clone();
    follow(&mut tasks, &leases, q.clone(), move |c, q| l.on_lease(c, q));
    let l = life.clone();
    // A node is not silent just because its Lease is not listed yet, and a
    // silent node's pods are all marked and evicted, not those listed so far.
    work_when_synced(
        &mut tasks,
        q,
        "node-lifecycle",
        vec![nodes.synced(), leases.synced(), pods.synced()],
        || vec![nodes::cluster_key()],
        move |_| {
            let l = l.clone();
            async move { l.reconcile().await }
        },
    );

    let q = Queue::new();
    let sched = Arc::new(scheduling::Scheduling::new(
        client.clone(),
        nodes.clone(),
        pods.clone(),
        q.clone(),
    ));
    let sc = sched.clone();
    follow(&mut tasks, &nodes, q.clone(), move |c, q| sc.on_node(c, q));
    let sc = sched.clone();
    follow(&mut tasks, &pods, q.clone(), move |c, q| sc.on_pod(c, q));
    let sc = sched.clone();
    let (first, p) = (sched.clone(), pods.clone());
    // Decisions need every Node and every bound pod in the view.
    work_when_synced(
        &mut tasks,
        q,
        "scheduler",
        vec![nodes.synced(), pods.synced()],
        move || {
            first.rebuild();
            p.all()
                .iter()
                .filter(|p| sluice_scheduler::wants_scheduling(p))
                .map(|p| informer::key_of(p.as_ref()))
                .collect()
        },
        move |k| {
            let sc = sc.clone();
            async move { sc.reconcile(k).await }
        },
    );

    // The simulated provider also needs the simulated nodes' kubelets.
    let chosen: Option<Chosen> = match &config.provider {
        ProviderChoice::None => None,
        ProviderChoice::Exec { dir } => Some((
            Arc::new(sluice_nodepools::exec::ExecProvider::new(
                sluice_nodepools::exec::ExecConfig::in_dir(dir),
            )),
            None,
        )),
        ProviderChoice::Netns { config: file } => match &config.netns {
            Some(p) => Some((Arc::new(p.clone()), None)),
            None => {
                tracing::error!(config = %file.display(), "the netns provider was not built; pools make no nodes");
                None
            }
        },
        ProviderChoice::Sim { boot_delay } => {
            let clock: Arc<dyn sluice_nodepools::sim::Clock> =
                Arc::new(sluice_model::k8s::jiff::Timestamp::now);
            let sim = Arc::new(SimProvider::new(clock));
            sim.set_boot_delay(
                SignedDuration::try_from(*boot_delay).unwrap_or(SignedDuration::ZERO),
            );
            Some((sim.clone(), Some(sim)))
        }
    };
    if let Some((provider, sim)) = chosen {
        let pools_inf = Informer::start(
            Api::<sluice_model::node_pool::NodePool>::all(client.clone()),
            watcher::Config::default(),
            &mut tasks,
        );
        if let Some(sim) = sim {
            let kubelets = pools::SimKubelets {
                client: client.clone(),
                sim,
                pools: pools_inf.clone(),
                nodes: nodes.clone(),
                addresses: Default::default(),
            };
            tasks.spawn(kubelets.run());
        }
        let operations = Informer::start(
            Api::<sluice_model::operation::Operation>::all(client.clone()),
            watcher::Config::default(),
            &mut tasks,
        );
        let pool_config = sluice_nodepools::reconcile::Config {
            // A pool without a version gets the served one.
            cluster_version: format!(
                "{}.{}.0",
                crate::api::discovery::KUBE_MAJOR,
                crate::api::discovery::KUBE_MINOR
            ),
            ..Default::default()
        };
        let budgets = Informer::start(
            Api::<sluice_model::k8s::PodDisruptionBudget>::all(client.clone()),
            watcher::Config::default(),
            &mut tasks,
        );
        let holds = Arc::new(upgrades::Holds::default());
        let pl = Arc::new(pools::Pools {
            client: client.clone(),
            pools: pools_inf.clone(),
            nodes: nodes.clone(),
            operations: operations.clone(),
            holds: holds.clone(),
            provider: provider.clone(),
            config: pool_config.clone(),
            seen_ready: Default::default(),
        });
        let up = Arc::new(upgrades::Upgrades {
            client: client.clone(),
            operations: operations.clone(),
            pools: pools_inf.clone(),
            nodes: nodes.clone(),
            pods: pods.clone(),
            budgets,
            services: services.clone(),
            slices: slices.clone(),
            clusters: clusters.clone(),
            provider,
            config: pool_config,
            holds,
        });
        let q = Queue::new();
        let u = up.clone();
        follow(&mut tasks, &operations, q.clone(), move |c, q| {
            u.on_operation(c, q)
        });
        let u = up.clone();
        follow(&mut tasks, &nodes, q.clone(), move |c, q| u.on_node(c, q));
        let u = up.clone();
        follow(&mut tasks, &pods, q.clone(), move |c, q| u.on_pod(c, q));
        let u = up.clone();
        follow(&mut tasks, &pools_inf, q.clone(), move |c, q| {
            u.on_pool(c, q)
        });
        let u = up.clone();
        follow(&mut tasks, &clusters, q.clone(), move |c, q| {
            u.on_cluster(c, q)
        });
        let (u, keys) = (up.clone(), up.clone());
        // A plan needs every Node of the pool and every pod on them: a
        // node missing from a cache still filling would look gone.
        work_when_synced(
            &mut tasks,
            q,
            "upgrade",
            vec![
                nodes.synced(),
                pools_inf.synced(),
                pods.synced(),
                operations.synced(),
            ],
            move || keys.all_keys(),
            move |k| {
                let u = u.clone();
                async move { u.reconcile(k).await }
            },
        );
        let q = Queue::new();
        let p = pl.clone();
        follow(&mut tasks, &pools_inf, q.clone(), move |c, q| {
            p.on_pool(c, q)
        });
        let p = pl.clone();
        follow(&mut tasks, &nodes, q.clone(), move |c, q| p.on_node(c, q));
        // An upgrade starting or ending takes or gives back its zones.
        follow(&mut tasks, &operations, q.clone(), move |c, q| {
            if let Change::Applied(o) | Change::Deleted(o) = c {
                if let Some(pool) = o.spec.node_pool() {
                    q.add((String::new(), pool.to_owned()));
                }
            }
        });
        let (p, ps) = (pl.clone(), pools_inf.clone());
        // A pool's plan needs every Node: one missing from a cache still
        // filling would look deleted and be replaced. And every Operation:
        // with none known yet, no upgrade holds its zones, and a restarted
        // controller deleted the surge node its last run had made as
        // surplus, with no drain, while it served.
        work_when_synced(
            &mut tasks,
            q,
            "nodepool",
            vec![nodes.synced(), pools_inf.synced(), operations.synced()],
            move || ps.keys(),
            move |k| {
                let p = p.clone();
                async move { p.reconcile(k).await }
            },
        );
    }

    if !config.cluster_cidrs.is_empty() {
        let cidrs: Vec<&str> = config.cluster_cidrs.iter().map(String::as_str).collect();
        match Allocator::new(&cidrs, &config.node_cidr_masks) {
            Ok(a) => {
                let pc = Arc::new(nodes::PodCidrs {
                    client: client.clone(),
                    nodes: nodes.clone(),
                    allocator: Mutex::new(a),
                    written: Mutex::new(Default::default()),
                });
                let q = Queue::new();
                let p = pc.clone();
                follow(&mut tasks, &nodes, q.clone(), move |c, q| p.on_node(c, q));
                let (p, first, n) = (pc.clone(), pc.clone(), nodes.clone());
                // No block is handed out before the allocator knows every
                // Node's: the Nodes' first list may have come (and its
                // `Relisted` gone) before this loop followed them, and
                // after a restart an empty allocator gave a new Node the
                // lowest block, an existing Node's, so two nodes routed one
                // pod range.
                work_when_synced(
                    &mut tasks,
                    q,
                    "pod-cidrs",
                    vec![nodes.synced()],
                    move || {
                        first.rebuild();
                        n.keys()
                    },
                    move |k| {
                        let p = p.clone();
                        async move { p.reconcile(k).await }
                    },
                );
            }
            Err(e) => tracing::error!(error = %e, "pod CIDRs are not allocated"),
        }
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
