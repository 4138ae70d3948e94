//! The autoscaled blue-green upgrade's rules (A1–A4) on fixed scenarios,
//! through the world, with a stand-in for the cluster autoscaler that
//! writes the pool's `status.autoscaler` as the real one does.

mod world;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::duration::Duration;
use sluice_model::node_pool::{
    AutoscaledRolloutPolicy, AutoscalerStatus, BlueGreenSettings, NodePoolAutoscaling, NodeToRemove,
};
use sluice_model::operation::{BlueGreenPhase, OperationAction, OperationState};
use sluice_model::policy::eviction::EvictionReason;
use sluice_upgrades::{Action, PodOnNode, CORDONED_AT_ANNOTATION};
use world::{World, NEW, OLD};

use BlueGreenPhase as P;

const DAY: i64 = 86_400;

fn autoscaled(wait: Option<i64>) -> BlueGreenSettings {
    BlueGreenSettings {
        standard_rollout_policy: None,
        autoscaled_rollout_policy: Some(AutoscaledRolloutPolicy {
            wait_for_drain_duration: wait.map(Duration::from_secs),
        }),
        node_pool_soak_duration: None,
    }
}

/// `zones` zones of `size` nodes, autoscaled (per zone 0..=max), upgraded
/// autoscaled blue-green with a wait of `wait` seconds.
fn world(zones: usize, size: usize, max: i32, wait: Option<i64>) -> World {
    let mut w = World::new(zones, size, 1, 0, 7);
    w.weather.max_boot_steps = 2;
    w.weather.max_drain_steps = 2;
    w.pool.spec.autoscaling = Some(NodePoolAutoscaling {
        enabled: true,
        min_node_count: Some(0),
        max_node_count: Some(max),
        ..Default::default()
    });
    w.blue_green(autoscaled(wait));
    w
}

/// The autoscaler's status of the pool, made if absent.
fn autoscaler(w: &mut World) -> &mut AutoscalerStatus {
    let status = w.pool.status.get_or_insert_with(Default::default);
    status.autoscaler.get_or_insert_with(Default::default)
}

/// The zone's size as the autoscaler holds it (its target, else the
/// nodes there).
fn size(w: &World, zone: &str) -> i32 {
    w.pool
        .status
        .as_ref()
        .and_then(|s| s.autoscaler.as_ref())
        .and_then(|a| a.target_sizes.get(zone).copied())
        .unwrap_or_else(|| i32::try_from(w.counts()[zone]).unwrap_or(0))
}

/// As the autoscaler removes a drained node: named, its zone one smaller.
fn scale_down(w: &mut World, node: &str, zone: &str) {
    let now = size(w, zone);
    let a = autoscaler(w);
    a.target_sizes.insert(zone.into(), now - 1);
    a.nodes_to_remove.push(NodeToRemove {
        name: node.into(),
        zone: zone.into(),
    });
}

fn scale_up(w: &mut World, zone: &str, by: i32) {
    let now = size(w, zone);
    autoscaler(w).target_sizes.insert(zone.into(), now + by);
}

fn phase_of(w: &World) -> Option<BlueGreenPhase> {
    w.phase()
}

fn blue_nodes(w: &World) -> Vec<String> {
    w.instances()
        .into_iter()
        .filter(|i| i.version == OLD && i.state != sluice_nodepools::InstanceState::Deleting)
        .map(|i| i.name)
        .collect()
}

/// Passes until the phase is `until` (at most `limit`), checking after
/// each that blue never grows and that no blue node is deleted but one
/// the autoscaler named or one whose autoscaled drain is over.
fn run_until(w: &mut World, until: BlueGreenPhase, limit: usize) {
    let mut blue = w.on_version(OLD);
    for _ in 0..limit {
        if phase_of(w) == Some(until) || w.state().is_some_and(|s| s.is_final()) {
            return;
        }
        w.pass(false);
        let b = w.on_version(OLD);
        assert!(b <= blue, "spec: A1 — blue grew from {blue} to {b}");
        blue = b;
    }
    panic!("not in {until:?} after {limit} passes: {:?}", phase_of(w));
}

