//! The emulated engine killed with SIGKILL leaves the load balancer's link
//! in its private wire namespace; the next start on the same interface
//! gives it back first, then takes over as usual, and its shutdown leaves
//! the interface as it was before either engine.
//!
//! The engine that dies runs in a child: this test's own executable,
//! started again on this test alone with `SLUICE_LB_CHILD_NS` set.
//! Needs root.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_lb::engine::start_emulated;
use sluice_tests::Netns;

const CHILD_ENV: &str = "SLUICE_LB_CHILD_NS";
const READY_ENV: &str = "SLUICE_LB_CHILD_READY";
const TEST: &str = "emulated_link_comes_back_after_a_kill";

fn addrs(ns: &Netns) -> String {
    ns.ip(&["-br", "addr", "show", "dev", "eth0"])
        .unwrap_or_default()
}

#[test]
fn emulated_link_comes_back_after_a_kill() {
    if let Ok(ns) = std::env::var(CHILD_ENV) {
        // The child: take over eth0, say so, and wait to be killed.
        let engine = sluice_tests::in_ns(&ns, || start_emulated("eth0"))
            .expect("in the namespace")
            .expect("the emulated engine starts");
        std::fs::write(std::env::var(READY_ENV).expect("ready file"), "ready").expect("ready file");
        std::mem::forget(engine);
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    let lb = Netns::new("lbrec").expect("namespace");
    let peer = Netns::new("lbrecp").expect("namespace");
    lb.veth_to("eth0", &peer, "eth0").expect("veth");
    lb.addr_add("eth0", "192.0.2.1/24").expect("address");
    lb.ip(&["route", "add", "198.51.100.0/24", "via", "192.0.2.254"])
        .expect("a route via the link");
    let before = addrs(&lb);

    let ready = std::env::temp_dir().join(format!("sluice-lb-ready-{}", std::process::id()));
    let _ = std::fs::remove_file(&ready);
    let mut child = Command::new(std::env::current_exe().expect("test executable"))
        .args(["--exact", TEST, "--test-threads", "1"])
        .env(CHILD_ENV, lb.name())
        .env(READY_ENV, &ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("child");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() && Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the child exited before its engine started: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&ready);
    if Instant::now() >= deadline {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child's engine did not start within 30 s");
    }
    // SIGKILL: no teardown runs.
    child.kill().expect("kill");
    child.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(5);
    while lb.ip(&["link", "show", "dev", "eth0"]).is_ok() && Instant::now() < deadline {
        // The TAP goes with the killed process's descriptors.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        lb.ip(&["link", "show", "dev", "eth0"]).is_err(),
        "the link is still in the dead engine's wire namespace"
    );

    // A new engine gives it back, then takes over.
    let engine = lb
        .in_ns(|| start_emulated("eth0"))
        .expect("in the namespace")
        .expect("a new engine starts over the dead one's leftovers");
    assert_eq!(
        addrs(&lb).split_whitespace().nth(2),
        before.split_whitespace().nth(2),
        "the TAP carries the address"
    );
    engine.shutdown().expect("shutdown");
    assert_eq!(addrs(&lb), before, "the link is back as it was");
    let routes = lb.ip(&["route", "show"]).expect("routes");
    assert!(
        routes.contains("198.51.100.0/24 via 192.0.2.254"),
        "routes restored: {routes}"
    );
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("sluice-lbw-{}-", child.id())))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "the dead engine's wire namespace is gone: {left:?}"
    );
}
