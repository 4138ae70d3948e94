//! The agent's own drains and evictions when the API server holds the
//! desired state, decided without I/O: what `kubectl drain` does, asked
//! for by the Node's `sluice.dev/drain: <reason>` (or one pod's
//! `sluice.dev/evict: <reason>`), with the reason's grace cap and
//! PodDisruptionBudget handling.
//!
//! A drain:
//! 1. cordons the Node (`spec.unschedulable: true`) unless it already is,
//!    and then marks it [`DRAIN_CORDONED_ANNOTATION`], so the cordon is undone when
//!    the drain annotation goes (even across an agent restart) and a
//!    user's own cordon is left alone;
//! 2. once the cordon is seen in the API (replacements must not come back
//!    here), asks the Eviction API for every pod of the node the reason may
//!    take ([`drain_decision`]: `safe-to-evict: "false"`, E2–E5, A3), with
//!    `deleteOptions.gracePeriodSeconds` = min(pod's grace, reason's cap)
//!    and the pod's uid as precondition. DaemonSet pods stay, as with
//!    `kubectl drain --ignore-daemonsets`;
//! 3. a 201 is the end of this side's work: the pod's graceful deletion
//!    follows the path every deletion takes (endpoints terminating, SIGTERM,
//!    the object deleted once the pod has stopped). A 429 (a budget
//!    refuses) is retried after [`backoff`] (every 5 s, as `kubectl drain`); the
//!    reason decides for how long ([`PdbPolicy`]): a scale-down gives up
//!    after 10 min (C5), an upgrade deletes the pod after 1 h (U1, E1),
//!    a user's drain retries for good. Reasons that ignore budgets (B5,
//!    blue pool deletion) delete the pod with the capped grace instead of
//!    evicting it. A 404 (or a uid that no longer matches) means the pod is
//!    gone already. Anything else is retried after [`RETRY_FIRST`]
//!    doubling to [`RETRY_MAX`];
//! 4. pods bound to the node while it drains (a pod tolerating the cordon)
//!    are evicted too: the drain holds as long as the annotation does.
//!
//! Removing the annotation stops asking (evictions already accepted go on)
//! and uncordons the node if the agent cordoned it.
//!
//! The sync loop calls [`ApiDrains::plan`] every tick with the Node and the
//! node's pods as the API shows them and sends the returned [`Request`]s;
//! what the API answered comes back through [`ApiDrains::answer`]. The
//! clock is always passed in.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use crate::pods::eviction::{
    backoff, drain_decision, effective_grace, DrainDecision, EvictionOutcome, EvictionReason,
    PdbPolicy, PoolKind,
};
use crate::pods::{DrainProgress, EvictionReport, EvictionState};
use crate::state::DesiredState;

pub use crate::pods::eviction::DRAIN_CORDONED_ANNOTATION;
/// First retry after a failed API call (not a budget's refusal), doubled
/// per failure up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(30);
/// After the API accepted a cordon or an uncordon, how long the agent
/// waits for the watch to show it before asking again.
pub const RESEND_AFTER: Duration = Duration::from_secs(5);
/// Ended evictions outside a drain kept for the report.
const SINGLE_REPORTS: usize = 32;

/// The Node as the drain needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFacts {
    /// `sluice.dev/drain`.
    pub drain: Option<EvictionReason>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// [`DRAIN_CORDONED_ANNOTATION`] is set.
    pub cordoned_by_agent: bool,
    /// `sluice.dev/cordoned-at` on this clock: when a drain counts from
    /// (A3) if the node was cordoned before the agent saw the drain.
    pub cordoned_at: Option<Instant>,
    /// `sluice.dev/pool-kind`.
    pub pool: PoolKind,
}

/// One pod bound to this node, as the drain needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// `namespace/name`.
    pub key: String,
    pub uid: Option<String>,
    /// `spec.terminationGracePeriodSeconds`.
    pub grace: Duration,
    /// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`.
    pub safe_to_evict_false: bool,
    /// When the pod started (its `status.startTime` on this clock), if it
    /// has; else when the drain first saw it (E3 counts from before the
    /// container ran).
    pub started: Option<Instant>,
    /// `metadata.deletionTimestamp` is set: it is going already.
    pub deleting: bool,
    /// `sluice.dev/evict`.
    pub evict: Option<EvictionReason>,
    /// Controlled by a DaemonSet: a drain leaves it (it would come back).
    pub daemon_set: bool,
}

