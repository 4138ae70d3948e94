//! The autoscaled blue-green upgrade's invariants (A1–A4) under random
//! pools, waits, boot and drain times, drains a budget holds, refused
//! creations, a stand-in autoscaler that removes blue nodes during the
//! wait and grows zones, CANCEL and RESUME at random points and passes
//! cut short as by a kill -9.
//!
//! Checked after every pass: blue never grows; no blue node is deleted
//! before the wait ends unless the autoscaler named it; at most 20 blue
//! nodes drain at once; then, run to the end, only the new version is
//! left, nothing cordoned, marked or draining.

mod world;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use sluice_model::duration::Duration;
use sluice_model::node_pool::{
    AutoscaledRolloutPolicy, BlueGreenSettings, NodePoolAutoscaling, NodeToRemove,
};
use sluice_model::operation::{BlueGreenPhase, OperationAction, OperationState};
use sluice_nodepools::InstanceState;
use sluice_upgrades::drain::DRAIN_ANNOTATION;
use sluice_upgrades::{Action, Quota, CORDONED_AT_ANNOTATION};
use world::{World, NEW, OLD};

#[derive(Debug, Clone)]
struct Case {
    zones: usize,
    size: usize,
    wait_s: i64,
    seed: u64,
    boot: u64,
    drain: u64,
    stuck: u64,
    kill: u64,
    /// Percent of passes the stand-in autoscaler acts before.
    autoscaler: u64,
    /// Percent of passes a cancel or resume is written before.
    flips: u64,
    /// Percent of passes with creations refused for quota.
    refused: u64,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (1usize..=3, 1usize..=25, 0i64..=3600, any::<u64>()),
        (0u64..=4, 0u64..=4, 0u64..=20, 0u64..=25),
        (0u64..=40, 0u64..=10, 0u64..=20),
    )
        .prop_map(
            |(
                (zones, size, wait_s, seed),
                (boot, drain, stuck, kill),
                (autoscaler, flips, refused),
            )| {
                Case {
                    zones,
                    size,
                    wait_s,
                    seed,
                    boot,
                    drain,
                    stuck,
                    kill,
                    autoscaler,
                    flips,
                    refused,
                }
            },
        )
}

fn blue(w: &World) -> Vec<(String, String)> {
    w.instances()
        .into_iter()
        .filter(|i| i.version == OLD && i.state != InstanceState::Deleting)
        .map(|i| (i.name, i.zone))
        .collect()
}

/// The wait's end: as the status keeps it, else (a status lost to a
/// kill) `wait` after the earliest cordon the blue nodes record.
fn wait_end(w: &World, wait: i64) -> Option<Timestamp> {
    let kept =
        w.op.status
            .as_ref()
            .and_then(|s| s.blue_green.as_ref())
            .and_then(|b| b.drain_start_time.as_ref())
            .map(|t| t.0);
    kept.or_else(|| {
        blue(w)
            .iter()
            .filter_map(|(n, _)| w.annotation(n, CORDONED_AT_ANNOTATION)?.parse().ok())
            .min()
            .map(|t: Timestamp| t + SignedDuration::from_secs(wait))
    })
}

/// As the autoscaler would, during the wait: remove a blue node (its
/// zone one smaller), or grow a zone by one within its max.
fn autoscale(w: &mut World, max: i32) {
    let zone_size = |w: &World, zone: &str| {
        w.pool
            .status
            .as_ref()
            .and_then(|s| s.autoscaler.as_ref())
            .and_then(|a| a.target_sizes.get(zone).copied())
            .unwrap_or_else(|| i32::try_from(w.counts()[zone]).unwrap_or(0))
    };
    let waiting = w.phase() == Some(BlueGreenPhase::WaitingToDrainBluePool);
    let b = blue(w);
    let pick = w.rng.below(2);
    if waiting && pick == 0 && !b.is_empty() {
        let (node, zone) = b[w.rng.below(b.len() as u64) as usize].clone();
        let size = zone_size(w, &zone);
        let a = w
            .pool
            .status
            .get_or_insert_with(Default::default)
            .autoscaler
            .get_or_insert_with(Default::default);
        a.target_sizes.insert(zone.clone(), (size - 1).max(0));
        a.nodes_to_remove.push(NodeToRemove { name: node, zone });
    } else {
        let zones = w.zones();
        let zone = zones[w.rng.below(zones.len() as u64) as usize].clone();
        let size = zone_size(w, &zone);
        if size < max {
            w.pool
                .status
                .get_or_insert_with(Default::default)
                .autoscaler
                .get_or_insert_with(Default::default)
                .target_sizes
                .insert(zone, size + 1);
        }
    }
}

