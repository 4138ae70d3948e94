use super::{assert_unknown_field, breaks, round_trip};
use crate::operation::*;
use crate::validation::ErrorKind;

const FULL: &str = r#"
apiVersion: sluice.dev/v1
kind: Operation
metadata:
  name: operation-1763856000-pool-a
spec:
  operationType: UPGRADE_NODES
  targetLink: /apis/sluice.dev/v1/nodepools/pool-a
  nodeVersion: 1.34.1
  config:
    capacity:
      cpu: "4"
      memory: 16Gi
    labels:
      tier: web
  upgradeSettings:
    maxSurge: 2
    maxUnavailable: 1
  action: CANCEL
status:
  status: CANCELLING
  statusMessage: "cancel asked: 1 node mid-upgrade finishing"
  startTime: 2026-11-23T02:00:00Z
  zone: europe-west1-b
  warnings:
    - "parallel drains of nodes behind externalTrafficPolicy: Local Service default/web"
  progress:
    name: surge-upgrade
    status: RUNNING
    metrics:
      - name: nodes_total
        intValue: 8
      - name: batch_fraction
        doubleValue: 0.25
    stages:
      - name: europe-west1-b
        status: RUNNING
        blocking:
          - "pod default/web-1: PodDisruptionBudget default/web refuses its eviction"
        metrics:
          - name: current_batch
            stringValue: "2"
      - name: europe-west1-c
        status: PENDING
"#;

#[test]
fn full_example_round_trips() {
    let op: Operation = round_trip(FULL);
    assert_eq!(op.spec.node_pool(), Some("pool-a"));
    assert_eq!(op.spec.action, Some(OperationAction::Cancel));
    assert_eq!(
        op.status.and_then(|s| s.status),
        Some(OperationState::Cancelling)
    );
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    assert_unknown_field::<Operation>(
        &FULL.replace(
            "stringValue: \"2\"",
            "stringValue: \"2\"\n            unit: batches",
        ),
        "status.progress.stages[0].metrics[0].unit",
    );
    assert_unknown_field::<Operation>(
        &FULL.replace("  operationType:", "  zone: a\n  operationType:"),
        "spec.zone",
    );
}

#[test]
fn rules() {
    breaks(
        FULL,
        |o: &mut Operation| o.spec.target_link.clear(),
        "spec.targetLink",
        ErrorKind::Required,
        "names the object",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            let status = o.status.get_or_insert_with(Default::default);
            status.end_time = Some(super::time("2026-11-23T01:00:00Z"));
        },
        "status.endTime",
        ErrorKind::Invalid,
        "before startTime",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            let status = o.status.get_or_insert_with(Default::default);
            let progress = status.progress.get_or_insert_with(Default::default);
            progress.stages[0].metrics[0].int_value = Some(2);
        },
        "status.progress.stages[0].metrics[0]",
        ErrorKind::Invalid,
        "exactly one",
    );
}

