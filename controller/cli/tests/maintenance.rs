//! `sluice maintenance` as a process, reading the policy from a file.

use std::process::{Command, Output};

mod common;
use common::HOLIDAYS;
use sluice_tests::ScratchDir;

const ALLOWED: i32 = 0;
const ERROR: i32 = 1;
const USAGE: i32 = 2;
const BLOCKED: i32 = 10;

/// A policy file in its own scratch directory, gone with it.
struct PolicyFile {
    _dir: ScratchDir,
    path: String,
}

fn file(name: &str, text: &str) -> PolicyFile {
    let dir = ScratchDir::new("cli-policy");
    let path = dir.write(name, text).display().to_string();
    PolicyFile { _dir: dir, path }
}

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        // Never the developer's cluster.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("run sluice")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn holidays() -> PolicyFile {
    file("holidays.yaml", HOLIDAYS)
}

fn check(at: &str, event: &str) -> Output {
    sluice(&[
        "maintenance",
        "check",
        "--policy-file",
        &holidays().path,
        "--at",
        at,
        "--event",
        event,
    ])
}

#[test]
fn the_holiday_example_from_a_file() {
    // spec: M5 — blocked: node patch Nov 25, CP minor Dec 20, CP patch
    // Dec 25, node minor Jan 1 (inside the daily window, 04:00 UTC).
    for (at, event, by) in [
        ("2026-11-25T04:00:00Z", "node-patch", vec!["black-friday"]),
        (
            "2026-12-20T04:00:00Z",
            "cp-minor",
            vec!["holiday-minor", "year-end"],
        ),
        (
            "2026-12-25T04:00:00Z",
            "control-plane-patch",
            vec!["year-end"],
        ),
        (
            "2027-01-01T04:00:00Z",
            "node-minor",
            vec!["holiday-minor", "year-end"],
        ),
    ] {
        let o = check(at, event);
        assert_eq!(
            o.status.code(),
            Some(BLOCKED),
            "{at} {event}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let out = stdout(&o);
        assert!(out.starts_with("blocked: "), "{out}");
        for name in by {
            assert!(
                out.contains(&format!("maintenance exclusion {name} (")),
                "{out}"
            );
        }
    }
    // Allowed: a CP patch on Nov 10 and VM disruption on Dec 10.
    for (at, event, until) in [
        ("2026-11-10T04:00:00Z", "cp-patch", "2026-11-10T07:00:00Z"),
        (
            "2026-12-10T04:00:00Z",
            "node-disruption",
            "2026-12-10T07:00:00Z",
        ),
        (
            "2026-12-10T04:00:00Z",
            "cp-disruption",
            "2026-12-10T07:00:00Z",
        ),
    ] {
        let o = check(at, event);
        assert_eq!(
            o.status.code(),
            Some(ALLOWED),
            "{at} {event}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        assert_eq!(
            stdout(&o),
            format!(
                "allowed: {event_short} may start at {at}\n  until: {until}\n",
                event_short = event
            )
        );
    }
    // The next time a node patch may start after Nov 25: the exclusion
    // ends Dec 4 00:00, the window opens at 03:00.
    let o = check("2026-11-25T04:00:00Z", "node-patch");
    assert!(
        stdout(&o).contains("  next: 2026-12-04T03:00:00Z\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn json_for_scripts() {
    // spec: M5, M2 — the same instant written in another offset, the
    // same answer; times printed in UTC.
    let o = sluice(&[
        "maintenance",
        "check",
        "--format",
        "json",
        "--policy-file",
        &holidays().path,
        "--at",
        "2026-12-20T09:30:00+05:30",
        "--event",
        "cp-minor",
    ]);
    assert_eq!(o.status.code(), Some(BLOCKED), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["allowed"], false);
    assert_eq!(v["at"], "2026-12-20T04:00:00Z");
    assert_eq!(v["event"], "cp-minor");
    assert_eq!(v["next"], "2027-01-15T03:00:00Z");
    let by: Vec<&str> = v["blockedBy"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|b| b["exclusion"].as_str())
        .collect();
    assert_eq!(by, ["holiday-minor", "year-end"]);
    assert_eq!(v["blockedBy"][1]["scope"], "NO_UPGRADES");
}

#[test]
fn next_window_and_next_event() {
    let next = |args: &[&str]| {
        let mut all = vec!["maintenance", "next", "--policy-file"];
        let f = holidays();
        all.push(&f.path);
        all.extend(args);
        let o = sluice(&all);
        (o.status.code(), stdout(&o), stderr(&o))
    };
    // spec: M1 — without an event: the window's next opening.
    let (code, out, err) = next(&["--after", "2026-11-25T04:00:00Z"]);
    assert_eq!(code, Some(ALLOWED), "{err}");
    assert_eq!(
        out,
        "next: the maintenance window opens at 2026-11-26T03:00:00Z (after 2026-11-25T04:00:00Z)\n"
    );
    // spec: M5 — with one: after the exclusions that block it.
    let (code, out, err) = next(&[
        "--after",
        "2026-12-20T04:00:00Z",
        "--event",
        "node-minor",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(ALLOWED), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["next"], "2027-01-15T03:00:00Z");
}

#[test]
fn bad_input_is_named_never_a_panic() {
    let run = |args: &[&str]| {
        let o = sluice(args);
        (o.status.code(), stdout(&o), stderr(&o))
    };
    let hol = holidays();
    // Flags: exit 2 with clap's message naming the value.
    for (args, words) in [
        (
            "check --event node-pach",
            "unknown maintenance event \"node-pach\"",
        ),
        ("check --event node-patch --at 2026-13-01T00:00:00Z", "--at"),
        ("check --event node-patch --at tomorrow", "--at"),
        ("check", "--event"),
        ("next --format xml", "xml"),
    ] {
        let mut all = vec!["maintenance", "--policy-file", &hol.path];
        all.extend(args.split(' '));
        let (code, _, err) = run(&all);
        assert_eq!(code, Some(USAGE), "{args:?}: {err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
    let (code, _, err) = run(&[
        "maintenance",
        "check",
        "--policy-file",
        &hol.path,
        "--event",
        "",
    ]);
    assert_eq!(code, Some(USAGE), "{err}");
    assert!(err.contains("unknown maintenance event \"\""), "{err}");
    // Files: exit 1 naming the file and what is wrong.
    let long = HOLIDAYS.replace("dailyMaintenanceWindow: {startTime: \"03:00\"}", "dailyMaintenanceWindow: {startTime: \"03:00\"}\n      recurringWindow: {window: {startTime: \"2026-01-01T00:00:00Z\", endTime: \"2026-01-01T06:00:00Z\"}, recurrence: \"FREQ=DAILY\"}");
    let cases = [
        ("missing.yaml", None, "No such file"),
        ("empty.yaml", Some(String::new()), "empty"),
        ("truncated.yaml", Some(HOLIDAYS[..HOLIDAYS.len() / 2].to_string()), "truncated.yaml"),
        ("cut.yaml", Some(HOLIDAYS[..HOLIDAYS.len() - 30].to_string()), "cut.yaml"),
        ("dup.yaml", Some(format!("{HOLIDAYS}  releaseChannel: {{channel: RAPID}}\n")), "duplicate"),
        ("unknown.yaml", Some(HOLIDAYS.replace("{scope: NO_UPGRADES}", "{scope: NO_UPGRADES, reason: sales}")), "spec.maintenancePolicy.window.maintenanceExclusions.year-end.maintenanceExclusionOptions.reason"),
        ("kind.yaml", Some(HOLIDAYS.replace("kind: Cluster", "kind: NodePool")), "kind"),
        ("hourly.yaml", Some(HOLIDAYS.replace("dailyMaintenanceWindow: {startTime: \"03:00\"}", "recurringWindow: {window: {startTime: \"2026-01-01T00:00:00Z\", endTime: \"2026-01-01T06:00:00Z\"}, recurrence: \"FREQ=HOURLY\"}")), "FREQ=HOURLY is not allowed"),
        ("both.yaml", Some(long), "not both"),
    ];
    for (name, text, words) in cases {
        let f = text.map(|t| file(name, &t));
        let p = match &f {
            Some(f) => f.path.clone(),
            None => std::env::temp_dir()
                .join("sluice-cli-none")
                .join(name)
                .display()
                .to_string(),
        };
        let (code, out, err) = run(&[
            "maintenance",
            "check",
            "--policy-file",
            &p,
            "--event",
            "node-patch",
        ]);
        assert_eq!(code, Some(ERROR), "{name}: {out}{err}");
        assert!(err.contains(words), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    // No file and no reachable cluster: exit 1 naming the kubeconfig.
    let (code, _, err) = run(&["maintenance", "check", "--event", "node-patch"]);
    assert_eq!(code, Some(ERROR), "{err}");
    assert!(err.contains("kubeconfig"), "{err}");
}
