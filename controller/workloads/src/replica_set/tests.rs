use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    ContainerStatus, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;
use crate::test_support::labels;

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> Time {
    Time(now() - SignedDuration::from_secs(secs))
}

fn rs(replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web-abc".into()),
            namespace: Some("ns".into()),
            uid: Some("rs-uid".into()),
            generation: Some(3),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&[("app", "web"), ("tier", "front")])),
                    annotations: Some(labels(&[("note", "x")])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    node_selector: Some(labels(&[("disk", "ssd")])),
                    ..Default::default()
                }),
            }),
            min_ready_seconds: None,
        },
        status: None,
    }
}

fn owner_ref() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-abc".into(),
        uid: "rs-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A Running, Ready pod of `web-abc` on node `n1`, created and Ready an
/// hour ago.
fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels(&[("app", "web"), ("tier", "front")])),
            owner_references: Some(vec![owner_ref()]),
            creation_timestamp: Some(ago(3600)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![ready_condition(true, ago(3600))]),
            ..Default::default()
        }),
    }
}

fn ready_condition(ready: bool, since: Time) -> PodCondition {
    PodCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        last_transition_time: Some(since),
        ..Default::default()
    }
}

fn not_ready(mut p: Pod) -> Pod {
    p.status.as_mut().unwrap().conditions = Some(vec![ready_condition(false, ago(10))]);
    p
}

fn deleted_names(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            PodAction::Delete { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn creations(plan: &Plan) -> Vec<&Pod> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            PodAction::Create(p) => Some(&**p),
            _ => None,
        })
        .collect()
}

#[test]
fn creates_missing_pods_from_the_template_owned_by_the_replica_set() {
    let plan = reconcile(&rs(3), &[pod("a")], now()).unwrap();
    let made = creations(&plan);
    assert_eq!(made.len(), 2);
    for p in made {
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.name, None);
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            p.metadata.labels,
            Some(labels(&[("app", "web"), ("tier", "front")]))
        );
        assert_eq!(p.metadata.annotations, Some(labels(&[("note", "x")])));
        assert_eq!(p.metadata.owner_references, Some(vec![owner_ref()]));
        assert_eq!(
            p.spec.as_ref().unwrap().node_selector,
            Some(labels(&[("disk", "ssd")]))
        );
    }
}

#[test]
fn at_most_burst_replicas_are_created_per_sync() {
    let plan = reconcile(&rs(700), &[], now()).unwrap();
    assert_eq!(creations(&plan).len(), BURST_REPLICAS);
}

#[test]
fn terminal_and_deleting_pods_are_replaced() {
    let mut failed = pod("failed");
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let mut done = pod("done");
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let mut evicted = pod("evicted");
    evicted.metadata.deletion_timestamp = Some(ago(1));
    let plan = reconcile(&rs(3), &[pod("a"), failed, done, evicted], now()).unwrap();
    assert_eq!(creations(&plan).len(), 2);
    assert_eq!(plan.status.replicas, 1);
}

#[test]
fn the_right_count_does_nothing() {
    let plan = reconcile(&rs(2), &[pod("a"), pod("b")], now()).unwrap();
    assert!(plan.actions.is_empty());
}

#[test]
fn scale_down_deletes_unassigned_then_pending_then_not_ready_first() {
    let mut unassigned = pod("unassigned");
    unassigned.spec.as_mut().unwrap().node_name = None;
    unassigned.status.as_mut().unwrap().phase = Some("Pending".into());
    let mut pending = not_ready(pod("pending"));
    pending.status.as_mut().unwrap().phase = Some("Pending".into());
    let mut unknown = pod("unknown");
    unknown.status.as_mut().unwrap().phase = Some("Unknown".into());
    let unready = not_ready(pod("unready"));
    let pods = [pod("ready"), unready, unknown, pending, unassigned];
    for (n, expected) in [
        (1, vec!["unassigned"]),
        (2, vec!["pending", "unassigned"]),
        (3, vec!["pending", "unassigned", "unknown"]),
        (4, vec!["pending", "unassigned", "unknown", "unready"]),
    ] {
        let plan = reconcile(&rs(5 - n), &pods, now()).unwrap();
        assert_eq!(deleted_names(&plan), expected, "deleting {n}");
    }
}

