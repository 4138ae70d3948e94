//! Pods, readiness and eviction driven through `PodManager` with fake
//! processes, a fake prober, a fake PDB and a hand-moved clock: no sleeps,
//! no root, exact timings.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_agent::pods::eviction::{PDB_RETRY_INITIAL, PDB_RETRY_MAX};
use sluice_agent::pods::runtime::{ExitInfo, ProbeRequest, ProbeResult, ProcId, Sig, SpawnSpec};
use sluice_agent::pods::spec::{ContainerRun, HttpScheme, RestartPolicy, SAFE_TO_EVICT};
use sluice_agent::pods::{
    netns_name, EndpointConditions, EvictionOutcome, EvictionReason, EvictionState, PdbGate,
    PodEvent, PodManager, PodRunSpec, PoolKind, Probe, ProbeAction, Prober, ProcessControl,
    EXTENDED_RUN, MAX_ADVERTISED_HOLD,
};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

// --- fakes ----------------------------------------------------------------

#[derive(Default)]
struct World {
    next: ProcId,
    /// id → (key, running, exits on SIGTERM)
    procs: BTreeMap<ProcId, (String, bool, bool)>,
    exits: BTreeMap<ProcId, ExitInfo>,
    netns: BTreeSet<String>,
    /// (key, signal) in order.
    signals: Vec<(String, Sig)>,
    spawned: Vec<SpawnSpec>,
    /// Keys whose processes ignore SIGTERM.
    stubborn: BTreeSet<String>,
    probes: Vec<(String, ProbeRequest)>,
    answers: Vec<(String, u64, ProbeResult)>,
    pdb_allow: bool,
    pdb_asked: Vec<(String, EvictionReason)>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<World>>);

impl Fake {
    fn w(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn id_of(&self, key: &str) -> Option<ProcId> {
        let w = self.w();
        w.procs
            .iter()
            .rev()
            .find(|(_, (k, running, _))| k == key && *running)
            .map(|(id, _)| *id)
    }
    /// The pod's process ends by itself.
    fn exit(&self, key: &str, code: i32) {
        if let Some(id) = self.id_of(key) {
            let mut w = self.w();
            if let Some(p) = w.procs.get_mut(&id) {
                p.1 = false;
            }
            w.exits.insert(
                id,
                ExitInfo {
                    code: Some(code),
                    signal: None,
                },
            );
        }
    }
    fn signals(&self, key: &str) -> Vec<Sig> {
        self.w()
            .signals
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| *s)
            .collect()
    }
    /// Answer the latest probe of `key`.
    fn answer(&self, key: &str, ok: bool) {
        let mut w = self.w();
        let seq = w
            .probes
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, r)| r.seq);
        if let Some(seq) = seq {
            let r = if ok {
                ProbeResult::Success
            } else {
                ProbeResult::Failure("no".into())
            };
            w.answers.push((key.to_string(), seq, r));
        }
    }
    fn probes_of(&self, key: &str) -> usize {
        self.w().probes.iter().filter(|(k, _)| k == key).count()
    }
}

impl ProcessControl for Fake {
    fn create_netns(&mut self, name: &str) -> anyhow::Result<()> {
        self.w().netns.insert(name.to_string());
        Ok(())
    }
    fn remove_netns(&mut self, name: &str) -> anyhow::Result<()> {
        self.w().netns.remove(name);
        Ok(())
    }
    fn spawn(&mut self, spec: &SpawnSpec) -> anyhow::Result<ProcId> {
        let mut w = self.w();
        w.next += 1;
        let id = w.next;
        // `key` or `key/container` ignores SIGTERM.
        let graceful = !w.stubborn.contains(&spec.key)
            && !w
                .stubborn
                .contains(&format!("{}/{}", spec.key, spec.container));
        w.procs.insert(id, (spec.key.clone(), true, graceful));
        w.spawned.push(spec.clone());
        Ok(id)
    }
    fn signal(&mut self, id: ProcId, sig: Sig) -> anyhow::Result<()> {
        let mut w = self.w();
        let Some((key, running, graceful)) = w.procs.get(&id).cloned() else {
            return Ok(());
        };
        w.signals.push((key, sig));
        let dies = match sig {
            Sig::Term => graceful,
            Sig::Kill => true,
        };
        if running && dies {
            if let Some(p) = w.procs.get_mut(&id) {
                p.1 = false;
            }
            let info = match sig {
                Sig::Term => ExitInfo {
                    code: Some(0),
                    signal: None,
                },
                Sig::Kill => ExitInfo {
                    code: None,
                    signal: Some(9),
                },
            };
            w.exits.insert(id, info);
        }
        Ok(())
    }
    fn try_wait(&mut self, id: ProcId) -> anyhow::Result<Option<ExitInfo>> {
        Ok(self.w().exits.remove(&id))
    }
}

impl Prober for Fake {
    fn start(&mut self, key: &str, req: ProbeRequest) {
        self.w().probes.push((key.to_string(), req));
    }
    fn poll(&mut self) -> Vec<(String, u64, ProbeResult)> {
        std::mem::take(&mut self.w().answers)
    }
}

impl PdbGate for Fake {
    fn allow(&mut self, key: &str, reason: EvictionReason) -> bool {
        let mut w = self.w();
        w.pdb_asked.push((key.to_string(), reason));
        w.pdb_allow
    }
}

fn manager(pool: PoolKind) -> (PodManager, Fake) {
    let f = Fake::default();
    f.w().pdb_allow = true;
    let mut m = PodManager::new(Box::new(f.clone()), Box::new(f.clone()), pool);
    m.set_pdb_gate(Box::new(f.clone()));
    (m, f)
}

fn pod(name: &str, grace_s: u64) -> PodRunSpec {
    PodRunSpec {
        key: format!("default/{name}"),
        uid: String::new(),
        node: "node-a".into(),
        ips: vec![],
        netns: None,
        containers: vec![ContainerRun {
            name: "c".into(),
            argv: vec!["server".into()],
            env: vec![],
            working_dir: None,
            named_ports: BTreeMap::new(),
            readiness: None,
        }],
        termination_grace: Duration::from_secs(grace_s),
        restart_policy: RestartPolicy::Always,
        annotations: BTreeMap::new(),
    }
}

fn protected(mut p: PodRunSpec) -> PodRunSpec {
    p.annotations.insert(SAFE_TO_EVICT.into(), "false".into());
    p
}

