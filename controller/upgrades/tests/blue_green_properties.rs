//! The blue-green upgrade's invariants (B1–B7) under random pools,
//! batch and soak settings, boot and drain times, drains a budget holds
//! for good, refused creations and a provider short of room, the user's
//! CANCEL, RESUME, ROLLBACK and COMPLETE at random points (each only
//! where admission lets it through), and passes cut short as by a kill -9.
//!
//! Checked after every pass (see [`Watch`]), then at the end: a finished
//! upgrade leaves green alone, a rolled-back one blue alone, clean and
//! whole.

mod world;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use sluice_model::duration::Duration;
use sluice_model::node_pool::{BlueGreenSettings, StandardRolloutPolicy};
use sluice_model::operation::{BlueGreenPhase, BlueGreenProgress, OperationAction, OperationState};
use sluice_model::policy::eviction::EvictionReason;
use sluice_model::validation::validate_operation_update;
use sluice_upgrades::drain::{drain_mark, DrainMark};
use sluice_upgrades::{Action, UpgradePlan, CORDONED_BY_ANNOTATION};
use world::{Weather, World, NEW, OLD};

use BlueGreenPhase as P;

const DAY: i64 = 86_400;
/// B4: every soak of one upgrade adds up to at most this.
const CAP: SignedDuration = SignedDuration::from_secs(7 * DAY);
/// The world's step while anything moves.
const STEP: SignedDuration = SignedDuration::from_secs(30);
/// The world's pods' grace (see `World::act`).
const GRACE: SignedDuration = SignedDuration::from_secs(30);

/// How a batch is sized.
#[derive(Debug, Clone, Copy)]
pub enum Batch {
    Count(i32),
    Percent(f64),
    /// Neither field: the planner's default.
    Unset,
}

/// What the user writes into `spec.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Cancel,
    Resume,
    Rollback,
    Complete,
}

#[derive(Debug, Clone)]
pub struct Case {
    zones: usize,
    size: usize,
    batch: Batch,
    batch_soak: i64,
    /// `None`: the default (1 h).
    pool_soak: Option<i64>,
    respect_pdb: bool,
    /// The provider's room for new nodes, until this many passes.
    room: Option<(usize, usize)>,
    seed: u64,
    weather: Weather,
    /// (pass, action): written before that pass if admission allows.
    events: Vec<(usize, Event)>,
}

fn batches() -> impl Strategy<Value = Batch> {
    prop_oneof![
        (0i32..=20).prop_map(Batch::Count),
        prop_oneof![
            Just(0.0),
            Just(0.1),
            Just(0.25),
            Just(0.5),
            Just(1.0),
            0.0f64..=1.0
        ]
        .prop_map(Batch::Percent),
        Just(Batch::Unset),
    ]
}

fn events() -> impl Strategy<Value = Vec<(usize, Event)>> {
    let event = prop_oneof![
        Just(Event::Cancel),
        Just(Event::Resume),
        Just(Event::Rollback),
        Just(Event::Complete),
    ];
    prop::collection::vec((0usize..60, event), 0..6)
}

/// Boots and drains of up to 5 steps, up to 40 % of drains a budget
/// holds for good, up to 30 % of creations refused and of passes cut short.
fn weathers() -> impl Strategy<Value = Weather> {
    let rough = |(boot, drain, stuck, quota, kill)| Weather {
        max_boot_steps: boot,
        max_drain_steps: drain,
        stuck_drain_percent: stuck,
        quota_refusal_percent: quota,
        kill_percent: kill,
        ..Weather::default()
    };
    (1u64..6, 0u64..6, 0u64..40, 0u64..30, 0u64..30).prop_map(rough)
}

