//! Node-pool upgrades end to end on both stores: the controller's upgrade
//! loop runs `Operation`s written with the real kubectl against pools of
//! simulated nodes (`--node-provider sim:1`), behind the cluster's
//! maintenance policy.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{merge_patch, ok, wait_for, wait_until, write, Backend, Server};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(90);

fn json(s: &Server, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, "admin", &a)).unwrap_or(Value::Null)
}

/// Each Node of pool-a with its kubelet version.
fn versions(s: &Server) -> BTreeMap<String, String> {
    let list = json(
        s,
        &["get", "nodes", "-l", "cloud.google.com/gke-nodepool=pool-a"],
    );
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                n["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// Waits until pool-a is 4 Nodes, all on `version`; a timeout shows
/// the Nodes, the operations and the controller's log tail.
fn on_version(s: &Server, version: &str) -> BTreeMap<String, String> {
    let want = format!("v{version}");
    wait_until(
        LONG,
        &format!("4 nodes on {version}"),
        || versions(s),
        |v| v.len() == 4 && v.values().all(|v| *v == want),
        || {
            let log = s.log();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            let ops = ok(s, "admin", &["get", "operations", "-o", "wide"]);
            let pool = ok(s, "admin", &["get", "nodepool", "pool-a", "-o", "yaml"]);
            format!(
                "operations:\n{ops}\npool:\n{pool}\nlog tail:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        },
    )
}

fn operation(s: &Server, name: &str) -> Value {
    json(s, &["get", "operation", name])
}

fn state(s: &Server, name: &str) -> String {
    operation(s, name)["status"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn upgrade(name: &str, kind: &str, version: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1
kind: Operation
metadata: {{name: {name}}}
spec:
  operationType: {kind}
  targetLink: /apis/sluice.dev/v1/nodepools/pool-a
  nodeVersion: '{version}'
  upgradeSettings: {{maxSurge: 1, maxUnavailable: 0}}
"
    )
}

/// A cluster whose daily 8-hour window opens 12 hours from now, so it is
/// closed for the whole test whatever the time of day it runs at (a fixed
/// 00:00-08:00 window made the test fail every night: it was open).
fn closed_now() -> String {
    const DAY: u64 = 86_400;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let start = (now + 12 * 3600) % DAY;
    let end = start + 8 * 3600;
    let at = |day: u64, s: u64| {
        format!(
            "2020-01-{:02}T{:02}:{:02}:{:02}Z",
            1 + day,
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    };
    format!(
        "apiVersion: sluice.dev/v1
kind: Cluster
metadata: {{name: default}}
spec:
  releaseChannel: {{channel: REGULAR}}
  maintenancePolicy:
    window:
      recurringWindow:
        window: {{startTime: '{}', endTime: '{}'}}
        recurrence: FREQ=DAILY
",
        at(0, start),
        at(end / DAY, end % DAY)
    )
}

fn upgrades_run_behind_the_policy(backend: Backend) {
    let s = Server::start_on(
        &format!("upgrades-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true", "--node-provider", "sim:1"],
    );
    let pool = write(
        &s,
        "pool.yaml",
        "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a, zone-b]
  initialNodeCount: 2
  version: '1.33.2'
  config: {capacity: {cpu: '2', memory: 4Gi}}
",
    );
    ok(&s, "admin", &["apply", "-f", &pool]);
    let first = on_version(&s, "1.33.2");

    // spec: U1 — a manual upgrade runs at once (M8), one zone at a time,
    // each node replaced by a surge node of the new version.
    let f = write(&s, "op-1.yaml", &upgrade("op-1", "UPGRADE_NODES", "1.33.5"));
    ok(&s, "admin", &["apply", "-f", &f]);
    wait_for(LONG, "op-1 done", || {
        (state(&s, "op-1") == "DONE").then_some(())
    });
    // The Nodes of the deleted instances go a moment after (the sim's
    // kubelets and the pool loop remove them).
    let after = on_version(&s, "1.33.5");
    assert!(
        after.keys().all(|n| !first.contains_key(n)),
        "every node was replaced: {first:?} -> {after:?}"
    );
    let op = operation(&s, "op-1");
    let metrics = &op["status"]["progress"]["metrics"];
    let metric = |name: &str| {
        metrics
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["name"] == name)
            .and_then(|m| m["intValue"].as_i64())
    };
    assert_eq!(metric("nodes_total"), Some(4), "{op}");
    assert_eq!(metric("nodes_upgraded"), Some(4), "{op}");
    assert!(op["status"]["endTime"].is_string(), "{op}");
    let pool = json(&s, &["get", "nodepool", "pool-a"]);
    assert_eq!(
        pool["spec"]["version"], "1.33.5",
        "the pool moved with its nodes"
    );

    // spec: M1 — an automatic upgrade waits for the window, and says so;
    // nothing is touched meanwhile.
    let f = write(&s, "cluster.yaml", &closed_now());
    ok(&s, "admin", &["apply", "-f", &f]);
    let f = write(
        &s,
        "op-2.yaml",
        &upgrade("op-2", "AUTO_UPGRADE_NODES", "1.33.6"),
    );
    ok(&s, "admin", &["apply", "-f", &f]);
    let why = wait_for(LONG, "op-2 waiting for the window", || {
        let op = operation(&s, "op-2");
        let msg = op["status"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (op["status"]["status"] == "PENDING" && msg.contains("window closed")).then_some(msg)
    });
    assert!(why.contains("next at"), "{why}");
    // spec: U1 — one upgrade of a pool at a time: a second waits for the first.
    let f = write(&s, "op-3.yaml", &upgrade("op-3", "UPGRADE_NODES", "1.33.7"));
    ok(&s, "admin", &["apply", "-f", &f]);
    let waiting = wait_for(LONG, "op-3 waiting for op-2", || {
        let op = operation(&s, "op-3");
        let msg = op["status"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        msg.contains("op-2").then_some(msg)
    });
    assert!(waiting.contains("waiting for operation op-2"), "{waiting}");
    assert_eq!(
        versions(&s),
        after,
        "nothing moved while the window is closed"
    );

    // The policy lifted: the gate opens and the queued upgrades run in
    // turn.
    merge_patch(
        &s,
        &["cluster", "default"],
        r#"{"spec":{"maintenancePolicy":null}}"#,
    );
    wait_for(LONG, "op-2 done", || {
        (state(&s, "op-2") == "DONE").then_some(())
    });
    wait_for(LONG, "op-3 done", || {
        (state(&s, "op-3") == "DONE").then_some(())
    });
    on_version(&s, "1.33.7");
    assert_eq!(
        json(&s, &["get", "nodepool", "pool-a"])["spec"]["version"],
        "1.33.7"
    );

    // spec: M1 — an auto-upgrading pool follows the control plane: a
    // newer control-plane version makes an AUTO_UPGRADE_NODES operation,
    // which runs (no policy now) to the end.
    merge_patch(
        &s,
        &["nodepool", "pool-a"],
        r#"{"spec":{"management":{"autoUpgrade":true}}}"#,
    );
    merge_patch(
        &s,
        &["cluster", "default", "--subresource=status"],
        r#"{"status":{"currentMasterVersion":"1.34.0"}}"#,
    );
    let auto = "auto-upgrade-pool-a-1.34.0";
    wait_for(LONG, "the automatic upgrade done", || {
        (state(&s, auto) == "DONE").then_some(())
    });
    assert_eq!(
        operation(&s, auto)["spec"]["operationType"],
        "AUTO_UPGRADE_NODES"
    );
    on_version(&s, "1.34.0");

    // An operation deleted mid-way: the marks and drains it left on the
    // nodes are lifted (no node is left cordoned by an upgrade that will
    // never finish it).
    let f = write(&s, "op-4.yaml", &upgrade("op-4", "UPGRADE_NODES", "1.34.1"));
    ok(&s, "admin", &["apply", "-f", &f]);
    let marked = || -> Vec<String> {
        let list = json(
            &s,
            &["get", "nodes", "-l", "cloud.google.com/gke-nodepool=pool-a"],
        );
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| {
                let a = &n["metadata"]["annotations"];
                !a["sluice.dev/upgrading"].is_null()
                    || !a["sluice.dev/drain"].is_null()
                    || n["spec"]["unschedulable"] == true
            })
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    wait_for(LONG, "a node marked by op-4", || {
        (!marked().is_empty()).then_some(())
    });
    ok(&s, "admin", &["delete", "operation", "op-4"]);
    wait_for(LONG, "no node left marked", || {
        marked().is_empty().then_some(())
    });

    // spec: U6 — no rollback after completion: the API refuses it,
    // naming why.
    let out = s.kubectl(
        "admin",
        &[
            "patch",
            "operation",
            "op-3",
            "--type=merge",
            "-p",
            r#"{"spec":{"action":"ROLLBACK"}}"#,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "a rollback after DONE was accepted");
    assert!(err.contains("downgrade"), "{err}");
}

on_both_stores!(upgrades_run_behind_the_policy);
