//! A tiny world the planner is driven through: a provider whose instances
//! boot after a delay and register a Ready Node, agents that cordon on a
//! drain and whose pods leave after a delay (or never, as behind a
//! refusing PodDisruptionBudget), deletions that take a while, a quota
//! that refuses creations, a maintenance gate, and the pool reconciler
//! running beside the upgrade with the zones it holds. Time moves in
//! steps; randomness comes from a seed, so a failing case replays.

#![allow(dead_code)]

use sluice_model::policy::balancers::OutOfBalancers;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Quantity;
use sluice_model::node_pool::{NodeConfig, NodePool, NodePoolSpec, UpgradeSettings};
use sluice_model::operation::{Operation, OperationSpec, OperationType};
use sluice_nodepools::node_object::node_object;
use sluice_nodepools::reconcile::{self, Config};
use sluice_nodepools::{CreateNode, Instance, InstanceState, NodeSpec, ProviderError};
use sluice_upgrades::drain::DRAIN_ANNOTATION;
use sluice_upgrades::{
    interpret, plan, Action, Gate, Inputs, LocalService, PodOnNode, Quota, UpgradePlan,
    CONFIG_LABEL, UPGRADING_ANNOTATION,
};

pub const OP: &str = "operation-1";
pub const POOL: &str = "pool-a";
pub const OLD: &str = "1.33.2";
pub const NEW: &str = "1.34.1";

/// A small deterministic random source (xorshift).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// How unkind the world is.
#[derive(Debug, Clone, Default)]
pub struct Weather {
    /// Longest boot, drain and deletion, in steps.
    pub max_boot_steps: u64,
    pub max_drain_steps: u64,
    /// % of drains whose pods never leave on their own (forced after the caps).
    pub stuck_drain_percent: u64,
    /// % of surge creations refused for quota.
    pub quota_refusal_percent: u64,
    /// % of steps that flip the gate.
    pub gate_flip_percent: u64,
    /// % of steps that flip cancel / resume.
    pub cancel_flip_percent: u64,
    /// % of passes cut short as by a kill -9 (a prefix of the actions runs,
    /// the status is not written).
    pub kill_percent: u64,
    /// % chance, once, of asking for a rollback.
    pub rollback_percent: u64,
}

#[derive(Debug, Clone)]
struct Sim {
    instance: Instance,
    spec: NodeSpec,
    boots_at: Timestamp,
    gone_at: Option<Timestamp>,
}

pub struct World {
    pub now: Timestamp,
    pub step: SignedDuration,
    pub pool: NodePool,
    pub op: Operation,
    sims: BTreeMap<String, Sim>,
    pub nodes: BTreeMap<String, Node>,
    /// Per node, its pods and when they leave (`None`: never by themselves).
    pub pods: BTreeMap<String, (Vec<PodOnNode>, Option<Timestamp>)>,
    pub quota: Quota,
    pub gate: Gate,
    pub local_services: Vec<LocalService>,
    pub config: Config,
    pub rng: Rng,
    pub weather: Weather,
    /// Every instance a delete was asked for, by name and creation time
    /// (a name is free again once its instance is gone).
    pub deleted: BTreeSet<(String, Timestamp)>,
    /// Largest number of instances per zone ever seen, and smallest.
    pub extremes: BTreeMap<String, (usize, usize)>,
    pub max_disrupted: usize,
    /// Fewest serving nodes (Ready, schedulable, not draining) per zone.
    pub min_serving: BTreeMap<String, usize>,
    pub max_parallel_drains: usize,
    pub last_plan: Option<UpgradePlan>,
    /// What the provider says it can still make (`None`: no limit known).
    pub capacity: Option<usize>,
}

pub fn t0() -> Timestamp {
    "2026-11-23T02:00:00Z".parse().unwrap()
}

pub fn config(cpu: &str) -> NodeConfig {
    let mut c = NodeConfig::default();
    c.capacity.cpu = Quantity(cpu.into());
    c.capacity.memory = Quantity("16Gi".into());
    c
}

