//! Backoff, provisioning timeout and scale-down delays on an injected clock.

use serde_json::json;

use super::*;
use crate::backoff::Backoff;
use crate::scale_up::{PodVerdict, REASON_BACKOFF};
use crate::state::ScaleUpRequest;
use crate::TargetReason;

#[test]
fn backoff_doubles_from_five_to_thirty_minutes_and_resets_after_three_hours() {
    // spec: C3 — on failure the pool backs off and the decision is retried.
    let mut b = Backoff::after_failure(None, at(0), "QUOTA_EXCEEDED", "quota");
    assert_eq!(b.until, at(5 * MIN));
    assert!(b.active(at(5 * MIN - 1)) && !b.active(at(5 * MIN)));
    // A failure during the backoff pushes it out without doubling.
    let during = Backoff::after_failure(Some(&b), at(2 * MIN), "QUOTA_EXCEEDED", "quota");
    assert_eq!(during.until, at(7 * MIN));
    let mut t = 5 * MIN;
    let mut last = 0;
    for want in [10, 20, 30, 30] {
        b = Backoff::after_failure(Some(&b), at(t), "QUOTA_EXCEEDED", "quota");
        assert_eq!(b.until, at(t + want * MIN), "after {t}s");
        last = t;
        t += want * MIN;
    }
    assert!(!b.expired(at(last + 3 * 3600 - 1)));
    assert!(b.expired(at(last + 3 * 3600)));
    let fresh = Backoff::after_failure(Some(&b), at(last + 3 * 3600), "OTHER", "x");
    assert_eq!(fresh.duration, SignedDuration::from_secs(5 * MIN));
    assert_eq!(fresh.message_id, "scale.up.error.other");
    assert_eq!(b.message_id, "scale.up.error.quota.exceeded");
}

fn in_flight(w: &mut World) -> State {
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.extras.insert(
        "p".into(),
        PoolExtras {
            target_sizes: [("a".to_owned(), 3)].into(),
            ..Default::default()
        },
    );
    w.nodes.push(node("p-1", "p", "a", "4", "16Gi"));
    w.pods.push(running("fill", "fill", "p-1", "4", "1Gi"));
    State {
        scale_ups: vec![ScaleUpRequest {
            pool: "p".into(),
            zone: "a".into(),
            from: 1,
            to: 3,
            requested_at: t0(),
        }],
        last_scale_up: Some(t0()),
        ..Default::default()
    }
}

#[test]
fn nodes_not_registered_after_fifteen_minutes_are_given_up() {
    // spec: C3 — a node not registered within 15 minutes is given up and
    // its scale-up rolled back; the pool backs off, so another is tried.
    let mut w = World::default();
    let state = in_flight(&mut w);
    let d = w.decide(&state, at(15 * MIN - 1));
    assert!(d.targets.is_empty());
    assert_eq!(d.state.scale_ups.len(), 1);
    let d = w.decide(&state, at(15 * MIN));
    assert_eq!(d.targets.len(), 1);
    assert_eq!((d.targets[0].from, d.targets[0].to), (3, 1));
    assert_eq!(d.targets[0].reason, TargetReason::Rollback);
    assert!(d.state.scale_ups.is_empty());
    let e = d
        .events
        .iter()
        .find(|e| e.reason == "ScaleUpTimedOut")
        .expect("event");
    assert_eq!(
        e.message,
        "Nodes added to group p/a failed to register within 15m0s"
    );
    assert_eq!(d.state.backoff["p"].error_code, "timeout");
    // The status shows the backoff with its error.
    let g = &d.status.node_groups[0];
    assert_eq!(g.scale_up.status, "Backoff");
    assert_eq!(
        g.scale_up.backoff_info.as_ref().unwrap().error_code,
        "timeout"
    );
}

#[test]
fn a_backed_off_pool_is_skipped_until_its_backoff_ends() {
    // spec: C3 — pending pods during the backoff name it; after it the
    // pool grows again.
    let mut w = World::default();
    let mut state = in_flight(&mut w);
    state.scale_ups.clear();
    w.extras.clear();
    state.backoff.insert(
        "p".into(),
        Backoff::after_failure(None, t0(), "QUOTA_EXCEEDED", "Quota 'CPUS' exceeded"),
    );
    w.pods.push(pending("w", "w", "4", "1Gi"));
    let d = w.decide(&state, at(4 * MIN));
    assert!(d.targets.is_empty());
    assert_eq!(
        d.pods["default/w"].verdict,
        PodVerdict::NotTriggered {
            reasons: format!("1 {REASON_BACKOFF}")
        }
    );
    let d = w.decide(&state, at(5 * MIN));
    assert_eq!(World::targets(&d), sizes(&[("p/a", 2)]));
}