fn conditions(m: &PodManager, key: &str) -> Option<EndpointConditions> {
    m.endpoint_states()
        .into_iter()
        .find(|e| e.key == key)
        .map(|e| e.conditions)
}

fn done(events: &[PodEvent], key: &str) -> Option<EvictionOutcome> {
    events.iter().find_map(|e| match e {
        PodEvent::EvictionDone {
            key: k, outcome, ..
        } if k == key => Some(*outcome),
        _ => None,
    })
}

const READY: EndpointConditions = EndpointConditions {
    ready: true,
    serving: true,
    terminating: false,
};

// --- grace caps -----------------------------------------------------------

/// Evict a pod that ignores SIGTERM; return (signals at t0, kill time).
fn kill_time(reason: EvictionReason, grace_s: u64) -> Duration {
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("stubborn", grace_s);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    assert_eq!(conditions(&m, &p.key), Some(READY));

    m.evict(&p.key, reason, t0).expect("known pod");
    // SIGTERM and terminating endpoints at t0, within the call.
    assert_eq!(f.signals(&p.key), [Sig::Term], "{reason:?}");
    assert_eq!(
        conditions(&m, &p.key),
        Some(EndpointConditions {
            ready: false,
            serving: true,
            terminating: true
        })
    );
    let grace = sluice_agent::pods::effective_grace(Duration::from_secs(grace_s), reason);
    let ev = m.tick(t0 + grace - MS);
    assert_eq!(
        f.signals(&p.key),
        [Sig::Term],
        "{reason:?}: no SIGKILL before"
    );
    assert!(done(&ev, &p.key).is_none());
    let mut ev = m.tick(t0 + grace);
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Kill], "{reason:?}");
    // The kill is reaped on the next look.
    ev.extend(m.tick(t0 + grace));
    assert_eq!(
        done(&ev, &p.key),
        Some(EvictionOutcome::Killed { after: grace })
    );
    assert_eq!(conditions(&m, &p.key), None, "no endpoint once stopped");
    assert!(f.w().netns.is_empty(), "namespace removed");
    // An evicted pod is not restarted while it stays in the desired state.
    m.sync(std::slice::from_ref(&p), t0 + grace + 3600 * S);
    assert_eq!(f.w().spawned.len(), 1);
    grace
}

#[test]
fn grace_is_capped_per_reason() {
    // spec: E1, U1, C4, B5, A2, E6
    let long = 2 * 86_400; // a pod asking for two days
    let cases = [
        (EvictionReason::NodeUpgrade, 3600),
        (EvictionReason::ScaleDown, 600),
        (EvictionReason::BluePoolDeletion, 3600),
        (EvictionReason::AutoscaledBlueGreen, 86_400),
        (EvictionReason::UserDrain, long),
        (EvictionReason::Deletion, long),
    ];
    for (reason, want) in cases {
        assert_eq!(
            kill_time(reason, long),
            Duration::from_secs(want),
            "{reason:?}"
        );
    }
}

#[test]
fn short_pod_grace_wins_over_the_cap() {
    // spec: E6 (terminationGracePeriodSeconds honoured within the caps)
    for reason in EvictionReason::ALL {
        assert_eq!(kill_time(reason, 30), 30 * S, "{reason:?}");
    }
}

#[test]
fn zero_grace_kills_at_once() {
    // spec: E6 (terminationGracePeriodSeconds: 0)
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("now", 0);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    m.evict(&p.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Kill]);
    assert_eq!(
        done(&m.tick(t0), &p.key),
        Some(EvictionOutcome::Killed {
            after: Duration::ZERO
        })
    );
}

#[test]
fn no_sigkill_when_the_process_exits() {
    // spec: E1, E6
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("polite", 600);
    m.sync(std::slice::from_ref(&p), t0);
    m.evict(&p.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    // The fake exits on SIGTERM; the exit is seen at the next tick.
    let ev = m.tick(t0 + 2 * S);
    assert_eq!(
        done(&ev, &p.key),
        Some(EvictionOutcome::Graceful { after: 2 * S })
    );
    m.tick(t0 + 3600 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term]);
}

#[test]
fn graceful_exit_late_in_the_grace() {
    // spec: E1
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("slow", 600);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    m.evict(&p.key, EvictionReason::ScaleDown, t0)
        .expect("known");
    m.tick(t0 + 599 * S);
    f.exit(&p.key, 0);
    let ev = m.tick(t0 + 599 * S + 500 * MS);
    assert!(matches!(
        done(&ev, &p.key),
        Some(EvictionOutcome::Graceful { .. })
    ));
    m.tick(t0 + 601 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term]);
}

// --- PodDisruptionBudgets -------------------------------------------------

fn asked(f: &Fake) -> usize {
    f.w().pdb_asked.len()
}

