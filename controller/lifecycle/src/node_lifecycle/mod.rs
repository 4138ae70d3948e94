//! Node lifecycle, as upstream's nodelifecycle controller and its
//! taint-eviction manager decide it, for one pass at an injected `now`:
//!
//! - [`health`]: a node whose Lease and Ready heartbeat are older than the
//!   grace period gets its kubelet's conditions set to `Unknown`;
//! - [`taints`]: conditions become NoSchedule taints, and a node not Ready
//!   gets `not-ready` (Ready=False) or `unreachable` (Ready=Unknown)
//!   NoExecute taints, lifted when it is Ready again;
//! - [`zones`]: new NoExecute taints are paced per zone by its disruption;
//! - [`eviction`]: pods on a NoExecute-tainted node are deleted once their
//!   tolerations run out.
//!
//! [`reconcile`] returns the writes and when the next pass is due.

pub mod eviction;
pub mod health;
pub mod taints;
pub mod zones;

#[cfg(test)]
mod tests;

use std::borrow::Borrow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Lease, Node, Pod};
use sluice_model::policy::disruption::PodFacts;

use crate::endpoint_slices::desired::ZONE_LABEL;
pub use eviction::{EvictionCause, Verdict};
pub use health::Readiness;
pub use zones::{Gate, ZoneState, ZoneStatus};

/// The namespace of the nodes' Leases (one per node, of the node's name).
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Tunables, with upstream's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `--node-monitor-grace-period`: silence after which a node is
    /// `Unknown` (40 s).
    pub grace_period: SignedDuration,
    /// `--node-startup-grace-period`: the same for a node that never
    /// reported Ready (60 s).
    pub startup_grace_period: SignedDuration,
    /// `--unhealthy-zone-threshold` (0.55).
    pub unhealthy_zone_threshold: f64,
    /// `--large-cluster-size-threshold` (50).
    pub large_cluster_size: usize,
    /// `--node-eviction-rate`, nodes per second (0.1).
    pub eviction_rate: f64,
    /// `--secondary-node-eviction-rate` (0.01).
    pub secondary_eviction_rate: f64,
    /// When this controller began watching. Silence is counted from no
    /// earlier: upstream times a node's silence from its own observations
    /// (`probeTimestamp`, set when it first sees the node), so a restarted
    /// controller gives every node a full grace period instead of reading
    /// its own downtime, when no Lease could be renewed, as theirs.
    pub watching_since: Option<Timestamp>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            grace_period: SignedDuration::from_secs(40),
            startup_grace_period: SignedDuration::from_secs(60),
            unhealthy_zone_threshold: 0.55,
            large_cluster_size: 50,
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
            watching_since: None,
        }
    }
}

/// A write to one Node; `None` leaves that part as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUpdate {
    pub node: String,
    /// The whole new `status.conditions` (status subresource).
    pub conditions: Option<Vec<NodeCondition>>,
    /// The whole new `spec.taints`.
    pub taints: Option<Vec<Taint>>,
}

/// A pod named by an action.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// For a delete precondition, so a new pod of the same name is spared.
    pub uid: Option<String>,
    pub node: String,
}

/// Delete a pod for a NoExecute taint.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEviction {
    pub pod: PodRef,
    pub taint: Taint,
    pub cause: EvictionCause,
}

impl PodEviction {
    /// The event message for the pod.
    pub fn message(&self) -> String {
        let taint = format!("{}:{}", self.taint.key, self.taint.effect);
        match self.cause {
            EvictionCause::NotTolerated => {
                format!("Taint manager: deleting pod: it does not tolerate {taint}")
            }
            EvictionCause::TolerationExpired { toleration_seconds } => format!(
                "Taint manager: deleting pod: its toleration of {taint} ran out after {toleration_seconds}s"
            ),
        }
    }
}

/// What one pass decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LifecyclePlan {
    /// By node name.
    pub node_updates: Vec<NodeUpdate>,
    /// Pods on silent nodes still reported Ready: set their `Ready`
    /// condition to False, as upstream does, so their endpoints stop
    /// being ready before the pods are evicted.
    pub mark_not_ready: Vec<PodRef>,
    /// By namespace and name.
    pub evictions: Vec<PodEviction>,
    /// Each zone's disruption (the key is the node's
    /// `topology.kubernetes.io/zone`, empty without one).
    pub zones: BTreeMap<String, ZoneStatus>,
    /// When the next pass is due if nothing changes before: a node's
    /// grace running out, a paced taint, a toleration running out.
    pub requeue_after: Option<SignedDuration>,
}

/// `t + d`, at the end of time rather than overflowing.
pub(crate) fn after(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.saturating_add(d).unwrap_or(Timestamp::MAX)
}

fn zone_of(node: &Node) -> String {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ZONE_LABEL))
        .cloned()
        .unwrap_or_default()
}

