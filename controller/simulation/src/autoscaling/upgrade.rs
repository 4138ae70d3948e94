//! A node upgrade run beside the autoscaler: the real planner
//! (`sluice_upgrades::plan`) each step, its writes through the one
//! interpreter (`sluice_upgrades::interpret`) and the provider, the
//! pool's `updateInfo` published for the autoscaler, the zones it holds
//! given to the pool's reconciler; and each drained node's agent evicting
//! its pods as the reason says (budgets honoured for an hour, then the
//! pods removed; `safe-to-evict: "false"` pods left until 7 days after
//! the node's cordon under an autoscaled blue-green drain).

use sluice_model::policy::balancers::OutOfBalancers;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::operation::{BlueGreenPhase, Operation, OperationState};
use sluice_model::policy::eviction::{EvictionReason, EXTENDED_RUN, SAFE_TO_EVICT};
use sluice_nodepools::reconcile::{self, ZoneHold};
use sluice_nodepools::{InstanceState, NodeProvider, ProviderError};
use sluice_upgrades::drain::{drain_mark, DRAIN_ANNOTATION};
use sluice_upgrades::{interpret, Gate, Inputs, PodOnNode, Quota, CORDONED_AT_ANNOTATION};

use super::{bound, now_or_never, Run};

/// An upgrade to run: `operation` on its pool from `at`.
#[derive(Debug, Clone)]
pub struct Upgrade {
    pub operation: Operation,
    pub at: Timestamp,
}

/// The upgrade as it runs.
#[derive(Debug, Clone)]
pub(super) struct Running {
    pub op: Operation,
    pub at: Timestamp,
    pub pool: String,
    /// The zones the last plan holds.
    pub held: BTreeMap<String, ZoneHold>,
    /// The pool's old version, and its nodes on it when the upgrade began.
    pub old: String,
    pub blue: Option<usize>,
}

impl Running {
    pub fn new(u: Upgrade, pools: &[sluice_model::node_pool::NodePool]) -> Option<Running> {
        let pool = u.operation.spec.node_pool()?.to_owned();
        let old = pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))?
            .spec
            .version
            .clone()?;
        Some(Running {
            op: u.operation,
            at: u.at,
            pool,
            held: BTreeMap::new(),
            old,
            blue: None,
        })
    }

    fn done(&self) -> bool {
        self.op
            .status
            .as_ref()
            .and_then(|s| s.status)
            .is_some_and(|s| s.is_final())
    }
}

/// How the upgrade went, for the report.
#[derive(Debug, Clone, Default)]
pub struct UpgradeReport {
    /// Each phase and when it was first seen.
    pub phases: Vec<(Timestamp, BlueGreenPhase)>,
    pub state: Option<OperationState>,
    pub ended_at: Option<Timestamp>,
    /// The pool's nodes per version at the end.
    pub versions: BTreeMap<String, usize>,
    /// The most nodes on the new version in any zone at once.
    pub most_green: usize,
    /// Pods the agents' drains removed past a refusing budget.
    pub forced: u64,
    /// The latest a `safe-to-evict: "false"` pod left a drained node,
    /// after its node's cordon.
    pub pinned_kept: Option<SignedDuration>,
}

fn annotation<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn time_of(n: &Node, key: &str) -> Option<Timestamp> {
    annotation(n, key)?.parse().ok()
}

pub(super) fn pinned(p: &k8s_openapi::api::core::v1::Pod) -> bool {
    p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get(SAFE_TO_EVICT).is_some_and(|v| v == "false"))
}

impl Run {
    /// The reconciler's settings for `pool`: the upgrade's held zones
    /// apply to its pool only.
    pub(super) fn config_for(&self, pool: &str) -> reconcile::Config {
        let mut config = self.config.clone();
        if let Some(u) = self
            .upgrade
            .as_ref()
            .filter(|u| u.pool == pool && !u.done())
        {
            config.held_zones = u.held.clone();
        }
        config
    }

