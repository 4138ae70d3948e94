use super::*;

const S: Duration = Duration::from_secs(1);

fn node(drain: Option<EvictionReason>, unschedulable: bool, ours: bool) -> NodeFacts {
    NodeFacts {
        drain,
        unschedulable,
        cordoned_by_agent: ours,
        cordoned_at: None,
        pool: PoolKind::Standard,
    }
}

fn pod(name: &str, grace_s: u64) -> PodFacts {
    PodFacts {
        key: format!("default/{name}"),
        uid: Some(format!("uid-{name}")),
        grace: Duration::from_secs(grace_s),
        safe_to_evict_false: false,
        started: None,
        deleting: false,
        evict: None,
        daemon_set: false,
    }
}

fn evict(name: &str, grace_s: u64) -> Request {
    Request::Evict {
        key: format!("default/{name}"),
        uid: Some(format!("uid-{name}")),
        grace: Duration::from_secs(grace_s),
    }
}

fn delete(name: &str, grace_s: u64) -> Request {
    Request::Delete {
        key: format!("default/{name}"),
        uid: Some(format!("uid-{name}")),
        grace: Duration::from_secs(grace_s),
    }
}

/// A drain of `reason` on a node already cordoned by the agent, its first
/// evictions sent: (drains, t0).
fn draining(reason: EvictionReason, pods: &[PodFacts]) -> (ApiDrains, Instant, Vec<Request>) {
    let t0 = Instant::now();
    let mut d = ApiDrains::default();
    let out = d.plan(&node(Some(reason), true, true), pods, t0);
    (d, t0, out)
}

// spec: U1, U2 — cordon first; no pod is evicted before the cordon is in
// the API (a replacement would land here again).
#[test]
fn a_drain_cordons_first_and_evicts_once_the_cordon_shows() {
    let t0 = Instant::now();
    let mut d = ApiDrains::default();
    let pods = [pod("a", 30), pod("b", 30)];
    let reason = Some(EvictionReason::UserDrain);
    assert_eq!(
        d.plan(&node(reason, false, false), &pods, t0),
        vec![Request::Cordon]
    );
    // In flight: not asked twice; answered: not again before the watch
    // had the time to show it.
    assert!(d
        .plan(&node(reason, false, false), &pods, t0 + S)
        .is_empty());
    d.answer(&Request::Cordon, Answer::Done, t0 + S);
    assert!(d
        .plan(&node(reason, false, false), &pods, t0 + 2 * S)
        .is_empty());
    assert_eq!(
        d.plan(&node(reason, false, false), &pods, t0 + S + RESEND_AFTER),
        vec![Request::Cordon],
        "a cordon the watch never showed is asked again"
    );
    d.answer(&Request::Cordon, Answer::Done, t0 + 7 * S);
    let out = d.plan(&node(reason, true, true), &pods, t0 + 8 * S);
    assert_eq!(out, vec![evict("a", 30), evict("b", 30)]);
    // Sent once.
    assert!(d
        .plan(&node(reason, true, true), &pods, t0 + 9 * S)
        .is_empty());
}

// spec: E1 — the grace is min(the pod's, the reason's cap): 1 h for an
// upgrade, 10 min for a scale-down, the pod's own for a user's drain.
#[test]
fn the_grace_sent_is_capped_by_the_reason() {
    let pods = [pod("long", 7_200), pod("short", 5)];
    let (_, _, out) = draining(EvictionReason::NodeUpgrade, &pods);
    assert_eq!(out, vec![evict("long", 3_600), evict("short", 5)]);
    let (_, _, out) = draining(EvictionReason::ScaleDown, &pods);
    assert_eq!(out, vec![evict("long", 600), evict("short", 5)]);
    let (_, _, out) = draining(EvictionReason::UserDrain, &pods);
    assert_eq!(out, vec![evict("long", 7_200), evict("short", 5)]);
}

