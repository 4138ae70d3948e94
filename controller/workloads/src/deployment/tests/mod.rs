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

pub(super) use super::*;
pub(super) use crate::test_support::labels;

pub(super) fn now() -> Timestamp {
    "2026-02-01T10:00:00Z".parse().unwrap()
}

pub(super) fn ago(secs: i64) -> Time {
    Time(now() - SignedDuration::from_secs(secs))
}

pub(super) fn template(version: &str) -> PodTemplateSpec {
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
pub(super) fn deploy(replicas: i32, version: &str) -> Deployment {
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

pub(super) fn d_ref() -> OwnerReference {
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
pub(super) fn rs(version: &str, replicas: i32, revision: i64, age: i64) -> ReplicaSet {
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

pub(super) fn with_available(mut r: ReplicaSet, available: i32) -> ReplicaSet {
    let s = r.status.as_mut().unwrap();
    s.available_replicas = Some(available);
    s.ready_replicas = Some(available);
    r
}

/// The ReplicaSet as last sized for a Deployment of `desired` replicas
/// (surge 1).
pub(super) fn sized_for(mut r: ReplicaSet, desired: i32) -> ReplicaSet {
    let a = r.metadata.annotations.as_mut().unwrap();
    a.insert(DESIRED_REPLICAS.into(), desired.to_string());
    a.insert(MAX_REPLICAS.into(), (desired + 1).to_string());
    r
}

/// A status that has seen `replicas` pods, `updated` of them new,
/// `available` of them available.
pub(super) fn seen(replicas: i32, updated: i32, available: i32) -> DeploymentStatus {
    DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(replicas),
        updated_replicas: Some(updated),
        available_replicas: Some(available),
        ready_replicas: Some(available),
        ..Default::default()
    }
}

pub(super) fn created(plan: &Plan) -> Vec<&ReplicaSet> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Create(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// `name -> spec.replicas` of every updated ReplicaSet.
pub(super) fn scaled(plan: &Plan) -> BTreeMap<String, i32> {
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

pub(super) fn deleted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::Delete { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn cond(s: &DeploymentStatus, type_: &str) -> (String, String) {
    let c = status::condition(s, type_).unwrap_or_else(|| panic!("no {type_} in {s:?}"));
    (c.status.clone().unwrap(), c.reason.clone().unwrap())
}

/// `s` with a `Progressing` condition of `reason` last updated `secs` ago.
pub(super) fn progressing_since(s: DeploymentStatus, reason: &str, secs: i64) -> DeploymentStatus {
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

mod conditions;
mod new_replica_set;
mod scaling;
