//! Why an operation cannot be planned, naming the field and the value.

use sluice_model::operation::OperationType;
use sluice_nodepools::PlanError;

#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("operation: metadata.name is missing")]
    MissingName,
    #[error("node pool: metadata.name is missing")]
    MissingPoolName,
    #[error(
        "operation {op}: spec.operationType {found:?} is not UPGRADE_NODES or AUTO_UPGRADE_NODES"
    )]
    NotAnUpgrade { op: String, found: OperationType },
    #[error("operation {op}: spec.targetLink {link:?} does not name a node pool (/apis/sluice.dev/v1/nodepools/<name>)")]
    NoPool { op: String, link: String },
    #[error("operation {op}: spec.targetLink names node pool {linked:?}, but node pool {given:?} was given")]
    WrongPool {
        op: String,
        linked: String,
        given: String,
    },
    #[error("operation {op}: spec.upgradeSettings.{field}: must be 0 or more, got {value}")]
    Negative {
        op: String,
        field: &'static str,
        value: i32,
    },
    #[error("operation {op}: spec.upgradeSettings: maxSurge and maxUnavailable may not both be 0")]
    NothingAtOnce { op: String },
    #[error("operation {op}: spec.action: ROLLBACK: the upgrade of node pool {pool:?} completed, and a completed upgrade cannot be rolled back: downgrade instead (a new upgrade to the earlier version)")]
    RollbackAfterCompletion { op: String, pool: String },
    #[error("operation {op}: spec.config: {source}")]
    TargetConfig { op: String, source: PlanError },
    #[error(transparent)]
    Pool(#[from] PlanError),
}
