//! `Operation` (`sluice.dev/v1`): one long-running action (an upgrade, a
//! resize), spelled like GKE's `projects.locations.operations`. The
//! controller advances it step by step from what the store holds, so a
//! controller killed mid-way resumes it (DESIGN).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::k8s::Time;
use crate::kind::sluice_kind;

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

/// What the operation does, to what; fixed once created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationSpec {
    pub operation_type: OperationType,
    /// The object acted on, as an API path
    /// (`/apis/sluice.dev/v1/nodepools/pool-a`).
    pub target_link: String,
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
}

/// GKE's operation `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationState {
    Pending,
    Running,
    Done,
    Aborting,
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