#[test]
fn pdb_refusal_is_retried_with_backoff() {
    // spec: E6, U1
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("guarded", 30);
    m.sync(std::slice::from_ref(&p), t0);
    f.w().pdb_allow = false;
    m.evict(&p.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    let ev = m.tick(t0);
    assert_eq!(asked(&f), 1);
    assert!(f.signals(&p.key).is_empty(), "refused: no SIGTERM");
    assert_eq!(
        conditions(&m, &p.key),
        Some(READY),
        "refused: still serving"
    );
    let _ = ev;
    // Retried every PDB_RETRY_INITIAL (5 s), as kubectl drain does.
    m.tick(t0 + PDB_RETRY_INITIAL - MS);
    assert_eq!(asked(&f), 1);
    m.tick(t0 + PDB_RETRY_INITIAL);
    assert_eq!(asked(&f), 2);
    let second = t0 + 2 * PDB_RETRY_INITIAL;
    m.tick(second - MS);
    assert_eq!(asked(&f), 2);
    f.w().pdb_allow = true;
    m.tick(second);
    assert_eq!(asked(&f), 3);
    assert_eq!(f.signals(&p.key), [Sig::Term], "allowed: SIGTERM then");
    assert!(conditions(&m, &p.key).is_some_and(|c| c.terminating));
}

#[test]
fn pdb_honoured_for_one_hour_then_forced_on_upgrade() {
    // spec: U1, A2, E6
    for reason in [
        EvictionReason::NodeUpgrade,
        EvictionReason::AutoscaledBlueGreen,
    ] {
        let (mut m, f) = manager(PoolKind::Standard);
        let t0 = Instant::now();
        let p = pod("guarded", 30);
        m.sync(std::slice::from_ref(&p), t0);
        f.w().pdb_allow = false;
        m.evict(&p.key, reason, t0).expect("known");
        let mut t = t0;
        while t < t0 + 3600 * S - MS {
            t = m
                .next_deadline()
                .expect("a retry is scheduled")
                .min(t0 + 3600 * S - MS);
            m.tick(t);
            assert!(f.signals(&p.key).is_empty(), "{reason:?} at {:?}", t - t0);
            assert!(t - m.next_deadline().unwrap_or(t).min(t) <= PDB_RETRY_MAX);
        }
        let ev = m.tick(t0 + 3600 * S);
        assert!(ev
            .iter()
            .any(|e| matches!(e, PodEvent::EvictionForced { .. })));
        assert_eq!(f.signals(&p.key), [Sig::Term], "{reason:?}");
    }
}

#[test]
fn scale_down_gives_up_on_a_refusing_pdb() {
    // spec: C4, C5, E6
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("guarded", 30);
    m.sync(std::slice::from_ref(&p), t0);
    f.w().pdb_allow = false;
    m.evict(&p.key, EvictionReason::ScaleDown, t0)
        .expect("known");
    let mut last = Vec::new();
    let mut t = t0;
    while let Some(d) = m.next_deadline() {
        if d > t0 + 3600 * S {
            break;
        }
        t = d;
        last = m.tick(t);
        if done(&last, &p.key).is_some() {
            break;
        }
    }
    assert_eq!(t, t0 + 600 * S, "given up exactly at 10 min");
    assert!(matches!(
        done(&last, &p.key),
        Some(EvictionOutcome::Refused { .. })
    ));
    assert!(f.signals(&p.key).is_empty());
    assert_eq!(conditions(&m, &p.key), Some(READY), "the pod runs on");
}

#[test]
fn blue_pool_deletion_ignores_pdbs() {
    // spec: B5
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("guarded", 7200);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    f.w().pdb_allow = false;
    m.evict(&p.key, EvictionReason::BluePoolDeletion, t0)
        .expect("known");
    assert_eq!(asked(&f), 0, "PDB not consulted");
    assert_eq!(f.signals(&p.key), [Sig::Term]);
    m.tick(t0 + 3600 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Kill], "60 min cap");
}

#[test]
fn a_later_blue_pool_deletion_overrides_a_pdb_blocked_drain() {
    // spec: B3, B5
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("guarded", 30);
    m.sync(std::slice::from_ref(&p), t0);
    f.w().pdb_allow = false;
    m.drain(EvictionReason::NodeUpgrade, t0);
    assert!(f.signals(&p.key).is_empty());
    m.drain(EvictionReason::BluePoolDeletion, t0 + 10 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term]);
}

// --- drains and safe-to-evict --------------------------------------------

fn drain_case(
    pool: PoolKind,
    reason: EvictionReason,
) -> (PodManager, Fake, Instant, String, String) {
    let (mut m, f) = manager(pool);
    let t0 = Instant::now();
    let plain = pod("plain", 30);
    let keep = protected(pod("extended", 30));
    m.sync(&[plain.clone(), keep.clone()], t0);
    // The node is cordoned a day after the pods started.
    let t1 = t0 + 86_400 * S;
    m.tick(t1);
    let prog = m.drain(reason, t1);
    assert!(prog.cordoned);
    assert!(m.cordoned());
    assert_eq!(f.signals(&plain.key), [Sig::Term], "{pool:?} {reason:?}");
    (m, f, t0, plain.key, keep.key)
}

#[test]
fn scale_down_on_standard_never_evicts_safe_to_evict_false() {
    // spec: C5, E5
    let (mut m, f, t0, plain, keep) = drain_case(PoolKind::Standard, EvictionReason::ScaleDown);
    let p = m.drain_progress(t0 + 86_400 * S);
    assert_eq!(p.protected, [(keep.clone(), None)]);
    assert_eq!(p.terminating, std::slice::from_ref(&plain));
    let later = t0 + 30 * 86_400 * S;
    m.tick(later);
    assert!(f.signals(&keep).is_empty(), "not even after 30 days");
    let p = m.drain_progress(later);
    assert_eq!(p.done.len(), 1);
    assert_eq!(p.protected, [(keep, None)]);
    assert!(p.finished, "nothing more this drain will do by itself");
}

#[test]
fn node_upgrade_on_standard_evicts_safe_to_evict_false() {
    // spec: E5
    let (m, f, t0, _plain, keep) = drain_case(PoolKind::Standard, EvictionReason::NodeUpgrade);
    assert_eq!(f.signals(&keep), [Sig::Term]);
    assert!(m.drain_progress(t0).protected.is_empty());
}

#[test]
fn autopilot_protects_seven_days_from_pod_start() {
    // spec: E2, E3 (time counted from when the pod was first seen)
    for reason in [EvictionReason::NodeUpgrade, EvictionReason::ScaleDown] {
        let (mut m, f, t0, _plain, keep) = drain_case(PoolKind::Autopilot, reason);
        let until = t0 + EXTENDED_RUN;
        // The plain pod's exit is seen; only the protection is left.
        m.tick(t0 + 86_400 * S);
        let p = m.drain_progress(t0 + 86_400 * S);
        assert_eq!(p.protected, [(keep.clone(), Some(until))], "{reason:?}");
        assert!(!p.finished);
        assert_eq!(m.next_deadline(), Some(until));
        m.tick(until - MS);
        assert!(f.signals(&keep).is_empty(), "{reason:?}");
        m.tick(until);
        assert_eq!(f.signals(&keep), [Sig::Term], "{reason:?}");
    }
}

#[test]
fn autoscaled_blue_green_waits_seven_days_after_cordon() {
    // spec: A3
    for pool in [PoolKind::Standard, PoolKind::Autopilot] {
        let (mut m, f, t0, _plain, keep) = drain_case(pool, EvictionReason::AutoscaledBlueGreen);
        let until = t0 + 86_400 * S + EXTENDED_RUN;
        assert_eq!(
            m.drain_progress(t0).protected,
            [(keep.clone(), Some(until))]
        );
        m.tick(until - MS);
        assert!(f.signals(&keep).is_empty());
        m.tick(until);
        assert_eq!(f.signals(&keep), [Sig::Term]);
    }
}

