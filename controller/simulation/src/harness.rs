//! One node pool's upgrade run to its end in simulated time: the
//! [`SimProvider`] on a [`ManualClock`], the pool reconciler and the
//! upgrade planner as the controller's loops run them (the zones an
//! upgrade holds handed from one to the other, refused creations folded
//! into the pool's backoff), the gate from the cluster's maintenance
//! policy, the [`World`]'s pods and the [`Agents`]' drains, and the
//! user's writes of `spec.action` a scenario scripts. Each step checks the
//! [`crate::invariants`].

use sluice_model::policy::balancers::OutOfBalancers;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::cluster::Cluster;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::{BlueGreenPhase, Operation, OperationAction, OperationState};
use sluice_model::policy::eviction::DRAIN_CORDONED_ANNOTATION;
use sluice_nodepools::node_object::POOL_LABEL;
use sluice_nodepools::reconcile::{self, Config, Outcome, ZoneHold};
use sluice_nodepools::sim::{Clock, ManualClock, SimProvider};
use sluice_nodepools::{Instance, InstanceState, NodeProvider, ProviderError};
use sluice_upgrades::drain::drain_mark;
use sluice_upgrades::{interpret, Action, Gate, Inputs, PodOnNode, Quota};

use crate::agent::{Agents, Drain};
use crate::invariants::{Checks, Seen, Violation};
use crate::world::{later, NodeView, World};

/// Why a run could not be set up or went wrong outside the rules checked.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("node provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("node pool: {0}")]
    Pool(#[from] sluice_nodepools::PlanError),
    #[error("upgrade: {0}")]
    Upgrade(#[from] sluice_upgrades::UpgradeError),
    #[error("the sim provider did not answer at once")]
    Pending,
}

/// What is simulated.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub pool: NodePool,
    pub operation: Operation,
    pub cluster: Option<Cluster>,
    pub start: Timestamp,
    /// Simulated time after which the run stops, done or not.
    pub limit: SignedDuration,
    pub boot_delay: SignedDuration,
    /// Most instances the provider makes (every pool); `None`: no quota.
    pub quota: Option<u64>,
    pub workloads: Vec<crate::world::Workload>,
    /// The user's writes of `spec.action` (cancel, resume, rollback,
    /// complete), each at its time.
    pub script: Vec<(Timestamp, OperationAction)>,
    /// Steps after which the run stops regardless (a bound on work).
    pub max_steps: u64,
}

/// How a run went.
#[derive(Debug, Clone)]
pub struct Report {
    pub steps: u64,
    pub ended_at: Timestamp,
    pub operation: Operation,
    pub pool: NodePool,
    /// Instances of the pool at the end, by version.
    pub versions: BTreeMap<String, usize>,
    pub violations: Vec<Violation>,
    /// Smallest and largest instance count per zone over the run.
    pub extremes: BTreeMap<String, (usize, usize)>,
    /// When each node upgrade started (the node was marked).
    pub starts: Vec<(Timestamp, String)>,
    /// Evictions refused by a budget, and pods deleted past one.
    pub refusals: u64,
    pub forced: usize,
    /// Time spent in the controller's decisions (the pool reconciler's and
    /// the upgrade planner's `plan`, the gate), the rest being the world.
    pub decision_time: std::time::Duration,
    /// A blue-green upgrade's phases, each with the first step it was seen.
    pub phases: Vec<(Timestamp, BlueGreenPhase)>,
}

/// The run in progress.
pub struct Harness {
    clock: Arc<ManualClock>,
    provider: Arc<SimProvider>,
    scenario: Scenario,
    pool: NodePool,
    op: Operation,
    config: Config,
    /// The pool's Nodes, by name (see `refresh_nodes`).
    nodes: Vec<Node>,
    held: BTreeMap<String, ZoneHold>,
    world: World,
    agents: Agents,
    checks: Checks,
    starts: Vec<(Timestamp, String)>,
    phases: Vec<(Timestamp, BlueGreenPhase)>,
    /// The scripted writes not yet made, earliest last.
    script: Vec<(Timestamp, OperationAction)>,
    steps: u64,
    decision_time: std::time::Duration,
}

/// A sim provider call's answer (they are ready at once).
fn now_or_never<T>(
    mut f: std::pin::Pin<Box<dyn Future<Output = Result<T, ProviderError>> + Send + '_>>,
) -> Result<T, HarnessError> {
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(r) => r.map_err(Into::into),
        Poll::Pending => Err(HarnessError::Pending),
    }
}

