//! The blue-green upgrade's rules (B1–B7) on fixed scenarios, through the
//! world, with the invariants every pass keeps.

mod world;

use k8s_openapi::jiff::SignedDuration;
use sluice_model::duration::Duration;
use sluice_model::node_pool::{BlueGreenSettings, StandardRolloutPolicy};
use sluice_model::operation::{BlueGreenPhase, OperationAction, OperationState};
use sluice_model::policy::eviction::EvictionReason;
use sluice_upgrades::{Action, Gate, UpgradePlan};
use world::{World, NEW, OLD};

use BlueGreenPhase as P;

fn settings(count: Option<i32>, batch_soak: i64, pool_soak: i64) -> BlueGreenSettings {
    BlueGreenSettings {
        standard_rollout_policy: Some(StandardRolloutPolicy {
            batch_node_count: count,
            batch_percentage: None,
            batch_soak_duration: Some(Duration::from_secs(batch_soak)),
        }),
        autoscaled_rollout_policy: None,
        node_pool_soak_duration: Some(Duration::from_secs(pool_soak)),
    }
}

/// 3 zones of 4 nodes, upgraded blue-green with `s`.
fn world(s: BlueGreenSettings, seed: u64) -> World {
    let mut w = World::new(3, 4, 1, 0, seed);
    w.weather.max_boot_steps = 3;
    w.weather.max_drain_steps = 2;
    w.blue_green(s);
    w
}

/// What a run saw, pass by pass.
#[derive(Default)]
struct Seen {
    phases: Vec<BlueGreenPhase>,
    /// (when, phase) of each phase's first pass.
    entered: Vec<(k8s_openapi::jiff::Timestamp, BlueGreenPhase)>,
    batch_starts: Vec<k8s_openapi::jiff::Timestamp>,
    plans: usize,
}

/// Passes until final (or `limit`), checking after each the rules that
/// hold throughout (B1–B5): per zone blue + green at most twice the
/// target; blue never grows; green never shrinks before the soak, unless
/// rolled back; no blue node deleted before phase 5; `each` runs before
/// every pass.
fn run(w: &mut World, limit: usize, mut each: impl FnMut(&mut World, &Seen)) -> Seen {
    let mut seen = Seen::default();
    let mut blue = w.on_version(OLD);
    let mut green = w.on_version(NEW);
    for _ in 0..limit {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        each(w, &seen);
        let phase_before = w.phase();
        let rollback = w.op.spec.action == Some(OperationAction::Rollback);
        let Some(p) = w.pass(false) else { continue };
        seen.plans += 1;
        check_actions(&p, phase_before, rollback, w);
        if let Some(ph) = w.phase() {
            if seen.phases.last() != Some(&ph) {
                seen.phases.push(ph);
                seen.entered.push((w.now, ph));
            }
        }
        for a in &p.actions {
            if let Action::Drain {
                reason: EvictionReason::BlueGreenDrain,
                started,
                ..
            } = a
            {
                if seen.batch_starts.last() != Some(started) {
                    seen.batch_starts.push(*started);
                }
            }
        }
        let target = w.target();
        for (zone, (max, _)) in &w.extremes {
            assert!(*max <= 2 * target, "{zone}: {max} nodes, over 2 × {target}");
        }
        let (b, g) = (w.on_version(OLD), w.on_version(NEW));
        if !rollback {
            assert!(b <= blue, "blue grew from {blue} to {b}");
        }
        let soaking = matches!(w.phase(), Some(P::NodePoolSoaking | P::DeletingBluePool));
        if !rollback && !soaking && w.state() != Some(OperationState::Done) {
            assert!(
                g >= green,
                "green shrank from {green} to {g} before the soak"
            );
        }
        blue = b;
        green = g;
    }
    seen
}

/// No blue node is deleted before phase 5 (unless rolled back).
fn check_actions(p: &UpgradePlan, before: Option<BlueGreenPhase>, rollback: bool, w: &World) {
    for a in &p.actions {
        if let Action::DeleteInstance { name } = a {
            let blue = w
                .instances()
                .iter()
                .any(|i| &i.name == name && i.version == OLD);
            if blue && !rollback {
                let phase = p.status.blue_green.as_ref().and_then(|b| b.phase);
                assert!(
                    phase == Some(P::DeletingBluePool) || before == Some(P::DeletingBluePool),
                    "blue node {name} deleted in {phase:?}"
                );
            }
        }
    }
}

