//! The facade the sync loop drives: which pods run, their readiness, their
//! evictions and the node's drain. All decisions live here and in
//! [`super::readiness`] / [`super::eviction`]; I/O goes through
//! [`ProcessControl`] and [`Prober`], and time is always passed in, so the
//! whole thing runs under test with fakes and a hand-moved clock.
//!
//! Lifecycle of one pod:
//!
//! 1. `sync` sees it: the network namespace is made (`sl-pod-<hash>`, or the
//!    existing one named by `sluice.dev/netns`), [`PodEvent::SandboxReady`].
//! 2. The runner plugs the pod's link (engine) and calls
//!    [`PodManager::set_network_ready`]; pods without IPs need no link.
//! 3. `tick` starts a process per container; readiness probes follow each
//!    container's spec; the pod is ready when all its containers are.
//! 4. A container exits without an eviction: it alone restarts per
//!    `restartPolicy` with the kubelet's back-off (10 s doubling to 5 min).
//! 5. `evict` / `drain` / leaving the desired state: an [`Eviction`]. Its
//!    endpoints turn terminating first ([`PodEvent::EndpointsTerminating`]);
//!    SIGTERM to every container follows at once, or, with
//!    [`PodManager::hold_sigterm`], when the runner has published them
//!    ([`PodManager::endpoints_published`]). While a drain cordons the node,
//!    new pods are held, not started ([`PodManager::held`]). When the
//!    eviction is done the agent-made namespace is deleted and
//!    [`PodEvent::EvictionDone`] tells the runner to unplug the link. An
//!    evicted pod that is still in the desired state is not restarted
//!    (Kubernetes would have deleted it); it is forgotten when it leaves.
//!
//! The module holds the facade; its parts:
//! - `netns`: the names of the namespaces the agent makes for pods;
//! - `reports`: what the manager tells the runner (events, endpoint
//!   states, eviction and drain reports);
//! - `pod_state`: what it keeps per pod, per container and per drain;
//! - `lifecycle`: namespaces, processes, restarts and probes of one pod;
//! - `evicting`: requesting, advancing and finishing evictions and drains;
//! - `observe`: what it sees of each pod, for the status written back to
//!   the API server, and stopping a pod whose API object is deleted.

mod evicting;
mod lifecycle;
mod netns;
mod observe;
mod pod_state;
mod reports;

pub use netns::{netns_name, set_netns_prefix, DEFAULT_NETNS_PREFIX};
pub use observe::{ContainerObservation, ContainerRunState, PodObservation};
pub use pod_state::{
    restart_backoff, RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX, RESTART_BACKOFF_RESET,
};
pub use reports::{
    DrainProgress, EvictError, EvictionReport, EvictionState, PodEndpoint, PodEvent,
    ShutdownReport, HELD_CORDONED,
};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pods::eviction::{
    effective_grace, DrainDecision, Eviction, EvictionReason, NoPdb, PdbGate, Phase, PoolKind,
};
use crate::pods::readiness::endpoint_conditions;
use crate::pods::runtime::{ProbeResult, Prober, ProcId, ProcessControl, Sig};
use crate::pods::spec::PodRunSpec;
use pod_state::{Drain, Run, Slot};
use reports::{live_report, Finished};

/// The longest a pod's SIGTERM waits for the cluster to stop advertising
/// its endpoints as ready ([`PodManager::endpoints_published_unless`]).
pub const MAX_ADVERTISED_HOLD: Duration = Duration::from_secs(5);

pub struct PodManager {
    procs: Box<dyn ProcessControl>,
    prober: Box<dyn Prober>,
    pdb: Box<dyn PdbGate>,
    pool: PoolKind,
    pods: BTreeMap<String, Slot>,
    drain: Option<Drain>,
    /// Pods assigned while the node is cordoned: not started (a kubelet on
    /// an unschedulable node would not have been given them).
    held: BTreeMap<String, PodRunSpec>,
    /// Ended evictions that were not part of a drain, oldest first.
    singles: std::collections::VecDeque<(String, Finished)>,
    /// SIGTERM waits for [`PodManager::endpoints_published`].
    hold_sigterm: bool,
    /// `sluice.dev/evict` is acted on here (a state file); with the API as
    /// the source the Eviction API decides and the pod's deletion comes
    /// back as such.
    annotated_evictions: bool,
    events: Vec<PodEvent>,
}