fn cases() -> impl Strategy<Value = Case> {
    let soaks = (
        prop_oneof![
            Just(0i64),
            Just(60),
            Just(600),
            Just(3600),
            Just(DAY),
            Just(3 * DAY)
        ],
        prop_oneof![
            Just(None),
            Just(Some(0i64)),
            Just(Some(600)),
            Just(Some(3 * DAY)),
            Just(Some(7 * DAY))
        ],
    );
    (
        (1usize..=3, 1usize..=20, batches(), soaks, any::<bool>()),
        weathers(),
        (
            prop::option::of((0usize..40, 0usize..60)),
            any::<u64>(),
            events(),
        ),
    )
        .prop_map(
            |(
                (zones, size, batch, (batch_soak, pool_soak), respect_pdb),
                weather,
                (room, seed, events),
            )| Case {
                zones,
                size,
                batch,
                batch_soak,
                pool_soak,
                respect_pdb,
                room,
                seed,
                weather,
                events,
            },
        )
}

fn settings(case: &Case) -> BlueGreenSettings {
    let (count, percent) = match case.batch {
        Batch::Count(n) => (Some(n), None),
        Batch::Percent(f) => (None, Some(f)),
        Batch::Unset => (None, None),
    };
    BlueGreenSettings {
        standard_rollout_policy: Some(StandardRolloutPolicy {
            batch_node_count: count,
            batch_percentage: percent,
            batch_soak_duration: Some(Duration::from_secs(case.batch_soak)),
        }),
        autoscaled_rollout_policy: None,
        node_pool_soak_duration: case.pool_soak.map(Duration::from_secs),
    }
}

/// B4, restated here rather than borrowed from the planner: batch `k`'s
/// soak (1-based), and the pool's after `n` batches, under the 7-day cap.
fn batch_soak(each: SignedDuration, k: u32) -> SignedDuration {
    let before = each * i32::try_from(k.saturating_sub(1)).unwrap();
    each.min((CAP - before).max(SignedDuration::ZERO))
}

fn pool_soak(each: SignedDuration, pool: SignedDuration, n: u32) -> SignedDuration {
    pool.min((CAP - each * i32::try_from(n).unwrap()).max(SignedDuration::ZERO))
}

fn is_batch_drain(a: &Action) -> bool {
    matches!(
        a,
        Action::Drain {
            reason: EvictionReason::BlueGreenDrain,
            ..
        }
    )
}

fn progress(p: &UpgradePlan) -> BlueGreenProgress {
    p.status.blue_green.clone().unwrap_or_default()
}

/// What the checks remember from one pass to the next.
struct Watch {
    target: usize,
    batch_each: SignedDuration,
    pool_each: SignedDuration,
    respect_pdb: bool,
    blue: usize,
    green: usize,
    /// The last written blue-green record.
    last: BlueGreenProgress,
    /// Every soak scheduled (batch soaks and the pool's), in all.
    soaked: SignedDuration,
    /// When the pool's soak was set to end, and slack for passes lost or
    /// paused since (a pass cut short, a cancel) before phase 5 started.
    soak_end: Option<Timestamp>,
    slack: SignedDuration,
    complete_asked: bool,
    /// Since the last batch soak was set: a resume (the next batch may
    /// start at once, B6).
    resumed: bool,
    /// Distinct start times of phase-3 drains seen on the nodes.
    batch_starts: BTreeSet<Timestamp>,
}

/// The world just before a pass, for the checks after it.
struct Before {
    now: Timestamp,
    pods_held: BTreeSet<String>,
    drains: BTreeMap<String, DrainMark>,
    blue_nodes: BTreeSet<String>,
    state: Option<OperationState>,
}

fn before(w: &World) -> Before {
    Before {
        now: w.now,
        pods_held: w
            .pods()
            .into_iter()
            .filter(|(_, pods)| pods.iter().any(|p| p.held_by.is_some()))
            .map(|(n, _)| n)
            .collect(),
        drains: w
            .nodes
            .iter()
            .filter_map(|(n, node)| Some((n.clone(), drain_mark(node)?)))
            .collect(),
        blue_nodes: w
            .instances()
            .into_iter()
            .filter(|i| i.version == OLD)
            .map(|i| i.name)
            .collect(),
        state: w.state(),
    }
}