#[test]
fn user_drain_and_blue_pool_deletion_evict_everything() {
    // spec: E4, B5
    for pool in [PoolKind::Standard, PoolKind::Autopilot] {
        for reason in [EvictionReason::UserDrain, EvictionReason::BluePoolDeletion] {
            let (m, f, t0, _plain, keep) = drain_case(pool, reason);
            assert_eq!(f.signals(&keep), [Sig::Term], "{pool:?} {reason:?}");
            assert!(m.drain_progress(t0).protected.is_empty());
        }
    }
}

#[test]
fn drain_progress_moves_to_done() {
    // spec: E6 (outcome reported)
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let a = pod("a", 30);
    let b = pod("b", 30);
    f.w().stubborn.insert(b.key.clone());
    let c = pod("c", 30);
    m.sync(&[a.clone(), b.clone(), c.clone()], t0);
    f.w().pdb_allow = false;
    let p = m.drain(EvictionReason::UserDrain, t0);
    assert_eq!(p.blocked.len(), 3);
    f.w().pdb_allow = true;
    m.tick(t0 + PDB_RETRY_INITIAL);
    m.tick(t0 + PDB_RETRY_INITIAL + S);
    let p = m.drain_progress(t0 + PDB_RETRY_INITIAL + S);
    assert_eq!(p.terminating, std::slice::from_ref(&b.key));
    assert_eq!(p.done.len(), 2);
    assert!(!p.finished);
    m.tick(t0 + PDB_RETRY_INITIAL + 30 * S);
    m.tick(t0 + PDB_RETRY_INITIAL + 31 * S);
    let p = m.drain_progress(t0 + PDB_RETRY_INITIAL + 31 * S);
    assert!(p.finished);
    assert!(p
        .done
        .iter()
        .any(|(k, o)| k == &b.key && matches!(o, EvictionOutcome::Killed { .. })));
    assert!(m.endpoint_states().is_empty());
    assert!(f.w().netns.is_empty());
    m.uncordon(t0 + PDB_RETRY_INITIAL + 32 * S);
    assert!(!m.cordoned());
}

// --- endpoints before signals -------------------------------------------------

fn terminating() -> EndpointConditions {
    EndpointConditions {
        ready: false,
        serving: true,
        terminating: true,
    }
}

#[test]
fn endpoints_turn_terminating_before_sigterm() {
    // spec: E6, H3, P5 — an eviction marks the endpoints terminating first;
    // SIGTERM waits until the caller has published them, and the grace runs
    // from the SIGTERM.
    let (mut m, f) = manager(PoolKind::Standard);
    m.hold_sigterm(true);
    let t0 = Instant::now();
    let p = pod("web", 30);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    m.evict(&p.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    assert_eq!(conditions(&m, &p.key), Some(terminating()));
    assert!(f.signals(&p.key).is_empty(), "no signal before publishing");
    let ev = m.tick(t0 + 100 * MS);
    assert!(f.signals(&p.key).is_empty(), "{ev:?}");

    let ev = m.endpoints_published(t0 + 200 * MS);
    assert_eq!(f.signals(&p.key), [Sig::Term]);
    assert!(ev
        .iter()
        .any(|e| matches!(e, PodEvent::Terminating { key, .. } if key == &p.key)));
    m.tick(t0 + 200 * MS + 30 * S - MS);
    assert_eq!(f.signals(&p.key), [Sig::Term], "grace counts from SIGTERM");
    m.tick(t0 + 200 * MS + 30 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Kill]);
}

