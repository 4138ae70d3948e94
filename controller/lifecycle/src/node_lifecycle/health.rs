//! A node's health from its Lease and its Ready heartbeat: once neither
//! has moved for the grace period, the kubelet is taken to be gone and the
//! conditions it owns are set to `Unknown`, as upstream's node lifecycle
//! controller does.

use k8s_openapi::api::core::v1::NodeCondition;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Lease, Node, Time};

use super::{after, Config};

/// The conditions the kubelet reports and that go `Unknown` with it.
pub const KUBELET_CONDITIONS: [&str; 4] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];
/// Reason of a condition whose kubelet stopped reporting.
pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";
/// Message of a condition whose kubelet stopped reporting.
pub const MESSAGE_UNKNOWN: &str = "Kubelet stopped posting node status.";
/// Reason of a condition the kubelet never reported.
pub const REASON_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Message of a condition the kubelet never reported.
pub const MESSAGE_NEVER_UPDATED: &str = "Kubelet never posted node status.";

/// The node's `Ready` condition, once this pass's changes are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Readiness {
    Ready,
    /// The kubelet reports `Ready=False`.
    NotReady,
    /// The kubelet is silent (`Ready=Unknown`) or never reported.
    Unknown,
}

/// What one pass decides about a node's health.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub readiness: Readiness,
    /// The node's new `status.conditions`, when they change.
    pub conditions: Option<Vec<NodeCondition>>,
    /// When the node goes silent if nothing is heard from it before.
    pub due: Option<Timestamp>,
}

/// Assess one node at `now`. The last sign of life is the later of the
/// Lease's `renewTime` and the Ready condition's `lastHeartbeatTime`; a
/// node that never reported Ready is given the start-up grace period from
/// its creation instead; neither counts from before the controller began
/// watching.
pub fn assess(node: &Node, lease: Option<&Lease>, config: &Config, now: Timestamp) -> Health {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready");
    let renewed = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    let heartbeat = ready
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0);
    let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let (last_seen, grace) = match ready {
        // A Ready condition without a heartbeat and no Lease: counted
        // from the node's creation.
        Some(_) => (renewed.max(heartbeat).or(created), config.grace_period),
        None => (renewed.max(created), config.startup_grace_period),
    };
    // Never from before this controller was watching (see
    // `Config::watching_since`).
    let last_seen = last_seen.max(config.watching_since);
    // A node with no time at all to go by (not even its creation) is
    // counted from now: it is never declared dead on no evidence.
    let deadline = after(last_seen.unwrap_or(now), grace);
    if now < deadline {
        let readiness = match ready.map(|c| c.status.as_str()) {
            Some("True") => Readiness::Ready,
            Some("False") => Readiness::NotReady,
            _ => Readiness::Unknown,
        };
        return Health {
            readiness,
            conditions: None,
            due: Some(deadline),
        };
    }
    let mut updated = conditions.clone();
    for kind in KUBELET_CONDITIONS {
        match updated.iter_mut().find(|c| c.type_ == kind) {
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_UNKNOWN.into());
                c.message = Some(MESSAGE_UNKNOWN.into());
                c.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
            None => updated.push(NodeCondition {
                type_: kind.into(),
                status: "Unknown".into(),
                reason: Some(REASON_NEVER_UPDATED.into()),
                message: Some(MESSAGE_NEVER_UPDATED.into()),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: Some(Time(now)),
            }),
        }
    }
    Health {
        readiness: Readiness::Unknown,
        conditions: (updated != conditions).then_some(updated),
        due: None,
    }
}
