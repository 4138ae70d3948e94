//! `SHORT_LIVED` upgrades (A5) through the world: old nodes run until they
//! end, what ends is made anew on the new version, and whatever is still
//! old 7 days after the start is drained and replaced.

mod world;

use k8s_openapi::jiff::SignedDuration;
use sluice_model::node_pool::{UpgradeSettings, UpgradeStrategy};
use sluice_model::operation::OperationState;
use sluice_model::policy::eviction::EvictionReason;
use sluice_upgrades::Action;
use world::{World, NEW, OLD};

const DAY: i64 = 86_400;

fn world(zones: usize, size: usize) -> World {
    let mut w = World::new(zones, size, 1, 0, 3);
    w.weather.max_boot_steps = 2;
    w.weather.max_drain_steps = 2;
    w.op.spec.upgrade_settings = Some(UpgradeSettings {
        strategy: Some(UpgradeStrategy::ShortLived),
        ..Default::default()
    });
    w.step = SignedDuration::from_secs(3600);
    w
}

#[test]
fn old_nodes_run_until_they_end_and_their_replacements_are_new() {
    // spec: A5 — nothing is drained while the old nodes run; a node that
    // ends is replaced on the new version and config.
    let mut w = world(2, 3);
    for _ in 0..3 {
        let p = w.pass(false).expect("a plan");
        assert!(
            !p.actions
                .iter()
                .any(|a| matches!(a, Action::Drain { .. } | Action::DeleteInstance { .. })),
            "{:?}",
            p.actions
        );
    }
    assert_eq!(w.on_version(OLD), 6);
    // Two nodes' runs end.
    let ended: Vec<String> = w
        .instances()
        .iter()
        .take(2)
        .map(|i| i.name.clone())
        .collect();
    for n in &ended {
        w.lose(n);
    }
    for _ in 0..4 {
        w.pass(false);
    }
    assert_eq!(w.on_version(OLD), 4);
    assert_eq!(w.on_version(NEW), 2, "the ended nodes came back new");
    for (zone, n) in w.counts() {
        assert_eq!(n, 3, "{zone} kept its size");
    }
    assert_eq!(w.state(), Some(OperationState::Running));
}

#[test]
fn a_node_still_old_after_7_days_is_drained_and_replaced() {
    // spec: A5 — every node is on the new version and config within 7
    // days: what is left then is drained as a surge node would be
    // (`NodeUpgrade`), and the upgrade completes.
    let mut w = world(1, 3);
    let start = w.now;
    let mut first_drain = None;
    for _ in 0..(9 * 24) {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        let at = w.now;
        let p = w.pass(false).expect("a plan");
        for a in &p.actions {
            if let Action::Drain { reason, .. } = a {
                assert_eq!(*reason, EvictionReason::NodeUpgrade);
                first_drain.get_or_insert(at);
            }
        }
    }
    let drained = first_drain.expect("a drain at the deadline");
    assert!(
        drained >= start + SignedDuration::from_secs(7 * DAY),
        "{drained}"
    );
    assert!(
        drained <= start + SignedDuration::from_secs(7 * DAY + 3600),
        "{drained}"
    );
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.versions(), [NEW.to_string()].into());
    assert_eq!(w.pool.spec.version.as_deref(), Some(NEW));
    assert_eq!(w.counts().values().sum::<usize>(), 3);
}

#[test]
fn a_flex_start_pool_is_upgraded_short_lived_whatever_the_operation_says() {
    // spec: A5 — such pools use SHORT_LIVED by themselves: an operation
    // recorded as a surge drains nothing up front.
    let mut w = world(1, 3);
    w.op.spec.upgrade_settings = None;
    w.pool.spec.config.flex_start = true;
    let p = w.pass(false).expect("a plan");
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::Drain { .. } | Action::MarkUpgrading { .. })),
        "{:?}",
        p.actions
    );
    let stage = p.status.progress.as_ref().and_then(|pr| pr.name.as_deref());
    assert_eq!(stage, Some("short-lived-upgrade"), "{:?}", p.status);
}
