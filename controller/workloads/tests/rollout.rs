//! Whole rollouts driven through both controllers' plans, step by step,
//! checking upstream's guarantees at every step.

mod sim;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;
use sim::{deployment, recreate, rolling, Cluster};
use sluice_workloads::deployment::reasons;

fn int(n: i32) -> IntOrString {
    IntOrString::Int(n)
}

fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

/// Roll `replicas` pods from v1 to v2 with the kubelet starting at most
/// `ready_per_step` pods per step and a second passing per step; at every
/// step at most `replicas + max_surge` pods exist and at least `replicas −
/// max_unavailable` are available (Ready for over `min_ready` seconds).
fn roll(
    replicas: i32,
    surge: IntOrString,
    unavailable: IntOrString,
    max_surge: usize,
    max_unavailable: usize,
    ready_per_step: usize,
    min_ready: i32,
) {
    let r = replicas as usize;
    let mut d = deployment(replicas, rolling(surge, unavailable), "1");
    d.spec.min_ready_seconds = Some(min_ready);
    let mut c = Cluster::new(d);
    c.settle();
    assert_eq!(c.pods_of("1"), r);
    assert_eq!(c.available_pods(), r);

    c.set_version("2");
    let check = |c: &Cluster, when: &str, step: usize| {
        assert!(
            c.total_pods() <= r + max_surge,
            "step {step} {when}: {} pods, more than {} + {max_surge}",
            c.total_pods(),
            r
        );
        assert!(
            c.available_pods() + max_unavailable >= r,
            "step {step} {when}: {} available, fewer than {r} - {max_unavailable}",
            c.available_pods()
        );
    };
    let mut done = false;
    for step in 0..200 {
        c.sync_deployment();
        check(&c, "after the Deployment's sync", step);
        c.sync_replica_sets();
        check(&c, "after the ReplicaSets' sync", step);
        c.make_ready(ready_per_step);
        c.sync_replica_sets();
        check(&c, "after pods turned Ready", step);
        c.tick(1);
        if c.pods_of("2") == r && c.total_pods() == r && c.available_pods() == r {
            // One more round for the statuses to say so.
            c.sync_replica_sets();
            c.sync_deployment();
            done = true;
            break;
        }
    }
    assert!(done, "the rollout did not finish: {:?}", c.sizes());
    assert_eq!(c.sizes().get("web:2"), Some(&replicas));
    assert_eq!(c.sizes().get("web:1"), Some(&0));
    let s = c.d.status.clone().unwrap();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.unavailable_replicas
        ),
        (Some(replicas), Some(replicas), Some(replicas), Some(0))
    );
    assert_eq!(
        c.condition("Progressing"),
        Some(("True".into(), reasons::NEW_RS_AVAILABLE.into()))
    );
    assert_eq!(
        c.condition("Available"),
        Some(("True".into(), reasons::MIN_AVAILABLE.into()))
    );
}

#[test]
fn rolling_update_with_default_fenceposts() {
    // 25% of 10: surge rounds up to 3, unavailable down to 2.
    roll(10, pct("25%"), pct("25%"), 3, 2, 1, 0);
    roll(10, pct("25%"), pct("25%"), 3, 2, 100, 0);
}

#[test]
fn rolling_update_without_surge() {
    roll(5, int(0), int(1), 0, 1, 1, 0);
    roll(4, int(0), int(2), 0, 2, 100, 0);
}

#[test]
fn rolling_update_without_unavailability() {
    roll(4, int(1), int(0), 1, 0, 1, 0);
    roll(3, pct("100%"), pct("0%"), 3, 0, 2, 0);
}

#[test]
fn rolling_update_waits_for_min_ready_seconds() {
    roll(6, int(2), int(1), 2, 1, 100, 3);
    roll(4, int(0), int(1), 0, 1, 1, 5);
}

#[test]
fn rolling_update_of_one_replica_where_both_round_to_zero() {
    // 10% of 1 rounds to 0 both ways: maxUnavailable becomes 1.
    roll(1, int(0), pct("10%"), 0, 1, 1, 0);
}

#[test]
fn recreate_removes_every_old_pod_before_making_new_ones() {
    let mut c = Cluster::new(deployment(3, recreate(), "1"));
    c.settle();
    c.set_version("2");
    let mut done = false;
    for _ in 0..50 {
        c.sync_deployment();
        c.sync_replica_sets();
        assert!(
            c.pods_of("1") == 0 || c.pods_of("2") == 0,
            "old and new pods together: {:?}",
            c.sizes()
        );
        c.make_ready(1);
        c.sync_replica_sets();
        c.tick(1);
        if c.pods_of("2") == 3 && c.available_pods() == 3 {
            done = true;
            break;
        }
    }
    assert!(done, "{:?}", c.sizes());
    c.settle();
    assert_eq!(c.sizes().get("web:2"), Some(&3));
    assert_eq!(c.sizes().get("web:1"), Some(&0));
}

#[test]
fn scaling_mid_rollout_keeps_the_proportions() {
    let mut c = Cluster::new(deployment(10, rolling(int(3), int(2)), "1"));
    c.settle();
    c.set_version("2");
    // First step: the new ReplicaSet gets the 3 surge pods and the old
    // one gives up the 2 that may be unavailable.
    c.sync_deployment();
    c.sync_replica_sets();
    assert_eq!(c.sizes().get("web:2"), Some(&3));
    assert_eq!(c.sizes().get("web:1"), Some(&8));
    // Double the Deployment: 11 replicas sized for 13 (10 + 3) grow
    // towards 23 (20 + 3) in proportion: the old 8 * 23 / 13 = 14.2 -> 14
    // (+6), the new 3 * 23 / 13 = 5.3 -> 5 (+2); the 4 left over go to
    // the largest.
    c.d.spec.replicas = Some(20);
    c.bump_generation();
    c.sync_deployment();
    assert_eq!(c.sizes().get("web:1"), Some(&18));
    assert_eq!(c.sizes().get("web:2"), Some(&5));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any whole-number fenceposts (not both 0), any kubelet pace, any
    /// `minReadySeconds`: the same guarantees at every step.
    #[test]
    fn rolling_update_keeps_its_bounds(
        replicas in 1i32..9,
        surge in 0i32..4,
        unavailable in 0i32..4,
        ready_per_step in 1usize..5,
        min_ready in 0i32..3,
    ) {
        prop_assume!(surge + unavailable > 0);
        let max_unavailable = unavailable.min(replicas) as usize;
        roll(replicas, int(surge), int(unavailable), surge as usize, max_unavailable, ready_per_step, min_ready);
    }
}
