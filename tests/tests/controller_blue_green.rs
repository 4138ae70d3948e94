//! Blue-green upgrades under live traffic, end to end: a cluster run by
//! `sluice-controller` with the `netns` provider, a node pool of 2 nodes
//! in each of 2 zones, `sluice-lb` in front, and clients looping over a
//! `Cluster` and a `Local` Service through it while the `sluice` CLI sets
//! the pool to blue-green and upgrades it through every phase, rolls a
//! second upgrade back in the drain phase, and completes a third during
//! its soak; the controller is killed -9 between the first upgrade's
//! batches and during the rollback. No request may fail, for either
//! Service, in any phase, but those of the `Local` Service in a phase the
//! operation warned about (U5, parallel drains); no
//! node is left cordoned; each ends with one side only. The scene is
//! `sluice_tests::upgrade_scene`, the one `cargo xtask lab` runs too,
//! under each engine.
//!
//! Everything goes when the cluster guard drops, also on failure (the
//! logs are printed first). Waits are bounded; nothing is timed.

use sluice_tests::upgrade_scene::bed;
use sluice_tests::Engine;

fn blue_green_under_traffic(tag: &str, engine: Engine) {
    // spec: B1, B2, B3, B4, B5, B6, U1, U5
    let (mut c, scene) = bed(tag, &["g-a", "g-b"], engine);
    let report = scene.run_blue_green(&mut c).expect("the scene ran");
    // Strict. The ENETUNREACH once seen (an empty green node deleted
    // while the load balancer still chose it) is gone with the drain's
    // load-balancer gate; a `Local` request lost while a batch of two
    // drains at once is one the operation warned of (U5), printed.
    report.assert_all();
}

#[test]
fn blue_green_upgrades_under_traffic_emulated() {
    blue_green_under_traffic("bge", Engine::Emulated);
}

#[test]
fn blue_green_upgrades_under_traffic_kernel() {
    blue_green_under_traffic("bgk", Engine::Kernel);
}
