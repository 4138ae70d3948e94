//! What the nodes move from (the pool's spec, unchanged until the
//! operation completes) and to (the operation's spec), and how a node is
//! told to be on one or the other.
//!
//! A node's version is its instance's (else its kubelet's). Its config is
//! read off the [`CONFIG_LABEL`] the planner and the pool reconciler put on
//! the nodes they create, holding a fingerprint of what needs a new node to
//! change (capacity, spot); a Node without it predates the label and is
//! taken to be of the pool's spec. Labels and taints are left out of the
//! fingerprint: they change in place (U7).

use k8s_openapi::api::core::v1::Node;
use sluice_model::node_pool::{NodeConfig, NodePool};
use sluice_model::operation::Operation;
use sluice_nodepools::reconcile;
use sluice_nodepools::{Instance, NodeSpec};

use crate::UpgradeError;

pub use sluice_nodepools::CONFIG_LABEL;

/// One side of the upgrade.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Side {
    pub version: String,
    pub config: NodeConfig,
    pub spec: NodeSpec,
    pub fingerprint: String,
}

/// The pool's side and the operation's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sides {
    pub from: Side,
    pub to: Side,
}

impl Sides {
    pub fn resolve(
        op_name: &str,
        op: &Operation,
        pool: &NodePool,
        config: &reconcile::Config,
    ) -> Result<Sides, UpgradeError> {
        let from_version = pool
            .spec
            .version
            .clone()
            .unwrap_or_else(|| config.cluster_version.clone());
        let from_spec = NodeSpec::of_pool(pool)?;
        let from = Side {
            version: from_version.clone(),
            config: pool.spec.config.clone(),
            fingerprint: from_spec.fingerprint(),
            spec: from_spec,
        };
        let to_config = op
            .spec
            .config
            .clone()
            .unwrap_or_else(|| pool.spec.config.clone());
        let mut shaped = pool.clone();
        shaped.spec.config = to_config.clone();
        let to_spec = NodeSpec::of_pool(&shaped).map_err(|source| UpgradeError::TargetConfig {
            op: op_name.to_owned(),
            source,
        })?;
        let to = Side {
            version: op.spec.node_version.clone().unwrap_or(from_version),
            config: to_config,
            fingerprint: to_spec.fingerprint(),
            spec: to_spec,
        };
        Ok(Sides { from, to })
    }

    /// The change needs new nodes (a version or a fingerprinted part of
    /// the config), rather than labels and taints written in place.
    pub fn recreates(&self) -> bool {
        self.from.version != self.to.version || self.from.fingerprint != self.to.fingerprint
    }
}

/// An instance's version and config fingerprint. An instance whose Node
/// has not registered yet is taken to be `fresh`'s (the side being made
/// now) when `made_by_us`, else the pool's.
pub(crate) fn read(
    instance: &Instance,
    node: Option<&Node>,
    sides: &Sides,
    fresh: &Side,
    made_by_us: bool,
) -> (String, String) {
    let kubelet = || {
        node.and_then(|n| n.status.as_ref())
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.kubelet_version.trim_start_matches('v').to_owned())
            .filter(|v| !v.is_empty())
    };
    let version = Some(instance.version.clone())
        .filter(|v| !v.is_empty())
        .or_else(kubelet)
        .unwrap_or_else(|| sides.from.version.clone());
    let fingerprint = match node {
        Some(n) => n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CONFIG_LABEL))
            .cloned()
            .unwrap_or_else(|| sides.from.fingerprint.clone()),
        None if made_by_us => fresh.fingerprint.clone(),
        None => sides.from.fingerprint.clone(),
    };
    (version, fingerprint)
}

impl Side {
    pub fn holds(&self, version_and_fingerprint: &(String, String)) -> bool {
        version_and_fingerprint.0 == self.version && version_and_fingerprint.1 == self.fingerprint
    }

    /// The node spec to create nodes of this side with: the fingerprint
    /// label added, so that the node tells its config.
    pub fn create_spec(&self) -> NodeSpec {
        self.spec.labelled()
    }
}
