//! Why a pool cannot be planned, naming the pool and the field.

use sluice_model::quantity::QuantityError;

/// A `NodePool` the reconciler cannot act on. Validation at the API
/// refuses these already; the reconciler still never panics on them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("NodePool: metadata.name: missing")]
    MissingName,
    #[error("NodePool {pool}: {field}: {source}")]
    Capacity {
        pool: String,
        field: &'static str,
        source: QuantityError,
    },
    #[error("NodePool {pool}: {field}: {value} does not fit in 64 bits")]
    CapacityTooLarge {
        pool: String,
        field: &'static str,
        value: i128,
    },
}
