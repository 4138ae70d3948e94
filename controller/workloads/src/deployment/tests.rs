use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DeploymentCondition, DeploymentSpec, DeploymentStatus, DeploymentStrategy, ReplicaSetSpec,
    ReplicaSetStatus, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::test_support::labels;

fn now() -> Timestamp {
    "2026-02-01T10:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> Time {
    Time(now() - SignedDuration::from_secs(secs))
}

fn template(version: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: Some(format!("web:{version}")),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// `ns/web`, image `web:<version>`, rolling 1 surge / 1 unavailable, a
/// 600 s progress deadline, history of 2.
fn deploy(replicas: i32, version: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("d-uid".into()),
            generation: Some(2),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: template(version),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(1)),
                }),
            }),
            progress_deadline_seconds: Some(600),
            revision_history_limit: Some(2),
            ..Default::default()
        },
        status: None,
    }
}

fn d_ref() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".into(),
        uid: "d-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A ReplicaSet of `web` for `version` at `replicas`, all of them
/// available, of revision `revision`, created `age` seconds ago.
fn rs(version: &str, replicas: i32, revision: i64, age: i64) -> ReplicaSet {
    let hash = format!("h{version}");
    let mut t = template(version);
    let tl = t.metadata.as_mut().unwrap().labels.as_mut().unwrap();
    tl.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("web-{hash}")),
            namespace: Some("ns".into()),
            uid: Some(format!("rs-{version}")),
            labels: Some(tl.clone()),
            annotations: Some(labels(&[
                (REVISION, &revision.to_string()),
                (DESIRED_REPLICAS, "3"),
                (MAX_REPLICAS, "4"),
            ])),
            owner_references: Some(vec![d_ref()]),
            creation_timestamp: Some(ago(age)),
            generation: Some(1),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web"), (POD_TEMPLATE_HASH_LABEL, &hash)])),
                ..Default::default()
            },
            template: Some(t),
            min_ready_seconds: None,
        },
        status: Some(ReplicaSetStatus {
            replicas,
            available_replicas: Some(replicas),
            ready_replicas: Some(replicas),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

fn with_available(mut r: ReplicaSet, available: i32) -> ReplicaSet {
    let s = r.status.as_mut().unwrap();
    s.available_replicas = Some(available);
    s.ready_replicas = Some(available);
    r
}

/// The ReplicaSet as last sized for a Deployment of `desired` replicas
/// (surge 1).
fn sized_for(mut r: ReplicaSet, desired: i32) -> ReplicaSet {
    let a = r.metadata.annotations.as_mut().unwrap();
    a.insert(DESIRED_REPLICAS.into(), desired.to_string());
    a.insert(MAX_REPLICAS.into(), (desired + 1).to_string());
    r
}

/// A status that has seen `replicas` pods, `updated` of them new,
/// `available` of them available.
fn seen(replicas: i32, updated: i32, available: i32) -> DeploymentStatus {
    DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(replicas),
        updated_replicas: Some(updated),
        available_replicas: Some(available),
        ready_replicas: Some(available),
        ..Default::default()
    }
}

fn created(plan: &Plan) -> Vec<&ReplicaSet> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Create(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// `name -> spec.replicas` of every updated ReplicaSet.
fn scaled(plan: &Plan) -> BTreeMap<String, i32> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Update(r) => {
                Some((r.metadata.name.clone().unwrap(), r.spec.replicas.unwrap()))
            }
            _ => None,
        })
        .collect()
}

fn deleted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Delete { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn cond(s: &DeploymentStatus, type_: &str) -> (String, String) {
    let c = status::condition(s, type_).unwrap_or_else(|| panic!("no {type_} in {s:?}"));
    (c.status.clone().unwrap(), c.reason.clone().unwrap())
}

/// `s` with a `Progressing` condition of `reason` last updated `secs` ago.
fn progressing_since(s: DeploymentStatus, reason: &str, secs: i64) -> DeploymentStatus {
    DeploymentStatus {
        conditions: Some(vec![DeploymentCondition {
            type_: Some(PROGRESSING.into()),
            status: Some("True".into()),
            reason: Some(reason.into()),
            message: Some("m".into()),
            last_update_time: Some(ago(secs)),
            last_transition_time: Some(ago(secs)),
        }]),
        ..s
    }
}

#[test]
fn a_new_template_creates_its_replica_set_within_the_surge() {
    let mut d = deploy(3, "2");
    d.status = Some(seen(3, 3, 3));
    d.metadata.annotations = Some(labels(&[("kubernetes.io/change-cause", "v")]));
    let plan = reconcile(&d, &[rs("1", 3, 1, 100)], &[], now()).unwrap();
    let made = created(&plan);
    assert_eq!(made.len(), 1);
    let new = made[0];
    let hash = pod_template_hash(&template("2"), None);
    assert_eq!(new.metadata.name, Some(format!("web-{hash}")));
    let with_hash = labels(&[("app", "web"), (POD_TEMPLATE_HASH_LABEL, &hash)]);
    assert_eq!(new.metadata.labels.as_ref(), Some(&with_hash));
    assert_eq!(new.spec.selector.match_labels.as_ref(), Some(&with_hash));
    let tmeta = new
        .spec
        .template
        .as_ref()
        .unwrap()
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(tmeta.labels.as_ref(), Some(&with_hash));
    assert_eq!(new.metadata.owner_references, Some(vec![d_ref()]));
    assert_eq!(new.metadata.creation_timestamp, None);
    // 3 old + 1 surge: the new one starts at 1.
    assert_eq!(new.spec.replicas, Some(1));
    let a = new.metadata.annotations.as_ref().unwrap();
    assert_eq!(a.get(REVISION).map(String::as_str), Some("2"));
    assert_eq!(a.get(DESIRED_REPLICAS).map(String::as_str), Some("3"));
    assert_eq!(a.get(MAX_REPLICAS).map(String::as_str), Some("4"));
    assert_eq!(
        a.get("kubernetes.io/change-cause").map(String::as_str),
        Some("v")
    );
    assert_eq!(plan.revision.as_deref(), Some("2"));
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("True".into(), reasons::NEW_RS_CREATED.into())
    );
    // Surge spent, nothing unavailable yet: old scaled by maxUnavailable.
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h1".into(), 2)]));
}