#[test]
fn node_upgrade_rules() {
    breaks(
        FULL,
        |o: &mut Operation| o.spec.target_link = "/apis/sluice.dev/v1/clusters/c".into(),
        "spec.targetLink",
        ErrorKind::Invalid,
        "acts on a node pool",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            o.spec.node_version = None;
            o.spec.config = None;
        },
        "spec.nodeVersion",
        ErrorKind::Required,
        "changes nodeVersion, config or both",
    );
    breaks(
        FULL,
        |o: &mut Operation| o.spec.node_version = Some(" ".into()),
        "spec.nodeVersion",
        ErrorKind::Invalid,
        "may not be empty",
    );
    // spec: U1, U2 — GKE refuses maxSurge = maxUnavailable = 0.
    breaks(
        FULL,
        |o: &mut Operation| {
            let u = o.spec.upgrade_settings.get_or_insert_with(Default::default);
            u.max_surge = Some(0);
            u.max_unavailable = Some(0);
        },
        "spec.upgradeSettings.maxSurge",
        ErrorKind::Invalid,
        "may not both be 0",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            let u = o.spec.upgrade_settings.get_or_insert_with(Default::default);
            u.max_unavailable = Some(-1);
        },
        "spec.upgradeSettings.maxUnavailable",
        ErrorKind::Invalid,
        "0 or more, got -1",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            if let Some(c) = o.spec.config.as_mut() {
                c.labels.insert("Bad Key".into(), "x".into());
            }
        },
        "spec.config.labels[Bad Key]",
        ErrorKind::Invalid,
        "not a valid label key",
    );
    // spec: U6 — no rollback after completion: downgrade instead.
    breaks(
        FULL,
        |o: &mut Operation| {
            o.spec.action = Some(OperationAction::Rollback);
            let status = o.status.get_or_insert_with(Default::default);
            status.status = Some(OperationState::Done);
        },
        "spec.action",
        ErrorKind::Forbidden,
        "downgrade the node pool instead",
    );
    breaks(
        FULL,
        |o: &mut Operation| {
            o.spec.operation_type = OperationType::SetNodePoolSize;
            o.spec.node_version = None;
            o.spec.config = None;
            o.spec.upgrade_settings = None;
        },
        "spec.action",
        ErrorKind::Forbidden,
        "only for UPGRADE_NODES",
    );
}

#[test]
fn the_target_link_names_one_node_pool() {
    let spec = |link: &str| OperationSpec::new(OperationType::UpgradeNodes, link);
    assert_eq!(
        spec("/apis/sluice.dev/v1/nodepools/pool-a").node_pool(),
        Some("pool-a")
    );
    for bad in [
        "/apis/sluice.dev/v1/nodepools/",
        "/apis/sluice.dev/v1/nodepools/a/b",
        "/apis/sluice.dev/v1/clusters/c",
        "pool-a",
        "",
    ] {
        assert_eq!(spec(bad).node_pool(), None, "{bad:?}");
    }
}

#[test]
fn final_states() {
    use OperationState::*;
    for s in [Done, RolledBack, Failed] {
        assert!(s.is_final(), "{s:?}");
    }
    for s in [
        Pending,
        Running,
        Cancelling,
        Cancelled,
        RollingBack,
        Aborting,
    ] {
        assert!(!s.is_final(), "{s:?}");
    }
}

// spec: U1 — a version is one nodes can report and versions compare by:
// a typo or a command never starts an upgrade.
#[test]
fn versions_are_kubernetes_versions() {
    use crate::validation::version_error;
    for good in [
        "1.33",
        "1.33.2",
        "v1.33.2",
        "1.33.2-gke.1200000",
        "1.35.0-rc.1",
    ] {
        assert_eq!(version_error(good), None, "{good}");
    }
    for bad in [
        "latest",
        "1",
        "1.33.",
        "1..2",
        "1.33.2.4",
        "1.33.2-",
        "1.33.2-gke 1",
        "latest; rm -rf /",
        "1.1234567.0",
    ] {
        let e = version_error(bad).expect(bad);
        assert!(e.contains("not a version"), "{bad}: {e}");
    }
    let long = format!("1.33.{}", "9".repeat(100));
    assert!(version_error(&long).is_some_and(|e| e.contains("at most 64")));
}

/// A blue-green upgrade in `phase` (`None`: no phase yet), `state`, with
/// the action `old` stored.
fn blue_green_op(
    phase: Option<&str>,
    state: &str,
    old: Option<&str>,
    autoscaled: bool,
) -> Operation {
    let policy = if autoscaled {
        serde_json::json!({"autoscaledRolloutPolicy": {}})
    } else {
        serde_json::json!({"standardRolloutPolicy": {"batchNodeCount": 1}})
    };
    let mut v = serde_json::json!({
        "apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": "op"},
        "spec": {"operationType": "UPGRADE_NODES",
                 "targetLink": "/apis/sluice.dev/v1/nodepools/pool-a",
                 "nodeVersion": "1.34.1",
                 "upgradeSettings": {"strategy": "BLUE_GREEN", "blueGreenSettings": policy}},
        "status": {"status": state}
    });
    if let Some(p) = phase {
        v["status"]["blueGreen"] = serde_json::json!({"phase": p});
    }
    if let Some(a) = old {
        v["spec"]["action"] = serde_json::json!(a);
    }
    serde_json::from_value(v).unwrap()
}

