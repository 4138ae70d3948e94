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
status:
  status: RUNNING
  statusMessage: draining blue, batch 2 of 4
  startTime: 2026-11-23T02:00:00Z
  progress:
    name: blue-green
    status: RUNNING
    metrics:
      - name: nodes_total
        intValue: 8
      - name: batch_fraction
        doubleValue: 0.25
    stages:
      - name: CREATING_GREEN_POOL
        status: DONE
      - name: DRAINING_BLUE_POOL
        status: RUNNING
        metrics:
          - name: current_batch
            stringValue: "2"
"#;

#[test]
fn full_example_round_trips() {
    let op: Operation = round_trip(FULL);
    assert_eq!(
        op.status.and_then(|s| s.status),
        Some(OperationState::Running)
    );
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    assert_unknown_field::<Operation>(
        &FULL.replace(
            "stringValue: \"2\"",
            "stringValue: \"2\"\n            unit: batches",
        ),
        "status.progress.stages[1].metrics[0].unit",
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
            progress.stages[1].metrics[0].int_value = Some(2);
        },
        "status.progress.stages[1].metrics[0]",
        ErrorKind::Invalid,
        "exactly one",
    );
}
