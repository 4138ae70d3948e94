//! The gate of an upgrade, read off the cluster's maintenance policy
//! (M1–M8, `sluice_maintenance`): which event the upgrade is (M4's
//! columns), whether who asked makes it gated (M8), and the policy's
//! answer at `now` as a [`Gate`].

use k8s_openapi::jiff::Timestamp;
use sluice_maintenance::{Activity, Blocker, Change, Decision, Event, Plane, Policy, Trigger};
use sluice_model::cluster::Cluster;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::{Operation, OperationType};

use crate::gate::Gate;

/// The maintenance event an upgrade of `pool` to the operation's target
/// is (M4's columns): a new minor, a new patch, or, with the version
/// unchanged, a node recreation for a new config.
pub fn event_of(op: &Operation, pool: &NodePool) -> Event {
    let from = pool.spec.version.as_deref().unwrap_or_default();
    let to = op.spec.node_version.as_deref().unwrap_or(from);
    let minor = |v: &str| {
        let mut parts = v.trim_start_matches('v').split('.');
        (
            parts.next().map(str::to_owned),
            parts.next().map(str::to_owned),
        )
    };
    let change = if to == from {
        Change::VmDisruption
    } else if minor(to) != minor(from) {
        Change::Minor
    } else {
        Change::Patch
    };
    Event::new(Plane::Node, change)
}

/// Who asked, as M8 sees it: an automatic upgrade is gated; a manual
/// version upgrade starts at once; a manual config change that recreates
/// nodes (more than labels and taints) waits for the policy.
pub fn trigger_of(op: &Operation, pool: &NodePool) -> Trigger {
    if op.spec.operation_type == OperationType::AutoUpgradeNodes {
        return Trigger::Automatic;
    }
    let version_changes = op
        .spec
        .node_version
        .as_deref()
        .is_some_and(|v| Some(v) != pool.spec.version.as_deref());
    let recreating_config = op.spec.config.as_ref().is_some_and(|c| {
        let (mut new, mut old) = (c.clone(), pool.spec.config.clone());
        (new.labels, new.taints) = (Default::default(), Default::default());
        (old.labels, old.taints) = (Default::default(), Default::default());
        new != old
    });
    Trigger::Manual {
        recreates_nodes: recreating_config && !version_changes,
    }
}

/// The gate the planner runs behind: the cluster's maintenance policy
/// asked about this upgrade at `now`. No `Cluster` object: no policy,
/// always open. A stored policy that does not compile (admission refuses
/// such writes, so only an older object) closes the gate and says why.
pub fn gate_of(op: &Operation, pool: &NodePool, cluster: Option<&Cluster>, now: Timestamp) -> Gate {
    let Some(cluster) = cluster else {
        return Gate::OPEN;
    };
    let activity = Activity::Maintenance {
        event: event_of(op, pool),
        trigger: trigger_of(op, pool),
    };
    let decision = Policy::of_spec(&cluster.spec).and_then(|p| p.check(activity, now));
    match decision {
        Ok(Decision::Allowed { until }) => Gate::Open { until },
        Ok(Decision::Blocked { why, next }) => Gate::Closed {
            reason: why.iter().map(blocker_text).collect::<Vec<_>>().join("; "),
            next,
        },
        Err(e) => Gate::Closed {
            reason: format!("the cluster's maintenance policy cannot be read: {e}"),
            next: None,
        },
    }
}

fn blocker_text(b: &Blocker) -> String {
    match b {
        Blocker::WindowClosed => "maintenance window closed".to_owned(),
        Blocker::Exclusion { name, scope, end } => {
            let scope = serde_json::to_value(scope)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("{scope:?}"));
            format!("maintenance exclusion {name:?} ({scope}) until {end}")
        }
    }
}

#[cfg(test)]
mod tests;
