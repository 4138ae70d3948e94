//! The EndpointSlices of a Service, as upstream's endpointslice controller
//! publishes them.
//!
//! [`reconcile`] takes a Service, the pods of its namespace, the Nodes (for
//! zones) and the slices labelled `kubernetes.io/service-name=<svc>`, and
//! returns a [`SlicePlan`]: the slices to create, update and delete. The
//! plan is empty when what is published already matches, so the caller
//! can run it on every event without writing.
//!
//! - [`desired`]: which pods become endpoints, with which address, ports
//!   and conditions, grouped by address family and resolved port set;
//! - [`placement`]: how those endpoints are laid into the existing slices
//!   with the fewest writes;
//! - [`meta`]: the labels, owner and name of the slices this controller
//!   manages;
//! - [`tracker`]: this controller's writes not yet back in its cache, which
//!   a Service's next plan waits for.

pub mod desired;
pub mod meta;
pub mod placement;
pub mod tracker;

#[cfg(test)]
mod tests;

use sluice_model::k8s::{EndpointSlice, Node, Pod, Service};

use crate::LifecycleError;

pub use desired::AddressFamily;
pub use meta::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, SERVICE_NAME_LABEL};

/// Upstream's `--max-endpoints-per-slice` default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// Tunables of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// How many endpoints a slice holds at most (upstream: 1 to 1000).
    pub max_endpoints_per_slice: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_endpoints_per_slice: MAX_ENDPOINTS_PER_SLICE,
        }
    }
}

/// The writes that make the published slices match the Service's pods.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlicePlan {
    /// New slices, with `metadata.generateName` and no name.
    pub create: Vec<EndpointSlice>,
    /// Existing slices with new content, metadata kept (name,
    /// resourceVersion), sorted by name.
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete, sorted.
    pub delete: Vec<String>,
}

impl SlicePlan {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// [`reconcile_with`] with the default [`Config`].
pub fn reconcile(
    service: &Service,
    pods: &[Pod],
    nodes: &[Node],
    existing: &[EndpointSlice],
) -> Result<SlicePlan, LifecycleError> {
    reconcile_with(&Config::default(), service, pods, nodes, existing)
}

/// The plan for one Service.
///
/// Services without a selector (their slices are someone else's), of type
/// `ExternalName`, or being deleted (the garbage collector removes their
/// slices through the owner reference) get an empty plan. Slices managed
/// by another controller or already being deleted are left alone.
pub fn reconcile_with(
    config: &Config,
    service: &Service,
    pods: &[Pod],
    nodes: &[Node],
    existing: &[EndpointSlice],
) -> Result<SlicePlan, LifecycleError> {
    let svc = meta::ServiceRef::of(service)?;
    let Some(spec) = service.spec.as_ref() else {
        return Ok(SlicePlan::default());
    };
    let selector = spec.selector.as_ref().filter(|s| !s.is_empty());
    let external_name = spec.type_.as_deref() == Some("ExternalName");
    if selector.is_none() || external_name || service.metadata.deletion_timestamp.is_some() {
        return Ok(SlicePlan::default());
    }
    let families = desired::families(&svc, spec)?;
    let wanted = desired::endpoints(&svc, spec, &families, pods, nodes);
    let mut ours = Vec::new();
    for (index, slice) in existing.iter().enumerate() {
        if meta::is_ours(slice, &svc.name) && slice.metadata.deletion_timestamp.is_none() {
            if slice.metadata.name.is_none() {
                return Err(LifecycleError::Missing {
                    kind: "EndpointSlice",
                    object: format!("{}/[{index}]", svc.namespace),
                    field: "metadata.name",
                });
            }
            ours.push(slice);
        }
    }
    let max = config.max_endpoints_per_slice.max(1);
    Ok(placement::plan(&svc, &families, wanted, &ours, max))
}
