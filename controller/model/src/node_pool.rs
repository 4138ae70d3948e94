//! `NodePool` (`sluice.dev/v1`): a group of identical nodes, spelled like
//! GKE's `projects.locations.clusters.nodePools`. Upgrades (U, B, A) and the
//! autoscaler (C) act on it in later issues; here it gets its shape.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::Duration;
use crate::k8s::{Quantity, Time};
use crate::kind::sluice_kind;

sluice_kind! {
    /// A node pool as a Kubernetes object.
    NodePool {
        spec: NodePoolSpec,
        status: NodePoolStatus,
        plural: "nodepools",
        scope: Cluster,
        validate: crate::validation::validate_node_pool,
    }
}

/// What the user asks for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// Zones the pool's nodes run in; per-zone counts apply to each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    /// Nodes per zone created with the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_node_count: Option<i32>,
    pub config: NodeConfig,
    /// The nodes' Kubernetes version (`1.33.2`); absent: the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<NodePoolAutoscaling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_settings: Option<UpgradeSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management: Option<NodeManagement>,
}

/// Every node of the pool is made from this. GKE names a machine type;
/// Sluice's nodes have no catalogue, so the capacity is given directly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeConfig {
    pub capacity: NodeCapacity,
    /// Kubernetes labels put on every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<NodeTaint>,
    /// Spot nodes: cheaper, preemptible (C8, C11).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spot: bool,
}

/// What one node offers the scheduler (its `status.capacity`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCapacity {
    #[schemars(schema_with = "crate::openapi::quantity")]
    pub cpu: Quantity,
    #[schemars(schema_with = "crate::openapi::quantity")]
    pub memory: Quantity,
}

/// GKE's `NodeTaint`: effects in GKE's spelling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// The Kubernetes spelling, for the Node's `spec.taints`.
    pub fn kubernetes(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// The cluster autoscaler's limits for this pool (C1): per zone
/// (`minNodeCount`/`maxNodeCount`) or across zones (`total…`), not both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolAutoscaling {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_node_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_min_node_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_max_node_count: Option<i32>,
    /// Absent: `BALANCED` for on-demand pools, `ANY` for spot (C8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_policy: Option<LocationPolicy>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LocationPolicy {
    Balanced,
    Any,
}

/// How nodes are replaced when the pool's version or config changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSettings {
    /// Extra nodes per zone during a surge upgrade; absent: 1 (U1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i32>,
    /// Nodes per zone that may be down at once; absent: 0 (U2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i32>,
    /// Absent: `SURGE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<UpgradeStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green_settings: Option<BlueGreenSettings>,
}

impl UpgradeSettings {
    pub const DEFAULT_MAX_SURGE: i32 = 1;
    pub const DEFAULT_MAX_UNAVAILABLE: i32 = 0;

    pub fn strategy(&self) -> UpgradeStrategy {
        self.strategy.unwrap_or(UpgradeStrategy::Surge)
    }

    pub fn max_surge(&self) -> i32 {
        self.max_surge.unwrap_or(Self::DEFAULT_MAX_SURGE)
    }

    pub fn max_unavailable(&self) -> i32 {
        self.max_unavailable
            .unwrap_or(Self::DEFAULT_MAX_UNAVAILABLE)
    }
}

/// GKE's `NodePoolUpdateStrategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UpgradeStrategy {
    /// U1–U7.
    Surge,
    /// B1–B7, or A1–A5's autoscaled form with `autoscaledRolloutPolicy`.
    BlueGreen,
    /// A5: flex-start / queued-provisioning pools; no settings.
    ShortLived,
}

/// Blue-green settings: one rollout policy (standard or autoscaled) and the
/// soak after the whole blue pool is drained.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard_rollout_policy: Option<StandardRolloutPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaled_rollout_policy: Option<AutoscaledRolloutPolicy>,
    /// Absent: 3600 s (B4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool_soak_duration: Option<Duration>,
}

impl BlueGreenSettings {
    pub const DEFAULT_NODE_POOL_SOAK: Duration = Duration::from_secs(3600);

    pub fn node_pool_soak_duration(&self) -> Duration {
        self.node_pool_soak_duration
            .unwrap_or(Self::DEFAULT_NODE_POOL_SOAK)
    }
}

