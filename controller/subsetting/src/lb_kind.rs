//! What a LoadBalancer Service becomes (P7) and which backends an internal
//! one uses (N5). Both are decided once, at creation, and kept: the cloud
//! cannot convert a load balancer in place, so a later annotation change
//! is reported as a disagreement rather than acted on.

use std::collections::BTreeMap;
use std::time::SystemTime;

/// `networking.gke.io/load-balancer-type`.
pub const LB_TYPE: &str = "networking.gke.io/load-balancer-type";
/// The legacy spelling of [`LB_TYPE`].
pub const LEGACY_LB_TYPE: &str = "cloud.google.com/load-balancer-type";
/// `cloud.google.com/l4-rbs`: `"enabled"` makes a backend-service LB.
pub const L4_RBS: &str = "cloud.google.com/l4-rbs";

/// The backends of an internal load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalBackend {
    /// GCE_VM_IP NEGs, one per zone for this Service ([`crate::subsets`]).
    Negs,
    /// The shared per-zone instance groups ([`crate::instance_groups`]).
    InstanceGroups,
}

/// The kind of load balancer a Service got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbKind {
    Internal(InternalBackend),
    /// External, backend-service based (`l4-rbs: "enabled"` at creation).
    ExternalBackendService,
    /// External, target-pool based.
    ExternalTargetPool,
}

/// What the annotations ask for, without the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestedKind {
    Internal,
    ExternalBackendService,
    ExternalTargetPool,
}

/// Reads the annotations: internal if either type annotation says
/// `"Internal"`, else external with or without `l4-rbs`.
pub fn requested_kind(annotations: &BTreeMap<String, String>) -> RequestedKind {
    let is = |key: &str, value: &str| annotations.get(key).is_some_and(|v| v == value);
    if is(LB_TYPE, "Internal") || is(LEGACY_LB_TYPE, "Internal") {
        RequestedKind::Internal
    } else if is(L4_RBS, "enabled") {
        RequestedKind::ExternalBackendService
    } else {
        RequestedKind::ExternalTargetPool
    }
}

/// GKE subsetting for the cluster: off, or on since a time. It can be
/// turned on, never off (N5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Subsetting {
    pub enabled_since: Option<SystemTime>,
}

/// Subsetting cannot be turned off once on (N5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Cluster: spec.networkConfig.enableL4ilbSubsetting: cannot be turned off once on")]
pub struct CannotDisableSubsetting;

impl Subsetting {
    /// The setting after the user asks for `enabled` at `now`: turning it
    /// on again keeps the first time, turning it off is refused.
    pub fn set(self, enabled: bool, now: SystemTime) -> Result<Self, CannotDisableSubsetting> {
        match (self.enabled_since, enabled) {
            (Some(_), false) => Err(CannotDisableSubsetting),
            (Some(_), true) => Ok(self),
            (None, true) => Ok(Subsetting {
                enabled_since: Some(now),
            }),
            (None, false) => Ok(self),
        }
    }

    /// The backends of an internal LB created at `created`: NEGs only if
    /// subsetting was already on then (a creation in the same instant
    /// counts as after); older LBs keep their instance groups.
    pub fn internal_backend(&self, created: SystemTime) -> InternalBackend {
        match self.enabled_since {
            Some(since) if created >= since => InternalBackend::Negs,
            _ => InternalBackend::InstanceGroups,
        }
    }
}

/// The kind a Service gets when its load balancer is created at `created`.
pub fn kind_at_creation(
    annotations: &BTreeMap<String, String>,
    subsetting: &Subsetting,
    created: SystemTime,
) -> LbKind {
    match requested_kind(annotations) {
        RequestedKind::Internal => LbKind::Internal(subsetting.internal_backend(created)),
        RequestedKind::ExternalBackendService => LbKind::ExternalBackendService,
        RequestedKind::ExternalTargetPool => LbKind::ExternalTargetPool,
    }
}

/// A Service's kind after creation: always the recorded one, with what the
/// annotations now ask for when that differs (for the status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindDecision {
    pub kind: LbKind,
    pub annotation_disagrees: Option<RequestedKind>,
}

/// Keeps `recorded` and reports annotations that now ask for another kind.
pub fn kind_after_creation(
    recorded: LbKind,
    annotations: &BTreeMap<String, String>,
) -> KindDecision {
    let requested = requested_kind(annotations);
    let recorded_request = match recorded {
        LbKind::Internal(_) => RequestedKind::Internal,
        LbKind::ExternalBackendService => RequestedKind::ExternalBackendService,
        LbKind::ExternalTargetPool => RequestedKind::ExternalTargetPool,
    };
    KindDecision {
        kind: recorded,
        annotation_disagrees: (requested != recorded_request).then_some(requested),
    }
}
