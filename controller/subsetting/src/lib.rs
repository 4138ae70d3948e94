//! L4 load-balancer backends as pure decisions (spec rules N1–N5 and P7):
//! which nodes stand behind a LoadBalancer Service, per zone.
//!
//! Nothing here does I/O, reads a clock or awaits: objects come in as plain
//! structs and decisions go out as values, so the controller's loop can
//! turn them into cloud calls, Events and status messages.
//!
//! - [`lb_kind`]: what kind of load balancer a Service gets at creation
//!   (P7) and whether an internal one uses NEGs or instance groups (N5);
//!   the kind is kept afterwards, a disagreeing annotation only reported.
//! - [`subsets`]: with subsetting on, one GCE_VM_IP NEG per zone per
//!   internal LoadBalancer Service (N1) and the nodes in each, for
//!   `externalTrafficPolicy: Cluster` (N2) and `Local` (N3), computed in
//!   full from the previous subsets ([`compute`]).
//! - [`incremental`]: the same decision kept up to date one node event at a
//!   time ([`SubsetState`]), equal to a full compute after each event.
//! - [`instance_groups`]: without subsetting, one unmanaged instance group
//!   per zone holding every eligible node, with a warning above 250 (N4).
//! - [`health_check`]: the health check GKE makes for the Service's policy,
//!   with validated overrides.
//!
//! The building blocks: [`node`] (a node, why it is left out, and the
//! fallback to draining nodes when every node drains),
//! [`service`] (a Service's key and policy), [`rank`] (the per-Service
//! order of nodes), [`share`] (how a subset's size is split over zones).

mod error;
pub mod health_check;
pub mod incremental;
pub mod instance_groups;
pub mod lb_kind;
pub mod node;
pub mod rank;
mod select;
pub mod service;
pub mod share;
pub mod subsets;
mod table;

pub use error::InputError;
pub use incremental::SubsetState;
pub use node::{Exclusion, Node};
pub use service::{ServiceKey, SubsetService, TrafficPolicy};
pub use subsets::{compute, Outcome, Subset, Warning};
