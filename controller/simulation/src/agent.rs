//! What a node's agent does when its Node carries `sluice.dev/drain:
//! <reason>` (see `docs/architecture.md`, the agent's `drain.rs`): it
//! evicts every pod bound to the node, each eviction decided by the pod's
//! budget exactly as the Eviction API decides it
//! (`sluice_model::policy::disruption::decide`), and what a refusal leads
//! to is the reason's (`EvictionReason::pdb_policy`): retried every 5 s
//! (as the agent, and `kubectl drain`) for good (a blue-green phase-3
//! drain, B3), or for a while and then the pod is deleted past its budget
//! (an upgrade's hour, E1) or left (a scale-down, C5); a blue pool's
//! deletion does not ask the budget at all (B5). An accepted eviction
//! deletes the pod with its grace capped by the reason (`effective_grace`).

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::policy::disruption::{decide, UnhealthyPodEvictionPolicy, Verdict};
use sluice_model::policy::eviction::{effective_grace, EvictionReason, PdbPolicy};

use crate::world::{later, World};

const RETRY_FIRST: SignedDuration = SignedDuration::from_secs(5);
const RETRY_MAX: SignedDuration = RETRY_FIRST;

/// A drain the agent of a node runs: why, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drain {
    pub reason: EvictionReason,
    pub started: Timestamp,
}

/// The agents' eviction state across steps.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    /// Pod → (next try, the wait before the one after).
    retry: BTreeMap<String, (Timestamp, SignedDuration)>,
    /// Evictions refused by a budget, in all.
    pub refusals: u64,
    /// Pods deleted past their budget after the reason's budget wait.
    pub forced: Vec<(Timestamp, String)>,
    /// Pods deleted without asking their budget (a blue pool's deletion).
    pub deleted: u64,
}

/// What the agent does with one pod now.
enum Step {
    Evict,
    Force,
    Retry,
    Leave,
}

impl Step {
    /// The reason's budget handling, for a pod whose eviction the budget
    /// `refused` (or not) now.
    fn of(drain: Drain, refused: bool, now: Timestamp) -> Step {
        let waited = |d| later(drain.started, signed(d)) <= now;
        match drain.reason.pdb_policy() {
            PdbPolicy::Ignore => Step::Evict,
            _ if !refused => Step::Evict,
            PdbPolicy::RetryForever => Step::Retry,
            PdbPolicy::RetryThenForce(d) if waited(d) => Step::Force,
            PdbPolicy::RetryThenGiveUp(d) if waited(d) => Step::Leave,
            PdbPolicy::RetryThenForce(_) | PdbPolicy::RetryThenGiveUp(_) => Step::Retry,
        }
    }
}