/// A call to the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Patch the Node: `spec.unschedulable: true`, [`DRAIN_CORDONED_ANNOTATION`].
    Cordon,
    /// Patch the Node: `spec.unschedulable` and [`DRAIN_CORDONED_ANNOTATION`]
    /// removed.
    Uncordon,
    /// `POST pods/<name>/eviction`.
    Evict {
        key: String,
        uid: Option<String>,
        grace: Duration,
    },
    /// `DELETE pods/<name>`: a reason that ignores budgets, or one whose
    /// patience with them ran out.
    Delete {
        key: String,
        uid: Option<String>,
        grace: Duration,
    },
}

/// What the API server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 2xx: cordoned, uncordoned, or the pod's deletion began.
    Done,
    /// 429: a PodDisruptionBudget refused.
    Refused,
    /// 404, or 409 on the uid precondition: the pod is gone (or replaced).
    Gone,
    /// Anything else (a connection, a 5xx); retried.
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AskState {
    /// To be sent at `at`.
    Due {
        at: Instant,
    },
    InFlight,
    /// The API began the pod's deletion.
    Accepted {
        at: Instant,
    },
    /// The reason's patience with a refusing budget ran out (C5).
    GaveUp {
        at: Instant,
    },
}

/// One eviction the agent asks of the API.
#[derive(Debug, Clone)]
struct Ask {
    reason: EvictionReason,
    pod_grace: Duration,
    uid: Option<String>,
    requested_at: Instant,
    refusals: u32,
    failures: u32,
    state: AskState,
    /// Asked by the drain (and dropped, unless already accepted, when the
    /// drain ends), not by the pod's own `sluice.dev/evict`.
    from_drain: bool,
}

impl Ask {
    fn new(reason: EvictionReason, pod: &PodFacts, from_drain: bool, now: Instant) -> Ask {
        Ask {
            from_drain,
            reason,
            pod_grace: pod.grace,
            uid: pod.uid.clone(),
            requested_at: now,
            refusals: 0,
            failures: 0,
            state: AskState::Due { at: now },
        }
    }

    fn grace(&self) -> Duration {
        effective_grace(self.pod_grace, self.reason)
    }

    /// A stricter reason for an eviction not yet accepted (an upgrade's
    /// drain taking over a user's, B5 after an upgrade waited on a budget):
    /// the shorter grace and the other budget handling apply from now.
    fn tighten(&mut self, reason: EvictionReason, now: Instant) {
        if reason == self.reason || matches!(self.state, AskState::Accepted { .. }) {
            return;
        }
        if effective_grace(self.pod_grace, reason) <= self.grace()
            || reason.pdb_policy() == PdbPolicy::Ignore
        {
            self.reason = reason;
            self.requested_at = now;
            if let AskState::GaveUp { .. } = self.state {
                self.state = AskState::Due { at: now };
            }
        }
    }

    fn report(&self, key: &str, now: Instant, outcome: Option<EvictionOutcome>) -> EvictionReport {
        let state = match (self.state, outcome) {
            (_, Some(o)) => EvictionState::of(o),
            (AskState::GaveUp { .. }, None) => EvictionState::RefusedByPdbGaveUp,
            (AskState::Accepted { .. }, None) => EvictionState::Terminating,
            (_, None) if self.refusals > 0 => EvictionState::RefusedByPdbRetrying,
            (_, None) => EvictionState::Pending,
        };
        let end = match self.state {
            AskState::GaveUp { at } => at,
            _ => now,
        };
        EvictionReport {
            key: key.to_string(),
            reason: self.reason,
            state,
            grace: self.grace(),
            elapsed: end.saturating_duration_since(self.requested_at),
            refusals: self.refusals,
        }
    }
}

/// An eviction whose pod has gone, for the report.
#[derive(Debug, Clone)]
struct Ended {
    ask: Ask,
    ended_at: Instant,
    outcome: Option<EvictionOutcome>,
}

