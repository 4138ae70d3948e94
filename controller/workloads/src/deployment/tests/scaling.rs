//! Rolling steps, Recreate, pause and resizing.

use std::collections::BTreeMap;

use super::*;

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
