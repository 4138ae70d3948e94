//! Splitting a scale-up between a pool's zones under `locationPolicy:
//! BALANCED` (C8): one node at a time to the zone that has the fewest,
//! among those that may still grow, so sizes end as even as the limits
//! allow. Scale-down never rebalances, as upstream and GKE.

use crate::snapshot::PoolView;

/// Per zone of `pool` (indices into its zones), the nodes to add, out of
/// `count`, over the `zones` that may take them. Less than `count` in all
/// when the limits run out.
pub(crate) fn split(pool: &PoolView<'_>, zones: &[usize], count: usize) -> Vec<(usize, i32)> {
    let mut sizes = pool.sizes.clone();
    let mut added = vec![0i32; pool.zones.len()];
    for _ in 0..count {
        let next = zones
            .iter()
            .copied()
            .filter(|&z| pool.limits.zone_headroom(&sizes, z) > 0)
            .min_by_key(|&z| (sizes[z], z));
        let Some(z) = next else { break };
        sizes[z] += 1;
        added[z] += 1;
    }
    added
        .into_iter()
        .enumerate()
        .filter(|(_, n)| *n > 0)
        .collect()
}
