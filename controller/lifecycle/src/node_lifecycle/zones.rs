//! Zone disruption: how many of a zone's nodes are not Ready decides how
//! fast new NoExecute taints (and so evictions) may go there, as upstream
//! rate-limits them, so that a network partition or a zone outage does not
//! empty the zone.
//!
//! - normal: 0.1 node/s;
//! - partially disrupted (more than 2 nodes not Ready and at least 55 %):
//!   0.01 node/s in zones of more than 50 nodes, none in smaller ones;
//! - fully disrupted (no node Ready): 0.1 node/s, unless every zone is,
//!   in which case the fault is likely the controller's own view and no
//!   node is tainted at all (the NoExecute taints are lifted).
//!
//! Upstream keeps a token bucket per zone; here the bucket is read off the
//! nodes themselves: the latest `timeAdded` of a `not-ready`/`unreachable`
//! NoExecute taint in the zone is when it last fired, so the next node may
//! be tainted one interval later.

use std::collections::BTreeMap;

use sluice_model::k8s::jiff::{SignedDuration, Timestamp};

use super::Config;

/// A zone's disruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// What the controller reports about one zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneStatus {
    pub state: ZoneState,
    pub nodes: usize,
    pub not_ready: usize,
    /// New NoExecute taints per second allowed in the zone.
    pub taint_rate: f64,
    /// The latest NoExecute taint this controller put in the zone.
    pub last_taint: Option<Timestamp>,
}

impl ZoneStatus {
    /// The state of a zone of `nodes` nodes of which `not_ready` are not
    /// Ready.
    pub fn new(nodes: usize, not_ready: usize, config: &Config) -> Self {
        let ready = nodes - not_ready.min(nodes);
        let state = if ready == 0 && not_ready > 0 {
            ZoneState::FullDisruption
        } else if not_ready > 2
            && not_ready as f64 / nodes as f64 >= config.unhealthy_zone_threshold
        {
            ZoneState::PartialDisruption
        } else {
            ZoneState::Normal
        };
        let taint_rate = match state {
            ZoneState::Normal | ZoneState::FullDisruption => config.eviction_rate,
            ZoneState::PartialDisruption if nodes > config.large_cluster_size => {
                config.secondary_eviction_rate
            }
            ZoneState::PartialDisruption => 0.0,
        };
        ZoneStatus {
            state,
            nodes,
            not_ready,
            taint_rate,
            last_taint: None,
        }
    }

    /// Whether the zone may take a new NoExecute taint at `now`.
    pub fn gate(&self, now: Timestamp) -> Gate {
        if self.taint_rate <= 0.0 || !self.taint_rate.is_finite() {
            return Gate::Closed;
        }
        let interval =
            SignedDuration::try_from_secs_f64(1.0 / self.taint_rate).unwrap_or(SignedDuration::MAX);
        match self.last_taint.map(|t| super::after(t, interval)) {
            Some(next) if next > now => Gate::Until(next),
            _ => Gate::Open,
        }
    }
}

/// Whether a zone may take a new NoExecute taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// Not before then.
    Until(Timestamp),
    /// Not while the zone stays in its state.
    Closed,
}

/// Every zone is fully disrupted: taint nothing.
pub fn all_fully_disrupted(zones: &BTreeMap<String, ZoneStatus>) -> bool {
    !zones.is_empty() && zones.values().all(|z| z.state == ZoneState::FullDisruption)
}
