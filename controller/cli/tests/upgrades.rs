//! `sluice node-pools`, `operations` and `upgrade` against a live
//! controller whose pool loop makes simulated nodes (`--node-provider
//! sim:1`: they boot after 1 s) and whose upgrade loop runs the
//! operations the CLI creates. Every wait is bounded.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

mod common;
use common::{
    code, run, start_upgrade, text, wait_for, with_pool, Controller, BLOCKED, ERROR, OK, USAGE,
};

const LIMIT: Duration = Duration::from_secs(90);

const POOL: &str = "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a]
  initialNodeCount: 2
  version: \"1.33.2\"
  config: {capacity: {cpu: \"2\", memory: 4Gi}}
";

/// The kubelet versions of the pool's Ready nodes, sorted.
fn ready_versions(c: &Controller) -> Vec<String> {
    let o = c.kubectl(&[
        "get",
        "nodes",
        "-l",
        "cloud.google.com/gke-nodepool=pool-a",
        "-o",
        "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
    ]);
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" True").map(String::from))
        .collect();
    v.sort();
    v
}

/// Wait until the pool is exactly two Ready nodes at `version`.
fn nodes_at(c: &Controller, version: &str) {
    let want = vec![version.to_string(); 2];
    wait_for(LIMIT, &format!("two Ready nodes at {version}"), || {
        (ready_versions(c) == want).then_some(())
    });
}

fn pool_a(name: &str) -> Controller {
    let c = with_pool(name, POOL);
    nodes_at(&c, "v1.33.2");
    c
}

/// Cancel `name` and wait: it ends CANCELLED (exit 10, JSON lines).
fn cancel_and_wait(kc: &Path, name: &str) {
    let o = run(kc, &["operations", "cancel", name]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let o = run(
        kc,
        &[
            "operations",
            "wait",
            name,
            "--timeout",
            "90s",
            "--format",
            "json",
        ],
    );
    assert_eq!(code(&o), Some(BLOCKED), "{}", text(&o));
    let last: serde_json::Value = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("JSON lines: {}", text(&o)));
    assert_eq!(last["status"], "CANCELLED", "{}", text(&o));
}