fn signed(d: std::time::Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

impl Agents {
    /// Evict what may be evicted from the `draining` nodes at `now`.
    pub fn step(&mut self, world: &mut World, draining: &BTreeMap<String, Drain>, now: Timestamp) {
        // The pods to evict, with their node's drain, in one pass over the
        // pods (a blue pool drains a thousand nodes at once).
        let pods: Vec<(String, usize, bool, Drain)> = world
            .pods
            .iter()
            .filter(|(_, p)| p.terminating_until.is_none())
            .filter_map(|(name, p)| {
                let drain = draining.get(p.node.as_deref()?)?;
                Some((name.clone(), p.workload, p.healthy(now), *drain))
            })
            .collect();
        for (pod, workload, healthy, drain) in pods {
            if self.retry.get(&pod).is_some_and(|(at, _)| *at > now) {
                continue;
            }
            let verdict = match world.budget_status(workload, now) {
                Some(status) => decide(healthy, &status, UnhealthyPodEvictionPolicy::default()),
                None => Verdict::Spend,
            };
            let refused = verdict == Verdict::Refused;
            match Step::of(drain, refused, now) {
                Step::Retry => {
                    self.refusals += 1;
                    let wait = self.retry.get(&pod).map_or(RETRY_FIRST, |(_, w)| *w);
                    self.retry
                        .insert(pod, (later(now, wait), (wait * 2).min(RETRY_MAX)));
                    continue;
                }
                Step::Leave => {
                    self.retry.remove(&pod);
                    continue;
                }
                Step::Force => self.forced.push((now, pod.clone())),
                Step::Evict if refused => self.deleted += 1,
                Step::Evict => {}
            }
            self.retry.remove(&pod);
            let grace = world.workloads[workload].grace;
            let own = std::time::Duration::try_from(grace).unwrap_or_default();
            world.terminate(&pod, signed(effective_grace(own, drain.reason)), now);
        }
        self.retry.retain(|pod, _| world.pods.contains_key(pod));
    }

    /// A budget holds `pod` back: its eviction was refused and is retried.
    pub fn held(&self, pod: &str) -> bool {
        self.retry.contains_key(pod)
    }

    /// The next retry due after `now`.
    pub fn next_event(&self, now: Timestamp) -> Option<Timestamp> {
        self.retry
            .values()
            .map(|(t, _)| *t)
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{NodeView, Workload};
    use sluice_model::policy::disruption::{Budget, IntOrPercent};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("in range")
    }

    fn view(names: &[(&str, bool)]) -> Vec<NodeView> {
        names
            .iter()
            .map(|(n, s)| NodeView {
                name: n.to_string(),
                schedulable: *s,
            })
            .collect()
    }

    /// web's pods over nodes a and b, a cordoned and draining since 100 s.
    struct Bed {
        world: World,
        agents: Agents,
        draining: BTreeMap<String, Drain>,
        nodes: Vec<NodeView>,
    }

    impl Bed {
        /// `replicas` pods of web (minAvailable `min`), all Ready at 20 s;
        /// a drained for `reason`.
        fn settled(replicas: u32, min: u32, reason: EvictionReason) -> Self {
            let mut world = World::new(vec![Workload {
                name: "web".into(),
                replicas,
                budget: Budget::MinAvailable(IntOrPercent::Int(min)),
                startup: SignedDuration::from_secs(20),
                grace: SignedDuration::from_secs(30),
            }]);
            let all = view(&[("a", true), ("b", true)]);
            world.step(&all, t(0));
            world.step(&all, t(20));
            Bed {
                world,
                agents: Agents::default(),
                draining: [(
                    "a".to_string(),
                    Drain {
                        reason,
                        started: t(100),
                    },
                )]
                .into(),
                nodes: view(&[("a", false), ("b", true)]),
            }
        }

        /// One event at a time from `from` to `until`; web's healthy
        /// count at every step.
        fn run(&mut self, from: Timestamp, until: Timestamp) -> Vec<u32> {
            let mut now = from;
            let mut healthy = Vec::new();
            while now <= until {
                self.world.step(&self.nodes, now);
                self.agents.step(&mut self.world, &self.draining, now);
                self.world.step(&self.nodes, now);
                healthy.extend(self.world.budget_status(0, now).map(|s| s.current_healthy));
                let next = [self.world.next_event(now), self.agents.next_event(now)]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(n) => now = n,
                    None => break,
                }
            }
            healthy
        }
    }

    // spec: E6 — a drain honours the budget: pods leave one at a time as
    // replacements turn Ready, and the healthy count never drops below
    // minAvailable.
    #[test]
    fn a_drain_waits_for_the_budget() {
        let mut bed = Bed::settled(3, 3, EvictionReason::NodeUpgrade);
        // minAvailable = replicas: nothing may go until a surplus pod is
        // Ready, and there never is one (the Deployment keeps 3): the
        // budget holds for the whole hour, then the drain forces.
        let healthy = bed.run(t(100), t(100 + 3599));
        assert!(healthy.iter().all(|h| *h >= 3), "{healthy:?}");
        assert!(bed.agents.refusals > 0);
        assert!(bed.agents.forced.is_empty());
        assert!(bed.world.pods_on("a").count() > 0);
        bed.run(t(3700), t(3800));
        assert!(!bed.agents.forced.is_empty(), "E1: forced after the hour");
        assert_eq!(bed.world.pods_on("a").count(), 0);
    }

    // spec: E6 — with room in the budget the drain empties the node
    // without the healthy count ever going below it.
    #[test]
    fn a_drain_with_room_empties_the_node_within_the_budget() {
        let mut bed = Bed::settled(4, 3, EvictionReason::NodeUpgrade);
        let healthy = bed.run(t(100), t(1000));
        assert!(healthy.iter().all(|h| *h >= 3), "{healthy:?}");
        assert!(
            bed.agents.refusals > 0,
            "the second pod waited for the first's replacement"
        );
        assert!(bed.agents.forced.is_empty());
        assert_eq!(bed.world.pods_on("a").count(), 0);
        assert_eq!(bed.world.pods_on("b").count(), 4);
    }

    // spec: B3 — a blue-green phase-3 drain honours budgets for good: a
    // budget that never gives holds the pod past the hour, and nothing is
    // forced.
    #[test]
    fn a_phase_3_drain_never_forces() {
        let mut bed = Bed::settled(3, 3, EvictionReason::BlueGreenDrain);
        let healthy = bed.run(t(100), t(100 + 3 * 3600));
        assert!(healthy.iter().all(|h| *h >= 3), "{healthy:?}");
        assert!(bed.agents.forced.is_empty());
        assert!(bed.world.pods_on("a").count() > 0);
        let held = bed.world.pods_on("a").next().map(|(n, _)| n.clone());
        assert!(held.is_some_and(|p| bed.agents.held(&p)));
    }

    // spec: B5 — a blue pool's deletion deletes the pods without asking
    // their budget, each with its grace (at most 60 min).
    #[test]
    fn a_blue_pool_deletion_ignores_budgets() {
        let mut bed = Bed::settled(3, 3, EvictionReason::BluePoolDeletion);
        bed.run(t(100), t(200));
        assert_eq!(bed.world.pods_on("a").count(), 0);
        assert!(bed.agents.forced.is_empty());
        assert!(bed.agents.deleted > 0);
        assert_eq!(bed.agents.refusals, 0);
    }
}