// A node the user cordoned stays cordoned after the drain: only the
// agent's own cordon is undone.
#[test]
fn only_the_agents_own_cordon_is_undone() {
    let t0 = Instant::now();
    let mut d = ApiDrains::default();
    let pods = [pod("a", 30)];
    let out = d.plan(
        &node(Some(EvictionReason::UserDrain), true, false),
        &pods,
        t0,
    );
    assert_eq!(out, vec![evict("a", 30)], "no cordon asked: it is cordoned");
    assert!(d.plan(&node(None, true, false), &pods, t0 + S).is_empty());

    let mut d = ApiDrains::default();
    d.plan(
        &node(Some(EvictionReason::UserDrain), true, true),
        &pods,
        t0,
    );
    assert_eq!(
        d.plan(&node(None, true, true), &pods, t0 + S),
        vec![Request::Uncordon]
    );
    // A failed uncordon is retried after RETRY_FIRST, doubling.
    d.answer(&Request::Uncordon, Answer::Failed("503".into()), t0 + S);
    assert!(d
        .plan(&node(None, true, true), &pods, t0 + S + S / 2)
        .is_empty());
    assert_eq!(
        d.plan(&node(None, true, true), &pods, t0 + S + RETRY_FIRST),
        vec![Request::Uncordon]
    );
    d.answer(&Request::Uncordon, Answer::Failed("503".into()), t0 + 2 * S);
    assert!(d
        .plan(&node(None, true, true), &pods, t0 + 2 * S + RETRY_FIRST)
        .is_empty());
    assert_eq!(
        d.plan(&node(None, true, true), &pods, t0 + 2 * S + 2 * RETRY_FIRST),
        vec![Request::Uncordon]
    );
    d.answer(&Request::Uncordon, Answer::Done, t0 + 5 * S);
    assert!(d
        .plan(&node(None, false, false), &pods, t0 + 6 * S)
        .is_empty());
}

// spec: E6 — a refusing budget (429) is retried every 5 s, as kubectl
// drain does; a user's drain retries for as long as it takes.
#[test]
fn a_refusal_is_retried_with_backoff() {
    let pods = [pod("a", 30)];
    let n = node(Some(EvictionReason::UserDrain), true, true);
    let (mut d, t0, out) = draining(EvictionReason::UserDrain, &pods);
    assert_eq!(out, vec![evict("a", 30)]);
    let mut t = t0;
    for (i, wait) in [5u64, 5, 5, 5, 5, 5].into_iter().enumerate() {
        d.answer(&evict("a", 30), Answer::Refused, t);
        assert!(
            d.plan(&n, &pods, t + Duration::from_secs(wait - 1))
                .is_empty(),
            "retry {i}"
        );
        t += Duration::from_secs(wait);
        assert_eq!(d.plan(&n, &pods, t), vec![evict("a", 30)], "retry {i}");
    }
    // Hours later, still asking.
    for _ in 0..100 {
        d.answer(&evict("a", 30), Answer::Refused, t);
        t += 5 * S;
        assert_eq!(d.plan(&n, &pods, t), vec![evict("a", 30)]);
    }
    let p = d.progress(t).expect("a drain");
    assert_eq!(p.blocked, vec![("default/a".to_string(), 106)]);
    assert!(!p.finished);
}

// spec: C5 — a scale-down does not break a budget: after 10 min of
// refusals it gives up and the pod runs on.
#[test]
fn a_scale_down_gives_up_after_ten_minutes_of_refusals() {
    let pods = [pod("a", 30)];
    let n = node(Some(EvictionReason::ScaleDown), true, true);
    let (mut d, t0, _) = draining(EvictionReason::ScaleDown, &pods);
    let mut t = t0;
    loop {
        d.answer(&evict("a", 30), Answer::Refused, t);
        t += 60 * S;
        let out = d.plan(&n, &pods, t);
        if out.is_empty() {
            break;
        }
        assert_eq!(out, vec![evict("a", 30)]);
        assert!(t < t0 + 15 * 60 * S, "still asking at {:?}", t - t0);
    }
    assert!(t >= t0 + 10 * 60 * S, "gave up early: {:?}", t - t0);
    let p = d.progress(t).expect("a drain");
    assert!(p.finished, "{p:?}");
    assert!(matches!(
        p.done.as_slice(),
        [(k, EvictionOutcome::Refused { attempts })] if k == "default/a" && *attempts > 5
    ));
    assert_eq!(p.pods[0].state, EvictionState::RefusedByPdbGaveUp);
    assert!(
        d.plan(&n, &pods, t + 3_600 * S).is_empty(),
        "given up for good"
    );
}

