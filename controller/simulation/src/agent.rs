//! What a node's agent does when its Node carries `sluice.dev/drain:
//! NodeUpgrade` (see `docs/architecture.md`, the agent's `drain.rs`): it
//! cordons the node and evicts every pod bound to it, each eviction
//! decided by the pod's budget exactly as the Eviction API decides it
//! (`sluice_model::policy::disruption::decide`); a refusal is retried every
//! 5 s (as the agent, and `kubectl drain`), and after the reason's budget wait (1 h for an
//! upgrade, E1) the pod is deleted past its budget. An accepted eviction
//! deletes the pod with its grace period capped by the reason (1 h).

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::policy::disruption::{decide, UnhealthyPodEvictionPolicy, Verdict};

use crate::world::{later, World};

/// The upgrade drain's limits (E1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainLimits {
    /// Budgets are honoured this long from the drain's start, then pods
    /// are deleted past them.
    pub budget_wait: SignedDuration,
    /// Grace periods are capped at this.
    pub grace_cap: SignedDuration,
}

impl Default for DrainLimits {
    fn default() -> Self {
        let hour = SignedDuration::from_secs(3600);
        DrainLimits {
            budget_wait: hour,
            grace_cap: hour,
        }
    }
}

const RETRY_FIRST: SignedDuration = SignedDuration::from_secs(5);
const RETRY_MAX: SignedDuration = RETRY_FIRST;

/// The agents' eviction state across steps.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    /// Pod → (next try, the wait before the one after).
    retry: BTreeMap<String, (Timestamp, SignedDuration)>,
    /// Evictions refused by a budget, in all.
    pub refusals: u64,
    /// Pods deleted past their budget after the budget wait.
    pub forced: Vec<(Timestamp, String)>,
}

impl Agents {
    /// Evict what may be evicted from the `draining` nodes (each with the
    /// time its drain started) at `now`.
    pub fn step(
        &mut self,
        world: &mut World,
        draining: &BTreeMap<String, Timestamp>,
        limits: DrainLimits,
        now: Timestamp,
    ) {
        for (node, started) in draining {
            let pods: Vec<(String, usize, bool)> = world
                .pods_on(node)
                .filter(|(_, p)| p.terminating_until.is_none())
                .map(|(name, p)| (name.clone(), p.workload, p.healthy(now)))
                .collect();
            let overdue = later(*started, limits.budget_wait) <= now;
            for (pod, workload, healthy) in pods {
                if self.retry.get(&pod).is_some_and(|(at, _)| *at > now) {
                    continue;
                }
                let verdict = match world.budget_status(workload, now) {
                    Some(status) => decide(healthy, &status, UnhealthyPodEvictionPolicy::default()),
                    None => Verdict::Spend,
                };
                if verdict == Verdict::Refused && !overdue {
                    self.refusals += 1;
                    let wait = self.retry.get(&pod).map_or(RETRY_FIRST, |(_, w)| *w);
                    self.retry
                        .insert(pod, (later(now, wait), (wait * 2).min(RETRY_MAX)));
                    continue;
                }
                if verdict == Verdict::Refused {
                    self.forced.push((now, pod.clone()));
                }
                self.retry.remove(&pod);
                world.terminate(&pod, limits.grace_cap, now);
            }
        }
        self.retry.retain(|pod, _| world.pods.contains_key(pod));
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
        draining: BTreeMap<String, Timestamp>,
        nodes: Vec<NodeView>,
    }

    impl Bed {
        /// `replicas` pods of web (minAvailable `min`), all Ready at 20 s.
        fn settled(replicas: u32, min: u32) -> Self {
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
                draining: [("a".to_string(), t(100))].into(),
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
                self.agents
                    .step(&mut self.world, &self.draining, DrainLimits::default(), now);
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
        let mut bed = Bed::settled(3, 3);
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
        let mut bed = Bed::settled(4, 3);
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
}
