//! `sluice maintenance` against a live controller: the policy read from
//! the Cluster `default` through the API with the admin's kubeconfig
//! (`--kubeconfig` or `KUBECONFIG`). Needs the `sluice-controller` binary
//! (built by `cargo xtask test`; else `cargo build -p sluice-controller`,
//! or `SLUICE_CONTROLLER_BIN`) and kubectl (`cargo xtask setup`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::HOLIDAYS;

const BLOCKED: i32 = 10;
const ERROR: i32 = 1;

fn kubectl_bin() -> PathBuf {
    let p = std::env::var_os("SLUICE_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/sluice/kubectl-venv/bin/kubectl"));
    assert!(
        p.exists(),
        "{} missing: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// `init` and `serve` (API only) on a free loopback port; stopped and its
/// directory removed when dropped.
struct Controller {
    dir: PathBuf,
    child: Child,
}

impl Controller {
    fn start() -> Controller {
        let dir = std::env::temp_dir().join(format!("sluice-cli-live-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let bin = sluice_tests::cluster::controller_bin().unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&bin)
            .args(["init", "--server", &format!("https://127.0.0.1:{port}")])
            .args(["--nodes", "node-1", "--dir"])
            .arg(&dir)
            .output()
            .expect("run init");
        assert!(out.status.success(), "init: {out:?}");
        let log = std::fs::File::create(dir.join("serve.log")).expect("log");
        let child = Command::new(&bin)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--dir"])
            .arg(&dir)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--service-cluster-ip-range", "198.18.0.0/16"])
            .arg("--controllers=false")
            .stderr(log)
            .spawn()
            .expect("run serve");
        let c = Controller { dir, child };
        let start = Instant::now();
        while !c.kubectl(&["get", "--raw", "/healthz"]).status.success() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the controller did not come up:\n{}",
                std::fs::read_to_string(c.dir.join("serve.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        c
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .args(["--request-timeout", "10s"])
            .args(args)
            .output()
            .expect("run kubectl")
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sluice(kubeconfig: Option<&Path>, env: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    match env {
        Some(k) => cmd.env("KUBECONFIG", k),
        None => cmd.env_remove("KUBECONFIG"),
    };
    cmd.args(args).output().expect("run sluice")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_policy_is_read_through_the_api() {
    let c = Controller::start();
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