#[test]
fn an_upgrade_runs_is_listed_rolls_back_and_cancels() {
    let c = pool_a("upgrades");
    let kc = c.kubeconfig();

    // spec: U1 — a manual upgrade runs to DONE, its progress printed, and
    // every node ends on the new version.
    let o = run(
        &kc,
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--timeout",
            "90s",
        ],
    );
    let out = text(&o);
    assert_eq!(code(&o), Some(OK), "{out}");
    assert!(out.contains("created operation operation-"), "{out}");
    assert!(out.contains("· DONE"), "{out}");
    assert!(out.contains("zone-a 2/2 · "), "{out}");
    nodes_at(&c, "v1.33.5");

    let o = run(&kc, &["operations", "list", "--pool", "pool-a"]);
    let table = text(&o);
    assert_eq!(code(&o), Some(OK), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("operation-"))
        .unwrap_or_else(|| panic!("no row in\n{table}"));
    assert!(
        row.contains("UPGRADE_NODES") && row.contains("pool-a"),
        "{row}"
    );
    assert!(row.contains("DONE"), "{row}");
    let first = row
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();

    let o = run(&kc, &["operations", "describe", &first, "--format", "json"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("describe JSON");
    assert_eq!(v["status"]["status"], "DONE");
    assert_eq!(v["spec"]["nodeVersion"], "1.33.5");
    // The table's PROGRESS is the stored metrics, upgraded/total.
    let m = |name: &str| {
        v["status"]["progress"]["metrics"]
            .as_array()
            .and_then(|ms| ms.iter().find(|x| x["name"] == name))
            .map(|x| x["intValue"].to_string())
            .unwrap_or_default()
    };
    let progress = format!("{}/{}", m("nodes_upgraded"), m("nodes_total"));
    assert!(row.ends_with(&progress), "{row} vs {progress}");

    // spec: U6 — no rollback after completion: the API's refusal shown.
    let o = run(&kc, &["node-pools", "rollback", "pool-a"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("downgrade"), "{}", text(&o));
    // A final operation is not cancelled.
    let o = run(&kc, &["operations", "cancel", &first]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("nothing to cancel"), "{}", text(&o));
    // The pool is at 1.33.5 now: nothing to upgrade.
    let o = run(
        &kc,
        &["node-pools", "upgrade", "pool-a", "--version", "1.33.5"],
    );
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("nothing to upgrade"), "{}", text(&o));

    // spec: U6 — rollback of a partly upgraded pool: the upgraded nodes
    // go back; wait ends with 10 (ROLLED_BACK).
    let second = start_upgrade(&kc, "1.33.7", &["--max-surge", "1"]);
    let o = run(&kc, &["node-pools", "rollback", "pool-a"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let o = run(&kc, &["operations", "wait", &second, "--timeout", "90s"]);
    assert_eq!(code(&o), Some(BLOCKED), "{}", text(&o));
    assert!(text(&o).contains("ROLLED_BACK"), "{}", text(&o));
    nodes_at(&c, "v1.33.5");
    let o = run(&kc, &["node-pools", "rollback", "pool-a"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("nothing to roll back"), "{}", text(&o));

    // spec: U6 — cancel: the nodes mid-upgrade finish, the wait ends 10.
    let third = start_upgrade(&kc, "1.33.6", &["--max-surge", "1"]);
    cancel_and_wait(&kc, &third);

    // Newest first.
    let o = run(&kc, &["operations", "list", "--format", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).expect("list JSON");
    let names: Vec<&str> = list
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, [third.as_str(), second.as_str(), first.as_str()]);
}

// The controller's upgrade loop does not run a CANCELLED operation
// (`controller/src/loops/upgrades/inputs.rs`, `live_upgrade` leaves
// CANCELLED out whatever `spec.action` says), so RESUME and ROLLBACK
// written on a cancelled upgrade are never acted on: these two fail
// (the wait times out) until the loop runs them.

/// Upgrade to 1.33.5, cancel, then `steer` (resume or rollback): the
/// wait ends with `want` and the nodes at `version`.
fn cancel_then(name: &str, steer: &[&str], want: i32, version: &str) {
    let c = pool_a(name);
    let kc = c.kubeconfig();
    let op = start_upgrade(&kc, "1.33.5", &["--max-surge", "1"]);
    cancel_and_wait(&kc, &op);
    let o = run(&kc, steer);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let o = run(&kc, &["operations", "wait", &op, "--timeout", "90s"]);
    assert_eq!(code(&o), Some(want), "{}", text(&o));
    nodes_at(&c, version);
}

/// spec: U6 — resume upgrades the rest of a cancelled upgrade.
#[test]
fn a_cancelled_upgrade_resumes() {
    cancel_then("resume", &["upgrade", "resume", "pool-a"], OK, "v1.33.5");
}

/// spec: U6 — rollback of a cancelled, partly upgraded pool restores it
/// (the wait ends ROLLED_BACK: 10).
#[test]
fn a_cancelled_upgrade_rolls_back() {
    cancel_then(
        "rollback",
        &["node-pools", "rollback", "pool-a"],
        BLOCKED,
        "v1.33.2",
    );
}

/// Bad input against a live API: each a one-line error, never a panic.
#[test]
fn bad_input_is_refused_clearly() {
    let c = Controller::start(
        "upgrades-bad",
        &["--controllers=true", "--node-provider", "sim:1"],
    );
    let kc = c.kubeconfig();
    let one_line = |o: &Output, code_: i32, want: &str| {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(code(o), Some(code_), "{}", text(o));
        assert!(err.contains(want), "{want:?} not in {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    let o = run(
        &kc,
        &["node-pools", "upgrade", "nope", "--version", "1.33.5"],
    );
    one_line(&o, ERROR, "node pool \"nope\" not found");
    for args in [
        &["operations", "describe", "operation-0-0000"][..],
        &["operations", "wait", "operation-0-0000"],
        &["operations", "cancel", "operation-0-0000"],
    ] {
        one_line(
            &run(&kc, args),
            ERROR,
            "operation \"operation-0-0000\" not found",
        );
    }
    let file = c.dir.join("pool.yaml");
    std::fs::write(&file, POOL).expect("pool manifest");
    let o = c.kubectl(&["apply", "-f", &file.display().to_string()]);
    assert_eq!(code(&o), Some(0), "{}", text(&o));
    // spec: U1, U2 — both 0 would upgrade nothing: the API's refusal.
    let o = run(
        &kc,
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--max-surge",
            "0",
            "--max-unavailable",
            "0",
            "--async",
        ],
    );
    one_line(&o, ERROR, "may not both be 0");
    let o = run(&kc, &["node-pools", "rollback", "pool-a"]);
    one_line(&o, ERROR, "has no upgrade operation");
    let o = run(
        &kc,
        &["node-pools", "upgrade", "pool-a", "--version", "1.33.2"],
    );
    one_line(&o, ERROR, "nothing to upgrade");
}

/// Bad flags and files, refused before any request.
#[test]
fn bad_flags_and_config_files_are_refused() {
    let scratch = sluice_tests::ScratchDir::new("cli-bad");
    let dir = scratch.path();
    let kc = dir.join("no.kubeconfig");
    let usage = [
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--max-surge",
            "-1",
        ][..],
        &["node-pools", "upgrade", "pool-a"],
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--config",
            "c.yaml",
        ],
        &["operations", "wait", "x", "--timeout", "soon"],
    ];
    for args in usage {
        let o = run(&kc, args);
        assert_eq!(code(&o), Some(USAGE), "{args:?}: {}", text(&o));
    }
    for (body, want) in [
        ("", "empty"),
        ("capacity: [", "c.yaml"),
        ("capacity: {cpu: '2', memory: 4Gi}\ncolour: red\n", "colour"),
    ] {
        let f = dir.join("c.yaml");
        std::fs::write(&f, body).expect("config");
        let o = run(
            &kc,
            &[
                "node-pools",
                "upgrade",
                "pool-a",
                "--config",
                &f.display().to_string(),
            ],
        );
        assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{want:?}: {err}"
        );
    }
}
