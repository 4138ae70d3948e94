//! `Cluster` (`sluice.dev/v1`): the cluster-wide settings, spelled like
//! GKE's `projects.locations.clusters`: maintenance policy (M), release
//! channel, L4 ILB subsetting (N) and the autoscaling profile (C9).
//! One object per cluster, by convention named `default`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::k8s::Time;
use crate::kind::sluice_kind;

sluice_kind! {
    /// The cluster as a Kubernetes object.
    Cluster {
        spec: ClusterSpec,
        status: ClusterStatus,
        plural: "clusters",
        scope: Cluster,
        validate: crate::validation::validate_cluster,
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_policy: Option<MaintenancePolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_channel: Option<ReleaseChannel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<NetworkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<ClusterAutoscaling>,
}

impl ClusterSpec {
    /// `networkConfig.enableL4ilbSubsetting`, absent read as off.
    pub fn l4ilb_subsetting(&self) -> bool {
        self.network_config
            .as_ref()
            .and_then(|n| n.enable_l4ilb_subsetting)
            .unwrap_or(false)
    }

    /// Enrolled in a release channel (anything but absent or `UNSPECIFIED`).
    pub fn on_release_channel(&self) -> bool {
        self.release_channel
            .as_ref()
            .is_some_and(|r| r.channel != Channel::Unspecified)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenancePolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<MaintenanceWindow>,
}

/// M1: one window (recurring or daily, at most one of the two) and any
/// number (M7: up to 20) of exclusions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_maintenance_window: Option<DailyMaintenanceWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurring_window: Option<RecurringTimeWindow>,
    /// By the exclusion's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub maintenance_exclusions: BTreeMap<String, TimeWindow>,
}

/// GKE's daily window: every UTC day from `startTime` ("HH:MM") for
/// `duration`, which GKE chooses (4 h) and reports; output only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DailyMaintenanceWindow {
    pub start_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

/// The first occurrence (`window`) repeated by an RFC 5545 RRULE (M2: in
/// UTC), e.g. `FREQ=WEEKLY;BYDAY=SA,SU`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecurringTimeWindow {
    pub window: TimeWindow,
    pub recurrence: String,
}

/// An interval; as an exclusion it may carry its scope. Times may be written
/// with any offset and are kept in UTC (M2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeWindow {
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub start_time: Time,
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub end_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_exclusion_options: Option<MaintenanceExclusionOptions>,
}

impl TimeWindow {
    /// The exclusion's scope; absent means `NO_UPGRADES` (M4).
    pub fn scope(&self) -> ExclusionScope {
        self.maintenance_exclusion_options
            .as_ref()
            .and_then(|o| o.scope)
            .unwrap_or(ExclusionScope::NoUpgrades)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceExclusionOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ExclusionScope>,
}

/// What an exclusion blocks (M4's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExclusionScope {
    NoUpgrades,
    NoMinorUpgrades,
    NoMinorOrNodeUpgrades,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseChannel {
    pub channel: Channel,
}

/// GKE's release channels; `UNSPECIFIED` means none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Channel {
    Unspecified,
    Rapid,
    Regular,
    Stable,
    Extended,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfig {
    /// L4 ILB subsetting (N1–N5): turned on, never off again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_l4ilb_subsetting: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAutoscaling {
    /// Absent: `BALANCED` (C9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_profile: Option<AutoscalingProfile>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AutoscalingProfile {
    Balanced,
    OptimizeUtilization,
}

/// What the controller observes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The control plane's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_master_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When `spec.networkConfig.enableL4ilbSubsetting` was first turned on,
    /// set by the API server as it admits that write and kept from then on
    /// (N5: only internal LBs created after it use NEGs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::openapi::date_time")]
    pub l4ilb_subsetting_enabled_since: Option<Time>,
}
