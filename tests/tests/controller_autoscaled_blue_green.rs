//! An autoscaled blue-green upgrade under live traffic, end to end: a
//! cluster run by `sluice-controller` with the `netns` provider and its
//! cluster autoscaler, a node pool of 2 nodes in each of 2 zones made
//! autoscaled, `sluice-lb` in front, and clients looping over a `Cluster`
//! and a `Local` Service through it while the `sluice` CLI upgrades the
//! pool autoscaled blue-green with a wait of seconds; the controller is
//! killed -9 during the wait. Green grows from zero; blue ends gone and
//! nothing is left cordoned; no request fails, but those of the `Local`
//! Service in a phase the operation warned about (U5: its parallel drains
//! take the Service's serving pods away together). The scene
//! is `sluice_tests::upgrade_scene`, the one `cargo xtask lab` runs too,
//! under each engine.
//!
//! Everything goes when the cluster guard drops, also on failure. Waits
//! are bounded; nothing is timed.

use sluice_tests::upgrade_scene::bed;
use sluice_tests::Engine;

fn autoscaled_under_traffic(tag: &str, engine: Engine) {
    // spec: A1, A2, A4, U1, U5
    let (mut c, scene) = bed(tag, &["a-a", "a-b"], engine);
    let report = scene
        .run_autoscaled_blue_green(&mut c)
        .expect("the scene ran");
    // Strict: a drained blue node is deleted only once the load balancer
    // has let it go, so the Cluster Service loses nothing; the Local
    // Service's losses while all of blue drains at once are the ones the
    // operation warns of, and are printed.
    report.assert_all();
}

#[test]
fn autoscaled_blue_green_under_traffic_emulated() {
    autoscaled_under_traffic("abe", Engine::Emulated);
}

#[test]
fn autoscaled_blue_green_under_traffic_kernel() {
    autoscaled_under_traffic("abk", Engine::Kernel);
}