impl Watch {
    fn new(w: &World, case: &Case) -> Watch {
        let s = settings(case);
        Watch {
            target: w.target(),
            batch_each: SignedDuration::from_secs(case.batch_soak),
            pool_each: SignedDuration::from_secs(s.node_pool_soak_duration().as_secs()),
            respect_pdb: case.respect_pdb,
            blue: w.on_version(OLD),
            green: w.on_version(NEW),
            last: BlueGreenProgress::default(),
            soaked: SignedDuration::ZERO,
            soak_end: None,
            slack: STEP,
            complete_asked: false,
            resumed: false,
            batch_starts: BTreeSet::new(),
        }
    }

    /// The rules every pass keeps.
    fn after(&mut self, w: &World, p: &UpgradePlan, b: &Before) {
        let planned = progress(p).phase;
        let rolling_back = matches!(
            p.status.status,
            Some(OperationState::RollingBack | OperationState::RolledBack)
        );
        // spec: B1 — per zone, blue and green together at most twice the target.
        for (zone, (max, _)) in &w.extremes {
            assert!(
                *max <= 2 * self.target,
                "{zone}: {max} nodes > 2 × {}",
                self.target
            );
        }
        // spec: B1–B5 — blue never grows (nothing makes a node on the old
        // version), and only phase 5 takes a blue node away; B6 — a
        // rollback remakes what blue lost, never past its target.
        let (blue, green) = (w.on_version(OLD), w.on_version(NEW));
        if rolling_back {
            let whole = self.target * w.zones().len();
            assert!(
                blue <= whole.max(self.blue),
                "blue grew to {blue}, past {whole}"
            );
        } else {
            assert!(blue <= self.blue, "blue grew from {} to {blue}", self.blue);
        }
        if blue < self.blue {
            assert_eq!(planned, Some(P::DeletingBluePool), "blue shrank");
        }
        for a in &p.actions {
            if let Action::DeleteInstance { name } = a {
                if b.blue_nodes.contains(name) {
                    assert_eq!(planned, Some(P::DeletingBluePool), "{name} (blue) deleted");
                }
                self.budget_kept(name, planned, rolling_back, b);
            }
        }
        // spec: B1, B4 — green only grows until the pool soaks, unless
        // rolled back.
        let soaking = matches!(planned, Some(P::NodePoolSoaking | P::DeletingBluePool));
        if !soaking && !rolling_back && p.status.status != Some(OperationState::Done) {
            assert!(
                green >= self.green,
                "green shrank from {} to {green} in {planned:?}",
                self.green
            );
        }
        self.blue = blue;
        self.green = green;
        let written = w.op.status.as_ref() == Some(&p.status);
        self.batches(w, b);
        if written {
            self.soaks(p, b);
        } else {
            // A lost pass: whatever it decided happens a step later.
            self.slack += STEP;
        }
        if matches!(
            b.state,
            Some(OperationState::Cancelled | OperationState::Cancelling)
        ) {
            self.slack += w.now.duration_since(b.now);
        }
    }

    /// spec: B3, B5, B6 — a node a budget holds a pod on goes only with
    /// budgets ignored on purpose: in phase 5 (drained for the blue
    /// pool's deletion), or rolled back without respectPdb (green's pods
    /// deleted likewise); with respectPdb, a rolled-back green node is
    /// drained as in an upgrade and goes only once the hour of budgets
    /// and the grace are spent (E1). Never in phases 1–4 of the way forward.
    fn budget_kept(&self, name: &str, planned: Option<BlueGreenPhase>, back: bool, b: &Before) {
        if !b.pods_held.contains(name) {
            return;
        }
        let mark = b.drains.get(name);
        let reason = mark.and_then(|m| m.reason);
        match (planned, back, reason) {
            (Some(P::DeletingBluePool), false, Some(EvictionReason::BluePoolDeletion)) => {}
            (_, true, Some(EvictionReason::BluePoolDeletion)) if !self.respect_pdb => {}
            (_, true, Some(EvictionReason::NodeUpgrade)) if self.respect_pdb => {
                let started = mark.and_then(|m| m.started).expect("a drain start");
                let due = started + SignedDuration::from_secs(3600) + GRACE;
                assert!(
                    b.now >= due,
                    "{name}: deleted at {} with a pod a budget holds, its budget wait ends at {due}",
                    b.now
                );
            }
            other => panic!("{name}: deleted with a pod a budget holds, in {other:?}"),
        }
    }

