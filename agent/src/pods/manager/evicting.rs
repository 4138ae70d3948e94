//! Evictions and drains inside the manager: which pods a drain takes, a
//! request starting or tightening an eviction, and each step of one.

use std::time::Instant;

use super::pod_state::{Drain, Run, Slot};
use super::reports::{Finished, PodEvent, SINGLE_REPORTS};
use super::PodManager;
use crate::pods::eviction::{
    drain_decision, Action, DrainDecision, Eviction, EvictionOutcome, EvictionReason,
};
use crate::pods::runtime::Sig;

impl PodManager {
    pub(super) fn decision(&self, d: &Drain, s: &Slot) -> DrainDecision {
        drain_decision(
            d.reason,
            self.pool,
            s.spec.safe_to_evict_false(),
            s.first_seen,
            d.cordoned_at,
        )
    }

    pub(super) fn advance_drain(&mut self, now: Instant) {
        let Some(d) = self.drain.as_ref().filter(|d| d.cordoned) else {
            return;
        };
        let reason = d.reason;
        let mut start = Vec::new();
        for key in &d.members {
            if d.outcomes.contains_key(key) {
                continue;
            }
            let Some(s) = self.pods.get(key) else {
                continue;
            };
            if s.eviction.is_some() || s.evicted {
                continue;
            }
            match self.decision(d, s) {
                DrainDecision::Evict => start.push(key.clone()),
                DrainDecision::Protected { until: Some(u) } if u <= now => start.push(key.clone()),
                DrainDecision::Protected { .. } => {}
            }
        }
        for key in start {
            self.request(&key, reason, now);
        }
    }

    /// Start (or tighten) an eviction and run its first step now, so
    /// endpoints turn terminating at the moment of the request.
    pub(super) fn request(&mut self, key: &str, reason: EvictionReason, now: Instant) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        if s.evicted || s.stopped() && s.eviction.is_none() {
            // Nothing runs; a deletion just forgets it.
            if s.removed {
                self.forget(key);
            }
            return;
        }
        match &mut s.eviction {
            Some(e) if !e.is_done() => e.tighten(reason, s.spec.termination_grace, now),
            _ => s.eviction = Some(Eviction::new(reason, s.spec.termination_grace, now)),
        }
        self.step(key, now);
    }

    /// Advance `key`'s eviction. `published`: its terminating endpoints are
    /// out, so a marked pod may now get SIGTERM.
    pub(super) fn step_eviction(&mut self, key: &str, now: Instant, published: bool) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let procs = s.live_procs();
        let exited = procs.is_empty();
        let Some(ev) = s.eviction.as_mut() else {
            return;
        };
        let reason = ev.reason;
        let requested_at = ev.requested_at;
        let mut actions = ev.poll(key, now, exited, self.pdb.as_mut());
        // spec: E6, H3 — endpoints first; SIGTERM only once they are out
        // (at once when nobody publishes them).
        if ev.awaits_signal() && !exited && (published || !self.hold_sigterm) {
            actions.extend(ev.signal(now));
            // A zero grace ends in SIGKILL within the same step.
            actions.extend(ev.poll(key, now, exited, self.pdb.as_mut()));
        }
        let grace = ev.grace;
        let mut finished = None;
        for a in actions {
            match a {
                Action::MarkTerminating { grace } => {
                    // A pending restart must not happen any more.
                    for c in &mut s.ctrs {
                        if let Run::Pending { .. } = c.run {
                            c.run = Run::Stopped;
                        }
                    }
                    self.events.push(PodEvent::EndpointsTerminating {
                        key: key.to_string(),
                        reason,
                        grace,
                    });
                }
                Action::Terminate { grace, deadline } => {
                    for &p in &procs {
                        if let Err(e) = self.procs.signal(p, Sig::Term) {
                            self.events.push(PodEvent::Error {
                                key: key.to_string(),
                                message: format!("SIGTERM: {e:#}"),
                            });
                        }
                    }
                    self.events.push(PodEvent::Terminating {
                        key: key.to_string(),
                        reason,
                        grace,
                        deadline,
                    });
                }
                Action::Blocked { refusals, retry_at } => {
                    self.events.push(PodEvent::EvictionBlocked {
                        key: key.to_string(),
                        reason,
                        refusals,
                        retry_at,
                    })
                }
                Action::Forced { .. } => self.events.push(PodEvent::EvictionForced {
                    key: key.to_string(),
                    reason,
                }),
                Action::Kill => {
                    for &p in &procs {
                        if let Err(e) = self.procs.signal(p, Sig::Kill) {
                            self.events.push(PodEvent::Error {
                                key: key.to_string(),
                                message: format!("SIGKILL: {e:#}"),
                            });
                        }
                    }
                }
                Action::Finished(o) => finished = Some(o),
            }
        }
        // A sandbox-only pod has nothing to wait for: finish in the same call.
        if finished.is_none() && exited && s.eviction.as_ref().is_some_and(Eviction::is_terminating)
        {
            if let Some(ev) = s.eviction.as_mut() {
                for a in ev.poll(key, now, true, self.pdb.as_mut()) {
                    if let Action::Finished(o) = a {
                        finished = Some(o);
                    }
                }
            }
        }
        let Some(outcome) = finished else {
            return;
        };
        let record = Finished {
            reason,
            grace,
            requested_at,
            ended_at: now,
            outcome,
        };
        let member = self.drain.as_mut().filter(|d| d.members.contains(key));
        match member {
            Some(d) => {
                d.outcomes.insert(key.to_string(), record);
            }
            None => {
                if self.singles.len() >= SINGLE_REPORTS {
                    self.singles.pop_front();
                }
                self.singles.push_back((key.to_string(), record));
            }
        }
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        self.events.push(PodEvent::EvictionDone {
            key: key.to_string(),
            reason,
            outcome,
        });
        if let EvictionOutcome::Refused { .. } = outcome {
            // The pod keeps running; a later request starts afresh.
            s.eviction = None;
            return;
        }
        s.eviction = None;
        s.stop_all();
        if s.removed {
            self.forget(key);
            return;
        }
        if s.replacement.is_some() {
            self.replace(key, now);
            return;
        }
        s.evicted = true;
        if s.owns_netns && s.sandbox {
            let name = s.netns.clone();
            s.sandbox = false;
            s.network_ready = false;
            if let Err(e) = self.procs.remove_netns(&name) {
                self.events.push(PodEvent::Error {
                    key: key.to_string(),
                    message: format!("removing namespace {name}: {e:#}"),
                });
            }
        }
    }
}
