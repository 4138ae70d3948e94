//! The cluster autoscaler's decisions (C1–C12, E2–E5), pure: from a
//! [`Snapshot`] of Nodes, Pods, NodePools and PodDisruptionBudgets, the
//! autoscaler's remembered [`State`] and the clock, [`decide`] says which
//! pool zones grow or shrink to what size, which nodes to remove and why,
//! which taints to set, which events to emit, why each pending pod and each
//! node got its answer, and the `cluster-autoscaler-status` ConfigMap. No
//! I/O, no clock read, no randomness beyond a seed: the same inputs give
//! the same decision.
//!
//! Every fit question goes to `sluice-scheduler`'s own filters on a copy of
//! its cluster view: template nodes for scale-up ([`template`], packed by
//! [`binpack`]), the other nodes for scale-down's removal simulation
//! ([`scale_down`]). Limits are in [`limits`], backoff in [`backoff`], the
//! expanders in [`expander`], zone balancing in [`balance`], the drain
//! rules in [`blockers`], the profiles in [`profile`], scale-ups in flight
//! in [`provisioning`], explanations in [`explain`], the status in
//! [`status`]; what carrying a decision out decides (drain steps, the
//! pool's fields) in [`actuation`]. The loop and `sluice autoscaler` read
//! the same [`live::Objects`] and the same remembered state ([`memory`]),
//! so the CLI's explanations and dry runs are the loop's decisions.

pub mod actuation;
pub mod backoff;
pub mod balance;
mod binpack;
pub mod blockers;
mod budgets;
pub mod equivalence;
pub mod error;
pub mod events;
pub mod expander;
pub mod explain;
pub mod limits;
pub mod live;
pub mod memory;
pub mod options;
pub mod pool_config;
pub mod price;
pub mod profile;
pub mod provisioning;
pub mod scale_down;
pub mod scale_up;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod template;
pub mod utilization;

use std::collections::BTreeMap;

use sluice_model::k8s::jiff::Timestamp;
use sluice_scheduler::Cluster;

pub use error::{ConfigError, InputError};
pub use events::{Event, EventType, Involved};
pub use options::Options;
pub use pool_config::{PoolExtras, Reservation, ReservationAffinity, TpuSlice};
pub use scale_down::{NodeOutcome, Removal, ScaleDownResult, TaintChange, Unremovable};
pub use scale_up::{PodOutcome, PodVerdict, ScaleUpResult};
pub use snapshot::Snapshot;
pub use state::State;
pub use status::Status;

/// Why a zone's size changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetReason {
    ScaleUp,
    /// A scale-up that failed or timed out, set back.
    Rollback,
}

/// A pool zone's new size, for the field the pool reconciler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneTarget {
    pub pool: String,
    pub zone: String,
    pub from: i32,
    pub to: i32,
    pub reason: TargetReason,
}

/// Everything one decision says.
#[derive(Debug, Clone)]
pub struct Decision {
    /// Sizes to set, per pool zone.
    pub targets: Vec<ZoneTarget>,
    /// Nodes to taint, cordon, drain and have their pool delete.
    pub removals: Vec<Removal>,
    pub taints: Vec<TaintChange>,
    pub events: Vec<Event>,
    /// Per pending pod (`namespace/name`).
    pub pods: BTreeMap<String, PodOutcome>,
    /// Per node.
    pub nodes: BTreeMap<String, NodeOutcome>,
    pub scale_up: ScaleUpResult,
    pub scale_down: ScaleDownResult,
    pub status: Status,
    /// The state to remember for the next decision.
    pub state: State,
    /// Input that could not be read and was left out.
    pub errors: Vec<InputError>,
}

/// Decides one loop: first what scale-ups in flight became, then scale-up,
/// then scale-down (in cooldown when this loop scaled up).
pub fn decide(snapshot: &Snapshot<'_>, state: &State, now: Timestamp) -> Decision {
    let opts = snapshot.options;
    let mut state = state.clone();
    let mut idx = snapshot::Index::build(snapshot);
    let mut errors = std::mem::take(&mut idx.errors);
    let provisioning = provisioning::settle(&mut idx, &mut state, opts, now);
    let (base, view_errors) = Cluster::from_objects(snapshot.nodes, snapshot.pods);
    errors.extend(view_errors.into_iter().map(InputError::from));
    let mut up_view = base.clone();
    let up = scale_up::run(&idx, snapshot, &mut up_view, &state.backoff, opts, now);
    drop(up_view);
    for (pool, code, message) in &up.failures {
        let next = backoff::Backoff::after_failure(state.backoff.get(pool), now, code, message);
        state.backoff.insert(pool.clone(), next);
    }
    let scaled_up = !up.increases.is_empty();
    if scaled_up {
        state.last_scale_up = Some(now);
    }
    let mut targets: Vec<ZoneTarget> = provisioning
        .rollbacks
        .iter()
        .map(|r| ZoneTarget {
            pool: r.pool.clone(),
            zone: r.zone.clone(),
            from: r.from,
            to: r.to,
            reason: TargetReason::Rollback,
        })
        .collect();
    for inc in &up.increases {
        state.scale_ups.push(state::ScaleUpRequest {
            pool: inc.pool.clone(),
            zone: inc.zone.clone(),
            from: inc.from,
            to: inc.to,
            requested_at: now,
        });
        match targets
            .iter_mut()
            .find(|t| t.pool == inc.pool && t.zone == inc.zone)
        {
            Some(t) => {
                t.to = inc.to;
                t.reason = TargetReason::ScaleUp;
            }
            None => targets.push(ZoneTarget {
                pool: inc.pool.clone(),
                zone: inc.zone.clone(),
                from: inc.from,
                to: inc.to,
                reason: TargetReason::ScaleUp,
            }),
        }
    }
    let mut down_view = base;
    let down = scale_down::run(&idx, snapshot, &mut down_view, &mut state, now, scaled_up);
    // The stale taints and the released nodes were given back just now.
    state.cleaned_up = true;
    state.released.clear();
    errors.extend(up.errors);
    errors.extend(down.errors);
    let mut candidates: BTreeMap<String, usize> = BTreeMap::new();
    for (name, o) in &down.nodes {
        if o.unneeded_since.is_some() && o.kept.is_some() {
            if let Some(&n) = idx.node_by_name.get(name.as_str()) {
                let f = &idx.nodes[n];
                if let (Some(p), Some(z)) = (f.pool, f.zone) {
                    let pool = &idx.pools[p];
                    *candidates
                        .entry(scale_up::group_id(&pool.name, &pool.zones[z]))
                        .or_insert(0) += 1;
                }
            }
        }
    }
    let in_progress = state
        .scale_ups
        .iter()
        .map(|r| (scale_up::group_id(&r.pool, &r.zone), true))
        .collect();
    let message = (!errors.is_empty()).then(|| {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("skipped unreadable input: {}", list.join("; "))
    });
    let status = status::build(
        &status::Inputs {
            idx: &idx,
            candidates,
            in_progress,
            message,
        },
        &mut state,
        now,
    );
    let mut events = provisioning.events;
    events.extend(up.events);
    events.extend(down.events);
    Decision {
        targets,
        removals: down.removals,
        taints: down.taints,
        events,
        pods: up.pods,
        nodes: down.nodes,
        scale_up: up.result,
        scale_down: down.result,
        status,
        state,
        errors,
    }
}

#[cfg(test)]
mod tests;
