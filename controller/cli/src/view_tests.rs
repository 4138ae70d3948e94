use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::operation::{Operation, OperationAction, OperationState};

use super::*;

fn running() -> Operation {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": "operation-1764230400000-beef", "creationTimestamp": "2026-11-27T08:00:00Z"},
        "spec": {"operationType": "UPGRADE_NODES",
                 "targetLink": "/apis/sluice.dev/v1/nodepools/pool-a",
                 "nodeVersion": "1.33.5",
                 "upgradeSettings": {"maxSurge": 1}},
        "status": {
            "status": "RUNNING", "zone": "zone-a",
            "startTime": "2026-11-27T08:00:01Z",
            "warnings": ["parallel drains and externalTrafficPolicy: Local"],
            "progress": {
                "metrics": [{"name": "nodes_total", "intValue": 12},
                            {"name": "nodes_upgraded", "intValue": 5}],
                "stages": [
                    {"name": "zone-a", "status": "RUNNING",
                     "metrics": [{"name": "nodes_total", "intValue": 4},
                                 {"name": "nodes_upgraded", "intValue": 3}],
                     "blocking": ["PodDisruptionBudget default/web refuses an eviction"]},
                    {"name": "zone-b", "status": "PENDING",
                     "metrics": [{"name": "nodes_total", "intValue": 8}]}
                ]
            }
        }
    }))
    .unwrap()
}

fn at() -> Timestamp {
    "2026-11-27T08:05:00Z".parse().unwrap()
}

#[test]
fn counts_are_upgraded_over_total() {
    let op = running();
    let p = op.status.as_ref().and_then(|s| s.progress.as_ref());
    assert_eq!(counts(p), "5/12");
    assert_eq!(counts(p.map(|p| &p.stages[1])), "0/8");
    assert_eq!(counts(None), "-");
}

#[test]
fn the_table_has_gclouds_columns_aligned() {
    let mut done = running();
    done.metadata.name = Some("operation-1-0001".into());
    if let Some(s) = done.status.as_mut() {
        s.status = Some(OperationState::Done);
        s.end_time = Some(sluice_model::k8s::Time(at()));
    }
    let t = table(&[running(), done]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    for col in [
        "NAME", "TYPE", "TARGET", "STATUS", "START", "END", "PROGRESS",
    ] {
        assert!(lines[0].contains(col), "{t}");
    }
    let status_col = lines[0].find("STATUS").unwrap();
    assert_eq!(&lines[1][status_col..status_col + 7], "RUNNING", "{t}");
    assert_eq!(&lines[2][status_col..status_col + 4], "DONE", "{t}");
    assert!(
        lines[1].contains("UPGRADE_NODES") && lines[1].contains("pool-a"),
        "{t}"
    );
    assert!(lines[1].ends_with("5/12"), "{t}");
    assert!(lines[2].contains("2026-11-27T08:05:00Z"), "{t}");
}

/// spec: U5 — the warning is shown; per zone counts and blocking reasons.
#[test]
fn describe_shows_zones_blocking_and_warnings() {
    let d = describe(&running());
    for want in [
        "name: operation-1764230400000-beef",
        "nodeVersion: 1.33.5",
        "upgradeSettings: strategy SURGE, maxSurge 1, maxUnavailable 0",
        "status: RUNNING",
        "progress: 5/12",
        "  zone-a 3/4 RUNNING",
        "    blocking: PodDisruptionBudget default/web refuses an eviction",
        "  zone-b 0/8 PENDING",
        "warning: parallel drains and externalTrafficPolicy: Local",
        "endTime: -",
    ] {
        assert!(d.contains(want), "{want:?} missing from\n{d}");
    }
}

#[test]
fn a_progress_line_names_zone_counts_state_and_blockers() {
    assert_eq!(
        progress_line(&running(), at()),
        "2026-11-27T08:05:00Z zone-a 3/4 · RUNNING · blocking: PodDisruptionBudget default/web refuses an eviction\n"
    );
    let mut op = running();
    op.status = None;
    assert_eq!(progress_text(&op), "all zones - · PENDING");
}

#[test]
fn progress_json_is_one_object_a_line() {
    let line = progress_json(&running(), at());
    assert_eq!(line.matches('\n').count(), 1);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["zone"], "zone-a");
    assert_eq!(v["upgraded"], 3);
    assert_eq!(v["total"], 4);
    assert_eq!(v["status"], "RUNNING");
    assert_eq!(v["time"], "2026-11-27T08:05:00Z");
}

/// spec: U6 — a cancelled or rolled-back upgrade ends the wait with 10;
/// a cancelled one already asked to resume or roll back is waited for.
#[test]
fn wait_ends_on_final_states_and_cancelled() {
    use OperationAction::*;
    use OperationState::*;
    assert_eq!(wait_exit(Some(Done), None), Some(0));
    assert_eq!(wait_exit(Some(Failed), None), Some(1));
    assert_eq!(wait_exit(Some(Cancelled), None), Some(10));
    assert_eq!(wait_exit(Some(Cancelled), Some(Cancel)), Some(10));
    assert_eq!(wait_exit(Some(Cancelled), Some(Resume)), None);
    assert_eq!(wait_exit(Some(Cancelled), Some(Rollback)), None);
    assert_eq!(wait_exit(Some(RolledBack), Some(Rollback)), Some(10));
    assert_eq!(wait_exit(Some(Done), Some(Resume)), Some(0));
    for s in [Pending, Running, Cancelling, RollingBack] {
        assert_eq!(wait_exit(Some(s), None), None);
    }
    assert_eq!(wait_exit(None, None), None);
}

/// spec: B3, B4 — describe and wait show the phase, batch k of n and the
/// soak left.
#[test]
fn a_blue_green_upgrade_shows_its_phase() {
    let mut op = running();
    op.spec.upgrade_settings = serde_json::from_value(json!({
        "strategy": "BLUE_GREEN",
        "blueGreenSettings": {"standardRolloutPolicy": {"batchNodeCount": 3},
                              "nodePoolSoakDuration": "600s"}
    }))
    .unwrap();
    let st = op.status.as_mut().unwrap();
    st.blue_green = serde_json::from_value(json!({
        "phase": "NODE_POOL_SOAKING", "batches": 4, "batchSize": 3, "batchesDrained": 4
    }))
    .unwrap();
    st.progress.as_mut().unwrap().metrics.push(
        serde_json::from_value(json!({"name": "soak_left_seconds", "intValue": 420})).unwrap(),
    );
    assert_eq!(
        phase_text(&op).unwrap(),
        "NODE_POOL_SOAKING, batch 4 of 4 drained, soak ends in 420s"
    );
    let d = describe(&op);
    assert!(
        d.contains("blueGreen: NODE_POOL_SOAKING, batch 4 of 4 drained"),
        "{d}"
    );
    assert!(
        d.contains("upgradeSettings: strategy BLUE_GREEN, batchNodeCount 3, batchSoakDuration 0s, nodePoolSoakDuration 600s"),
        "{d}"
    );
    assert!(progress_text(&op).contains("NODE_POOL_SOAKING"));
    let j: serde_json::Value = serde_json::from_str(&progress_json(&op, at())).unwrap();
    assert_eq!(j["phase"], "NODE_POOL_SOAKING");
    assert_eq!(j["batches"], 4);
    assert_eq!(j["batchesDrained"], 4);
    assert_eq!(j["soakLeftSeconds"], 420);
    // A surge upgrade shows no phase.
    assert_eq!(phase_text(&running()), None);
}
