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
    /// Blue-green rollbacks: whether draining green honours
    /// PodDisruptionBudgets (GKE's `respectPdb` of `rollback`); absent or
    /// false: green's pods are deleted, budgets not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub respect_pdb: Option<bool>,
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
            respect_pdb: None,
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
    /// Blue-green: end the soak now and delete the blue nodes
    /// (`gcloud container node-pools complete-upgrade`); only while the
    /// pool soaks (B4).
    Complete,
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
    /// A blue-green upgrade's own record: its phase and the times its
    /// waits end, which nothing on the nodes tells (B1–B6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<BlueGreenProgress>,
}

/// GKE's `BlueGreenInfo.Phase`, in its spelling.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BlueGreenPhase {
    UpdateStarted,
    /// B1: green is made in every zone, the same size as blue.
    CreatingGreenPool,
    /// B2: every blue node is cordoned.
    CordoningBluePool,
    /// A1: the wait before an autoscaled upgrade drains what is left of blue.
    WaitingToDrainBluePool,
    /// B3: blue is drained in batches.
    DrainingBluePool,
    /// B4: blue is kept, drained, for the soak.
    NodePoolSoaking,
    /// B5: blue's pods are deleted, then its nodes; cannot be cancelled.
    DeletingBluePool,
    /// B6: blue serves again, green is drained and deleted.
    RollbackStarted,
}

impl BlueGreenPhase {
    /// GKE's name.
    pub fn as_str(self) -> &'static str {
        match self {
            BlueGreenPhase::UpdateStarted => "UPDATE_STARTED",
            BlueGreenPhase::CreatingGreenPool => "CREATING_GREEN_POOL",
            BlueGreenPhase::CordoningBluePool => "CORDONING_BLUE_POOL",
            BlueGreenPhase::WaitingToDrainBluePool => "WAITING_TO_DRAIN_BLUE_POOL",
            BlueGreenPhase::DrainingBluePool => "DRAINING_BLUE_POOL",
            BlueGreenPhase::NodePoolSoaking => "NODE_POOL_SOAKING",
            BlueGreenPhase::DeletingBluePool => "DELETING_BLUE_POOL",
            BlueGreenPhase::RollbackStarted => "ROLLBACK_STARTED",
        }
    }
}

/// Where a blue-green upgrade is, as its planner records it. Which node
/// is blue or green, cordoned or drained, is read off the nodes; what is
/// kept here is what the nodes cannot tell: the phase reached, the batch
/// count and how many batches are drained, and when the waits end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenProgress {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BlueGreenPhase>,
    /// B3: blue's drain batches, fixed when the drain starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<u32>,
    /// B3: nodes per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// B3: batches whose drain finished.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batches_drained: u32,
    /// B3: the soak after the last drained batch ends then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub batch_soak_end_time: Option<Time>,
    /// B4: the pool's soak ends then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub soak_end_time: Option<Time>,
    /// A1: an autoscaled upgrade's wait (`waitForDrainDuration` from the
    /// cordon of blue) ends then, and blue's remaining nodes are drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub drain_start_time: Option<Time>,
    /// B5: when the blue pool's deletion started (GKE's
    /// `bluePoolDeletionStartTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub blue_pool_deletion_start_time: Option<Time>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
