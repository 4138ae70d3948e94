//! The controller's loops, one [`LoopSpec`] each: the caches it waits for
//! (a decision needs every input listed, see [`LoopSpec::waits_for`]), the
//! changes that wake it and its reconcile. A new loop is a new entry in
//! [`loops`].

use std::sync::{Arc, Mutex};

use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use sluice_lifecycle::pod_cidrs::Allocator;
use sluice_model::cluster::Cluster;
use sluice_model::k8s::jiff::SignedDuration;
use sluice_model::k8s::{
    Deployment, EndpointSlice, Event, Lease, Node, Pod, PodDisruptionBudget, ReplicaSet, Service,
};
use sluice_model::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use sluice_model::load_balancer::{
    HealthCheck, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup,
};
use sluice_model::node_pool::NodePool;
use sluice_model::operation::Operation;
use sluice_nodepools::sim::SimProvider;
use tokio::task::JoinSet;

use super::informer::{self, Change, Informer};
use super::queue::Queue;
use super::spec::{LoopSpec, Watched};
use super::{
    autoscaler, balancers, compact, endpoints, garbage_collector, loadbalancers, namespaces, nodes,
    pools, scheduling, upgrades, workloads, LoopConfig, ProviderChoice,
};

/// The kinds every loop may read, each watched once.
pub struct Caches {
    pub pods: Arc<Informer<Pod>>,
    pub nodes: Arc<Informer<Node>>,
    pub sets: Arc<Informer<ReplicaSet>>,
    pub deployments: Arc<Informer<Deployment>>,
    pub services: Arc<Informer<Service>>,
    pub slices: Arc<Informer<EndpointSlice>>,
    pub clusters: Arc<Informer<Cluster>>,
    pub lbs: Arc<Informer<L4LoadBalancer>>,
    pub hcs: Arc<Informer<HealthCheck>>,
    pub negs: Arc<Informer<NetworkEndpointGroup>>,
    pub groups: Arc<Informer<InstanceGroup>>,
    /// In every namespace: the node lifecycle reads `kube-node-lease`'s,
    /// the garbage collector all of them.
    pub leases: Arc<Informer<Lease>>,
    pub namespaces: Arc<Informer<Namespace>>,
    pub budgets: Arc<Informer<PodDisruptionBudget>>,
    pub pools: Arc<Informer<NodePool>>,
    pub operations: Arc<Informer<Operation>>,
    /// Metadata only (see [`garbage_collector::metadata_only`]): only the
    /// garbage collector and the namespace loop read these kinds.
    pub config_maps: Arc<Informer<ConfigMap>>,
    pub secrets: Arc<Informer<Secret>>,
    pub events: Arc<Informer<Event>>,
}

/// `K` watched in every namespace (or cluster-wide).
fn watch<K: Watched>(client: &Client, tasks: &mut JoinSet<()>) -> Arc<Informer<K>> {
    Informer::start(
        Api::<K>::all(client.clone()),
        watcher::Config::default(),
        tasks,
    )
}

/// `K` watched everywhere, kept as `trim` leaves it.
fn trimmed<K: Watched>(
    client: &Client,
    tasks: &mut JoinSet<()>,
    trim: fn(&mut K),
) -> Arc<Informer<K>> {
    Informer::start_trimmed(
        Api::<K>::all(client.clone()),
        watcher::Config::default(),
        tasks,
        trim,
    )
}

impl Caches {
    pub fn start(client: &Client, tasks: &mut JoinSet<()>) -> Caches {
        Caches {
            pods: Informer::start_trimmed(
                Api::<Pod>::all(client.clone()),
                watcher::Config::default(),
                tasks,
                compact::trim_pod,
            ),
            nodes: watch(client, tasks),
            sets: watch(client, tasks),
            deployments: watch(client, tasks),
            services: watch(client, tasks),
            slices: watch(client, tasks),
            clusters: watch(client, tasks),
            lbs: watch(client, tasks),
            hcs: watch(client, tasks),
            negs: watch(client, tasks),
            groups: watch(client, tasks),
            leases: watch(client, tasks),
            namespaces: watch(client, tasks),
            budgets: watch(client, tasks),
            pools: watch(client, tasks),
            operations: watch(client, tasks),
            config_maps: trimmed(client, tasks, garbage_collector::metadata_only),
            secrets: trimmed(client, tasks, garbage_collector::metadata_only),
            events: trimmed(client, tasks, garbage_collector::metadata_only),
        }
    }
}

