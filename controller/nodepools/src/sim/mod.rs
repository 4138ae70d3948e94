//! The simulated provider: instances in memory, on an injected clock.
//!
//! An instance is `Creating` until `created_at + boot_delay`, then
//! `Running`; creations beyond the quota (`max_instances` across every
//! pool) fail with [`ProviderError::QuotaExhausted`]; the next N creations
//! can be made to fail, and any instance can be marked `Failed`. Deletion
//! is immediate. Nothing boots, so no Node registers by itself: tests and
//! benchmarks take the Nodes of the running instances from
//! [`SimProvider::nodes`].
//!
//! Instances are kept per pool in ordered maps, so creating, deleting and
//! listing cost O(log n) and O(pool) even with 5 000 nodes.

use std::collections::{BTreeMap, HashMap};
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
}

struct Sim {
    zone: String,
    version: String,
    created_at: Timestamp,
    spec: NodeSpec,
    failed: Option<String>,
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
            spec: req.config,
            failed: None,
        };
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
        let mut state = self.lock();
        let pool = state
            .pool_of
            .remove(name)
            .ok_or_else(|| ProviderError::NotFound(name.to_owned()))?;
        if let Some(instances) = state.pools.get_mut(&pool) {
            instances.remove(name);
            if instances.is_empty() {
                state.pools.remove(&pool);
            }
        }
        Ok(())
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
