//! The autoscaling profiles (C9): when a node counts as under-used and how
//! long it must stay so before it is removed.

use sluice_model::cluster::AutoscalingProfile;
use sluice_model::k8s::jiff::SignedDuration;

/// A profile's scale-down parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A node whose utilisation is at or below this is a candidate.
    pub utilization: f64,
    /// How long a Ready node must stay unneeded before it goes.
    pub unneeded_time: SignedDuration,
    /// The same for a node that is not Ready.
    pub unready_time: SignedDuration,
}

/// `balanced`, the default: upstream's defaults (0.5, 10 min, 20 min),
/// which GKE documents for this profile.
pub const BALANCED: Thresholds = Thresholds {
    utilization: 0.5,
    unneeded_time: SignedDuration::from_secs(600),
    unready_time: SignedDuration::from_secs(1200),
};

/// `optimize-utilization`: GKE publishes no numbers, only that it "removes
/// more nodes, and removes them faster". Chosen here:
///
/// - threshold 0.7: a node at most 70 % requested is one whose pods usually
///   fit in the 30 %+ left on its neighbours at the same level, so a pool
///   running at 60–70 % still sheds nodes, where `balanced` keeps every
///   node above half. Higher (0.8, 0.9) mostly adds candidates whose pods
///   do not fit elsewhere and so costs simulation without removing more.
/// - 5 minutes unneeded: half of `balanced`, but not shorter than the
///   HorizontalPodAutoscaler's default scale-down stabilisation window
///   (300 s), so a node is not removed while HPA may still put replicas
///   back on it; batch work, which this profile is meant for, leaves nodes
///   idle for good once its jobs end, so waiting longer buys nothing.
/// - 10 minutes for unready nodes, halved the same way.
pub const OPTIMIZE_UTILIZATION: Thresholds = Thresholds {
    utilization: 0.7,
    unneeded_time: SignedDuration::from_secs(300),
    unready_time: SignedDuration::from_secs(600),
};

/// The parameters of `profile` (absent: `balanced`).
pub fn thresholds(profile: Option<AutoscalingProfile>) -> Thresholds {
    match profile {
        Some(AutoscalingProfile::OptimizeUtilization) => OPTIMIZE_UTILIZATION,
        Some(AutoscalingProfile::Balanced) | None => BALANCED,
    }
}

/// The profile's name as the status and explanations print it.
pub fn name(profile: Option<AutoscalingProfile>) -> &'static str {
    match profile {
        Some(AutoscalingProfile::OptimizeUtilization) => "optimize-utilization",
        Some(AutoscalingProfile::Balanced) | None => "balanced",
    }
}
