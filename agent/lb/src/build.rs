//! The desired state the engine carries out, pure: the configuration, each
//! backend's verdict, the MACs resolved so far and the backends' ids. Every
//! configured backend is listed, healthy or not (the engine sends to all
//! when none is healthy); a backend whose MAC is not known yet, or that
//! found no id, is left out until it has one (frames cannot reach it).

use std::net::IpAddr;

use crate::config::LbConfig;
use crate::desired::{Backend, LbDesired, LbService};
use crate::ids::Ids;
use crate::neighbours::Macs;

/// Why a configured backend is not in the desired state.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LeftOut {
    /// No neighbour entry for its address yet.
    NoMac { address: IpAddr },
    /// The id space is full.
    NoId,
}

/// The desired state, and the backends left out of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Built {
    pub desired: LbDesired,
    /// (Service, node, why).
    pub left_out: Vec<(String, String, LeftOut)>,
}

/// `healthy(service, node)` is the prober's verdict.
pub fn build(
    cfg: &LbConfig,
    healthy: impl Fn(&str, &str) -> bool,
    macs: &Macs,
    ids: &Ids,
) -> Built {
    let mut out = Built::default();
    for s in &cfg.services {
        let mut backends = Vec::with_capacity(s.backends.len());
        for b in &s.backends {
            let address = IpAddr::V4(b.address);
            let Some(id) = ids.get(&s.name, &b.node) else {
                out.left_out
                    .push((s.name.clone(), b.node.clone(), LeftOut::NoId));
                continue;
            };
            let Some(mac) = macs.get(&address) else {
                out.left_out
                    .push((s.name.clone(), b.node.clone(), LeftOut::NoMac { address }));
                continue;
            };
            backends.push(Backend {
                id,
                node: b.node.clone(),
                address,
                mac: *mac,
                healthy: healthy(&s.name, &b.node),
            });
        }
        out.desired.services.push(LbService {
            name: s.name.clone(),
            frontends: s.frontends.clone(),
            backends,
        });
    }
    out
}

/// Backends waiting for a fresh read of their MAC (`waits(service, node)`,
/// built unhealthy) take no new flow. One `held` (the state the engine
/// holds) already has stays, so the flows it carries keep their backend;
/// one it does not have is left out, as one with no MAC.
pub fn hold_back(built: &mut Built, waits: impl Fn(&str, &str) -> bool, held: Option<&LbDesired>) {
    for s in &mut built.desired.services {
        let left = &mut built.left_out;
        s.backends.retain(|b| {
            let keep = !waits(&s.name, &b.node)
                || held.is_some_and(|d| d.has_backend(&s.name, &b.node, b.address));
            if !keep {
                left.push((
                    s.name.clone(),
                    b.node.clone(),
                    LeftOut::NoMac { address: b.address },
                ));
            }
            keep
        });
    }
}
