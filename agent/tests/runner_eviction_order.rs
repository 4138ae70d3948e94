//! The sync loop with a fake engine, fake processes and the real health
//! server on 127.0.0.1: what the load balancer's health check answers at the
//! moment an evicted pod gets its SIGTERM, and what a cordoned node does
//! with new pods. No root, no namespaces.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_agent::health::{HealthConfig, HealthHandle, SystemClock};
use sluice_agent::metrics::MetricsSnapshot;
use sluice_agent::pods::{PodManager, PoolKind};
use sluice_agent::runner::Runner;
use sluice_agent::state::source::{StateSource, Update};
use sluice_agent::state::{parse_state, DesiredState};

mod common;
use common::manifests::{service, slice};
use common::{lock, FakeEngine, FakePods, Journal, SignalNote};

/// The state the loop polls next.
#[derive(Clone, Default)]
struct NextState(Arc<Mutex<Option<DesiredState>>>);

impl StateSource for NextState {
    fn poll(&mut self) -> Update {
        match lock(&self.0).take() {
            Some(s) => Update::State(s),
            None => Update::Unchanged,
        }
    }
    fn describe(&self) -> String {
        "fake".into()
    }
}

/// GET the portless health check of `default/web`: (status, body).
fn health_check(addr: SocketAddr) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return (0, String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ =
        s.write_all(b"GET /service/default/web HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn state(drain: bool, pods: &[&str]) -> DesiredState {
    let annotations = if drain {
        "annotations: {sluice.dev/drain: UserDrain}"
    } else {
        ""
    };
    let mut y = format!(
        r#"
apiVersion: v1
kind: Node
metadata: {{name: node-a, {annotations}}}
spec: {{podCIDRs: ["198.19.1.0/24"]}}
status: {{addresses: [{{type: InternalIP, address: 198.18.0.11}}]}}
"#
    );
    y.push_str(&service("Local", ""));
    y.push_str(&slice(
        "- addresses: [198.19.1.10]\n  conditions: {ready: true, serving: true, terminating: false}\n  nodeName: node-a",
    ));
    for (i, p) in pods.iter().enumerate() {
        y.push_str(&format!(
            r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {p}, namespace: default}}
spec:
  nodeName: node-a
  terminationGracePeriodSeconds: 30
  containers: [{{name: main, command: [server]}}]
status: {{podIPs: [{{ip: 198.19.1.{}}}]}}
"#,
            10 + i
        ));
    }
    parse_state(&y).expect("test state")
}

struct Bed {
    /// What the engine and the processes did, in order.
    journal: Journal,
    engine: FakeEngine,
    next: NextState,
    /// Where the health check of `default/web` is answered.
    health: Option<SocketAddr>,
    runner: Option<Runner>,
    status: tempfile_path::TempPath,
}

/// A temporary status file path removed on drop.
mod tempfile_path {
    use std::path::PathBuf;
    pub struct TempPath(pub PathBuf);
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

impl Bed {
    fn new(tag: &str, first: DesiredState) -> Bed {
        let journal = Journal::default();
        let engine = FakeEngine::with_journal(journal.clone());
        let next = NextState::default();
        *lock(&next.0) = Some(first);
        let config = HealthConfig::new(Duration::from_secs(30)).on_ip([127, 0, 0, 1].into(), 0);
        let health = HealthHandle::start(config, Arc::new(SystemClock)).expect("health server");
        let addr = health.node_addrs().first().copied();
        // What a load balancer probing at the moment of a signal is told.
        let note: SignalNote =
            Arc::new(move || format!(" health={}", addr.map_or(0, |a| health_check(a).0)));
        let procs = FakePods::with_journal(journal.clone(), Some(note));
        let pods = PodManager::new(Box::new(procs.clone()), Box::new(procs), PoolKind::Standard);
        let status = tempfile_path::TempPath(
            std::env::temp_dir().join(format!("sluice-runner-{tag}-{}.json", std::process::id())),
        );
        let runner = Runner::new(
            "node-a".into(),
            Box::new(next.clone()),
            Box::new(engine.clone()),
            health,
            Arc::new(Mutex::new(MetricsSnapshot::default())),
            pods,
            Some(status.0.clone()),
        );
        Bed {
            journal,
            engine,
            next,
            health: addr,
            runner: Some(runner),
            status,
        }
    }

    fn log(&self) -> Vec<String> {
        lock(&self.journal).clone()
    }