fn assert_green_only(w: &World) {
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.versions(), [NEW.to_string()].into());
    assert_eq!(w.pool.spec.version.as_deref(), Some(NEW));
    w.assert_clean("after the upgrade");
    for (zone, n) in w.counts() {
        assert_eq!(n, w.target(), "{zone}");
    }
}

fn assert_blue_only(w: &World) {
    assert_eq!(w.state(), Some(OperationState::RolledBack));
    assert_eq!(w.versions(), [OLD.to_string()].into());
    assert_eq!(w.pool.spec.version.as_deref(), Some(OLD));
    w.assert_clean("after the rollback");
    for (zone, n) in w.counts() {
        assert_eq!(n, w.target(), "{zone}");
    }
}

#[test]
fn b1_to_b5_the_phases_in_order_and_only_green_at_the_end() {
    // spec: B1, B2, B3, B4, B5 — green made in every zone, blue cordoned,
    // drained in batches, soaked, deleted; green alone at the end.
    let mut w = world(settings(Some(3), 60, 600), 1);
    let seen = run(&mut w, 5000, |_, _| {});
    assert_eq!(
        seen.phases,
        [
            P::CreatingGreenPool,
            P::CordoningBluePool,
            P::DrainingBluePool,
            P::NodePoolSoaking,
            P::DeletingBluePool
        ]
    );
    assert_green_only(&w);
    // spec: B3 — 12 blue nodes in batches of 3: 4 batches, each soaked 60 s.
    assert_eq!(seen.batch_starts.len(), 4);
    for pair in seen.batch_starts.windows(2) {
        assert!(
            pair[1].duration_since(pair[0]) >= SignedDuration::from_secs(60),
            "{pair:?}"
        );
    }
    // spec: B4 — the pool soaks 600 s before blue's deletion starts.
    let at = |ph| seen.entered.iter().find(|(_, p)| *p == ph).unwrap().0;
    assert!(
        at(P::DeletingBluePool).duration_since(at(P::NodePoolSoaking))
            >= SignedDuration::from_secs(600)
    );
}

#[test]
fn b1_green_is_made_in_every_zone_at_once_and_only_when_all_of_it_fits() {
    // spec: B1 — quota for all of green is checked before any is made.
    let mut w = world(settings(Some(3), 0, 0), 2);
    w.capacity = Some(11);
    let p = w.pass(false).unwrap();
    assert!(!p.actions.iter().any(|a| matches!(a, Action::CreateNode(_))));
    let says = format!("{:?}", p.status.progress);
    assert!(
        says.contains("needs 12 more node(s)") && says.contains("room for 11"),
        "{says}"
    );
    assert_eq!(p.status.status, Some(OperationState::Running));
    w.capacity = Some(12);
    let p = w.pass(false).unwrap();
    let zones: std::collections::BTreeMap<String, usize> =
        p.actions.iter().fold(Default::default(), |mut m, a| {
            if let Action::CreateNode(c) = a {
                assert_eq!(c.version, NEW);
                *m.entry(c.zone.clone()).or_default() += 1;
            }
            m
        });
    assert_eq!(zones.values().copied().collect::<Vec<_>>(), [4, 4, 4]);
}

#[test]
fn b2_blue_is_cordoned_not_drained() {
    // spec: B2 — every blue node cordoned, none drained, before phase 3.
    let mut w = world(settings(Some(3), 0, 0), 3);
    run(&mut w, 5000, |w, _| {
        if w.phase() == Some(P::DrainingBluePool) {
            w.op.spec.action = Some(OperationAction::Cancel);
        }
    });
    // Paused at the drain phase's start: every blue node cordoned, and
    // only the first batch draining.
    assert_eq!(w.state(), Some(OperationState::Cancelled));
    let blue: Vec<_> = w
        .nodes
        .values()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .is_some_and(|i| i.kubelet_version.contains(OLD))
        })
        .collect();
    assert_eq!(blue.len(), 12);
    assert!(blue
        .iter()
        .all(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)));
}

