//! The node provider interface: what makes, removes and lists a pool's
//! machines. Implementations: [`crate::sim`], [`crate::exec`], and the
//! lab's network namespaces (each node a namespace running a real agent;
//! `sluice_controller::providers::netns`).
//!
//! Calls may take long (a VM or a namespace with an agent takes seconds to
//! minutes) and may fail; the reconciler never waits on them, it reads the
//! result at its next pass. The trait is object safe (`Arc<dyn
//! NodeProvider>`): methods return boxed `Send` futures.

use std::future::Future;
use std::pin::Pin;

use crate::instance::{CreateNode, Instance};

/// A boxed, `Send` future of a provider call.
pub type ProviderFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, ProviderError>> + Send + 'a>>;

/// Makes and removes the machines behind a pool's nodes.
pub trait NodeProvider: Send + Sync {
    /// Start making one machine named `req.name` in `req.zone`. Returns
    /// the instance as the provider now sees it (usually `Creating`). A
    /// name that exists already is an error, never a second machine.
    fn create(&self, req: CreateNode) -> ProviderFuture<'_, Instance>;

    /// Remove the machine `name`; [`ProviderError::NotFound`] if there is
    /// none (the caller treats that as done).
    fn delete<'a>(&'a self, name: &'a str) -> ProviderFuture<'a, ()>;

    /// Every instance of `pool`, in any state.
    fn list<'a>(&'a self, pool: &'a str) -> ProviderFuture<'a, Vec<Instance>>;

    /// How many more machines it can make now, across every pool, when it
    /// can tell (`None`: no known limit). Blue-green asks before it makes
    /// any green node (B1); a creation may still be refused.
    fn capacity(&self) -> ProviderFuture<'_, Option<u64>> {
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Out of quota: creations back off (30 s doubling up to 5 min by
    /// default) and the pool reports `QuotaExceeded`, rather than retrying
    /// at once.
    #[error("quota exhausted: {resource} (limit {limit})")]
    QuotaExhausted { resource: String, limit: u64 },
    #[error("instance {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Failed(String),
}