impl PodManager {
    pub fn new(procs: Box<dyn ProcessControl>, prober: Box<dyn Prober>, pool: PoolKind) -> Self {
        PodManager {
            procs,
            prober,
            pdb: Box::new(NoPdb),
            pool,
            pods: BTreeMap::new(),
            drain: None,
            held: BTreeMap::new(),
            singles: std::collections::VecDeque::new(),
            hold_sigterm: false,
            annotated_evictions: true,
            events: Vec::new(),
        }
    }

    /// With `false`, `sluice.dev/evict` annotations are left to whoever
    /// evicts through the API (the pod's deletion then arrives as one).
    pub fn set_annotated_evictions(&mut self, on: bool) {
        self.annotated_evictions = on;
    }

    /// With `true`, an eviction only marks the pod's endpoints terminating
    /// ([`PodEvent::EndpointsTerminating`]); SIGTERM goes out when the caller
    /// has published them and calls [`PodManager::endpoints_published`]
    /// (E6, H3: the node stops attracting new connections before the pod
    /// starts closing). With `false` (the default, for callers that have no
    /// endpoints to publish) SIGTERM follows within the same call.
    pub fn hold_sigterm(&mut self, hold: bool) {
        self.hold_sigterm = hold;
    }

    /// The terminating endpoints of every marked pod are now in the maps
    /// and the health servers: send their SIGTERMs.
    pub fn endpoints_published(&mut self, now: Instant) -> Vec<PodEvent> {
        self.endpoints_published_unless(now, |_| false)
    }

