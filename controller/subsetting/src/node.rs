//! A node as the backend decisions see it: its name, its zone and the facts
//! that leave it out of every instance group and NEG.

use crate::error::InputError;

/// The taint the cluster autoscaler puts on a node it is about to delete.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// The label that keeps a node out of external and internal load balancers.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// One node. Readiness is deliberately absent from the eligibility facts:
/// for L4 load balancers a not-Ready node stays a backend (the load
/// balancer's own health check takes it out of rotation), so that a short
/// kubelet outage does not churn every NEG in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Carries the taint [`TO_BE_DELETED_TAINT`].
    pub to_be_deleted: bool,
    /// Carries the label [`EXCLUDE_LABEL`] (any value).
    pub exclude_label: bool,
    /// Has a `deletionTimestamp`.
    pub deleting: bool,
    /// Is being drained (Sluice's `sluice.dev/drain` annotation): its pods
    /// are leaving, so new connections should not be sent to it.
    pub draining: bool,
}

/// Why a node is left out of every group and subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    ToBeDeletedByClusterAutoscaler,
    ExcludeFromLoadBalancersLabel,
    BeingDeleted,
    BeingDrained,
}

impl Node {
    /// A node in `zone` with nothing that excludes it.
    pub fn new(name: impl Into<String>, zone: impl Into<String>) -> Self {
        Node {
            name: name.into(),
            zone: zone.into(),
            to_be_deleted: false,
            exclude_label: false,
            deleting: false,
            draining: false,
        }
    }

    /// The first reason the node is left out, if any.
    pub fn exclusion(&self) -> Option<Exclusion> {
        if self.to_be_deleted {
            Some(Exclusion::ToBeDeletedByClusterAutoscaler)
        } else if self.exclude_label {
            Some(Exclusion::ExcludeFromLoadBalancersLabel)
        } else if self.deleting {
            Some(Exclusion::BeingDeleted)
        } else if self.draining {
            Some(Exclusion::BeingDrained)
        } else {
            None
        }
    }

    pub fn is_eligible(&self) -> bool {
        self.exclusion().is_none()
    }

    /// Refuses a node without a name or a zone: both key the decisions.
    pub fn validate(&self) -> Result<(), InputError> {
        if self.name.is_empty() {
            return Err(InputError::EmptyNodeName);
        }
        if self.zone.is_empty() {
            return Err(InputError::MissingZone {
                node: self.name.clone(),
            });
        }
        Ok(())
    }
}