#[test]
fn sigterm_waits_while_the_cluster_still_advertises_the_pod_ready() {
    // spec: E6 — with the API as the source, other nodes route by the
    // cluster's EndpointSlices: SIGTERM waits until those stop calling the
    // pod ready, and at most MAX_ADVERTISED_HOLD after the marking.
    let (mut m, f) = manager(PoolKind::Standard);
    m.hold_sigterm(true);
    let t0 = Instant::now();
    let (a, b) = (pod("a", 30), pod("b", 30));
    f.w().stubborn.insert(a.key.clone());
    f.w().stubborn.insert(b.key.clone());
    m.sync(&[a.clone(), b.clone()], t0);
    m.evict(&a.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    m.evict(&b.key, EvictionReason::NodeUpgrade, t0)
        .expect("known");
    let a_key = a.key.clone();
    // `a` is still advertised ready, `b` no longer.
    m.endpoints_published_unless(t0 + 100 * MS, |k| k == a_key);
    assert!(f.signals(&a.key).is_empty(), "still advertised");
    assert_eq!(f.signals(&b.key), [Sig::Term]);
    // The cluster caught up: SIGTERM.
    m.endpoints_published_unless(t0 + 300 * MS, |_| false);
    assert_eq!(f.signals(&a.key), [Sig::Term]);

    // A controller that never catches up holds a pod no longer than the cap.
    let c = pod("c", 30);
    f.w().stubborn.insert(c.key.clone());
    let t1 = t0 + S;
    m.sync(&[a.clone(), b.clone(), c.clone()], t1);
    m.evict(&c.key, EvictionReason::NodeUpgrade, t1)
        .expect("known");
    m.endpoints_published_unless(t1 + MAX_ADVERTISED_HOLD - MS, |_| true);
    assert!(f.signals(&c.key).is_empty());
    m.endpoints_published_unless(t1 + MAX_ADVERTISED_HOLD, |_| true);
    assert_eq!(f.signals(&c.key), [Sig::Term]);
}

#[test]
fn a_drain_marks_every_pod_before_any_signal() {
    // spec: E6, H3 — the event order a runner sees: EndpointsTerminating for
    // each pod, and Terminating (SIGTERM) only from endpoints_published.
    let (mut m, f) = manager(PoolKind::Standard);
    m.hold_sigterm(true);
    let t0 = Instant::now();
    let (a, b) = (pod("a", 30), pod("b", 0));
    m.sync(&[a.clone(), b.clone()], t0);
    m.drain(EvictionReason::UserDrain, t0);
    let ev = m.tick(t0);
    let marked: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            PodEvent::EndpointsTerminating { key, .. } => Some(key.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(marked, [a.key.as_str(), b.key.as_str()]);
    assert!(
        f.w().signals.is_empty(),
        "zero grace too waits for publishing"
    );
    assert_eq!(conditions(&m, &b.key), Some(terminating()));
    m.endpoints_published(t0);
    assert_eq!(f.signals(&a.key), [Sig::Term]);
    assert_eq!(f.signals(&b.key), [Sig::Term, Sig::Kill]);
}

// --- cordon -----------------------------------------------------------------

#[test]
fn a_cordoned_node_starts_no_new_pods_until_uncordoned() {
    // spec: U1, U2, B2 — a cordoned node takes no new pods; uncordon lets
    // them run.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let a = pod("a", 30);
    m.sync(std::slice::from_ref(&a), t0);
    m.drain(EvictionReason::NodeUpgrade, t0);
    m.tick(t0 + S);
    assert!(m.cordoned());
    assert!(m.drain_progress(t0 + S).finished);

    let (late, gone) = (pod("late", 30), pod("gone", 30));
    m.sync(&[a.clone(), late.clone(), gone.clone()], t0 + 2 * S);
    m.tick(t0 + 3 * S);
    let spawned: Vec<String> = f.w().spawned.iter().map(|s| s.key.clone()).collect();
    assert_eq!(
        spawned,
        [a.key.as_str()],
        "nothing new starts while cordoned"
    );
    assert_eq!(
        m.held(),
        [
            (gone.key.clone(), sluice_agent::pods::HELD_CORDONED),
            (late.key.clone(), sluice_agent::pods::HELD_CORDONED)
        ]
    );
    assert!(f.w().netns.is_empty(), "no sandbox for a held pod");
    // Drain progress does not count them: they were never on the node.
    assert!(m.drain_progress(t0 + 3 * S).finished);

    // Unassigned while held: forgotten.
    m.sync(&[a.clone(), late.clone()], t0 + 4 * S);
    assert_eq!(m.held().len(), 1);

    m.uncordon(t0 + 5 * S);
    assert!(!m.cordoned());
    assert!(m.held().is_empty());
    let spawned: Vec<String> = f.w().spawned.iter().map(|s| s.key.clone()).collect();
    assert_eq!(spawned, [a.key.clone(), late.key.clone()]);
    // The drain's report stays after uncordon, marked not cordoned.
    let p = m.drain_progress(t0 + 6 * S);
    assert!(!p.cordoned);
    assert_eq!(p.pods.len(), 1);
    assert_eq!(p.pods[0].state, EvictionState::ExitedGracefully);
}

// --- structured report ------------------------------------------------------

#[test]
fn drain_report_has_a_state_grace_and_time_per_pod() {
    // spec: E2, E6 — outcomes, PDB refusals and protections per pod.
    let (mut m, f) = manager(PoolKind::Autopilot);
    let t0 = Instant::now();
    let polite = pod("polite", 30);
    let stubborn = pod("stubborn", 20);
    f.w().stubborn.insert(stubborn.key.clone());
    let kept = protected(pod("kept", 30));
    m.sync(&[polite.clone(), stubborn.clone(), kept.clone()], t0);
    m.drain(EvictionReason::NodeUpgrade, t0);
    m.tick(t0 + 2 * S);
    m.tick(t0 + 20 * S);
    m.tick(t0 + 21 * S);
    let p = m.drain_progress(t0 + 21 * S);
    let by_key = |k: &str| {
        p.pods
            .iter()
            .find(|r| r.key == k)
            .cloned()
            .unwrap_or_else(|| panic!("{k} missing: {p:?}"))
    };
    let r = by_key(&polite.key);
    assert_eq!(r.state, EvictionState::ExitedGracefully);
    assert_eq!((r.grace, r.elapsed), (30 * S, 2 * S));
    let r = by_key(&stubborn.key);
    assert_eq!(r.state, EvictionState::KilledAfterGrace);
    assert_eq!((r.grace, r.elapsed), (20 * S, 21 * S));
    let r = by_key(&kept.key);
    assert_eq!(
        r.state,
        EvictionState::Protected {
            until: Some(t0 + EXTENDED_RUN)
        }
    );
    assert_eq!(
        EvictionState::RefusedByPdbRetrying.as_str(),
        "refused-by-pdb-retrying"
    );

    // A new drain starts a fresh report.
    m.uncordon(t0 + 22 * S);
    m.drain(EvictionReason::UserDrain, t0 + 23 * S);
    let p = m.drain_progress(t0 + 23 * S);
    assert_eq!(p.pods.len(), 1, "{p:?}");
    assert_eq!(p.pods[0].key, kept.key);
    assert_eq!(p.pods[0].state, EvictionState::Terminating);
}

#[test]
fn a_pod_leaving_the_state_is_reported_as_a_single_eviction() {
    // spec: E6 — a deletion's outcome is reported, not only logged.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("web", 5);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    m.sync(&[], t0 + S);
    let r = m.single_evictions(t0 + 2 * S);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].state, EvictionState::Terminating);
    assert_eq!(r[0].reason, EvictionReason::Deletion);
    m.tick(t0 + 6 * S);
    m.tick(t0 + 6 * S);
    let r = m.single_evictions(t0 + 7 * S);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].state, EvictionState::KilledAfterGrace);
    assert_eq!((r[0].grace, r[0].elapsed), (5 * S, 5 * S));
}

// --- readiness --------------------------------------------------------------

fn probed(name: &str) -> PodRunSpec {
    let mut p = pod(name, 30);
    p.ips = vec!["198.19.1.5".parse().expect("ip")];
    p.containers[0].readiness = Some(Probe {
        action: ProbeAction::Http {
            scheme: HttpScheme::Http,
            host: None,
            port: 8080,
            path: "/ready".into(),
            headers: vec![],
        },
        initial_delay: 5 * S,
        period: 10 * S,
        timeout: S,
        success_threshold: 1,
        failure_threshold: 3,
    });
    p
}

fn ready_events(ev: &[PodEvent]) -> Vec<bool> {
    ev.iter()
        .filter_map(|e| match e {
            PodEvent::ReadinessChanged { ready, .. } => Some(*ready),
            _ => None,
        })
        .collect()
}

