//! `sluice-controller init` as a user runs it: the files, their modes, the
//! certificates proven by a TLS handshake, and refusals that write nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_sluice-controller");

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("sluice-ctl-init-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn init(dir: &Path, extra: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .arg("init")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run sluice-controller");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn yaml(path: &Path) -> serde_yaml::Value {
    serde_yaml::from_str(&fs::read_to_string(path).expect("read")).expect("yaml")
}

/// A TLS 1.3 handshake in memory between the API server's certificate and
/// a client trusting only the CA, for `name`.
fn handshake(dir: &Path, name: &str) -> Result<(), rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pem = |f: &str| fs::read(dir.join(f)).expect("pem");
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem("apiserver.crt").as_slice())
        .collect::<Result<_, _>>()
        .expect("certs");
    let key = rustls_pemfile::private_key(&mut pem("apiserver.key").as_slice())
        .expect("key")
        .expect("a key");
    let server_cfg = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem("ca.crt").as_slice()) {
        roots.add(c.expect("ca")).expect("add ca");
    }
    let client_cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string()).expect("name");
    let mut client = rustls::ClientConnection::new(Arc::new(client_cfg), server_name)?;
    let mut server = rustls::ServerConnection::new(Arc::new(server_cfg))?;
    for _ in 0..10 {
        let mut buf = Vec::new();
        client.write_tls(&mut buf).expect("client bytes");
        server.read_tls(&mut buf.as_slice()).expect("to server");
        server.process_new_packets()?;
        let mut buf = Vec::new();
        server.write_tls(&mut buf).expect("server bytes");
        client.read_tls(&mut buf.as_slice()).expect("to client");
        client.process_new_packets()?;
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
    }
    panic!("handshake did not finish");
}

#[test]
fn init_writes_a_ca_a_server_certificate_tokens_and_kubeconfigs() {
    let d = TempDir::new("ok");
    let (ok, out) = init(
        &d.0,
        &[
            "--server",
            "https://198.18.0.1:6443",
            "--nodes",
            "node-1,node-2",
            "--san",
            "api.sluice.test",
        ],
    );
    assert!(ok, "{out}");
    for (f, mode) in [
        ("ca.crt", 0o644),
        ("ca.key", 0o600),
        ("apiserver.crt", 0o644),
        ("apiserver.key", 0o600),
        ("tokens.csv", 0o600),
        ("admin.kubeconfig", 0o600),
        ("load-balancer.kubeconfig", 0o600),
        ("nodes/node-1.kubeconfig", 0o600),
        ("nodes/node-2.kubeconfig", 0o600),
    ] {
        let m = fs::metadata(d.0.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(m.permissions().mode() & 0o777, mode, "{f}");
    }
    // The serving certificate verifies against the CA for every name a
    // client may use, and for no other.
    for name in ["198.18.0.1", "127.0.0.1", "localhost", "api.sluice.test"] {
        handshake(&d.0, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(handshake(&d.0, "other.sluice.test").is_err());

    // One token per identity, each in its kubeconfig.
    let tokens = sluice_controller::identity::parse(
        &fs::read_to_string(d.0.join("tokens.csv")).expect("tokens"),
    )
    .expect("valid token file");
    assert_eq!(tokens.len(), 4);
    let admin = yaml(&d.0.join("admin.kubeconfig"));
    assert_eq!(
        admin["clusters"][0]["cluster"]["server"],
        "https://198.18.0.1:6443"
    );
    assert_eq!(admin["users"][0]["user"]["token"], tokens[0].token.as_str());
    let lb = yaml(&d.0.join("load-balancer.kubeconfig"));
    assert_eq!(lb["users"][0]["name"], "system:sluice:load-balancer");
    assert_eq!(lb["users"][0]["user"]["token"], tokens[1].token.as_str());
    let node2 = yaml(&d.0.join("nodes/node-2.kubeconfig"));
    assert_eq!(node2["users"][0]["name"], "system:node:node-2");
    assert_eq!(node2["users"][0]["user"]["token"], tokens[3].token.as_str());
    assert_ne!(tokens[2].token, tokens[3].token);
}

#[test]
fn init_never_replaces_a_ca_unless_forced() {
    let d = TempDir::new("again");
    assert!(init(&d.0, &["--nodes", "n1"]).0);
    let ca = fs::read(d.0.join("ca.crt")).expect("ca");
    let (ok, out) = init(&d.0, &["--nodes", "n1"]);
    assert!(!ok);
    assert!(out.contains("ca.crt exists; pass --force"), "{out}");
    assert_eq!(fs::read(d.0.join("ca.crt")).expect("ca"), ca, "untouched");
    let (ok, out) = init(&d.0, &["--nodes", "n1", "--force"]);
    assert!(ok, "{out}");
    assert_ne!(fs::read(d.0.join("ca.crt")).expect("ca"), ca, "replaced");
}

#[test]
fn bad_flags_are_refused_and_nothing_is_written() {
    for (args, want) in [
        (
            vec!["--server", "http://127.0.0.1:6443"],
            "expected https://<host>:<port>",
        ),
        (
            vec!["--server", "https://127.0.0.1"],
            "expected https://<host>:<port>",
        ),
        (
            vec!["--nodes", "Node_1"],
            "\"Node_1\" is not a valid node name",
        ),
        (vec!["--nodes", "a,b,a"], "\"a\" is listed twice"),
        (
            vec!["--san", "not a name"],
            "neither an IP address nor a DNS name",
        ),
        (vec!["--cluster", ""], "--cluster"),
    ] {
        let d = TempDir::new("bad");
        let (ok, out) = init(&d.0, &args);
        assert!(!ok, "{args:?}");
        assert!(out.contains(want), "{args:?}: {out}");
        assert!(!d.0.exists(), "{args:?}: nothing written");
    }
}
