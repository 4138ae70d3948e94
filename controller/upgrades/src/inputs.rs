//! What one pass of the planner reads: the operation, its pool, what the
//! provider and the API hold, and what the caller worked out (pods left to
//! drain, quota, `Local` Services, the maintenance gate).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::Operation;
use sluice_model::policy::balancers::OutOfBalancers;
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::{self, QUOTA_EXCEEDED};
use sluice_nodepools::Instance;

use crate::drain::{self, DrainProgress, PodOnNode};
use crate::gate::Gate;

/// One pass's inputs. `instances` and `nodes` must be complete lists (of
/// the pool; others are ignored).
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub operation: &'a Operation,
    pub pool: &'a NodePool,
    pub instances: &'a [Instance],
    pub nodes: &'a [Node],
    /// Per node name, the pods a drain of it must still remove.
    pub pods: &'a BTreeMap<String, Vec<PodOnNode>>,
    pub quota: &'a Quota,
    /// Nodes the provider can still make now, when it can tell
    /// (`NodeProvider::capacity`); `None`: unknown. Blue-green checks that
    /// all of green fits before it makes any (B1).
    pub capacity: Option<usize>,
    /// Services with `externalTrafficPolicy: Local` and the nodes holding
    /// their serving pods (U5's warning).
    pub local_services: &'a [LocalService],
    pub gate: &'a Gate,
    /// Since when each node has been out of every load balancer: a
    /// drained node is deleted only once they have let it go.
    pub balancers: &'a OutOfBalancers,
    /// The pool reconciler's settings: zones, the cluster's version, the
    /// poll interval.
    pub config: &'a reconcile::Config,
}

impl Inputs<'_> {
    /// The pods a drain of `node` must still remove.
    pub fn pods_on(&self, node: &str) -> &[PodOnNode] {
        self.pods.get(node).map_or(&[][..], Vec::as_slice)
    }

    /// Where the drain of `node` for `reason`, started at `started`,
    /// stands at `now`: [`drain::progress`], held while the load
    /// balancers have not let the node go.
    pub fn drain_progress(
        &self,
        node: &str,
        reason: EvictionReason,
        started: Timestamp,
        now: Timestamp,
    ) -> DrainProgress {
        drain::progress(reason, started, self.pods_on(node), now)
            .until_released(self.balancers.may_delete(node, started, now))
    }
}

/// Whether the provider has room for another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quota {
    Available,
    /// A creation was refused for quota; creations wait until `retry_at`
    /// (`None`: until told otherwise).
    Exhausted {
        message: String,
        retry_at: Option<Timestamp>,
    },
}

impl Quota {
    /// Read off the pool's status: its `QuotaExceeded` condition and the
    /// creation backoff the pool reconciler keeps (which the loop also
    /// feeds with the upgrade's own refused creations).
    pub fn of_pool(pool: &NodePool, config: &reconcile::Config, now: Timestamp) -> Quota {
        let Some(status) = &pool.status else {
            return Quota::Available;
        };
        let exceeded = status
            .conditions
            .iter()
            .find(|c| c.type_ == QUOTA_EXCEEDED && c.status == "True");
        let backoff = status.create_backoff.as_ref().filter(|b| b.quota_exceeded);
        let retry_at = reconcile::create_retry_at(status, config);
        match (exceeded, backoff) {
            (None, None) => Quota::Available,
            _ if retry_at.is_some_and(|t| now >= t) => Quota::Available,
            (c, b) => Quota::Exhausted {
                message: b
                    .map(|b| b.message.clone())
                    .or_else(|| c.map(|c| c.message.clone()))
                    .unwrap_or_default(),
                retry_at,
            },
        }
    }

    /// May a node be created at `now`?
    pub fn allows(&self, now: Timestamp) -> bool {
        match self {
            Quota::Available => true,
            Quota::Exhausted { retry_at, .. } => retry_at.is_some_and(|t| now >= t),
        }
    }
}

/// A Service with `externalTrafficPolicy: Local`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalService {
    /// `namespace/name`.
    pub name: String,
    /// The nodes holding its serving pods.
    pub nodes: BTreeSet<String>,
}

/// U5: nodes behind an `externalTrafficPolicy: Local` Service drained in
/// parallel take its serving pods away together.
pub(crate) fn local_warnings(inputs: &Inputs<'_>, draining: &[String]) -> Vec<String> {
    if draining.len() < 2 {
        return Vec::new();
    }
    inputs
        .local_services
        .iter()
        .filter_map(|s| {
            let hit: Vec<&str> = draining
                .iter()
                .filter(|n| s.nodes.contains(*n))
                .map(String::as_str)
                .collect();
            (!hit.is_empty()).then(|| {
                format!(
                    "Service {} has externalTrafficPolicy: Local and nodes drained in parallel \
                     ({}; {} at once): parallel drains do not work with Local traffic — use \
                     maxSurge + maxUnavailable = 1 (blue-green: batchNodeCount 1) or externalTrafficPolicy: Cluster",
                    s.name,
                    hit.join(", "),
                    draining.len()
                )
            })
        })
        .collect()
}