#[test]
fn readiness_follows_probe_thresholds() {
    // spec: H3 inputs (issue 4: readiness probes with the Kubernetes fields)
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = probed("web");
    f.w().stubborn.insert(p.key.clone());
    let ev = m.sync(std::slice::from_ref(&p), t0);
    assert!(ev
        .iter()
        .any(|e| matches!(e, PodEvent::SandboxReady { .. })));
    assert!(f.w().spawned.is_empty(), "waits for the link");
    m.set_network_ready(&p.key, true);
    m.tick(t0);
    assert_eq!(f.w().spawned.len(), 1);
    assert_eq!(
        f.w().spawned[0].netns.to_string_lossy(),
        format!("/run/netns/{}", netns_name(&p.key))
    );
    assert_eq!(
        conditions(&m, &p.key),
        Some(EndpointConditions::default()),
        "not ready before the first success"
    );
    m.tick(t0 + 5 * S - MS);
    assert_eq!(f.probes_of(&p.key), 0, "initialDelaySeconds");
    m.tick(t0 + 5 * S);
    assert_eq!(f.probes_of(&p.key), 1);
    assert_eq!(
        f.w().probes[0].1.pod_ip,
        Some("198.19.1.5".parse().expect("ip"))
    );
    f.answer(&p.key, true);
    let ev = m.tick(t0 + 5 * S + 10 * MS);
    assert_eq!(ready_events(&ev), [true]);
    assert_eq!(conditions(&m, &p.key), Some(READY));

    // Two failures: still ready; the third flips it.
    let mut t = t0 + 5 * S;
    for (i, want) in [(1, vec![]), (2, vec![]), (3, vec![false])] {
        t += 10 * S;
        m.tick(t);
        assert_eq!(f.probes_of(&p.key), 1 + i, "periodSeconds");
        f.answer(&p.key, false);
        assert_eq!(ready_events(&m.tick(t + MS)), want, "failure {i}");
    }
    assert_eq!(conditions(&m, &p.key), Some(EndpointConditions::default()));
    t += 10 * S;
    m.tick(t);
    f.answer(&p.key, true);
    assert_eq!(ready_events(&m.tick(t + MS)), [true]);

    // Terminating: ready false at once, serving follows the probes.
    m.evict(&p.key, EvictionReason::NodeUpgrade, t + S)
        .expect("known");
    assert_eq!(
        conditions(&m, &p.key),
        Some(EndpointConditions {
            ready: false,
            serving: true,
            terminating: true
        })
    );
    for k in 1..=3 {
        let tk = t + 10 * S * k;
        m.tick(tk);
        f.answer(&p.key, false);
        m.tick(tk + MS);
    }
    assert_eq!(
        conditions(&m, &p.key),
        Some(EndpointConditions {
            ready: false,
            serving: false,
            terminating: true
        })
    );
}

#[test]
fn stale_probe_results_are_ignored() {
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let mut p = probed("web");
    p.ips.clear();
    m.sync(std::slice::from_ref(&p), t0);
    m.tick(t0 + 5 * S);
    assert_eq!(f.probes_of(&p.key), 1);
    // The process dies and restarts before the probe answers.
    f.exit(&p.key, 1);
    m.tick(t0 + 6 * S);
    m.tick(t0 + 16 * S);
    assert_eq!(f.w().spawned.len(), 2, "restarted after 10 s back-off");
    f.w().answers.push((p.key.clone(), 1, ProbeResult::Success));
    assert!(ready_events(&m.tick(t0 + 17 * S)).is_empty());
}

// --- desired state changes ------------------------------------------------

#[test]
fn a_pod_leaving_the_desired_state_is_deleted_with_its_own_grace() {
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = pod("gone", 45);
    f.w().stubborn.insert(p.key.clone());
    m.sync(std::slice::from_ref(&p), t0);
    f.w().pdb_allow = false;
    let ev = m.sync(&[], t0 + S);
    assert!(ev.iter().any(|e| matches!(
        e,
        PodEvent::Terminating { reason: EvictionReason::Deletion, grace, .. } if *grace == 45 * S
    )));
    assert_eq!(asked(&f), 0, "deletes bypass PDBs");
    let mut ev = m.tick(t0 + 46 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Kill]);
    ev.extend(m.tick(t0 + 46 * S));
    assert!(ev.iter().any(|e| matches!(e, PodEvent::Removed { .. })));
    assert!(f.w().netns.is_empty());
    assert!(m.sandboxes().is_empty());
}

#[test]
fn restart_policy_and_crash_loop_backoff() {
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let mut p = pod("crashy", 30);
    p.restart_policy = RestartPolicy::OnFailure;
    m.sync(std::slice::from_ref(&p), t0);
    f.exit(&p.key, 1);
    m.tick(t0 + S);
    m.tick(t0 + 11 * S - MS);
    assert_eq!(f.w().spawned.len(), 1);
    m.tick(t0 + 11 * S);
    assert_eq!(f.w().spawned.len(), 2);
    f.exit(&p.key, 1);
    m.tick(t0 + 12 * S);
    m.tick(t0 + 32 * S - MS);
    assert_eq!(f.w().spawned.len(), 2, "20 s the second time");
    m.tick(t0 + 32 * S);
    assert_eq!(f.w().spawned.len(), 3);
    f.exit(&p.key, 0);
    m.tick(t0 + 33 * S);
    m.tick(t0 + 3600 * S);
    assert_eq!(f.w().spawned.len(), 3, "OnFailure: a clean exit stays down");
}

// --- budgets and evictions from the state file ---------------------------

use sluice_agent::control::disruption::pod_health;
use sluice_agent::pods::SharedBudgets;
use sluice_agent::state::{parse_state, DesiredState};

fn web_pod(name: &str, node: &str, extra: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: web}}{extra}}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 30
  containers: [{{name: c, command: [server]}}]
status: {{conditions: [{{type: Ready, status: "True"}}]}}
"#
    )
}

