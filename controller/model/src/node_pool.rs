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
    /// GKE's `placementPolicy`: here, the TPU slice the pool's nodes form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_policy: Option<PlacementPolicy>,
    /// GKE's `queuedProvisioning`: nodes obtained only through the Dynamic
    /// Workload Scheduler's queue (A5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_provisioning: Option<QueuedProvisioning>,
}

/// GKE's `NodePool.QueuedProvisioning`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedProvisioning {
    #[serde(default)]
    pub enabled: bool,
}

/// How long a Dynamic Workload Scheduler node (flex-start or queued
/// provisioning) runs at most, and without a `maxRunDuration` of its own:
/// GKE's flex-start VMs run for up to seven days.
pub const DWS_MAX_RUN_DURATION: Duration = crate::validation::SEVEN_DAYS;

impl NodePoolSpec {
    /// A5: a pool of flex-start or queued-provisioning nodes, which GKE
    /// upgrades with `SHORT_LIVED` whatever its settings say.
    pub fn short_lived(&self) -> bool {
        self.config.flex_start || self.queued_provisioning.as_ref().is_some_and(|q| q.enabled)
    }

    /// The strategy upgrades of this pool use: `SHORT_LIVED` for a
    /// short-lived pool, else its settings' (absent: `SURGE`).
    pub fn upgrade_strategy(&self) -> UpgradeStrategy {
        if self.short_lived() {
            return UpgradeStrategy::ShortLived;
        }
        self.upgrade_settings
            .as_ref()
            .map_or(UpgradeStrategy::Surge, UpgradeSettings::strategy)
    }

    /// The settings an upgrade of this pool records when it is made: the
    /// pool's own, or, for a short-lived pool, `SHORT_LIVED` alone (A5: it
    /// takes no settings), so the upgrade runs as GKE would run it.
    pub fn operation_upgrade_settings(&self) -> Option<UpgradeSettings> {
        if self.short_lived() {
            return Some(UpgradeSettings {
                strategy: Some(UpgradeStrategy::ShortLived),
                ..UpgradeSettings::default()
            });
        }
        self.upgrade_settings.clone()
    }

    /// How long each node runs before its provider ends it: the config's
    /// `maxRunDuration`, else seven days for a short-lived pool (A5: every
    /// node is replaced within seven days), else no limit.
    pub fn max_run_duration(&self) -> Option<Duration> {
        self.config
            .max_run_duration
            .or_else(|| self.short_lived().then_some(DWS_MAX_RUN_DURATION))
    }
}

/// GKE's `NodePool.PlacementPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPolicy {
    /// `COMPACT`: nodes placed close together (GKE's; recorded, not acted on).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<PlacementType>,
    /// A TPU slice's chip topology, `AxB` or `AxBxC` (`2x2x1`, `16x16`).
    /// Its chips over `config.capacity.tpu` chips per node is the slice's
    /// node count; a slice of more than one node grows and shrinks all or
    /// nothing (C10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu_topology: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PlacementType {
    Compact,
}

impl PlacementPolicy {
    /// The chips of `tpuTopology` (the product of its dimensions), or why
    /// it is not of the form `AxB` or `AxBxC` with positive dimensions.
    pub fn tpu_chips(&self) -> Option<Result<u64, String>> {
        let t = self.tpu_topology.as_deref()?;
        let parts: Vec<&str> = t.split('x').collect();
        let bad = || format!("{t:?} is not of the form AxB or AxBxC with positive whole numbers");
        if !(2..=3).contains(&parts.len()) {
            return Some(Err(bad()));
        }
        let mut chips: u64 = 1;
        for part in parts {
            match part.parse::<u64>() {
                Ok(n) if n > 0 => chips = chips.saturating_mul(n),
                _ => return Some(Err(bad())),
            }
        }
        Some(Ok(chips))
    }
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
    /// What one node costs per hour, in dollars, for the autoscaler's
    /// `price` expander (C8). GKE prices its machine types; Sluice's pools
    /// name a capacity instead, so absent, a node is priced from
    /// `capacity` at upstream's GCE rates (n1 on-demand: $0.033174 per
    /// core-hour and $0.004446 per GiB-hour; spot: $0.00698 and $0.00094),
    /// see `sluice_autoscaler::price::default_node_price`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// GKE's `reservationAffinity`: which Compute Engine reservations the
    /// pool's nodes may consume; the autoscaler grows pools with a
    /// matching unused reservation first (C8). Absent: `ANY_RESERVATION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<ReservationAffinity>,
    /// GKE's `flexStart`: nodes on flex-start VMs, from the Dynamic
    /// Workload Scheduler; they run at most seven days and the pool is
    /// upgraded `SHORT_LIVED` (A5).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flex_start: bool,
    /// GKE's `maxRunDuration` (`"3600s"`): each node is ended by its
    /// provider this long after it was made, and replaced if the pool
    /// still wants it. Absent: no limit, or seven days on a flex-start or
    /// queued-provisioning pool ([`NodePoolSpec::max_run_duration`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<Duration>,
}

/// GKE's `ReservationAffinity`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationAffinity {
    pub consume_reservation_type: ReservationType,
    /// With `SPECIFIC_RESERVATION`: [`RESERVATION_NAME_KEY`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// With `SPECIFIC_RESERVATION`: the reservations' names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The only `key` GKE accepts for a specific reservation.
pub const RESERVATION_NAME_KEY: &str = "compute.googleapis.com/reservation-name";

/// GKE's `ReservationAffinity.Type` (without `UNSPECIFIED`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReservationType {
    #[default]
    AnyReservation,
    SpecificReservation,
    NoReservation,
}

/// What one node offers the scheduler (its `status.capacity`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCapacity {
    #[schemars(schema_with = "crate::openapi::quantity")]
    pub cpu: Quantity,
    #[schemars(schema_with = "crate::openapi::quantity")]
    pub memory: Quantity,
    /// TPU chips per node (`google.com/tpu`), for a TPU slice pool
    /// (`placementPolicy.tpuTopology`); GKE reads it from the machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu: Option<i32>,
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
    /// What the cluster autoscaler decided for the pool; written by the
    /// autoscaler loop only, read and kept as is by the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<AutoscalerStatus>,
}

/// The cluster autoscaler's side of a pool.
///
/// Upstream's cluster-autoscaler does not edit a GKE node pool's spec: it
/// sets its managed instance group's target size (`SetTargetSize`) and
/// deletes named instances (`DeleteNodes`, which also lowers the target),
/// and the group makes the nodes. Here the pool is its own instance group,
/// so those two live in the pool's status: written only by a controller
/// (the status subresource), so a user's `kubectl apply` of the spec never
/// resets them; stored with the object, so a restarted controller reads
/// them back; and read by the pool reconciler as the group reads its
/// target. `initialNodeCount` stays what the user wrote, as on GKE.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerStatus {
    /// Per zone, the node count the autoscaler chose (its target size).
    /// While autoscaling is enabled the pool reconciler holds each zone
    /// listed here at it, within the pool's limits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub target_sizes: BTreeMap<String, i32>,
    /// Nodes the autoscaler drained and asked the pool to delete: the pool
    /// deletes exactly these, never another in their place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes_to_remove: Vec<NodeToRemove>,
    /// The autoscaler's memory of this pool (unneeded times, backoff,
    /// scale-ups in flight), in its own schema, read only by it, so that a
    /// restart or a new leader does not start the clocks over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::any_object")]
    pub memory: Option<serde_json::Value>,
}

/// A node the autoscaler removes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeToRemove {
    pub name: String,
    pub zone: String,
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
