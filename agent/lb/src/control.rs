//! The control side's state between events, without I/O: the
//! configuration, the health board, the ids and the MACs, and what was
//! last handed to the engine. `run.rs` feeds it events (a new
//! configuration, a probe's result, the neighbour table, the time) and
//! carries out what it asks (probes to start, a state to apply).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tracing::{info, warn};

use crate::build::{build, hold_back, LeftOut};
use crate::config::LbConfig;
use crate::desired::LbDesired;
use crate::draining::Draining;
use crate::health::{Board, Change, ProbeKey, ProbeStart, Transition};
use crate::ids::Ids;
use crate::metrics::{BackendSample, Snapshot};
use crate::neighbours::Macs;

#[derive(Debug, Default)]
pub struct Control {
    /// As the source gives it.
    config: LbConfig,
    /// Backends that left a Service, kept unhealthy while they drain.
    draining: Draining,
    /// `config` with the draining backends: what is probed, given ids and
    /// built.
    effective: LbConfig,
    board: Board,
    ids: Ids,
    macs: Macs,
    /// What the engine holds (`None`: nothing yet, or the last apply failed).
    applied: Option<LbDesired>,
    /// Backends reported as left out, so each is logged once while it lasts.
    left_out: BTreeSet<(String, String)>,
    /// Something the desired state depends on changed since it was last
    /// built: a probe result that changes no verdict (most of them) costs
    /// no build.
    dirty: bool,
    /// Neighbour-table reads started so far.
    reads_started: u64,
    /// Backends, by (Service, node), whose MAC must come from a read
    /// started after the given one: each backend that appears or turns
    /// healthy. An address a replaced node handed on to its replacement
    /// still has the dead node's MAC in `macs` until the table is read
    /// again (the new node's gratuitous ARP, or the probe that found it
    /// healthy, has updated the kernel's entry by then). Until that read
    /// such a backend takes no new flow: one the engine does not hold yet
    /// is left out, as one with no MAC; one it holds stays, unhealthy, so
    /// the flows it carries keep their backend. Per backend, not per
    /// address: a node turning healthy for one Service (its first pod of a
    /// `Local` Service Ready) must not move the flows it carries for
    /// another (each would reach a node with no conntrack for it, and the
    /// pod there resets it).
    await_read: BTreeMap<(String, String), u64>,
}

impl Control {
    pub fn new(ids: Ids) -> Control {
        Control {
            ids,
            // The engine gets a first state, empty as it may be.
            dirty: true,
            ..Control::default()
        }
    }

    pub fn config(&self) -> &LbConfig {
        &self.config
    }

    /// A new configuration at `now`.
    pub fn set_config(&mut self, config: LbConfig, now: Duration) {
        let known: BTreeSet<(String, String)> = self
            .effective
            .backends()
            .map(|(s, b)| (s.name.clone(), b.node.clone()))
            .collect();
        for (s, b) in config.backends() {
            let key = (s.name.clone(), b.node.clone());
            if !known.contains(&key) {
                self.await_read.insert(key, self.reads_started);
            }
        }
        self.draining.update(&self.config, &config, now);
        self.config = config;
        self.resync(now);
    }

    /// Probes, ids and the desired state follow the configuration plus
    /// the backends still draining.
    fn resync(&mut self, now: Duration) {
        let effective = self.draining.extend(&self.config);
        self.board.sync(&effective, now);
        let unserved = self.ids.sync(
            effective
                .backends()
                .map(|(s, b)| (s.name.as_str(), b.node.as_str())),
        );
        for (s, n) in unserved {
            warn!(service = %s, node = %n, "no backend id left; the backend is not served");
        }
        self.effective = effective;
        self.dirty = true;
    }

    /// Probes to start at `now` (and verdicts the timed-out ones changed).
    pub fn due(&mut self, now: Duration) -> Vec<ProbeStart> {
        if self.draining.expire(now) {
            self.resync(now);
        }
        let (starts, changes) = self.board.due(now);
        self.changed(&changes);
        starts
    }