    /// One planner pass at `now`, its writes made.
    pub(super) fn upgrade(&mut self, now: Timestamp) {
        let Some(u) = self.upgrade.as_ref().filter(|u| now >= u.at && !u.done()) else {
            return;
        };
        let (op, pool_name) = (u.op.clone(), u.pool.clone());
        let Some(i) = self
            .pools
            .iter()
            .position(|p| p.metadata.name.as_deref() == Some(pool_name.as_str()))
        else {
            return;
        };
        let instances = self.instances(&pool_name);
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        let mut pods: BTreeMap<String, Vec<PodOnNode>> = BTreeMap::new();
        for (key, (p, _)) in &self.pods {
            if let Some(n) = bound(p) {
                pods.entry(n.to_owned()).or_default().push(PodOnNode {
                    name: key.clone(),
                    grace: SignedDuration::from_secs(30),
                    held_by: None,
                    safe_to_evict_false: pinned(p),
                });
            }
        }
        let config = self.config_for(&pool_name);
        let quota = Quota::of_pool(&self.pools[i], &config, now);
        let capacity = now_or_never(self.provider.capacity())
            .ok()
            .flatten()
            .and_then(|c| usize::try_from(c).ok());
        let plan = match sluice_upgrades::plan(
            &Inputs {
                operation: &op,
                pool: &self.pools[i],
                instances: &instances,
                nodes: &nodes,
                pods: &pods,
                quota: &quota,
                capacity,
                local_services: &[],
                gate: &Gate::OPEN,
                // Nothing here follows load balancers.
                balancers: &OutOfBalancers::untracked(),
                config: &config,
            },
            now,
        ) {
            Ok(p) => p,
            Err(e) => {
                self.violation(now, format!("the planner failed: {e}"));
                return;
            }
        };
        let op_name = op.metadata.name.clone().unwrap_or_default();
        for a in &plan.actions {
            if let Some(patch) = interpret::pool_write(a) {
                if let Some(p) = interpret::apply(&self.pools[i], &patch) {
                    self.pools[i] = p;
                }
            }
            let subject = a.subject().unwrap_or_default().to_owned();
            let current = self.nodes.get(&subject).cloned();
            if let Some(w) = interpret::node_write(a, &op_name, current.as_ref()) {
                if let Some(patched) = current.and_then(|n| interpret::apply(&n, &w.patch)) {
                    self.nodes.insert(w.node, patched);
                }
            }
        }
        for a in sluice_upgrades::provider_actions(&plan.actions, &op_name) {
            let result = match &a {
                reconcile::Action::Create(c) => {
                    now_or_never(self.provider.create(c.clone())).map(drop)
                }
                reconcile::Action::Delete { name, .. } => {
                    match now_or_never(self.provider.delete(name)) {
                        Err(ProviderError::NotFound(_)) => Ok(()),
                        r => r,
                    }
                }
            };
            if let Err(e) = result {
                self.violation(now, format!("the provider refused {a:?}: {e}"));
            }
        }
        let status = self.pools[i].status.get_or_insert_with(Default::default);
        status
            .update_info
            .get_or_insert_with(Default::default)
            .blue_green_info = plan.blue_green_info.clone();
        let phase = plan.status.blue_green.as_ref().and_then(|b| b.phase);
        let state = plan.status.status;
        if let Some(u) = self.upgrade.as_mut() {
            u.op.status = Some(plan.status);
            u.held = plan.held_zones;
        }
        let r = &mut self.report.upgrade;
        if let Some(p) = phase.filter(|p| r.phases.last().map(|(_, q)| q) != Some(p)) {
            r.phases.push((now, p));
        }
        r.state = state;
        if state.is_some_and(|s| s.is_final()) {
            r.ended_at = Some(now);
        }
    }

    /// Each drained node's agent: its pods evicted through the budgets
    /// (for an hour, then removed), pinned ones left as A3 says.
    pub(super) fn agent_drains(&mut self, now: Timestamp) {
        let draining: Vec<(String, EvictionReason, Timestamp, Option<Timestamp>)> = self
            .nodes
            .iter()
            .filter_map(|(name, n)| {
                let mark = drain_mark(n)?;
                Some((
                    name.clone(),
                    mark.reason?,
                    mark.started?,
                    time_of(n, CORDONED_AT_ANNOTATION),
                ))
            })
            .collect();
        for (node, reason, started, cordoned) in draining {
            let here: Vec<(String, bool)> = self
                .pods
                .iter()
                .filter(|(_, (p, _))| bound(p) == Some(node.as_str()))
                .map(|(k, (p, _))| (k.clone(), pinned(p)))
                .collect();
            for (key, is_pinned) in here {
                let cordoned = cordoned.unwrap_or(started);
                let protected_until = cordoned
                    .checked_add(SignedDuration::try_from(EXTENDED_RUN).unwrap_or_default())
                    .unwrap_or(Timestamp::MAX);
                if is_pinned && reason == EvictionReason::AutoscaledBlueGreen {
                    if now < protected_until {
                        continue;
                    }
                    let kept = now.duration_since(cordoned);
                    let r = &mut self.report.upgrade;
                    r.pinned_kept = Some(r.pinned_kept.map_or(kept, |k| k.max(kept)));
                }
                let before = self.report.evictions;
                self.evict(&key, now);
                let refused = self.report.evictions == before;
                let budgets_since = if is_pinned {
                    protected_until.max(started)
                } else {
                    started
                };
                if refused && now >= budgets_since + SignedDuration::from_hours(1) {
                    self.pods.remove(&key);
                    self.report.upgrade.forced += 1;
                }
            }
        }
    }

