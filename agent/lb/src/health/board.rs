//! Every backend's health and the probes that feed it, pure: the clock is
//! passed in as the time since a fixed start.
//!
//! A probe is one (address, port, path, interval, timeout): Services whose
//! checks agree on those share it, and each result goes to every (Service,
//! node) that uses it, weighed against that Service's own thresholds. A
//! probe starts every `interval` at a phase of its own (a hash of the probe
//! within the interval), so a thousand backends added at once are not all
//! probed in the same instant. A probe not answered within `timeout` has
//! failed; its late answer, if any, is ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use super::machine::{Machine, Thresholds, Transition};
use crate::config::LbConfig;

/// What one probe checks; equal keys are probed once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeKey {
    pub address: Ipv4Addr,
    pub port: u16,
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
}

/// A probe to start now; its result is reported with `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeStart {
    pub key: ProbeKey,
    pub seq: u64,
}

/// A (Service, node) whose verdict changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub service: String,
    pub node: String,
    pub transition: Transition,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    seq: u64,
    started: Duration,
}

#[derive(Clone, Debug)]
struct Slot {
    next_due: Duration,
    in_flight: Option<InFlight>,
}

#[derive(Clone, Debug)]
struct Member {
    key: ProbeKey,
    thresholds: Thresholds,
    machine: Machine,
}

/// (Service, node).
type MemberId = (String, String);

/// The health of every configured backend.
#[derive(Debug, Default)]
pub struct Board {
    slots: BTreeMap<ProbeKey, Slot>,
    members: BTreeMap<MemberId, Member>,
    /// Verdict changes per (Service, node, to), for `/metrics`; dropped with
    /// the backend so the label sets stay bounded.
    transitions: BTreeMap<(String, String, Transition), u64>,
    next_seq: u64,
}

/// Where in its interval a probe runs: a hash of the probe (FNV-1a, fixed
/// so a restart keeps the phases), modulo the interval.
pub fn phase(key: &ProbeKey) -> Duration {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&key.address.octets());
    eat(&key.port.to_be_bytes());
    eat(key.path.as_bytes());
    let ms = u64::try_from(key.interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Duration::from_millis(h % ms)
}

impl Board {
    pub fn new() -> Board {
        Board::default()
    }

    /// Takes a new configuration: backends that stay keep their health
    /// (also when their check changed), new ones start unhealthy, gone ones
    /// are forgotten; probes nobody uses any more stop, new ones get their
    /// phase from `now`.
    pub fn sync(&mut self, cfg: &LbConfig, now: Duration) {
        let mut members = BTreeMap::new();
        for (s, b) in cfg.backends() {
            let hc = &s.health_check;
            let key = ProbeKey {
                address: b.address,
                port: hc.port,
                path: hc.path.clone(),
                interval: hc.interval,
                timeout: hc.timeout,
            };
            let thresholds = Thresholds {
                healthy: hc.healthy_threshold,
                unhealthy: hc.unhealthy_threshold,
            };
            let id = (s.name.clone(), b.node.clone());
            let machine = self
                .members
                .remove(&id)
                .map(|m| m.machine)
                .unwrap_or_default();
            members.insert(
                id,
                Member {
                    key,
                    thresholds,
                    machine,
                },
            );
        }
        self.members = members;
        let used: BTreeSet<&ProbeKey> = self.members.values().map(|m| &m.key).collect();
        self.slots.retain(|k, _| used.contains(k));
        for k in used {
            if !self.slots.contains_key(k) {
                let slot = Slot {
                    next_due: now + phase(k),
                    in_flight: None,
                };
                self.slots.insert(k.clone(), slot);
            }
        }
        let members = &self.members;
        self.transitions
            .retain(|(s, n, _), _| members.contains_key(&(s.clone(), n.clone())));
    }

    /// Fails the probes past their timeout and starts those due. Returns
    /// the probes to start and the verdicts the failures changed.
    pub fn due(&mut self, now: Duration) -> (Vec<ProbeStart>, Vec<Change>) {
        let mut expired = Vec::new();
        let mut starts = Vec::new();
        for (k, slot) in &mut self.slots {
            if let Some(f) = slot.in_flight {
                if now >= f.started + k.timeout {
                    slot.in_flight = None;
                    expired.push(k.clone());
                }
            }
            if slot.in_flight.is_none() && now >= slot.next_due {
                let seq = self.next_seq;
                self.next_seq += 1;
                slot.in_flight = Some(InFlight { seq, started: now });
                // Keep the phase; after a stall, skip the missed rounds.
                let step = k.interval.max(Duration::from_millis(1));
                while slot.next_due <= now {
                    slot.next_due += step;
                }
                starts.push(ProbeStart {
                    key: k.clone(),
                    seq,
                });
            }
        }
        let mut changes = Vec::new();
        for k in expired {
            changes.extend(self.apply(&k, false));
        }
        (starts, changes)
    }

    /// A probe's result. An answer after the timeout counts as a failure,
    /// once; an answer for a probe already failed or no longer used is
    /// ignored.
    pub fn report(
        &mut self,
        key: &ProbeKey,
        seq: u64,
        success: bool,
        now: Duration,
    ) -> Vec<Change> {
        let Some(slot) = self.slots.get_mut(key) else {
            return Vec::new();
        };
        match slot.in_flight {
            Some(f) if f.seq == seq => {
                slot.in_flight = None;
                let in_time = now < f.started + key.timeout;
                self.apply(key, success && in_time)
            }
            _ => Vec::new(),
        }
    }

    fn apply(&mut self, key: &ProbeKey, success: bool) -> Vec<Change> {
        let mut changes = Vec::new();
        for ((service, node), m) in &mut self.members {
            if &m.key != key {
                continue;
            }
            if let Some(t) = m.machine.record(success, m.thresholds) {
                *self
                    .transitions
                    .entry((service.clone(), node.clone(), t))
                    .or_default() += 1;
                changes.push(Change {
                    service: service.clone(),
                    node: node.clone(),
                    transition: t,
                });
            }
        }
        changes
    }

    /// When [`Board::due`] has something to do next.
    pub fn next_wakeup(&self) -> Option<Duration> {
        self.slots
            .iter()
            .map(|(k, s)| match s.in_flight {
                Some(f) => f.started + k.timeout,
                None => s.next_due,
            })
            .min()
    }

    /// The verdict on `node` behind `service` (unhealthy if unknown).
    pub fn healthy(&self, service: &str, node: &str) -> bool {
        self.members
            .get(&(service.to_string(), node.to_string()))
            .is_some_and(|m| m.machine.healthy())
    }

    /// Verdict changes per (Service, node, to) of configured backends.
    pub fn transitions(&self) -> impl Iterator<Item = (&str, &str, Transition, u64)> {
        self.transitions
            .iter()
            .map(|((s, n, t), v)| (s.as_str(), n.as_str(), *t, *v))
    }

    /// How many distinct probes run.
    pub fn probes(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
