//! Blue-green upgrades through `sluice node-pools update|upgrade|
//! complete-upgrade|rollback` and `operations wait|describe`, against a
//! live controller whose pool loop makes simulated nodes (`--node-provider
//! sim:1`). Every wait is bounded.

use std::path::Path;
use std::time::Duration;

mod common;
use common::{
    assert_phases_in_order, code, run, start_upgrade, text, update, wait_for, wait_phases,
    with_pool, Controller, BLOCKED, ERROR, OK, USAGE,
};

const LIMIT: Duration = Duration::from_secs(90);

const POOL: &str = "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a, zone-b]
  initialNodeCount: 2
  version: \"1.33.2\"
  config: {capacity: {cpu: \"2\", memory: 4Gi}}
";

/// The kubelet versions of the pool's nodes, with how many are cordoned.
fn nodes(c: &Controller) -> (Vec<String>, usize) {
    let o = c.kubectl(&[
        "get",
        "nodes",
        "-l",
        "cloud.google.com/gke-nodepool=pool-a",
        "-o",
        "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}",
    ]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let mut versions: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    versions.sort();
    let cordoned = text.lines().filter(|l| l.ends_with("true")).count();
    (versions, cordoned)
}

/// Wait until the pool is exactly four nodes at `version`, none cordoned.
fn nodes_at(c: &Controller, version: &str) {
    let want = vec![version.to_string(); 4];
    wait_for(
        LIMIT,
        &format!("four schedulable nodes at {version}"),
        || (nodes(c) == (want.clone(), 0)).then_some(()),
    );
}

fn pool_a(name: &str) -> Controller {
    let c = with_pool(name, POOL);
    nodes_at(&c, "v1.33.2");
    c
}

/// The operation's phase as `describe --format json` reads it.
fn phase(kc: &Path, name: &str) -> Option<String> {
    let o = run(kc, &["operations", "describe", name, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    v["status"]["blueGreen"]["phase"].as_str().map(String::from)
}

#[test]
fn a_pool_upgrades_blue_green_completes_early_and_rolls_back() {
    let c = pool_a("blue-green");
    let kc = c.kubeconfig();

    // spec: B3, B4 — gcloud's flags set the strategy and its settings.
    let o = update(
        &kc,
        &[
            "--enable-blue-green-upgrade",
            "--standard-rollout-policy=batch-node-count=1,batch-soak-duration=1s",
            "--node-pool-soak-duration=2s",
        ],
    );
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    assert!(
        text(&o).contains("strategy BLUE_GREEN, batchNodeCount 1"),
        "{}",
        text(&o)
    );

    // spec: B1–B5 — the phases in order, green alone at the end.
    let first = start_upgrade(&kc, "1.33.5", &[]);
    let (exit, phases, out) = wait_phases(&kc, &first);
    assert_eq!(exit, Some(OK), "{out}");
    let order = [
        "CREATING_GREEN_POOL",
        "CORDONING_BLUE_POOL",
        "DRAINING_BLUE_POOL",
        "NODE_POOL_SOAKING",
        "DELETING_BLUE_POOL",
    ];
    assert_phases_in_order(&phases, &order, &out);
    assert!(
        phases.contains(&"NODE_POOL_SOAKING".to_string()),
        "{phases:?}"
    );
    nodes_at(&c, "v1.33.5");
    let o = c.kubectl(&[
        "get",
        "nodepool",
        "pool-a",
        "-o",
        "jsonpath={.status.updateInfo}",
    ]);
    assert_eq!(
        text(&o).trim(),
        "",
        "updateInfo is removed once done: {}",
        text(&o)
    );

    // spec: B4 — complete-upgrade ends a long soak at once.
    let o = update(&kc, &["--node-pool-soak-duration=3600s"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let second = start_upgrade(&kc, "1.33.6", &[]);
    // COMPLETE outside the soak is refused, naming the phase.
    let o = run(&kc, &["node-pools", "complete-upgrade", "pool-a"]);
    if code(&o) != Some(OK) {
        assert!(text(&o).contains("NODE_POOL_SOAKING"), "{}", text(&o));
    }
    wait_for(LIMIT, "the soak", || {
        (phase(&kc, &second).as_deref() == Some("NODE_POOL_SOAKING")).then_some(())
    });
    // kubectl shows the pool's phase.
    let o = c.kubectl(&["get", "nodepools"]);
    assert!(text(&o).contains("UPGRADE"), "{}", text(&o));
    assert!(text(&o).contains("NODE_POOL_SOAKING"), "{}", text(&o));
    let o = run(&kc, &["operations", "describe", &second]);
    assert!(
        text(&o).contains("blueGreen: NODE_POOL_SOAKING"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("soak ends in"), "{}", text(&o));
    let o = run(&kc, &["node-pools", "complete-upgrade", "pool-a"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let (exit, _, out) = wait_phases(&kc, &second);
    assert_eq!(exit, Some(OK), "{out}");
    nodes_at(&c, "v1.33.6");

    // spec: B6 — rolled back while draining: blue serves again, green goes.
    let o = update(
        &kc,
        &["--standard-rollout-policy=batch-node-count=1,batch-soak-duration=3600s"],
    );
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let third = start_upgrade(&kc, "1.33.7", &[]);
    wait_for(LIMIT, "the drain phase", || {
        (phase(&kc, &third).as_deref() == Some("DRAINING_BLUE_POOL")).then_some(())
    });
    let o = run(&kc, &["node-pools", "rollback", "pool-a", "--respect-pdb"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let (exit, phases, out) = wait_phases(&kc, &third);
    assert_eq!(exit, Some(BLOCKED), "{out}");
    assert!(out.contains("ROLLED_BACK"), "{out}");
    assert!(
        phases.contains(&"ROLLBACK_STARTED".to_string()),
        "{phases:?}"
    );
    nodes_at(&c, "v1.33.6");
}

#[test]
fn bad_blue_green_input_is_refused_and_changes_nothing() {
    let c = pool_a("blue-green-bad");
    let kc = c.kubeconfig();
    let settings = |c: &Controller| {
        let o = c.kubectl(&[
            "get",
            "nodepool",
            "pool-a",
            "-o",
            "jsonpath={.spec.upgradeSettings}",
        ]);
        text(&o)
    };
    let before = settings(&c);
    // Refused by the flags' parser (usage), before any request.
    for bad in [
        "--standard-rollout-policy=batch-percent=1.5",
        "--standard-rollout-policy=batch-node-count=-1",
        "--standard-rollout-policy=batch-node-count=1,batch-percent=0.5",
        "--standard-rollout-policy=batch-size=2",
        "--node-pool-soak-duration=soon",
    ] {
        let o = update(&kc, &["--enable-blue-green-upgrade", bad]);
        assert_eq!(code(&o), Some(USAGE), "{bad}: {}", text(&o));
    }
    // Refused by the API server, naming the field.
    let o = update(
        &kc,
        &[
            "--enable-blue-green-upgrade",
            "--node-pool-soak-duration=700000s",
        ],
    );
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("nodePoolSoakDuration"), "{}", text(&o));
    let o = update(&kc, &["--standard-rollout-policy=batch-node-count=1"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(
        text(&o).contains("only with strategy BLUE_GREEN"),
        "{}",
        text(&o)
    );
    let o = update(&kc, &[]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("nothing to update"), "{}", text(&o));
    assert_eq!(settings(&c), before, "a refused update changed the pool");
    // No upgrade to complete.
    let o = run(&kc, &["node-pools", "complete-upgrade", "pool-a"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("no upgrade operation"), "{}", text(&o));
    // COMPLETE of a surge upgrade is refused by the API.
    let o = run(
        &kc,
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--async",
        ],
    );
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let o = run(&kc, &["node-pools", "complete-upgrade", "pool-a"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    // (The surge upgrade may have finished already: then there is none.)
    let out = text(&o);
    assert!(
        out.contains("not BLUE_GREEN") || out.contains("nothing to complete"),
        "{out}"
    );
}