    /// A node the upgrade removed with pods on it: only once their drain
    /// spent its caps, and never with a pinned pod still protected.
    pub(super) fn check_upgrade_removal(
        &mut self,
        node: &Node,
        pods: &[(String, bool)],
        now: Timestamp,
    ) {
        if pods.is_empty()
            || self
                .report
                .removed
                .contains(node.metadata.name.as_deref().unwrap_or(""))
        {
            return;
        }
        // A node with a run limit ends by itself (its provider's doing,
        // not the planner's).
        let limited = node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(sluice_nodepools::MAX_RUN_DURATION_LABEL));
        if limited && annotation(node, DRAIN_ANNOTATION).is_none() {
            return;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(started) = time_of(node, sluice_upgrades::drain::DRAIN_STARTED_ANNOTATION) else {
            self.violation(now, format!("node {name} removed with pods, never drained"));
            return;
        };
        if now < started + SignedDuration::from_hours(1) {
            self.violation(
                now,
                format!(
                    "node {name} removed with {} pod(s) an hour into its drain",
                    pods.len()
                ),
            );
        }
        let cordoned = time_of(node, CORDONED_AT_ANNOTATION).unwrap_or(started);
        let protected = cordoned + SignedDuration::try_from(EXTENDED_RUN).unwrap_or_default();
        if annotation(node, DRAIN_ANNOTATION).is_some() && now < protected {
            for (k, _) in pods.iter().filter(|(_, pinned)| *pinned) {
                self.violation(now, format!("node {name} removed with {k} still protected"));
            }
        }
    }

    /// Blue never grows; green stays within the pool's per-zone maximum.
    pub(super) fn check_upgrade(&mut self, now: Timestamp) {
        let Some(u) = self.upgrade.as_ref().filter(|u| now >= u.at) else {
            return;
        };
        let (pool, old) = (u.pool.clone(), u.old.clone());
        let before = u.blue;
        let max = self
            .pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))
            .and_then(|p| p.spec.autoscaling.as_ref())
            .and_then(|a| a.max_node_count)
            .and_then(|m| usize::try_from(m).ok())
            .unwrap_or(usize::MAX);
        let live: Vec<_> = self
            .instances(&pool)
            .into_iter()
            .filter(|i| i.state != InstanceState::Deleting)
            .collect();
        let blue = live.iter().filter(|i| i.version == old).count();
        let mut green: BTreeMap<&str, usize> = BTreeMap::new();
        for i in live.iter().filter(|i| i.version != old) {
            *green.entry(i.zone.as_str()).or_default() += 1;
        }
        let most = green.values().copied().max().unwrap_or(0);
        let mut found = Vec::new();
        if before.is_some_and(|b| blue > b) {
            found.push(format!("blue grew from {before:?} to {blue}"));
        }
        for (zone, n) in &green {
            if *n > max {
                found.push(format!("green has {n} nodes in {zone}, over its max {max}"));
            }
        }
        let mut versions: BTreeMap<String, usize> = BTreeMap::new();
        for i in &live {
            *versions.entry(i.version.clone()).or_default() += 1;
        }
        if let Some(u) = self.upgrade.as_mut() {
            u.blue = Some(blue);
        }
        let r = &mut self.report.upgrade;
        r.most_green = r.most_green.max(most);
        r.versions = versions;
        for f in found {
            self.violation(now, f);
        }
    }
}

/// The pods on `node`, by key, and whether each is pinned.
pub(super) fn pods_on(
    pods: &BTreeMap<String, (k8s_openapi::api::core::v1::Pod, u64)>,
    node: &str,
) -> Vec<(String, bool)> {
    pods.iter()
        .filter(|(_, (p, _))| bound(p) == Some(node))
        .map(|(k, (p, _))| (k.clone(), pinned(p)))
        .collect()
}
