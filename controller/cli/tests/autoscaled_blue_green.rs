//! An autoscaled blue-green upgrade against a live controller: the pool
//! loop makes simulated nodes (`--node-provider sim:1`), the cluster
//! autoscaler runs beside the upgrade loop, and `sluice operations wait`
//! follows the phases. Every wait is bounded.

use std::time::Duration;

mod common;
use common::{
    assert_phases_in_order, code, run, start_upgrade, text, wait_for, wait_phases, Controller,
    BLOCKED, ERROR, OK,
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
  autoscaling: {enabled: true, minNodeCount: 1, maxNodeCount: 4}
";

/// The pool's nodes: kubelet version, cordoned or not, the cordon's time.
fn nodes(c: &Controller) -> Vec<(String, bool, bool)> {
    let o = c.kubectl(&[
        "get",
        "nodes",
        "-l",
        "cloud.google.com/gke-nodepool=pool-a",
        "-o",
        "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable} {.metadata.annotations.sluice\\.dev/cordoned-at}{\"\\n\"}{end}",
    ]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let version = f.first().copied().unwrap_or_default().to_string();
            let cordoned = f.get(1).is_some_and(|s| *s == "true");
            let at = f.get(2).is_some_and(|s| !s.is_empty());
            (version, cordoned, at)
        })
        .collect()
}

fn autoscaled(c: &Controller, wait: &str) {
    let patch = format!(
        r#"{{"spec":{{"upgradeSettings":{{"strategy":"BLUE_GREEN","blueGreenSettings":{{"autoscaledRolloutPolicy":{{"waitForDrainDuration":"{wait}"}}}}}}}}}}"#
    );
    let o = c.kubectl(&["patch", "nodepool", "pool-a", "--type=merge", "-p", &patch]);
    assert_eq!(code(&o), Some(0), "{}", text(&o));
}

#[test]
fn an_autoscaled_pool_upgrades_blue_green_through_the_wait() {
    let c = Controller::start(
        "autoscaled-blue-green",
        &[
            "--controllers=true",
            "--node-provider",
            "sim:1",
            "--scale-down-unneeded-time",
            "3s",
        ],
    );
    let file = c.dir.join("pool.yaml");
    std::fs::write(&file, POOL).expect("pool manifest");
    let o = c.kubectl(&["apply", "-f", &file.display().to_string()]);
    assert_eq!(code(&o), Some(0), "{}", text(&o));
    wait_for(LIMIT, "four nodes at v1.33.2", || {
        let n = nodes(&c);
        (n.len() == 4 && n.iter().all(|(v, _, _)| v == "v1.33.2")).then_some(())
    });
    let kc = c.kubeconfig();

    // spec: A4 — the strategy needs the pool's autoscaling: refused
    // without it, naming the field.
    let o = c.kubectl(&[
        "patch",
        "nodepool",
        "pool-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"autoscaling":{"enabled":false},"upgradeSettings":{"strategy":"BLUE_GREEN","blueGreenSettings":{"autoscaledRolloutPolicy":{}}}}}"#,
    ]);
    assert_ne!(code(&o), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("spec.autoscaling.enabled"),
        "{}",
        text(&o)
    );

    // spec: A1, A2 — green from zero, blue cordoned with its time, the
    // wait as its own phase, then blue drained and deleted; no soak.
    autoscaled(&c, "8s");
    let op = start_upgrade(&kc, "1.33.5", &[]);
    wait_for(LIMIT, "blue cordoned with the time", || {
        let n = nodes(&c);
        let blue: Vec<_> = n.iter().filter(|(v, _, _)| v == "v1.33.2").collect();
        (!blue.is_empty() && blue.iter().all(|(_, cordoned, at)| *cordoned && *at)).then_some(())
    });
    let (exit, phases, out) = wait_phases(&kc, &op);
    assert_eq!(exit, Some(OK), "{out}");
    let order = [
        "CREATING_GREEN_POOL",
        "CORDONING_BLUE_POOL",
        "WAITING_TO_DRAIN_BLUE_POOL",
        "DRAINING_BLUE_POOL",
        "DELETING_BLUE_POOL",
    ];
    assert_phases_in_order(&phases, &order, &out);
    assert!(
        phases.contains(&"WAITING_TO_DRAIN_BLUE_POOL".to_string()),
        "{phases:?}"
    );
    wait_for(LIMIT, "only new nodes, one a zone at least", || {
        let n = nodes(&c);
        (n.len() >= 2 && n.iter().all(|(v, c, _)| v == "v1.33.5" && !c)).then_some(())
    });

    // spec: A4 — rollback is refused with a reason; cancel pauses.
    autoscaled(&c, "3600s");
    let second = start_upgrade(&kc, "1.33.6", &[]);
    wait_for(LIMIT, "the wait", || {
        let o = run(
            &kc,
            &["operations", "describe", &second, "--format", "json"],
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
        (v["status"]["blueGreen"]["phase"] == "WAITING_TO_DRAIN_BLUE_POOL").then_some(())
    });
    let o = run(&kc, &["node-pools", "rollback", "pool-a"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("cannot be rolled back"), "{}", text(&o));
    let o = run(&kc, &["operations", "cancel", &second]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let (exit, _, out) = wait_phases(&kc, &second);
    assert_eq!(exit, Some(BLOCKED), "{out}");
    assert!(out.contains("CANCELLED"), "{out}");
}
