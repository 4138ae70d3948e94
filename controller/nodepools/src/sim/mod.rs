//! The simulated provider: instances in memory, on an injected clock.
//!
//! An instance is `Creating` until `created_at + boot_delay`, then
//! `Running`; creations beyond the quota (`max_instances` across every
//! pool) fail with [`ProviderError::QuotaExhausted`]; the next N creations
//! can be made to fail, and any instance can be marked `Failed`. Deletion
//! is immediate. An instance whose spec carries a run limit
//! ([`NodeSpec::run_ends_at`], GKE's `maxRunDuration`) is gone from
//! `created_at` + that limit on, as GKE deletes a flex-start VM at the end
//! of its run; [`SimProvider::next_run_end`] tells an event-driven test
//! when the next one goes. Nothing boots, so no Node registers by itself:
//! tests and benchmarks take the Nodes of the running instances from
//! [`SimProvider::nodes`].
//!
//! Instances are kept per pool in ordered maps, so creating, deleting and
//! listing cost O(log n) and O(pool) even with 5 000 nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::instance::{CreateNode, Instance, InstanceState, NodeSpec};
use crate::node_object::node_object;
use crate::provider::{NodeProvider, ProviderError, ProviderFuture};

/// Where the simulator reads the time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

impl<F: Fn() -> Timestamp + Send + Sync> Clock for F {
    fn now(&self) -> Timestamp {
        self()
    }
}

/// A clock that moves only when told, for tests.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Mutex::new(start))
    }

    pub fn advance(&self, by: SignedDuration) {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *t = crate::later(*t, by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The in-memory provider.
pub struct SimProvider {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    boot_delay: SignedDuration,
    max_instances: Option<u64>,
    fail_next: u32,
    /// Pool → name → instance.
    pools: HashMap<String, BTreeMap<String, Sim>>,
    /// Name → pool, for deletion by name.
    pool_of: HashMap<String, String>,
    /// When each instance with a run limit ends, earliest first.
    run_ends: BTreeSet<(Timestamp, String)>,
}

struct Sim {
    zone: String,
    version: String,
    created_at: Timestamp,
    spec: NodeSpec,
    failed: Option<String>,
    /// The end of its run, if it has a limit.
    ends_at: Option<Timestamp>,
}

impl SimProvider {
    /// An empty provider: instances boot at once, no quota.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        SimProvider {
            clock,
            state: Mutex::new(State::default()),
        }
    }

    /// How long an instance stays `Creating`.
    pub fn set_boot_delay(&self, delay: SignedDuration) {
        self.lock().boot_delay = delay;
    }

    /// The most instances there may be (across pools); `None`: no limit.
    pub fn set_quota(&self, max_instances: Option<u64>) {
        self.lock().max_instances = max_instances;
    }

    /// Make the next `n` creations fail.
    pub fn fail_next_creations(&self, n: u32) {
        self.lock().fail_next = n;
    }

    /// Mark instance `name` failed, as a VM that died.
    pub fn mark_failed(&self, name: &str, reason: &str) -> Result<(), ProviderError> {
        let mut state = self.lock();
        let State { pools, pool_of, .. } = &mut *state;
        let sim = pool_of
            .get(name)
            .and_then(|pool| pools.get_mut(pool))
            .and_then(|instances| instances.get_mut(name))
            .ok_or_else(|| ProviderError::NotFound(name.to_owned()))?;
        sim.failed = Some(reason.to_owned());
        Ok(())
    }

    /// How many instances exist, across pools.
    pub fn len(&self) -> usize {
        self.lock().pool_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Ready Nodes of `pool`'s running instances, as their agents
    /// would register them.
    pub fn nodes(&self, pool: &str) -> Vec<Node> {
        self.running(pool, |_| true)
            .into_iter()
            .filter_map(|(_, node)| node)
            .collect()
    }

    /// The names of `pool`'s running instances, each with its Node when
    /// `want(name)`: building 5 000 Nodes a second to find the few not
    /// registered yet was most of what the simulated kubelets cost.
    pub fn running(&self, pool: &str, want: impl Fn(&str) -> bool) -> Vec<(String, Option<Node>)> {
        let now = self.clock.now();
        let state = self.lock();
        let Some(instances) = state.pools.get(pool) else {
            return Vec::new();
        };
        instances
            .iter()
            .map(|(name, sim)| (state.instance(pool, name, sim, now), &sim.spec))
            .filter(|(i, _)| i.state == InstanceState::Running)
            .map(|(i, spec)| {
                let node = want(&i.name).then(|| node_object(&i, spec));
                (i.name, node)
            })
            .collect()
    }

    /// When the next instance's run ends (it is gone from then on).
    pub fn next_run_end(&self) -> Option<Timestamp> {
        self.lock().run_ends.first().map(|(t, _)| *t)
    }

    /// The state, with every instance whose run is over at the clock's
    /// now removed first: whatever is read or changed sees them gone.
    fn lock(&self) -> MutexGuard<'_, State> {
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.end_runs(now);
        state
    }

    fn create_now(&self, req: CreateNode) -> Result<Instance, ProviderError> {
        let now = self.clock.now();
        let mut state = self.lock();
        if state.pool_of.contains_key(&req.name) {
            return Err(ProviderError::Failed(format!(
                "instance {} exists already",
                req.name
            )));
        }
        if state.fail_next > 0 {
            state.fail_next -= 1;
            return Err(ProviderError::Failed(format!(
                "creating {}: injected failure",
                req.name
            )));
        }
        if let Some(limit) = state.max_instances {
            if state.pool_of.len() as u64 >= limit {
                return Err(ProviderError::QuotaExhausted {
                    resource: "instances".into(),
                    limit,
                });
            }
        }
        let sim = Sim {
            zone: req.zone,
            version: req.version,
            created_at: now,
            ends_at: req.config.run_ends_at(now),
            spec: req.config,
            failed: None,
        };
        if let Some(end) = sim.ends_at {
            state.run_ends.insert((end, req.name.clone()));
        }
        let instance = state.instance(&req.pool, &req.name, &sim, now);
        state.pool_of.insert(req.name.clone(), req.pool.clone());
        state
            .pools
            .entry(req.pool)
            .or_default()
            .insert(req.name, sim);
        Ok(instance)
    }

    fn delete_now(&self, name: &str) -> Result<(), ProviderError> {
        if self.lock().remove(name) {
            Ok(())
        } else {
            Err(ProviderError::NotFound(name.to_owned()))
        }
    }

    fn list_now(&self, pool: &str) -> Vec<Instance> {
        let now = self.clock.now();
        let state = self.lock();
        state.pools.get(pool).map_or_else(Vec::new, |instances| {
            instances
                .iter()
                .map(|(name, sim)| state.instance(pool, name, sim, now))
                .collect()
        })
    }
}

