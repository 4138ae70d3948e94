//! Counts, conditions, deadlines, history and refusals.

use super::*;

#[test]
fn availability_condition_follows_max_unavailable() {
    let d = deploy(4, "1");
    let plan = reconcile(&d, &[with_available(rs("1", 4, 1, 100), 3)], &[], now()).unwrap();
    assert_eq!(
        cond(&plan.status, AVAILABLE),
        ("True".into(), reasons::MIN_AVAILABLE.into())
    );
    assert_eq!(plan.status.unavailable_replicas, Some(1));
    let plan = reconcile(&d, &[with_available(rs("1", 4, 1, 100), 2)], &[], now()).unwrap();
    assert_eq!(
        cond(&plan.status, AVAILABLE),
        ("False".into(), reasons::MIN_UNAVAILABLE.into())
    );
}

#[test]
fn a_complete_rollout_says_so_and_cleans_up_history() {
    let mut d = deploy(3, "4");
    d.status = Some(progressing_since(seen(3, 3, 3), reasons::RS_UPDATED, 30));
    // Scaled to 0, but its controller has not seen that yet.
    let mut busy = rs("0", 0, 1, 400);
    busy.metadata.generation = Some(2);
    let rss = [
        busy,
        rs("1", 0, 2, 300),
        rs("2", 0, 3, 200),
        rs("3", 0, 4, 100),
        rs("4", 3, 5, 50),
    ];
    let plan = reconcile(&d, &rss, &[], now()).unwrap();
    // Four old, two kept: revisions 1 and 2 would go, but 1 is not settled.
    assert_eq!(deleted(&plan), vec!["web-h1".to_string()]);
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("True".into(), reasons::NEW_RS_AVAILABLE.into())
    );
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn a_stalled_rollout_is_rechecked_at_its_deadline_then_times_out() {
    let mut d = deploy(3, "2");
    let old = rs("1", 2, 1, 300);
    let new = with_available(rs("2", 2, 2, 200), 0);
    d.status = Some(progressing_since(seen(4, 2, 2), reasons::RS_UPDATED, 100));
    let plan = reconcile(&d, &[old.clone(), new.clone()], &[], now()).unwrap();
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("True".into(), reasons::RS_UPDATED.into())
    );
    assert_eq!(plan.requeue_after, Some(SignedDuration::from_secs(500)));

    d.status = Some(progressing_since(seen(4, 2, 2), reasons::RS_UPDATED, 601));
    let plan = reconcile(&d, &[old, new], &[], now()).unwrap();
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("False".into(), reasons::TIMED_OUT.into())
    );
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn without_a_deadline_there_is_no_progressing_condition() {
    let mut d = deploy(3, "1");
    d.spec.progress_deadline_seconds = None;
    let plan = reconcile(&d, &[rs("1", 3, 1, 100)], &[], now()).unwrap();
    assert!(status::condition(&plan.status, PROGRESSING).is_none());
    assert!(status::condition(&plan.status, AVAILABLE).is_some());
}

#[test]
fn a_deployment_being_deleted_only_reports() {
    let mut d = deploy(5, "2");
    d.metadata.deletion_timestamp = Some(ago(1));
    let plan = reconcile(&d, &[rs("1", 3, 1, 100)], &[], now()).unwrap();
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.replicas, Some(3));
    assert_eq!(plan.status.updated_replicas, Some(0));
}

#[test]
fn invalid_specs_name_their_field() {
    let mut d = deploy(1, "1");
    d.spec.selector = LabelSelector::default();
    let err = reconcile(&d, &[], &[], now()).unwrap_err().to_string();
    assert!(
        err.starts_with("Deployment ns/web: spec.selector:"),
        "{err}"
    );

    let mut d = deploy(1, "1");
    d.spec.selector.match_labels = Some(labels(&[("app", "api")]));
    let err = reconcile(&d, &[], &[], now()).unwrap_err().to_string();
    assert_eq!(
        err,
        "Deployment ns/web: spec.selector: does not match spec.template.metadata.labels"
    );

    let mut d = deploy(1, "1");
    d.spec.strategy.as_mut().unwrap().rolling_update = Some(RollingUpdateDeployment {
        max_surge: Some(IntOrString::Int(0)),
        max_unavailable: Some(IntOrString::String("0%".into())),
    });
    let err = reconcile(&d, &[], &[], now()).unwrap_err().to_string();
    assert!(
        err.contains("spec.strategy.rollingUpdate.maxUnavailable"),
        "{err}"
    );

    let mut d = deploy(1, "1");
    d.spec.strategy.as_mut().unwrap().type_ = Some("BlueGreen".into());
    let err = reconcile(&d, &[], &[], now()).unwrap_err().to_string();
    assert!(err.contains("spec.strategy.type"), "{err}");

    let mut d = deploy(1, "1");
    d.spec.replicas = Some(-1);
    let err = reconcile(&d, &[], &[], now()).unwrap_err().to_string();
    assert!(err.contains("spec.replicas"), "{err}");
}

#[test]
fn admission_checks_what_apps_v1_validation_checks_naming_the_field() {
    assert_eq!(check(&deploy(3, "1")), Ok(()));
    let field = |d: &Deployment| check(d).unwrap_err().field_and_message();

    let mut d = deploy(1, "1");
    d.spec.replicas = Some(-1);
    assert_eq!(
        field(&d),
        ("spec.replicas".into(), "must be >= 0, got -1".into())
    );

    let mut d = deploy(1, "1");
    d.spec.min_ready_seconds = Some(-5);
    assert_eq!(field(&d).0, "spec.minReadySeconds");

    let mut d = deploy(1, "1");
    d.spec.revision_history_limit = Some(-1);
    assert_eq!(field(&d).0, "spec.revisionHistoryLimit");

    let mut d = deploy(1, "1");
    d.spec.min_ready_seconds = Some(600);
    let (f, m) = field(&d);
    assert_eq!(f, "spec.progressDeadlineSeconds");
    assert!(m.contains("greater than minReadySeconds"), "{m}");

    let mut d = deploy(1, "1");
    d.spec.strategy.as_mut().unwrap().type_ = Some("Recreate".into());
    assert_eq!(field(&d).0, "spec.strategy.rollingUpdate");
    d.spec.strategy.as_mut().unwrap().rolling_update = None;
    assert_eq!(check(&d), Ok(()));

    let mut d = deploy(1, "1");
    d.spec.strategy.as_mut().unwrap().rolling_update = Some(RollingUpdateDeployment {
        max_surge: Some(IntOrString::String("abc%".into())),
        max_unavailable: None,
    });
    assert_eq!(field(&d).0, "spec.strategy.rollingUpdate.maxSurge");

    let mut d = deploy(1, "1");
    d.spec.selector.match_labels = Some(labels(&[("app", "api")]));
    assert_eq!(field(&d).0, "spec.selector");
}