fn check(case: Case) {
    let max = i32::try_from(case.size * 2).unwrap_or(i32::MAX);
    let mut w = World::new(case.zones, case.size, 1, 0, case.seed);
    w.weather.max_boot_steps = case.boot;
    w.weather.max_drain_steps = case.drain;
    w.weather.stuck_drain_percent = case.stuck;
    w.weather.kill_percent = case.kill;
    w.pool.spec.autoscaling = Some(NodePoolAutoscaling {
        enabled: true,
        min_node_count: Some(0),
        max_node_count: Some(max),
        ..Default::default()
    });
    w.blue_green(BlueGreenSettings {
        standard_rollout_policy: None,
        autoscaled_rollout_policy: Some(AutoscaledRolloutPolicy {
            wait_for_drain_duration: Some(Duration::from_secs(case.wait_s)),
        }),
        node_pool_soak_duration: None,
    });
    let mut blue_before = blue(&w).len();
    for _ in 0..400 {
        if w.state().is_some_and(|s| s.is_final()) {
            break;
        }
        if w.rng.chance(case.autoscaler) {
            autoscale(&mut w, max);
        }
        if w.rng.chance(case.flips) {
            // spec: A4 — cancel and resume at any point (rollback is
            // refused at admission, so never written here).
            w.op.spec.action = Some(if w.op.spec.action == Some(OperationAction::Cancel) {
                OperationAction::Resume
            } else {
                OperationAction::Cancel
            });
        }
        w.quota = if w.rng.chance(case.refused) {
            Quota::Exhausted {
                message: "QUOTA_EXCEEDED".into(),
                retry_at: None,
            }
        } else {
            Quota::Available
        };
        let named: Vec<String> = w
            .pool
            .status
            .as_ref()
            .and_then(|s| s.autoscaler.as_ref())
            .map(|a| a.nodes_to_remove.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        let before_end = wait_end(&w, case.wait_s).is_none_or(|end| w.now < end);
        let at = w.now;
        let Some(p) = w.pass(true) else { continue };
        let old: Vec<String> = blue(&w).into_iter().map(|(n, _)| n).collect();
        for a in &p.actions {
            if let Action::DeleteInstance { name } = a {
                let was_blue = w
                    .instances()
                    .iter()
                    .any(|i| i.name == *name && i.version == OLD);
                // spec: A1 — during the wait only the autoscaler takes
                // blue nodes away.
                if was_blue && before_end {
                    assert!(
                        named.contains(name),
                        "blue node {name} deleted at {at} before the wait ended"
                    );
                }
            }
            // spec: A1 — blue is never grown: nothing is made old.
            if let Action::CreateNode(c) = a {
                assert_eq!(c.version, NEW, "a node made on {}", c.version);
            }
        }
        // Before the start (a cancel before it began) the pool is the
        // reconciler's and grows on its own version, as it should.
        let b = blue(&w).len();
        if w.phase().is_some() {
            assert!(b <= blue_before, "blue grew from {blue_before} to {b}");
        }
        blue_before = b;
        // spec: A2 — at most 20 blue nodes drain at once.
        let draining = old
            .iter()
            .filter(|n| w.annotation(n, DRAIN_ANNOTATION).is_some())
            .count();
        assert!(draining <= 20, "{draining} blue nodes draining");
        // The autoscaler's names are forgotten once the node is gone.
        let live: Vec<String> = w.instances().into_iter().map(|i| i.name).collect();
        if let Some(a) = w.pool.status.as_mut().and_then(|s| s.autoscaler.as_mut()) {
            a.nodes_to_remove.retain(|n| live.contains(&n.name));
        }
    }
    // Calm to the end: no cancel, room, nothing stuck for good.
    w.op.spec.action = None;
    w.quota = Quota::Available;
    w.weather.kill_percent = 0;
    w.weather.stuck_drain_percent = 0;
    w.step = SignedDuration::from_secs(600);
    w.run_calm(2000);
    assert_eq!(w.state(), Some(OperationState::Done), "{:?}", w.op.status);
    // Only the new version (none at all when the autoscaler took every
    // node of a pool whose minimum is 0).
    assert!(w.versions().iter().all(|v| v == NEW), "{:?}", w.versions());
    w.assert_clean("after the autoscaled upgrade");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn autoscaled_blue_green_upgrades_keep_their_invariants(case in cases()) {
        // spec: A1, A2, A4
        check(case);
    }
}