/// The loops to run. Those of node pools (the pool reconciler, upgrades
/// and the autoscaler, which acts through the pool) need a node provider
/// and its caches, started here; the pod CIDR allocator needs
/// `--cluster-cidr`.
pub fn loops(
    client: &Client,
    config: &LoopConfig,
    c: &Caches,
    tasks: &mut JoinSet<()>,
) -> Vec<LoopSpec> {
    let mut all = vec![
        replica_sets(client, c),
        deployments(client, c),
        endpoint_slices(client, c),
        load_balancers(client, c),
        node_lifecycle(client, config, c),
        scheduler(client, c),
        garbage_collector::spec(client, c),
        namespaces::spec(client, c),
    ];
    if let Some(chosen) = provider(config) {
        all.extend(pool_loops(client, config, c, chosen, tasks));
    }
    all.extend(pod_cidrs(client, config, c));
    all
}

fn replica_sets(client: &Client, c: &Caches) -> LoopSpec {
    let rs = Arc::new(workloads::ReplicaSets::new(
        client.clone(),
        c.sets.clone(),
        c.pods.clone(),
    ));
    let (r, sets) = (rs.clone(), c.sets.clone());
    LoopSpec::new(
        "replicaset",
        &rs,
        |r, k| async move { r.reconcile(k).await },
    )
    .on(&c.pods, move |ch, q| r.on_pod(ch, q))
    .on_objects(&c.sets)
    .waits_for([c.sets.synced(), c.pods.synced()])
    .first(move || sets.keys())
}

fn deployments(client: &Client, c: &Caches) -> LoopSpec {
    let dep = Arc::new(workloads::Deployments {
        client: client.clone(),
        deployments: c.deployments.clone(),
        sets: c.sets.clone(),
        pods: c.pods.clone(),
    });
    let (d1, d2, ds) = (dep.clone(), dep.clone(), c.deployments.clone());
    LoopSpec::new(
        "deployment",
        &dep,
        |d, k| async move { d.reconcile(k).await },
    )
    .on(&c.sets, move |ch, q| d1.on_set(ch, q))
    .on(&c.pods, move |ch, q| d2.on_pod(ch, q))
    .on_objects(&c.deployments)
    .waits_for([c.deployments.synced(), c.sets.synced(), c.pods.synced()])
    .first(move || ds.keys())
}

fn endpoint_slices(client: &Client, c: &Caches) -> LoopSpec {
    let eps = Arc::new(endpoints::EndpointSlices {
        client: client.clone(),
        services: c.services.clone(),
        pods: c.pods.clone(),
        nodes: c.nodes.clone(),
        slices: c.slices.clone(),
        zones: Default::default(),
        tracker: Default::default(),
    });
    let (e1, e2, e3, sv) = (eps.clone(), eps.clone(), eps.clone(), c.services.clone());
    LoopSpec::new(
        "endpointslice",
        &eps,
        |e, k| async move { e.reconcile(k).await },
    )
    .on(&c.pods, move |ch, q| e1.on_pod(ch, q))
    .on(&c.slices, move |ch, q| e2.on_slice(ch, q))
    .on(&c.nodes, move |ch, q| e3.on_node(ch, q))
    .on_objects(&c.services)
    .waits_for([
        c.services.synced(),
        c.pods.synced(),
        c.nodes.synced(),
        c.slices.synced(),
    ])
    .first(move || sv.keys())
}

fn load_balancers(client: &Client, c: &Caches) -> LoopSpec {
    let lb = Arc::new(loadbalancers::LoadBalancers {
        client: client.clone(),
        services: c.services.clone(),
        nodes: c.nodes.clone(),
        slices: c.slices.clone(),
        clusters: c.clusters.clone(),
        lbs: c.lbs.clone(),
        hcs: c.hcs.clone(),
        negs: c.negs.clone(),
        groups: c.groups.clone(),
        facts: Default::default(),
        reported: Default::default(),
    });
    let l = || lb.clone();
    let (l1, l2, l3, l4, l5, l6, l7, l8, keys) = (l(), l(), l(), l(), l(), l(), l(), l(), l());
    LoopSpec::new(
        "loadbalancer",
        &lb,
        |l, k| async move { l.reconcile(k).await },
    )
    .on(&c.services, move |ch, q| l1.on_service(ch, q))
    .on(&c.nodes, move |ch, q| l2.on_node(ch, q))
    .on(&c.slices, move |ch, q| l3.on_slice(ch, q))
    .on(&c.clusters, move |ch, q| l4.on_cluster(ch, q))
    .on(&c.lbs, move |ch, q| l5.on_lb(ch, q))
    .on(&c.hcs, move |ch, q| {
        l6.on_owned(ch, q, |h| h.metadata.name.clone().unwrap_or_default())
    })
    .on(&c.negs, move |ch, q| {
        l7.on_owned(ch, q, |n| n.spec.service.clone())
    })
    .on(&c.groups, move |ch, q| l8.on_group(ch, q))
    // A decision needs every input: a Node missing from a cache still
    // filling would drop out of a NEG, a NEG missing would be made again.
    .waits_for([
        c.services.synced(),
        c.nodes.synced(),
        c.slices.synced(),
        c.clusters.synced(),
        c.lbs.synced(),
        c.hcs.synced(),
        c.negs.synced(),
        c.groups.synced(),
    ])
    .first(move || keys.all_keys())
}

