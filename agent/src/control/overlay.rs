//! Live conditions of this node's endpoints.
//!
//! In a cluster the control plane writes EndpointSlice conditions from the
//! kubelet's view of readiness; this agent *is* that view for its own pods.
//! So the readiness the agent observes (probes, evictions in progress)
//! overrides what the desired state says about endpoints on this node, and
//! reaches the maps and the health servers on the next sync.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::state::DesiredState;

/// EndpointSlice conditions as the agent observes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveConditions {
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// Pod IP → observed conditions, for pods this node runs.
pub type Overlay = BTreeMap<IpAddr, LiveConditions>;

/// A copy of `state` with this node's endpoints' conditions replaced by the
/// observed ones. Endpoints on other nodes, and local ones the agent does not
/// observe (pods someone else runs), keep what the state says.
pub fn with_overlay(state: &DesiredState, node_name: &str, overlay: &Overlay) -> DesiredState {
    let mut out = state.clone();
    if overlay.is_empty() {
        return out;
    }
    for svc in out.services.values_mut() {
        for ep in &mut svc.endpoints {
            if ep.node.as_deref() != Some(node_name) {
                continue;
            }
            if let Some(c) = overlay.get(&ep.addr) {
                ep.ready = c.ready;
                ep.serving = c.serving;
                ep.terminating = c.terminating;
            }
        }
    }
    out
}
