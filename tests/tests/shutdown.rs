//! The agent's own shutdown, end to end, under each engine: SIGTERM to an
//! agent running pods leaves no namespace, link, pin or process of it
//! behind, and it exits with status 0.
//!
//! Everything is checked before the test bed's guards run: `Cluster::drop`
//! deletes leftovers silently, which would hide a leak.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use sluice_tests::{netns, Cluster, ClusterSpec, EndpointSpec, Engine, Policy, ServiceSpec};

const WHOAMI: &str = env!("CARGO_BIN_EXE_sluice-whoami");
/// How long the agent may take to stop: its pods' grace (2 s here) plus
/// engine cleanup, with room for a loaded machine.
const STOP_BOUND: Duration = Duration::from_secs(30);
const WAIT_BOUND: Duration = Duration::from_secs(20);

/// Pids of processes whose command line contains `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

/// Names of network namespaces starting with `prefix`.
fn namespaces_with(prefix: &str) -> Vec<String> {
    netns::ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

fn wait_for(what: &str, c: &Cluster, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < WAIT_BOUND,
            "{what} within {WAIT_BOUND:?}\n{}",
            c.agent_log(1)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

fn clean_shutdown_leaves_nothing_behind(engine: Engine) {
    // spec: E6 (pods get SIGTERM, then SIGKILL after a bounded grace); the
    // issue's "clean shutdown on SIGTERM that leaves no namespace, link, pin
    // or process behind".
    let tag = format!("shut{}", &engine.as_str()[..1]);
    let marker = format!("sluice-shutdown-{}-{}", engine.as_str(), std::process::id());
    let dir = std::env::temp_dir().join(&marker);
    fs::create_dir_all(&dir).expect("test dir");
    let _dir = DirGuard(dir.clone());
    let polite_ready = dir.join("polite");
    fs::write(&polite_ready, b"ok").expect("ready file");
    // Ignores SIGTERM; marks itself ready only once the trap is set.
    let stubborn_ready = dir.join("stubborn");
    let script = format!(
        "trap '' TERM; touch {}; while :; do sleep 1; done",
        stubborn_ready.display()
    );
    let polite_cmd = [
        WHOAMI, "--name", &marker, "--ip", "{ip4}", "--ip", "{ip6}", "--tcp", "8080",
    ];
    let stubborn_cmd = ["/bin/sh", "-c", &script, &marker];
    // A second container of the polite pod: every container runs, and every
    // one is stopped.
    let sidecar_cmd = ["/bin/sh", "-c", "while :; do sleep 1; done", &marker];
    let spec = ClusterSpec::new(1)
        .agent_pod("polite", 1, &polite_cmd, &polite_ready)
        .agent_pod("stubborn", 1, &stubborn_cmd, &stubborn_ready)
        .agent_pod_sidecar("polite", &sidecar_cmd)
        .agent_pod_grace("stubborn", 2)
        .service(
            ServiceSpec::lb("web", 1)
                .policy(Policy::Local)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::ready("polite"))
                .endpoint(EndpointSpec::ready("stubborn")),
        );
    let mut c = Cluster::start(&tag, engine, spec).expect("cluster");
    let pid = c.agent_pid(1).expect("agent pid");
    let node = c.node(1).expect("node 1").name().to_string();
    let pin_dir = c.pin_dir(1).expect("pin dir").to_path_buf();
    let pod_prefix = format!("{}-", c.pod_netns_prefix());
    let wire_prefix = format!("sluice-w-node-1-{pid}-");

    wait_for("three containers running", &c, || {
        pids_with(&marker).len() >= 3 && stubborn_ready.exists()
    });
    wait_for("both pods plugged", &c, || {
        c.agent_status(1).is_some_and(|s| s.pods == 2)
    });
    // What there is to leak, so the checks below cannot pass vacuously.
    assert_eq!(namespaces_with(&pod_prefix).len(), 2, "pod namespaces");
    let links = netns::exec(&node, &["ip", "-o", "link", "show"]).expect("links");
    assert!(links.contains("slp"), "pod links in the node: {links}");
    if engine == Engine::Kernel {
        assert!(pin_dir.is_dir(), "pins under {}", pin_dir.display());
    } else {
        assert_eq!(namespaces_with(&wire_prefix).len(), 1, "wire namespace");
    }

    let stop = Instant::now();
    let clean = c.stop_agent_within(1, STOP_BOUND).expect("agent running");
    eprintln!("{engine:?}: SIGTERM → agent exit: {:?}", stop.elapsed());
    assert!(
        clean,
        "agent exits with status 0 on SIGTERM\n{}",
        c.agent_log(1)
    );

    // Checked before any guard runs.
    let left = pids_with(&marker);
    assert!(left.is_empty(), "pod processes left: {left:?}");
    assert_eq!(namespaces_with(&pod_prefix), Vec::<String>::new());
    assert_eq!(namespaces_with(&wire_prefix), Vec::<String>::new());
    let links = netns::exec(&node, &["ip", "-o", "link", "show"]).expect("links");
    let names: Vec<&str> = links
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or(""))
        .collect();
    assert_eq!(names, ["lo", "nic0"], "links in the node: {links}");
    assert!(
        !Path::new(&pin_dir).exists(),
        "pin dir {} removed",
        pin_dir.display()
    );
    let filters =
        netns::exec(&node, &["tc", "filter", "show", "dev", "nic0", "ingress"]).unwrap_or_default();
    assert!(filters.trim().is_empty(), "tc filters left: {filters}");
    // Both got SIGTERM; the stubborn one SIGKILL after its grace.
    let log = plain(&c.agent_log(1));
    assert!(
        log.contains("signalled=3 killed=1 not_reaped=0"),
        "agent's account of its pods: {log}"
    );
    drop(c);
}

/// `text` without ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

struct DirGuard(std::path::PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

mod emulated {
    #[test]
    fn clean_shutdown_leaves_nothing_behind() {
        crate::clean_shutdown_leaves_nothing_behind(sluice_tests::Engine::Emulated)
    }
}

mod kernel {
    #[test]
    fn clean_shutdown_leaves_nothing_behind() {
        crate::clean_shutdown_leaves_nothing_behind(sluice_tests::Engine::Kernel)
    }
}