fn node_lifecycle(client: &Client, config: &LoopConfig, c: &Caches) -> LoopSpec {
    let life = Arc::new(nodes::Lifecycle {
        client: client.clone(),
        nodes: c.nodes.clone(),
        leases: c.leases.clone(),
        pods: c.pods.clone(),
        config: sluice_lifecycle::node_lifecycle::Config {
            grace_period: SignedDuration::try_from(config.node_monitor_grace_period)
                .unwrap_or(SignedDuration::from_secs(40)),
            // A restart (kill -9 included) is not the nodes' silence.
            watching_since: Some(crate::clock::now()),
            ..Default::default()
        },
        missing: Default::default(),
        pod_gc_quarantine: SignedDuration::try_from(config.pod_gc_quarantine)
            .unwrap_or(sluice_lifecycle::pod_gc::QUARANTINE),
    });
    let (l1, l2) = (life.clone(), life.clone());
    LoopSpec::new("node-lifecycle", &life, |l, _| async move {
        l.reconcile().await
    })
    .on(&c.nodes, move |ch, q| l1.on_change(ch, q))
    .on(&c.leases, move |ch, q| l2.on_lease(ch, q))
    // A node is not silent just because its Lease is not listed yet,
    // and a silent node's pods are all marked and evicted, not those
    // listed so far.
    .waits_for([c.nodes.synced(), c.leases.synced(), c.pods.synced()])
    .first(|| vec![nodes::cluster_key()])
}

fn scheduler(client: &Client, c: &Caches) -> LoopSpec {
    let q = Queue::new();
    let sched = Arc::new(scheduling::Scheduling::new(
        client.clone(),
        c.nodes.clone(),
        c.pods.clone(),
        q.clone(),
    ));
    let (s1, s2, first, pods) = (sched.clone(), sched.clone(), sched.clone(), c.pods.clone());
    LoopSpec::new(
        "scheduler",
        &sched,
        |s, k| async move { s.reconcile(k).await },
    )
    .queue(q)
    .on(&c.nodes, move |ch, q| s1.on_node(ch, q))
    .on(&c.pods, move |ch, q| s2.on_pod(ch, q))
    // Decisions need every Node and every bound pod in the view.
    .waits_for([c.nodes.synced(), c.pods.synced()])
    .first(move || {
        first.rebuild();
        pods.all()
            .iter()
            .filter(|p| sluice_scheduler::wants_scheduling(p))
            .map(|p| informer::key_of(p.as_ref()))
            .collect()
    })
}

/// A node provider, and the simulator behind it when it is `sim`.
type Chosen = (
    Arc<dyn sluice_nodepools::NodeProvider>,
    Option<Arc<SimProvider>>,
);

fn provider(config: &LoopConfig) -> Option<Chosen> {
    match &config.provider {
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
        // The simulated provider also needs the simulated nodes' kubelets.
        ProviderChoice::Sim { boot_delay } => {
            let clock: Arc<dyn sluice_nodepools::sim::Clock> =
                Arc::new(sluice_model::k8s::jiff::Timestamp::now);
            let sim = Arc::new(SimProvider::new(clock));
            sim.set_boot_delay(
                SignedDuration::try_from(*boot_delay).unwrap_or(SignedDuration::ZERO),
            );
            Some((sim.clone(), Some(sim)))
        }
    }
}

