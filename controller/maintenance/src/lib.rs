//! GKE's maintenance policy (spec M1–M8) as pure decisions: when automatic
//! maintenance may start (a window open and no exclusion blocking it), the
//! limits a policy must keep at admission (M7), and the versions table
//! those limits read. No I/O and no clock: callers pass `now`.
//!
//! Surge upgrades and the CLI ask [`Policy::may_start`] (or
//! [`Policy::check`] for an [`Activity`], which knows what M8 leaves
//! ungated); the API server runs [`admission::admit`] on every write of a
//! `Cluster`'s maintenance policy.

pub mod admission;
mod availability;
pub mod event;
pub mod policy;
pub mod scope;
#[cfg(test)]
mod testing;
pub mod versions;
pub mod window;

pub use event::{Activity, Change, Event, Plane, Trigger, Ungated, UnknownEvent};
pub use policy::{Blocker, Decision, Exclusion, Policy, PolicyError};
pub use versions::{Versions, VersionsError};
pub use window::{Window, WindowError, WindowState, HORIZON_SECONDS};
