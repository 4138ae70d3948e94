//! Finding, naming, annotating and claiming ReplicaSets.

use std::collections::BTreeMap;

use super::*;

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