impl State {
    /// Remove instance `name`; false if there is none.
    fn remove(&mut self, name: &str) -> bool {
        let Some(pool) = self.pool_of.remove(name) else {
            return false;
        };
        if let Some(instances) = self.pools.get_mut(&pool) {
            if let Some(end) = instances.remove(name).and_then(|sim| sim.ends_at) {
                self.run_ends.remove(&(end, name.to_owned()));
            }
            if instances.is_empty() {
                self.pools.remove(&pool);
            }
        }
        true
    }

    /// Remove the instances whose run ended by `now`.
    fn end_runs(&mut self, now: Timestamp) {
        while self.run_ends.first().is_some_and(|(end, _)| *end <= now) {
            if let Some((_, name)) = self.run_ends.pop_first() {
                self.remove(&name);
            }
        }
    }

    fn instance(&self, pool: &str, name: &str, sim: &Sim, now: Timestamp) -> Instance {
        let state = match &sim.failed {
            Some(why) => InstanceState::Failed(why.clone()),
            None if now < crate::later(sim.created_at, self.boot_delay) => InstanceState::Creating,
            None => InstanceState::Running,
        };
        Instance {
            name: name.to_owned(),
            pool: pool.to_owned(),
            zone: sim.zone.clone(),
            version: sim.version.clone(),
            state,
            created_at: sim.created_at,
        }
    }
}

impl NodeProvider for SimProvider {
    fn create(&self, req: CreateNode) -> ProviderFuture<'_, Instance> {
        Box::pin(std::future::ready(self.create_now(req)))
    }

    fn delete<'a>(&'a self, name: &'a str) -> ProviderFuture<'a, ()> {
        Box::pin(std::future::ready(self.delete_now(name)))
    }

    fn list<'a>(&'a self, pool: &'a str) -> ProviderFuture<'a, Vec<Instance>> {
        Box::pin(std::future::ready(Ok(self.list_now(pool))))
    }

    fn capacity(&self) -> ProviderFuture<'_, Option<u64>> {
        let state = self.lock();
        let room = state
            .max_instances
            .map(|limit| limit.saturating_sub(state.pool_of.len() as u64));
        Box::pin(std::future::ready(Ok(room)))
    }
}

#[cfg(test)]
mod tests;