impl Ended {
    fn report(&self, key: &str) -> EvictionReport {
        let mut r = self.ask.report(key, self.ended_at, self.outcome);
        if self.outcome.is_none() {
            // Gone without this agent seeing it stop (deleted meanwhile,
            // or before it ever ran here).
            r.state = EvictionState::Deleted;
        }
        r
    }
}

/// The drain the Node asks for (kept after it ends, for the report, until
/// the next one begins).
#[derive(Debug, Clone)]
struct DrainRun {
    reason: EvictionReason,
    /// When it began here (A3 counts 7 days from the cordon).
    since: Instant,
    /// The annotation is still there.
    active: bool,
    /// Every pod it has taken on or left alone.
    members: BTreeSet<String>,
    /// Pods it leaves alone, and until when (`None`: never).
    protected: BTreeMap<String, Option<Instant>>,
    ended: BTreeMap<String, Ended>,
}

/// A cordon or an uncordon on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeCall {
    cordon: bool,
    in_flight: bool,
    failures: u32,
    not_before: Instant,
}

/// Every drain and eviction the agent runs through the API.
#[derive(Debug, Default)]
pub struct ApiDrains {
    drain: Option<DrainRun>,
    node_call: Option<NodeCall>,
    asks: BTreeMap<String, Ask>,
    /// The `sluice.dev/evict` value each pod was last evicted for: once
    /// per value.
    evict_seen: BTreeMap<String, EvictionReason>,
    first_seen: BTreeMap<String, Instant>,
    /// How the pod runtime ended each pod whose deletion it ran.
    stopped: BTreeMap<String, EvictionOutcome>,
    singles: std::collections::VecDeque<(String, Ended)>,
}

/// Node `node` as the drain needs it, if the state has it; `now` and
/// `wall` are the same moment on both clocks.
pub fn node_facts(
    state: &DesiredState,
    node: &str,
    now: Instant,
    wall: SystemTime,
) -> Option<NodeFacts> {
    state.nodes.get(node).map(|n| NodeFacts {
        drain: n.drain,
        unschedulable: n.unschedulable,
        cordoned_by_agent: n.cordoned_by_agent,
        cordoned_at: n.cordoned_at.and_then(|t| on_this_clock(t, now, wall)),
        pool: n.pool,
    })
}

/// A past wall-clock time on the monotonic clock (a future one is now).
fn on_this_clock(t: SystemTime, now: Instant, wall: SystemTime) -> Option<Instant> {
    now.checked_sub(wall.duration_since(t).unwrap_or(Duration::ZERO))
}

/// The pods bound to `node`; `now` and `wall` are the same moment on both
/// clocks (a pod's `status.startTime` is a date).
pub fn pod_facts(
    state: &DesiredState,
    node: &str,
    now: Instant,
    wall: SystemTime,
) -> Vec<PodFacts> {
    state
        .pods
        .values()
        .filter(|p| p.node == node)
        .map(|p| PodFacts {
            key: p.key.clone(),
            uid: p.uid.clone(),
            grace: p.run.termination_grace,
            safe_to_evict_false: p.run.safe_to_evict_false(),
            started: p
                .reported
                .start_time
                .and_then(|t| on_this_clock(t, now, wall)),
            deleting: p.deleting,
            evict: p.evict,
            daemon_set: p.daemon_set,
        })
        .collect()
}

fn retry_after(failures: u32) -> Duration {
    crate::backoff::doubling(RETRY_FIRST, RETRY_MAX, failures.saturating_sub(1))
}

impl ApiDrains {
    /// The calls due now, given the Node and every pod bound to it.
    pub fn plan(&mut self, node: &NodeFacts, pods: &[PodFacts], now: Instant) -> Vec<Request> {
        self.follow_drain(node, now);
        self.forget_gone(pods, now);
        let mut out = Vec::new();
        if let Some(r) = self.node_request(node, now) {
            out.push(r);
        }
        self.ask_for_annotated(pods, now);
        // spec: U1, U2 — evictions only once the cordon is in the API, so
        // the replacements are scheduled elsewhere.
        if node.unschedulable {
            self.ask_for_drained(node, pods, now);
        }
        self.note_deleting(pods, now);
        for (key, ask) in &mut self.asks {
            if let Some(r) = due(key, ask, now) {
                out.push(r);
            }
        }
        out
    }

