//! Pure scheduling decisions for the Sluice controller: which node a
//! pending pod goes to, decided as kube-scheduler's default profile
//! decides it, over a [`Cluster`] view the controller keeps up to date
//! from its Node and Pod watches. No I/O, no clock, no randomness: the
//! same view and pods give the same bindings.
//!
//! Filters, in upstream's order, each in its own module:
//! NodeUnschedulable and TaintToleration ([`taints`]), NodeAffinity
//! ([`node_affinity`]: `nodeSelector` and required terms), NodePorts
//! ([`host_ports`]), NodeResourcesFit ([`resources`]), PodTopologySpread
//! ([`topology_spread`]) and InterPodAffinity ([`inter_pod`]). Scores
//! ([`score`]): least allocated and balanced resources, `PreferNoSchedule`
//! taints, preferred node affinity, `ScheduleAnyway` spread and the pod's
//! preferred pod (anti-)affinity ([`pod_affinity_score`]), with the
//! default weights.
//!
//! Left out: preemption, volumes (binding, zones, limits), bound pods'
//! affinity terms in the score, image locality, the default (system)
//! spread constraints, DRA, extenders.

pub mod cluster;
mod counters;
pub mod error;
pub mod fit_error;
pub mod host_ports;
pub mod inter_pod;
pub mod node_affinity;
pub mod pod_affinity_score;
mod pod_info;
mod pod_terms;
pub mod resources;
pub mod schedule;
pub mod score;
pub mod taints;
pub mod topology_spread;

pub use cluster::Cluster;
pub use error::InputError;
pub use pod_info::pod_key;
pub use schedule::{filter_node, queue_order, schedule, schedule_all, wants_scheduling, Decision};

/// Reads every field of `pod` the scheduler uses, as it will when the pod
/// is pending: the first unreadable one is the error. The API server runs
/// this at admission, so a stored pod is one the scheduler can read.
pub fn check_pod(pod: &sluice_model::k8s::Pod) -> Result<(), InputError> {
    pod_info::PodInfo::parse(pod).map(drop)
}

#[cfg(test)]
mod tests;
