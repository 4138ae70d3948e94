//! The sync loop reporting its pods to a `PodStatusSink`, and finishing a
//! graceful deletion: a real state file, fake engine and processes.

mod common;

use std::sync::{Arc, Mutex};

use sluice_agent::pods::runtime::Sig;
use sluice_agent::state::api::pod_status::phase;
use sluice_agent::state::api::{PodReport, PodStatusSink};

use common::runner_loop::Loop;

/// Keeps the last reports it was given.
#[derive(Clone, Default)]
struct Reports(Arc<Mutex<Vec<PodReport>>>);

impl PodStatusSink for Reports {
    fn report(&mut self, pods: &[PodReport]) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = pods.to_vec();
    }
}

impl Reports {
    fn get(&self, key: &str) -> Option<PodReport> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().find(|r| r.key == key).cloned()
    }
}

/// The state file; `deleted`: the deletion's grace ends at that time.
fn state(deleted: Option<&str>) -> String {
    let deletion = deleted
        .map(|t| format!(", deletionTimestamp: \"{t}\""))
        .unwrap_or_default();
    format!(
        r#"
apiVersion: v1
kind: Node
metadata: {{name: node-a}}
spec: {{podCIDRs: ["198.19.1.0/24"]}}
status: {{addresses: [{{type: InternalIP, address: 198.18.0.11}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: default, uid: u-web{deletion}}}
spec:
  nodeName: node-a
  containers: [{{name: main, command: [server]}}]
status: {{podIPs: [{{ip: 198.19.1.10}}]}}
"#
    )
}

#[test]
fn the_loop_reports_its_pods_and_a_deleted_pod_is_stopped_then_reported_finished() {
    let mut l = Loop::start("pod-status", &state(None));
    let reports = Reports::default();
    if let Some(r) = l.runner.as_mut() {
        r.set_status_sink(Box::new(reports.clone()));
    }
    l.settle();
    let r = reports.get("default/web").expect("reported");
    assert_eq!(r.uid.as_deref(), Some("u-web"));
    assert_eq!(
        r.host_ips,
        vec!["198.18.0.11".parse::<std::net::IpAddr>().expect("ip")]
    );
    assert_eq!(phase(r.observed.as_ref()), "Running", "{r:?}");
    assert!(!r.deletion_finished);

    // Grace left: SIGTERM, and the process ends by itself.
    l.write(&state(Some("2100-01-01T00:00:00Z")));
    assert_eq!(l.pods.signals("default/web"), vec![Sig::Term]);
    let r = reports.get("default/web").expect("still reported");
    assert!(r.deletion_finished, "{r:?}");
    assert_eq!(
        phase(r.observed.as_ref()),
        "Succeeded",
        "exited 0 on SIGTERM"
    );
    // Never started again while the object waits to be removed.
    l.settle();
    assert_eq!(l.pods.w().spawned.len(), 1);
}

#[test]
fn a_pod_whose_deletion_grace_is_over_gets_sigterm_and_sigkill_at_once() {
    let mut l = Loop::start("pod-status-late", &state(None));
    l.settle();
    l.write(&state(Some("2020-01-01T00:00:00Z")));
    assert_eq!(l.pods.signals("default/web"), vec![Sig::Term, Sig::Kill]);
}

#[test]
fn a_pod_deleted_before_the_agent_took_it_on_is_never_started() {
    let mut l = Loop::start("pod-status-never", &state(Some("2100-01-01T00:00:00Z")));
    let reports = Reports::default();
    if let Some(r) = l.runner.as_mut() {
        r.set_status_sink(Box::new(reports.clone()));
    }
    l.settle();
    assert!(l.pods.w().spawned.is_empty());
    let r = reports.get("default/web").expect("reported");
    assert!(r.deletion_finished, "{r:?}");
}