    /// spec: B3, B6 — no more batches than the count fixed at the drain's
    /// start, and none before the last one's soak ended, unless resumed.
    fn batches(&mut self, w: &World, b: &Before) {
        let soak_end = self.last.batch_soak_end_time.as_ref().map(|t| t.0);
        for node in w.nodes.values() {
            let Some(m) = drain_mark(node) else { continue };
            let Some(started) = m.started else { continue };
            if m.reason == Some(EvictionReason::BlueGreenDrain) && self.batch_starts.insert(started)
            {
                if let Some(end) = soak_end.filter(|_| !self.resumed) {
                    assert!(
                        started >= end,
                        "a batch started at {started}, the last one's soak ends at {end}"
                    );
                }
            }
        }
        if let Some(total) = self.last.batches {
            assert!(
                self.batch_starts.len() <= total as usize,
                "{} phase-3 batches started, {total} planned (at {})",
                self.batch_starts.len(),
                b.now
            );
        }
    }

    /// spec: B3, B4 — each soak as long as its setting under the 7-day
    /// cap, all of them together at most 7 days, and phase 5 starting
    /// when the pool's soak ends (not before, unless COMPLETE; not after,
    /// but for passes lost or paused).
    fn soaks(&mut self, p: &UpgradePlan, b: &Before) {
        let bg = progress(p);
        let t = b.now;
        if let Some(end) = bg.batch_soak_end_time.as_ref().map(|x| x.0) {
            if bg.batches_drained != self.last.batches_drained {
                let want = batch_soak(self.batch_each, bg.batches_drained);
                assert_eq!(
                    end.duration_since(t),
                    want,
                    "batch {}'s soak",
                    bg.batches_drained
                );
                self.soaked += want;
                self.resumed = false;
            }
        }
        if let (Some(end), None) = (
            bg.soak_end_time.as_ref().map(|x| x.0),
            self.last.soak_end_time.as_ref(),
        ) {
            // The count fixed at the drain's start.
            let n = bg.batches.unwrap_or(0);
            let want = pool_soak(self.batch_each, self.pool_each, n);
            // Seen first together with phase 5's start: read back from
            // the nodes after the pass that set both was cut short, the
            // soak's end is when the deletion started.
            let recovered = bg.blue_pool_deletion_start_time.is_some()
                && self.last.blue_pool_deletion_start_time.is_none()
                && end <= t;
            if !recovered {
                assert_eq!(
                    end.duration_since(t),
                    want,
                    "the pool's soak after {n} batches"
                );
                self.soaked += want;
            }
            self.soak_end = Some(end);
            self.slack = STEP;
        }
        assert!(self.soaked <= CAP, "{} of soak scheduled", self.soaked);
        if let (Some(start), None) = (
            bg.blue_pool_deletion_start_time.as_ref().map(|x| x.0),
            self.last.blue_pool_deletion_start_time.as_ref(),
        ) {
            let end = self.soak_end.expect("phase 5 after a soak was set");
            if !self.complete_asked {
                assert!(start >= end, "phase 5 at {start}, the soak ends at {end}");
            }
            assert!(
                start <= end + self.slack,
                "phase 5 at {start}, the soak ended at {end} (slack {})",
                self.slack
            );
        }
        self.last = bg;
    }

    /// The user's write, once admission allowed it.
    fn asked(&mut self, e: Event) {
        match e {
            Event::Complete => self.complete_asked = true,
            Event::Resume => self.resumed = true,
            Event::Cancel | Event::Rollback => {}
        }
    }
}

