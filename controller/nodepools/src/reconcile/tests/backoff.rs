//! Creation failures: quota backoff, its condition, and recovery.

use k8s_openapi::jiff::SignedDuration;
use sluice_model::k8s::Time;
use sluice_model::node_pool::{CreateBackoff, NodePoolCondition, NodePoolPhase, NodePoolStatus};

use super::*;
use crate::reconcile::{record, Outcome, QUOTA_EXCEEDED};
use crate::ProviderError;

fn quota() -> ProviderError {
    ProviderError::QuotaExhausted {
        resource: "instances".into(),
        limit: 3,
    }
}

fn outcomes(p: &Plan, result: impl Fn(&Action) -> Result<(), ProviderError>) -> Vec<Outcome> {
    p.actions
        .iter()
        .map(|a| Outcome {
            action: a.clone(),
            result: result(a),
        })
        .collect()
}

fn quota_condition(status: &NodePoolStatus) -> &NodePoolCondition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == QUOTA_EXCEEDED)
        .unwrap()
}

fn backing_off(failures: u32, secs_ago: i64) -> NodePool {
    let mut pl = pool(&["zone-a"], 2);
    pl.status = Some(NodePoolStatus {
        create_backoff: Some(CreateBackoff {
            failures,
            last_failure_time: Time(ago(secs_ago)),
            quota_exceeded: true,
            message: quota().to_string(),
        }),
        ..Default::default()
    });
    pl
}

// spec: C3 — on quota exhaustion wait and retry.
#[test]
fn a_quota_error_starts_a_backoff_reported_in_the_status() {
    let p = run(&pool(&["zone-a"], 2), &[], &[]);
    let status = record(
        &p.status,
        &outcomes(&p, |_| Err(quota())),
        &Config::default(),
        now(),
    );
    let b = status.create_backoff.clone().unwrap();
    assert_eq!((b.failures, b.quota_exceeded), (1, true));
    assert_eq!(b.message, "quota exhausted: instances (limit 3)");
    let q = quota_condition(&status);
    assert_eq!(
        (q.status.as_str(), q.message.as_str()),
        ("True", b.message.as_str())
    );
    assert_eq!(status.status, Some(NodePoolPhase::Error));
    assert!(status
        .status_message
        .unwrap()
        .contains("2026-11-23T12:00:30Z"));
}

#[test]
fn creations_wait_out_the_backoff_and_deletions_go_on() {
    let failed = [inst(
        "p-a-1",
        "zone-a",
        InstanceState::Failed("x".into()),
        100,
    )];
    let p = run(&backing_off(1, 10), &failed, &[]);
    assert_eq!(deletes(&p).len(), 1);
    assert_eq!(creates(&p), Vec::<&str>::new());
    assert_eq!(
        p.requeue_after,
        Some(SignedDuration::from_secs(10)),
        "poll comes first"
    );
    let p = run(&backing_off(2, 45), &[], &[]);
    assert_eq!(creates(&p), Vec::<&str>::new());
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(10)));
    assert_eq!(condition(&p, QUOTA_EXCEEDED), ("True", "QuotaExhausted"));
    // 30 s after one failure, 60 s after two: the wait is over.
    assert_eq!(creates(&run(&backing_off(1, 30), &[], &[])).len(), 2);
    assert_eq!(creates(&run(&backing_off(2, 60), &[], &[])).len(), 2);
}

#[test]
fn the_end_of_a_backoff_wakes_the_pool() {
    let config = Config {
        poll_interval: SignedDuration::from_secs(600),
        ..Config::default()
    };
    let p = plan::<Node>(&backing_off(1, 10), &[], &[], &config, now()).unwrap();
    assert_eq!(p.requeue_after, Some(SignedDuration::from_secs(20)));
}

#[test]
fn failures_in_a_row_lengthen_the_backoff_and_a_success_clears_it() {
    let p = run(&backing_off(2, 60), &[], &[]);
    let status = record(
        &p.status,
        &outcomes(&p, |_| Err(quota())),
        &Config::default(),
        now(),
    );
    assert_eq!(status.create_backoff.as_ref().map(|b| b.failures), Some(3));

    let mut pl = pool(&["zone-a"], 2);
    pl.status = Some(status);
    let later = now() + SignedDuration::from_secs(120);
    let p = plan::<Node>(&pl, &[], &[], &Config::default(), later).unwrap();
    assert_eq!(p.actions.len(), 2);
    let status = record(
        &p.status,
        &outcomes(&p, |_| Ok(())),
        &Config::default(),
        later,
    );
    assert_eq!(status.create_backoff, None);
    let q = quota_condition(&status);
    assert_eq!(
        (q.status.as_str(), q.last_transition_time.0),
        ("False", later)
    );
}

#[test]
fn the_quota_error_wins_over_other_failures_in_one_round() {
    let p = run(&pool(&["zone-a"], 2), &[], &[]);
    let mut first = true;
    let results: Vec<Outcome> = outcomes(&p, |_| Ok(()))
        .into_iter()
        .map(|mut o| {
            o.result = if std::mem::take(&mut first) {
                Err(ProviderError::Failed("boom".into()))
            } else {
                Err(quota())
            };
            o
        })
        .collect();
    let status = record(&p.status, &results, &Config::default(), now());
    assert!(status.create_backoff.unwrap().quota_exceeded);
}

#[test]
fn other_failures_back_off_without_claiming_quota() {
    let p = run(&pool(&["zone-a"], 1), &[], &[]);
    let fail = |_: &Action| Err(ProviderError::Failed("no image".into()));
    let status = record(&p.status, &outcomes(&p, fail), &Config::default(), now());
    assert_eq!(
        status.create_backoff.as_ref().map(|b| b.quota_exceeded),
        Some(false)
    );
    let q = quota_condition(&status);
    assert_eq!(q.status, "False");
}

#[test]
fn deletions_already_done_are_fine_and_failed_ones_are_named() {
    let have = [
        inst("p-a-1", "zone-a", InstanceState::Failed("x".into()), 100),
        inst("p-a-2", "zone-a", InstanceState::Failed("y".into()), 100),
    ];
    let p = run(&pool(&["zone-a"], 0), &have, &[]);
    let results = outcomes(&p, |a| match a {
        Action::Delete { name, .. } if name == "p-a-1" => {
            Err(ProviderError::NotFound(name.clone()))
        }
        _ => Err(ProviderError::Failed("stuck".into())),
    });
    let status = record(&p.status, &results, &Config::default(), now());
    let message = status.status_message.unwrap();
    assert!(
        message.contains("p-a-2: stuck") && !message.contains("p-a-1"),
        "{message}"
    );
    assert_eq!(status.create_backoff, None);
}

#[test]
fn an_unchanged_condition_keeps_its_transition_time() {
    let have = [running("p-a-1", "zone-a", 100)];
    let mut pl = pool(&["zone-a"], 1);
    let first = run(&pl, &have, &ready_nodes(&have));
    pl.status = Some(first.status);
    let later = now() + SignedDuration::from_secs(300);
    let again = plan(&pl, &have, &ready_nodes(&have), &Config::default(), later).unwrap();
    let ready = again
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.last_transition_time.0, now());
}
