//! The surge upgrade's rules on fixed scenarios, through the world.

mod world;

use k8s_openapi::jiff::SignedDuration;
use sluice_model::operation::{OperationAction, OperationState, OperationType};
use sluice_upgrades::{Action, Gate, LocalService, Quota, UpgradeError, NODES_UPGRADED};
use world::{World, NEW, OLD};

fn count(p: &sluice_upgrades::UpgradePlan, f: impl Fn(&Action) -> bool) -> usize {
    p.actions.iter().filter(|a| f(a)).count()
}

fn creates(p: &sluice_upgrades::UpgradePlan) -> usize {
    count(p, |a| matches!(a, Action::CreateNode(_)))
}

fn marks(p: &sluice_upgrades::UpgradePlan) -> usize {
    count(p, |a| matches!(a, Action::MarkUpgrading { .. }))
}

fn drains(p: &sluice_upgrades::UpgradePlan) -> usize {
    count(p, |a| matches!(a, Action::Drain { .. }))
}

fn calm(w: &mut World, boot: u64, drain: u64) {
    w.weather.max_boot_steps = boot;
    w.weather.max_drain_steps = drain;
}

fn assert_upgraded(w: &World) {
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.versions(), [NEW.to_string()].into());
    assert_eq!(w.pool.spec.version.as_deref(), Some(NEW));
    w.assert_clean("at the end");
    for (zone, n) in w.counts() {
        assert_eq!(n, w.target(), "{zone}");
    }
}

#[test]
fn u3_example_five_nodes_max_surge_2_max_unavailable_1() {
    // spec: U3 — two upgraded nodes created, at most one old node disrupted
    // before they are Ready, at most three after; 4 to 7 nodes throughout.
    let mut w = World::new(1, 5, 2, 1, 7);
    calm(&mut w, 3, 2);
    // Drains held by a budget until forced: the surge nodes are Ready
    // long before, so the window fills.
    w.weather.stuck_drain_percent = 100;
    let first = w.pass(false).unwrap();
    assert_eq!(creates(&first), 2);
    assert_eq!(marks(&first), 3);
    assert_eq!(drains(&first), 1);
    assert_eq!(w.disrupted_old(OLD), 1);
    w.run_calm(2000);
    assert_upgraded(&w);
    let (max, min) = w.extremes["zone-0"];
    assert!(max <= 7 && min >= 4, "pool held {min} to {max} nodes");
    assert_eq!(
        max, 7,
        "both surge nodes were made while old nodes were still there"
    );
    assert!(
        w.max_disrupted <= 3,
        "{} old nodes disrupted at once",
        w.max_disrupted
    );
    assert_eq!(w.max_disrupted, 3);
}

#[test]
fn u1_the_default_drains_an_old_node_only_once_its_surge_node_is_ready() {
    // spec: U1 — provision, wait until Ready, cordon, drain, delete.
    let mut w = World::new(1, 3, 1, 0, 3);
    calm(&mut w, 4, 1);
    w.op.spec.upgrade_settings = None;
    let first = w.pass(false).unwrap();
    assert_eq!((marks(&first), creates(&first), drains(&first)), (1, 1, 0));
    // The surge node booting is not an upgraded node yet.
    let upgraded = |p: &sluice_upgrades::UpgradePlan| {
        p.status.progress.as_ref().and_then(|g| {
            g.metrics
                .iter()
                .find(|m| m.name == NODES_UPGRADED)
                .and_then(|m| m.int_value)
        })
    };
    assert_eq!(upgraded(&w.pass(false).unwrap()), Some(0));
    let mut passes = 0;
    while w.disrupted_old(OLD) == 0 {
        let p = w.pass(false).unwrap();
        passes += 1;
        assert!(passes < 10, "never drained");
        if drains(&p) == 1 {
            // The surge node registered Ready before the drain was asked.
            let ready_new = w
                .node_list()
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.node_info.as_ref())
                        .map(|i| i.kubelet_version.as_str())
                        == Some("v1.34.1")
                })
                .count();
            assert_eq!(ready_new, 1);
        }
    }
    w.run_calm(300);
    assert_upgraded(&w);
    assert_eq!(w.extremes["zone-0"], (4, 3));
}

#[test]
fn u5_the_four_profiles_complete() {
    // spec: U5 — (1,0), (0,20), (20,0), (0,1).
    for (s, u) in [(1, 0), (0, 20), (20, 0), (0, 1)] {
        let mut w = World::new(2, 25, s, u, 11);
        calm(&mut w, 2, 2);
        w.run_calm(3000);
        assert_upgraded(&w);
        for (zone, (max, min)) in &w.extremes {
            assert!(
                *max <= 25 + s as usize && *min >= 25 - (u as usize).min(25),
                "({s},{u}) {zone}: {min}..{max}"
            );
        }
        assert!(w.max_disrupted <= (s + u) as usize);
    }
}

