//! `sluice maintenance` against a live controller: the policy read from
//! the Cluster `default` through the API with the admin's kubeconfig
//! (`--kubeconfig` or `KUBECONFIG`). Needs the `sluice-controller` binary
//! (built by `cargo xtask test`; else `cargo build -p sluice-controller`,
//! or `SLUICE_CONTROLLER_BIN`) and kubectl (`cargo xtask setup`).

mod common;
use common::{sluice, text, Controller, HOLIDAYS};

const BLOCKED: i32 = 10;
const ERROR: i32 = 1;

#[test]
fn the_policy_is_read_through_the_api() {
    let c = Controller::start("maint", &["--controllers=false"]);
    let kc = c.kubeconfig();
    let check = [
        "maintenance",
        "check",
        "--at",
        "2026-11-25T04:00:00Z",
        "--event",
        "node-patch",
    ];
    // No Cluster yet: an error naming it.
    let o = sluice(Some(&kc), None, &check);
    assert_eq!(o.status.code(), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("Cluster \"default\""), "{}", text(&o));
    let manifest = c.dir.join("holidays.yaml");
    std::fs::write(&manifest, HOLIDAYS).expect("manifest");
    let m = manifest.display().to_string();
    let o = c.kubectl(&["apply", "-f", &m]);
    assert!(o.status.success(), "{}", text(&o));
    // spec: M2 — stored in UTC though written in UTC+01:00.
    let o = c.kubectl(&[
        "get",
        "clusters.sluice.dev",
        "default",
        "-o",
        "jsonpath={.spec.maintenancePolicy.window.maintenanceExclusions.black-friday.startTime}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "2026-11-19T00:00:00Z",
        "{}",
        text(&o)
    );
    // spec: M5 — a node patch on Nov 25 is blocked by black-friday, read
    // through the API with --kubeconfig, and with KUBECONFIG alike.
    for o in [
        sluice(Some(&kc), None, &check),
        sluice(None, Some(&kc), &check),
    ] {
        assert_eq!(o.status.code(), Some(BLOCKED), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("maintenance exclusion black-friday (NO_UPGRADES)"),
            "{out}"
        );
        assert!(out.contains("next: 2026-12-04T03:00:00Z"), "{out}");
    }
    // A CP patch on Nov 10 inside the window is allowed.
    let o = sluice(
        Some(&kc),
        None,
        &[
            "maintenance",
            "check",
            "--at",
            "2026-11-10T04:00:00Z",
            "--event",
            "cp-patch",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["until"], "2026-11-10T07:00:00Z");
}