#[test]
fn b3_zero_skips_the_drain_phase() {
    // spec: B3 — batchNodeCount 0: straight to the soak, no phase-3 drain.
    let mut w = world(settings(Some(0), 60, 60), 4);
    let seen = run(&mut w, 5000, |_, _| {});
    assert!(seen.batch_starts.is_empty());
    assert!(
        !seen.phases.contains(&P::DrainingBluePool),
        "{:?}",
        seen.phases
    );
    assert_green_only(&w);
}

#[test]
fn b4_complete_ends_the_soak_at_once() {
    // spec: B4 — COMPLETE (complete-upgrade) starts phase 5 at once.
    let mut w = world(settings(Some(6), 0, 3 * 86_400), 5);
    let seen = run(&mut w, 5000, |w, _| {
        if w.phase() == Some(P::NodePoolSoaking) {
            w.op.spec.action = Some(OperationAction::Complete);
        }
    });
    assert_green_only(&w);
    let at = |ph| seen.entered.iter().find(|(_, p)| *p == ph).unwrap().0;
    assert!(
        at(P::DeletingBluePool).duration_since(at(P::NodePoolSoaking))
            < SignedDuration::from_secs(120)
    );
}

#[test]
fn b4_the_soaks_stop_at_seven_days() {
    // spec: B4 — 4 batches of 1 day's soak and a 7-day pool soak: the pool
    // soaks 3 days, phase 5 starts 7 days of soak after the first batch.
    let mut w = world(settings(Some(3), 86_400, 7 * 86_400), 6);
    // Larger steps once green is up (a node booting for longer than the
    // startup timeout would be replaced).
    let seen = run(&mut w, 5000, |w, _| {
        if w.phase() == Some(P::DrainingBluePool) {
            w.step = SignedDuration::from_secs(1800);
        }
    });
    assert_green_only(&w);
    let at = |ph| seen.entered.iter().find(|(_, p)| *p == ph).unwrap().0;
    let soak = at(P::DeletingBluePool).duration_since(at(P::NodePoolSoaking));
    assert!(soak >= SignedDuration::from_secs(3 * 86_400), "{soak}");
    assert!(
        soak <= SignedDuration::from_secs(3 * 86_400 + 3600),
        "{soak}"
    );
}

#[test]
fn b5_phase_5_deletes_pods_budgets_ignored_and_cannot_be_cancelled() {
    // spec: B5 — every drain is held by a budget: phase 3 leaves them,
    // phase 5 deletes them after at most their grace, and a CANCEL there
    // changes nothing.
    let mut w = world(settings(Some(12), 0, 0), 7);
    w.weather.stuck_drain_percent = 100;
    let seen = run(&mut w, 5000, |w, _| {
        if w.phase() == Some(P::DeletingBluePool) {
            w.op.spec.action = Some(OperationAction::Cancel);
        }
    });
    assert!(seen.phases.contains(&P::DeletingBluePool));
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.versions(), [NEW.to_string()].into());
}

#[test]
fn b6_cancel_keeps_the_pool_as_it_is_in_every_phase_and_resume_goes_on() {
    // spec: B6 — a cancel pauses in its phase (both sides held), a resume
    // goes on from there to the end.
    for phase in [
        P::CreatingGreenPool,
        P::CordoningBluePool,
        P::DrainingBluePool,
        P::NodePoolSoaking,
    ] {
        let mut w = world(settings(Some(3), 300, 600), 8);
        run(&mut w, 5000, |w, _| {
            if w.phase() == Some(phase) {
                w.op.spec.action = Some(OperationAction::Cancel);
            }
        });
        assert_eq!(w.state(), Some(OperationState::Cancelled), "{phase:?}");
        let instances = w.instances();
        for _ in 0..20 {
            let p = w.pass(false).unwrap();
            assert!(p.actions.is_empty(), "{phase:?}: {:?}", p.actions);
            assert_eq!(p.held_zones.len(), 3, "{phase:?}: every zone held");
        }
        let names = |v: &[sluice_nodepools::Instance]| {
            v.iter()
                .map(|i| i.name.clone())
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            names(&w.instances()),
            names(&instances),
            "{phase:?}: pool changed"
        );
        w.op.spec.action = Some(OperationAction::Resume);
        run(&mut w, 5000, |_, _| {});
        assert_green_only(&w);
    }
}

