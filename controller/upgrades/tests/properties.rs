//! The surge upgrade's invariants under random pools, settings, boot and
//! drain times, quota refusals, window closures, cancels and resumes,
//! rollbacks and passes cut short as by a kill -9 (the planner then
//! starts over from what it finds).

mod world;

use proptest::prelude::*;
use sluice_model::operation::{OperationAction, OperationState};
use sluice_upgrades::Gate;
use world::{Weather, World, NEW, OLD};

#[derive(Debug, Clone)]
struct Case {
    /// 0: a new version, 1: a new node config (capacity), 2: both.
    change: u8,
    zones: usize,
    size: usize,
    max_surge: i32,
    max_unavailable: i32,
    seed: u64,
    weather: Weather,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (1usize..=3, 1usize..=30, 0i32..=5, 0i32..=5, any::<u64>()),
        (1u64..6, 0u64..8, 0u64..20, 0u64..40, 0u8..3),
        (0u64..15, 0u64..10, 0u64..30, 0u64..3),
    )
        .prop_filter(
            "maxSurge + maxUnavailable > 0",
            |((_, _, s, u, _), _, _)| s + u > 0,
        )
        .prop_map(
            |(
                (zones, size, max_surge, max_unavailable, seed),
                (boot, drain, stuck, quota, change),
                (gate, cancel, kill, rollback),
            )| Case {
                change,
                zones,
                size,
                max_surge,
                max_unavailable,
                seed,
                weather: Weather {
                    max_boot_steps: boot,
                    max_drain_steps: drain,
                    stuck_drain_percent: stuck,
                    quota_refusal_percent: quota,
                    gate_flip_percent: gate,
                    cancel_flip_percent: cancel,
                    kill_percent: kill,
                    rollback_percent: rollback,
                },
            },
        )
}

/// Random events before a pass: the window closes or opens, the user
/// cancels or resumes, asks for a rollback once. (Quota refusals come from
/// the world's provider, through the pool's backoff.)
fn weather_events(w: &mut World, rollback_asked: &mut bool) {
    let wx = w.weather.clone();
    if w.rng.chance(wx.gate_flip_percent) {
        w.gate = if w.gate.is_open() {
            Gate::Closed {
                reason: "maintenance window closed".into(),
                next: Some(w.now + w.step * 20),
            }
        } else {
            Gate::OPEN
        };
    }
    if !*rollback_asked && w.rng.chance(wx.cancel_flip_percent) {
        w.op.spec.action = match w.op.spec.action {
            Some(OperationAction::Cancel) => Some(OperationAction::Resume),
            _ => Some(OperationAction::Cancel),
        };
    }
    if !*rollback_asked && w.rng.chance(wx.rollback_percent) {
        *rollback_asked = true;
        w.op.spec.action = Some(OperationAction::Rollback);
    }
}

fn check(case: Case) {
    let t = case.size;
    let (s, u) = (case.max_surge as usize, case.max_unavailable as usize);
    let mut w = World::new(
        case.zones,
        case.size,
        case.max_surge,
        case.max_unavailable,
        case.seed,
    );
    w.weather = case.weather.clone();
    let first = w.pool.spec.config.clone();
    if case.change >= 1 {
        w.op.spec.config = Some(world::config("8"));
    }
    if case.change == 1 {
        w.op.spec.node_version = None;
    }
    let mut rollback_asked = false;
    // Chaos.
    for _ in 0..150 {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        weather_events(&mut w, &mut rollback_asked);
        w.pass(true);
    }
    // Calm: the window opens, creations are no longer refused (the pool's
    // backoff runs out), the user resumes (a rollback asked stays asked).
    w.weather = Weather {
        max_boot_steps: case.weather.max_boot_steps,
        max_drain_steps: case.weather.max_drain_steps,
        ..Weather::default()
    };
    w.gate = Gate::OPEN;
    if w.op.spec.action == Some(OperationAction::Cancel) {
        w.op.spec.action = Some(OperationAction::Resume);
    }
    w.run_calm(20 * case.zones * case.size + 400);
    // A few more passes for the reconciler to settle the pool.
    for _ in 0..3 {
        w.pass(false);
    }

    // spec: U3 — per zone between T − maxUnavailable and T + maxSurge.
    for (zone, (max, min)) in &w.extremes {
        assert!(*max <= t + s, "{zone}: {max} nodes > {t} + {s}");
        assert!(
            *min >= t.saturating_sub(u),
            "{zone}: {min} nodes < {t} - {u}"
        );
    }
    for (zone, min) in &w.min_serving {
        assert!(
            *min >= t.saturating_sub(u),
            "{zone}: {min} serving < {t} - {u}"
        );
    }
    // spec: U3 — old nodes disrupted at once ≤ maxSurge + maxUnavailable.
    assert!(
        w.max_disrupted <= s + u,
        "{} disrupted at once",
        w.max_disrupted
    );
    // spec: U6 — the end state: upgraded, or rolled back.
    let state = w.state();
    let (version, cpu) = match (state, case.change) {
        (Some(OperationState::Done), 0) => (NEW, "4"),
        (Some(OperationState::Done), 1) => (OLD, "8"),
        (Some(OperationState::Done), _) => (NEW, "8"),
        (Some(OperationState::RolledBack), _) => (OLD, "4"),
        (other, _) => panic!("the operation did not finish: {other:?} {:?}", w.op.status),
    };
    assert_eq!(w.pool.spec.version.as_deref(), Some(version));
    assert_eq!(w.pool.spec.config.capacity.cpu.0, cpu);
    w.assert_like_the_pool(&first);
    w.assert_clean("at the end");
    for (zone, n) in w.counts() {
        assert_eq!(n, t, "{zone} ends with {n} nodes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn surge_upgrades_keep_their_invariants(case in cases()) {
        // spec: U1, U2, U3, U4, U6, M3, E1
        check(case);
    }
}