#[test]
fn scale_down_honours_deletion_cost_before_age() {
    let mut cheap = pod("old-cheap");
    cheap.metadata.creation_timestamp = Some(ago(100_000));
    cheap.metadata.annotations = Some(labels(&[(ranking::DELETION_COST_ANNOTATION, "-5")]));
    let mut dear = pod("new-dear");
    dear.metadata.annotations = Some(labels(&[(ranking::DELETION_COST_ANNOTATION, "100")]));
    let plan = reconcile(&rs(2), &[dear, pod("plain"), cheap], now()).unwrap();
    assert_eq!(deleted_names(&plan), vec!["old-cheap"]);
}

#[test]
fn scale_down_prefers_crowded_nodes() {
    let mut alone = pod("alone");
    alone.spec.as_mut().unwrap().node_name = Some("n2".into());
    let plan = reconcile(&rs(2), &[alone, pod("x"), pod("y")], now()).unwrap();
    assert_eq!(deleted_names(&plan), vec!["x"]);
}

#[test]
fn scale_down_prefers_recently_ready_then_restarts_then_newest() {
    // Ready 10 s ago against an hour ago: far apart on the log scale.
    let mut fresh = pod("fresh");
    fresh.status.as_mut().unwrap().conditions = Some(vec![ready_condition(true, ago(10))]);
    let plan = reconcile(&rs(1), &[pod("seasoned"), fresh], now()).unwrap();
    assert_eq!(deleted_names(&plan), vec!["fresh"]);

    let mut crashy = pod("crashy");
    crashy.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
        name: "c".into(),
        restart_count: 4,
        ..Default::default()
    }]);
    let plan = reconcile(&rs(1), &[pod("steady"), crashy], now()).unwrap();
    assert_eq!(deleted_names(&plan), vec!["crashy"]);

    let mut young = pod("young");
    young.metadata.creation_timestamp = Some(ago(5));
    let plan = reconcile(&rs(1), &[pod("elder"), young], now()).unwrap();
    assert_eq!(deleted_names(&plan), vec!["young"]);
}

#[test]
fn orphans_matching_are_adopted_and_counted() {
    let mut orphan = pod("orphan");
    orphan.metadata.owner_references = None;
    let plan = reconcile(&rs(2), &[pod("a"), orphan], now()).unwrap();
    assert_eq!(
        plan.actions,
        vec![PodAction::Adopt {
            name: "orphan".into(),
            uid: "uid-orphan".into(),
            owner_references: vec![owner_ref()],
        }]
    );
    assert_eq!(plan.status.replicas, 2);
}

#[test]
fn owned_pods_no_longer_matching_are_released_and_replaced() {
    let mut moved = pod("moved");
    moved.metadata.labels = Some(labels(&[("app", "debug")]));
    let mut other = pod("other");
    other.metadata.owner_references = Some(vec![OwnerReference {
        uid: "someone-else".into(),
        controller: Some(true),
        ..owner_ref()
    }]);
    let plan = reconcile(&rs(2), &[pod("a"), moved, other], now()).unwrap();
    assert_eq!(
        plan.actions[0],
        PodAction::Release {
            name: "moved".into(),
            uid: "uid-moved".into(),
            owner_references: vec![],
        }
    );
    assert_eq!(creations(&plan).len(), 1);
    assert_eq!(plan.actions.len(), 2);
}

#[test]
fn pods_of_other_namespaces_are_ignored() {
    let mut elsewhere = pod("elsewhere");
    elsewhere.metadata.namespace = Some("other".into());
    let plan = reconcile(&rs(1), &[elsewhere], now()).unwrap();
    assert_eq!(creations(&plan).len(), 1);
}