fn steer(old: &Operation, action: &str) -> Result<(), String> {
    let mut new = old.clone();
    new.spec.action = serde_json::from_value(serde_json::json!(action)).unwrap();
    crate::validation::validate_operation_update(&new, old).map_err(|e| e.to_string())
}

#[test]
fn blue_green_actions_obey_the_phase() {
    // spec: B4 — COMPLETE only while the pool soaks.
    let soaking = blue_green_op(Some("NODE_POOL_SOAKING"), "RUNNING", None, false);
    assert_eq!(steer(&soaking, "COMPLETE"), Ok(()));
    for phase in [
        "CREATING_GREEN_POOL",
        "CORDONING_BLUE_POOL",
        "DRAINING_BLUE_POOL",
    ] {
        let op = blue_green_op(Some(phase), "RUNNING", None, false);
        let e = steer(&op, "COMPLETE").unwrap_err();
        assert!(e.contains("spec.action") && e.contains(phase), "{e}");
        // spec: B6 — cancel and rollback are allowed there.
        assert_eq!(steer(&op, "CANCEL"), Ok(()), "{phase}");
        assert_eq!(steer(&op, "ROLLBACK"), Ok(()), "{phase}");
    }
    let e = steer(&blue_green_op(None, "PENDING", None, false), "COMPLETE").unwrap_err();
    assert!(e.contains("state PENDING"), "{e}");
    // spec: B5 — phase 5 cannot be cancelled nor rolled back.
    let deleting = blue_green_op(Some("DELETING_BLUE_POOL"), "RUNNING", None, false);
    let e = steer(&deleting, "CANCEL").unwrap_err();
    assert!(e.contains("cannot be cancelled"), "{e}");
    let e = steer(&deleting, "ROLLBACK").unwrap_err();
    assert!(e.contains("DELETING_BLUE_POOL"), "{e}");
    // spec: U6 — no rollback after DONE.
    let done = blue_green_op(Some("DELETING_BLUE_POOL"), "DONE", None, false);
    assert!(steer(&done, "ROLLBACK").is_err());
    // spec: A4 — an autoscaled blue-green upgrade is not rolled back.
    let auto = blue_green_op(Some("CORDONING_BLUE_POOL"), "RUNNING", None, true);
    let e = steer(&auto, "ROLLBACK").unwrap_err();
    assert!(e.contains("autoscaled"), "{e}");
    // An action already stored is not judged again: the controller's
    // status writes after it go through.
    let stored = blue_green_op(
        Some("DELETING_BLUE_POOL"),
        "RUNNING",
        Some("COMPLETE"),
        false,
    );
    assert_eq!(steer(&stored, "COMPLETE"), Ok(()));
}

#[test]
fn complete_is_for_blue_green_only() {
    // spec: B4 — a surge upgrade has no soak to end.
    let mut op = blue_green_op(Some("NODE_POOL_SOAKING"), "RUNNING", None, false);
    op.spec.upgrade_settings = None;
    let e = steer(&op, "COMPLETE").unwrap_err();
    assert!(e.contains("not BLUE_GREEN"), "{e}");
}

#[test]
fn an_operation_with_an_autoscaled_snapshot_is_valid() {
    // spec: A4 — the snapshot was checked against its pool; the operation
    // does not carry the pool's autoscaling to check it again.
    let op = blue_green_op(None, "PENDING", None, true);
    assert_eq!(
        crate::validation::validate_operation(&op).map_err(|e| e.to_string()),
        Ok(())
    );
}
