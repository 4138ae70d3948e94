//! The cluster autoscaler run against several pools in simulated time:
//! the [`SimProvider`] on a [`ManualClock`], each pool's reconciler
//! (`sluice_nodepools::reconcile::plan`), the real scheduler
//! (`sluice_scheduler::schedule`) placing pods or reporting them
//! `Unschedulable`, and `sluice_autoscaler::decide` carried out as the
//! controller's loop carries it out (`sluice_autoscaler::actuation`):
//! taints, drains through a budget-checking eviction, and the pools'
//! `status.autoscaler`. ReplicaSets are simulated: each keeps its replica
//! count, pods Ready as soon as they are bound, gone at once when evicted.
//!
//! Every 10 s step (the loop's scan interval) checks the invariants: sizes
//! within the pools' limits, never zero nodes, no node removed while a pod
//! that blocks its removal is on it, no eviction past a budget.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, Taint};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use sluice_autoscaler::actuation::{self, Step};
use sluice_autoscaler::{Options, Snapshot, State, TaintChange};
use sluice_model::k8s::PodDisruptionBudget;
use sluice_model::node_pool::NodePool;
use sluice_model::policy::eviction::SAFE_TO_EVICT;
use sluice_nodepools::reconcile::{self, Config, Outcome};
use sluice_nodepools::sim::{Clock, ManualClock, SimProvider};
use sluice_nodepools::{Instance, NodeProvider, ProviderError};
use sluice_scheduler::Decision;

use crate::invariants::Violation;

mod upgrade;

pub use upgrade::{Upgrade, UpgradeReport};

/// One simulated ReplicaSet: `replicas` over time (each change at its
/// time), pods requesting `cpu`/`memory`, a budget keeping
/// `min_available` of them, and whether its pods are
/// `safe-to-evict: "false"`.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub cpu: String,
    pub memory: String,
    pub replicas: Vec<(Timestamp, usize)>,
    pub min_available: Option<i32>,
    pub pinned: bool,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub pools: Vec<NodePool>,
    pub workloads: Vec<Workload>,
    pub start: Timestamp,
    pub boot_delay: SignedDuration,
    pub steps: u64,
    /// How far each step moves the clock (the loop's scan interval, 10 s,
    /// unless a scenario of days needs longer steps).
    pub step: SignedDuration,
    pub options: Options,
    /// A node upgrade run beside the autoscaler.
    pub upgrade: Option<Upgrade>,
}

/// How a run went.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    /// Registered nodes at each step.
    pub nodes: Vec<usize>,
    /// The nodes the autoscaler had its pools delete.
    pub removed: BTreeSet<String>,
    /// The longest a pod waited to be bound, in steps.
    pub longest_wait: u64,
    pub pending_at_end: usize,
    pub evictions: u64,
    pub refusals: u64,
    pub upgrade: UpgradeReport,
}

fn now_or_never<T>(
    mut f: std::pin::Pin<Box<dyn Future<Output = Result<T, ProviderError>> + Send + '_>>,
) -> Result<T, ProviderError> {
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(ProviderError::Failed(
            "the sim provider did not answer".into(),
        )),
    }
}

struct Run {
    clock: Arc<ManualClock>,
    provider: Arc<SimProvider>,
    config: Config,
    pools: Vec<NodePool>,
    /// Registered Nodes by name, with what was written on them since.
    nodes: BTreeMap<String, Node>,
    /// Pods by `namespace/name`, and the step each was made at.
    pods: BTreeMap<String, (Pod, u64)>,
    pdbs: Vec<PodDisruptionBudget>,
    workloads: Vec<Workload>,
    state: State,
    options: Options,
    serial: u64,
    report: Report,
    upgrade: Option<upgrade::Running>,
}

fn pod(w: &Workload, name: &str) -> Pod {
    let mut annotations = serde_json::Map::new();
    if w.pinned {
        annotations.insert(SAFE_TO_EVICT.into(), json!("false"));
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": w.name},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": w.name,
                "uid": w.name, "controller": true}]},
        "spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": w.cpu, "memory": w.memory}}}]},
        "status": {"phase": "Pending"},
    }))
    .unwrap_or_default()
}

