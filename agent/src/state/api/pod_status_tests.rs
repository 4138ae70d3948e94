//! The pod status on crafted observations.

use std::time::Duration;

use super::*;

fn t0() -> (Instant, SystemTime) {
    (
        Instant::now(),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    )
}

fn ctr(name: &str, state: ContainerRunState, ready: bool) -> ContainerObservation {
    ContainerObservation {
        name: name.into(),
        state,
        ready,
        restarts: 0,
        last: None,
    }
}

fn report(obs: Option<PodObservation>) -> PodReport {
    PodReport {
        key: "default/web".into(),
        uid: Some("u-1".into()),
        ips: vec![
            "198.19.1.2".parse().expect("ip"),
            "fd00:19:1::2".parse().expect("ip"),
        ],
        host_ips: vec!["198.18.0.11".parse().expect("ip")],
        containers: vec!["c".into()],
        restart_policy: RestartPolicy::Always,
        observed: obs,
        deletion_finished: false,
        reported: ReportedStatus::default(),
    }
}

fn observed(at: Instant, containers: Vec<ContainerObservation>, ready: bool) -> PodObservation {
    PodObservation {
        key: "default/web".into(),
        since: at,
        containers,
        ready,
        stopping: false,
        ended: false,
        restart_policy: RestartPolicy::Always,
    }
}

fn cond(s: &PodStatus, type_: &str) -> (String, Option<Time>) {
    let c = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status.clone(), c.last_transition_time.clone())
}

#[test]
fn a_pod_not_taken_on_yet_is_pending_with_its_containers_creating() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let s = pod_status(&report(None), None, &clock, wall);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(cond(&s, "PodScheduled").0, "True");
    assert_eq!(cond(&s, "Ready").0, "False");
    let cs = s.container_statuses.clone().unwrap_or_default();
    let waiting = cs[0].state.as_ref().and_then(|s| s.waiting.clone());
    assert_eq!(
        waiting.and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );
    assert_eq!(s.start_time, None);
    // Addresses are reported from the start: the agent assigned them.
    assert_eq!(s.pod_ip.as_deref(), Some("198.19.1.2"));
    let ips: Vec<String> = s.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect();
    assert_eq!(ips, ["198.19.1.2", "fd00:19:1::2"]);
    assert_eq!(s.host_ip.as_deref(), Some("198.18.0.11"));
}

#[test]
fn running_and_ready_with_start_times_from_the_manager_clock() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let started = mono + Duration::from_millis(2_500);
    let obs = observed(
        mono,
        vec![ctr(
            "c",
            ContainerRunState::Running { since: started },
            true,
        )],
        true,
    );
    let s = pod_status(
        &report(Some(obs)),
        None,
        &clock,
        wall + Duration::from_secs(3),
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(cond(&s, "Ready").0, "True");
    assert_eq!(cond(&s, "ContainersReady").0, "True");
    assert_eq!(s.start_time, Some(seconds(wall)));
    let c = &s.container_statuses.clone().unwrap_or_default()[0];
    assert!(c.ready && c.started == Some(true));
    let run = c.state.as_ref().and_then(|s| s.running.clone());
    // Whole seconds: 2.5 s after the anchor reads as 2 s.
    assert_eq!(
        run.and_then(|r| r.started_at),
        Some(seconds(wall + Duration::from_secs(2)))
    );
}

#[test]
fn ready_transition_times_stay_while_the_status_stays_and_move_when_it_flips() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let running = ContainerRunState::Running { since: mono };
    let ready = report(Some(observed(
        mono,
        vec![ctr("c", running.clone(), true)],
        true,
    )));
    let first = pod_status(&ready, None, &clock, wall);
    let later = pod_status(&ready, Some(&first), &clock, wall + Duration::from_secs(60));
    assert_eq!(first, later, "nothing changed: the same status");
    let unready = report(Some(observed(mono, vec![ctr("c", running, false)], false)));
    let flipped = pod_status(
        &unready,
        Some(&later),
        &clock,
        wall + Duration::from_secs(90),
    );
    let (status, since) = cond(&flipped, "Ready");
    assert_eq!(status, "False");
    assert_eq!(since, Some(seconds(wall + Duration::from_secs(90))));
    assert_eq!(cond(&flipped, "PodScheduled").1, Some(seconds(wall)));
}

