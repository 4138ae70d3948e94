//! What must hold at every step of an upgrade, checked by the harness:
//! - a surge upgrade keeps each zone within [target − maxUnavailable,
//!   target + maxSurge] (U1–U3); a blue-green one keeps the rules of
//!   [`blue_green`] (B1–B7);
//! - no node upgrade starts while the maintenance gate is closed (M1, M3,
//!   M4);
//! - no PodDisruptionBudget is ever below its `desiredHealthy` (E6): no
//!   eviction past a budget, no pod lost with a node deleted before its
//!   drain ended, no pod deleted past its budget after the drain's wait;
//!   except where budgets are ignored on purpose (a blue pool's deletion,
//!   B5, and a rollback without respectPdb, B6).

pub mod blue_green;

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use sluice_model::node_pool::UpgradeStrategy;
use sluice_model::operation::{BlueGreenPhase, Operation, OperationState};
use sluice_nodepools::reconcile::zone_targets;
use sluice_nodepools::{Instance, InstanceState};

use crate::agent::Agents;
use crate::harness::Scenario;
use crate::world::World;

/// One broken rule, with when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: Timestamp,
    pub what: String,
}

/// What the strategy bounds.
#[derive(Debug, Clone)]
enum Rules {
    /// [T − maxUnavailable, T + maxSurge] per zone.
    Surge {
        max_surge: usize,
        max_unavailable: usize,
    },
    BlueGreen(blue_green::BlueGreen),
}

/// The checks' state across steps.
#[derive(Debug, Clone)]
pub struct Checks {
    targets: BTreeMap<String, usize>,
    rules: Rules,
    /// Smallest and largest count seen per zone.
    pub extremes: BTreeMap<String, (usize, usize)>,
    pub violations: Vec<Violation>,
    lost_seen: usize,
    forced_seen: usize,
}

/// The operation as one step left it.
pub struct Seen<'a> {
    pub at: Timestamp,
    pub instances: &'a [Instance],
    pub operation: &'a Operation,
    pub gate_open: bool,
}

impl Seen<'_> {
    pub fn state(&self) -> Option<OperationState> {
        self.operation.status.as_ref().and_then(|s| s.status)
    }

    pub fn phase(&self) -> Option<BlueGreenPhase> {
        self.operation
            .status
            .as_ref()
            .and_then(|s| s.blue_green.as_ref())
            .and_then(|b| b.phase)
    }

    /// Budgets are ignored on purpose now: blue's pods deleted in phase
    /// 5 (B5), or green's in a rollback without respectPdb (B6).
    fn budgets_waived(&self) -> bool {
        let rolling_back = matches!(
            self.state(),
            Some(OperationState::RollingBack | OperationState::RolledBack)
        );
        self.phase() == Some(BlueGreenPhase::DeletingBluePool)
            || (rolling_back
                && self.phase().is_some()
                && self.operation.spec.respect_pdb != Some(true))
    }
}

impl Checks {
    pub fn new(s: &Scenario) -> Checks {
        let settings = s
            .operation
            .spec
            .upgrade_settings
            .clone()
            .unwrap_or_default();
        let targets: BTreeMap<String, usize> =
            zone_targets(&s.pool.spec, &[]).into_iter().collect();
        let rules = match settings.strategy() {
            UpgradeStrategy::BlueGreen => {
                Rules::BlueGreen(blue_green::BlueGreen::new(s, targets.clone()))
            }
            _ => Rules::Surge {
                max_surge: usize::try_from(settings.max_surge()).unwrap_or(0),
                max_unavailable: usize::try_from(settings.max_unavailable()).unwrap_or(0),
            },
        };
        Checks {
            targets,
            rules,
            extremes: BTreeMap::new(),
            violations: Vec::new(),
            lost_seen: 0,
            forced_seen: 0,
        }
    }

    fn broke(&mut self, at: Timestamp, what: String) {
        self.violations.push(Violation { at, what });
    }

    /// A node upgrade started while the gate was closed.
    pub fn outside_window(&mut self, at: Timestamp, node: &str) {
        self.broke(
            at,
            format!("{node}'s upgrade started while the maintenance gate was closed"),
        );
    }

    /// The checks after one step.
    pub fn step(&mut self, seen: &Seen<'_>, world: &World, agents: &Agents) {
        let at = seen.at;
        let mut counts: BTreeMap<&str, usize> =
            self.targets.keys().map(|z| (z.as_str(), 0)).collect();
        for i in seen.instances {
            if matches!(i.state, InstanceState::Creating | InstanceState::Running) {
                *counts.entry(i.zone.as_str()).or_default() += 1;
            }
        }
        let mut broken = Vec::new();
        for (zone, n) in counts {
            let e = self.extremes.entry(zone.to_owned()).or_insert((n, n));
            *e = (e.0.min(n), e.1.max(n));
            if let Rules::Surge {
                max_surge,
                max_unavailable,
            } = self.rules
            {
                let target = self.targets.get(zone).copied().unwrap_or(0);
                let (low, high) = (target.saturating_sub(max_unavailable), target + max_surge);
                if n < low || n > high {
                    broken.push(format!("{zone} holds {n} nodes, outside [{low}, {high}]"));
                }
            }
        }
        if let Rules::BlueGreen(bg) = &mut self.rules {
            broken.extend(bg.step(seen));
        }
        if !seen.budgets_waived() {
            broken.extend(budgets(world, agents, at, self.lost_seen, self.forced_seen));
        }
        self.lost_seen = world.violations.lost_with_node.len();
        self.forced_seen = agents.forced.len();
        for what in broken {
            self.broke(at, what);
        }
    }
}

/// E6: every budget at or above `desiredHealthy`, and nothing lost or
/// forced past one since the last step.
fn budgets(
    world: &World,
    agents: &Agents,
    at: Timestamp,
    lost_seen: usize,
    forced_seen: usize,
) -> Vec<String> {
    let mut broken = Vec::new();
    for w in 0..world.workloads.len() {
        if let Some(s) = world.budget_status(w, at) {
            if s.current_healthy < s.desired_healthy {
                broken.push(format!(
                    "{}: {} healthy pods, its budget needs {}",
                    world.workloads[w].name, s.current_healthy, s.desired_healthy
                ));
            }
        }
    }
    for (t, node, pod) in world.violations.lost_with_node.iter().skip(lost_seen) {
        broken.push(format!("{pod} lost with {node} at {t}, below its budget"));
    }
    for (t, pod) in agents.forced.iter().skip(forced_seen) {
        broken.push(format!("{pod} deleted past its budget at {t}"));
    }
    broken
}
