//! Memory comes back after a large state shrinks (issue 8: an agent that
//! once held 10 000 Services × 10 endpoints stayed at 195 MB after the state
//! went back to one Service). Alone in its test binary, so the process's
//! resident memory is this test's.

use std::time::Duration;

mod common;
use common::manifests::many_services;
use common::runner_loop::{Loop, TempDir};
use sluice_agent::state::source::FileSource;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n\
                    spec: {podCIDRs: [198.19.1.0/24]}\n\
                    status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}\n";

/// Tick until the status file says `synced` (bounded).
fn settle_until_synced(l: &mut Loop) {
    for _ in 0..200 {
        l.tick();
        if l.status()["synced"] == true {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("not synced: {}", l.status());
}

#[test]
fn memory_comes_back_after_a_large_state_shrinks() {
    let dir = TempDir::new("memory");
    let path = dir.0.join("state.yaml");
    let small = format!("{NODE}{}", many_services(1, 1));
    std::fs::write(&path, &small).expect("write");
    let mut l = Loop::start_with(dir, Box::new(FileSource::new(&path)));
    settle_until_synced(&mut l);
    let before = rss_kib();

    // 2 000 Services × 10 endpoints: about 20 MB of tables and state here.
    std::fs::write(&path, format!("{NODE}{}", many_services(2_000, 10))).expect("write");
    settle_until_synced(&mut l);
    assert_eq!(l.status()["services"], 2_000);
    let big = rss_kib();

    std::fs::write(&path, &small).expect("write");
    settle_until_synced(&mut l);
    assert_eq!(l.status()["services"], 1);
    let after = rss_kib();

    let grew = big.saturating_sub(before);
    let kept = after.saturating_sub(before);
    assert!(
        grew > 10_000,
        "the large state should cost memory: {before} -> {big} KiB"
    );
    assert!(
        kept * 2 < grew,
        "most of the {grew} KiB should come back: RSS {before} -> {big} -> {after} KiB"
    );
}