fn budget(w: &Workload, min: i32) -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "metadata": {"name": w.name, "namespace": "default"},
        "spec": {"minAvailable": min, "selector": {"matchLabels": {"app": w.name}}},
    }))
    .unwrap_or_default()
}

fn app(p: &Pod) -> Option<&str> {
    p.metadata.labels.as_ref()?.get("app").map(String::as_str)
}

fn bound(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

fn set_condition(p: &mut Pod, c: PodCondition) {
    let status = p.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    list.retain(|x| x.type_ != c.type_);
    list.push(c);
}

fn condition(type_: &str, status: &str, reason: Option<&str>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.map(Into::into),
        ..Default::default()
    }
}

/// `change` made on `node`, as the API would store the loop's patch.
fn apply_taint(node: &mut Node, change: &TaintChange) {
    let spec = node.spec.get_or_insert_with(Default::default);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    match change {
        TaintChange::Add { taint, cordon, .. } => {
            if !taints.iter().any(|t: &Taint| t.key == taint.key) {
                taints.push(taint.clone());
            }
            if *cordon {
                spec.unschedulable = Some(true);
            }
        }
        TaintChange::Remove { key, uncordon, .. } => {
            taints.retain(|t| t.key != *key);
            if *uncordon {
                spec.unschedulable = None;
            }
        }
    }
}

fn taint_node(c: &TaintChange) -> &str {
    match c {
        TaintChange::Add { node, .. } | TaintChange::Remove { node, .. } => node,
    }
}

impl Run {
    fn violation(&mut self, at: Timestamp, what: String) {
        self.report.violations.push(Violation { at, what });
    }

    fn instances(&self, pool: &str) -> Vec<Instance> {
        now_or_never(self.provider.list(pool)).unwrap_or_default()
    }

    /// Each pool's reconciler, its actions made at once.
    fn reconcile_pools(&mut self, now: Timestamp) {
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        for i in 0..self.pools.len() {
            let name = self.pools[i].metadata.name.clone().unwrap_or_default();
            let instances = self.instances(&name);
            let config = self.config_for(&name);
            let Ok(plan) = reconcile::plan(&self.pools[i], &instances, &nodes, &config, now) else {
                continue;
            };
            let mut outcomes = Vec::new();
            for a in &plan.actions {
                let result = match a {
                    reconcile::Action::Create(c) => {
                        now_or_never(self.provider.create(c.clone())).map(drop)
                    }
                    reconcile::Action::Delete { name, reason } => {
                        if *reason == reconcile::DeleteReason::ScaledDown {
                            self.report.removed.insert(name.clone());
                        }
                        match now_or_never(self.provider.delete(name)) {
                            Err(ProviderError::NotFound(_)) => Ok(()),
                            r => r,
                        }
                    }
                };
                outcomes.push(Outcome {
                    action: a.clone(),
                    result,
                });
            }
            self.pools[i].status = Some(reconcile::record(&plan.status, &outcomes, &config, now));
        }
    }

    /// The Nodes of running instances registered, gone ones dropped with
    /// their pods (a removed node's pods are lost; their ReplicaSet makes
    /// them again). A node removed with a pod that blocks its removal
    /// still on it breaks the rules.
    fn refresh_nodes(&mut self, now: Timestamp) {
        let mut running = BTreeSet::new();
        for p in &self.pools {
            let name = p.metadata.name.clone().unwrap_or_default();
            for (n, node) in self
                .provider
                .running(&name, |n| !self.nodes.contains_key(n))
            {
                if let Some(node) = node {
                    self.nodes.insert(n.clone(), node);
                }
                running.insert(n);
            }
        }
        let gone: Vec<String> = self
            .nodes
            .keys()
            .filter(|n| !running.contains(*n))
            .cloned()
            .collect();
        for n in gone {
            if let Some(node) = self.nodes.remove(&n) {
                let here = upgrade::pods_on(&self.pods, &n);
                self.check_upgrade_removal(&node, &here, now);
            }
            let lost: Vec<String> = self
                .pods
                .iter()
                .filter(|(_, (p, _))| bound(p) == Some(n.as_str()))
                .map(|(k, _)| k.clone())
                .collect();
            for k in lost {
                let pinned = self.pods.get(&k).is_some_and(|(p, _)| upgrade::pinned(p));
                if pinned && self.report.removed.contains(&n) {
                    self.violation(now, format!("node {n} removed with the blocking pod {k}"));
                }
                self.pods.remove(&k);
            }
        }
    }

