use super::*;
use crate::config::{BackendConfig, HealthCheck, ServiceConfig};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn check(interval_s: u64, healthy: u32, unhealthy: u32) -> HealthCheck {
    HealthCheck {
        interval: Duration::from_secs(interval_s),
        healthy_threshold: healthy,
        unhealthy_threshold: unhealthy,
        ..HealthCheck::gke_cluster_default()
    }
}

fn service(name: &str, hc: HealthCheck, nodes: &[(&str, [u8; 4])]) -> ServiceConfig {
    ServiceConfig {
        name: name.to_string(),
        frontends: Vec::new(),
        health_check: hc,
        backends: nodes
            .iter()
            .map(|(n, a)| BackendConfig {
                node: n.to_string(),
                address: Ipv4Addr::from(*a),
                ipv6: None,
            })
            .collect(),
    }
}

fn cfg(services: Vec<ServiceConfig>) -> LbConfig {
    LbConfig { services }
}

/// Runs the board to its next wake-up; returns the time and the starts.
fn step(b: &mut Board) -> (Duration, Vec<ProbeStart>, Vec<Change>) {
    let at = b.next_wakeup().expect("something scheduled");
    let (s, c) = b.due(at);
    (at, s, c)
}

/// A board with one backend `a` behind `web`, its first probe passed.
fn healthy_web(unhealthy: u32) -> Board {
    let mut b = Board::new();
    b.sync(
        &cfg(vec![service(
            "web",
            check(8, 1, unhealthy),
            &[("a", [198, 18, 0, 2])],
        )]),
        ms(0),
    );
    let (t0, s, _) = step(&mut b);
    b.report(&s[0].key, s[0].seq, true, t0);
    b
}

#[test]
fn a_probe_runs_at_its_phase_then_every_interval() {
    let mut b = Board::new();
    b.sync(
        &cfg(vec![service(
            "web",
            check(8, 1, 3),
            &[("a", [198, 18, 0, 2])],
        )]),
        ms(1000),
    );
    let first = b.next_wakeup().expect("scheduled");
    assert!(first >= ms(1000) && first < ms(9000), "{first:?}");
    if first > ms(1000) {
        assert!(b.due(first - ms(1)).0.is_empty(), "not before its phase");
    }
    let (t0, starts, _) = step(&mut b);
    assert_eq!(starts.len(), 1);
    assert!(!b.healthy("web", "a"), "new backends start unhealthy");
    let ch = b.report(&starts[0].key, starts[0].seq, true, t0 + ms(5));
    assert_eq!(ch.len(), 1);
    assert!(b.healthy("web", "a"));
    // Next round one interval after the first, not after the answer.
    assert_eq!(b.next_wakeup(), Some(t0 + Duration::from_secs(8)));
    assert!(b.due(t0 + ms(7999)).0.is_empty());
    assert_eq!(b.due(t0 + ms(8000)).0.len(), 1);
}

#[test]
fn a_probe_unanswered_within_its_timeout_fails_once() {
    // spec: H4
    let mut b = healthy_web(1);
    assert!(b.healthy("web", "a"));
    let (t1, s, _) = step(&mut b);
    // The next wake-up is the timeout of the probe in flight.
    assert_eq!(b.next_wakeup(), Some(t1 + Duration::from_secs(1)));
    let (_, starts, changes) = step(&mut b);
    assert!(starts.is_empty());
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].transition, Transition::ToUnhealthy);
    // Its late success changes nothing.
    assert!(b
        .report(&s[0].key, s[0].seq, true, t1 + ms(1500))
        .is_empty());
    assert!(!b.healthy("web", "a"));
    assert_eq!(
        b.transitions().map(|t| t.3).sum::<u64>(),
        2,
        "one to healthy, one to unhealthy"
    );
}

#[test]
fn a_success_answered_after_the_timeout_is_a_failure() {
    let mut b = healthy_web(1);
    let (t1, s, _) = step(&mut b);
    // Reported before `due` noticed the timeout.
    let ch = b.report(&s[0].key, s[0].seq, true, t1 + ms(1000));
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].transition, Transition::ToUnhealthy);
}

