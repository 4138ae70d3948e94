//! What must hold at every step of an upgrade, checked by the harness:
//! - the pool's size per zone stays within [target − maxUnavailable,
//!   target + maxSurge] (U1–U3);
//! - no node upgrade starts while the maintenance gate is closed (M1, M3,
//!   M4);
//! - no PodDisruptionBudget is ever below its `desiredHealthy` (E6): no
//!   eviction past a budget, no pod lost with a node deleted before its
//!   drain ended, no pod deleted past its budget after the drain's wait.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
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

/// The checks' state across steps.
#[derive(Debug, Clone)]
pub struct Checks {
    targets: BTreeMap<String, usize>,
    max_surge: usize,
    max_unavailable: usize,
    /// Smallest and largest count seen per zone.
    pub extremes: BTreeMap<String, (usize, usize)>,
    pub violations: Vec<Violation>,
    lost_seen: usize,
    forced_seen: usize,
}

impl Checks {
    pub fn new(s: &Scenario) -> Checks {
        let settings = s
            .operation
            .spec
            .upgrade_settings
            .clone()
            .unwrap_or_default();
        Checks {
            targets: zone_targets(&s.pool.spec, &[]).into_iter().collect(),
            max_surge: usize::try_from(settings.max_surge()).unwrap_or(0),
            max_unavailable: usize::try_from(settings.max_unavailable()).unwrap_or(0),
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
    pub fn step(&mut self, at: Timestamp, instances: &[Instance], world: &World, agents: &Agents) {
        let mut counts: BTreeMap<&str, usize> =
            self.targets.keys().map(|z| (z.as_str(), 0)).collect();
        for i in instances {
            if matches!(i.state, InstanceState::Creating | InstanceState::Running) {
                *counts.entry(i.zone.as_str()).or_default() += 1;
            }
        }
        let mut broken = Vec::new();
        for (zone, n) in counts {
            let e = self.extremes.entry(zone.to_owned()).or_insert((n, n));
            *e = (e.0.min(n), e.1.max(n));
            let target = self.targets.get(zone).copied().unwrap_or(0);
            let (low, high) = (
                target.saturating_sub(self.max_unavailable),
                target + self.max_surge,
            );
            if n < low || n > high {
                broken.push(format!("{zone} holds {n} nodes, outside [{low}, {high}]"));
            }
        }
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
        for (t, node, pod) in &world.violations.lost_with_node[self.lost_seen..] {
            broken.push(format!("{pod} lost with {node} at {t}, below its budget"));
        }
        self.lost_seen = world.violations.lost_with_node.len();
        for (t, pod) in &agents.forced[self.forced_seen..] {
            broken.push(format!("{pod} deleted past its budget at {t}"));
        }
        self.forced_seen = agents.forced.len();
        for what in broken {
            self.broke(at, what);
        }
    }
}