#[test]
fn green_starts_empty_blue_is_cordoned_then_waits() {
    // spec: A1 — green is created with 0 nodes; blue is cordoned (the time
    // on each node); then the wait, WAITING_TO_DRAIN_BLUE_POOL, with the
    // autoscaler's rules published: blue only shrinks, to zero.
    let mut w = world(2, 3, 10, Some(3600));
    let start = w.now;
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    assert_eq!(w.on_version(NEW), 0, "green starts empty");
    for n in blue_nodes(&w) {
        assert!(w.annotation(&n, CORDONED_AT_ANNOTATION).is_some(), "{n}");
        assert_eq!(
            w.nodes[&n].spec.as_ref().and_then(|s| s.unschedulable),
            Some(true)
        );
    }
    let p = w.last_plan.clone().expect("a plan");
    let info = p.blue_green_info.expect("published");
    let blue = info.blue_autoscaling.expect("blue's rules");
    let green = info.green_autoscaling.expect("green's rules");
    assert!(!blue.scale_up && blue.scale_down && !blue.respect_minimum);
    assert!(green.scale_up && green.scale_down);
    // No drain during the wait, however many passes.
    let end = start + SignedDuration::from_secs(3600);
    while w.now + w.step < end {
        let p = w.pass(false).expect("a plan");
        assert!(
            !p.actions.iter().any(|a| matches!(a, Action::Drain { .. })),
            "drained during the wait: {:?}",
            p.actions
        );
        assert_eq!(phase_of(&w), Some(P::WaitingToDrainBluePool));
        let wake = p.requeue_after.expect("a requeue");
        assert!(w.now - w.step + wake <= end + SignedDuration::from_secs(1));
    }
}

#[test]
fn the_wait_defaults_to_three_days_and_zero_drains_at_once() {
    // spec: A1 — waitForDrainDuration: absent 3 days, 0 no wait.
    let mut w = world(1, 2, 10, None);
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    let status = w.op.status.clone().expect("status");
    let end = status
        .blue_green
        .and_then(|b| b.drain_start_time)
        .expect("the wait's end")
        .0;
    let cordoned: Timestamp = w
        .annotation(&blue_nodes(&w)[0], CORDONED_AT_ANNOTATION)
        .expect("cordoned")
        .parse()
        .expect("a time");
    assert_eq!(end, cordoned + SignedDuration::from_secs(3 * DAY));
    let mut w = world(1, 2, 10, Some(0));
    run_until(&mut w, P::DrainingBluePool, 20);
}

#[test]
fn during_the_wait_the_autoscaler_shrinks_blue_and_grows_green() {
    // spec: A1 — the autoscaler removes an under-used blue node (blue's
    // minimum ignored) and grows green for the pods that moved; green is
    // made on the new version and blue never gains a node.
    let mut w = world(1, 3, 10, Some(DAY));
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    let zone = w.zones()[0].clone();
    let victim = blue_nodes(&w)[0].clone();
    scale_down(&mut w, &victim, &zone);
    let p = w.pass(false).expect("a plan");
    assert!(p
        .actions
        .iter()
        .any(|a| matches!(a, Action::DeleteInstance { name } if *name == victim)));
    assert!(!p.actions.iter().any(|a| matches!(a, Action::CreateNode(_))));
    // The pool reconciler would have forgotten the name once it was gone.
    autoscaler(&mut w).nodes_to_remove.clear();
    scale_up(&mut w, &zone, 2);
    for _ in 0..6 {
        w.pass(false);
    }
    assert_eq!(w.on_version(OLD), 2);
    assert_eq!(w.on_version(NEW), 2, "green grew by the autoscaler's two");
    assert_eq!(phase_of(&w), Some(P::WaitingToDrainBluePool));
}

#[test]
fn after_the_wait_at_most_20_drain_at_once_then_blue_is_deleted_without_a_soak() {
    // spec: A2 — blue's remaining nodes drained up to 20 at a time, with
    // the autoscaled reason (budgets 1 h, grace 24 h); each deleted once
    // over; no soak; every node ends on the new version.
    let mut w = world(1, 30, 40, Some(60));
    run_until(&mut w, P::WaitingToDrainBluePool, 40);
    let mut most = 0;
    let mut phases = Vec::new();
    for _ in 0..400 {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        let p = w.pass(false).expect("a plan");
        for a in &p.actions {
            if let Action::Drain { reason, .. } = a {
                assert_eq!(*reason, EvictionReason::AutoscaledBlueGreen);
            }
        }
        let draining = blue_nodes(&w)
            .iter()
            .filter(|n| {
                w.annotation(n, sluice_upgrades::drain::DRAIN_ANNOTATION)
                    .is_some()
            })
            .count();
        most = most.max(draining);
        if let Some(ph) = phase_of(&w) {
            if phases.last() != Some(&ph) {
                phases.push(ph);
            }
        }
    }
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(most, 20, "at most 20 at once, and 20 used");
    assert!(!phases.contains(&P::NodePoolSoaking), "{phases:?}");
    assert_eq!(w.versions(), [NEW.to_string()].into());
    assert_eq!(w.on_version(NEW), 30, "the zone's size kept on green");
    assert_eq!(w.pool.spec.version.as_deref(), Some(NEW));
}