impl World {
    /// `size` nodes in each of `zones` zones (`zone-0`, …), all on the old
    /// version, and an upgrade to `NEW` with `(max_surge, max_unavailable)`.
    pub fn new(
        zones: usize,
        size: usize,
        max_surge: i32,
        max_unavailable: i32,
        seed: u64,
    ) -> World {
        let zones: Vec<String> = (0..zones).map(|i| format!("zone-{i}")).collect();
        let pool = NodePool::new(
            POOL,
            NodePoolSpec {
                locations: zones.clone(),
                initial_node_count: Some(i32::try_from(size).unwrap()),
                config: config("4"),
                version: Some(OLD.into()),
                ..Default::default()
            },
        );
        let mut spec = OperationSpec::new(
            OperationType::UpgradeNodes,
            format!("{}{POOL}", OperationSpec::NODE_POOL_LINK),
        );
        spec.node_version = Some(NEW.into());
        spec.upgrade_settings = Some(UpgradeSettings {
            max_surge: Some(max_surge),
            max_unavailable: Some(max_unavailable),
            ..Default::default()
        });
        let op = Operation::new(OP, spec);
        let mut w = World {
            now: t0(),
            step: SignedDuration::from_secs(30),
            pool,
            op,
            sims: BTreeMap::new(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            quota: Quota::Available,
            gate: Gate::OPEN,
            local_services: Vec::new(),
            config: Config {
                cluster_version: OLD.into(),
                ..Config::default()
            },
            rng: Rng::new(seed),
            weather: Weather::default(),
            deleted: BTreeSet::new(),
            extremes: BTreeMap::new(),
            max_disrupted: 0,
            min_serving: BTreeMap::new(),
            max_parallel_drains: 0,
            last_plan: None,
            capacity: None,
        };
        let per_zone = w.pool.spec.initial_node_count.unwrap_or(0) as usize;
        let old_spec = NodeSpec::of_pool(&w.pool).unwrap();
        for zone in &zones {
            for name in sluice_nodepools::naming::fresh_names(
                POOL,
                zone,
                0,
                per_zone,
                &mut w.sims.keys().cloned().collect(),
            ) {
                let instance = Instance {
                    name: name.clone(),
                    pool: POOL.into(),
                    zone: zone.clone(),
                    version: OLD.into(),
                    state: InstanceState::Running,
                    created_at: t0() - SignedDuration::from_secs(3600),
                };
                w.nodes
                    .insert(name.clone(), node_object(&instance, &old_spec));
                w.sims.insert(
                    name,
                    Sim {
                        instance,
                        spec: old_spec.clone(),
                        boots_at: t0(),
                        gone_at: None,
                    },
                );
            }
        }
        w.record_extremes();
        w
    }

    pub fn zones(&self) -> Vec<String> {
        self.pool.spec.locations.clone()
    }

    pub fn target(&self) -> usize {
        self.pool.spec.initial_node_count.unwrap_or(0) as usize
    }

    pub fn instances(&self) -> Vec<Instance> {
        self.sims.values().map(|s| s.instance.clone()).collect()
    }

    pub fn node_list(&self) -> Vec<Node> {
        self.nodes.values().cloned().collect()
    }

    pub fn pods(&self) -> BTreeMap<String, Vec<PodOnNode>> {
        self.pods
            .iter()
            .map(|(n, (p, _))| (n.clone(), p.clone()))
            .collect()
    }

    pub fn annotation(&self, node: &str, key: &str) -> Option<&String> {
        self.nodes
            .get(node)?
            .metadata
            .annotations
            .as_ref()?
            .get(key)
    }

    pub fn marked(&self) -> BTreeSet<String> {
        self.nodes
            .keys()
            .filter(|n| self.annotation(n, UPGRADING_ANNOTATION).is_some())
            .cloned()
            .collect()
    }

    /// One pass of the planner over the world as it is.
    pub fn plan(&self) -> Result<UpgradePlan, sluice_upgrades::UpgradeError> {
        let instances = self.instances();
        let nodes = self.node_list();
        let pods = self.pods();
        // A quota set by the test wins over the one the pool's status says.
        let quota = match &self.quota {
            Quota::Available => Quota::of_pool(&self.pool, &self.config, self.now),
            set => set.clone(),
        };
        plan(
            &Inputs {
                operation: &self.op,
                pool: &self.pool,
                instances: &instances,
                nodes: &nodes,
                pods: &pods,
                quota: &quota,
                capacity: self.capacity,
                local_services: &self.local_services,
                gate: &self.gate,
                // Nothing here follows load balancers.
                balancers: &OutOfBalancers::untracked(),
                config: &self.config,
            },
            self.now,
        )
    }

    /// Run `actions` (deletions first, as the executor does), then the
    /// status unless `write_status` is false.
    pub fn apply(&mut self, p: &UpgradePlan, actions: &[Action], write_status: bool) {
        let (deletes, rest): (Vec<&Action>, Vec<&Action>) = actions
            .iter()
            .partition(|a| matches!(a, Action::DeleteInstance { .. } | Action::Recreate { .. }));
        for a in deletes.into_iter().chain(rest) {
            self.act(a);
            self.record_extremes();
        }
        if write_status {
            self.op.status = Some(p.status.clone());
        }
    }

    fn act(&mut self, a: &Action) {
        // The controller's writes, as the loop sends them.
        if let Some(w) = interpret::node_write(a, OP, self.nodes.get(a.subject().unwrap_or(""))) {
            if let Some(n) = self.nodes.get(&w.node) {
                if let Some(patched) = interpret::apply(n, &w.patch) {
                    self.nodes.insert(w.node.clone(), patched);
                }
            }
        }
        if let Some(patch) = interpret::pool_write(a) {
            if let Some(p) = interpret::apply(&self.pool, &patch) {
                self.pool = p;
            }
        }
        match a {
            Action::CreateNode(c) => {
                // As the loop does: the outcome is folded into the pool's
                // status, whose backoff the next pass reads as the quota.
                let result = if self.rng.chance(self.weather.quota_refusal_percent) {
                    Err(ProviderError::QuotaExhausted {
                        resource: "instances".into(),
                        limit: 10,
                    })
                } else {
                    self.create(c);
                    Ok(())
                };
                let outcome = reconcile::Outcome {
                    action: reconcile::Action::Create(c.clone()),
                    result,
                };
                let status = self.pool.status.clone().unwrap_or_default();
                self.pool.status = Some(reconcile::record(
                    &status,
                    &[outcome],
                    &self.config,
                    self.now,
                ));
            }
            Action::Recreate { old, new } => {
                self.delete(old);
                // The deletion frees the capacity the creation uses (U4).
                self.create(new);
            }
            Action::DeleteInstance { name } => self.delete(name),
            // The node's agent: it cordons the node it drains, and its pods
            // leave after a while (or never, behind a budget).
            Action::Drain { node, started, .. } => {
                if !self.pods.contains_key(node) {
                    let count = 1 + self.rng.below(3) as usize;
                    let stuck = self.rng.chance(self.weather.stuck_drain_percent);
                    let leave = (!stuck).then(|| {
                        let steps = self.rng.below(self.weather.max_drain_steps + 1) as i32;
                        *started + self.step * steps
                    });
                    let pods = (0..count)
                        .map(|i| PodOnNode {
                            name: format!("default/{node}-{i}"),
                            grace: SignedDuration::from_secs(30),
                            held_by: stuck.then(|| {
                                "PodDisruptionBudget default/web refuses its eviction".to_owned()
                            }),
                            safe_to_evict_false: false,
                        })
                        .collect();
                    self.pods.insert(node.clone(), (pods, leave));
                }
                if let Some(n) = self.nodes.get_mut(node) {
                    n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
                }
            }
            // The agent lifts the cordon it made.
            Action::ReleaseDrain { node } => {
                self.pods.remove(node);
                if let Some(n) = self.nodes.get_mut(node) {
                    n.spec.get_or_insert_with(Default::default).unschedulable = None;
                }
            }
            Action::MarkUpgrading { .. }
            | Action::Unmark { .. }
            | Action::Cordon { .. }
            | Action::Uncordon { .. }
            | Action::ApplyInPlace(_)
            | Action::SetPoolTarget { .. } => {}
        }
    }

    fn create(&mut self, c: &CreateNode) {
        assert!(
            !self.sims.contains_key(&c.name) && !self.nodes.contains_key(&c.name),
            "a name in use was handed out again: {}",
            c.name
        );
        let steps = 1 + self.rng.below(self.weather.max_boot_steps.max(1)) as i32;
        self.sims.insert(
            c.name.clone(),
            Sim {
                instance: Instance {
                    name: c.name.clone(),
                    pool: c.pool.clone(),
                    zone: c.zone.clone(),
                    version: c.version.clone(),
                    state: InstanceState::Creating,
                    created_at: self.now,
                },
                spec: c.config.clone(),
                boots_at: self.now + self.step * steps,
                gone_at: None,
            },
        );
    }

    fn delete(&mut self, name: &str) {
        // NotFound (already gone) counts as done.
        if let Some(s) = self.sims.get_mut(name) {
            assert!(
                self.deleted
                    .insert((name.to_owned(), s.instance.created_at)),
                "instance {name} deleted twice"
            );
            assert_ne!(
                s.instance.state,
                InstanceState::Deleting,
                "{name} is being deleted already"
            );
            s.instance.state = InstanceState::Deleting;
            let steps = self.rng.below(3) as i32;
            s.gone_at = Some(self.now + self.step * steps);
        }
    }

    fn annotate(&mut self, node: &str, key: &str, value: Option<String>) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let a = n.metadata.annotations.get_or_insert_with(Default::default);
        match value {
            Some(v) => {
                a.insert(key.into(), v);
            }
            None => {
                a.remove(key);
            }
        }
    }