// spec: U1, E1 — an upgrade honours budgets for 1 h, then deletes the pod
// (with the capped grace) past them.
#[test]
fn an_upgrade_deletes_past_a_budget_after_an_hour() {
    let pods = [pod("a", 30)];
    let n = node(Some(EvictionReason::NodeUpgrade), true, true);
    let (mut d, t0, _) = draining(EvictionReason::NodeUpgrade, &pods);
    let mut t = t0;
    let last = loop {
        d.answer(&evict("a", 30), Answer::Refused, t);
        t += 60 * S;
        let out = d.plan(&n, &pods, t);
        if out != vec![evict("a", 30)] {
            break out;
        }
    };
    assert_eq!(last, vec![delete("a", 30)]);
    assert!(t >= t0 + 3_600 * S && t <= t0 + 3_661 * S, "{:?}", t - t0);
}

// spec: B5 — blue pool deletion deletes the pods, budgets not asked,
// grace capped at 60 min.
#[test]
fn blue_pool_deletion_deletes_without_asking_budgets() {
    let (_, _, out) = draining(
        EvictionReason::BluePoolDeletion,
        &[pod("a", 7_200), pod("b", 10)],
    );
    assert_eq!(out, vec![delete("a", 3_600), delete("b", 10)]);
}

// An accepted eviction ends when the pod is gone; the outcome is the pod
// runtime's, a 404 ends it at once.
#[test]
fn evictions_end_when_their_pods_are_gone() {
    let pods = [pod("a", 30), pod("b", 30)];
    let n = node(Some(EvictionReason::UserDrain), true, true);
    let (mut d, t0, _) = draining(EvictionReason::UserDrain, &pods);
    d.answer(&evict("a", 30), Answer::Done, t0);
    d.answer(&evict("b", 30), Answer::Gone, t0);
    let p = d.progress(t0).expect("a drain");
    assert_eq!(p.terminating, vec!["default/a".to_string()]);
    // 404: gone without an outcome seen here.
    assert!(p.done.is_empty(), "{p:?}");
    assert!(p
        .pods
        .iter()
        .any(|r| r.key == "default/b" && r.state == EvictionState::Deleted));
    let mut deleting = pods[0].clone();
    deleting.deleting = true;
    assert!(d.plan(&n, &[deleting], t0 + S).is_empty());
    d.stopped("default/a", EvictionOutcome::Killed { after: 30 * S });
    assert!(d.plan(&n, &[], t0 + 31 * S).is_empty());
    let p = d.progress(t0 + 32 * S).expect("a drain");
    assert!(p.finished, "{p:?}");
    let states: Vec<_> = p.pods.iter().map(|r| (r.key.as_str(), r.state)).collect();
    assert_eq!(
        states,
        vec![
            ("default/a", EvictionState::KilledAfterGrace),
            // Gone before this agent saw it stop: deleted, no outcome.
            ("default/b", EvictionState::Deleted)
        ]
    );
}

// spec: E2, E5, A3 — what `safe-to-evict: "false"` buys per reason and
// pool; DaemonSet pods stay, as with `kubectl drain --ignore-daemonsets`.
#[test]
fn protected_and_daemon_set_pods_are_left() {
    let mut keep = pod("keep", 30);
    keep.safe_to_evict_false = true;
    let mut ds = pod("ds", 30);
    ds.daemon_set = true;
    let pods = [keep.clone(), ds, pod("a", 30)];
    // E5: Standard, scale-down: never.
    let (d, t0, out) = draining(EvictionReason::ScaleDown, &pods);
    assert_eq!(out, vec![evict("a", 30)]);
    let p = d.progress(t0).expect("a drain");
    assert_eq!(p.protected, vec![("default/keep".to_string(), None)]);
    // E2: Autopilot, upgrade: 7 days after the pod started.
    let t0 = Instant::now();
    keep.started = Some(t0);
    let mut n = node(Some(EvictionReason::NodeUpgrade), true, true);
    n.pool = PoolKind::Autopilot;
    let mut d = ApiDrains::default();
    assert!(d.plan(&n, &[keep.clone()], t0 + S).is_empty());
    let until = d.progress(t0 + S).expect("a drain").protected[0].1;
    assert_eq!(until, Some(t0 + EXTENDED_RUN_FOR_TEST));
    assert!(d
        .plan(&n, &[keep.clone()], t0 + EXTENDED_RUN_FOR_TEST - S)
        .is_empty());
    assert_eq!(
        d.plan(&n, &[keep], t0 + EXTENDED_RUN_FOR_TEST),
        vec![evict("keep", 30)]
    );
    // E4: a user's drain is not held off.
    let mut keep = pod("keep", 30);
    keep.safe_to_evict_false = true;
    let (_, _, out) = draining(EvictionReason::UserDrain, &[keep]);
    assert_eq!(out, vec![evict("keep", 30)]);
}

