//! How many nodes each zone of a pool should hold.

use std::collections::BTreeSet;

use sluice_model::node_pool::{NodePool, NodePoolSpec};

/// A pool's zones with their targets, as [`zone_targets`] reads the spec,
/// except that while autoscaling is enabled a zone whose size the cluster
/// autoscaler chose (`status.autoscaler.targetSizes`) holds that size,
/// within the pool's limits (per zone `minNodeCount..maxNodeCount`; with
/// total limits, at most `totalMaxNodeCount`). Also the zones whose size
/// the autoscaler owns.
pub fn pool_targets(
    pool: &NodePool,
    cluster_locations: &[String],
) -> (Vec<(String, usize)>, BTreeSet<String>) {
    let mut targets = zone_targets(&pool.spec, cluster_locations);
    let mut owned = BTreeSet::new();
    let Some(a) = pool.spec.autoscaling.as_ref().filter(|a| a.enabled) else {
        return (targets, owned);
    };
    let Some(sizes) = pool.status.as_ref().and_then(|s| s.autoscaler.as_ref()) else {
        return (targets, owned);
    };
    let bound = |v: Option<i32>, or: i64| v.map_or(or, |v| i64::from(v.max(0)));
    let (min, max) = if a.min_node_count.is_some() || a.max_node_count.is_some() {
        (
            bound(a.min_node_count, 0),
            bound(a.max_node_count, i64::MAX),
        )
    } else {
        (0, bound(a.total_max_node_count, i64::MAX))
    };
    for (zone, target) in &mut targets {
        if let Some(size) = sizes.target_sizes.get(zone) {
            let size = i64::from(*size).max(min).min(max).max(0);
            *target = usize::try_from(size).unwrap_or(0);
            owned.insert(zone.clone());
        }
    }
    (targets, owned)
}