#[test]
fn a_taken_name_raises_the_collision_count_instead() {
    let d = deploy(3, "2");
    let hash = pod_template_hash(&template("2"), None);
    let mut squatter = rs("9", 0, 0, 50);
    squatter.metadata.name = Some(format!("web-{hash}"));
    squatter.metadata.owner_references = None;
    squatter.metadata.labels = Some(labels(&[("app", "other")]));
    let plan = reconcile(&d, &[rs("1", 3, 1, 100), squatter], &[], now()).unwrap();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.status.collision_count, Some(1));
    assert_eq!(plan.requeue_after, Some(SignedDuration::ZERO));
    assert_ne!(pod_template_hash(&template("2"), Some(1)), hash);
}

#[test]
fn the_existing_new_replica_set_gets_the_next_revision_and_min_ready_seconds() {
    let mut d = deploy(3, "1");
    d.status = Some(seen(3, 3, 3));
    d.spec.min_ready_seconds = Some(5);
    // Rolled back to v1, whose ReplicaSet had revision 1; v2 had 2.
    let plan = reconcile(&d, &[rs("1", 0, 1, 100), rs("2", 3, 2, 50)], &[], now()).unwrap();
    let back = plan
        .actions
        .iter()
        .find_map(|a| match a {
            ReplicaSetAction::Update(r) if r.metadata.name.as_deref() == Some("web-h1") => Some(r),
            _ => None,
        })
        .unwrap();
    let a = back.metadata.annotations.as_ref().unwrap();
    assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
    assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
    assert_eq!(back.spec.min_ready_seconds, Some(5));
    assert_eq!(plan.revision.as_deref(), Some("3"));
    assert!(created(&plan).is_empty());
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("True".into(), reasons::FOUND_NEW_RS.into())
    );
}

#[test]
fn orphans_are_adopted_and_strays_released() {
    let d = deploy(3, "1");
    let mut orphan = rs("1", 3, 1, 100);
    orphan.metadata.owner_references = None;
    let mut stray = rs("0", 0, 0, 200);
    stray.metadata.labels = Some(labels(&[("app", "old")]));
    let mut other = rs("7", 1, 0, 300);
    other.metadata.owner_references = Some(vec![OwnerReference {
        uid: "someone".into(),
        ..d_ref()
    }]);
    let plan = reconcile(&d, &[orphan, stray, other], &[], now()).unwrap();
    let updates: BTreeMap<String, Option<Vec<OwnerReference>>> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Update(r) => Some((
                r.metadata.name.clone().unwrap(),
                r.metadata.owner_references.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        BTreeMap::from([
            ("web-h0".into(), Some(vec![])),
            ("web-h1".into(), Some(vec![d_ref()])),
        ])
    );
    assert!(created(&plan).is_empty());
}

#[test]
fn a_paused_deployment_does_not_roll_out_but_still_scales() {
    let mut d = deploy(5, "2");
    d.spec.paused = Some(true);
    let plan = reconcile(&d, &[rs("1", 3, 1, 100)], &[], now()).unwrap();
    assert!(created(&plan).is_empty());
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h1".into(), 5)]));
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("Unknown".into(), reasons::PAUSED.into())
    );

    d.spec.paused = None;
    d.status = Some(plan.status.clone());
    let resized = plan.actions.into_iter().find_map(|a| match a {
        ReplicaSetAction::Update(r) => Some(*r),
        _ => None,
    });
    let plan = reconcile(&d, &[resized.unwrap()], &[], now()).unwrap();
    assert_eq!(created(&plan).len(), 1);
    // Resumed, then the creation reports itself.
    assert_eq!(
        cond(&plan.status, PROGRESSING),
        ("True".into(), reasons::NEW_RS_CREATED.into())
    );
}