const EXTENDED_RUN_FOR_TEST: Duration = crate::pods::eviction::EXTENDED_RUN;

// spec: A3 — autoscaled blue-green protects a `safe-to-evict: "false"`
// pod for 7 days from the node's cordon, as the controller stamped it on
// the Node: an agent that first sees the drain 6 days later (or restarts
// then) protects the pod for one more day, not seven.
#[test]
fn the_seven_days_count_from_the_nodes_cordon_across_a_restart() {
    let day = Duration::from_secs(86_400);
    let mut keep = pod("keep", 30);
    keep.safe_to_evict_false = true;
    let t0 = Instant::now();
    let now = t0 + 6 * day;
    let mut n = node(Some(EvictionReason::AutoscaledBlueGreen), true, true);
    n.cordoned_at = Some(t0);
    // A fresh agent (its drain state empty, as after a restart).
    let mut d = ApiDrains::default();
    assert!(d.plan(&n, &[keep.clone()], now).is_empty());
    let until = d.progress(now).expect("a drain").protected[0].1;
    assert_eq!(until, Some(t0 + EXTENDED_RUN_FOR_TEST));
    assert!(d.plan(&n, &[keep.clone()], t0 + 7 * day - S).is_empty());
    assert_eq!(
        d.plan(&n, &[keep.clone()], t0 + 7 * day),
        vec![evict("keep", 30)]
    );
    // Without the stamp the agent counts from when it saw the drain.
    let mut n = node(Some(EvictionReason::AutoscaledBlueGreen), true, true);
    n.cordoned_at = None;
    let mut d = ApiDrains::default();
    assert!(d.plan(&n, &[keep.clone()], now).is_empty());
    let until = d.progress(now).expect("a drain").protected[0].1;
    assert_eq!(until, Some(now + EXTENDED_RUN_FOR_TEST));
    // A stamp in the future (clock skew) counts as now.
    n.cordoned_at = Some(now + day);
    let mut d = ApiDrains::default();
    assert!(d.plan(&n, &[keep], now).is_empty());
    let until = d.progress(now).expect("a drain").protected[0].1;
    assert_eq!(until, Some(now + EXTENDED_RUN_FOR_TEST));
}

// A pod bound to the node while it drains (one tolerating the cordon) is
// evicted too; ending the drain stops the asking, not what was accepted.
#[test]
fn the_drain_holds_while_the_annotation_does() {
    let n = node(Some(EvictionReason::UserDrain), true, true);
    let (mut d, t0, _) = draining(EvictionReason::UserDrain, &[pod("a", 30)]);
    d.answer(&evict("a", 30), Answer::Refused, t0);
    let late = [pod("a", 30), pod("late", 30)];
    assert_eq!(d.plan(&n, &late, t0 + S), vec![evict("late", 30)]);
    d.answer(&evict("late", 30), Answer::Done, t0 + S);
    // The drain ends: "a" (waiting on its budget) is no longer asked for,
    // the node is uncordoned, "late" still goes.
    let ended = node(None, true, true);
    assert_eq!(d.plan(&ended, &late, t0 + 60 * S), vec![Request::Uncordon]);
    let p = d.progress(t0 + 60 * S).expect("the last drain");
    assert!(!p.cordoned);
    assert_eq!(p.terminating, vec!["default/late".to_string()]);
    let a = p.pods.iter().find(|r| r.key == "default/a").expect("a");
    assert_eq!(a.state, EvictionState::NotEvicted);
    // An answer in flight when the drain ended is not retried.
    let (mut d, t0, _) = draining(EvictionReason::UserDrain, &[pod("a", 30)]);
    assert!(d.plan(&ended, &[pod("a", 30)], t0 + S) == vec![Request::Uncordon]);
    d.answer(&evict("a", 30), Answer::Refused, t0 + 2 * S);
    d.answer(&Request::Uncordon, Answer::Done, t0 + 2 * S);
    assert!(d
        .plan(&node(None, false, false), &[pod("a", 30)], t0 + 300 * S)
        .is_empty());
}