#[test]
fn u4_without_quota_no_surge_node_upgrade_starts_and_the_status_says_why() {
    // spec: U4
    let mut w = World::new(1, 3, 1, 0, 5);
    w.quota = Quota::Exhausted {
        message: "quota exhausted: CPUS (limit 12)".into(),
        retry_at: Some(w.now + SignedDuration::from_secs(3600)),
    };
    let p = w.pass(false).unwrap();
    assert_eq!((marks(&p), creates(&p)), (0, 0));
    let stage = &p.status.progress.as_ref().unwrap().stages[0];
    assert!(
        stage.blocking.iter().any(|b| b.contains("CPUS")),
        "{:?}",
        stage.blocking
    );
    // spec: U4 — maxUnavailable without surge needs no quota.
    let mut w = World::new(1, 3, 0, 1, 5);
    w.quota = Quota::Exhausted {
        message: "quota exhausted: CPUS (limit 12)".into(),
        retry_at: None,
    };
    calm(&mut w, 2, 1);
    let p = w.pass(false).unwrap();
    assert_eq!((marks(&p), drains(&p), creates(&p)), (1, 1, 0));
    w.run_calm(300);
    assert_upgraded(&w);
}

#[test]
fn u5_parallel_drains_behind_a_local_service_warn() {
    // spec: U5 — parallel drains do not work with externalTrafficPolicy: Local.
    let mut w = World::new(1, 4, 0, 2, 9);
    calm(&mut w, 2, 3);
    let nodes: Vec<String> = w.nodes.keys().cloned().collect();
    w.local_services = vec![LocalService {
        name: "default/web".into(),
        nodes: nodes.into_iter().collect(),
    }];
    let p = w.pass(false).unwrap();
    assert_eq!(drains(&p), 2);
    assert!(
        p.status
            .warnings
            .iter()
            .any(|m| m.contains("default/web") && m.contains("Local")),
        "{:?}",
        p.status.warnings
    );
    // One drain at a time gives no warning.
    let mut w = World::new(1, 4, 1, 0, 9);
    calm(&mut w, 2, 3);
    w.local_services = vec![LocalService {
        name: "default/web".into(),
        nodes: w.nodes.keys().cloned().collect(),
    }];
    w.run_calm(300);
    assert_upgraded(&w);
    assert!(w.op.status.as_ref().unwrap().warnings.is_empty());
}

#[test]
fn m3_a_closed_window_pauses_new_nodes_and_lets_started_ones_finish() {
    // spec: M3, M8 — a manual upgrade that recreates nodes waits for the
    // window; nodes mid-upgrade when it closes finish.
    let mut w = World::new(1, 4, 2, 0, 13);
    calm(&mut w, 2, 2);
    let first = w.pass(false).unwrap();
    assert_eq!(marks(&first), 2);
    let next = w.now + SignedDuration::from_secs(6 * 3600);
    w.gate = Gate::Closed {
        reason: "maintenance window closed".into(),
        next: Some(next),
    };
    for _ in 0..40 {
        w.pass(false);
    }
    // The two started nodes are gone, the other two untouched.
    assert_eq!(w.versions(), [OLD.to_string(), NEW.to_string()].into());
    assert!(w.marked().is_empty());
    let status = w.op.status.clone().unwrap();
    assert_eq!(status.status, Some(OperationState::Running));
    let message = status.status_message.unwrap();
    assert!(
        message.contains(&format!(
            "paused: maintenance window closed, next at {next}"
        )),
        "{message}"
    );
    assert_eq!(
        w.last_plan.as_ref().unwrap().requeue_after,
        Some(SignedDuration::from_secs(10))
    );
    w.gate = Gate::OPEN;
    w.run_calm(300);
    assert_upgraded(&w);
}

#[test]
fn m1_an_automatic_upgrade_does_not_start_outside_the_window() {
    // spec: M1 — automatic upgrades start only while the gate is open.
    let mut w = World::new(1, 2, 1, 0, 1);
    w.op.spec.operation_type = OperationType::AutoUpgradeNodes;
    w.gate = Gate::Closed {
        reason: "exclusion holidays (NO_UPGRADES)".into(),
        next: None,
    };
    let p = w.pass(false).unwrap();
    assert_eq!(p.actions, []);
    assert_eq!(p.status.status, Some(OperationState::Pending));
    assert!(p.status.start_time.is_none());
    assert!(p.held_zones.is_empty());
}

