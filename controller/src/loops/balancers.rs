//! Which nodes the load balancers still send connections to, followed
//! for the loops that delete drained nodes (upgrades, the autoscaler): a
//! node listed in some NEG or instance group is behind a balancer, and
//! one that left them all is let go a moment later
//! (`sluice_model::policy::balancers`, pure). Shared by those loops, so
//! each sees a node leave at the same time.

use std::sync::{Arc, Mutex};

use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::Node;
use sluice_model::load_balancer::{InstanceGroup, NetworkEndpointGroup};
use sluice_model::policy::balancers::{behind_balancers, OutOfBalancers};

use super::informer::{Informer, Synced};

pub struct Balancers {
    negs: Arc<Informer<NetworkEndpointGroup>>,
    groups: Arc<Informer<InstanceGroup>>,
    nodes: Arc<Informer<Node>>,
    out: Mutex<OutOfBalancers>,
}

impl Balancers {
    pub fn new(
        negs: Arc<Informer<NetworkEndpointGroup>>,
        groups: Arc<Informer<InstanceGroup>>,
        nodes: Arc<Informer<Node>>,
    ) -> Self {
        Balancers {
            negs,
            groups,
            nodes,
            out: Mutex::new(OutOfBalancers::default()),
        }
    }

    /// The caches a look needs complete: before their first list every
    /// node would look out of every balancer.
    pub fn synced(&self) -> [Synced; 3] {
        [
            self.negs.synced(),
            self.groups.synced(),
            self.nodes.synced(),
        ]
    }

    /// What the caches say at `now`, recorded (a node seen out for the
    /// first time is out from `now`), and the record.
    pub fn look(&self, now: Timestamp) -> OutOfBalancers {
        let negs = self.negs.all();
        let groups = self.groups.all();
        let behind = behind_balancers(negs.iter().map(Arc::as_ref), groups.iter().map(Arc::as_ref));
        let nodes = self.nodes.all();
        let names = nodes.iter().filter_map(|n| n.metadata.name.as_deref());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.observe(&behind, names, now);
        out.clone()
    }
}