// `sluice.dev/evict: <reason>`: one eviction per value, through the same
// API calls; removing the annotation lets the same value ask again.
#[test]
fn an_evict_annotation_asks_once_per_value() {
    let t0 = Instant::now();
    let n = node(None, false, false);
    let mut d = ApiDrains::default();
    let mut a = pod("a", 7_200);
    a.evict = Some(EvictionReason::ScaleDown);
    assert_eq!(d.plan(&n, &[a.clone()], t0), vec![evict("a", 600)]);
    d.answer(&evict("a", 600), Answer::Gone, t0);
    assert!(d.plan(&n, &[a.clone()], t0 + S).is_empty(), "once");
    let mut plain = a.clone();
    plain.evict = None;
    assert!(d.plan(&n, &[plain], t0 + 2 * S).is_empty());
    assert_eq!(d.plan(&n, &[a], t0 + 3 * S), vec![evict("a", 600)]);
    let singles = d.single_evictions(t0 + 3 * S);
    assert_eq!(singles.len(), 2, "{singles:?}");
}

// An API failure (not a refusal) is retried after RETRY_FIRST, doubling,
// without counting as a budget's refusal.
#[test]
fn api_failures_are_retried_without_counting_as_refusals() {
    let pods = [pod("a", 30)];
    let n = node(Some(EvictionReason::ScaleDown), true, true);
    let (mut d, t0, _) = draining(EvictionReason::ScaleDown, &pods);
    let mut t = t0;
    for i in 1..=8u32 {
        d.answer(
            &evict("a", 30),
            Answer::Failed("connection refused".into()),
            t,
        );
        let wait = retry_after(i);
        assert!(d.plan(&n, &pods, t + wait - S / 10).is_empty());
        t += wait;
        assert_eq!(d.plan(&n, &pods, t), vec![evict("a", 30)], "attempt {i}");
    }
    assert_eq!(retry_after(8), RETRY_MAX);
    let p = d.progress(t).expect("a drain");
    assert_eq!(
        p.pending,
        vec!["default/a".to_string()],
        "no refusal counted"
    );
}

// A stricter reason takes over evictions still waiting (B5 after an
// upgrade waited on a budget).
#[test]
fn a_stricter_reason_takes_over_waiting_evictions() {
    let pods = [pod("a", 7_200)];
    let (mut d, t0, _) = draining(EvictionReason::NodeUpgrade, &pods);
    d.answer(&evict("a", 3_600), Answer::Refused, t0);
    let n = node(Some(EvictionReason::BluePoolDeletion), true, true);
    assert_eq!(d.plan(&n, &pods, t0 + 5 * S), vec![delete("a", 3_600)]);
}

// Hostile input: pods without a uid, a thousand pods, duplicate keys.
#[test]
fn many_pods_and_odd_ones() {
    let mut pods: Vec<PodFacts> = (0..1_000).map(|i| pod(&format!("p{i}"), 30)).collect();
    pods[0].uid = None;
    pods.push(pods[1].clone());
    let (mut d, t0, out) = draining(EvictionReason::UserDrain, &pods);
    assert_eq!(out.len(), 1_000, "one request per pod, duplicates once");
    assert!(matches!(&out[0], Request::Evict { uid: None, .. }));
    for r in &out {
        d.answer(r, Answer::Gone, t0);
    }
    // Answers for requests never made change nothing.
    d.answer(&evict("nobody", 1), Answer::Done, t0);
    let p = d.progress(t0).expect("a drain");
    let deleted = p
        .pods
        .iter()
        .filter(|r| r.state == EvictionState::Deleted)
        .count();
    assert_eq!(deleted, 1_000);
    assert!(p.finished);
}
