//! Two controllers on one etcd: both serve the API, exactly one leads
//! (renews the `kube-system/sluice-controller` Lease), and when the leader
//! is killed with `kill -9` the other takes over within 15 s. That the two
//! never lead at once is the store's fenced election
//! (controller/store/tests/leader.rs); here the Lease's transitions count
//! exactly one change of holder.

mod common;
use common::{start_etcd, Server};

use std::time::{Duration, Instant};

/// The bound on a takeover.
const TAKEOVER: Duration = Duration::from_secs(15);

fn holder(s: &Server) -> Option<(String, i64)> {
    let o = s.kubectl(
        "admin",
        &[
            "get",
            "lease",
            "-n",
            "kube-system",
            "sluice-controller",
            "-o",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    Some((
        v["spec"]["holderIdentity"].as_str()?.to_string(),
        v["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
    ))
}

fn wait_holder(s: &Server, want: &str, bound: Duration) -> (i64, Duration) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < bound {
        if let Some((h, t)) = holder(s) {
            if h == want {
                return (t, start.elapsed());
            }
            last = Some((h, t));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "{want} did not hold the Lease within {bound:?} (last {last:?})\n{}",
        s.log()
    );
}

#[test]
fn one_leader_and_a_takeover_after_kill_9() {
    let etcd = start_etcd();
    let mut a = Server::start_with("lead-a", Some(etcd.endpoint()), Some("ctl-a"));
    wait_holder(&a, "ctl-a", Duration::from_secs(20));
    let b = Server::start_with("lead-b", Some(etcd.endpoint()), Some("ctl-b"));
    // Both serve the API; b waits.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(holder(&b).map(|h| h.0).as_deref(), Some("ctl-a"));
    assert!(!b.log().contains("leader: running"), "{}", b.log());

    a.kill9();
    let (transitions, took) = wait_holder(&b, "ctl-b", TAKEOVER);
    eprintln!("takeover after kill -9 seen after {took:?}");
    assert_eq!(transitions, 1, "the holder changed exactly once");
    assert!(b.log().contains("leader: running"), "{}", b.log());
}