/// `e` written into the operation if admission takes it (a rollback is
/// never followed by another action: it runs to its end).
fn ask(w: &mut World, e: Event) -> bool {
    if w.op.spec.action == Some(OperationAction::Rollback) {
        return false;
    }
    let action = match e {
        Event::Cancel => OperationAction::Cancel,
        Event::Resume => OperationAction::Resume,
        Event::Rollback => OperationAction::Rollback,
        Event::Complete => OperationAction::Complete,
    };
    let mut new = w.op.clone();
    new.spec.action = Some(action);
    if validate_operation_update(&new, &w.op).is_err() {
        return false;
    }
    w.op = new;
    true
}

/// The next step: to the end of the soak the upgrade waits for, if
/// nothing else is due before; else the world's usual step.
fn next_step(w: &World) -> SignedDuration {
    let bg =
        w.op.status
            .as_ref()
            .and_then(|s| s.blue_green.clone())
            .unwrap_or_default();
    let wake = match bg.phase {
        Some(P::DrainingBluePool) => bg.batch_soak_end_time,
        Some(P::NodePoolSoaking) => bg.soak_end_time,
        _ => None,
    };
    let Some(wake) = wake.map(|t| t.0).filter(|t| *t > w.now) else {
        return STEP;
    };
    let until = w.next_change().map_or(wake, |c| c.min(wake));
    until.duration_since(w.now).max(STEP)
}

fn check(case: Case) {
    let mut w = World::new(case.zones, case.size, 1, 0, case.seed);
    w.weather = case.weather.clone();
    w.blue_green(settings(&case));
    w.op.spec.respect_pdb = Some(case.respect_pdb);
    let mut watch = Watch::new(&w, &case);
    let mut pass = 0usize;
    // Chaos, then calm: the provider has room and refuses nothing, no
    // pass is cut short, a cancel is resumed.
    for calm in [false, true] {
        if calm {
            w.capacity = None;
            w.weather.quota_refusal_percent = 0;
            w.weather.kill_percent = 0;
            if w.op.spec.action == Some(OperationAction::Cancel) && ask(&mut w, Event::Resume) {
                watch.asked(Event::Resume);
            }
        }
        let limit = if calm { 5000 } else { 250 };
        for _ in 0..limit {
            if w.state().is_some_and(|s| s.is_final()) {
                break;
            }
            w.capacity = case
                .room
                .filter(|(_, until)| !calm && pass < *until)
                .map(|(room, _)| room);
            let mut acted = false;
            for (_, e) in case.events.iter().filter(|(at, _)| *at == pass && !calm) {
                if ask(&mut w, *e) {
                    watch.asked(*e);
                    acted = true;
                }
            }
            w.step = if acted { STEP } else { next_step(&w) };
            let b = before(&w);
            pass += 1;
            let Some(p) = w.pass(!calm) else { continue };
            watch.after(&w, &p, &b);
        }
    }
    // More passes for the reconciler to settle the pool and for the
    // deletions asked to end (a step may have been long).
    for _ in 0..100 {
        w.step = w
            .next_change()
            .map_or(STEP, |t| t.duration_since(w.now).max(STEP));
        w.pass(false);
        if w.next_change().is_none() {
            break;
        }
    }
    // spec: B5, B6 — the end: green alone, or blue alone, whole and clean.
    let (version, state) = match w.state() {
        Some(OperationState::Done) => (NEW, "after the upgrade"),
        Some(OperationState::RolledBack) => (OLD, "after the rollback"),
        other => panic!("the operation did not finish: {other:?} {:?}", w.op.status),
    };
    assert_eq!(w.versions(), [version.to_string()].into(), "{state}");
    assert_eq!(w.pool.spec.version.as_deref(), Some(version), "{state}");
    w.assert_clean(state);
    for (name, n) in &w.nodes {
        let by = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CORDONED_BY_ANNOTATION));
        assert_eq!(by, None, "{state}: {name} still cordoned by the upgrade");
    }
    for (zone, n) in w.counts() {
        assert_eq!(n, w.target(), "{state}: {zone} ends with {n} nodes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn blue_green_upgrades_keep_their_invariants(case in cases()) {
        // spec: B1, B2, B3, B4, B5, B6
        check(case);
    }
}

