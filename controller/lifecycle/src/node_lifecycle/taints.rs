//! The taints this controller owns on a node: NoSchedule ones that mirror
//! its conditions (and cordon), and the NoExecute `not-ready` /
//! `unreachable` that evict its pods. Taints of any other key are the
//! user's and are kept as they are.

use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Time};

/// The node's Ready condition is False.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node's Ready condition is Unknown: its kubelet is silent.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `spec.unschedulable` (cordon).
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";

/// Which NoSchedule taint each condition status calls for.
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    ("MemoryPressure", "True", MEMORY_PRESSURE),
    ("DiskPressure", "True", DISK_PRESSURE),
    ("PIDPressure", "True", PID_PRESSURE),
    ("NetworkUnavailable", "True", NETWORK_UNAVAILABLE),
];

const NO_SCHEDULE_KEYS: [&str; 7] = [
    NOT_READY,
    UNREACHABLE,
    UNSCHEDULABLE,
    MEMORY_PRESSURE,
    DISK_PRESSURE,
    PID_PRESSURE,
    NETWORK_UNAVAILABLE,
];

fn is(t: &Taint, key: &str, effect: &str) -> bool {
    t.key == key && t.effect == effect
}

/// The node's current taints.
pub fn of(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// A `not-ready` or `unreachable` NoExecute taint: the ones that evict.
pub fn is_eviction_taint(t: &Taint) -> bool {
    t.effect == NO_EXECUTE && [NOT_READY, UNREACHABLE].contains(&t.key.as_str())
}

/// The NoExecute taint of this controller the node carries, if any.
pub fn current_no_execute(taints: &[Taint]) -> Option<&'static str> {
    [NOT_READY, UNREACHABLE]
        .into_iter()
        .find(|k| taints.iter().any(|t| is(t, k, NO_EXECUTE)))
}

/// The node's taints with this controller's brought in line:
/// the NoSchedule ones its `conditions` and `unschedulable` call for, and
/// `no_execute` as the only NoExecute one of the two it owns. Taints that
/// stay keep their `timeAdded`; new ones get `now`.
pub fn desired(
    current: &[Taint],
    conditions: &[NodeCondition],
    unschedulable: bool,
    no_execute: Option<&str>,
    now: Timestamp,
) -> Vec<Taint> {
    let mut no_schedule: Vec<&str> = CONDITION_TAINTS
        .iter()
        .filter(|(kind, status, _)| {
            conditions
                .iter()
                .any(|c| c.type_ == *kind && c.status == *status)
        })
        .map(|(_, _, key)| *key)
        .collect();
    if unschedulable {
        no_schedule.push(UNSCHEDULABLE);
    }
    let wanted = |t: &Taint| {
        if t.effect == NO_SCHEDULE && NO_SCHEDULE_KEYS.contains(&t.key.as_str()) {
            no_schedule.contains(&t.key.as_str())
        } else if is_eviction_taint(t) {
            no_execute == Some(t.key.as_str())
        } else {
            true
        }
    };
    let mut out: Vec<Taint> = current.iter().filter(|t| wanted(t)).cloned().collect();
    let mut add: Vec<(&str, &str)> = no_schedule.iter().map(|k| (*k, NO_SCHEDULE)).collect();
    add.extend(no_execute.map(|k| (k, NO_EXECUTE)));
    add.sort();
    for (key, effect) in add {
        if !out.iter().any(|t| is(t, key, effect)) {
            out.push(Taint {
                key: key.into(),
                effect: effect.into(),
                time_added: Some(Time(now)),
                value: None,
            });
        }
    }
    out
}
