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

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::eviction::{
    drain_decision, effective_grace, Action, DrainDecision, Eviction, EvictionOutcome,
    EvictionReason, NoPdb, PdbGate, Phase, PoolKind,
};
use super::readiness::{endpoint_conditions, EndpointConditions, Readiness, Thresholds};
use super::runtime::{
    ExitInfo, ProbeRequest, ProbeResult, Prober, ProcId, ProcessControl, Sig, SpawnSpec, NETNS_DIR,
};
use super::spec::{PodRunSpec, RestartPolicy};

/// The kubelet's crash-loop back-off: first delay, doubling, and its cap.
pub const RESTART_BACKOFF_INITIAL: Duration = Duration::from_secs(10);
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long resets the back-off.
pub const RESTART_BACKOFF_RESET: Duration = Duration::from_secs(600);

static NETNS_PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The default start of the names of namespaces the agent makes for pods.
pub const DEFAULT_NETNS_PREFIX: &str = "sl-pod";

/// Set, once per process and before any pod is run, how the agent's pod
/// namespaces are named. Several agents sharing one host (the lab, tests)
/// need distinct prefixes; on a real node the default is fine.
pub fn set_netns_prefix(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 200
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !ok {
        return Err(format!(
            "pod namespace prefix {prefix:?}: use 1-200 letters, digits, '-', '_' or '.'"
        ));
    }
    let set = NETNS_PREFIX.get_or_init(|| prefix.to_string());
    if set != prefix {
        return Err(format!("pod namespace prefix already set to {set:?}"));
    }
    Ok(())
}

/// Name of the namespace the agent makes for a pod: stable across restarts
/// (so a restarted agent finds it).
pub fn netns_name(key: &str) -> String {
    let prefix = NETNS_PREFIX
        .get()
        .map(String::as_str)
        .unwrap_or(DEFAULT_NETNS_PREFIX);
    format!("{prefix}-{:08x}", crate::control::stable_hash(key))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    /// The pod's namespace exists: plug its link.
    SandboxReady {
        key: String,
        netns: PathBuf,
    },
    Started {
        key: String,
        container: String,
        restarts: u32,
    },
    Exited {
        key: String,
        container: String,
        exit: ExitInfo,
    },
    ReadinessChanged {
        key: String,
        ready: bool,
    },
    /// The pod's endpoints are terminating (E6); SIGTERM follows once they
    /// are out (see [`PodManager::hold_sigterm`]).
    EndpointsTerminating {
        key: String,
        reason: EvictionReason,
        grace: Duration,
    },
    /// SIGTERM sent; SIGKILL at `deadline`.
    Terminating {
        key: String,
        reason: EvictionReason,
        grace: Duration,
        deadline: Instant,
    },
    /// A PodDisruptionBudget refused the eviction; retried at `retry_at`.
    EvictionBlocked {
        key: String,
        reason: EvictionReason,
        refusals: u32,
        retry_at: Instant,
    },
    /// PDB patience ran out for a reason that then forces (U1, A2).
    EvictionForced {
        key: String,
        reason: EvictionReason,
    },
    EvictionDone {
        key: String,
        reason: EvictionReason,
        outcome: EvictionOutcome,
    },
    /// The pod left the desired state and everything it had is gone: unplug.
    Removed {
        key: String,
    },
    Error {
        key: String,
        message: String,
    },
}

/// A pod's endpoint as the control side needs it (for the maps and the
/// `Local` health servers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEndpoint {
    pub key: String,
    pub ips: Vec<IpAddr>,
    pub conditions: EndpointConditions,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictError {
    UnknownPod(String),
}

impl std::fmt::Display for EvictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvictError::UnknownPod(k) => write!(f, "no pod {k} on this node"),
        }
    }
}

impl std::error::Error for EvictError {}

/// What [`PodManager::shutdown`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Processes sent SIGTERM.
    pub signalled: usize,
    /// Of those, still running after their grace: SIGKILL.
    pub killed: usize,
    /// Not reaped even after SIGKILL (should not happen).
    pub not_reaped: usize,
}

