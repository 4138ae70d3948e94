//! The decisions of kube-controller-manager's ReplicaSet and Deployment
//! controllers, as pure functions: the objects the controller watches and
//! the time go in, the writes to make and the new status come out, like a
//! kube-runtime `reconcile -> Action`. Nothing here does I/O, reads a
//! clock or keeps state between calls; the controller applies the actions
//! through its API (create, update, patch, delete) and calls again when a
//! watched object changes or the plan's `requeue_after` elapses.
//!
//! - [`replica_set`]: pods to create, delete, adopt and release for one
//!   ReplicaSet, and its status;
//! - [`deployment`]: ReplicaSets to create, scale, annotate and delete for
//!   one Deployment (rolling update, recreate, proportional scaling, pause,
//!   revision history), and its status with the `Available` and
//!   `Progressing` conditions.
//!
//! What upstream keeps in memory between syncs (its "expectations" of
//! creations and deletions not yet seen by the informers) is the caller's:
//! call again only once the writes of the previous plan are visible in what
//! is passed in, or a plan may ask for the same pods twice.

pub mod deployment;
mod error;
mod owner;
mod pods;
pub mod replica_set;
mod spec;
#[cfg(test)]
mod test_support;

pub use error::WorkloadError;