    /// An instance vanishes (its creation was refused after all, or it
    /// was lost), with its Node.
    pub fn lose(&mut self, name: &str) {
        self.sims.remove(name);
        self.nodes.remove(name);
        self.pods.remove(name);
    }

    /// Move time on by one step: boots, drains, deletions progress.
    pub fn advance(&mut self) {
        self.now += self.step;
        let now = self.now;
        let mut gone = Vec::new();
        for (name, s) in &mut self.sims {
            if s.gone_at.is_some_and(|t| now >= t) {
                gone.push(name.clone());
                continue;
            }
            if s.instance.state == InstanceState::Creating && now >= s.boots_at {
                s.instance.state = InstanceState::Running;
                self.nodes
                    .insert(name.clone(), node_object(&s.instance, &s.spec));
            }
        }
        for name in gone {
            self.sims.remove(&name);
            self.nodes.remove(&name);
            self.pods.remove(&name);
        }
        for (pods, leave) in self.pods.values_mut() {
            if leave.is_some_and(|t| now >= t) {
                pods.clear();
            }
        }
        self.record_extremes();
    }

    /// The next instant something in the world changes by itself: a boot,
    /// an instance gone, a drained node's pods leaving (`None`: nothing is
    /// due). Lets a test step over a long soak in one go.
    pub fn next_change(&self) -> Option<Timestamp> {
        let sims = self.sims.values().flat_map(|s| {
            let booting = (s.instance.state == InstanceState::Creating).then_some(s.boots_at);
            [booting, s.gone_at]
        });
        let pods = self
            .pods
            .values()
            .filter(|(p, _)| !p.is_empty())
            .map(|(_, leave)| *leave);
        sims.chain(pods).flatten().filter(|t| *t > self.now).min()
    }

