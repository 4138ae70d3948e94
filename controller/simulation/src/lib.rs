//! The simulation harness: the controller's own decision code run against
//! the `sim` node provider and a simulated world, on an injected clock, so
//! that weeks of a cluster's life take seconds.
//!
//! What is real: the node-pool reconciler's and the upgrade planner's
//! `plan` functions, the maintenance policy's answers, the eviction
//! arithmetic of PodDisruptionBudgets (`sluice_model::policy::disruption`),
//! and the [`SimProvider`](sluice_nodepools::sim::SimProvider).
//! What is simulated ([`world`]): the pods of a few Deployments, placed by
//! a least-loaded scheduler, Ready after a startup delay, gone after
//! their grace period; and each node's agent draining its node when asked
//! ([`agent`]), through the same budget decisions the Eviction API makes.
//!
//! Time moves from one event to the next (a pod turning Ready, a grace
//! period ending, a retry, a plan's requeue, a window opening), never in
//! fixed ticks, so an idle week costs one step.
//!
//! [`autoscaling`] runs the cluster autoscaler over several pools in 10 s
//! steps (its scan interval), with the real scheduler placing the pods.

pub mod agent;
pub mod autoscaling;
pub mod harness;
pub mod invariants;
pub mod world;
