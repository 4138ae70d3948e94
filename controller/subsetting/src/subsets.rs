//! The subsets with GKE subsetting on (N1–N3): per internal LoadBalancer
//! Service, one GCE_VM_IP NEG per zone and the nodes in it.
//!
//! - `Cluster` (N2): every eligible node is a candidate, serving pod or
//!   not; 25 or fewer are all endpoints, more give a subset of 25 (24 when
//!   the zone count divides 24, see [`crate::share::subset_limit`]).
//! - `Local` (N3): only eligible nodes with a serving pod are candidates,
//!   at most 250 of them; more give a [`Warning::LocalOverLimit`].
//!
//! The subset is split over zones by [`crate::share::zone_quotas`], and in
//! each zone previous members stay while they are candidates and the zone
//! has room; the rest are the candidates of lowest [`crate::rank`]. A node
//! may be in the NEGs of many Services.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::InputError;
use crate::incremental::SubsetState;
use crate::node::Node;
use crate::service::{ServiceKey, SubsetService};

/// One Service's NEGs: per zone (every zone with an eligible node, so a
/// zone's NEG exists even while empty), the member nodes' names, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subset {
    pub zones: BTreeMap<String, Vec<String>>,
}

impl Subset {
    /// Every member, any zone.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.zones.values().flatten().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.zones.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Something the caller reports as an Event and a status message: the
/// decision was made, but not everything asked for could be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// N3: more nodes run serving pods than an internal LB can hold.
    LocalOverLimit {
        service: ServiceKey,
        serving_nodes: usize,
        limit: usize,
    },
    /// N4: an instance group holds more nodes than the LB spreads evenly.
    InstanceGroupOverLimit {
        zone: String,
        nodes: usize,
        limit: usize,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::LocalOverLimit {
                service,
                serving_nodes,
                limit,
            } => write!(
                f,
                "Service {service}: {serving_nodes} nodes run serving pods; an internal load \
                 balancer with externalTrafficPolicy Local uses at most {limit} of them"
            ),
            Warning::InstanceGroupOverLimit { zone, nodes, limit } => write!(
                f,
                "instance group of zone {zone}: {nodes} nodes, more than {limit}; traffic \
                 may be uneven or lost"
            ),
        }
    }
}

/// The subsets of every Service, and the warnings to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub subsets: BTreeMap<ServiceKey, Subset>,
    pub warnings: Vec<Warning>,
}

/// Every Service's subsets from scratch, keeping members of `previous`
/// (the subsets last written, by Service) where the rules allow, so that a
/// recompute after a restart does not reshuffle the NEGs.
pub fn compute(
    nodes: &[Node],
    services: &[SubsetService],
    previous: &BTreeMap<ServiceKey, Subset>,
) -> Result<Outcome, InputError> {
    Ok(SubsetState::new(nodes, services, previous)?.outcome())
}