/// One pass over every node at `now`: the leases are matched to nodes by
/// name in [`LEASE_NAMESPACE`], the pods by `spec.nodeName`.
///
/// The objects may be owned or shared (`Borrow`): a caller holding an
/// informer's `Arc`s passes them without copying thousands of Nodes.
pub fn reconcile<N: Borrow<Node>, L: Borrow<Lease>, P: Borrow<Pod>>(
    nodes: &[N],
    leases: &[L],
    pods: &[P],
    config: &Config,
    now: Timestamp,
) -> LifecyclePlan {
    let leases: BTreeMap<&str, &Lease> = leases
        .iter()
        .map(Borrow::borrow)
        .filter(|l| l.metadata.namespace.as_deref() == Some(LEASE_NAMESPACE))
        .filter_map(|l| Some((l.metadata.name.as_deref()?, l)))
        .collect();
    let mut sorted: Vec<(&str, &Node)> = nodes
        .iter()
        .map(Borrow::borrow)
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect();
    sorted.sort_by_key(|(name, _)| *name);

    let mut plan = LifecyclePlan::default();
    let mut due: Vec<Timestamp> = Vec::new();
    let assessed: Vec<(&str, &Node, health::Health)> = sorted
        .into_iter()
        .map(|(name, node)| {
            let h = health::assess(node, leases.get(name).copied(), config, now);
            (name, node, h)
        })
        .collect();

    let mut counts: BTreeMap<String, (usize, usize, Option<Timestamp>)> = BTreeMap::new();
    for (_, node, h) in &assessed {
        let entry = counts.entry(zone_of(node)).or_default();
        entry.0 += 1;
        if h.readiness != Readiness::Ready {
            entry.1 += 1;
        }
        let current = taints::of(node);
        let last = current
            .iter()
            .filter(|t| taints::is_eviction_taint(t))
            .filter_map(|t| t.time_added.as_ref().map(|t| t.0))
            .max();
        entry.2 = entry.2.max(last);
    }
    plan.zones = counts
        .into_iter()
        .map(|(zone, (n, not_ready, last))| {
            let mut status = ZoneStatus::new(n, not_ready, config);
            status.last_taint = last;
            (zone, status)
        })
        .collect();
    let halt = zones::all_fully_disrupted(&plan.zones);

    let mut node_taints: BTreeMap<&str, (Vec<Taint>, Readiness)> = BTreeMap::new();
    for (name, node, h) in assessed {
        due.extend(h.due);
        let current = taints::of(node);
        let no_execute = if halt {
            None
        } else {
            no_execute_taint(&mut plan.zones, node, current, h.readiness, now, &mut due)
        };
        let conditions = h.conditions.clone().unwrap_or_else(|| {
            node.status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default()
        });
        let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        let wanted = taints::desired(current, &conditions, unschedulable, no_execute, now);
        let changed_taints = (wanted != current).then(|| wanted.clone());
        if h.conditions.is_some() || changed_taints.is_some() {
            plan.node_updates.push(NodeUpdate {
                node: name.to_string(),
                conditions: h.conditions,
                taints: changed_taints,
            });
        }
        node_taints.insert(name, (wanted, h.readiness));
    }

    for pod in pods.iter().map(Borrow::borrow) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let Some((node_taints, readiness)) = node_taints.get(node) else {
            continue;
        };
        let facts = PodFacts::of(&pod.metadata, pod.status.as_ref());
        if facts.deleting {
            continue;
        }
        let pod_ref = PodRef {
            namespace: facts.namespace.clone(),
            name: facts.name.clone(),
            uid: pod.metadata.uid.clone(),
            node: node.to_string(),
        };
        match eviction::verdict(pod, node_taints, now) {
            Verdict::Evict { taint, cause } => {
                plan.evictions.push(PodEviction {
                    pod: pod_ref,
                    taint,
                    cause,
                });
                continue;
            }
            Verdict::Until(t) => due.push(t),
            Verdict::Tolerated => {}
        }
        if *readiness == Readiness::Unknown && facts.ready {
            plan.mark_not_ready.push(pod_ref);
        }
    }
    plan.evictions.sort_by(|a, b| a.pod.cmp(&b.pod));
    plan.mark_not_ready.sort();
    plan.requeue_after = due
        .into_iter()
        .min()
        .map(|t| t.duration_since(now).max(SignedDuration::ZERO));
    plan
}

/// The NoExecute taint the node should carry after this pass. A node
/// that carries one already changes it at once; a node that carries none
/// gets its first only when its zone's pace allows, which then counts as
/// the zone's latest.
fn no_execute_taint(
    zones: &mut BTreeMap<String, ZoneStatus>,
    node: &Node,
    current: &[Taint],
    readiness: Readiness,
    now: Timestamp,
    due: &mut Vec<Timestamp>,
) -> Option<&'static str> {
    let wanted = match readiness {
        Readiness::Ready => return None,
        Readiness::NotReady => taints::NOT_READY,
        Readiness::Unknown => taints::UNREACHABLE,
    };
    if taints::current_no_execute(current).is_some() {
        return Some(wanted);
    }
    let zone = zones.get_mut(&zone_of(node))?;
    match zone.gate(now) {
        Gate::Open => {
            zone.last_taint = Some(now);
            Some(wanted)
        }
        Gate::Until(t) => {
            due.push(t);
            None
        }
        Gate::Closed => None,
    }
}
