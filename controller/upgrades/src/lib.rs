//! Node pool upgrades as pure decisions (spec U1–U7, E1, E6, M3, M8).
//!
//! An upgrade is an `Operation` (`UPGRADE_NODES` by hand,
//! `AUTO_UPGRADE_NODES` automatic) on a node pool: its spec fixes the
//! target (`nodeVersion`, `config`), the `upgradeSettings` snapshot, and
//! carries the user's `action` (`CANCEL`, `RESUME`, `ROLLBACK`); its
//! status is written from each [`plan`]. One pass:
//!
//! 1. the caller gathers the [`Inputs`]: the operation, the pool, the
//!    provider's instances of the pool, the Nodes, the pods each old node
//!    still holds ([`PodOnNode`]), the [`Quota`], the `Local` Services
//!    ([`LocalService`]) and the maintenance [`Gate`];
//! 2. [`plan`] (pure, `now` passed in) returns an [`UpgradePlan`]: the
//!    [`Action`]s, the operation's status, when to look again, the zones
//!    whose size it holds and the nodes it keeps busy;
//! 3. the caller runs the actions (Node patches; provider calls through
//!    `sluice_nodepools::execute::run` with [`provider_actions`], their
//!    outcomes folded into the pool's status by `reconcile::record`, so a
//!    refused creation becomes the pool's quota backoff; the pool's spec
//!    written once) and writes the status.
//!
//! ## State lives on the objects
//! Nothing is remembered between passes but the operation's status
//! (state, start time, warnings): a node whose upgrade started carries
//! [`UPGRADING_ANNOTATION`] (the operation's name); a node being drained
//! carries `sluice.dev/drain: NodeUpgrade` (the agent cordons and evicts)
//! and [`drain::DRAIN_STARTED_ANNOTATION`]; a node made by the upgrade
//! carries its version (the instance's) and [`CONFIG_LABEL`]. The pool's
//! `spec.version` and `spec.config` stay the old ones until the upgrade
//! completes ([`Action::SetPoolTarget`]), so they are also what a
//! rollback restores. A controller killed at any point re-derives the
//! same plan from what it finds, never deletes an instance twice (a
//! deleted one is `Deleting` or gone), and treats `NotFound` as done.
//!
//! ## Rules
//! - One zone at a time, in `locations` order (a zone with a node
//!   mid-upgrade first); the surge window is described in `zone.rs` (U1–U4).
//! - U4: a node's upgrade starts only with capacity for its surge node,
//!   or when `maxUnavailable` lets it be drained at once; the status names
//!   the quota.
//! - E1, E6: a drain is over when no pod is left, or after 1 h of
//!   PodDisruptionBudget refusals plus the pods' grace (capped at 1 h):
//!   then the node is deleted anyway.
//! - M3, M8: automatic upgrades, and manual ones that recreate nodes,
//!   start new node upgrades only while the [`Gate`] is open; nodes
//!   already marked finish (their drain, their replacement) and the
//!   status says "paused: <why>, next at <time>". A label/taint-only
//!   change (U7) is written to the nodes in place, at once, ungated.
//! - U6: `CANCEL` starts no new node upgrade and lets marked ones finish
//!   (`CANCELLING`, then `CANCELLED`: the pool may run two versions);
//!   `RESUME` (or no action) goes on; `ROLLBACK` lifts the marks and
//!   drains of nodes not yet replaced and replaces the upgraded nodes by
//!   nodes of the pool's version and config, the same surge way, to its
//!   end (`ROLLING_BACK`, then `ROLLED_BACK`); after `DONE` a rollback is
//!   an error: downgrade instead.
//! - U5: several nodes drained at once behind an `externalTrafficPolicy:
//!   Local` Service give a warning in the status.
//!
//! ## The pool reconciler during an upgrade
//! The reconciler keeps each zone at its target and would cut surge nodes
//! as surplus, and refill an in-place recreation with the old version.
//! [`UpgradePlan::held_zones`] names the zone being upgraded with
//! `maxSurge` as its allowance; the caller passes it as
//! `sluice_nodepools::reconcile::Config::held_zones`, and the reconciler
//! then leaves that zone's size to the upgrade (it still removes failed
//! and never-registered instances; the upgrade makes up the loss with the
//! new version). Other zones are the reconciler's as usual.
//!
//! The cluster autoscaler leaves alone the nodes with
//! [`UPGRADING_ANNOTATION`] and those in [`UpgradePlan::busy_nodes`] (U7).
//!
//! Blue-green (B) and autoscaled blue-green (A) reuse the operation's
//! states, [`drain`] and the [`Gate`].

mod action;
pub mod auto;
mod blue_green;
pub mod drain;
mod driver;
mod error;
mod gate;
mod in_place;
mod inputs;
pub mod interpret;
mod observe;
mod policy_gate;
pub mod scaling_rules;
mod short_lived;
mod status;
mod strategy;
mod surge;
mod surge_window;
mod target;

#[cfg(test)]
mod tests;

pub use action::{provider_actions, Action, InPlace};
pub use blue_green::{batches, BATCHES_DRAINED, BATCHES_TOTAL, PHASE, SOAK_LEFT_SECONDS};
pub use drain::PodOnNode;
pub use driver::{plan, UpgradePlan};
pub use error::UpgradeError;
pub use gate::Gate;
pub use inputs::{Inputs, LocalService, Quota};
pub use policy_gate::{event_of, gate_of, trigger_of};
pub use status::{NODES_TOTAL, NODES_UPGRADED};
pub use surge::Settings;
pub use target::CONFIG_LABEL;

/// Node annotation naming the operation upgrading the node (its
/// `metadata.name`): set when the node's upgrade starts, removed with the
/// node or by a rollback. The cluster autoscaler leaves such nodes alone.
pub const UPGRADING_ANNOTATION: &str = "sluice.dev/upgrading";

/// Node annotation naming the operation that cordoned the node without a
/// drain (blue-green's phase 2), so that a rollback lifts only its own
/// cordon.
pub const CORDONED_BY_ANNOTATION: &str = "sluice.dev/cordoned-by";

/// Companion of [`CORDONED_BY_ANNOTATION`]: when the node was cordoned.
pub use sluice_model::policy::eviction::CORDONED_AT_ANNOTATION;
