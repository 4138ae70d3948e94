//! Node pools and the node providers that make their nodes.
//!
//! A `NodePool` (`sluice.dev/v1`) asks for `initialNodeCount` nodes in each
//! of its `locations`. The controller runs one pass per pool:
//!
//! 1. list the provider's instances of the pool ([`NodeProvider::list`]);
//! 2. decide with [`reconcile::plan`] (pure: the pool, the instances, the
//!    cluster's Nodes, a [`reconcile::Config`] and `now` in; actions, the
//!    pool's status and a requeue-after out);
//! 3. run the actions through the provider ([`execute::run`]);
//! 4. fold what happened into the status ([`reconcile::record`]) and
//!    write it: a creation refused for quota sets the pool's backoff and
//!    its `QuotaExceeded` condition, which the next [`reconcile::plan`]
//!    reads back from `status`.
//!
//! Providers:
//! - [`sim::SimProvider`]: in memory, with a boot delay, a quota and
//!   failure injection, on an injected [`sim::Clock`];
//! - [`exec::ExecProvider`]: the user's scripts create, delete and list
//!   VMs (contract in `docs/node-providers.md`);
//! - the lab's network-namespace provider needs the controller's
//!   credentials, so it lives in the controller crate
//!   (`sluice_controller::providers::netns`).
//!
//! Node names follow [`naming`]: `<pool>-<zone tag>-<4 characters>`;
//! [`node_object`] builds the Node an instance registers as (its pool and
//! zone labels, the pool's labels, taints and capacity).

mod error;
pub mod exec;
pub mod execute;
pub mod instance;
pub mod naming;
pub mod node_object;
pub mod provider;
pub mod reconcile;
pub mod sim;

pub use error::PlanError;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `t + d`, held at the ends of time rather than panicking: a provider may
/// report any `createdAt`.
pub(crate) fn later(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}
pub use instance::{
    CreateNode, Instance, InstanceState, NodeSpec, CONFIG_LABEL, MAX_RUN_DURATION_LABEL,
};
pub use provider::{NodeProvider, ProviderError, ProviderFuture};
