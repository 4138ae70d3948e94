//! Pure policy the API server, the decision loops and the node agent apply,
//! with no I/O: the PodDisruptionBudget arithmetic of evictions and the
//! eviction reasons with their grace caps and drain rules.

pub mod disruption;
pub mod eviction;