#[test]
fn a_replica_set_being_deleted_makes_and_deletes_nothing() {
    let mut r = rs(5);
    r.metadata.deletion_timestamp = Some(ago(1));
    let plan = reconcile(&r, &[pod("a")], now()).unwrap();
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.replicas, 1);
}

#[test]
fn status_counts_labels_readiness_and_availability_after_min_ready_seconds() {
    let mut r = rs(4);
    r.spec.min_ready_seconds = Some(30);
    let mut partial = pod("partial");
    partial.metadata.labels = Some(labels(&[("app", "web")]));
    let mut recent = pod("recent");
    recent.status.as_mut().unwrap().conditions = Some(vec![ready_condition(true, ago(20))]);
    let plan = reconcile(
        &r,
        &[pod("old"), partial, recent, not_ready(pod("unready"))],
        now(),
    )
    .unwrap();
    let s = &plan.status;
    assert_eq!(s.replicas, 4);
    assert_eq!(s.fully_labeled_replicas, Some(3));
    assert_eq!(s.ready_replicas, Some(3));
    assert_eq!(s.available_replicas, Some(2));
    assert_eq!(s.observed_generation, Some(3));
    // "recent" has been Ready 20 of the 30 s.
    assert_eq!(
        plan.requeue_after,
        Some(SignedDuration::from_secs(10) + SignedDuration::from_millis(1))
    );
}

#[test]
fn availability_boundary_is_strict() {
    let mut r = rs(1);
    r.spec.min_ready_seconds = Some(30);
    let mut p = pod("p");
    p.status.as_mut().unwrap().conditions = Some(vec![ready_condition(true, ago(30))]);
    let plan = reconcile(&r, &[p.clone()], now()).unwrap();
    assert_eq!(plan.status.available_replicas, Some(0));
    p.status.as_mut().unwrap().conditions = Some(vec![ready_condition(true, ago(31))]);
    let plan = reconcile(&r, &[p], now()).unwrap();
    assert_eq!(plan.status.available_replicas, Some(1));
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn selector_errors_name_spec_selector() {
    let mut empty = rs(1);
    empty.spec.selector = LabelSelector::default();
    let err = reconcile(&empty, &[], now()).unwrap_err().to_string();
    assert!(
        err.starts_with("ReplicaSet ns/web-abc: spec.selector:"),
        "{err}"
    );

    let mut mismatch = rs(1);
    mismatch.spec.selector.match_labels = Some(labels(&[("app", "api")]));
    let err = reconcile(&mismatch, &[], now()).unwrap_err().to_string();
    assert_eq!(
        err,
        "ReplicaSet ns/web-abc: spec.selector: does not match spec.template.metadata.labels"
    );

    let mut bad = rs(1);
    bad.spec.selector.match_expressions = Some(vec![LabelSelectorRequirement {
        key: "app".into(),
        operator: "Near".into(),
        values: None,
    }]);
    let err = reconcile(&bad, &[], now()).unwrap_err().to_string();
    assert!(
        err.starts_with("ReplicaSet ns/web-abc: spec.selector.matchExpressions[0].operator:"),
        "{err}"
    );
}

#[test]
fn admission_checks_the_spec_naming_the_field() {
    assert_eq!(check(&rs(2)), Ok(()));
    let mut neg = rs(1);
    neg.spec.replicas = Some(-2);
    assert_eq!(
        check(&neg).unwrap_err().field_and_message(),
        ("spec.replicas".into(), "must be >= 0, got -2".into())
    );
    let mut slow = rs(1);
    slow.spec.min_ready_seconds = Some(-1);
    assert_eq!(
        check(&slow).unwrap_err().field_and_message().0,
        "spec.minReadySeconds"
    );
    let mut empty = rs(1);
    empty.spec.selector = LabelSelector::default();
    assert_eq!(
        check(&empty).unwrap_err().field_and_message().0,
        "spec.selector"
    );
}