    /// What the API answered to `req`.
    pub fn answer(&mut self, req: &Request, answer: Answer, now: Instant) {
        let key = match req {
            Request::Cordon | Request::Uncordon => {
                if let Some(c) = self.node_call.as_mut() {
                    c.in_flight = false;
                    match answer {
                        Answer::Failed(_) | Answer::Refused => {
                            c.failures += 1;
                            c.not_before = now + retry_after(c.failures);
                        }
                        Answer::Done | Answer::Gone => {
                            c.failures = 0;
                            c.not_before = now + RESEND_AFTER;
                        }
                    }
                }
                return;
            }
            Request::Evict { key, .. } | Request::Delete { key, .. } => key,
        };
        let Some(ask) = self.asks.get_mut(key) else {
            return;
        };
        if ask.state != AskState::InFlight {
            return;
        }
        match answer {
            Answer::Done => {
                ask.failures = 0;
                ask.state = AskState::Accepted { at: now };
            }
            Answer::Refused | Answer::Failed(_)
                if ask.from_drain && !self.drain.as_ref().is_some_and(|d| d.active) =>
            {
                self.asks.remove(key);
            }
            Answer::Refused => {
                ask.refusals += 1;
                ask.state = match ask.reason.pdb_policy() {
                    // spec: C5 — a scale-down does not break budgets.
                    PdbPolicy::RetryThenGiveUp(p)
                        if now.saturating_duration_since(ask.requested_at) >= p =>
                    {
                        AskState::GaveUp { at: now }
                    }
                    _ => AskState::Due {
                        at: now + backoff(ask.refusals),
                    },
                };
            }
            Answer::Gone => {
                let key = key.clone();
                self.end(&key, now);
            }
            Answer::Failed(_) => {
                ask.failures += 1;
                ask.state = AskState::Due {
                    at: now + retry_after(ask.failures),
                };
            }
        }
    }

    /// The pod runtime finished stopping `key` (its deletion): how.
    pub fn stopped(&mut self, key: &str, outcome: EvictionOutcome) {
        if self.asks.contains_key(key) {
            self.stopped.insert(key.to_string(), outcome);
        }
    }

    /// Where the current (or last) drain stands, for the status file.
    pub fn progress(&self, now: Instant) -> Option<DrainProgress> {
        let d = self.drain.as_ref()?;
        let mut p = DrainProgress {
            reason: Some(d.reason),
            cordoned: d.active,
            ..DrainProgress::default()
        };
        for key in &d.members {
            let report = if let Some(e) = d.ended.get(key) {
                e.report(key)
            } else if let Some(a) = self.asks.get(key) {
                a.report(key, now, self.stopped.get(key).copied())
            } else {
                let state = match d.protected.get(key) {
                    Some(until) => EvictionState::Protected { until: *until },
                    None if !d.active => EvictionState::NotEvicted,
                    None => continue,
                };
                EvictionReport {
                    key: key.clone(),
                    reason: d.reason,
                    state,
                    grace: Duration::ZERO,
                    elapsed: Duration::ZERO,
                    refusals: 0,
                }
            };
            match report.state {
                EvictionState::Pending => p.pending.push(key.clone()),
                EvictionState::RefusedByPdbRetrying => {
                    p.blocked.push((key.clone(), report.refusals))
                }
                EvictionState::Terminating => p.terminating.push(key.clone()),
                EvictionState::Protected { until } => p.protected.push((key.clone(), until)),
                EvictionState::ExitedGracefully => p.done.push((
                    key.clone(),
                    EvictionOutcome::Graceful {
                        after: report.elapsed,
                    },
                )),
                EvictionState::KilledAfterGrace => p.done.push((
                    key.clone(),
                    EvictionOutcome::Killed {
                        after: report.elapsed,
                    },
                )),
                EvictionState::RefusedByPdbGaveUp => p.done.push((
                    key.clone(),
                    EvictionOutcome::Refused {
                        attempts: report.refusals,
                    },
                )),
                EvictionState::NotEvicted | EvictionState::Deleted => {}
            }
            p.pods.push(report);
        }
        p.finished = p.pending.is_empty()
            && p.blocked.is_empty()
            && p.terminating.is_empty()
            && p.protected.iter().all(|(_, u)| u.is_none());
        Some(p)
    }

