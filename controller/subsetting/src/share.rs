//! How large a subset is and how it is split over zones.

use crate::service::TrafficPolicy;

/// `Cluster`: at most this many nodes per internal LB (N2).
pub const CLUSTER_LIMIT: usize = 25;
/// `Cluster` with a zone count dividing 24: upstream aims at 24 so every
/// zone gets the same share, rather than one zone holding the 25th
/// endpoint, which moves between zones as their node counts change.
pub const CLUSTER_EVEN_LIMIT: usize = 24;
/// `Local`: at most this many nodes with serving pods per internal LB (N3).
pub const LOCAL_LIMIT: usize = 250;

/// The subset's size limit for `candidates` eligible nodes in `zones`
/// zones holding at least one of them.
///
/// With 25 candidates or fewer under `Cluster`, every one is an endpoint
/// (N2 says so for 1–25 nodes), so the 24 rule only applies above 25.
pub fn subset_limit(policy: TrafficPolicy, candidates: usize, zones: usize) -> usize {
    match policy {
        TrafficPolicy::Local => LOCAL_LIMIT,
        TrafficPolicy::Cluster if candidates <= CLUSTER_LIMIT => CLUSTER_LIMIT,
        TrafficPolicy::Cluster if zones > 0 && CLUSTER_EVEN_LIMIT.is_multiple_of(zones) => {
            CLUSTER_EVEN_LIMIT
        }
        TrafficPolicy::Cluster => CLUSTER_LIMIT,
    }
}

/// How many members each zone gets: zones are visited from the fewest
/// candidates to the most (ties by name), each given
/// `remaining / zones left` but never more than it has, so the share a
/// small zone cannot use rolls over to the larger ones.
///
/// `counts` holds `(zone, candidates)`; the answer holds `(zone, quota)` in
/// the same order as `counts`.
pub fn zone_quotas<Z: Ord + Copy>(counts: &[(Z, usize)], limit: usize) -> Vec<(Z, usize)> {
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by(|&a, &b| (counts[a].1, counts[a].0).cmp(&(counts[b].1, counts[b].0)));
    let mut quotas: Vec<(Z, usize)> = counts.iter().map(|&(z, _)| (z, 0)).collect();
    let mut remaining = limit;
    let total = order.len();
    for (visited, &i) in order.iter().enumerate() {
        let share = remaining / (total - visited);
        let quota = share.min(counts[i].1);
        quotas[i].1 = quota;
        remaining -= quota;
    }
    quotas
}
