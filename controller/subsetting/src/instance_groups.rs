//! Without subsetting (N4): per zone one unmanaged instance group holding
//! every eligible node of every pool, shared by all LoadBalancer Services
//! that use instance groups.

use std::collections::BTreeMap;

use crate::node::Node;
use crate::subsets::Warning;

/// Above this many nodes in one instance group, the load balancer's
/// backend may spread traffic unevenly or drop it (N4).
pub const INSTANCE_GROUP_LIMIT: usize = 250;

/// The instance groups and a warning per group over the limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceGroups {
    /// Zone → the eligible nodes' names, sorted.
    pub zones: BTreeMap<String, Vec<String>>,
    /// One [`Warning::InstanceGroupOverLimit`] per zone over the limit,
    /// by zone.
    pub warnings: Vec<Warning>,
}

/// Groups the eligible nodes by zone. Nodes without a zone cannot join a
/// zonal group and are skipped, as are duplicate names (first one wins):
/// the groups are a view of the nodes, not a validation of them.
pub fn instance_groups(nodes: &[Node]) -> InstanceGroups {
    let mut zones: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes {
        if node.is_eligible() && node.validate().is_ok() {
            zones
                .entry(node.zone.clone())
                .or_default()
                .push(node.name.clone());
        }
    }
    let mut warnings = Vec::new();
    for (zone, names) in zones.iter_mut() {
        names.sort();
        names.dedup();
        if names.len() > INSTANCE_GROUP_LIMIT {
            warnings.push(Warning::InstanceGroupOverLimit {
                zone: zone.clone(),
                nodes: names.len(),
                limit: INSTANCE_GROUP_LIMIT,
            });
        }
    }
    InstanceGroups { zones, warnings }
}