/// Where one pod's eviction stands, in the words of the status file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionState {
    /// Requested, the PodDisruptionBudget not asked yet.
    Pending,
    /// A PDB refused; retried (E6).
    RefusedByPdbRetrying,
    /// Endpoints terminating; SIGTERM sent or about to be.
    Terminating,
    ExitedGracefully,
    KilledAfterGrace,
    /// A PDB kept refusing and the reason gives up (scale-down, C5).
    RefusedByPdbGaveUp,
    /// `safe-to-evict: "false"` keeps it until `until` (`None`: this kind
    /// of drain never evicts it; E2–E5, A3).
    Protected {
        until: Option<Instant>,
    },
    /// The drain was called off (uncordon) before this pod was evicted.
    NotEvicted,
}

impl EvictionState {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionState::Pending => "pending",
            EvictionState::RefusedByPdbRetrying => "refused-by-pdb-retrying",
            EvictionState::Terminating => "terminating",
            EvictionState::ExitedGracefully => "exited-gracefully",
            EvictionState::KilledAfterGrace => "killed-after-grace",
            EvictionState::RefusedByPdbGaveUp => "refused-by-pdb-gave-up",
            EvictionState::Protected { .. } => "protected",
            EvictionState::NotEvicted => "not-evicted",
        }
    }

    fn of(o: EvictionOutcome) -> Self {
        match o {
            EvictionOutcome::Graceful { .. } => EvictionState::ExitedGracefully,
            EvictionOutcome::Killed { .. } => EvictionState::KilledAfterGrace,
            EvictionOutcome::Refused { .. } => EvictionState::RefusedByPdbGaveUp,
        }
    }
}

/// One pod's eviction (or why there is none yet), for the status file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionReport {
    pub key: String,
    pub reason: EvictionReason,
    pub state: EvictionState,
    /// min(terminationGracePeriodSeconds, cap of the reason).
    pub grace: Duration,
    /// Since the eviction was requested; for an ended one, until it ended.
    pub elapsed: Duration,
    /// PodDisruptionBudget refusals so far.
    pub refusals: u32,
}

/// An eviction that ended, kept for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Finished {
    reason: EvictionReason,
    grace: Duration,
    requested_at: Instant,
    ended_at: Instant,
    outcome: EvictionOutcome,
}

impl Finished {
    fn report(&self, key: &str) -> EvictionReport {
        EvictionReport {
            key: key.to_string(),
            reason: self.reason,
            state: EvictionState::of(self.outcome),
            grace: self.grace,
            elapsed: self.ended_at.saturating_duration_since(self.requested_at),
            refusals: match self.outcome {
                EvictionOutcome::Refused { attempts } => attempts,
                _ => 0,
            },
        }
    }
}

/// How many ended evictions outside a drain (deletions, single evictions)
/// the report keeps.
const SINGLE_REPORTS: usize = 32;

/// Why a pod assigned to this node does not run yet.
pub const HELD_CORDONED: &str = "node cordoned";

/// Where each pod of a drain stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrainProgress {
    pub reason: Option<EvictionReason>,
    /// The drain is in force (not uncordoned); its report stays after
    /// uncordon until the next drain begins.
    pub cordoned: bool,
    /// Every member pod, in key order.
    pub pods: Vec<EvictionReport>,
    /// Eviction requested, not yet admitted (no refusal yet).
    pub pending: Vec<String>,
    /// Refused by a PDB at least once; (key, refusals).
    pub blocked: Vec<(String, u32)>,
    pub terminating: Vec<String>,
    pub done: Vec<(String, EvictionOutcome)>,
    /// `safe-to-evict: "false"` pods this drain leaves alone; `until`: when
    /// the drain will evict them anyway (`None`: never by this drain).
    pub protected: Vec<(String, Option<Instant>)>,
    /// Nothing left that this drain will do by itself.
    pub finished: bool,
}