/// Passes until a plan drains a phase-3 batch (that plan returned, not
/// run) or `limit`.
fn until_a_batch_drains(w: &mut World, limit: usize) -> UpgradePlan {
    for _ in 0..limit {
        let p = w.plan().unwrap();
        if p.actions.iter().any(is_batch_drain) {
            return p;
        }
        w.pass(false);
    }
    panic!("no batch drained in {limit} passes");
}

fn fixed(count: i32, batch_soak: i64, pool_soak: i64) -> World {
    let mut w = World::new(1, 6, 1, 0, 1);
    w.weather.max_boot_steps = 1;
    w.blue_green(BlueGreenSettings {
        standard_rollout_policy: Some(StandardRolloutPolicy {
            batch_node_count: Some(count),
            batch_percentage: None,
            batch_soak_duration: Some(Duration::from_secs(batch_soak)),
        }),
        autoscaled_rollout_policy: None,
        node_pool_soak_duration: Some(Duration::from_secs(pool_soak)),
    });
    w
}

#[test]
fn a_batch_cut_short_by_a_kill_is_finished_not_split() {
    // spec: B3 — batches of batchNodeCount: 6 blue nodes in batches of 3
    // are 2 batches, whatever pass is cut short. The first batch's pass
    // is killed after its first Drain: the next pass takes the one node
    // marked for a whole batch, so 3 batches (1, 3, 2) drain.
    let mut w = fixed(3, 60, 0);
    let p = until_a_batch_drains(&mut w, 200);
    w.apply(&p, &p.actions[..1], false);
    w.reconcile(&p.held_zones);
    w.advance();
    w.run_calm(2000);
    assert_eq!(w.state(), Some(OperationState::Done));
    let total = w.op.status.as_ref().and_then(|s| s.blue_green.clone());
    assert_eq!(total.as_ref().and_then(|b| b.batches), Some(2));
    assert_eq!(
        total.map(|b| b.batches_drained),
        Some(2),
        "batches drained, of 2"
    );
}

#[test]
fn the_last_batch_soaks_too() {
    // spec: B3, B4 — a soak after each batch; total soak = pool soak +
    // batch soak × batches, capped at 7 days. 6 nodes in 2 batches of 3,
    // 600 s after each and a 600 s pool soak: 1 800 s of soak, so phase 5
    // starts at least 1 200 s after the last batch drained (its own soak,
    // then the pool's). The planner starts the pool's soak as the last
    // batch drains and skips that batch's soak: 600 s.
    let mut w = fixed(3, 600, 600);
    let mut last_drained = None;
    let mut deletion = None;
    for _ in 0..2000 {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        let t = w.now;
        let p = w.pass(false).unwrap();
        let bg = progress(&p);
        if bg.batches_drained == 2 && last_drained.is_none() {
            last_drained = Some(t);
        }
        if bg.phase == Some(P::DeletingBluePool) && deletion.is_none() {
            deletion = Some(t);
        }
    }
    let (drained, deletion) = (last_drained.unwrap(), deletion.unwrap());
    let soaked = deletion.duration_since(drained);
    assert!(
        soaked >= SignedDuration::from_secs(1200),
        "phase 5 {soaked} after the last batch drained"
    );
}