    /// Counted instances per zone (not being deleted).
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut c: BTreeMap<String, usize> = self.zones().into_iter().map(|z| (z, 0)).collect();
        for s in self.sims.values() {
            if s.instance.state != InstanceState::Deleting {
                *c.entry(s.instance.zone.clone()).or_default() += 1;
            }
        }
        c
    }

    /// Serving nodes per zone: Ready, schedulable, not draining.
    pub fn serving(&self) -> BTreeMap<String, usize> {
        let mut c: BTreeMap<String, usize> = self.zones().into_iter().map(|z| (z, 0)).collect();
        for s in self.sims.values() {
            let Some(n) = self.nodes.get(&s.instance.name) else {
                continue;
            };
            let cordoned = n
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            let draining = self
                .annotation(&s.instance.name, DRAIN_ANNOTATION)
                .is_some();
            if s.instance.state != InstanceState::Deleting && !cordoned && !draining {
                *c.entry(s.instance.zone.clone()).or_default() += 1;
            }
        }
        c
    }

    /// Nodes being replaced that are draining or drained, still there.
    pub fn disrupted_old(&self, old_version: &str) -> usize {
        self.sims
            .values()
            .filter(|s| {
                s.instance.state != InstanceState::Deleting
                    && s.instance.version == old_version
                    && self
                        .annotation(&s.instance.name, DRAIN_ANNOTATION)
                        .is_some()
            })
            .count()
    }

    fn record_extremes(&mut self) {
        for (zone, n) in self.counts() {
            let e = self.extremes.entry(zone).or_insert((n, n));
            e.0 = e.0.max(n);
            e.1 = e.1.min(n);
        }
        let draining = self
            .nodes
            .keys()
            .filter(|n| self.annotation(n, DRAIN_ANNOTATION).is_some())
            .count();
        self.max_parallel_drains = self.max_parallel_drains.max(draining);
    }

    /// The pool reconciler's pass, with the zones the upgrade holds.
    pub fn reconcile(&mut self, held: &BTreeMap<String, reconcile::ZoneHold>) {
        let config = Config {
            held_zones: held.clone(),
            ..self.config.clone()
        };
        let instances = self.instances();
        let nodes = self.node_list();
        let p = reconcile::plan(&self.pool, &instances, &nodes, &config, self.now).unwrap();
        for a in &p.actions {
            match a {
                reconcile::Action::Create(c) => self.create(c),
                reconcile::Action::Delete { name, .. } => self.delete(name),
            }
        }
        self.pool.status = Some(p.status);
        self.record_extremes();
    }

    /// Every node's version and config, the pool's included.
    pub fn versions(&self) -> BTreeSet<String> {
        self.sims
            .values()
            .map(|s| s.instance.version.clone())
            .collect()
    }

    /// Every node is made like the pool's spec says: its version, and
    /// its config label (or none, for the pool's first config).
    pub fn assert_like_the_pool(&self, first: &NodeConfig) {
        let pool_spec = NodeSpec::of_pool(&self.pool).unwrap();
        let want = pool_spec.fingerprint();
        let version = self.pool.spec.version.clone().unwrap();
        for (name, s) in &self.sims {
            assert_eq!(s.instance.version, version, "{name}");
            let node = &self.nodes[name];
            match node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONFIG_LABEL))
            {
                Some(label) => assert_eq!(label, &want, "{name}"),
                None => assert_eq!(&self.pool.spec.config, first, "{name}: no config label"),
            }
        }
    }
}