struct Drain {
    reason: EvictionReason,
    cordoned_at: Instant,
    /// False once uncordoned: the record stays for the report.
    cordoned: bool,
    members: BTreeSet<String>,
    outcomes: BTreeMap<String, Finished>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Waiting for the namespace, the link or a restart.
    Pending { not_before: Instant },
    /// `proc` is `None` for sandbox-only pods (no command).
    Running {
        proc: Option<ProcId>,
        since: Instant,
    },
    /// Ended and not to be started again (restartPolicy, or evicted).
    Stopped,
}

/// One container of a pod: its own process, restarts and readiness.
struct Ctr {
    run: Run,
    readiness: Readiness,
    /// The last probe started for it (unique within the pod).
    probe_seq: u64,
    restarts: u32,
}

impl Ctr {
    fn live_proc(&self) -> Option<ProcId> {
        match self.run {
            Run::Running { proc, .. } => proc,
            _ => None,
        }
    }

    fn stop(&mut self) {
        self.run = Run::Stopped;
        self.readiness.stopped();
    }
}

struct Slot {
    spec: PodRunSpec,
    first_seen: Instant,
    netns: String,
    owns_netns: bool,
    sandbox: bool,
    network_ready: bool,
    /// One per `spec.containers`, same order.
    ctrs: Vec<Ctr>,
    reported_ready: bool,
    probe_seq: u64,
    eviction: Option<Eviction>,
    evicted: bool,
    removed: bool,
    replacement: Option<PodRunSpec>,
    /// The `sluice.dev/evict` reason already acted on, so a file re-read
    /// does not restart the eviction (and its PDB patience).
    evict_requested: Option<EvictionReason>,
}

impl Slot {
    fn new(spec: PodRunSpec, now: Instant) -> Self {
        let (netns, owns_netns) = match &spec.netns {
            Some(n) => (n.clone(), false),
            None => (netns_name(&spec.key), true),
        };
        let ctrs = spec
            .containers
            .iter()
            .map(|c| Ctr {
                run: Run::Pending { not_before: now },
                readiness: Readiness::new(c.readiness.as_ref().map(Thresholds::from)),
                probe_seq: 0,
                restarts: 0,
            })
            .collect();
        Slot {
            spec,
            first_seen: now,
            netns,
            owns_netns,
            sandbox: false,
            network_ready: false,
            ctrs,
            reported_ready: false,
            probe_seq: 0,
            eviction: None,
            evicted: false,
            removed: false,
            replacement: None,
            evict_requested: None,
        }
    }