#[test]
fn b6_resume_after_a_drained_batch_starts_the_next_without_its_soak() {
    // spec: B6 — resumed after a batch drained, the next batch starts at once.
    let mut w = world(settings(Some(3), 86_400, 0), 9);
    let mut cancelled = false;
    run(&mut w, 5000, |w, _| {
        let drained =
            w.op.status
                .as_ref()
                .and_then(|s| s.blue_green.as_ref())
                .is_some_and(|b| b.batches_drained == 1);
        if drained && !cancelled {
            w.op.spec.action = Some(OperationAction::Cancel);
            cancelled = true;
        }
    });
    assert_eq!(w.state(), Some(OperationState::Cancelled));
    w.op.spec.action = Some(OperationAction::Resume);
    let p = w.pass(false).unwrap();
    let drains = p
        .actions
        .iter()
        .filter(|a| {
            matches!(
                a,
                Action::Drain {
                    reason: EvictionReason::BlueGreenDrain,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        drains, 3,
        "the second batch starts at once: {:?}",
        p.actions
    );
}

#[test]
fn b6_rollback_in_each_phase_leaves_blue_alone_uncordoned() {
    // spec: B6 — phase 1: green deleted; phase 2: blue uncordoned, green
    // deleted; phases 3 and 4: draining stops, blue uncordoned, green
    // drained and deleted.
    for phase in [
        P::CreatingGreenPool,
        P::CordoningBluePool,
        P::DrainingBluePool,
        P::NodePoolSoaking,
    ] {
        for respect_pdb in [false, true] {
            let mut w = world(settings(Some(3), 300, 600), 10);
            w.op.spec.respect_pdb = Some(respect_pdb);
            run(&mut w, 5000, |w, _| {
                if w.phase() == Some(phase) {
                    w.op.spec.action = Some(OperationAction::Rollback);
                }
            });
            assert_blue_only(&w);
        }
    }
}

#[test]
fn b7_only_the_start_waits_for_the_maintenance_window() {
    // spec: B7 — closed before the start: pending; once started, the
    // upgrade runs to its end though the window closes.
    let mut w = world(settings(Some(3), 60, 600), 11);
    w.op.spec.operation_type = sluice_model::operation::OperationType::AutoUpgradeNodes;
    w.gate = Gate::Closed {
        reason: "maintenance window closed".into(),
        next: None,
    };
    let p = w.pass(false).unwrap();
    assert_eq!(p.status.status, Some(OperationState::Pending));
    assert!(p.actions.is_empty());
    w.gate = Gate::OPEN;
    run(&mut w, 5000, |w, seen| {
        if seen.plans == 3 {
            w.gate = Gate::Closed {
                reason: "maintenance window closed".into(),
                next: None,
            };
        }
    });
    assert_green_only(&w);
}

#[test]
fn a_controller_killed_mid_pass_resumes_and_deletes_no_node_twice() {
    // spec: B1, B5 — passes cut short as by kill -9 (a prefix of the
    // actions run, the status not written): the world asserts no instance
    // is deleted twice; the upgrade still ends with green alone.
    for seed in 20..26 {
        let mut w = world(settings(Some(4), 60, 300), seed);
        w.weather.kill_percent = 30;
        for _ in 0..5000 {
            if w.state().is_some_and(|s| s.is_final()) {
                break;
            }
            w.pass(true);
        }
        assert_green_only(&w);
    }
}

#[test]
fn u5_a_batch_behind_a_local_service_is_warned_about() {
    // spec: U5 — a batch of several nodes drained at once behind an
    // externalTrafficPolicy: Local Service takes its pods away together.
    let mut w = world(settings(Some(4), 0, 0), 12);
    let nodes: std::collections::BTreeSet<String> = w.nodes.keys().cloned().collect();
    w.local_services = vec![sluice_upgrades::LocalService {
        name: "default/web-local".into(),
        nodes,
    }];
    run(&mut w, 5000, |_, _| {});
    assert_green_only(&w);
    let warnings = &w.op.status.as_ref().unwrap().warnings;
    assert!(
        warnings
            .iter()
            .any(|x| x.contains("default/web-local") && x.contains("batchNodeCount 1")),
        "{warnings:?}"
    );
}