/// The pool reconciler, the upgrades and the autoscaler, with the caches
/// only they read.
fn pool_loops(
    client: &Client,
    config: &LoopConfig,
    c: &Caches,
    (provider, sim): Chosen,
    tasks: &mut JoinSet<()>,
) -> Vec<LoopSpec> {
    let pools_inf = c.pools.clone();
    if let Some(sim) = sim {
        let kubelets = pools::SimKubelets {
            client: client.clone(),
            sim,
            pools: pools_inf.clone(),
            nodes: c.nodes.clone(),
            addresses: Default::default(),
        };
        tasks.spawn(kubelets.run());
    }
    let operations = c.operations.clone();
    let pool_config = sluice_nodepools::reconcile::Config {
        // A pool without a version gets the served one.
        cluster_version: format!(
            "{}.{}.0",
            crate::api::discovery::KUBE_MAJOR,
            crate::api::discovery::KUBE_MINOR
        ),
        ..Default::default()
    };
    let budgets = c.budgets.clone();
    let holds = Arc::new(upgrades::Holds::default());
    let balancers = Arc::new(balancers::Balancers::new(
        c.negs.clone(),
        c.groups.clone(),
        c.nodes.clone(),
    ));
    let pl = Arc::new(pools::Pools {
        client: client.clone(),
        pools: pools_inf.clone(),
        nodes: c.nodes.clone(),
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
        nodes: c.nodes.clone(),
        pods: c.pods.clone(),
        budgets: budgets.clone(),
        services: c.services.clone(),
        slices: c.slices.clone(),
        clusters: c.clusters.clone(),
        provider,
        config: pool_config,
        holds,
        balancers: balancers.clone(),
    });
    let u = || up.clone();
    let (u1, u2, u3, u4, u5, keys) = (u(), u(), u(), u(), u(), u());
    let (u6, u7) = (u(), u());
    let upgrade = LoopSpec::new("upgrade", &up, |u, k| async move { u.reconcile(k).await })
        .on(&operations, move |ch, q| u1.on_operation(ch, q))
        .on(&c.nodes, move |ch, q| u2.on_node(ch, q))
        .on(&c.pods, move |ch, q| u3.on_pod(ch, q))
        .on(&pools_inf, move |ch, q| u4.on_pool(ch, q))
        .on(&c.clusters, move |ch, q| u5.on_cluster(ch, q))
        .on(&c.negs, move |ch, q| u6.on_backends(ch, q))
        .on(&c.groups, move |ch, q| u7.on_backends(ch, q))
        // A plan needs every Node of the pool and every pod on them: a
        // node missing from a cache still filling would look gone.
        .waits_for([
            c.nodes.synced(),
            pools_inf.synced(),
            c.pods.synced(),
            operations.synced(),
        ])
        .waits_for(balancers.synced())
        .first(move || keys.all_keys());
    let (p1, p2, ps) = (pl.clone(), pl.clone(), pools_inf.clone());
    let nodepool = LoopSpec::new("nodepool", &pl, |p, k| async move { p.reconcile(k).await })
        .on(&pools_inf, move |ch, q| p1.on_pool(ch, q))
        .on(&c.nodes, move |ch, q| p2.on_node(ch, q))
        // An upgrade starting or ending takes or gives back its zones.
        .on(&operations, |ch, q| {
            if let Change::Applied(o) | Change::Deleted(o) = ch {
                if let Some(pool) = o.spec.node_pool() {
                    q.add((String::new(), pool.to_owned()));
                }
            }
        })
        // A pool's plan needs every Node: one missing from a cache still
        // filling would look deleted and be replaced. And every Operation:
        // with none known yet, no upgrade holds its zones, and a restarted
        // controller deleted the surge node its last run had made as
        // surplus, with no drain, while it served.
        .waits_for([c.nodes.synced(), pools_inf.synced(), operations.synced()])
        .first(move || ps.keys());
    let scaler = autoscaler::spec(
        autoscaler::Autoscaler::new(
            client.clone(),
            autoscaler::Caches {
                nodes: c.nodes.clone(),
                pods: c.pods.clone(),
                pools: pools_inf.clone(),
                budgets,
                clusters: c.clusters.clone(),
                balancers,
            },
            config.autoscaler.clone(),
        ),
        c,
    );
    vec![upgrade, nodepool, scaler]
}

fn pod_cidrs(client: &Client, config: &LoopConfig, c: &Caches) -> Option<LoopSpec> {
    if config.cluster_cidrs.is_empty() {
        return None;
    }
    let cidrs: Vec<&str> = config.cluster_cidrs.iter().map(String::as_str).collect();
    let allocator = match Allocator::new(&cidrs, &config.node_cidr_masks) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "pod CIDRs are not allocated");
            return None;
        }
    };
    let pc = Arc::new(nodes::PodCidrs {
        client: client.clone(),
        nodes: c.nodes.clone(),
        allocator: Mutex::new(allocator),
        written: Mutex::new(Default::default()),
    });
    let (p1, first, n) = (pc.clone(), pc.clone(), c.nodes.clone());
    Some(
        LoopSpec::new("pod-cidrs", &pc, |p, k| async move { p.reconcile(k).await })
            .on(&c.nodes, move |ch, q| p1.on_node(ch, q))
            // No block is handed out before the allocator knows every
            // Node's: the Nodes' first list may have come (and its
            // `Relisted` gone) before this loop followed them, and after a
            // restart an empty allocator gave a new Node the lowest block,
            // an existing Node's, so two nodes routed one pod range.
            .waits_for([c.nodes.synced()])
            .first(move || {
                first.rebuild();
                n.keys()
            }),
    )
}