#[test]
fn unavailable_old_replicas_go_first_and_cost_no_availability() {
    let d = deploy(4, "2");
    // Both old ones are 4 wide together; the older has 2 not available.
    let older = sized_for(with_available(rs("0", 2, 1, 300), 0), 4);
    let old = sized_for(rs("1", 2, 2, 200), 4);
    let new = sized_for(with_available(rs("2", 1, 3, 10), 0), 4);
    let plan = reconcile(&d, &[older, old, new], &[], now()).unwrap();
    // 5 pods, at least 3 to stay, the new one's 1 not available: 1 may go,
    // and it is one of the older ReplicaSet's unavailable ones.
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h0".into(), 1)]));
}

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

fn recreating(replicas: i32, version: &str) -> Deployment {
    let mut d = deploy(replicas, version);
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
    d
}

/// A pod of the ReplicaSet of `version`, in `phase`, being deleted or not.
fn old_pod(version: &str, phase: &str, deleting: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-h{version}-x")),
            namespace: Some("ns".into()),
            labels: Some(labels(&[("app", "web")])),
            owner_references: Some(vec![OwnerReference {
                kind: "ReplicaSet".into(),
                name: format!("web-h{version}"),
                uid: format!("rs-{version}"),
                ..d_ref()
            }]),
            deletion_timestamp: deleting.then(|| ago(1)),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
    }
}

#[test]
fn recreate_scales_old_to_zero_first() {
    let d = recreating(3, "2");
    let plan = reconcile(&d, &[rs("1", 3, 1, 100)], &[], now()).unwrap();
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h1".into(), 0)]));
    assert!(created(&plan).is_empty());
}

#[test]
fn recreate_waits_for_old_pods_to_be_gone_then_makes_the_new_one_whole() {
    let d = recreating(3, "2");
    let mut emptied = rs("1", 0, 1, 100);
    emptied.status.as_mut().unwrap().replicas = 0;
    let rss = [emptied];
    for still_there in [
        old_pod("1", "Running", true),
        old_pod("1", "Unknown", false),
        old_pod("1", "Pending", false),
    ] {
        let plan = reconcile(&d, &rss, &[still_there], now()).unwrap();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    }
    // A pod of the selector controlled by another owner does not hold it.
    let mut foreign = old_pod("1", "Running", false);
    foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "elsewhere".into();
    for gone in [
        old_pod("1", "Failed", false),
        old_pod("1", "Succeeded", true),
        foreign,
    ] {
        let plan = reconcile(&d, &rss, &[gone], now()).unwrap();
        let made = created(&plan);
        assert_eq!(made.len(), 1);
        assert_eq!(made[0].spec.replicas, Some(3));
    }

    // Old ReplicaSets still reporting pods hold it too.
    let mut reporting = rs("1", 0, 1, 100);
    reporting.status.as_mut().unwrap().replicas = 1;
    let plan = reconcile(&d, &[reporting], &[], now()).unwrap();
    assert!(created(&plan).is_empty());
}

#[test]
fn resizing_mid_rollout_shares_the_change_in_proportion() {
    let d = deploy(5, "2");
    // Sized for 10 (+1 surge): the old one had 6, the new one 4.
    let old = sized_for(rs("1", 6, 1, 100), 10);
    let new = sized_for(rs("2", 4, 2, 50), 10);
    let plan = reconcile(&d, &[old, new], &[], now()).unwrap();
    // Towards 6 (5 + 1): old 6 * 6 / 11 = 3.3 -> 3, new takes the last 1
    // of the 4 to remove (its own share, 2, is more than is left).
    assert_eq!(
        scaled(&plan),
        BTreeMap::from([("web-h1".into(), 3), ("web-h2".into(), 3)])
    );
    let a = |name: &str| {
        plan.actions.iter().find_map(|x| match x {
            ReplicaSetAction::Update(r) if r.metadata.name.as_deref() == Some(name) => {
                r.metadata.annotations.clone()
            }
            _ => None,
        })
    };
    let annotations = a("web-h1").unwrap();
    assert_eq!(
        annotations.get(DESIRED_REPLICAS).map(String::as_str),
        Some("5")
    );
    assert_eq!(annotations.get(MAX_REPLICAS).map(String::as_str), Some("6"));
}

#[test]
fn a_saturated_new_replica_set_retires_the_old_ones_on_resize() {
    let d = deploy(5, "2");
    let old = rs("1", 2, 1, 100);
    let new = sized_for(rs("2", 5, 2, 50), 5);
    let plan = reconcile(&d, &[old, new], &[], now()).unwrap();
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h1".into(), 0)]));
}

#[test]
fn a_lone_replica_set_takes_a_resize_whole() {
    let d = deploy(7, "1");
    let plan = reconcile(&d, &[rs("1", 3, 1, 100), rs("0", 0, 0, 200)], &[], now()).unwrap();
    assert_eq!(scaled(&plan), BTreeMap::from([("web-h1".into(), 7)]));
}