    /// A probe's result.
    pub fn report(&mut self, key: &ProbeKey, seq: u64, success: bool, now: Duration) {
        let changes = self.board.report(key, seq, success, now);
        self.changed(&changes);
    }

    pub fn next_wakeup(&self) -> Option<Duration> {
        match (self.board.next_wakeup(), self.draining.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A neighbour-table read is starting; its number, for
    /// [`Control::set_macs`].
    pub fn neighbour_read_started(&mut self) -> u64 {
        self.reads_started += 1;
        self.reads_started
    }

    /// Whether some backend waits for a fresh read of the neighbour table
    /// (the caller reads it at once).
    pub fn wants_neighbours(&self) -> bool {
        !self.await_read.is_empty()
    }

    /// The neighbour table as read by read number `read`.
    pub fn set_macs(&mut self, macs: Macs, read: u64) {
        let before = self.await_read.len();
        self.await_read.retain(|_, after| *after >= read);
        if macs != self.macs || self.await_read.len() != before {
            self.macs = macs;
            self.dirty = true;
        }
    }

    /// Whether [`Control::pending`] will build (and `/metrics` be refreshed).
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    fn changed(&mut self, changes: &[Change]) {
        for c in changes {
            info!(service = %c.service, node = %c.node, to = c.transition.as_str(), "health changed");
            if matches!(c.transition, Transition::ToHealthy) {
                self.await_read
                    .insert((c.service.clone(), c.node.clone()), self.reads_started);
            }
        }
        self.dirty |= !changes.is_empty();
    }

    /// Whether some configured backend still has no MAC.
    pub fn unresolved(&self) -> bool {
        self.effective
            .backends()
            .any(|(_, b)| !self.macs.contains_key(&std::net::IpAddr::V4(b.address)))
    }

    /// The desired state, if it differs from what the engine holds.
    pub fn pending(&mut self) -> Option<LbDesired> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let (board, draining, awaiting) = (&self.board, &self.draining, &self.await_read);
        let waits = |s: &str, n: &str| {
            !awaiting.is_empty() && awaiting.contains_key(&(s.to_owned(), n.to_owned()))
        };
        let mut built = build(
            &self.effective,
            |s, n| board.healthy(s, n) && !draining.is_draining(s, n) && !waits(s, n),
            &self.macs,
            &self.ids,
        );
        if !awaiting.is_empty() {
            hold_back(&mut built, waits, self.applied.as_ref());
        }
        let now: BTreeSet<(String, String)> = built
            .left_out
            .iter()
            .map(|(s, n, _)| (s.clone(), n.clone()))
            .collect();
        for (s, n, why) in &built.left_out {
            if !self.left_out.contains(&(s.clone(), n.clone())) {
                match why {
                    LeftOut::NoMac { address } => info!(
                        service = %s, node = %n, %address,
                        "backend left out until its MAC is resolved"
                    ),
                    LeftOut::NoId => warn!(service = %s, node = %n, "backend left out: no id"),
                }
            }
        }
        self.left_out = now;
        (self.applied.as_ref() != Some(&built.desired)).then_some(built.desired)
    }

    /// The engine took `desired` (`false`: it refused it; asked again at the
    /// next [`Control::pending`]).
    pub fn applied(&mut self, desired: LbDesired, ok: bool) {
        self.applied = ok.then_some(desired);
        self.dirty |= !ok;
    }

    /// Fills the configuration and health parts of `m`.
    pub fn fill(&self, m: &mut Snapshot) {
        m.services = self.config.services.len() as u64;
        m.backends = self
            .effective
            .backends()
            .map(|(s, b)| BackendSample {
                service: s.name.clone(),
                node: b.node.clone(),
                healthy: self.board.healthy(&s.name, &b.node)
                    && !self.draining.is_draining(&s.name, &b.node),
                id: self
                    .ids
                    .get(&s.name, &b.node)
                    .filter(|_| !self.left_out.contains(&(s.name.clone(), b.node.clone()))),
            })
            .collect();
        m.transitions = self
            .board
            .transitions()
            .map(|(s, n, t, v)| (s.to_string(), n.to_string(), t.as_str(), v))
            .collect();
    }
}
