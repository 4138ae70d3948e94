//! Pure policy the API server (and later the decision loops) apply, with no
//! I/O: the PodDisruptionBudget arithmetic of the Eviction subresource.

pub mod disruption;