    fn set_state(&self, state: DesiredState) {
        *lock(&self.next.0) = Some(state);
    }

    fn runner(&mut self) -> &mut Runner {
        self.runner.as_mut().expect("runner until drop")
    }

    /// Tick until `done` holds (bounded).
    fn tick_until(&mut self, what: &str, done: impl Fn(&Bed) -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            self.runner().tick();
            if done(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{what} did not happen: {:?}", self.log());
    }

    fn health(&self) -> u16 {
        let addr = self.health.expect("health address");
        health_check(addr).0
    }

    fn status(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.status.0).expect("status file");
        serde_json::from_str(&text).expect("status JSON")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(r) = self.runner.take() {
            let _ = r.shutdown();
        }
    }
}

#[test]
fn sigterm_goes_out_after_the_local_check_fails_even_if_the_maps_fail() {
    // spec: E6, H3, P5 — an eviction turns the pod's endpoint terminating
    // and the Local check fails before SIGTERM, also when the map update
    // fails and waits for a retry.
    let mut bed = Bed::new("order", state(false, &["web-1"]));
    bed.tick_until("the pod ready in the check", |b| b.health() == 200);

    bed.engine.log().fail_apply = true;
    bed.set_state(state(true, &["web-1"]));
    bed.tick_until("SIGTERM", |b| b.log().iter().any(|l| l.starts_with("Term")));
    let log = bed.log();
    let term = log
        .iter()
        .position(|l| l.starts_with("Term"))
        .expect("SIGTERM logged");
    assert_eq!(log[term], "Term health=503", "{log:?}");
    assert_eq!(
        log[..term].last().map(String::as_str),
        Some("apply failed"),
        "maps tried in the same sync before the signal: {log:?}"
    );
}

#[test]
fn a_cordoned_node_reports_new_pods_pending_and_starts_them_on_uncordon() {
    // spec: U1, U2, B2 — no new pods on a cordoned node; E6 — outcomes in
    // the status file as data, kept after uncordon.
    let mut bed = Bed::new("cordon", state(false, &["web-1"]));
    bed.tick_until("web-1 running", |b| {
        b.log().iter().any(|l| l == "spawn default/web-1")
    });
    bed.set_state(state(true, &["web-1"]));
    bed.tick_until("drain finished", |b| {
        b.status()["drain"]["finished"] == true
    });
    bed.set_state(state(true, &["web-1", "late"]));
    bed.tick_until("late pending", |b| {
        b.status()["pendingPods"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    });
    let s = bed.status();
    assert_eq!(
        s["pendingPods"],
        serde_json::json!([{"namespace": "default", "name": "late", "reason": "node cordoned"}])
    );
    assert_eq!(s["drain"]["cordoned"], true);
    assert_eq!(s["drain"]["totals"]["evicted"], 1);
    let pod = &s["drain"]["pods"][0];
    assert_eq!(pod["name"], "web-1");
    assert_eq!(pod["reason"], "user-drain");
    assert_eq!(pod["phase"], "exited-gracefully");
    assert_eq!(pod["graceSeconds"], 30.0);
    assert!(!bed.log().iter().any(|l| l == "spawn default/late"));

    bed.set_state(state(false, &["web-1", "late"]));
    bed.tick_until("late started", |b| {
        b.log().iter().any(|l| l == "spawn default/late")
    });
    bed.runner().tick();
    let s = bed.status();
    assert_eq!(s["pendingPods"], serde_json::json!([]));
    assert_eq!(s["drain"]["cordoned"], false, "{s}");
    assert_eq!(s["drain"]["pods"][0]["phase"], "exited-gracefully");
}

#[test]
fn pods_arriving_with_the_cordon_are_held() {
    // spec: U1, U2 — the cordon comes first: a pod assigned in the same
    // update as the drain is not started (and so not evicted either).
    let mut bed = Bed::new("same", state(false, &["web-1"]));
    bed.tick_until("web-1 running", |b| {
        b.log().iter().any(|l| l == "spawn default/web-1")
    });
    bed.set_state(state(true, &["web-1", "late"]));
    bed.tick_until("drain finished", |b| {
        b.status()["drain"]["finished"] == true
    });
    let s = bed.status();
    assert_eq!(s["pendingPods"][0]["name"], "late", "{s}");
    assert_eq!(s["drain"]["pods"].as_array().map(Vec::len), Some(1), "{s}");
    assert!(!bed.log().iter().any(|l| l == "spawn default/late"));
}