    fn netns_path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.netns)
    }

    fn terminating(&self) -> bool {
        self.eviction.as_ref().is_some_and(Eviction::is_terminating)
    }

    /// Some container runs (or, for a sandbox, the namespace is up).
    fn running(&self) -> bool {
        self.ctrs
            .iter()
            .any(|c| matches!(c.run, Run::Running { .. }))
    }

    /// Every container ready, as the kubelet's pod Ready condition.
    fn ready(&self) -> bool {
        !self.ctrs.is_empty() && self.ctrs.iter().all(|c| c.readiness.is_ready())
    }

    /// Nothing runs and nothing will start again.
    fn stopped(&self) -> bool {
        self.ctrs.iter().all(|c| c.run == Run::Stopped)
    }

    fn live_procs(&self) -> Vec<ProcId> {
        self.ctrs.iter().filter_map(Ctr::live_proc).collect()
    }

    fn stop_all(&mut self) {
        self.ctrs.iter_mut().for_each(Ctr::stop);
    }
}

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
            events: Vec::new(),
        }
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
        let keys: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, s)| s.eviction.as_ref().is_some_and(Eviction::awaits_signal))
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
        self.request_annotated_evictions(desired, now);
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

    // --- internals -----------------------------------------------------

    fn decision(&self, d: &Drain, s: &Slot) -> DrainDecision {
        drain_decision(
            d.reason,
            self.pool,
            s.spec.safe_to_evict_false(),
            s.first_seen,
            d.cordoned_at,
        )
    }

    fn advance_drain(&mut self, now: Instant) {
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
    fn request(&mut self, key: &str, reason: EvictionReason, now: Instant) {
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

    fn emit(&mut self, e: PodEvent) {
        self.events.push(e);
    }

    fn forget(&mut self, key: &str) {
        if let Some(s) = self.pods.remove(key) {
            if s.owns_netns && s.sandbox {
                if let Err(e) = self.procs.remove_netns(&s.netns) {
                    self.emit(PodEvent::Error {
                        key: key.to_string(),
                        message: format!("removing namespace {}: {e:#}", s.netns),
                    });
                }
            }
            self.emit(PodEvent::Removed {
                key: key.to_string(),
            });
        }
    }

    /// The old instance is gone; start over with the replacement spec.
    fn replace(&mut self, key: &str, now: Instant) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let Some(spec) = s.replacement.take() else {
            return;
        };
        let mut fresh = Slot::new(spec, now);
        // Same key, same namespace: keep it (and the link) when it survived.
        if fresh.netns == s.netns && fresh.owns_netns == s.owns_netns {
            fresh.sandbox = s.sandbox;
            fresh.network_ready = s.network_ready;
        } else if s.owns_netns && s.sandbox {
            let _ = self.procs.remove_netns(&s.netns);
        }
        *s = fresh;
    }

    fn ensure_sandbox(&mut self, key: &str) -> bool {
        let Some(s) = self.pods.get_mut(key) else {
            return false;
        };
        if s.sandbox {
            return true;
        }
        let made = if s.owns_netns {
            self.procs.create_netns(&s.netns)
        } else if s.netns_path().exists() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "network namespace {} does not exist",
                s.netns_path().display()
            ))
        };
        match made {
            Ok(()) => {
                s.sandbox = true;
                let e = PodEvent::SandboxReady {
                    key: key.to_string(),
                    netns: s.netns_path(),
                };
                self.emit(e);
                true
            }
            Err(e) => {
                let message = format!("{e:#}");
                self.emit(PodEvent::Error {
                    key: key.to_string(),
                    message,
                });
                false
            }
        }
    }

    /// Start container `i` of `key` (or, without a command, mark it
    /// running: someone else runs it, or the pod is a sandbox).
    fn start(&mut self, key: &str, i: usize, now: Instant) {
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let netns = s.netns_path();
        let (Some(spec), Some(c)) = (s.spec.containers.get(i), s.ctrs.get_mut(i)) else {
            return;
        };
        let proc = if spec.argv.is_empty() {
            Ok(None)
        } else {
            self.procs
                .spawn(&SpawnSpec {
                    key: key.to_string(),
                    container: spec.name.clone(),
                    first: i == 0,
                    netns,
                    argv: spec.argv.clone(),
                    env: spec.env.clone(),
                    working_dir: spec.working_dir.clone(),
                })
                .map(Some)
        };
        match proc {
            Ok(proc) => {
                c.run = Run::Running { proc, since: now };
                c.readiness.started(now);
                let e = PodEvent::Started {
                    key: key.to_string(),
                    container: spec.name.clone(),
                    restarts: c.restarts,
                };
                self.events.push(e);
            }
            Err(e) => {
                c.restarts = c.restarts.saturating_add(1);
                c.run = Run::Pending {
                    not_before: now + restart_backoff(c.restarts),
                };
                let message = format!("container {:?}: {e:#}", spec.name);
                self.events.push(PodEvent::Error {
                    key: key.to_string(),
                    message,
                });
            }
        }
    }

    fn step(&mut self, key: &str, now: Instant) {
        // 1. Sandbox, then the containers.
        let Some(s) = self.pods.get(key) else {
            return;
        };
        let stopping = s.eviction.is_some() || s.evicted || s.removed;
        if !s.sandbox && !stopping && !self.ensure_sandbox(key) {
            return;
        }
        let Some(s) = self.pods.get(key) else {
            return;
        };
        let wired = s.network_ready || s.spec.ips.is_empty();
        if !stopping && wired {
            let due: Vec<usize> = (s.ctrs.iter().enumerate())
                .filter(|(_, c)| matches!(c.run, Run::Pending { not_before } if not_before <= now))
                .map(|(i, _)| i)
                .collect();
            for i in due {
                self.start(key, i, now);
            }
        }

        // 2. Which processes have ended? Each container restarts on its own
        // per restartPolicy, with its own back-off, as the kubelet does.
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let evicting = s.eviction.is_some();
        for (i, c) in s.ctrs.iter_mut().enumerate() {
            let Run::Running {
                proc: Some(p),
                since,
            } = c.run
            else {
                continue;
            };
            let x = match self.procs.try_wait(p) {
                Ok(None) => continue,
                Ok(Some(x)) => x,
                Err(e) => {
                    // The process is not ours any more: treat it as gone.
                    self.events.push(PodEvent::Error {
                        key: key.to_string(),
                        message: format!("{e:#}"),
                    });
                    ExitInfo::default()
                }
            };
            c.readiness.stopped();
            let container = s.spec.containers.get(i).map(|c| c.name.clone());
            self.events.push(PodEvent::Exited {
                key: key.to_string(),
                container: container.unwrap_or_default(),
                exit: x,
            });
            if now.saturating_duration_since(since) >= RESTART_BACKOFF_RESET {
                c.restarts = 0;
            }
            let again = match s.spec.restart_policy {
                RestartPolicy::Always => true,
                RestartPolicy::OnFailure => !x.success(),
                RestartPolicy::Never => false,
            };
            c.run = if again && !evicting {
                c.restarts = c.restarts.saturating_add(1);
                Run::Pending {
                    not_before: now + restart_backoff(c.restarts),
                }
            } else {
                Run::Stopped
            };
        }

        // 3. Eviction.
        if evicting {
            self.step_eviction(key, now, false);
        }

        // 4. Probes (they also run while terminating: `serving` follows).
        let Some(s) = self.pods.get_mut(key) else {
            return;
        };
        let (netns, pod_ip) = (s.netns_path(), s.spec.probe_ip());
        for (spec, c) in s.spec.containers.iter().zip(s.ctrs.iter_mut()) {
            let Some(p) = &spec.readiness else {
                continue;
            };
            if !matches!(c.run, Run::Running { .. }) || !c.readiness.due(now) {
                continue;
            }
            s.probe_seq += 1;
            c.probe_seq = s.probe_seq;
            c.readiness.probe_started(now);
            let req = ProbeRequest {
                seq: s.probe_seq,
                action: p.action.clone(),
                pod_ip,
                netns: netns.clone(),
                timeout: p.timeout,
            };
            self.prober.start(key, req);
        }

        // 5. Report readiness changes, whatever caused them.
        let ready = s.ready();
        if ready != s.reported_ready {
            s.reported_ready = ready;
            self.events.push(PodEvent::ReadinessChanged {
                key: key.to_string(),
                ready,
            });
        }
    }

    /// Advance `key`'s eviction. `published`: its terminating endpoints are
    /// out, so a marked pod may now get SIGTERM.
    fn step_eviction(&mut self, key: &str, now: Instant, published: bool) {
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

/// Where an eviction under way stands.
fn live_report(key: &str, e: &Eviction, now: Instant) -> EvictionReport {
    let (state, refusals) = match e.phase {
        Phase::Admission { refusals: 0, .. } => (EvictionState::Pending, 0),
        Phase::Admission { refusals, .. } => (EvictionState::RefusedByPdbRetrying, refusals),
        Phase::Marked { .. } | Phase::Terminating { .. } | Phase::Killing { .. } => {
            (EvictionState::Terminating, 0)
        }
        Phase::Done(o) => (EvictionState::of(o), 0),
    };
    EvictionReport {
        key: key.to_string(),
        reason: e.reason,
        state,
        grace: e.grace,
        elapsed: now.saturating_duration_since(e.requested_at),
        refusals,
    }
}

/// The kubelet's crash-loop delay before restart number `restarts`.
pub fn restart_backoff(restarts: u32) -> Duration {
    let shift = restarts.saturating_sub(1).min(16);
    RESTART_BACKOFF_INITIAL
        .saturating_mul(1u32 << shift)
        .min(RESTART_BACKOFF_MAX)
}