/// B3: blue is drained in batches of `batchNodeCount` nodes or
/// `batchPercentage` of the pool (one of the two).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StandardRolloutPolicy {
    /// A fraction in 0–1 (GKE's name says percentage; its value is 0.25 for 25 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_percentage: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_node_count: Option<i32>,
    /// Absent: 0 s (B3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_soak_duration: Option<Duration>,
}

impl StandardRolloutPolicy {
    pub fn batch_soak_duration(&self) -> Duration {
        self.batch_soak_duration.unwrap_or(Duration::ZERO)
    }
}

/// A1–A4: green grows with the autoscaler as blue drains.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscaledRolloutPolicy {
    /// The wait after cordoning blue before its remaining nodes are drained;
    /// absent: 3 days (A1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_drain_duration: Option<Duration>,
}

impl AutoscaledRolloutPolicy {
    pub const DEFAULT_WAIT_FOR_DRAIN: Duration = Duration::from_secs(3 * 24 * 3600);

    pub fn wait_for_drain_duration(&self) -> Duration {
        self.wait_for_drain_duration
            .unwrap_or(Self::DEFAULT_WAIT_FOR_DRAIN)
    }
}

/// Automatic upgrades and repairs (M8: repairs ignore maintenance windows).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeManagement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_upgrade: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_repair: Option<bool>,
}

/// What the controller observes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// GKE's `status` of a node pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodePoolPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// The version every node runs once no upgrade is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Names of the pool's Node objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Per zone of the pool: the target and what exists, in `locations`
    /// order (zones being drained after them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneStatus>,
    /// The node provider's instances of the pool, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceStatus>,
    /// Kubernetes-style conditions: `Ready`, `QuotaExceeded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodePoolCondition>,
    /// Set after a node creation failed: creations wait until the backoff
    /// has passed (like the cluster autoscaler's node group backoff);
    /// cleared by the next creation that succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_backoff: Option<CreateBackoff>,
    /// The upgrade under way, as GKE's `updateInfo`; written by the upgrade
    /// loop, kept as is by the pool loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_info: Option<UpdateInfo>,
}

/// GKE's `NodePool.UpdateInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green_info: Option<BlueGreenInfo>,
}

/// GKE's `UpdateInfo.BlueGreenInfo`, with Node names where GKE lists
/// instance groups; and what the cluster autoscaler may do to each side
/// in this phase.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenInfo {
    /// `CREATING_GREEN_POOL`, …, `DELETING_BLUE_POOL`, `ROLLBACK_STARTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<crate::operation::BlueGreenPhase>,
    /// The operation running the upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blue_nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub green_nodes: Vec<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_pool_deletion_start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green_pool_version: Option<String>,
    /// What the cluster autoscaler may do to the blue nodes now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_autoscaling: Option<ScalingRules>,
    /// What the cluster autoscaler may do to the green nodes now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green_autoscaling: Option<ScalingRules>,
}

/// What the cluster autoscaler may do to one side of an upgrade.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    /// Nodes may be added.
    pub scale_up: bool,
    /// Nodes may be removed.
    pub scale_down: bool,
    /// The pool's minimum (per zone or total) holds for removals.
    pub respect_minimum: bool,
}

/// One zone of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneStatus {
    pub zone: String,
    /// The nodes the zone should hold (0 for a zone being drained).
    pub target_node_count: i32,
    /// Instances that count towards the target: creating or running, not
    /// being deleted or replaced.
    pub node_count: i32,
    /// Of those, the ones whose Node is Ready.
    pub ready_node_count: i32,
}

/// One instance as the node provider reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    pub name: String,
    pub zone: String,
    pub state: InstanceState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether its Node object exists and is Ready.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    /// Why it failed, or why it is being replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An instance's state at the provider (GCE's instance status, reduced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum InstanceState {
    #[default]
    Creating,
    Running,
    Deleting,
    Failed,
}

/// A condition in Kubernetes' shape (`metav1.Condition` without
/// `observedGeneration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolCondition {
    /// `Ready`, `QuotaExceeded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub last_transition_time: Time,
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Creations held back after a failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateBackoff {
    /// Failed creation rounds in a row; the wait doubles with each.
    pub failures: u32,
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub last_failure_time: Time,
    /// The provider ran out of quota (rather than failing otherwise).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quota_exceeded: bool,
    /// The provider's message.
    pub message: String,
}

/// GKE's node pool `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodePoolPhase {
    Provisioning,
    Running,
    RunningWithError,
    Reconciling,
    Stopping,
    Error,
}