    /// Evictions outside a drain (`sluice.dev/evict`): under way and the
    /// last ones that ended.
    pub fn single_evictions(&self, now: Instant) -> Vec<EvictionReport> {
        let members = self.drain.as_ref().map(|d| &d.members);
        let mut out: Vec<EvictionReport> = self.singles.iter().map(|(k, e)| e.report(k)).collect();
        for (key, a) in &self.asks {
            if members.is_some_and(|m| m.contains(key)) {
                continue;
            }
            out.push(a.report(key, now, self.stopped.get(key).copied()));
        }
        out
    }

    /// Follow the annotation: a drain begins, tightens or ends.
    fn follow_drain(&mut self, node: &NodeFacts, now: Instant) {
        match (node.drain, self.drain.as_mut()) {
            (Some(reason), Some(d)) if d.active => {
                if d.reason != reason {
                    d.reason = reason;
                    d.protected.clear();
                    for key in &d.members {
                        if let Some(a) = self.asks.get_mut(key) {
                            a.tighten(reason, now);
                        }
                    }
                }
            }
            (Some(reason), _) => {
                self.drain = Some(DrainRun {
                    reason,
                    // The cordon's own time when the controller wrote it:
                    // a restarted agent does not start A3's 7 days again.
                    since: node.cordoned_at.filter(|t| *t <= now).unwrap_or(now),
                    active: true,
                    members: BTreeSet::new(),
                    protected: BTreeMap::new(),
                    ended: BTreeMap::new(),
                });
            }
            (None, Some(d)) if d.active => {
                d.active = false;
                d.protected.clear();
            }
            (None, _) => {}
        }
        if !self.drain.as_ref().is_some_and(|d| d.active) {
            // Asking stops; what the API accepted goes on (an answer still
            // in flight is dropped when it comes).
            self.asks.retain(|_, a| {
                !a.from_drain || matches!(a.state, AskState::Accepted { .. } | AskState::InFlight)
            });
        }
    }

    /// The cordon the drain wants and the Node does not have yet, or the
    /// agent's own cordon to undo.
    fn node_request(&mut self, node: &NodeFacts, now: Instant) -> Option<Request> {
        let active = self.drain.as_ref().is_some_and(|d| d.active);
        let want = if active && !node.unschedulable {
            Some(true)
        } else if active && node.unschedulable && !node.cordoned_by_agent {
            // A user's cordon (or ours, its mark not seen yet): leave it.
            None
        } else if !active && node.cordoned_by_agent {
            Some(false)
        } else {
            None
        };
        let Some(cordon) = want else {
            self.node_call = None;
            return None;
        };
        let call = match self.node_call {
            Some(c) if c.cordon == cordon => c,
            _ => NodeCall {
                cordon,
                in_flight: false,
                failures: 0,
                not_before: now,
            },
        };
        self.node_call = Some(call);
        if call.in_flight || now < call.not_before {
            return None;
        }
        self.node_call = Some(NodeCall {
            in_flight: true,
            ..call
        });
        Some(if cordon {
            Request::Cordon
        } else {
            Request::Uncordon
        })
    }

    /// `sluice.dev/evict: <reason>`: one eviction per value.
    fn ask_for_annotated(&mut self, pods: &[PodFacts], now: Instant) {
        for p in pods {
            let before = self.evict_seen.get(&p.key).copied();
            if p.evict == before {
                continue;
            }
            match p.evict {
                None => {
                    self.evict_seen.remove(&p.key);
                }
                Some(reason) => {
                    self.evict_seen.insert(p.key.clone(), reason);
                    if p.deleting {
                        continue;
                    }
                    match self.asks.get_mut(&p.key) {
                        Some(a) => {
                            a.from_drain = false;
                            a.tighten(reason, now);
                        }
                        None => {
                            self.asks
                                .insert(p.key.clone(), Ask::new(reason, p, false, now));
                        }
                    }
                }
            }
        }
    }