impl World {
    /// One pass: plan, check the rules every pass keeps, run the actions
    /// (with `chaos`, maybe only some of them and no status, as after a
    /// kill -9), let the pool reconciler run, move time on.
    pub fn pass(&mut self, chaos: bool) -> Option<UpgradePlan> {
        let marked_before = self.marked();
        // Blue-green runs to its end past the window (B7): only surge
        // upgrades stop starting nodes while the gate is closed.
        let gate_closed = !self.gate.is_open() && self.is_surge();
        let p = match self.plan() {
            Ok(p) => p,
            Err(sluice_upgrades::UpgradeError::RollbackAfterCompletion { .. }) => {
                // spec: U6 — no rollback after completion; the user gives up on it.
                self.op.spec.action = None;
                self.advance();
                return None;
            }
            Err(e) => panic!("plan failed: {e}"),
        };
        let present: BTreeMap<&str, &InstanceState> = self
            .sims
            .iter()
            .map(|(n, s)| (n.as_str(), &s.instance.state))
            .collect();
        for a in &p.actions {
            match a {
                Action::MarkUpgrading { node } => {
                    // spec: M3, M8 — no node upgrade starts while the gate is closed.
                    assert!(!gate_closed, "{node} marked while the gate is closed");
                }
                Action::Drain { node, .. } if gate_closed => {
                    assert!(
                        marked_before.contains(node),
                        "{node} drained while the gate is closed, not mid-upgrade"
                    );
                }
                Action::DeleteInstance { name } | Action::Recreate { old: name, .. } => {
                    if gate_closed {
                        assert!(marked_before.contains(name), "{name} deleted while closed");
                    }
                    let state = present.get(name.as_str());
                    assert!(
                        state.is_some_and(|s| **s != InstanceState::Deleting),
                        "{name}: deleted though {state:?}"
                    );
                    if self.is_surge() {
                        assert_eq!(
                            state,
                            Some(&&InstanceState::Running),
                            "{name}: deleted though not a running instance"
                        );
                    }
                    let created = self.sims.get(name.as_str()).map(|s| s.instance.created_at);
                    assert!(
                        created.is_some_and(|c| !self.deleted.contains(&(name.clone(), c))),
                        "{name} deleted twice"
                    );
                }
                _ => {}
            }
        }
        let cut = chaos && self.rng.chance(self.weather.kill_percent);
        let n = if cut {
            self.rng.below(p.actions.len() as u64 + 1) as usize
        } else {
            p.actions.len()
        };
        let actions = p.actions[..n].to_vec();
        self.apply(&p, &actions, !cut);
        self.check_after(&p, cut);
        self.reconcile(&p.held_zones);
        self.advance();
        self.last_plan = Some(p.clone());
        Some(p)
    }