#[test]
fn a_quota_failure_reported_by_the_pool_rolls_back_and_backs_off() {
    // spec: C3 — quota exhaustion: back off, then retry.
    let mut w = World::default();
    let state = in_flight(&mut w);
    w.pools[0]["status"] = json!({"createBackoff": {
        "failures": 1, "lastFailureTime": "2026-01-01T00:01:00Z",
        "quotaExceeded": true, "message": "Quota 'CPUS' exceeded. Limit: 57.0 in region us-central1."}});
    let d = w.decide(&state, at(2 * MIN));
    assert_eq!(d.targets[0].to, 1);
    let b = &d.state.backoff["p"];
    assert_eq!(b.error_code, "QUOTA_EXCEEDED");
    assert!(d.events.iter().any(|e| e.reason == "FailedToScaleUpGroup"));
    // The same failure is not counted twice.
    let again = w.decide(&d.state, at(3 * MIN));
    assert_eq!(again.state.backoff["p"], *b);
}

#[test]
fn no_scale_down_within_ten_minutes_of_a_scale_up_or_three_of_a_failure() {
    // spec: C6 — upstream's delays after add and after a failed removal.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("busy", "p", "a", "4", "16Gi"));
    w.pods.push(running("b", "b", "busy", "3", "1Gi"));
    w.nodes.push(node("idle", "p", "a", "4", "16Gi"));
    let mut state = State {
        last_scale_up: Some(t0()),
        unneeded_since: [("idle".to_owned(), at(-10 * MIN))].into(),
        ..Default::default()
    };
    let d = w.decide(&state, at(10 * MIN - 1));
    assert!(d.removals.is_empty());
    assert_eq!(
        d.nodes["idle"].kept,
        Some(crate::Unremovable::ScaleDownInCooldown)
    );
    // The unneeded time kept running meanwhile.
    assert_eq!(d.state.unneeded_since["idle"], at(-10 * MIN));
    let d = w.decide(&state, at(10 * MIN));
    assert_eq!(d.removals.len(), 1);
    state.removal_failed("idle", at(10 * MIN));
    assert!(!state.unneeded_since.contains_key("idle"));
    state.unneeded_since.insert("idle".into(), at(-10 * MIN));
    let d = w.decide(&state, at(13 * MIN - 1));
    assert!(d.removals.is_empty());
    let d = w.decide(&state, at(13 * MIN));
    assert_eq!(d.removals.len(), 1);
}

#[test]
fn the_status_carries_transition_times_while_values_hold() {
    // The status ConfigMap: lastTransitionTime kept while the value holds.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("n", "p", "a", "4", "16Gi"));
    w.pods.push(running("b", "b", "n", "3", "1Gi"));
    let d1 = w.decide(&State::default(), t0());
    let d2 = w.decide(&d1.state, at(10));
    let cw = &d2.status.cluster_wide;
    assert_eq!(cw.health.status, "Healthy");
    assert_eq!(
        cw.health.last_transition_time,
        crate::snapshot::go_time(t0())
    );
    assert_eq!(cw.health.last_probe_time, crate::snapshot::go_time(at(10)));
    assert_eq!(
        cw.health.last_transition_time,
        "2026-01-01 00:00:00 +0000 UTC"
    );
    let (data, ann) = d2.status.config_map();
    let yaml = &data["status"];
    assert!(yaml.contains("autoscalerStatus: Running"), "{yaml}");
    assert!(yaml.contains("clusterWide:"), "{yaml}");
    assert!(yaml.contains("nodeGroups:"), "{yaml}");
    assert!(yaml.contains("name: p/a"), "{yaml}");
    assert_eq!(
        ann["cluster-autoscaler.kubernetes.io/last-updated"],
        d2.status.time
    );
}

#[test]
fn the_status_is_rewritten_only_when_more_than_the_probe_times_change() {
    // The ConfigMap is written when its content changes, not for the
    // times upstream refreshes every loop.
    let mut w = World::default();
    w.pools.push(pool("p", &["a"], "4", "16Gi", 0, 10));
    w.nodes.push(node("n", "p", "a", "4", "16Gi"));
    w.pods.push(running("b", "b", "n", "3", "1Gi"));
    let d1 = w.decide(&State::default(), t0());
    let d2 = w.decide(&d1.state, at(10));
    assert_ne!(d1.status.time, d2.status.time);
    let before = d1.status.to_yaml();
    assert!(!crate::status::changed(Some(&before), &d2.status));
    assert!(crate::status::changed(None, &d2.status));
    assert!(crate::status::changed(Some("{not: [yaml"), &d2.status));
    // A second node registers: the counts change, so it is written.
    w.nodes.push(node("m", "p", "a", "4", "16Gi"));
    let d3 = w.decide(&d2.state, at(20));
    assert!(crate::status::changed(Some(&before), &d3.status));
}