#[test]
fn a_phase_5_lost_to_a_kill_is_not_taken_back() {
    // spec: B3, B5 — 6 blue nodes in 2 batches of 3, no soaks: the pass
    // after the last batch drains enters phase 5 and marks each blue node
    // for deletion (BluePoolDeletion: budgets ignored). Killed after the
    // first mark, its status unwritten: the next pass, reading phase 3
    // from the status and phase-3 marks from the nodes, takes the node
    // phase 5 marked for a third batch (BlueGreenDrain over its
    // BluePoolDeletion mark) and reports DRAINING_BLUE_POOL again, where
    // CANCEL and ROLLBACK are allowed though blue's pods are being deleted.
    let mut w = fixed(3, 0, 0);
    let mut cut = None;
    for _ in 0..500 {
        let p = w.plan().unwrap();
        let deleting = p.actions.iter().any(|a| {
            matches!(
                a,
                Action::Drain {
                    reason: EvictionReason::BluePoolDeletion,
                    ..
                }
            )
        });
        if deleting {
            cut = Some(p);
            break;
        }
        w.pass(false);
    }
    let p = cut.expect("phase 5 reached");
    w.apply(&p, &p.actions[..1], false);
    w.reconcile(&p.held_zones);
    w.advance();
    let next = w.plan().unwrap();
    let again: Vec<&Action> = next.actions.iter().filter(|a| is_batch_drain(a)).collect();
    assert!(again.is_empty(), "phase-3 drains after phase 5: {again:?}");
    assert_eq!(progress(&next).phase, Some(P::DeletingBluePool));
}

#[test]
fn a_rollback_after_a_lost_phase_5_keeps_every_zone_whole() {
    // spec: B5, B6 — 6 nodes, no drain batches, no soak. Phase 5 starts
    // in a pass killed before its status is written (blue marked
    // BluePoolDeletion), and the next pass, killed likewise, deletes the
    // drained blue nodes. The stored phase still reads NODE_POOL_SOAKING,
    // so admission takes a ROLLBACK; the rollback deletes all of green,
    // and the zone is left with what remains of blue (here: none) until
    // the reconciler remakes it. A rollback must not take a zone below its
    // target (or the planner must not act on phase 5 before its status is
    // stored).
    let mut w = fixed(0, 0, 0);
    for _ in 0..500 {
        let p = w.plan().unwrap();
        let deleting = p.status.blue_green.as_ref().and_then(|b| b.phase);
        if deleting == Some(P::DeletingBluePool) {
            break;
        }
        w.pass(false);
    }
    for _ in 0..2 {
        let p = w.plan().unwrap();
        assert_eq!(progress(&p).phase, Some(P::DeletingBluePool));
        w.apply(&p, &p.actions, false);
        w.reconcile(&p.held_zones);
        w.advance();
    }
    assert!(w.on_version(OLD) < 6, "blue nodes were deleted");
    let mut new = w.op.clone();
    new.spec.action = Some(OperationAction::Rollback);
    assert!(
        validate_operation_update(&new, &w.op).is_ok(),
        "admission takes it"
    );
    w.op = new;
    w.extremes.clear();
    w.run_calm(2000);
    for (zone, (_, min)) in &w.extremes {
        assert!(
            *min >= w.target(),
            "{zone}: down to {min} node(s) of {}",
            w.target()
        );
    }
}

#[test]
fn a_cancel_after_a_lost_first_status_keeps_green() {
    // spec: B1, B6 — the first pass makes green (6 nodes) and is killed
    // before its status is written; a CANCEL then meets a pool whose green
    // nodes are booting, not yet registered. `started` looks only at
    // registered green nodes and cordons, so the planner reports
    // "cancelled before it started", holds no zone, and the reconciler
    // deletes green as surplus. A cancel pauses in phase 1 and keeps the
    // pool as it is.
    let mut w = fixed(3, 0, 0);
    w.weather.max_boot_steps = 4;
    let p = w.plan().unwrap();
    assert!(p.actions.iter().any(|a| matches!(a, Action::CreateNode(_))));
    w.apply(&p, &p.actions, false);
    w.reconcile(&p.held_zones);
    w.advance();
    w.op.spec.action = Some(OperationAction::Cancel);
    for _ in 0..3 {
        w.pass(false);
    }
    assert_eq!(w.on_version(NEW), 6, "green kept while cancelled");
}