#[test]
fn u6_cancel_lets_started_nodes_finish_and_resume_upgrades_the_rest() {
    // spec: U6
    let mut w = World::new(1, 5, 2, 0, 21);
    calm(&mut w, 2, 2);
    w.pass(false);
    w.op.spec.action = Some(OperationAction::Cancel);
    let p = w.pass(false).unwrap();
    assert_eq!(p.status.status, Some(OperationState::Cancelling));
    assert_eq!(marks(&p), 0);
    for _ in 0..40 {
        w.pass(false);
    }
    assert_eq!(w.state(), Some(OperationState::Cancelled));
    assert_eq!(w.last_plan.as_ref().unwrap().requeue_after, None);
    // Two versions side by side; nothing left cordoned or marked.
    assert_eq!(w.versions(), [OLD.to_string(), NEW.to_string()].into());
    w.assert_clean("after the cancel");
    assert_eq!(w.counts()["zone-0"], 5);
    w.op.spec.action = Some(OperationAction::Resume);
    w.run_calm(300);
    assert_upgraded(&w);
}

#[test]
fn u6_rollback_restores_the_upgraded_nodes_and_not_after_completion() {
    // spec: U6
    let mut w = World::new(1, 4, 1, 1, 17);
    calm(&mut w, 2, 2);
    for _ in 0..6 {
        w.pass(false);
    }
    assert!(w.versions().contains(NEW));
    w.op.spec.action = Some(OperationAction::Rollback);
    w.run_calm(400);
    assert_eq!(w.state(), Some(OperationState::RolledBack));
    assert_eq!(w.versions(), [OLD.to_string()].into());
    assert_eq!(w.pool.spec.version.as_deref(), Some(OLD));
    w.assert_clean("after the rollback");
    // A completed upgrade cannot be rolled back.
    let mut w = World::new(1, 2, 1, 0, 17);
    calm(&mut w, 1, 1);
    w.run_calm(200);
    assert_upgraded(&w);
    w.op.spec.action = Some(OperationAction::Rollback);
    let err = w.plan().unwrap_err();
    assert!(matches!(err, UpgradeError::RollbackAfterCompletion { .. }));
    assert!(err.to_string().contains("downgrade instead"), "{err}");
}

#[test]
fn u7_label_and_taint_changes_are_written_in_place_without_surge_or_window() {
    // spec: U7, M8 — no recreation, no surge, not gated for a manual change.
    let mut w = World::new(2, 3, 1, 0, 2);
    w.op.spec.node_version = None;
    let mut c = w.pool.spec.config.clone();
    c.labels.insert("tier".into(), "web".into());
    w.op.spec.config = Some(c);
    w.gate = Gate::Closed {
        reason: "maintenance window closed".into(),
        next: None,
    };
    let p = w.pass(false).unwrap();
    assert_eq!(
        count(
            &p,
            |a| matches!(a, Action::ApplyInPlace(r) if r.set_labels.get("tier").map(String::as_str) == Some("web"))
        ),
        6
    );
    assert_eq!(creates(&p) + marks(&p) + drains(&p), 0);
    let p = w.pass(false).unwrap();
    assert_eq!(p.status.status, Some(OperationState::Done));
    assert!(p
        .actions
        .iter()
        .any(|a| matches!(a, Action::SetPoolTarget { .. })));
    assert_eq!(w.versions(), [OLD.to_string()].into());
}

#[test]
fn a_config_change_recreates_and_tells_new_nodes_by_their_config_label() {
    // spec: U1 — a node config change recreates the nodes like a version change.
    let mut w = World::new(1, 3, 1, 0, 4);
    calm(&mut w, 2, 1);
    w.op.spec.node_version = None;
    w.op.spec.config = Some(world::config("8"));
    w.run_calm(300);
    assert_eq!(w.state(), Some(OperationState::Done));
    assert_eq!(w.pool.spec.config.capacity.cpu.0, "8");
    for n in w.node_list() {
        let label = n.metadata.labels.as_ref().unwrap()[sluice_upgrades::CONFIG_LABEL].clone();
        assert_eq!(label, "cpu8000m-mem17179869184-standard");
    }
    let upgraded = &w
        .op
        .status
        .as_ref()
        .unwrap()
        .progress
        .as_ref()
        .unwrap()
        .metrics;
    assert!(upgraded
        .iter()
        .any(|m| m.name == NODES_UPGRADED && m.int_value == Some(3)));
}

