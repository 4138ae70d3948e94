//! The Kubernetes-facing model the agent and the controller share (issue 9).
//!
//! - [`k8s`]: the `k8s-openapi` types the API serves, under one name, so every
//!   crate of the workspace builds against the same Kubernetes version;
//! - Sluice's own kinds in `sluice.dev/v1` — [`node_pool::NodePool`],
//!   [`cluster::Cluster`], [`operation::Operation`] — spelled with GKE's field
//!   names, so a user reads them like the GKE API; and the L4 load
//!   balancer's objects ([`load_balancer`]: `L4LoadBalancer`,
//!   `HealthCheck`, `NetworkEndpointGroup`, `InstanceGroup`);
//! - [`decode`]: strict decoding that names the unknown or mistyped field;
//! - [`validation`]: the rules a spec must satisfy on its own, each error
//!   naming its field path;
//! - [`openapi`]: the OpenAPI v3 schemas the API server serves for these kinds;
//! - [`policy`]: pure policy, the PodDisruptionBudget arithmetic of evictions
//!   (and the label selectors it compiles once, for every controller);
//! - [`quantity`]: resource quantities as exact integers, for the
//!   scheduler's arithmetic.
//!
//! Nothing here touches the kernel or the network: no aya, no nix.

pub mod cluster;
pub mod decode;
pub mod duration;
pub mod k8s;
pub mod kind;
pub mod load_balancer;
pub mod node_pool;
pub mod openapi;
pub mod operation;
pub mod policy;
pub mod quantity;
pub mod validation;

pub use k8s_openapi;

#[cfg(test)]
mod tests;