const BUDGET_NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {addresses: [{type: InternalIP, address: 198.18.0.12}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
"#;

fn local_specs(state: &DesiredState) -> Vec<PodRunSpec> {
    state
        .pods
        .values()
        .filter(|p| p.node == "node-a")
        .map(|p| p.run.clone())
        .collect()
}

/// What the runner does before every manager step: the budgets see the
/// file's pods, and this node's pods as the manager observes them.
fn refresh(m: &PodManager, budgets: &SharedBudgets, state: &DesiredState) {
    let local = m
        .endpoint_states()
        .into_iter()
        .map(|e| (e.key, e.conditions.ready))
        .collect();
    budgets.lock().set_view(
        state.pdbs.values().cloned().collect(),
        pod_health(state, "node-a", &local),
    );
}

#[test]
fn a_budget_from_the_state_holds_a_drain_one_pod_at_a_time() {
    // spec: E6, U1 — the file's PodDisruptionBudget (maxUnavailable: 1)
    // lets one pod of three go; the others are refused and retried, and go
    // once the evicted pod's replacement is ready elsewhere.
    let (mut m, f) = manager(PoolKind::Standard);
    let budgets = SharedBudgets::default();
    m.set_pdb_gate(Box::new(budgets.clone()));
    let t0 = Instant::now();
    let text = format!(
        "{BUDGET_NODES}{}{}{}",
        web_pod("w1", "node-a", ""),
        web_pod("w2", "node-a", ""),
        web_pod("w3", "node-a", "")
    );
    let state = parse_state(&text).expect("valid");
    refresh(&m, &budgets, &state);
    m.sync(&local_specs(&state), t0);
    refresh(&m, &budgets, &state);

    // All three are asked in the same pass; only one disruption is allowed.
    let p = m.drain(EvictionReason::NodeUpgrade, t0);
    assert_eq!(p.terminating, ["default/w1"]);
    assert_eq!(p.blocked.len(), 2, "{p:?}");
    assert_eq!(f.signals("default/w2"), []);
    assert_eq!(f.signals("default/w3"), []);

    // w1 exits; it is still in the file, so nothing more may go.
    let t1 = t0 + PDB_RETRY_INITIAL;
    refresh(&m, &budgets, &state);
    m.tick(t1);
    let p = m.drain_progress(t1);
    assert_eq!(p.done.len(), 1);
    assert_eq!(p.blocked.len(), 2, "retried and refused again: {p:?}");

    // The controller replaces w1 by w4 on node-b, ready: one more may go.
    let text = format!(
        "{BUDGET_NODES}{}{}{}",
        web_pod("w2", "node-a", ""),
        web_pod("w3", "node-a", ""),
        web_pod("w4", "node-b", "")
    );
    let state = parse_state(&text).expect("valid");
    refresh(&m, &budgets, &state);
    m.sync(&local_specs(&state), t1 + S);
    let mut t = t1 + S;
    while m.drain_progress(t).terminating.is_empty() {
        t = m.next_deadline().expect("a retry is scheduled");
        assert!(t < t0 + 3600 * S, "allowed before the force deadline");
        refresh(&m, &budgets, &state);
        m.tick(t);
    }
    let p = m.drain_progress(t);
    assert_eq!(p.terminating.len(), 1, "{p:?}");
    assert_eq!(p.blocked.len(), 1, "still one pod held: {p:?}");
}

#[test]
fn evict_annotation_evicts_one_pod_once_with_its_reasons_cap() {
    // spec: E1 — `sluice.dev/evict: ScaleDown` on one pod: SIGTERM, SIGKILL
    // after 10 min whatever the pod's own grace; the other pod runs on.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let long = pod("long", 7200);
    let other = pod("other", 30);
    f.w().stubborn.insert(long.key.clone());
    m.sync(&[long.clone(), other.clone()], t0);
    assert_eq!(f.w().spawned.len(), 2);

    // The annotation arrives on the running pod: no new pod, an eviction.
    let mut asked = long.clone();
    asked
        .annotations
        .insert("sluice.dev/evict".into(), "ScaleDown".into());
    let t1 = t0 + 60 * S;
    m.sync(&[asked.clone(), other.clone()], t1);
    assert_eq!(f.signals(&long.key), [Sig::Term]);
    assert_eq!(
        f.w().spawned.len(),
        2,
        "an annotation does not replace the pod"
    );
    // Re-reading the same file does not start the eviction over.
    m.sync(&[asked.clone(), other.clone()], t1 + 300 * S);
    m.tick(t1 + 600 * S - MS);
    assert_eq!(f.signals(&long.key), [Sig::Term]);
    m.tick(t1 + 600 * S);
    assert_eq!(f.signals(&long.key), [Sig::Term, Sig::Kill], "10 min cap");
    m.tick(t1 + 600 * S);
    assert!(f.signals(&other.key).is_empty());
    assert_eq!(conditions(&m, &other.key), Some(READY));
    // Evicted pods are not restarted while they stay in the file.
    m.sync(&[asked, other], t1 + 3600 * S);
    assert_eq!(f.w().spawned.len(), 2);
}

#[test]
fn evict_annotation_honours_budgets() {
    // spec: E6 — a per-pod eviction asks the budget like a drain does.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let mut p = pod("guarded", 30);
    p.annotations
        .insert("sluice.dev/evict".into(), "UserDrain".into());
    let plain = pod("guarded", 30);
    m.sync(std::slice::from_ref(&plain), t0);
    f.w().pdb_allow = false;
    m.sync(std::slice::from_ref(&p), t0 + S);
    assert_eq!(asked(&f), 1);
    assert!(f.signals(&p.key).is_empty(), "refused: still running");
    f.w().pdb_allow = true;
    m.tick(t0 + S + PDB_RETRY_INITIAL);
    assert_eq!(f.signals(&p.key), [Sig::Term], "retried, then allowed");
}

// --- the agent's own shutdown -------------------------------------------------

#[test]
fn shutdown_sends_sigterm_then_sigkill_after_the_bounded_grace() {
    // spec: E6 — SIGTERM first; SIGKILL only for what still runs after
    // min(terminationGracePeriodSeconds, the shutdown cap).
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let polite = pod("polite", 30);
    let stubborn = pod("stubborn", 3600);
    let quick = pod("quick", 0);
    f.w().stubborn.insert(stubborn.key.clone());
    f.w().stubborn.insert(quick.key.clone());
    m.sync(&[polite.clone(), stubborn.clone(), quick.clone()], t0);
    // A zero cap: nothing may wait, yet SIGTERM still goes first.
    let r = m.shutdown(Duration::ZERO);
    assert_eq!(f.signals(&polite.key), [Sig::Term]);
    assert_eq!(f.signals(&stubborn.key), [Sig::Term, Sig::Kill]);
    assert_eq!(f.signals(&quick.key), [Sig::Term, Sig::Kill]);
    assert_eq!((r.signalled, r.killed, r.not_reaped), (3, 2, 0));
    assert!(f.w().netns.is_empty(), "namespaces removed");
}

#[test]
fn shutdown_grace_is_the_pods_own_when_shorter() {
    // spec: E6 — a pod's terminationGracePeriodSeconds of 0 is not extended
    // by a long shutdown cap.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let quick = pod("quick", 0);
    f.w().stubborn.insert(quick.key.clone());
    m.sync(std::slice::from_ref(&quick), t0);
    let r = m.shutdown(Duration::from_secs(3600));
    assert_eq!(f.signals(&quick.key), [Sig::Term, Sig::Kill]);
    assert_eq!(r.killed, 1);
}

#[test]
fn a_changed_pod_on_a_cordoned_node_waits_for_uncordon() {
    // spec: U1, U2 — a pod is immutable: a new spec under the same name is a
    // new pod, and a cordoned node does not start it.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let protected_pod = protected(pod("p", 30));
    m.sync(std::slice::from_ref(&protected_pod), t0);
    // Scale-down on Standard never evicts it (C5, E5): it keeps running.
    m.drain(EvictionReason::ScaleDown, t0);
    m.tick(t0 + S);
    assert_eq!(f.signals(&protected_pod.key), []);

    let mut changed = protected_pod.clone();
    changed.termination_grace = 10 * S;
    m.sync(std::slice::from_ref(&changed), t0 + 2 * S);
    m.tick(t0 + 3 * S);
    // The old one is deleted, the new one held.
    assert_eq!(f.signals(&protected_pod.key), [Sig::Term]);
    assert_eq!(f.w().spawned.len(), 1);
    assert_eq!(m.held().len(), 1);

    m.uncordon(t0 + 4 * S);
    m.tick(t0 + 5 * S);
    assert_eq!(f.w().spawned.len(), 2, "the new pod runs after uncordon");
    assert!(m.held().is_empty());
}

// --- several containers -------------------------------------------------------

fn two_containers(name: &str) -> PodRunSpec {
    let mut p = probed(name);
    p.containers[0].name = "web".into();
    let mut side = p.containers[0].clone();
    side.name = "side".into();
    side.argv = vec!["sidecar".into()];
    if let Some(r) = side.readiness.as_mut() {
        r.action = ProbeAction::Tcp {
            host: None,
            port: 9090,
        };
    }
    p.containers.push(side);
    p
}

/// Answer the latest probe aimed at TCP port 9090 (the sidecar) or not.
fn answer_container(f: &Fake, key: &str, sidecar: bool, ok: bool) {
    let mut w = f.w();
    let seq = w
        .probes
        .iter()
        .rev()
        .find(|(k, r)| {
            k == key && matches!(r.action, ProbeAction::Tcp { port: 9090, .. }) == sidecar
        })
        .map(|(_, r)| r.seq);
    let r = if ok {
        ProbeResult::Success
    } else {
        ProbeResult::Failure("no".into())
    };
    if let Some(seq) = seq {
        w.answers.push((key.to_string(), seq, r));
    }
}

#[test]
fn every_container_runs_and_the_pod_is_ready_when_all_are() {
    // spec: H1, H3 — "passed readiness" is the pod's: all its containers.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = two_containers("pair");
    m.sync(std::slice::from_ref(&p), t0);
    m.set_network_ready(&p.key, true);
    m.tick(t0);
    let spawned: Vec<(String, Vec<String>)> = f
        .w()
        .spawned
        .iter()
        .map(|s| (s.container.clone(), s.argv.clone()))
        .collect();
    assert_eq!(
        spawned,
        [
            ("web".to_string(), vec!["server".to_string()]),
            ("side".to_string(), vec!["sidecar".to_string()])
        ]
    );
    m.tick(t0 + 5 * S);
    assert_eq!(f.probes_of(&p.key), 2, "one probe per container");
    answer_container(&f, &p.key, false, true);
    m.tick(t0 + 5 * S + MS);
    assert_eq!(
        conditions(&m, &p.key).map(|c| c.ready),
        Some(false),
        "one ready container is not a ready pod"
    );
    answer_container(&f, &p.key, true, true);
    m.tick(t0 + 5 * S + 2 * MS);
    assert_eq!(conditions(&m, &p.key), Some(READY));
    // The sidecar fails three times: the pod is not ready any more.
    for i in 1..=3 {
        m.tick(t0 + 5 * S + i * 10 * S);
        answer_container(&f, &p.key, true, false);
    }
    m.tick(t0 + 36 * S);
    assert_eq!(conditions(&m, &p.key).map(|c| c.ready), Some(false));
}

#[test]
fn a_crashed_container_restarts_alone() {
    // The kubelet restarts containers, not pods (restartPolicy Always).
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = two_containers("crash");
    m.sync(std::slice::from_ref(&p), t0);
    m.set_network_ready(&p.key, true);
    m.tick(t0);
    // The sidecar (second spawn, id 2) exits.
    {
        let mut w = f.w();
        if let Some(proc) = w.procs.get_mut(&2) {
            proc.1 = false;
        }
        w.exits.insert(
            2,
            ExitInfo {
                code: Some(1),
                signal: None,
            },
        );
    }
    let ev = m.tick(t0 + S);
    assert!(ev.iter().any(|e| matches!(
        e,
        PodEvent::Exited { container, .. } if container == "side"
    )));
    m.tick(t0 + S + sluice_agent::pods::manager::RESTART_BACKOFF_INITIAL);
    let spawned: Vec<String> = f.w().spawned.iter().map(|s| s.container.clone()).collect();
    assert_eq!(spawned, ["web", "side", "side"]);
    assert!(f.signals(&p.key).is_empty(), "web left alone");
}

#[test]
fn an_eviction_signals_every_container() {
    // spec: E6 — SIGTERM to every container, SIGKILL to those still running
    // after the grace; the pod is done when all have ended.
    let (mut m, f) = manager(PoolKind::Standard);
    let t0 = Instant::now();
    let p = two_containers("both");
    f.w().stubborn.insert(format!("{}/side", p.key));
    m.sync(std::slice::from_ref(&p), t0);
    m.set_network_ready(&p.key, true);
    m.tick(t0);
    m.evict(&p.key, EvictionReason::NodeUpgrade, t0 + S)
        .expect("known");
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Term]);
    let ev = m.tick(t0 + 2 * S);
    assert!(done(&ev, &p.key).is_none(), "the sidecar still runs");
    m.tick(t0 + 31 * S);
    assert_eq!(f.signals(&p.key), [Sig::Term, Sig::Term, Sig::Kill]);
    let ev = m.tick(t0 + 31 * S);
    assert_eq!(
        done(&ev, &p.key),
        Some(EvictionOutcome::Killed { after: 30 * S })
    );
    assert!(f.w().netns.is_empty());
}
