//! The simulated workloads: Deployments of identical pods, each under a
//! PodDisruptionBudget, placed on the schedulable nodes the harness hands
//! in. What a ReplicaSet controller, the scheduler and a kubelet would do,
//! reduced to what upgrades touch: how many pods of each workload are
//! healthy, and where they run.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::policy::disruption::{Budget, BudgetStatus};

/// One Deployment and its budget.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub replicas: u32,
    pub budget: Budget,
    /// From binding to Ready (image pull, start, readiness).
    pub startup: SignedDuration,
    /// `terminationGracePeriodSeconds`, as the pod uses it all.
    pub grace: SignedDuration,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub workload: usize,
    /// Bound to this node; `None` while no node can take it.
    pub node: Option<String>,
    /// Ready from this instant (set when bound).
    pub ready_at: Option<Timestamp>,
    /// Being deleted: gone at this instant.
    pub terminating_until: Option<Timestamp>,
}

impl Pod {
    /// Counts towards its budget's `currentHealthy`.
    pub fn healthy(&self, now: Timestamp) -> bool {
        self.terminating_until.is_none() && self.ready_at.is_some_and(|t| t <= now)
    }
}

/// A node as the world sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    /// Registered, Ready and not cordoned: new pods may land here.
    pub schedulable: bool,
}

/// Everything that broke a budget, for the invariants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations {
    /// A workload's healthy pods below its budget's `desiredHealthy`
    /// because pods vanished with their node (deleted before its drain
    /// finished), with when and how many were healthy.
    pub lost_with_node: Vec<(Timestamp, String, String)>,
}

/// The workloads and their pods.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub workloads: Vec<Workload>,
    /// By name (`<workload>-<n>`), ordered so runs are reproducible.
    pub pods: BTreeMap<String, Pod>,
    next_id: u64,
    pub violations: Violations,
}

impl World {
    pub fn new(workloads: Vec<Workload>) -> Self {
        World {
            workloads,
            ..Default::default()
        }
    }

    /// The budget status of `workload` now: `expected` is the
    /// Deployment's scale, as the disruption controller reads it.
    pub fn budget_status(&self, workload: usize, now: Timestamp) -> Option<BudgetStatus> {
        let w = self.workloads.get(workload)?;
        let healthy = self
            .pods
            .values()
            .filter(|p| p.workload == workload && p.healthy(now))
            .count();
        Some(BudgetStatus::of(
            w.budget,
            w.replicas,
            u32::try_from(healthy).unwrap_or(u32::MAX),
        ))
    }

    /// The pods bound to `node` that have not yet gone (terminating ones
    /// included: a drain is over when they are gone).
    pub fn pods_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = (&'a String, &'a Pod)> {
        self.pods
            .iter()
            .filter(move |(_, p)| p.node.as_deref() == Some(node))
    }

    /// One step of the cluster's own controllers at `now`: terminated
    /// pods go; pods of nodes that no longer exist go (the pod GC), and
    /// a budget broken by that is recorded; each Deployment is topped up
    /// to its scale; pending pods are bound to the least loaded
    /// schedulable node.
    pub fn step(&mut self, nodes: &[NodeView], now: Timestamp) {
        self.pods
            .retain(|_, p| p.terminating_until.is_none_or(|t| t > now));
        let present: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let orphaned: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.node.as_deref().is_some_and(|n| !present.contains(n)))
            .map(|(name, _)| name.clone())
            .collect();
        for name in orphaned {
            let Some(pod) = self.pods.remove(&name) else {
                continue;
            };
            let was_healthy = pod.healthy(now);
            if let Some(status) = self.budget_status(pod.workload, now) {
                let healthy_before = status.current_healthy + u32::from(was_healthy);
                if was_healthy && healthy_before <= status.desired_healthy {
                    self.violations.lost_with_node.push((
                        now,
                        pod.node.clone().unwrap_or_default(),
                        name,
                    ));
                }
            }
        }
        self.top_up();
        self.bind(nodes, now);
    }

    fn top_up(&mut self) {
        for (i, w) in self.workloads.iter().enumerate() {
            let live = self
                .pods
                .values()
                .filter(|p| p.workload == i && p.terminating_until.is_none())
                .count();
            for _ in live..w.replicas as usize {
                self.next_id += 1;
                self.pods.insert(
                    format!("{}-{}", w.name, self.next_id),
                    Pod {
                        workload: i,
                        node: None,
                        ready_at: None,
                        terminating_until: None,
                    },
                );
            }
        }
    }

    fn bind(&mut self, nodes: &[NodeView], now: Timestamp) {
        let mut load: BTreeMap<&str, usize> = nodes
            .iter()
            .filter(|n| n.schedulable)
            .map(|n| (n.name.as_str(), 0))
            .collect();
        if load.is_empty() {
            return;
        }
        for p in self.pods.values() {
            if let Some(n) = p.node.as_deref().and_then(|n| load.get_mut(n)) {
                *n += 1;
            }
        }
        for pod in self.pods.values_mut().filter(|p| p.node.is_none()) {
            let Some((&node, _)) = load.iter().min_by_key(|(name, n)| (**n, **name)) else {
                return;
            };
            pod.node = Some(node.to_owned());
            pod.ready_at = Some(later(now, self.workloads[pod.workload].startup));
            if let Some(n) = load.get_mut(node) {
                *n += 1;
            }
        }
    }

    /// Every bound pod Ready by `now`: a cluster that has been running a
    /// while, as a run starts.
    pub fn settle(&mut self, now: Timestamp) {
        for p in self.pods.values_mut().filter(|p| p.node.is_some()) {
            p.ready_at = Some(p.ready_at.map_or(now, |t| t.min(now)));
        }
    }

    /// Start deleting `pod` gracefully (its grace from its workload,
    /// capped at `cap`): what an accepted eviction does.
    pub fn terminate(&mut self, pod: &str, cap: SignedDuration, now: Timestamp) {
        let Some(p) = self.pods.get_mut(pod) else {
            return;
        };
        if p.terminating_until.is_some() {
            return;
        }
        let grace = self.workloads[p.workload].grace.min(cap);
        p.terminating_until = Some(later(now, grace));
    }

    /// The next instant at which something here changes by itself.
    pub fn next_event(&self, now: Timestamp) -> Option<Timestamp> {
        self.pods
            .values()
            .flat_map(|p| [p.ready_at, p.terminating_until])
            .flatten()
            .filter(|t| *t > now)
            .min()
    }
}

