//! The loop's tunables, defaulting to upstream's flags (GKE does not let
//! users change most of them), and the cluster-wide caps.

use serde::{Deserialize, Serialize};
use sluice_model::k8s::jiff::SignedDuration;

use crate::error::ConfigError;
use crate::expander::{ExpanderChain, PriorityConfig};

const MIN: i64 = 60;

/// Upstream's `--scale-down-delay-after-add`.
pub const SCALE_DOWN_DELAY_AFTER_ADD: SignedDuration = SignedDuration::from_secs(10 * MIN);
/// Upstream's `--scale-down-delay-after-failure`.
pub const SCALE_DOWN_DELAY_AFTER_FAILURE: SignedDuration = SignedDuration::from_secs(3 * MIN);
/// Upstream's `--max-node-provision-time`: a node not registered by then is
/// given up and its scale-up rolled back.
pub const MAX_NODE_PROVISION_TIME: SignedDuration = SignedDuration::from_secs(15 * MIN);
/// GKE's largest cluster (C11).
pub const MAX_NODES_TOTAL: usize = 15_000;
/// Upstream's `--max-nodes-per-scaleup`.
pub const MAX_NODES_PER_SCALE_UP: usize = 1_000;
/// Upstream's `--max-scale-down-parallelism`: nodes being removed at once.
pub const MAX_SCALE_DOWN_PARALLELISM: usize = 10;
/// Upstream's `--max-drain-parallelism`: nodes with pods drained at once.
pub const MAX_DRAIN_PARALLELISM: usize = 1;
/// Pods with a priority strictly below this never trigger a scale-up (C11;
/// upstream's `--expendable-pods-priority-cutoff`).
pub const EXPENDABLE_PRIORITY_CUTOFF: i32 = -10;
/// Upstream's `--blocking-system-pod-distruption-timeout`: an unguarded
/// kube-system pod older than this no longer blocks scale-down.
pub const BLOCKING_SYSTEM_POD_TIMEOUT: SignedDuration = SignedDuration::from_secs(60 * MIN);
/// Upstream's `--max-bulk-soft-taint-count`: soft-taint writes per loop.
pub const MAX_SOFT_TAINTS_PER_LOOP: usize = 10;
/// GKE's per-zone node limit of a pool, the maximum when autoscaling is on
/// and none is given.
pub const DEFAULT_MAX_PER_ZONE: i32 = 1_000;

/// What the loop passes besides the snapshot.
#[derive(Debug, Clone)]
pub struct Options {
    /// Upstream's `--expander`, default `least-waste`.
    pub expander: ExpanderChain,
    /// The priority expander's configuration (its ConfigMap's `priorities`).
    pub priorities: Option<PriorityConfig>,
    /// Mixed with the clock into the `random` expander's pick, so a run is
    /// repeatable.
    pub random_seed: u64,
    /// Overrides the profile's unneeded time (the lab keeps scenes short).
    pub unneeded_time: Option<SignedDuration>,
    pub scale_down_delay_after_add: SignedDuration,
    pub scale_down_delay_after_failure: SignedDuration,
    pub max_node_provision_time: SignedDuration,
    pub max_nodes_total: usize,
    pub max_nodes_per_scale_up: usize,
    pub max_scale_down_parallelism: usize,
    pub max_drain_parallelism: usize,
    /// Whether local storage (hostPath, disk-backed emptyDir) blocks
    /// scale-down: GKE stopped counting it from control plane 1.22 (C5), so
    /// off by default.
    pub local_storage_blocks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            expander: ExpanderChain::default(),
            priorities: None,
            random_seed: 0,
            unneeded_time: None,
            scale_down_delay_after_add: SCALE_DOWN_DELAY_AFTER_ADD,
            scale_down_delay_after_failure: SCALE_DOWN_DELAY_AFTER_FAILURE,
            max_node_provision_time: MAX_NODE_PROVISION_TIME,
            max_nodes_total: MAX_NODES_TOTAL,
            max_nodes_per_scale_up: MAX_NODES_PER_SCALE_UP,
            max_scale_down_parallelism: MAX_SCALE_DOWN_PARALLELISM,
            max_drain_parallelism: MAX_DRAIN_PARALLELISM,
            local_storage_blocks: false,
        }
    }
}

/// The status ConfigMap's annotation carrying the loop's [`Flags`]. Under
/// `sluice.dev/`: upstream has no such annotation, and its
/// `cluster-autoscaler.kubernetes.io/` prefix is the Kubernetes project's
/// to define.
pub const FLAGS_ANNOTATION: &str = "sluice.dev/autoscaler-flags";

/// The controller's flags that change decisions, as the loop publishes
/// them, so `sluice autoscaler` decides with the loop's options rather
/// than the defaults (a lab's short unneeded time, say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Flags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unneeded_time: Option<SignedDuration>,
    pub scale_down_delay_after_add: SignedDuration,
    /// `--expander`, comma-separated.
    pub expander: String,
}

impl Flags {
    pub fn of(o: &Options) -> Flags {
        let names: Vec<&str> = o.expander.expanders().iter().map(|e| e.name()).collect();
        Flags {
            scale_down_unneeded_time: o.unneeded_time,
            scale_down_delay_after_add: o.scale_down_delay_after_add,
            expander: names.join(","),
        }
    }

    /// `base` with these flags set.
    pub fn apply(&self, base: Options) -> Result<Options, ConfigError> {
        Ok(Options {
            expander: ExpanderChain::parse(&self.expander)?,
            unneeded_time: self.scale_down_unneeded_time,
            scale_down_delay_after_add: self.scale_down_delay_after_add,
            ..base
        })
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Options from the annotation's value; `None` when it is unreadable.
    pub fn options_from(value: &str) -> Option<Options> {
        let flags: Flags = serde_json::from_str(value).ok()?;
        flags.apply(Options::default()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expander::Expander;

    #[test]
    fn the_loops_flags_come_back_from_the_annotation() {
        // spec: C4 — the CLI decides with the loop's unneeded time, delay
        // after add and expanders, read back from what the loop published.
        let o = Options {
            expander: ExpanderChain::parse("priority,least-waste").expect("chain"),
            unneeded_time: Some(SignedDuration::from_secs(2)),
            scale_down_delay_after_add: SignedDuration::ZERO,
            ..Options::default()
        };
        let back = Flags::options_from(&Flags::of(&o).to_annotation()).expect("readable");
        assert_eq!(back.unneeded_time, o.unneeded_time);
        assert_eq!(back.scale_down_delay_after_add, SignedDuration::ZERO);
        assert_eq!(
            back.expander.expanders(),
            [Expander::Priority, Expander::LeastWaste]
        );
        assert!(Flags::options_from("{\"expander\": 3}").is_none());
        assert!(Flags::options_from(
            "{\"scaleDownDelayAfterAdd\": \"0s\", \"expander\": \"nope\"}"
        )
        .is_none());
    }
}