/// The pool's zones in `locations` order (the cluster's when the pool
/// names none, as GKE does), each with its target: `initialNodeCount`, or
/// 0 when absent. With the autoscaler enabled the target is bounded by its
/// limits: per zone (`minNodeCount`..`maxNodeCount`), or in total
/// (`totalMinNodeCount`..`totalMaxNodeCount`, spread evenly, the first
/// zones taking the remainder), as GKE creates an autoscaled pool within
/// its limits.
pub fn zone_targets(spec: &NodePoolSpec, cluster_locations: &[String]) -> Vec<(String, usize)> {
    let zones = if spec.locations.is_empty() {
        cluster_locations
    } else {
        &spec.locations
    };
    let mut seen = std::collections::HashSet::new();
    let zones: Vec<&String> = zones.iter().filter(|z| seen.insert(*z)).collect();
    let mut per_zone = i64::from(spec.initial_node_count.unwrap_or(0).max(0));
    let mut total = None;
    if let Some(a) = spec.autoscaling.as_ref().filter(|a| a.enabled) {
        let bound = |v: Option<i32>, or: i64| v.map_or(or, |v| i64::from(v.max(0)));
        if a.min_node_count.is_some() || a.max_node_count.is_some() {
            per_zone = per_zone
                .max(bound(a.min_node_count, 0))
                .min(bound(a.max_node_count, i64::MAX));
        } else if a.total_min_node_count.is_some() || a.total_max_node_count.is_some() {
            let asked = per_zone.saturating_mul(zones.len() as i64);
            total = Some(
                asked
                    .max(bound(a.total_min_node_count, 0))
                    .min(bound(a.total_max_node_count, i64::MAX)),
            );
        }
    }
    let n = zones.len() as i64;
    zones
        .into_iter()
        .enumerate()
        .map(|(i, zone)| {
            let count = match total {
                Some(t) => t / n + i64::from((i as i64) < t % n),
                None => per_zone,
            };
            (zone.clone(), usize::try_from(count).unwrap_or(0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_model::node_pool::{NodePool, NodePoolAutoscaling};

    fn spec(zones: &[&str], initial: Option<i32>, a: Option<NodePoolAutoscaling>) -> NodePoolSpec {
        NodePoolSpec {
            locations: zones.iter().map(|z| z.to_string()).collect(),
            initial_node_count: initial,
            autoscaling: a,
            ..Default::default()
        }
    }

    fn counts(t: Vec<(String, usize)>) -> Vec<usize> {
        t.into_iter().map(|(_, c)| c).collect()
    }

    #[test]
    fn initial_node_count_applies_to_each_zone() {
        let t = zone_targets(&spec(&["a", "b"], Some(3), None), &[]);
        assert_eq!(t, [("a".to_string(), 3), ("b".to_string(), 3)]);
        assert_eq!(counts(zone_targets(&spec(&["a"], None, None), &[])), [0]);
    }

    #[test]
    fn the_cluster_locations_stand_in_for_none() {
        let t = zone_targets(&spec(&[], Some(1), None), &["x".into(), "y".into()]);
        assert_eq!(t, [("x".to_string(), 1), ("y".to_string(), 1)]);
    }

    #[test]
    fn autoscaling_limits_bound_the_target_only_when_enabled() {
        let per_zone = NodePoolAutoscaling {
            enabled: true,
            min_node_count: Some(2),
            max_node_count: Some(4),
            ..Default::default()
        };
        assert_eq!(
            counts(zone_targets(
                &spec(&["a"], Some(1), Some(per_zone.clone())),
                &[]
            )),
            [2]
        );
        assert_eq!(
            counts(zone_targets(
                &spec(&["a"], Some(9), Some(per_zone.clone())),
                &[]
            )),
            [4]
        );
        let off = NodePoolAutoscaling {
            enabled: false,
            ..per_zone
        };
        assert_eq!(
            counts(zone_targets(&spec(&["a"], Some(9), Some(off)), &[])),
            [9]
        );
    }

    fn autoscaled(a: NodePoolAutoscaling, sizes: &[(&str, i32)]) -> NodePool {
        let mut pool = NodePool::new("p", spec(&["a", "b"], Some(1), Some(a)));
        let status = sluice_model::node_pool::AutoscalerStatus {
            target_sizes: sizes.iter().map(|(z, n)| (z.to_string(), *n)).collect(),
            ..Default::default()
        };
        pool.status = Some(sluice_model::node_pool::NodePoolStatus {
            autoscaler: Some(status),
            ..Default::default()
        });
        pool
    }

    #[test]
    fn the_autoscalers_size_holds_within_the_limits() {
        let limits = NodePoolAutoscaling {
            enabled: true,
            min_node_count: Some(1),
            max_node_count: Some(5),
            ..Default::default()
        };
        // spec: C1, C6 — the autoscaler's size per zone, bounded by min..max;
        // a zone it has not sized keeps the spec's target.
        let (t, owned) = pool_targets(&autoscaled(limits.clone(), &[("a", 4)]), &[]);
        assert_eq!(counts(t), [4, 1]);
        assert_eq!(owned.into_iter().collect::<Vec<_>>(), ["a"]);
        let (t, _) = pool_targets(&autoscaled(limits.clone(), &[("a", 9), ("b", 0)]), &[]);
        assert_eq!(counts(t), [5, 1]);
        // spec: C1 — with total limits, a zone never holds more than the total.
        let total = NodePoolAutoscaling {
            enabled: true,
            total_max_node_count: Some(3),
            ..Default::default()
        };
        let (t, _) = pool_targets(&autoscaled(total, &[("a", 7), ("b", 0)]), &[]);
        assert_eq!(counts(t), [3, 0]);
        // Autoscaling off: the sizes it left are not read.
        let off = NodePoolAutoscaling {
            enabled: false,
            ..limits
        };
        let (t, owned) = pool_targets(&autoscaled(off, &[("a", 4)]), &[]);
        assert_eq!((counts(t), owned.len()), (vec![1, 1], 0));
    }

    #[test]
    fn total_limits_are_spread_over_the_zones() {
        let total = NodePoolAutoscaling {
            enabled: true,
            total_max_node_count: Some(5),
            ..Default::default()
        };
        // 3 zones × 3 asked = 9, capped at 5: 2, 2, 1.
        let t = zone_targets(&spec(&["a", "b", "c"], Some(3), Some(total)), &[]);
        assert_eq!(counts(t), [2, 2, 1]);
    }
}