#[test]
fn services_with_the_same_check_share_one_probe_and_keep_their_own_thresholds() {
    // spec: H4
    let addr = [198, 18, 0, 7];
    let mut b = Board::new();
    b.sync(
        &cfg(vec![
            service("quick", check(8, 1, 1), &[("n", addr)]),
            service("patient", check(8, 1, 3), &[("n", addr)]),
        ]),
        ms(0),
    );
    assert_eq!(b.probes(), 1);
    let (t, s, _) = step(&mut b);
    assert_eq!(s.len(), 1);
    assert_eq!(b.report(&s[0].key, s[0].seq, true, t).len(), 2);
    let (t, s, _) = step(&mut b);
    let ch = b.report(&s[0].key, s[0].seq, false, t);
    assert_eq!(
        ch,
        vec![Change {
            service: "quick".into(),
            node: "n".into(),
            transition: Transition::ToUnhealthy
        }]
    );
    assert!(b.healthy("patient", "n"), "one failure of three");
    // A different port is another probe.
    let mut other = check(8, 1, 3);
    other.port = 10257;
    b.sync(
        &cfg(vec![
            service("quick", check(8, 1, 1), &[("n", addr)]),
            service("patient", other, &[("n", addr)]),
        ]),
        t,
    );
    assert_eq!(b.probes(), 2);
}

#[test]
fn an_interval_change_keeps_the_verdict_and_moves_to_the_new_cadence() {
    let mut b = Board::new();
    let nodes = [("a", [198, 18, 0, 2])];
    b.sync(&cfg(vec![service("web", check(8, 1, 3), &nodes)]), ms(0));
    let (t, s, _) = step(&mut b);
    b.report(&s[0].key, s[0].seq, true, t);
    assert!(b.healthy("web", "a"));
    b.sync(
        &cfg(vec![service("web", check(3, 1, 3), &nodes)]),
        t + ms(10),
    );
    assert!(b.healthy("web", "a"), "the verdict survives a check change");
    assert_eq!(b.probes(), 1, "the 8 s probe stopped");
    let (t1, s, _) = step(&mut b);
    assert_eq!(s[0].key.interval, Duration::from_secs(3));
    assert!(t1 < t + ms(10) + Duration::from_secs(3));
    b.report(&s[0].key, s[0].seq, true, t1);
    let (t2, _, _) = step(&mut b);
    assert_eq!(t2 - t1, Duration::from_secs(3));
}

#[test]
fn probes_of_many_backends_are_spread_over_the_interval() {
    let nodes: Vec<(String, [u8; 4])> = (0..200u8)
        .map(|i| (format!("n{i}"), [198, 18, 1, i]))
        .collect();
    let refs: Vec<(&str, [u8; 4])> = nodes.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    let mut b = Board::new();
    b.sync(&cfg(vec![service("web", check(8, 1, 3), &refs)]), ms(0));
    let mut starts = BTreeSet::new();
    while let Some(t) = b.next_wakeup().filter(|t| *t < Duration::from_secs(8)) {
        let (s, _) = b.due(t);
        for p in s {
            starts.insert(t);
            b.report(&p.key, p.seq, true, t);
        }
    }
    assert_eq!(b.transitions().count(), 200, "every backend probed once");
    // Far from all at once: most probes start at an instant of their own.
    assert!(starts.len() > 150, "{} distinct start times", starts.len());
    let first = starts.iter().next().copied().unwrap_or_default();
    let last = starts.iter().last().copied().unwrap_or_default();
    assert!(last - first > Duration::from_secs(6), "{first:?}..{last:?}");
}

#[test]
fn a_removed_backend_is_forgotten_and_starts_unhealthy_when_back() {
    let mut b = Board::new();
    let nodes = [("a", [198, 18, 0, 2])];
    b.sync(&cfg(vec![service("web", check(8, 1, 3), &nodes)]), ms(0));
    let (t, s, _) = step(&mut b);
    b.report(&s[0].key, s[0].seq, true, t);
    b.sync(&cfg(vec![service("web", check(8, 1, 3), &[])]), t);
    assert_eq!(b.probes(), 0);
    assert_eq!(b.transitions().count(), 0);
    assert!(b.next_wakeup().is_none());
    b.sync(&cfg(vec![service("web", check(8, 1, 3), &nodes)]), t);
    assert!(!b.healthy("web", "a"));
    // The old probe's answer is not taken for the new one.
    assert!(b.report(&s[0].key, s[0].seq, true, t).is_empty());
}