#[test]
fn e1_a_drain_that_never_ends_is_forced_after_the_caps() {
    // spec: E1, E6 — PDBs for up to 1 h, then the grace (30 s here).
    let mut w = World::new(1, 1, 0, 1, 8);
    calm(&mut w, 1, 1);
    w.weather.stuck_drain_percent = 100;
    w.pass(false);
    let drained_at = w.now - w.step;
    // The refusing budget is named in the zone's blocking reasons.
    let p = w.pass(false).unwrap();
    let blocking = &p.status.progress.as_ref().unwrap().stages[0].blocking;
    assert!(
        blocking
            .iter()
            .any(|b| b.contains("PodDisruptionBudget default/web refuses its eviction")),
        "{blocking:?}"
    );
    let mut deleted_at = None;
    for _ in 0..200 {
        let p = w.pass(false).unwrap();
        if p.actions
            .iter()
            .any(|a| matches!(a, Action::Recreate { .. } | Action::DeleteInstance { .. }))
        {
            deleted_at = Some(w.now - w.step);
            break;
        }
    }
    let waited = deleted_at.expect("never forced").duration_since(drained_at);
    assert!(waited >= SignedDuration::from_secs(3630), "{waited:?}");
    assert!(waited < SignedDuration::from_secs(3630 + 30), "{waited:?}");
}

#[test]
fn the_autoscaler_is_told_which_nodes_to_leave_alone() {
    // spec: U7 — the autoscaler does not touch nodes being upgraded.
    let mut w = World::new(1, 3, 1, 0, 6);
    let p = w.pass(false).unwrap();
    let marked = w.marked();
    assert_eq!(marked.len(), 1);
    assert!(marked.is_subset(&p.busy_nodes));
    let created: Vec<String> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateNode(c) => Some(c.name.clone()),
            _ => None,
        })
        .collect();
    assert!(created.iter().all(|c| p.busy_nodes.contains(c)));
    assert_eq!(p.held_zones["zone-0"].extra, 1);
}

#[test]
fn huge_settings_do_not_overflow() {
    // spec: U5 — a window larger than the pool upgrades it all at once.
    let mut w = World::new(1, 3, i32::MAX, i32::MAX, 1);
    calm(&mut w, 2, 1);
    let first = w.pass(false).unwrap();
    assert_eq!((marks(&first), creates(&first)), (3, 3));
    w.run_calm(100);
    assert_upgraded(&w);
}

#[test]
fn bad_settings_and_links_are_errors_naming_the_field() {
    let w = World::new(1, 1, 0, 0, 1);
    let e = w.plan().unwrap_err().to_string();
    assert!(
        e.contains("maxSurge and maxUnavailable may not both be 0"),
        "{e}"
    );
    let w = World::new(1, 1, -1, 1, 1);
    let e = w.plan().unwrap_err().to_string();
    assert!(
        e.contains("spec.upgradeSettings.maxSurge: must be 0 or more, got -1"),
        "{e}"
    );
    let mut w = World::new(1, 1, 1, 0, 1);
    w.op.spec.target_link = "/apis/sluice.dev/v1/nodepools/other".into();
    let e = w.plan().unwrap_err().to_string();
    assert!(e.contains("\"other\""), "{e}");
    w.op.spec.target_link = "/apis/sluice.dev/v1/clusters/c".into();
    let e = w.plan().unwrap_err().to_string();
    assert!(e.contains("spec.targetLink"), "{e}");
    let mut w = World::new(1, 1, 1, 0, 1);
    w.op.spec.config = Some(world::config("lots"));
    let e = w.plan().unwrap_err().to_string();
    assert!(e.contains("spec.config") && e.contains("cpu"), "{e}");
    let mut w = World::new(1, 1, 1, 0, 1);
    w.op.spec.operation_type = OperationType::SetNodePoolSize;
    assert!(matches!(w.plan(), Err(UpgradeError::NotAnUpgrade { .. })));
}

#[test]
fn u2_an_upgrade_ends_only_once_the_zone_is_whole_again() {
    // spec: U2, U3 — a recreated node whose new instance is lost (its
    // creation refused) is still owed: the upgrade does not end a node short.
    let mut w = World::new(1, 3, 0, 1, 5);
    calm(&mut w, 2, 1);
    let (mut lost, mut recreates) = (None, 0);
    for _ in 0..300 {
        let p = w.pass(false).unwrap();
        let recreated = p.actions.iter().find_map(|a| match a {
            Action::Recreate { new, .. } => Some(new.name.clone()),
            _ => None,
        });
        recreates += usize::from(recreated.is_some());
        if let Some(new) = recreated.filter(|_| recreates == 3) {
            w.lose(&new);
            lost = Some(new);
            break;
        }
    }
    let lost = lost.expect("the last node was recreated");
    // The old node's deletion completes before the next pass.
    for _ in 0..3 {
        w.advance();
    }
    assert_eq!(w.counts()["zone-0"], 2);
    assert_eq!(w.instances().len(), 2);
    let p = w.pass(false).unwrap();
    assert_ne!(p.status.status, Some(OperationState::Done));
    assert_eq!(creates(&p), 1, "{:?}", p.actions);
    w.run_calm(300);
    assert!(!w.nodes.contains_key(&lost));
    assert_upgraded(&w);
}
