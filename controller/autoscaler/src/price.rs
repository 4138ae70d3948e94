//! The price model behind the `price` expander: what a node and a pod cost
//! per hour. Sluice's pools name a capacity rather than a machine type, so
//! a pool without a price of its own is priced from its capacity at the
//! per-core and per-GiB rates of upstream's GCE price model (n1 on-demand),
//! spot at its preemptible rates.

/// On-demand dollars per core-hour.
pub const CPU_PER_HOUR: f64 = 0.033174;
/// On-demand dollars per GiB-hour.
pub const MEMORY_GIB_PER_HOUR: f64 = 0.004446;
/// Spot (preemptible) dollars per core-hour.
pub const SPOT_CPU_PER_HOUR: f64 = 0.00698;
/// Spot (preemptible) dollars per GiB-hour.
pub const SPOT_MEMORY_GIB_PER_HOUR: f64 = 0.00094;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A node of this capacity per hour, spot discounted.
pub fn default_node_price(cpu_milli: i128, memory_bytes: i128, spot: bool) -> f64 {
    let (c, m) = if spot {
        (SPOT_CPU_PER_HOUR, SPOT_MEMORY_GIB_PER_HOUR)
    } else {
        (CPU_PER_HOUR, MEMORY_GIB_PER_HOUR)
    };
    cpu_milli as f64 / 1000.0 * c + memory_bytes as f64 / GIB * m
}

/// What pods requesting this much would cost on on-demand nodes per hour.
pub fn pod_price(cpu_milli: i128, memory_bytes: i128) -> f64 {
    default_node_price(cpu_milli, memory_bytes, false)
}

/// The price of upstream's stabilisation pod (500m, 500 MiB), added to both
/// sides of the ratio so that tiny scale-ups do not swing it.
pub fn stabilisation_price() -> f64 {
    pod_price(500, 500 * 1024 * 1024)
}

/// The node size upstream prefers for a cluster of `nodes` nodes (cores),
/// bigger nodes for bigger clusters.
pub fn preferred_node_cores(nodes: usize) -> f64 {
    match nodes {
        0..=2 => 1.0,
        3..=6 => 2.0,
        7..=20 => 4.0,
        21..=60 => 8.0,
        61..=200 => 16.0,
        _ => 32.0,
    }
}
