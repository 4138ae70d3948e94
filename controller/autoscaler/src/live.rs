//! The objects one decision reads, owned: the loop fills [`Objects`] from
//! its caches, `sluice autoscaler` from the API's lists, and both ask
//! [`Objects::snapshot`] for the same [`Snapshot`], so the CLI's answers
//! are the loop's. Pure.

use std::collections::BTreeMap;

use sluice_model::cluster::{AutoscalingProfile, Cluster};
use sluice_model::k8s::{Node, Pod, PodDisruptionBudget};
use sluice_model::node_pool::NodePool;

use crate::{actuation, Options, PoolExtras, Snapshot};

/// What a decision is made from, as read.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub pools: Vec<NodePool>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The Cluster's `spec.autoscaling.autoscalingProfile`.
    pub profile: Option<AutoscalingProfile>,
    /// Each pool's settings the autoscaler reads beyond the model's.
    pub extras: BTreeMap<String, PoolExtras>,
}

impl Objects {
    pub fn new(
        nodes: Vec<Node>,
        pods: Vec<Pod>,
        pools: Vec<NodePool>,
        pdbs: Vec<PodDisruptionBudget>,
        clusters: &[Cluster],
    ) -> Objects {
        let profile = clusters
            .iter()
            .find_map(|c| c.spec.autoscaling.as_ref()?.autoscaling_profile);
        let extras = pools
            .iter()
            .filter_map(|p| Some((p.metadata.name.clone()?, actuation::extras(p))))
            .collect();
        Objects {
            nodes,
            pods,
            pools,
            pdbs,
            profile,
            extras,
        }
    }

    /// The snapshot `decide` reads, with the loop's `options`.
    pub fn snapshot<'a>(&'a self, options: &'a Options) -> Snapshot<'a> {
        Snapshot {
            nodes: &self.nodes,
            pods: &self.pods,
            pools: &self.pools,
            pdbs: &self.pdbs,
            profile: self.profile,
            extras: &self.extras,
            reservations: &[],
            pod_cidrs_left: None,
            options,
        }
    }
}