#[test]
fn a_safe_to_evict_false_pod_keeps_its_node_for_7_days_after_the_cordon() {
    // spec: A3 — the planner never deletes the node while the pod is
    // protected; after the 7 days its caps run (1 h of budgets, its
    // grace), then the node goes.
    let mut w = world(1, 2, 10, Some(DAY));
    w.step = SignedDuration::from_secs(3600);
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    let keeper = blue_nodes(&w)[0].clone();
    let cordoned: Timestamp = w
        .annotation(&keeper, CORDONED_AT_ANNOTATION)
        .expect("cordoned")
        .parse()
        .expect("a time");
    let protected = PodOnNode {
        name: "default/ledger-0".into(),
        grace: SignedDuration::from_secs(30),
        held_by: None,
        safe_to_evict_false: true,
    };
    w.pods.insert(keeper.clone(), (vec![protected], None));
    let until = cordoned + SignedDuration::from_secs(7 * DAY);
    for _ in 0..(10 * 24) {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        // The pod stays until its node goes.
        if let Some((pods, _)) = w.pods.get_mut(&keeper) {
            if pods.is_empty() {
                pods.push(PodOnNode {
                    name: "default/ledger-0".into(),
                    grace: SignedDuration::from_secs(30),
                    held_by: None,
                    safe_to_evict_false: true,
                });
            }
        }
        let p = w.pass(false).expect("a plan");
        let deleted = p
            .actions
            .iter()
            .any(|a| matches!(a, Action::DeleteInstance { name } if *name == keeper));
        if deleted {
            let at = w.now - w.step;
            assert!(
                at >= until + SignedDuration::from_secs(3600 + 30),
                "deleted at {at}, protected until {until}"
            );
        }
    }
    assert_eq!(w.state(), Some(OperationState::Done));
    assert!(!w.instances().iter().any(|i| i.name == keeper));
}

#[test]
fn cancel_pauses_and_resume_goes_on() {
    // spec: A4 — cancel pauses in the phase, nothing drained meanwhile;
    // resume continues to the end.
    let mut w = world(1, 3, 10, Some(60));
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    w.op.spec.action = Some(OperationAction::Cancel);
    for _ in 0..10 {
        let p = w.pass(false).expect("a plan");
        assert!(
            !p.actions.iter().any(|a| matches!(a, Action::Drain { .. })),
            "{:?}",
            p.actions
        );
    }
    assert_eq!(w.state(), Some(OperationState::Cancelled));
    assert_eq!(phase_of(&w), Some(P::WaitingToDrainBluePool));
    w.op.spec.action = Some(OperationAction::Resume);
    w.run_calm(200);
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.versions(), [NEW.to_string()].into());
}

#[test]
fn green_that_cannot_grow_says_so_and_keeps_blue_serving() {
    // spec: A4 — a green that cannot grow (no quota) is named in the
    // status; blue's nodes stay until the wait ends.
    let mut w = world(1, 2, 10, Some(DAY));
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    w.quota = sluice_upgrades::Quota::Exhausted {
        message: "QUOTA_EXCEEDED: CPUS".into(),
        retry_at: None,
    };
    let zone = w.zones()[0].clone();
    scale_up(&mut w, &zone, 1);
    let p = w.pass(false).expect("a plan");
    let said = format!("{:?}", p.status);
    assert!(said.contains("QUOTA_EXCEEDED"), "{said}");
    assert_eq!(w.on_version(OLD), 2, "blue kept");
}

#[test]
fn green_at_the_pools_maximum_says_so() {
    // spec: A4 — a green that cannot grow for the pool's maximum is named
    // in the status, and blue's nodes are kept until the wait ends.
    let mut w = world(1, 3, 3, Some(DAY));
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    let p = w.pass(false).expect("a plan");
    let said = format!("{:?}", p.status);
    assert!(said.contains("green cannot grow in zone zone-0"), "{said}");
    assert!(said.contains("maximum of 3"), "{said}");
    assert_eq!(w.on_version(OLD), 3, "blue kept");
    // With room, nothing is said.
    let mut w = world(1, 3, 10, Some(DAY));
    run_until(&mut w, P::WaitingToDrainBluePool, 20);
    let p = w.pass(false).expect("a plan");
    assert!(!format!("{:?}", p.status).contains("cannot grow"));
}
