//! Pure policy the API server, the decision loops and the node agent apply,
//! with no I/O: the PodDisruptionBudget arithmetic of evictions, the
//! eviction reasons with their grace caps and drain rules, and when a
//! drained node is out of the load balancers.

pub mod balancers;
pub mod disruption;
pub mod eviction;