impl Harness {
    /// The pool's nodes made on the old version at `start`, booted.
    pub fn new(scenario: Scenario) -> Result<Harness, HarnessError> {
        // The pool's nodes were made a boot ago, so they are up at start.
        let made = scenario
            .start
            .checked_sub(scenario.boot_delay)
            .unwrap_or(scenario.start);
        let clock = Arc::new(ManualClock::new(made));
        let provider = Arc::new(SimProvider::new(clock.clone()));
        provider.set_quota(scenario.quota);
        let config = Config {
            cluster_version: scenario.pool.spec.version.clone().unwrap_or_default(),
            // The controller polls its provider (it cannot watch it);
            // here every change is an event the run wakes for, so polls
            // only cost steps.
            poll_interval: SignedDuration::from_hours(6),
            // The pool stood whole before the run, however large.
            max_parallel_creations: usize::MAX,
            ..Config::default()
        };
        let mut script = scenario.script.clone();
        script.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
        let mut h = Harness {
            clock,
            provider,
            pool: scenario.pool.clone(),
            op: scenario.operation.clone(),
            world: World::new(scenario.workloads.clone()),
            checks: Checks::new(&scenario),
            scenario,
            config,
            nodes: Vec::new(),
            held: BTreeMap::new(),
            agents: Agents::default(),
            starts: Vec::new(),
            phases: Vec::new(),
            script,
            steps: 0,
            decision_time: std::time::Duration::ZERO,
        };
        h.provider.set_boot_delay(h.scenario.boot_delay);
        h.reconcile_pool(made)?;
        h.clock_to(h.scenario.start);
        h.refresh_nodes();
        h.world.step(&views(&h.nodes), h.scenario.start);
        h.world.settle(h.scenario.start);
        Ok(h)
    }

    fn name(&self) -> String {
        self.pool.metadata.name.clone().unwrap_or_default()
    }

    fn instances(&self) -> Result<Vec<Instance>, HarnessError> {
        now_or_never(self.provider.list(&self.name()))
    }

