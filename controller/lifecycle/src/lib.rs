//! The decisions of six of the controller's loops, as kube-controller-manager
//! makes them, without I/O: state in, actions out.
//!
//! - [`endpoint_slices`]: the EndpointSlices a Service with a selector
//!   publishes for the pods it selects (upstream's endpointslice
//!   controller), as the creates, updates and deletes that bring the
//!   existing slices there with the fewest writes;
//! - [`node_lifecycle`]: node health from Leases and heartbeats, the
//!   `not-ready` / `unreachable` conditions and taints, and the pods a
//!   NoExecute taint evicts once their tolerations run out (upstream's
//!   nodelifecycle controller and its taint-eviction manager);
//! - [`pod_gc`]: pods bound to Nodes that are gone (upstream's pod
//!   garbage collector, orphaned pods);
//! - [`pod_cidrs`]: the range allocator that gives each Node its
//!   `spec.podCIDRs` from the cluster CIDRs;
//! - [`garbage_collector`]: dependents of deleted owners (ownerReferences,
//!   Background, Foreground and Orphan propagation; upstream's garbage
//!   collector);
//! - [`namespace_deletion`]: the content of a Terminating namespace, its
//!   conditions and its `kubernetes` finalizer (upstream's namespace
//!   controller).
//!
//! Nothing here reads a clock, a store or the network: the caller passes
//! `now` and the objects, and applies what comes back. Output is sorted, so
//! the same input always gives the same actions.

pub mod endpoint_slices;
pub mod error;
pub mod garbage_collector;
pub mod namespace_deletion;
pub mod node_lifecycle;
pub mod pod_cidrs;
pub mod pod_gc;

pub use error::LifecycleError;