    /// Each ReplicaSet at its replica count: pods made pending, the
    /// newest deleted when there are too many.
    fn workloads(&mut self, now: Timestamp, step: u64) {
        for w in self.workloads.clone() {
            let want = w
                .replicas
                .iter()
                .rfind(|(t, _)| *t <= now)
                .map_or(0, |(_, n)| *n);
            let mut mine: Vec<(String, u64)> = self
                .pods
                .iter()
                .filter(|(_, (p, _))| app(p) == Some(w.name.as_str()))
                .map(|(k, (_, made))| (k.clone(), *made))
                .collect();
            // As a ReplicaSet ranks its pods for deletion: pending ones
            // first, then those sharing a node with more of the set, then
            // the newest; so what is left is spread over the nodes.
            while mine.len() > want {
                let mut per_node: HashMap<String, usize> = HashMap::new();
                for (k, _) in &mine {
                    if let Some(n) = self.pods.get(k).and_then(|(p, _)| bound(p)) {
                        *per_node.entry(n.to_owned()).or_default() += 1;
                    }
                }
                let rank = |k: &str, made: u64| {
                    let node = self.pods.get(k).and_then(|(p, _)| bound(p));
                    let crowd = node
                        .and_then(|n| per_node.get(n))
                        .copied()
                        .unwrap_or(usize::MAX);
                    (crowd, made)
                };
                let Some(i) = (0..mine.len()).max_by_key(|i| rank(&mine[*i].0, mine[*i].1)) else {
                    break;
                };
                let (k, _) = mine.swap_remove(i);
                self.pods.remove(&k);
            }
            for _ in mine.len()..want {
                self.serial += 1;
                let name = format!("{}-{}", w.name, self.serial);
                self.pods
                    .insert(format!("default/{name}"), (pod(&w, &name), step));
            }
        }
    }

    /// The scheduler over every pending pod, in its queue order.
    fn schedule(&mut self, step: u64) {
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        let placed: Vec<Pod> = self
            .pods
            .values()
            .filter(|(p, _)| bound(p).is_some())
            .map(|(p, _)| p.clone())
            .collect();
        let (mut cluster, _) = sluice_scheduler::Cluster::from_objects(&nodes, &placed);
        let pending: Vec<Pod> = self
            .pods
            .values()
            .filter(|(p, _)| bound(p).is_none())
            .map(|(p, _)| p.clone())
            .collect();
        for (key, decision) in sluice_scheduler::schedule_all(&mut cluster, &pending) {
            let Some((p, made)) = self.pods.get_mut(&key) else {
                continue;
            };
            match decision {
                Decision::Bind { node } => {
                    p.spec.get_or_insert_with(Default::default).node_name = Some(node);
                    p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
                    set_condition(p, condition("PodScheduled", "True", None));
                    set_condition(p, condition("Ready", "True", None));
                    let waited = step.saturating_sub(*made);
                    self.report.longest_wait = self.report.longest_wait.max(waited);
                }
                Decision::Unschedulable { .. } => {
                    set_condition(p, condition("PodScheduled", "False", Some("Unschedulable")));
                }
            }
        }
    }

