//! The pool's status: per-zone counts, the instances, the conditions and
//! GKE's phase.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use sluice_model::node_pool::{
    InstanceState as StatusState, InstanceStatus, NodePoolCondition, NodePoolPhase, NodePoolStatus,
    ZoneStatus,
};

use super::observe::{Fate, Seen};
use super::{backoff, Config};
use crate::instance::InstanceState;

/// Condition types.
pub const READY: &str = "Ready";
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// The status the inputs show; backoff and conditions carried over from
/// `previous`.
pub(super) fn build(
    previous: &NodePoolStatus,
    targets: &[(String, usize)],
    seen: &[Seen<'_>],
    deleting: bool,
    config: &Config,
    now: Timestamp,
) -> NodePoolStatus {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in seen {
        if let Fate::Counted { .. } = s.fate {
            let c = counts.entry(s.instance.zone.as_str()).or_default();
            c.0 += 1;
            c.1 += usize::from(s.ready);
        }
    }
    let zones = targets
        .iter()
        .map(|(zone, target)| {
            let (have, ready) = counts.get(zone.as_str()).copied().unwrap_or_default();
            ZoneStatus {
                zone: zone.clone(),
                target_node_count: count(*target),
                node_count: count(have),
                ready_node_count: count(ready),
            }
        })
        .collect();
    let mut instances: Vec<InstanceStatus> = seen.iter().map(instance_status).collect();
    instances.sort_by(|a, b| a.name.cmp(&b.name));
    let mut nodes: Vec<String> = seen
        .iter()
        .filter(|s| s.registered)
        .map(|s| s.instance.name.clone())
        .collect();
    nodes.sort();
    let mut versions = seen
        .iter()
        .filter(|s| matches!(s.fate, Fate::Counted { .. }))
        .map(|s| s.instance.version.as_str());
    let first = versions.next().filter(|v| !v.is_empty());
    // "The version every node runs": only when they all agree.
    let version = match first {
        Some(v) if versions.all(|w| w == v) => Some(v.to_owned()),
        _ => previous.version.clone(),
    };
    let mut status = NodePoolStatus {
        version,
        nodes,
        zones,
        instances,
        conditions: previous.conditions.clone(),
        create_backoff: previous.create_backoff.clone(),
        // The upgrade loop's to write: kept, so that neither loop undoes
        // the other's write.
        update_info: previous.update_info.clone(),
        // The autoscaler loop's, likewise.
        autoscaler: previous.autoscaler.clone(),
        ..Default::default()
    };
    summarize(&mut status, deleting, config, now);
    status
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn instance_status(s: &Seen<'_>) -> InstanceStatus {
    let i = s.instance;
    let (state, mut message) = match &i.state {
        InstanceState::Creating => (StatusState::Creating, None),
        InstanceState::Running => (StatusState::Running, None),
        InstanceState::Deleting => (StatusState::Deleting, None),
        InstanceState::Failed(why) => (StatusState::Failed, Some(why.clone())),
    };
    if let Fate::Remove(reason) = &s.fate {
        message = Some(format!("deleting: {reason}"));
    }
    InstanceStatus {
        name: i.name.clone(),
        zone: i.zone.clone(),
        state,
        version: Some(i.version.clone()).filter(|v| !v.is_empty()),
        ready: s.ready,
        message,
    }
}

/// Set the phase, its message and the conditions from the rest of
/// `status` (zones, instances, backoff), so that [`super::record`] can
/// redo them after changing the backoff.
pub(super) fn summarize(
    status: &mut NodePoolStatus,
    deleting: bool,
    config: &Config,
    now: Timestamp,
) {
    // Summed wide: admission bounds the counts, but an object stored
    // before that (or written around it) must not overflow the loop.
    let target: i64 = status
        .zones
        .iter()
        .map(|z| i64::from(z.target_node_count))
        .sum();
    let ready: i64 = status
        .zones
        .iter()
        .map(|z| i64::from(z.ready_node_count))
        .sum();
    let short: Vec<String> = status
        .zones
        .iter()
        .filter(|z| z.ready_node_count < z.target_node_count)
        .map(|z| {
            format!(
                "{}: {} of {} Ready",
                z.zone, z.ready_node_count, z.target_node_count
            )
        })
        .collect();
    let settled = short.is_empty()
        && status
            .zones
            .iter()
            .all(|z| z.node_count == z.target_node_count)
        && status.instances.len() == usize::try_from(target).unwrap_or(0);
    let (ready_status, ready_reason, ready_message) = if deleting {
        ("False", "Deleting", "the pool is being deleted".to_owned())
    } else if short.is_empty() {
        (
            "True",
            "NodesReady",
            format!("{ready} of {target} nodes Ready"),
        )
    } else {
        ("False", "NodesNotReady", short.join(", "))
    };
    set_condition(
        status,
        READY,
        ready_status,
        ready_reason,
        ready_message,
        now,
    );
    let quota = status.create_backoff.as_ref().filter(|b| b.quota_exceeded);
    let (q_status, q_reason, q_message) = match quota {
        Some(b) => ("True", "QuotaExhausted", b.message.clone()),
        None => ("False", "WithinQuota", String::new()),
    };
    set_condition(status, QUOTA_EXCEEDED, q_status, q_reason, q_message, now);

    let (phase, message) = match (&status.create_backoff, deleting) {
        (_, true) => (NodePoolPhase::Stopping, "deleting every node".to_owned()),
        (Some(b), false) => {
            let retry = backoff::retry_at(b, config);
            let phase = if ready > 0 {
                NodePoolPhase::RunningWithError
            } else {
                NodePoolPhase::Error
            };
            let message = format!(
                "creating nodes failed {} time(s) in a row, next attempt at {retry}: {}",
                b.failures, b.message
            );
            (phase, message)
        }
        (None, false) if settled => (NodePoolPhase::Running, ready_message_of(status)),
        (None, false) if ready == 0 => (NodePoolPhase::Provisioning, ready_message_of(status)),
        (None, false) => (NodePoolPhase::Reconciling, ready_message_of(status)),
    };
    status.status = Some(phase);
    status.status_message = Some(message);
}

fn ready_message_of(status: &NodePoolStatus) -> String {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Set condition `type_`, keeping its transition time while its status
/// stays the same.
fn set_condition(
    status: &mut NodePoolStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let new = |since: Time| NodePoolCondition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        last_transition_time: since,
        reason: reason.to_owned(),
        message: message.clone(),
    };
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let since = if c.status == value {
                c.last_transition_time.clone()
            } else {
                Time(now)
            };
            *c = new(since);
        }
        None => status.conditions.push(new(Time(now))),
    }
}
