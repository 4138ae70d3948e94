//! The binary's refusals: bad flags and a bad configuration file end it at
//! once with an error naming what is wrong, before any engine starts.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-lb"))
        .args(args)
        .env_remove("SLUICE_LB_CONFIG")
        .env_remove("SLUICE_LB_KUBECONFIG")
        .env_remove("SLUICE_LB_ENGINE")
        .env_remove("SLUICE_LB_BPF_OBJECT")
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--interface lb0 --config PATH` and `more`.
fn with_config(path: &str, more: &[&str]) -> (bool, String) {
    let mut args = vec!["--interface", "lb0", "--config", path];
    args.extend_from_slice(more);
    run(&args)
}

/// A file removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str, text: &str) -> TempFile {
        let p = std::env::temp_dir().join(format!("sluice-lb-{tag}-{}.yaml", std::process::id()));
        std::fs::write(&p, text).expect("write");
        TempFile(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_bad_file_is_refused_naming_the_file_and_the_field() {
    let f = TempFile::new(
        "bad",
        "services:\n- name: s\n  frontends:\n  - {ipAddress: 198.19.0.10, port: 80, protocol: TCP}\n  - {ipAddress: 198.19.0.10, port: 80000, protocol: TCP}\n",
    );
    let (ok, err) = with_config(f.path(), &["--engine", "emulated"]);
    assert!(!ok);
    assert!(err.contains(f.path()), "{err}");
    assert!(err.contains("services[0].frontends[1].port"), "{err}");
    let (ok, err) = run(&["--interface", "lb0", "--config", "/nonexistent/lb.yaml"]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/lb.yaml"), "{err}");
}

#[test]
fn bad_flags_are_refused_naming_the_flag() {
    let (ok, err) = run(&["--interface", "lb0"]);
    assert!(!ok);
    assert!(
        err.contains("--kubeconfig") || err.contains("--config"),
        "{err}"
    );
    let f = TempFile::new("good", "services: []\n");
    let (ok, err) = with_config(f.path(), &["--engine", "emulated", "--bpf-object", "x.o"]);
    assert!(!ok);
    assert!(err.contains("--bpf-object"), "{err}");
    let (ok, err) = with_config(f.path(), &["--metrics-bind-address", "nope"]);
    assert!(!ok);
    assert!(err.contains("--metrics-bind-address"), "{err}");
}