    /// Every pod of a cordoned, draining node that the reason may take.
    fn ask_for_drained(&mut self, node: &NodeFacts, pods: &[PodFacts], now: Instant) {
        let Some(d) = self.drain.as_mut().filter(|d| d.active) else {
            return;
        };
        for p in pods {
            if p.deleting || p.daemon_set || d.ended.contains_key(&p.key) {
                continue;
            }
            let started = p
                .started
                .or_else(|| self.first_seen.get(&p.key).copied())
                .unwrap_or(now);
            match drain_decision(d.reason, node.pool, p.safe_to_evict_false, started, d.since) {
                DrainDecision::Protected { until } if until.is_none_or(|u| u > now) => {
                    d.members.insert(p.key.clone());
                    d.protected.insert(p.key.clone(), until);
                    continue;
                }
                _ => {}
            }
            d.protected.remove(&p.key);
            d.members.insert(p.key.clone());
            match self.asks.get_mut(&p.key) {
                Some(a) => a.tighten(d.reason, now),
                None => {
                    self.asks
                        .insert(p.key.clone(), Ask::new(d.reason, p, true, now));
                }
            }
        }
    }

    /// A pod whose deletion began by other means (`kubectl delete`, a
    /// controller) needs no eviction any more.
    fn note_deleting(&mut self, pods: &[PodFacts], now: Instant) {
        for p in pods.iter().filter(|p| p.deleting) {
            if let Some(a) = self.asks.get_mut(&p.key) {
                if matches!(a.state, AskState::Due { .. } | AskState::GaveUp { .. }) {
                    a.state = AskState::Accepted { at: now };
                }
            }
        }
    }

    /// Pods no longer bound here: their evictions ended.
    fn forget_gone(&mut self, pods: &[PodFacts], now: Instant) {
        let live: BTreeSet<&str> = pods.iter().map(|p| p.key.as_str()).collect();
        for p in pods {
            self.first_seen.entry(p.key.clone()).or_insert(now);
        }
        self.first_seen.retain(|k, _| live.contains(k.as_str()));
        self.evict_seen.retain(|k, _| live.contains(k.as_str()));
        let gone: Vec<String> = self
            .asks
            .keys()
            .filter(|k| !live.contains(k.as_str()))
            .cloned()
            .collect();
        for key in gone {
            self.end(&key, now);
        }
        if let Some(d) = self.drain.as_mut() {
            d.protected.retain(|k, _| live.contains(k.as_str()));
            if d.active {
                d.members
                    .retain(|k| live.contains(k.as_str()) || d.ended.contains_key(k));
            }
        }
    }

    /// `key`'s eviction is over: its pod is gone.
    fn end(&mut self, key: &str, now: Instant) {
        let Some(ask) = self.asks.remove(key) else {
            return;
        };
        let ended = Ended {
            ask,
            ended_at: now,
            outcome: self.stopped.remove(key),
        };
        match self.drain.as_mut().filter(|d| d.members.contains(key)) {
            Some(d) => {
                d.ended.insert(key.to_string(), ended);
            }
            None => {
                if self.singles.len() >= SINGLE_REPORTS {
                    self.singles.pop_front();
                }
                self.singles.push_back((key.to_string(), ended));
            }
        }
    }
}

/// The call `ask` is due for now, if any.
fn due(key: &str, ask: &mut Ask, now: Instant) -> Option<Request> {
    let AskState::Due { at } = ask.state else {
        return None;
    };
    if now < at {
        return None;
    }
    let waited = now.saturating_duration_since(ask.requested_at);
    let force = match ask.reason.pdb_policy() {
        // spec: B5 — blue pool deletion deletes; budgets are not asked.
        PdbPolicy::Ignore => true,
        // spec: U1, E1, A2 — budgets honoured for so long, then forced.
        PdbPolicy::RetryThenForce(p) => ask.refusals > 0 && waited >= p,
        // spec: C5 — a scale-down gives up rather than break a budget.
        PdbPolicy::RetryThenGiveUp(p) if ask.refusals > 0 && waited >= p => {
            ask.state = AskState::GaveUp { at: now };
            return None;
        }
        PdbPolicy::RetryThenGiveUp(_) | PdbPolicy::RetryForever => false,
    };
    ask.state = AskState::InFlight;
    let (key, uid, grace) = (key.to_string(), ask.uid.clone(), ask.grace());
    Some(if force {
        Request::Delete { key, uid, grace }
    } else {
        Request::Evict { key, uid, grace }
    })
}

#[cfg(test)]
#[path = "drain_tests.rs"]
mod tests;