    /// As [`PodManager::endpoints_published`], except for the pods that
    /// `advertised` says other nodes still send new connections to (the
    /// cluster's EndpointSlices still call them ready): their SIGTERM waits
    /// until the cluster has caught up, for at most
    /// [`MAX_ADVERTISED_HOLD`] after their endpoints turned terminating
    /// here, so a controller that is down cannot keep a pod alive.
    pub fn endpoints_published_unless(
        &mut self,
        now: Instant,
        advertised: impl Fn(&str) -> bool,
    ) -> Vec<PodEvent> {
        let keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(k, s)| {
                s.eviction.as_ref().is_some_and(|e| {
                    e.marked_since().is_some_and(|since| {
                        !advertised(k) || now.duration_since(since) >= MAX_ADVERTISED_HOLD
                    })
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.step_eviction(&key, now, true);
        }
        std::mem::take(&mut self.events)
    }

    /// Pods assigned to this node that do not run, with why.
    pub fn held(&self) -> Vec<(String, &'static str)> {
        self.held
            .keys()
            .map(|k| (k.clone(), HELD_CORDONED))
            .collect()
    }

    /// Ended evictions outside drains (a pod left the desired state, a
    /// single eviction) and those under way, for the report.
    pub fn single_evictions(&self, now: Instant) -> Vec<EvictionReport> {
        let members = self.drain.as_ref().map(|d| &d.members);
        let mut out: Vec<EvictionReport> = self.singles.iter().map(|(k, f)| f.report(k)).collect();
        for (key, s) in &self.pods {
            if members.is_some_and(|m| m.contains(key)) {
                continue;
            }
            if let Some(e) = &s.eviction {
                out.push(live_report(key, e, now));
            }
        }
        out
    }

    /// Who answers for PodDisruptionBudgets (default: no budgets).
    pub fn set_pdb_gate(&mut self, gate: Box<dyn PdbGate>) {
        self.pdb = gate;
    }

    pub fn set_pool(&mut self, pool: PoolKind) {
        self.pool = pool;
    }

    /// The desired pods of this node (the caller filters by `spec.nodeName`).
    pub fn sync(&mut self, desired: &[PodRunSpec], now: Instant) -> Vec<PodEvent> {
        let want: BTreeMap<&str, &PodRunSpec> =
            desired.iter().map(|p| (p.key.as_str(), p)).collect();
        self.held.retain(|k, _| want.contains_key(k.as_str()));
        let cordoned = self.cordoned();
        // Gone from the desired state: delete (own grace, no PDB).
        let keys: Vec<String> = self.pods.keys().cloned().collect();
        for key in &keys {
            if want.contains_key(key.as_str()) {
                continue;
            }
            if let Some(slot) = self.pods.get_mut(key) {
                slot.removed = true;
                slot.replacement = None;
            }
            self.request(key, EvictionReason::Deletion, now);
        }
        for (key, spec) in want {
            match self.pods.get_mut(key) {
                // spec: U1, U2 — a cordoned node takes no new pods.
                None if cordoned => {
                    self.held.insert(key.to_string(), spec.clone());
                }
                None => {
                    self.pods
                        .insert(key.to_string(), Slot::new(spec.clone(), now));
                }
                Some(slot) if !slot.removed && slot.spec.same_but_annotations(spec) => {
                    slot.spec.annotations = spec.annotations.clone();
                }
                Some(slot)
                    if cordoned
                        && (slot.removed || slot.spec != *spec)
                        && !(slot.spec == *spec && slot.eviction.is_none()) =>
                {
                    // spec: U1, U2 — a new pod under an old name (pods are
                    // immutable) waits for uncordon; the old one goes.
                    slot.removed = true;
                    slot.replacement = None;
                    self.held.insert(key.to_string(), spec.clone());
                    self.request(key, EvictionReason::Deletion, now);
                }
                Some(slot) if slot.removed || slot.spec != *spec => {
                    // Came back while stopping, or a changed spec (pods are
                    // immutable in Kubernetes: a new spec is a new pod).
                    slot.removed = false;
                    if slot.spec == *spec && slot.eviction.is_none() {
                        continue;
                    }
                    slot.replacement = Some(spec.clone());
                    if slot.evicted || slot.stopped() {
                        self.replace(key, now);
                    } else {
                        self.request(key, EvictionReason::Deletion, now);
                    }
                }
                Some(_) => {}
            }
        }
        if self.annotated_evictions {
            self.request_annotated_evictions(desired, now);
        }
        self.tick(now)
    }

    /// Pods annotated `sluice.dev/evict: <reason>`: evict each once per
    /// reason; removing the annotation lets the same reason ask again.
    fn request_annotated_evictions(&mut self, desired: &[PodRunSpec], now: Instant) {
        for spec in desired {
            let want = spec.evict_request();
            let Some(slot) = self.pods.get_mut(&spec.key) else {
                continue;
            };
            if slot.removed || slot.evict_requested == want {
                continue;
            }
            slot.evict_requested = want;
            if let Some(reason) = want {
                self.request(&spec.key, reason, now);
            }
        }
    }

    /// The link of `key` is plugged (or unplugged): processes start only in
    /// a wired namespace, so servers can bind their pod IP.
    pub fn set_network_ready(&mut self, key: &str, ready: bool) {
        if let Some(s) = self.pods.get_mut(key) {
            s.network_ready = ready;
        }
    }

    /// Evict one pod. Endpoints turn terminating and SIGTERM goes out within
    /// this call unless a PDB refuses.
    pub fn evict(
        &mut self,
        key: &str,
        reason: EvictionReason,
        now: Instant,
    ) -> Result<(), EvictError> {
        if !self.pods.contains_key(key) {
            return Err(EvictError::UnknownPod(key.to_string()));
        }
        self.request(key, reason, now);
        Ok(())
    }

    /// Cordon the node and evict every pod per `reason` and the pool's rules
    /// for `safe-to-evict: "false"`.
    pub fn drain(&mut self, reason: EvictionReason, now: Instant) -> DrainProgress {
        let members: BTreeSet<String> = self
            .pods
            .iter()
            .filter(|(_, s)| !s.evicted && !s.removed)
            .map(|(k, _)| k.clone())
            .collect();
        let cordoned_at = self
            .drain
            .as_ref()
            .filter(|d| d.cordoned)
            .map_or(now, |d| d.cordoned_at);
        // Evictions already waiting (a PDB, an earlier drain) take the new
        // reason if it is stricter: B5 ignores the PDB an upgrade waited on.
        let waiting: Vec<String> = members
            .iter()
            .filter(|k| {
                self.pods
                    .get(*k)
                    .and_then(|s| s.eviction.as_ref())
                    .is_some_and(|e| !e.is_done())
            })
            .cloned()
            .collect();
        self.drain = Some(Drain {
            reason,
            cordoned_at,
            cordoned: true,
            members,
            outcomes: BTreeMap::new(),
        });
        for key in waiting {
            self.request(&key, reason, now);
        }
        self.advance_drain(now);
        self.drain_progress(now)
    }

    /// Whether a drain has cordoned the node (in progress or done, and not
    /// uncordoned).
    pub fn cordoned(&self) -> bool {
        self.drain.as_ref().is_some_and(|d| d.cordoned)
    }

    /// End the drain; evictions already under way continue, pods held
    /// back by the cordon start, and the drain's report stays until the
    /// next drain begins.
    pub fn uncordon(&mut self, now: Instant) -> Vec<PodEvent> {
        if let Some(d) = self.drain.as_mut() {
            d.cordoned = false;
        }
        for (key, spec) in std::mem::take(&mut self.held) {
            match self.pods.get_mut(&key) {
                // The old pod of that name is still stopping: take its
                // place once it has.
                Some(slot) => {
                    slot.removed = false;
                    slot.replacement = Some(spec);
                    if slot.evicted || slot.stopped() && slot.eviction.is_none() {
                        self.replace(&key, now);
                    }
                }
                None => {
                    self.pods.insert(key, Slot::new(spec, now));
                }
            }
        }
        self.tick(now)
    }

    pub fn drain_progress(&self, now: Instant) -> DrainProgress {
        let Some(d) = &self.drain else {
            return DrainProgress::default();
        };
        let mut p = DrainProgress {
            reason: Some(d.reason),
            cordoned: d.cordoned,
            ..DrainProgress::default()
        };
        for key in &d.members {
            if let Some(f) = d.outcomes.get(key) {
                p.done.push((key.clone(), f.outcome));
                p.pods.push(f.report(key));
                continue;
            }
            let Some(slot) = self.pods.get(key) else {
                continue;
            };
            if let Some(e) = &slot.eviction {
                p.pods.push(live_report(key, e, now));
            }
            match slot.eviction.as_ref().map(|e| e.phase) {
                Some(Phase::Admission { refusals: 0, .. }) => p.pending.push(key.clone()),
                Some(Phase::Admission { refusals, .. }) => p.blocked.push((key.clone(), refusals)),
                Some(Phase::Marked { .. } | Phase::Terminating { .. } | Phase::Killing { .. }) => {
                    p.terminating.push(key.clone())
                }
                Some(Phase::Done(o)) => p.done.push((key.clone(), o)),
                None => {
                    let grace = effective_grace(slot.spec.termination_grace, d.reason);
                    let mut report = EvictionReport {
                        key: key.clone(),
                        reason: d.reason,
                        state: EvictionState::Pending,
                        grace,
                        elapsed: Duration::ZERO,
                        refusals: 0,
                    };
                    match self.decision(d, slot) {
                        _ if !d.cordoned => report.state = EvictionState::NotEvicted,
                        DrainDecision::Protected { until } if until.is_none_or(|u| u > now) => {
                            report.state = EvictionState::Protected { until };
                            p.protected.push((key.clone(), until));
                        }
                        _ => p.pending.push(key.clone()),
                    }
                    p.pods.push(report);
                }
            }
        }
        p.finished = p.pending.is_empty()
            && p.blocked.is_empty()
            && p.terminating.is_empty()
            && p.protected.iter().all(|(_, u)| u.is_none());
        p
    }

    /// Endpoint conditions of every pod that has a running process or is
    /// terminating; stopped and not-yet-started pods have none.
    pub fn endpoint_states(&self) -> Vec<PodEndpoint> {
        self.pods
            .values()
            .filter(|s| s.running())
            .map(|s| PodEndpoint {
                key: s.spec.key.clone(),
                ips: s.spec.ips.clone(),
                conditions: endpoint_conditions(s.ready(), s.terminating()),
            })
            .collect()
    }

    /// Namespaces that exist for pods (the runner plugs exactly these).
    pub fn sandboxes(&self) -> Vec<(String, PathBuf)> {
        self.pods
            .values()
            .filter(|s| s.sandbox)
            .map(|s| (s.spec.key.clone(), s.netns_path()))
            .collect()
    }

    /// The earliest moment `tick` has timed work to do (probe, SIGKILL, PDB
    /// retry, restart, end of a protection), so the caller can sleep until
    /// then. Probe results and process exits also need a tick; poll for
    /// them at the loop's usual rate.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut take = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        for s in self.pods.values() {
            take(s.eviction.as_ref().and_then(Eviction::next_deadline));
            for c in &s.ctrs {
                take(c.readiness.next_due());
                if let Run::Pending { not_before } = c.run {
                    take(Some(not_before));
                }
            }
        }
        if let Some(d) = self.drain.as_ref().filter(|d| d.cordoned) {
            for k in &d.members {
                if let Some(s) = self.pods.get(k) {
                    if let DrainDecision::Protected { until } = self.decision(d, s) {
                        take(until);
                    }
                }
            }
        }
        t
    }