    /// The Eviction API: a pod goes unless its budget would be broken.
    fn evict(&mut self, key: &str, now: Timestamp) {
        let Some((p, _)) = self.pods.get(key) else {
            return;
        };
        let name = app(p).unwrap_or_default().to_owned();
        let min = self
            .workloads
            .iter()
            .find(|w| w.name == name)
            .and_then(|w| w.min_available);
        if let Some(min) = min {
            let healthy = self
                .pods
                .values()
                .filter(|(q, _)| app(q) == Some(name.as_str()) && bound(q).is_some())
                .count();
            if i64::try_from(healthy).unwrap_or(i64::MAX) - 1 < i64::from(min) {
                self.report.refusals += 1;
                return;
            }
        }
        self.pods.remove(key);
        self.report.evictions += 1;
        if let Some(min) = min {
            let healthy = self
                .pods
                .values()
                .filter(|(q, _)| app(q) == Some(name.as_str()) && bound(q).is_some())
                .count();
            if (healthy as i64) < i64::from(min) {
                self.violation(now, format!("budget {name} broken: {healthy} < {min}"));
            }
        }
    }

    /// One autoscaler pass, carried out as the loop carries it out.
    fn autoscale(&mut self, now: Timestamp) {
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        let pods: Vec<Pod> = self.pods.values().map(|(p, _)| p.clone()).collect();
        let extras = self
            .pools
            .iter()
            .filter_map(|p| Some((p.metadata.name.clone()?, actuation::extras(p))))
            .collect();
        let snapshot = Snapshot {
            nodes: &nodes,
            pods: &pods,
            pools: &self.pools,
            pdbs: &self.pdbs,
            profile: None,
            extras: &extras,
            reservations: &[],
            pod_cidrs_left: None,
            options: &self.options,
        };
        let decision = sluice_autoscaler::decide(&snapshot, &self.state, now);
        self.state = decision.state.clone();
        for change in &decision.taints {
            if let Some(n) = self.nodes.get_mut(taint_node(change)) {
                apply_taint(n, change);
            }
        }
        let mut handed: Vec<(String, String, String)> = Vec::new();
        for (name, d) in self.state.deleting.clone() {
            let Some(node) = self.nodes.get(&name).cloned() else {
                continue;
            };
            let here: Vec<Pod> = self
                .pods
                .values()
                .filter(|(p, _)| bound(p) == Some(name.as_str()))
                .map(|(p, _)| p.clone())
                .collect();
            let refs: Vec<&Pod> = here.iter().collect();
            // The simulation has no load balancers to wait for.
            match actuation::drain_step(&node, &refs, &d, Ok(()), now) {
                Step::Wait => {}
                Step::Evict(list) => {
                    for (k, _) in list {
                        self.evict(&k, now);
                    }
                }
                Step::HandOver => {
                    let zone = node
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(sluice_autoscaler::snapshot::ZONE_LABEL))
                        .cloned()
                        .unwrap_or_default();
                    handed.push((d.pool.clone(), name.clone(), zone));
                }
                Step::GiveUp(_) => {
                    if let Some(n) = self.nodes.get_mut(&name) {
                        apply_taint(
                            n,
                            &TaintChange::Remove {
                                node: name.clone(),
                                key: sluice_autoscaler::snapshot::TO_BE_DELETED_TAINT.into(),
                                uncordon: true,
                            },
                        );
                    }
                    self.state.removal_failed(&name, now);
                }
            }
        }
        let live: BTreeSet<String> = self
            .nodes
            .keys()
            .cloned()
            .chain(self.pools.iter().flat_map(|p| {
                p.status
                    .iter()
                    .flat_map(|s| s.instances.iter().map(|i| i.name.clone()))
                    .collect::<Vec<_>>()
            }))
            .collect();
        let live: std::collections::HashSet<&str> = live.iter().map(String::as_str).collect();
        let mut per_zone: HashMap<(String, String), usize> = HashMap::new();
        for n in self.nodes.values() {
            let l = n.metadata.labels.clone().unwrap_or_default();
            if let (Some(p), Some(z)) = (
                l.get(sluice_autoscaler::snapshot::POOL_LABEL),
                l.get(sluice_autoscaler::snapshot::ZONE_LABEL),
            ) {
                *per_zone.entry((p.clone(), z.clone())).or_default() += 1;
            }
        }
        for pool in &mut self.pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let change = actuation::PoolChange {
                targets: decision.targets.iter().filter(|t| t.pool == name).collect(),
                handed_over: handed
                    .iter()
                    .filter(|(p, _, _)| *p == name)
                    .map(|(_, n, z)| {
                        let count = per_zone
                            .get(&(name.clone(), z.clone()))
                            .copied()
                            .unwrap_or(0);
                        (n.as_str(), z.as_str(), count)
                    })
                    .collect(),
                live: &live,
                memory: None,
            };
            if let Some(after) = actuation::pool_status(pool, &change) {
                pool.status.get_or_insert_with(Default::default).autoscaler = Some(after);
            }
        }
    }

    /// Sizes within each pool's limits, and never zero nodes.
    fn check(&mut self, now: Timestamp) {
        let mut found = Vec::new();
        for p in &self.pools {
            let name = p.metadata.name.clone().unwrap_or_default();
            let Some(a) = p.spec.autoscaling.as_ref().filter(|a| a.enabled) else {
                continue;
            };
            let (min, max) = (
                a.min_node_count.unwrap_or(0),
                a.max_node_count.unwrap_or(i32::MAX),
            );
            let sizes = p
                .status
                .as_ref()
                .and_then(|s| s.autoscaler.as_ref())
                .map(|s| s.target_sizes.clone())
                .unwrap_or_default();
            for (zone, size) in &sizes {
                if *size > max || *size < min {
                    found.push(format!(
                        "pool {name} zone {zone}: size {size} outside {min}..{max}"
                    ));
                }
            }
            let mut counted: BTreeMap<String, i32> = BTreeMap::new();
            for i in self.instances(&name) {
                if i.state != sluice_nodepools::InstanceState::Deleting {
                    *counted.entry(i.zone).or_default() += 1;
                }
            }
            for (zone, n) in counted {
                if n > max {
                    found.push(format!("pool {name} zone {zone}: {n} nodes, max {max}"));
                }
            }
        }
        if self.nodes.is_empty() {
            found.push("the cluster has no nodes".into());
        }
        for f in found {
            self.violation(now, f);
        }
    }
}