/// `t + d`, held at the end of time.
pub(crate) fn later(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_model::policy::disruption::IntOrPercent;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("in range")
    }

    fn web(replicas: u32, min: u32) -> Workload {
        Workload {
            name: "web".into(),
            replicas,
            budget: Budget::MinAvailable(IntOrPercent::Int(min)),
            startup: SignedDuration::from_secs(10),
            grace: SignedDuration::from_secs(30),
        }
    }

    fn nodes(names: &[&str]) -> Vec<NodeView> {
        names
            .iter()
            .map(|n| NodeView {
                name: n.to_string(),
                schedulable: true,
            })
            .collect()
    }

    #[test]
    fn pods_spread_over_the_least_loaded_nodes_and_turn_ready() {
        let mut w = World::new(vec![web(4, 3)]);
        w.step(&nodes(&["a", "b"]), t(0));
        let per: Vec<usize> = ["a", "b"].iter().map(|n| w.pods_on(n).count()).collect();
        assert_eq!(per, [2, 2]);
        assert_eq!(w.budget_status(0, t(5)).map(|s| s.current_healthy), Some(0));
        assert_eq!(w.next_event(t(0)), Some(t(10)));
        assert_eq!(
            w.budget_status(0, t(10)).map(|s| s.disruptions_allowed),
            Some(1)
        );
    }

    #[test]
    fn a_terminating_pod_is_replaced_at_once_and_gone_after_its_grace() {
        let mut w = World::new(vec![web(2, 1)]);
        w.step(&nodes(&["a", "b"]), t(0));
        let victim = w
            .pods_on("a")
            .next()
            .map(|(n, _)| n.clone())
            .expect("a pod");
        w.terminate(&victim, SignedDuration::from_secs(3600), t(20));
        w.step(&nodes(&["a", "b"]), t(20));
        assert_eq!(
            w.pods.len(),
            3,
            "the replacement is made while it terminates"
        );
        w.step(&nodes(&["a", "b"]), t(50));
        assert_eq!(w.pods.len(), 2);
        assert!(!w.pods.contains_key(&victim));
    }

    #[test]
    fn pods_lost_with_their_node_below_the_budget_are_recorded() {
        let mut w = World::new(vec![web(2, 2)]);
        w.step(&nodes(&["a", "b"]), t(0));
        w.step(&nodes(&["a", "b"]), t(10));
        w.step(&nodes(&["b"]), t(20));
        assert_eq!(w.violations.lost_with_node.len(), 1);
        // With room in the budget the same loss breaks nothing.
        let mut w = World::new(vec![web(3, 1)]);
        w.step(&nodes(&["a", "b", "c"]), t(0));
        w.step(&nodes(&["b", "c"]), t(20));
        assert!(w.violations.lost_with_node.is_empty());
    }

    #[test]
    fn without_a_schedulable_node_pods_wait() {
        let mut w = World::new(vec![web(2, 1)]);
        let cordoned = vec![NodeView {
            name: "a".into(),
            schedulable: false,
        }];
        w.step(&cordoned, t(0));
        assert!(w.pods.values().all(|p| p.node.is_none()));
        w.step(&nodes(&["b"]), t(1));
        assert_eq!(w.pods_on("b").count(), 2);
    }
}
