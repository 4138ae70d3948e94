//! A pool's size limits (C1, C6): per zone (`minNodeCount`/`maxNodeCount`)
//! or across its zones (`totalMinNodeCount`/`totalMaxNodeCount`), never
//! both. Below the minimum a pool only grows for pending pods and never
//! shrinks; above the maximum it only loses removable nodes and never
//! grows; in between both.

use sluice_model::node_pool::NodePoolAutoscaling;

use crate::options::DEFAULT_MAX_PER_ZONE;

/// The limits as the decisions use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limits {
    PerZone { min: i32, max: i32 },
    Total { min: i32, max: i32 },
}

impl Limits {
    /// Reads `spec.autoscaling`; the error names the field. Unset minimums
    /// are 0; an unset maximum is GKE's per-zone limit.
    pub fn of(a: &NodePoolAutoscaling) -> Result<Limits, (String, String)> {
        let per_zone = a.min_node_count.is_some() || a.max_node_count.is_some();
        let total = a.total_min_node_count.is_some() || a.total_max_node_count.is_some();
        if per_zone && total {
            return Err((
                "spec.autoscaling".into(),
                "per-zone (minNodeCount, maxNodeCount) and total (totalMinNodeCount, totalMaxNodeCount) limits may not be mixed".into(),
            ));
        }
        let (min, max, names) = if total {
            (
                a.total_min_node_count,
                a.total_max_node_count,
                ("totalMinNodeCount", "totalMaxNodeCount"),
            )
        } else {
            (
                a.min_node_count,
                a.max_node_count,
                ("minNodeCount", "maxNodeCount"),
            )
        };
        let min = min.unwrap_or(0);
        let max = max.unwrap_or(DEFAULT_MAX_PER_ZONE);
        for (v, name) in [(min, names.0), (max, names.1)] {
            if v < 0 {
                return Err((
                    format!("spec.autoscaling.{name}"),
                    format!("{v} must be greater than or equal to 0"),
                ));
            }
        }
        if min > max {
            return Err((
                format!("spec.autoscaling.{}", names.0),
                format!("{min} must be less than or equal to {} ({max})", names.1),
            ));
        }
        Ok(if total {
            Limits::Total { min, max }
        } else {
            Limits::PerZone { min, max }
        })
    }

    /// `(min, max)` as the status reports them: per zone, or in total.
    pub fn bounds(&self) -> (i32, i32) {
        match *self {
            Limits::PerZone { min, max } | Limits::Total { min, max } => (min, max),
        }
    }

    /// The most nodes zone `z` may hold, the other zones staying as they are.
    pub fn zone_max(&self, sizes: &[i32], z: usize) -> i32 {
        match *self {
            Limits::PerZone { max, .. } => max,
            Limits::Total { max, .. } => {
                let others: i32 = sizes
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != z)
                    .map(|(_, s)| *s)
                    .sum();
                max - others
            }
        }
    }

    /// How many nodes zone `z` may still gain.
    pub fn zone_headroom(&self, sizes: &[i32], z: usize) -> i32 {
        let size = sizes.get(z).copied().unwrap_or(0);
        (self.zone_max(sizes, z) - size).max(0)
    }

    /// Whether zone `z` may lose one node without going below the minimum.
    pub fn may_remove(&self, sizes: &[i32], z: usize) -> bool {
        let size = sizes.get(z).copied().unwrap_or(0);
        match *self {
            Limits::PerZone { min, .. } => size > min,
            Limits::Total { min, .. } => sizes.iter().sum::<i32>() > min,
        }
    }

    /// Whether the pool is at or over its maximum in zone `z`.
    pub fn at_max(&self, sizes: &[i32], z: usize) -> bool {
        self.zone_headroom(sizes, z) == 0
    }
}