/// Runs `scenario` for its steps.
pub fn run(scenario: Scenario) -> Report {
    let made = scenario.start - scenario.boot_delay;
    let clock = Arc::new(ManualClock::new(made));
    let provider = Arc::new(SimProvider::new(clock.clone()));
    provider.set_boot_delay(scenario.boot_delay);
    let pdbs = scenario
        .workloads
        .iter()
        .filter_map(|w| Some(budget(w, w.min_available?)))
        .collect();
    let mut run = Run {
        clock,
        provider,
        config: Config {
            cluster_version: "1.33.2".into(),
            ..Config::default()
        },
        pools: scenario.pools,
        nodes: BTreeMap::new(),
        pods: BTreeMap::new(),
        pdbs,
        workloads: scenario.workloads,
        state: State::default(),
        options: scenario.options,
        serial: 0,
        report: Report::default(),
        upgrade: None,
    };
    run.upgrade = scenario
        .upgrade
        .and_then(|u| upgrade::Running::new(u, &run.pools));
    // The pools' first nodes, made a boot ago.
    run.reconcile_pools(made);
    let mut now = scenario.start;
    for step in 0..scenario.steps {
        let since = now.duration_since(run.clock.now());
        if since > SignedDuration::ZERO {
            run.clock.advance(since);
        }
        run.reconcile_pools(now);
        run.refresh_nodes(now);
        run.workloads(now, step);
        run.schedule(step);
        run.autoscale(now);
        run.upgrade(now);
        run.agent_drains(now);
        run.check(now);
        run.check_upgrade(now);
        run.report.nodes.push(run.nodes.len());
        now += scenario.step;
    }
    run.report.pending_at_end = run
        .pods
        .values()
        .filter(|(p, _)| bound(p).is_none())
        .count();
    run.report
}