    /// Rules that hold between passes.
    fn check_after(&mut self, p: &UpgradePlan, cut: bool) {
        // spec: U1 — one zone at a time.
        let zones: BTreeSet<String> = self
            .marked()
            .iter()
            .filter_map(|n| self.sims.get(n))
            .filter(|s| s.instance.state != InstanceState::Deleting)
            .map(|s| s.instance.zone.clone())
            .collect();
        assert!(
            zones.len() <= 1,
            "nodes mid-upgrade in several zones: {zones:?}"
        );
        let disrupted = self.disrupted_old(OLD).max(self.disrupted_old(NEW));
        self.max_disrupted = self.max_disrupted.max(disrupted);
        // spec: U1, U2 — serving nodes never drop below T − maxUnavailable
        // on the upgrade's account (with U = 0 an old node is drained only
        // once its surge node is Ready).
        for (zone, serving) in self.serving() {
            let e = self.min_serving.entry(zone).or_insert(serving);
            *e = (*e).min(serving);
        }
        // A cancelled blue-green upgrade keeps its pool as it is (B6).
        if !cut
            && self.is_surge()
            && p.status.status == Some(sluice_model::operation::OperationState::Cancelled)
        {
            self.assert_clean("after a cancel");
        }
    }

    /// No node left marked, draining or cordoned (spec: U6).
    pub fn assert_clean(&self, when: &str) {
        for (name, n) in &self.nodes {
            let a = n.metadata.annotations.clone().unwrap_or_default();
            assert!(
                !a.contains_key(UPGRADING_ANNOTATION),
                "{when}: {name} still marked"
            );
            assert!(
                !a.contains_key(DRAIN_ANNOTATION),
                "{when}: {name} still draining"
            );
            let cordoned = n
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            assert!(!cordoned, "{when}: {name} still cordoned");
        }
    }

    /// The operation upgrades by surge (the default).
    pub fn is_surge(&self) -> bool {
        self.op
            .spec
            .upgrade_settings
            .as_ref()
            .is_none_or(|u| u.strategy() == sluice_model::node_pool::UpgradeStrategy::Surge)
    }

    /// A blue-green upgrade's phase, as its last status says.
    pub fn phase(&self) -> Option<sluice_model::operation::BlueGreenPhase> {
        self.op
            .status
            .as_ref()
            .and_then(|s| s.blue_green.as_ref())
            .and_then(|b| b.phase)
    }

    /// Upgrade blue-green with `settings`.
    pub fn blue_green(&mut self, settings: sluice_model::node_pool::BlueGreenSettings) {
        self.op.spec.upgrade_settings = Some(UpgradeSettings {
            strategy: Some(sluice_model::node_pool::UpgradeStrategy::BlueGreen),
            blue_green_settings: Some(settings),
            ..Default::default()
        });
    }

    /// Counted instances (not being deleted) on `version`.
    pub fn on_version(&self, version: &str) -> usize {
        self.sims
            .values()
            .filter(|s| {
                s.instance.state != InstanceState::Deleting && s.instance.version == version
            })
            .count()
    }

    pub fn state(&self) -> Option<sluice_model::operation::OperationState> {
        self.op.status.as_ref().and_then(|s| s.status)
    }

    /// Passes without chaos until the operation is final or `limit` passes.
    pub fn run_calm(&mut self, limit: usize) {
        for _ in 0..limit {
            if self.state().is_some_and(|s| s.is_final()) {
                return;
            }
            self.pass(false);
        }
    }
}