    /// Advance probes, processes, evictions and the drain to `now`.
    pub fn tick(&mut self, now: Instant) -> Vec<PodEvent> {
        for (key, seq, result) in self.prober.poll() {
            let ok = matches!(result, ProbeResult::Success);
            if let Some(s) = self.pods.get_mut(&key) {
                // Stale results (an older probe of a restarted container)
                // match no container's latest sequence number.
                if let Some(c) = s.ctrs.iter_mut().find(|c| c.probe_seq == seq) {
                    c.readiness.record(ok, now);
                }
            }
        }
        self.advance_drain(now);
        let keys: Vec<String> = self.pods.keys().cloned().collect();
        for key in keys {
            self.step(&key, now);
        }
        std::mem::take(&mut self.events)
    }

    /// Stop every pod for the agent's own shutdown: SIGTERM to all, SIGKILL
    /// to those still running min(their grace, `cap`) later, then delete the
    /// namespaces the agent made. Blocks (real time) for at most `cap` plus
    /// a short reap wait; a graceful stop of one pod is an eviction instead.
    pub fn shutdown(&mut self, cap: Duration) -> ShutdownReport {
        /// How long a SIGKILLed process gets to be reaped.
        const REAP: Duration = Duration::from_secs(2);
        let start = Instant::now();
        let mut running: Vec<(ProcId, Instant)> = Vec::new();
        for s in self.pods.values() {
            for p in s.live_procs() {
                let _ = self.procs.signal(p, Sig::Term);
                running.push((p, start + s.spec.termination_grace.min(cap)));
            }
        }
        let mut report = ShutdownReport {
            signalled: running.len(),
            killed: 0,
            not_reaped: 0,
        };
        let mut killed = false;
        loop {
            let now = Instant::now();
            running.retain(|(p, _)| matches!(self.procs.try_wait(*p), Ok(None)));
            if running.is_empty() {
                break;
            }
            for (p, deadline) in &mut running {
                if now >= *deadline {
                    if *deadline <= start + cap {
                        report.killed += 1;
                    }
                    let _ = self.procs.signal(*p, Sig::Kill);
                    *deadline = start + cap + REAP;
                    killed = true;
                }
            }
            if killed && now >= start + cap + REAP {
                report.not_reaped = running.len();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for s in self.pods.values_mut() {
            s.stop_all();
            if s.owns_netns && s.sandbox {
                let _ = self.procs.remove_netns(&s.netns);
                s.sandbox = false;
            }
        }
        report
    }
}