    /// The pool's Nodes as the API would show them: each running
    /// instance's registration, kept from one step to the next with what
    /// was written on it since (rebuilding a thousand Nodes a step was
    /// most of a run's time).
    fn refresh_nodes(&mut self) {
        let known: BTreeSet<String> = self
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let running = self.provider.running(&self.name(), |n| !known.contains(n));
        let names: BTreeSet<&str> = running.iter().map(|(n, _)| n.as_str()).collect();
        self.nodes.retain(|n| {
            n.metadata
                .name
                .as_deref()
                .is_some_and(|n| names.contains(n))
        });
        let before = self.nodes.len();
        self.nodes
            .extend(running.into_iter().filter_map(|(_, node)| node));
        if self.nodes.len() != before {
            self.nodes
                .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        }
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut Node> {
        let i = self
            .nodes
            .binary_search_by(|n| n.metadata.name.as_deref().unwrap_or_default().cmp(name))
            .ok()?;
        self.nodes.get_mut(i)
    }

    /// One pass of the pool reconciler at `now`; when to look again (at
    /// once when it acted: what it did changes what others see).
    fn reconcile_pool(&mut self, now: Timestamp) -> Result<Option<SignedDuration>, HarnessError> {
        let instances = self.instances()?;
        let mut config = self.config.clone();
        config.held_zones = self.held.clone();
        let timer = std::time::Instant::now();
        let plan = reconcile::plan(&self.pool, &instances, &self.nodes, &config, now)?;
        self.decision_time += timer.elapsed();
        let outcomes = self.call(&plan.actions);
        let status = reconcile::record(&plan.status, &outcomes, &self.config, now);
        self.pool.status = Some(status);
        Ok(if plan.actions.is_empty() {
            plan.requeue_after
        } else {
            Some(SignedDuration::from_secs(1))
        })
    }

    /// The provider calls, deletions first, as `execute::run` makes them.
    fn call(&self, actions: &[reconcile::Action]) -> Vec<Outcome> {
        let (deletes, creates): (Vec<_>, Vec<_>) = actions
            .iter()
            .partition(|a| matches!(a, reconcile::Action::Delete { .. }));
        deletes
            .into_iter()
            .chain(creates)
            .map(|a| {
                let result = match a {
                    reconcile::Action::Create(c) => {
                        now_or_never(self.provider.create(c.clone())).map(drop)
                    }
                    reconcile::Action::Delete { name, .. } => {
                        match now_or_never(self.provider.delete(name)) {
                            Err(HarnessError::Provider(ProviderError::NotFound(_))) => Ok(()),
                            r => r,
                        }
                    }
                };
                Outcome {
                    action: a.clone(),
                    result: result.map_err(|e| match e {
                        HarnessError::Provider(p) => p,
                        other => ProviderError::Failed(other.to_string()),
                    }),
                }
            })
            .collect()
    }

    /// The controller's write of `action`, as the loop sends it, then the
    /// node's agent's answer: it cordons a node it drains, and lifts the
    /// cordon it made when the drain is called off.
    fn write(&mut self, action: &Action, op_name: &str) {
        if let Some(patch) = interpret::pool_write(action) {
            if let Some(p) = interpret::apply(&self.pool, &patch) {
                self.pool = p;
            }
            if let Action::SetPoolTarget {
                version: Some(v), ..
            } = action
            {
                self.config.cluster_version = v.clone();
            }
        }
        let subject = action.subject().unwrap_or_default().to_owned();
        let current = self
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&subject));
        let Some(w) = interpret::node_write(action, op_name, current) else {
            return;
        };
        let Some(n) = self.node_mut(&w.node) else {
            return;
        };
        let Some(mut patched) = interpret::apply(&*n, &w.patch) else {
            return;
        };
        let draining = drain_mark(&patched).is_some();
        let ours = patched
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(DRAIN_CORDONED_ANNOTATION));
        let spec = patched.spec.get_or_insert_with(Default::default);
        let cordoned = spec.unschedulable == Some(true);
        if draining && !cordoned {
            spec.unschedulable = Some(true);
            patched
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(DRAIN_CORDONED_ANNOTATION.to_owned(), "true".to_owned());
        } else if !draining && ours {
            spec.unschedulable = None;
            if let Some(a) = patched.metadata.annotations.as_mut() {
                a.remove(DRAIN_CORDONED_ANNOTATION);
            }
        }
        *n = patched;
    }

    fn gate(&self, now: Timestamp) -> Gate {
        sluice_upgrades::gate_of(&self.op, &self.pool, self.scenario.cluster.as_ref(), now)
    }

    /// One pass of the upgrade at `now`; when to look again.
    fn upgrade(&mut self, now: Timestamp) -> Result<Option<SignedDuration>, HarnessError> {
        let instances = self.instances()?;
        let mut pods: BTreeMap<String, Vec<PodOnNode>> = BTreeMap::new();
        for (name, p) in &self.world.pods {
            if let Some(node) = &p.node {
                // The agent's drain report: the pods a budget holds back.
                let held_by = self
                    .agents
                    .held(name)
                    .then(|| format!("PodDisruptionBudget of {name} refuses its eviction"));
                pods.entry(node.clone()).or_default().push(PodOnNode {
                    name: name.clone(),
                    grace: self.world.workloads[p.workload].grace,
                    held_by,
                    // The simulated workloads carry no annotations.
                    safe_to_evict_false: false,
                });
            }
        }
        let timer = std::time::Instant::now();
        let gate = self.gate(now);
        let quota = Quota::of_pool(&self.pool, &self.config, now);
        let plan = sluice_upgrades::plan(
            &Inputs {
                operation: &self.op,
                pool: &self.pool,
                instances: &instances,
                nodes: &self.nodes,
                pods: &pods,
                quota: &quota,
                capacity: None,
                local_services: &[],
                gate: &gate,
                // Nothing here follows load balancers.
                balancers: &OutOfBalancers::untracked(),
                config: &self.config,
            },
            now,
        )?;
        self.decision_time += timer.elapsed();
        self.held = plan.held_zones.clone();
        let op_name = self.op.metadata.name.clone().unwrap_or_default();
        let calls = sluice_upgrades::provider_actions(&plan.actions, &op_name);
        let outcomes = self.call(&calls);
        if outcomes.iter().any(|o| o.result.is_err()) {
            let before = self.pool.status.clone().unwrap_or_default();
            self.pool.status = Some(reconcile::record(&before, &outcomes, &self.config, now));
        }
        for a in &plan.actions {
            if let Action::MarkUpgrading { node } = a {
                if !gate.is_open() {
                    self.checks.outside_window(now, node);
                }
                self.starts.push((now, node.clone()));
            }
            self.write(a, &op_name);
        }
        self.op.status = Some(plan.status);
        let phase = self
            .op
            .status
            .as_ref()
            .and_then(|s| s.blue_green.as_ref()?.phase);
        if let Some(p) = phase.filter(|p| self.phases.last().map(|l| l.1) != Some(*p)) {
            self.phases.push((now, p));
        }
        // The agents and the pool answer what was just written in the
        // next step, a second later, as they would within their watch.
        Ok(if plan.actions.is_empty() {
            plan.requeue_after
        } else {
            Some(SignedDuration::from_secs(1))
        })
    }

    /// Runs to the operation's end, the time limit or the step bound.
    pub fn run(mut self) -> Result<Report, HarnessError> {
        let start = self.scenario.start;
        let end = later(start, self.scenario.limit);
        let mut now = start;
        while now <= end && self.steps < self.scenario.max_steps {
            self.steps += 1;
            self.clock_to(now);
            self.user(now);
            self.refresh_nodes();
            let views = views(&self.nodes);
            // A drain whose reason no agent knows is not run.
            let draining: BTreeMap<String, Drain> = self
                .nodes
                .iter()
                .filter_map(|n| {
                    let mark = drain_mark(n)?;
                    let drain = Drain {
                        reason: mark.reason?,
                        started: mark.started?,
                    };
                    Some((n.metadata.name.clone()?, drain))
                })
                .collect();
            self.world.step(&views, now);
            self.agents.step(&mut self.world, &draining, now);
            self.world.step(&views, now);
            let pool_wake = self.reconcile_pool(now)?;
            // What the pool loop just did shows in the next step, as it
            // would in the upgrade loop's cache a moment later.
            let op_wake = self.upgrade(now)?;
            let instances = self.instances()?;
            let seen = Seen {
                at: now,
                instances: &instances,
                operation: &self.op,
                gate_open: self.gate(now).is_open(),
            };
            self.checks.step(&seen, &self.world, &self.agents);
            if self.finished() {
                break;
            }
            let boots = instances
                .iter()
                .filter(|i| i.state == InstanceState::Creating)
                .map(|i| later(i.created_at, self.scenario.boot_delay));
            let wakes = [pool_wake, op_wake]
                .into_iter()
                .flatten()
                .map(|d| later(now, d));
            let next = boots
                .chain(wakes)
                .chain(self.world.next_event(now))
                .chain(self.agents.next_event(now))
                .chain(self.gate(now).changes_at())
                .chain(self.script.last().map(|(t, _)| *t))
                .filter(|t| *t > now)
                .min();
            // With nothing due (a cancelled upgrade, a gate shut for good)
            // the run is over.
            match next {
                Some(t) => now = t.max(later(now, SignedDuration::from_secs(1))),
                None => break,
            }
        }
        self.report(now)
    }

    /// The user's scripted writes due by `now`.
    fn user(&mut self, now: Timestamp) {
        while self.script.last().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, action)) = self.script.pop() {
                self.op.spec.action = Some(action);
            }
        }
    }

    /// Final, or cancelled with nothing more scripted.
    fn finished(&self) -> bool {
        self.op
            .status
            .as_ref()
            .and_then(|s| s.status)
            .is_some_and(|s| {
                s.is_final() || (s == OperationState::Cancelled && self.script.is_empty())
            })
    }

    fn clock_to(&self, t: Timestamp) {
        let now = self.clock.now();
        if t > now {
            self.clock.advance(t.duration_since(now));
        }
    }

    fn report(self, now: Timestamp) -> Result<Report, HarnessError> {
        let mut versions: BTreeMap<String, usize> = BTreeMap::new();
        for i in self.instances()? {
            *versions.entry(i.version).or_default() += 1;
        }
        let pool_label_ok = self.nodes.iter().all(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POOL_LABEL))
                .is_some()
        });
        let mut violations = self.checks.violations;
        if !pool_label_ok {
            violations.push(Violation {
                at: now,
                what: "a node without its pool label".into(),
            });
        }
        Ok(Report {
            steps: self.steps,
            ended_at: now,
            operation: self.op,
            pool: self.pool,
            versions,
            violations,
            extremes: self.checks.extremes,
            starts: self.starts,
            refusals: self.agents.refusals,
            forced: self.agents.forced.len(),
            decision_time: self.decision_time,
            phases: self.phases,
        })
    }
}

fn views(nodes: &[Node]) -> Vec<NodeView> {
    nodes
        .iter()
        .map(|n| NodeView {
            name: n.metadata.name.clone().unwrap_or_default(),
            schedulable: reconcile::is_node_ready(n)
                && !n
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false),
        })
        .collect()
}
