//! A pod whose API object is deleted, driven through `PodManager` with fake
//! processes and a hand-moved clock: stopped within what is left of the
//! deletion's grace, never restarted, and reported ended (terminal phase)
//! so the agent can remove the object.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sluice_agent::pods::runtime::Sig;
use sluice_agent::pods::spec::{ContainerRun, RestartPolicy};
use sluice_agent::pods::{ContainerRunState, PodEvent, PodManager, PodRunSpec, PoolKind};
use sluice_agent::state::api::pod_status::phase;

use common::FakePods;

fn pod(name: &str) -> PodRunSpec {
    PodRunSpec {
        key: format!("default/{name}"),
        uid: String::new(),
        node: "node-a".into(),
        ips: vec![],
        netns: None,
        containers: vec![ContainerRun {
            name: "c".into(),
            argv: vec!["server".into()],
            env: vec![],
            working_dir: None,
            named_ports: BTreeMap::new(),
            readiness: None,
        }],
        termination_grace: Duration::from_secs(30),
        restart_policy: RestartPolicy::Always,
        annotations: BTreeMap::new(),
    }
}

fn manager(fake: &FakePods) -> PodManager {
    PodManager::new(
        Box::new(fake.clone()),
        Box::new(fake.clone()),
        PoolKind::Standard,
    )
}

#[test]
fn a_deleted_pod_gets_sigterm_ends_and_is_reported_terminal_not_restarted() {
    let fake = FakePods::default();
    let mut m = manager(&fake);
    let t = Instant::now();
    let p = pod("web");
    m.sync(std::slice::from_ref(&p), t);
    m.tick(t);
    let obs = m.observations();
    assert!(matches!(
        obs[0].containers[0].state,
        ContainerRunState::Running { .. }
    ));
    assert_eq!(phase(obs.first()), "Running");
    assert!(!m.has_ended(&p.key));

    m.delete(&p.key, Duration::from_secs(5), t);
    let mut events = m.tick(t);
    assert_eq!(fake.signals(&p.key), vec![Sig::Term], "{events:?}");
    // The fake process ends on SIGTERM (exit 0) and is reaped.
    events.extend(m.tick(t + Duration::from_millis(200)));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, PodEvent::EvictionDone { key, .. } if *key == p.key)),
        "{events:?}"
    );
    assert!(m.has_ended(&p.key));
    let obs = m.observations();
    assert!(obs[0].ended);
    assert_eq!(phase(obs.first()), "Succeeded", "exited 0 after SIGTERM");
    // Still in the desired state (the object is not removed yet): it is not
    // started again.
    m.sync(std::slice::from_ref(&p), t + Duration::from_secs(60));
    m.tick(t + Duration::from_secs(61));
    assert_eq!(fake.w().spawned.len(), 1);
}

#[test]
fn a_deleted_pods_endpoints_turn_terminating_before_its_sigterm() {
    let fake = FakePods::default();
    let mut m = manager(&fake);
    m.hold_sigterm(true);
    let t = Instant::now();
    let p = pod("web");
    m.sync(std::slice::from_ref(&p), t);
    m.tick(t);
    m.delete(&p.key, Duration::from_secs(30), t);
    // Endpoints terminating first; SIGTERM once they are published.
    assert!(fake.signals(&p.key).is_empty());
    let eps = m.endpoint_states();
    assert!(eps[0].conditions.terminating, "{eps:?}");
    assert!(m.observations()[0].stopping);
    m.endpoints_published(t);
    assert_eq!(fake.signals(&p.key), vec![Sig::Term]);
}

#[test]
fn a_pod_deleted_before_it_started_ends_at_once() {
    let fake = FakePods::default();
    let mut m = manager(&fake);
    let t = Instant::now();
    let mut p = pod("late");
    // Waiting for its link: nothing runs yet.
    p.ips = vec!["198.19.1.9".parse().expect("ip")];
    m.sync(std::slice::from_ref(&p), t);
    assert!(!m.has_ended(&p.key));
    m.delete(&p.key, Duration::from_secs(30), t);
    m.tick(t);
    assert!(m.has_ended(&p.key));
    assert!(fake.w().spawned.is_empty());
    assert_eq!(phase(m.observations().first()), "Failed");
    // Unknown pods have nothing running either.
    assert!(m.has_ended("default/never-seen"));
}

#[test]
fn a_new_pod_under_the_name_of_a_deleted_one_starts_even_with_the_same_spec() {
    let fake = FakePods::default();
    let mut m = manager(&fake);
    let t = Instant::now();
    let mut p = pod("web");
    p.uid = "u-1".into();
    m.sync(std::slice::from_ref(&p), t);
    m.tick(t);
    m.delete(&p.key, Duration::from_secs(5), t);
    m.tick(t);
    assert!(m.has_ended(&p.key));
    // The old object's removal and the new one's creation came in one
    // build: the manager never saw the name leave.
    p.uid = "u-2".into();
    m.sync(std::slice::from_ref(&p), t + Duration::from_secs(1));
    m.tick(t + Duration::from_secs(1));
    assert_eq!(fake.w().spawned.len(), 2, "the new pod runs");
    assert!(!m.has_ended(&p.key));
}