#[test]
fn a_container_that_never_started_keeps_the_pod_pending() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let obs = observed(
        mono,
        vec![
            ctr("a", ContainerRunState::Running { since: mono }, true),
            ctr("b", ContainerRunState::Waiting { restarting: false }, false),
        ],
        false,
    );
    let s = pod_status(&report(Some(obs)), None, &clock, wall);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn a_container_waiting_to_restart_is_crash_looping_and_the_pod_running() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let mut c = ctr("c", ContainerRunState::Waiting { restarting: true }, false);
    c.restarts = 2;
    c.last = Some((
        ExitInfo {
            code: Some(3),
            signal: None,
        },
        mono,
    ));
    let s = pod_status(
        &report(Some(observed(mono, vec![c], false))),
        None,
        &clock,
        wall,
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let cs = &s.container_statuses.clone().unwrap_or_default()[0];
    assert_eq!(cs.restart_count, 2);
    let w = cs.state.as_ref().and_then(|s| s.waiting.clone());
    assert_eq!(
        w.and_then(|w| w.reason).as_deref(),
        Some("CrashLoopBackOff")
    );
    let last = cs.last_state.as_ref().and_then(|s| s.terminated.clone());
    assert_eq!(last.map(|t| t.exit_code), Some(3));
}

#[test]
fn ended_pods_succeed_when_every_container_exited_zero_and_fail_otherwise() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let done = |code: Option<i32>, signal: Option<i32>| ContainerRunState::Terminated {
        exit: ExitInfo { code, signal },
        started: Some(mono),
        finished: mono + Duration::from_secs(5),
    };
    let mut obs = observed(mono, vec![ctr("c", done(Some(0), None), false)], false);
    obs.ended = true;
    let s = pod_status(&report(Some(obs.clone())), None, &clock, wall);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let t = s.container_statuses.clone().unwrap_or_default()[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    // SIGTERM'd by a deletion: 128 + 15, as a container runtime says.
    obs.containers = vec![ctr("c", done(None, Some(15)), false)];
    let s = pod_status(&report(Some(obs)), None, &clock, wall);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let t = s.container_statuses.clone().unwrap_or_default()[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (143, Some("Error")));
    let ready = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .cloned();
    assert_eq!(
        ready.and_then(|c| c.reason).as_deref(),
        Some("PodCompleted")
    );
}

#[test]
fn the_book_writes_only_changes_and_deletes_once_per_uid() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let mut book = StatusBook::default();
    let running = ContainerRunState::Running { since: mono };
    let r = report(Some(observed(
        mono,
        vec![ctr("c", running.clone(), false)],
        false,
    )));
    let w = book.writes(std::slice::from_ref(&r), &clock, wall);
    assert!(matches!(&w[..], [Write::Status { key, .. }] if key == "default/web"));
    assert!(book
        .writes(
            std::slice::from_ref(&r),
            &clock,
            wall + Duration::from_secs(5)
        )
        .is_empty());
    let ready = report(Some(observed(mono, vec![ctr("c", running, true)], true)));
    assert_eq!(
        book.writes(std::slice::from_ref(&ready), &clock, wall)
            .len(),
        1
    );
    let mut done = ready.clone();
    done.deletion_finished = true;
    let w = book.writes(std::slice::from_ref(&done), &clock, wall);
    assert_eq!(
        w,
        vec![Write::Delete {
            key: "default/web".into(),
            uid: "u-1".into()
        }]
    );
    assert!(book
        .writes(std::slice::from_ref(&done), &clock, wall)
        .is_empty());
    // A new pod under the same name (another uid) is written afresh.
    let mut again = ready.clone();
    again.uid = Some("u-2".into());
    assert_eq!(
        book.writes(std::slice::from_ref(&again), &clock, wall)
            .len(),
        1
    );
    // Gone from the reports: forgotten, so a pod coming back is written.
    assert!(book.writes(&[], &clock, wall).is_empty());
    assert_eq!(
        book.writes(std::slice::from_ref(&ready), &clock, wall)
            .len(),
        1
    );
}

#[test]
fn the_first_status_after_a_restart_keeps_the_start_and_transitions_the_api_shows() {
    let (mono, wall) = t0();
    let clock = WallClock::new(mono, wall);
    let earlier = wall - Duration::from_secs(3600);
    let running = ContainerRunState::Running { since: mono };
    let mut r = report(Some(observed(mono, vec![ctr("c", running, true)], true)));
    r.reported = ReportedStatus {
        start_time: Some(earlier),
        conditions: vec![
            ("Ready".into(), "True".into(), Some(earlier)),
            ("PodScheduled".into(), "True".into(), Some(earlier)),
        ],
    };
    let mut book = StatusBook::default();
    let w = book.writes(std::slice::from_ref(&r), &clock, wall);
    let [Write::Status { status, .. }] = &w[..] else {
        panic!("one status write: {w:?}");
    };
    assert_eq!(status.start_time, Some(seconds(earlier)));
    assert_eq!(
        cond(status, "Ready"),
        ("True".into(), Some(seconds(earlier)))
    );
    // A condition the API did not show starts now.
    assert_eq!(cond(status, "ContainersReady").1, Some(seconds(wall)));
}
