//! Real pods: a namespace made by the agent, a real process inside it, a
//! real exec readiness probe, and eviction by SIGTERM or, after the grace,
//! SIGKILL. Needs root and iproute2 (skipped otherwise). Waits are bounded;
//! nothing is asserted about timing beyond "it ended".

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sluice_agent::pods::spec::{ContainerRun, RestartPolicy};
use sluice_agent::pods::{
    netns_name, EvictionOutcome, EvictionReason, OsProber, OsProcessControl, PodEvent, PodManager,
    PodRunSpec, PoolKind, Probe, ProbeAction,
};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn can_run() -> bool {
    // SAFETY: plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    let ok = root
        && Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: needs root and iproute2");
    }
    ok
}

/// Removes the pod's namespace and the log directory even when the test
/// fails (the runtime's own Drop also kills its processes and namespaces;
/// this is the second line).
struct Cleanup {
    netns: String,
    logs: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if Path::new("/run/netns").join(&self.netns).exists() {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.netns])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}

fn pod(script: &str, grace: Duration) -> (PodRunSpec, Cleanup) {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let key = format!("sluice-test/pod-{}-{n}", std::process::id());
    let cleanup = Cleanup {
        netns: netns_name(&key),
        logs: std::env::temp_dir().join(format!("sluice-pods-{}-{n}", std::process::id())),
    };
    let spec = PodRunSpec {
        key,
        uid: String::new(),
        node: "node-a".into(),
        ips: vec![],
        netns: None,
        containers: vec![ContainerRun {
            name: "c".into(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("GREETING".into(), "hi".into())],
            working_dir: None,
            named_ports: BTreeMap::new(),
            // Real exec probe inside the pod's namespace: it sees the pod's
            // own `lo`, which the runtime brought up.
            readiness: Some(Probe {
                action: ProbeAction::Exec {
                    command: vec![
                        "sh".into(),
                        "-c".into(),
                        "ip -o link show lo | grep -q UP".into(),
                    ],
                },
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(1),
                timeout: Duration::from_secs(5),
                success_threshold: 1,
                failure_threshold: 3,
            }),
        }],
        termination_grace: grace,
        restart_policy: RestartPolicy::Never,
        annotations: BTreeMap::new(),
    };
    (spec, cleanup)
}

/// Tick until `f` picks something from the events, for at most `limit`.
fn tick_until<T>(
    m: &mut PodManager,
    limit: Duration,
    mut f: impl FnMut(&PodEvent) -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for e in m.tick(Instant::now()) {
            if let PodEvent::Error { key, message } = &e {
                eprintln!("{key}: {message}");
            }
            if let Some(v) = f(&e) {
                return Some(v);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn netns_inode(name: &str) -> u64 {
    std::fs::metadata(Path::new("/run/netns").join(name))
        .expect("pod namespace exists")
        .ino()
}

fn run_and_evict(script: &str, grace: Duration) -> EvictionOutcome {
    let (spec, cleanup) = pod(script, grace);
    let key = spec.key.clone();
    let mut m = PodManager::new(
        Box::new(OsProcessControl::new(&cleanup.logs)),
        Box::new(OsProber::default()),
        PoolKind::Standard,
    );
    let ev = m.sync(std::slice::from_ref(&spec), Instant::now());
    assert!(
        ev.iter()
            .any(|e| matches!(e, PodEvent::SandboxReady { .. })),
        "{ev:?}"
    );
    let ino = netns_inode(&cleanup.netns);

    // Ready once the exec probe passes inside the namespace.
    let ready = tick_until(&mut m, Duration::from_secs(15), |e| match e {
        PodEvent::ReadinessChanged { ready: true, .. } => Some(()),
        _ => None,
    });
    assert!(ready.is_some(), "pod never became ready");

    // The process runs in the pod's namespace: it printed its own.
    let log = cleanup.logs.join(format!("{}.log", key.replace('/', "_")));
    let end = Instant::now() + Duration::from_secs(5);
    let mut text = String::new();
    while Instant::now() < end && !text.contains("net:[") {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(text.contains(&format!("net:[{ino}]")), "log: {text:?}");
    assert!(text.contains("hi"), "env passed: {text:?}");

    m.evict(&key, EvictionReason::NodeUpgrade, Instant::now())
        .expect("known pod");
    let c = m
        .endpoint_states()
        .into_iter()
        .find(|e| e.key == key)
        .expect("still an endpoint while terminating")
        .conditions;
    assert!(c.terminating && !c.ready);

    let outcome = tick_until(&mut m, Duration::from_secs(20), |e| match e {
        PodEvent::EvictionDone { outcome, .. } => Some(*outcome),
        _ => None,
    })
    .expect("eviction ended");
    assert!(
        !Path::new("/run/netns").join(&cleanup.netns).exists(),
        "namespace removed"
    );
    assert!(m.endpoint_states().is_empty());
    outcome
}

#[test]
fn sigterm_ends_a_cooperative_pod() {
    // spec: E6, E1 (SIGTERM first; no SIGKILL for a pod that exits)
    if !can_run() {
        return;
    }
    let o = run_and_evict(
        r#"readlink /proc/self/ns/net; echo "$GREETING"; trap 'exit 0' TERM; while :; do sleep 0.1; done"#,
        Duration::from_secs(30),
    );
    assert!(matches!(o, EvictionOutcome::Graceful { .. }), "{o:?}");
}

#[test]
fn sigkill_after_the_grace_for_a_pod_ignoring_sigterm() {
    // spec: E1, E6 (SIGKILL once the grace runs out)
    if !can_run() {
        return;
    }
    // An ignored signal stays ignored across exec, so `sleep` ignores it too.
    let o = run_and_evict(
        r#"readlink /proc/self/ns/net; echo "$GREETING"; trap '' TERM; while :; do sleep 0.1; done"#,
        Duration::from_secs(1),
    );
    assert!(matches!(o, EvictionOutcome::Killed { .. }), "{o:?}");
}
