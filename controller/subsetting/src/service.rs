//! A Service as the subset decisions see it: its key (which also salts its
//! node order), its traffic policy and, for `Local`, its serving nodes.

use std::collections::BTreeSet;
use std::fmt;

use crate::error::InputError;

/// `namespace/name`: the Service's identity and the seed of its node order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
}

impl ServiceKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ServiceKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), InputError> {
        if self.namespace.is_empty() {
            return Err(InputError::EmptyServiceField { field: "namespace" });
        }
        if self.name.is_empty() {
            return Err(InputError::EmptyServiceField { field: "name" });
        }
        Ok(())
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `spec.externalTrafficPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficPolicy {
    /// Any node forwards to any serving pod: a node needs no pod of its own.
    Cluster,
    /// A node only serves its own pods: only nodes with one are backends.
    Local,
}

/// An internal LoadBalancer Service that uses NEGs (subsetting was on when
/// it was created, see [`crate::lb_kind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetService {
    pub key: ServiceKey,
    pub policy: TrafficPolicy,
    /// Names of nodes running at least one serving pod of the Service
    /// (from its EndpointSlices). Read only for [`TrafficPolicy::Local`].
    pub serving_nodes: BTreeSet<String>,
}

impl SubsetService {
    pub fn cluster(key: ServiceKey) -> Self {
        SubsetService {
            key,
            policy: TrafficPolicy::Cluster,
            serving_nodes: BTreeSet::new(),
        }
    }

    pub fn local<I, S>(key: ServiceKey, serving: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SubsetService {
            key,
            policy: TrafficPolicy::Local,
            serving_nodes: serving.into_iter().map(Into::into).collect(),
        }
    }
}
