//! Surge upgrades under live traffic (issue 12), end to end: a cluster run
//! by `sluice-controller` with the `netns` provider, a node pool of 2 nodes
//! in each of 2 zones, `sluice-lb` in front, and clients looping over a
//! `Cluster` and a `Local` Service through it while the `sluice` CLI
//! upgrades the pool (the controller killed -9 halfway), cancels and
//! resumes a second upgrade, and rolls back a third. No node may be left
//! cordoned or marked, each operation ends where U6 says, and no request
//! fails, for either Service, in any of the three. The scene is
//! `sluice_tests::upgrade_scene`, the one `cargo xtask lab` runs too. Under each engine (the agents' and the load
//! balancer's alike).
//!
//! Everything goes when the cluster guard drops, also on failure (the
//! logs are printed first). Waits are bounded; nothing is timed.

use sluice_tests::upgrade_scene::bed;
use sluice_tests::Engine;

fn upgrades_under_traffic(tag: &str, engine: Engine) {
    // spec: U1, U2, U3, U6, E1
    let (mut c, scene) = bed(tag, &["u-a", "u-b"], engine);
    let report = scene.run(&mut c).expect("the scene ran");
    for f in &report.figures {
        println!(
            "{}: {} node(s) in {:.1} s ({:.1} s per node), requests {:?}",
            f.phase,
            f.nodes_upgraded,
            f.seconds,
            f.per_node().unwrap_or(0.0),
            f.requests
        );
    }
    // spec: U1 — every check, the traffic's included: zero failed
    // requests for the `Cluster` and the `Local` Service in each phase,
    // as the lab asks. (A 1-in-200 allowance stood here while the losses'
    // causes were open: a restarted controller's loops deciding before
    // their caches were complete, flooded frames answered by every node.)
    let totals: u64 = report
        .figures
        .iter()
        .flat_map(|f| f.requests.values())
        .map(|(served, _)| served)
        .sum();
    assert!(totals > 0, "no traffic measured");
    let failed = report.failed();
    assert!(failed.is_empty(), "failed checks: {failed:#?}");
}

#[test]
fn surge_upgrades_under_traffic_emulated() {
    upgrades_under_traffic("upe", Engine::Emulated);
}

#[test]
fn surge_upgrades_under_traffic_kernel() {
    upgrades_under_traffic("upk", Engine::Kernel);
}
