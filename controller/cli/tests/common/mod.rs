//! What the CLI's tests share: the seed's policy, and a live controller
//! (`init` and `serve` on a free port) with kubectl and `sluice` run
//! against it. Needs the `sluice-controller` binary (built by `cargo
//! xtask test`; else `cargo build -p sluice-controller`, or
//! `SLUICE_CONTROLLER_BIN`) and kubectl (`cargo xtask setup`).
// Each test binary uses a part.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The seed's holiday season (spec M5) on a REGULAR cluster with a daily
/// window at 03:00 UTC, its times written in UTC+01:00.
pub const HOLIDAYS: &str = r#"apiVersion: sluice.dev/v1
kind: Cluster
metadata: {name: default}
spec:
  releaseChannel: {channel: REGULAR}
  maintenancePolicy:
    window:
      dailyMaintenanceWindow: {startTime: "03:00"}
      maintenanceExclusions:
        holiday-minor:
          startTime: "2026-09-30T01:00:00+01:00"
          endTime: "2027-01-15T01:00:00+01:00"
          maintenanceExclusionOptions: {scope: NO_MINOR_UPGRADES}
        black-friday:
          startTime: "2026-11-19T01:00:00+01:00"
          endTime: "2026-12-04T01:00:00+01:00"
        year-end:
          startTime: "2026-12-15T01:00:00+01:00"
          endTime: "2027-01-05T01:00:00+01:00"
          maintenanceExclusionOptions: {scope: NO_UPGRADES}
"#;

pub fn kubectl_bin() -> PathBuf {
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
pub struct Controller {
    pub dir: PathBuf,
    child: Child,
}

impl Controller {
    /// `args` are `serve`'s flags beyond the address and directories
    /// (`--controllers=false`, or `--node-provider sim:1`); `name` keeps
    /// the directories of tests in one process apart.
    pub fn start(name: &str, args: &[&str]) -> Controller {
        let dir =
            std::env::temp_dir().join(format!("sluice-cli-live-{name}-{}", std::process::id()));
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
            .args(args)
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

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
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

/// A controller whose pool loop makes simulated nodes (they boot after
/// 1 s), with `manifest` (a NodePool) applied.
pub fn with_pool(name: &str, manifest: &str) -> Controller {
    let c = Controller::start(name, &["--controllers=true", "--node-provider", "sim:1"]);
    let file = c.dir.join("pool.yaml");
    std::fs::write(&file, manifest).expect("pool manifest");
    let o = c.kubectl(&["apply", "-f", &file.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    c
}

pub fn sluice(kubeconfig: Option<&Path>, env: Option<&Path>, args: &[&str]) -> Output {
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

/// `sluice --kubeconfig KC ARGS…`.
pub fn run(kc: &Path, args: &[&str]) -> Output {
    sluice(Some(kc), None, args)
}

/// `sluice node-pools update pool-a ARGS…`.
pub fn update(kc: &Path, args: &[&str]) -> Output {
    let mut all = vec!["node-pools", "update", "pool-a"];
    all.extend_from_slice(args);
    run(kc, &all)
}

pub fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

/// The exit codes of `sluice` (its `exit` module).
pub const OK: i32 = 0;
pub const ERROR: i32 = 1;
pub const USAGE: i32 = 2;
pub const BLOCKED: i32 = 10;

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Poll `f` every 200 ms until it answers, failing after `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `sluice node-pools upgrade pool-a --version V FLAGS --async --format
/// json`: the operation's name.
pub fn start_upgrade(kc: &Path, version: &str, flags: &[&str]) -> String {
    let mut args = vec!["node-pools", "upgrade", "pool-a", "--version", version];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--async", "--format", "json"]);
    let o = run(kc, &args);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the operation as JSON");
    v["metadata"]["name"].as_str().expect("a name").to_string()
}

/// `sluice operations wait NAME --timeout 90s --format json`: its exit
/// code, the blue-green phases its lines showed (in order, without
/// repeats) and what it printed.
pub fn wait_phases(kc: &Path, name: &str) -> (Option<i32>, Vec<String>, String) {
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
    let mut phases: Vec<String> = Vec::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        if let Some(p) = v["phase"].as_str() {
            if phases.last().map(String::as_str) != Some(p) {
                phases.push(p.to_string());
            }
        }
    }
    (code(&o), phases, text(&o))
}

/// Every phase in `seen` is one of `order`, in that order (repeats and
/// phases a read missed allowed); `out` is shown on failure.
pub fn assert_phases_in_order(seen: &[String], order: &[&str], out: &str) {
    let mut at = 0;
    for p in seen {
        let i = order
            .iter()
            .position(|o| o == p)
            .unwrap_or_else(|| panic!("{p}: {out}"));
        assert!(i >= at, "phases out of order: {seen:?}");
        at = i;
    }
}
