//! `Operation` (`sluice.dev/v1`): one long-running action (an upgrade, a
//! resize), spelled like GKE's `projects.locations.operations`. The
//! controller advances it step by step from what the store holds, so a
//! controller killed mid-way resumes it (DESIGN).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::k8s::Time;
use crate::kind::sluice_kind;
use crate::node_pool::{NodeConfig, UpgradeSettings};

sluice_kind! {
    /// An operation as a Kubernetes object.
    Operation {
        spec: OperationSpec,
        status: OperationStatus,
        plural: "operations",
        scope: Cluster,
        validate: crate::validation::validate_operation,
    }
}

/// What the operation does, to what; fixed once created, but for
/// `action`, the one field a user writes to steer a running upgrade.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationSpec {
    pub operation_type: OperationType,
    /// The object acted on, as an API path
    /// (`/apis/sluice.dev/v1/nodepools/pool-a`).
    pub target_link: String,
    /// Node upgrades: the version the nodes move to (GKE's `nodeVersion`
    /// of `UpgradeNodePool`); absent: the pool's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_version: Option<String>,
    /// Node upgrades: the node config the nodes move to, whole; absent:
    /// the pool's. A change of labels or taints alone is applied to the
    /// nodes in place (U7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<NodeConfig>,
    /// Node upgrades: the pool's `upgradeSettings` when the operation was
    /// made, so that editing the pool does not change a running upgrade;
    /// absent: the defaults (`maxSurge` 1, `maxUnavailable` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_settings: Option<UpgradeSettings>,
    /// Node upgrades: what the user asks of a running upgrade (U6); the
    /// latest value written wins. Absent: run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<OperationAction>,
}

impl OperationSpec {
    /// The path prefix of a node pool's `targetLink`.
    pub const NODE_POOL_LINK: &'static str = "/apis/sluice.dev/v1/nodepools/";

    /// An operation of `operation_type` on `target_link`, with nothing else set.
    pub fn new(operation_type: OperationType, target_link: impl Into<String>) -> Self {
        OperationSpec {
            operation_type,
            target_link: target_link.into(),
            node_version: None,
            config: None,
            upgrade_settings: None,
            action: None,
        }
    }

    /// The node pool `targetLink` names, if it names one.
    pub fn node_pool(&self) -> Option<&str> {
        self.target_link
            .strip_prefix(Self::NODE_POOL_LINK)
            .filter(|name| !name.is_empty() && !name.contains('/'))
    }
}

/// What a user asks of a running node upgrade, by writing `spec.action`
/// (never the status): `gcloud container operations cancel`, and the
/// node-pool commands that resume or roll back an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationAction {
    /// Pause: nodes whose upgrade started finish it, no other node starts.
    Cancel,
    /// Go on after a cancel: the nodes not yet upgraded are.
    Resume,
    /// Put the upgraded nodes back on the pool's version and config; not
    /// after the upgrade completed (downgrade the pool instead) and not
    /// undone by a later value.
    Rollback,
}

/// GKE's operation types that Sluice's controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationType {
    UpgradeMaster,
    UpgradeNodes,
    AutoUpgradeNodes,
    AutoRepairNodes,
    CreateNodePool,
    DeleteNodePool,
    SetNodePoolSize,
    SetNodePoolManagement,
    SetMaintenancePolicy,
    UpdateCluster,
}

/// Where the operation stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatus {
    /// GKE's operation `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub end_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<OperationProgress>,
    /// The zone being worked on (a surge upgrade goes one zone at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Things the user should know that do not stop the operation (U5:
    /// parallel drains of nodes behind `externalTrafficPolicy: Local`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// GKE's operation `Status` (`PENDING`, `RUNNING`, `DONE`, `ABORTING`),
/// with the states of a node upgrade that GKE reports in its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationState {
    /// Not started: waiting for a maintenance window or for capacity.
    Pending,
    Running,
    /// Cancel asked: the nodes whose upgrade started are finishing.
    Cancelling,
    /// Paused after a cancel, nothing in flight: resume or roll back.
    Cancelled,
    /// Putting the upgraded nodes back on the pool's version and config.
    RollingBack,
    /// The rollback finished: the pool is as before the operation.
    RolledBack,
    /// Completed.
    Done,
    Aborting,
    /// Stopped for good on an error named in `statusMessage`.
    Failed,
}

impl OperationState {
    /// Nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OperationState::Done | OperationState::RolledBack | OperationState::Failed
        )
    }
}

/// Progress of the operation or of one of its stages (B1–B5's phases, a
/// zone of a surge upgrade).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationProgress {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperationState>,
    /// E.g. `nodes_total`, `nodes_done`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<OperationProgress>,
    /// Why the stage is not moving now, one reason a line (a refusing
    /// PodDisruptionBudget, quota, a closed maintenance window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocking: Vec<String>,
}

/// A named value; exactly one of the three values is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int_value: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_value: Option<String>,
}
