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

/// Keeps the load balancers from emptying because of drains alone: when
/// no node of `nodes` is eligible but some are left out only because they
/// are being drained, those count as eligible again (their `draining`
/// cleared). EndpointSlices fall back to serving terminating endpoints for
/// the same reason: with every node draining at once (a blue pool with no
/// green node yet) a Service would otherwise have no backend, and the
/// load balancer would send to whatever it still knew, deleted nodes
/// included. Once any node is eligible the draining ones leave again.
/// Whether the fallback applied.
pub fn fall_back_to_draining(nodes: &mut [Node]) -> bool {
    if nodes
        .iter()
        .any(|n| n.is_eligible() && n.validate().is_ok())
    {
        return false;
    }
    let mut applied = false;
    for n in nodes
        .iter_mut()
        .filter(|n| n.exclusion() == Some(Exclusion::BeingDrained))
    {
        n.draining = false;
        applied = true;
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draining(name: &str) -> Node {
        Node {
            draining: true,
            ..Node::new(name, "zone-a")
        }
    }

    #[test]
    fn every_node_draining_keeps_them_all_behind_the_load_balancer() {
        // spec: N2, U1 — a Service keeps backends while all drain at once.
        let mut nodes = vec![draining("a"), draining("b")];
        assert!(fall_back_to_draining(&mut nodes));
        assert!(nodes.iter().all(Node::is_eligible));
    }

    #[test]
    fn one_eligible_node_lets_the_draining_ones_go() {
        let mut nodes = vec![draining("a"), Node::new("green", "zone-b")];
        assert!(!fall_back_to_draining(&mut nodes));
        assert!(!nodes[0].is_eligible());
    }

    #[test]
    fn harder_exclusions_are_never_undone() {
        // A node to be deleted, labelled out or being deleted stays out,
        // draining or not; only the drain is a soft exclusion.
        let gone = Node {
            to_be_deleted: true,
            ..draining("gone")
        };
        let labelled = Node {
            exclude_label: true,
            ..Node::new("labelled", "zone-a")
        };
        let deleting = Node {
            deleting: true,
            ..draining("deleting")
        };
        let mut nodes = vec![gone, labelled, deleting, draining("d")];
        assert!(fall_back_to_draining(&mut nodes));
        let eligible: Vec<&str> = nodes
            .iter()
            .filter(|n| n.is_eligible())
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(eligible, ["d"]);
        let mut none: Vec<Node> = Vec::new();
        assert!(!fall_back_to_draining(&mut none));
    }
}
