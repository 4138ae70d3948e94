//! Each instance read against the cluster's Nodes: does it count towards
//! its zone, is the provider removing it already, or must it go?

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use super::{Config, DeleteReason};
use crate::instance::{Instance, InstanceState};

/// One instance and what the Nodes say of it.
#[derive(Debug)]
pub(crate) struct Seen<'a> {
    pub instance: &'a Instance,
    /// Its Node object exists.
    pub registered: bool,
    /// Its Node is Ready.
    pub ready: bool,
    pub fate: Fate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Counts towards its zone's target. `deadline`: when it is replaced
    /// if its Node has not registered by then.
    Counted { deadline: Option<Timestamp> },
    /// The provider is deleting it; it no longer counts.
    Leaving,
    /// To delete; it no longer counts, so it is also replaced.
    Remove(DeleteReason),
}

/// What an instance is read against.
pub(crate) struct Lens<'a> {
    /// The pool's zones.
    pub zones: HashSet<&'a str>,
    /// The Node names the pool's previous status listed: a Node that was
    /// there and is gone was deleted, rather than never registered.
    pub was_node: HashSet<&'a str>,
    pub deleting_pool: bool,
    pub config: &'a Config,
    pub now: Timestamp,
}

impl Lens<'_> {
    /// Read every instance.
    pub(crate) fn observe<'i, N: std::borrow::Borrow<Node>>(
        &self,
        instances: &'i [Instance],
        nodes: &[N],
    ) -> Vec<Seen<'i>> {
        let by_name: HashMap<&str, &Node> = nodes
            .iter()
            .map(std::borrow::Borrow::borrow)
            .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n)))
            .collect();
        instances
            .iter()
            .map(|instance| {
                let node = by_name.get(instance.name.as_str());
                let registered = node.is_some();
                Seen {
                    instance,
                    registered,
                    ready: node.is_some_and(|n| is_ready(n)),
                    fate: self.fate(instance, registered),
                }
            })
            .collect()
    }

    fn fate(&self, instance: &Instance, registered: bool) -> Fate {
        if let InstanceState::Deleting = instance.state {
            return Fate::Leaving;
        }
        if self.deleting_pool {
            return Fate::Remove(DeleteReason::PoolDeleted);
        }
        if !self.zones.contains(instance.zone.as_str()) {
            return Fate::Remove(DeleteReason::ZoneRemoved);
        }
        if let InstanceState::Failed(why) = &instance.state {
            return Fate::Remove(DeleteReason::Failed(why.clone()));
        }
        if registered {
            return Fate::Counted { deadline: None };
        }
        // Like a Cluster API MachineHealthCheck: a Node that registered
        // and was then deleted is gone for good (the kubelet registers
        // only as it starts), so its machine is replaced at once.
        if self.was_node.contains(instance.name.as_str()) {
            return Fate::Remove(DeleteReason::NodeDeleted);
        }
        let deadline = crate::later(instance.created_at, self.config.node_startup_timeout);
        if self.now >= deadline {
            Fate::Remove(DeleteReason::StartupTimeout)
        } else {
            Fate::Counted {
                deadline: Some(deadline),
            }
        }
    }
}

/// The Node's `Ready` condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
