//! The I/O the pod logic needs, behind two small traits so the decisions in
//! [`super::manager`] are tested with fakes: [`ProcessControl`] (network
//! namespaces and processes) and [`Prober`] (readiness probes). The real
//! implementations, [`OsProcessControl`] and [`OsProber`], are thin.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::spec::{HttpScheme, ProbeAction};

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// `PATH` for pod processes: there is no image to provide one, and the
/// agent's own environment is not passed on.
pub const POD_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// An opaque handle on a spawned process.
pub type ProcId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Term,
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitInfo {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// What to start, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnSpec {
    pub key: String,
    /// The container's name (`spec.containers[].name`).
    pub container: String,
    /// The pod's first container: its output goes to `<ns>_<name>.log`,
    /// the others' to `<ns>_<name>_<container>.log`.
    pub first: bool,
    /// `/run/netns/NAME`.
    pub netns: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
}

pub trait ProcessControl: Send {
    /// Create a named network namespace (with `lo` up); present is fine.
    fn create_netns(&mut self, name: &str) -> Result<()>;
    /// Delete a named network namespace; absent is fine.
    fn remove_netns(&mut self, name: &str) -> Result<()>;
    /// Start a process, leader of a new process group, inside `spec.netns`.
    fn spawn(&mut self, spec: &SpawnSpec) -> Result<ProcId>;
    /// Signal the process group.
    fn signal(&mut self, id: ProcId, sig: Sig) -> Result<()>;
    /// `Some` once the process has ended (and was reaped).
    fn try_wait(&mut self, id: ProcId) -> Result<Option<ExitInfo>>;
}

/// One readiness probe to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRequest {
    /// Matches the result to the probe (a stale answer is dropped).
    pub seq: u64,
    pub action: ProbeAction,
    /// The pod's IP (probe target unless the probe names a host).
    pub pod_ip: Option<IpAddr>,
    /// The pod's namespace, for exec probes.
    pub netns: PathBuf,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure(String),
}

pub trait Prober: Send {
    /// Start a probe; its result comes back from [`Prober::poll`].
    fn start(&mut self, key: &str, req: ProbeRequest);
    /// Results that arrived since the last call: (pod key, seq, result).
    fn poll(&mut self) -> Vec<(String, u64, ProbeResult)>;
}

// --- real processes ------------------------------------------------------

/// Processes and namespaces on this host. Dropping it kills every process
/// group it started and deletes the namespaces it created, so nothing is
/// left behind even when the caller fails.
pub struct OsProcessControl {
    log_dir: PathBuf,
    next: ProcId,
    children: BTreeMap<ProcId, Child>,
    made: BTreeSet<String>,
}

impl OsProcessControl {
    /// Pod output goes to `log_dir/<namespace>_<name>.log`.
    pub fn new(log_dir: impl Into<PathBuf>) -> Self {
        OsProcessControl {
            log_dir: log_dir.into(),
            next: 1,
            children: BTreeMap::new(),
            made: BTreeSet::new(),
        }
    }

    /// The pid of a running process (tests, logs).
    pub fn pid(&self, id: ProcId) -> Option<u32> {
        self.children.get(&id).map(Child::id)
    }

    fn log_file(&self, key: &str) -> Result<File> {
        std::fs::create_dir_all(&self.log_dir)
            .with_context(|| format!("creating {}", self.log_dir.display()))?;
        let name: String = key
            .chars()
            .map(|c| if c == '/' { '_' } else { c })
            .collect();
        let path = self.log_dir.join(format!("{name}.log"));
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))
    }
}

fn ip_cmd(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn killpg(pid: u32, sig: libc::c_int) -> Result<()> {
    let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: plain syscall on a process group we created.
    let r = unsafe { libc::kill(-pid, sig) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        // The group is already gone: nothing left to signal.
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e).context("signalling process group");
        }
    }
    Ok(())
}

/// Has `pid` exited? Looks without reaping (WNOWAIT), so the group can still
/// be swept while its id cannot be reused.
fn exited_unreaped(pid: u32) -> bool {
    let pid: libc::id_t = pid;
    // SAFETY: zeroed siginfo is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; WNOHANG|WNOWAIT only peeks.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after a successful waitid.
    r == 0 && unsafe { info.si_pid() } != 0
}

/// `setns` into `netns` in the child between fork and exec.
fn enter_netns_on_exec(cmd: &mut Command, netns: &File) {
    let fd = netns.as_raw_fd();
    // SAFETY: only async-signal-safe calls (setns) between fork and exec;
    // the fd stays open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl ProcessControl for OsProcessControl {
    fn create_netns(&mut self, name: &str) -> Result<()> {
        let path = Path::new(NETNS_DIR).join(name);
        if !path.exists() {
            // The first `ip netns add` on a host makes /run/netns a shared
            // mount; concurrent first calls can race, so retry a little.
            let mut last = None;
            for _ in 0..5 {
                match ip_cmd(&["netns", "add", name]) {
                    Ok(()) => {
                        last = None;
                        break;
                    }
                    // Someone else made it meanwhile: fine.
                    Err(_) if path.exists() => {
                        last = None;
                        break;
                    }
                    Err(e) => {
                        last = Some(e);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            if let Some(e) = last {
                return Err(e);
            }
            self.made.insert(name.to_string());
        }
        if let Err(e) = ip_cmd(&["-n", name, "link", "set", "lo", "up"]) {
            // Do not leave a half-made namespace behind.
            if self.made.remove(name) {
                let _ = ip_cmd(&["netns", "del", name]);
            }
            return Err(e);
        }
        Ok(())
    }

    fn remove_netns(&mut self, name: &str) -> Result<()> {
        self.made.remove(name);
        if !Path::new(NETNS_DIR).join(name).exists() {
            return Ok(());
        }
        ip_cmd(&["netns", "del", name])
    }

    fn spawn(&mut self, spec: &SpawnSpec) -> Result<ProcId> {
        let Some((prog, args)) = spec.argv.split_first() else {
            bail!("empty command");
        };
        let netns = File::open(&spec.netns)
            .with_context(|| format!("opening network namespace {}", spec.netns.display()))?;
        let log = if spec.first {
            self.log_file(&spec.key)?
        } else {
            self.log_file(&format!("{}_{}", spec.key, spec.container))?
        };
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .env_clear()
            .env("PATH", POD_PATH)
            .env(
                "HOSTNAME",
                spec.key.rsplit('/').next().unwrap_or(spec.key.as_str()),
            )
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating log file")?)
            .stderr(log)
            // Own process group: signals reach the pod's whole tree and
            // never the agent.
            .process_group(0);
        if let Some(d) = &spec.working_dir {
            cmd.current_dir(d);
        }
        enter_netns_on_exec(&mut cmd, &netns);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {prog} for pod {}", spec.key))?;
        drop(netns);
        let id = self.next;
        self.next += 1;
        self.children.insert(id, child);
        Ok(id)
    }

    fn signal(&mut self, id: ProcId, sig: Sig) -> Result<()> {
        let Some(child) = self.children.get(&id) else {
            // Already reaped: nothing to signal.
            return Ok(());
        };
        let s = match sig {
            Sig::Term => libc::SIGTERM,
            Sig::Kill => libc::SIGKILL,
        };
        killpg(child.id(), s)
    }

    fn try_wait(&mut self, id: ProcId) -> Result<Option<ExitInfo>> {
        let Some(child) = self.children.get_mut(&id) else {
            bail!("unknown process {id}");
        };
        if exited_unreaped(child.id()) {
            // The leader is gone: like a container runtime, end whatever
            // else it left in its group before the id can be reused.
            let _ = killpg(child.id(), libc::SIGKILL);
        }
        match child.try_wait().context("waiting for pod process")? {
            None => Ok(None),
            Some(st) => {
                self.children.remove(&id);
                Ok(Some(ExitInfo {
                    code: st.code(),
                    signal: st.signal(),
                }))
            }
        }
    }
}

impl Drop for OsProcessControl {
    fn drop(&mut self) {
        for (_, mut child) in std::mem::take(&mut self.children) {
            let _ = killpg(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
        for name in std::mem::take(&mut self.made) {
            let _ = ip_cmd(&["netns", "del", &name]);
        }
    }
}

// --- real probes ---------------------------------------------------------

/// Runs each probe on a short-lived thread (a probe may take up to its
/// timeout; the sync loop must not wait for it).
pub struct OsProber {
    tx: mpsc::Sender<(String, u64, ProbeResult)>,
    rx: mpsc::Receiver<(String, u64, ProbeResult)>,
}

impl Default for OsProber {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        OsProber { tx, rx }
    }
}

impl Prober for OsProber {
    fn start(&mut self, key: &str, req: ProbeRequest) {
        let tx = self.tx.clone();
        let key = key.to_string();
        let spawned = std::thread::Builder::new()
            .name("sluice-probe".into())
            .spawn(move || {
                let seq = req.seq;
                let r = run_probe(&req);
                // The manager may be gone (shutdown): nobody to tell.
                let _ = tx.send((key, seq, r));
            });
        if let Err(e) = spawned {
            // No thread, no probe: report a failure rather than hang.
            tracing::warn!(error = %e, "cannot start probe thread");
        }
    }

    fn poll(&mut self) -> Vec<(String, u64, ProbeResult)> {
        self.rx.try_iter().collect()
    }
}

/// Run one probe now, blocking for at most about `req.timeout`.
pub fn run_probe(req: &ProbeRequest) -> ProbeResult {
    match run_probe_inner(req) {
        Ok(()) => ProbeResult::Success,
        Err(e) => ProbeResult::Failure(format!("{e:#}")),
    }
}

fn target(host: Option<IpAddr>, pod_ip: Option<IpAddr>, port: u16) -> Result<SocketAddr> {
    let ip = host.or(pod_ip).context("the pod has no IP to probe")?;
    Ok(SocketAddr::new(ip, port))
}

fn run_probe_inner(req: &ProbeRequest) -> Result<()> {
    let deadline = Instant::now() + req.timeout;
    match &req.action {
        ProbeAction::Tcp { host, port } => {
            let addr = target(*host, req.pod_ip, *port)?;
            TcpStream::connect_timeout(&addr, req.timeout)
                .with_context(|| format!("connecting to {addr}"))?;
            Ok(())
        }
        ProbeAction::Http {
            scheme,
            host,
            port,
            path,
            headers,
        } => {
            let addr = target(*host, req.pod_ip, *port)?;
            http_get(*scheme, addr, path, headers, deadline)
        }
        ProbeAction::Exec { command } => exec_probe(command, &req.netns, deadline),
    }
}

fn remaining(deadline: Instant) -> Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() {
        bail!("timed out");
    }
    Ok(d)
}

/// The request head the kubelet sends. A user's `Host`, `User-Agent` or
/// `Accept` in `httpHeaders` replaces the kubelet's own (a second `Host`
/// header is a 400 on most servers, and virtual hosts route on it).
pub fn probe_request(addr: SocketAddr, path: &str, headers: &[(String, String)]) -> String {
    let user = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let host = user("Host").unwrap_or_else(|| addr.to_string());
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    if user("User-Agent").is_none() {
        req.push_str("User-Agent: kube-probe/1.30\r\n");
    }
    if user("Accept").is_none() {
        req.push_str("Accept: */*\r\n");
    }
    req.push_str("Connection: close\r\n");
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("Host") {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    req.push_str("\r\n");
    req
}

/// HTTP/1.1 GET as the kubelet sends it, over TLS for HTTPS (see
/// `probe_tls`); 200–399 is success.
pub fn http_get(
    scheme: HttpScheme,
    addr: SocketAddr,
    path: &str,
    headers: &[(String, String)],
    deadline: Instant,
) -> Result<()> {
    let s = TcpStream::connect_timeout(&addr, remaining(deadline)?)
        .with_context(|| format!("connecting to {addr}"))?;
    // Timeouts are set through a second handle on the same socket, so the
    // exchange works the same over the plain and the TLS stream.
    let sock = s.try_clone().context("socket handle")?;
    let req = probe_request(addr, path, headers);
    match scheme {
        HttpScheme::Http => {
            let mut s = s;
            exchange(&mut s, &sock, &req, deadline)
        }
        HttpScheme::Https => {
            let mut tls = rustls::StreamOwned::new(super::probe_tls::client(addr.ip())?, s);
            exchange(&mut tls, &sock, &req, deadline)
        }
    }
}

/// Send `req` on `io` and judge the status line; `sock` is `io`'s socket.
fn exchange<S: Read + Write>(
    io: &mut S,
    sock: &TcpStream,
    req: &str,
    deadline: Instant,
) -> Result<()> {
    sock.set_write_timeout(Some(remaining(deadline)?))?;
    sock.set_read_timeout(Some(remaining(deadline)?))?;
    io.write_all(req.as_bytes()).context("sending request")?;
    io.flush().context("sending request")?;
    // Only the status line matters; read until it is complete.
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    while !buf.contains(&b'\n') {
        sock.set_read_timeout(Some(remaining(deadline)?))?;
        let n = io.read(&mut chunk).context("reading response")?;
        if n == 0 {
            bail!("connection closed before a status line");
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 8192 {
            bail!("status line too long");
        }
    }
    let line = String::from_utf8_lossy(&buf);
    let line = line.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        bail!("bad status line {line:?}");
    };
    if !version.starts_with("HTTP/1.") {
        bail!("bad status line {line:?}");
    }
    let code: u16 = code
        .parse()
        .with_context(|| format!("bad status line {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        bail!("HTTP {code}")
    }
}

fn exec_probe(command: &[String], netns: &Path, deadline: Instant) -> Result<()> {
    let Some((prog, args)) = command.split_first() else {
        bail!("empty command");
    };
    let ns = File::open(netns)
        .with_context(|| format!("opening network namespace {}", netns.display()))?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env_clear()
        .env("PATH", POD_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    enter_netns_on_exec(&mut cmd, &ns);
    let mut child = cmd.spawn().with_context(|| format!("starting {prog}"))?;
    drop(ns);
    loop {
        if let Some(st) = child.try_wait().context("waiting for probe")? {
            if st.success() {
                return Ok(());
            }
            bail!(
                "exit {}",
                st.code().map_or("signal".into(), |c| c.to_string())
            );
        }
        if Instant::now() >= deadline {
            let _ = killpg(child.id(), libc::SIGKILL);
            let _ = child.wait();
            bail!("timed out");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(status: &'static str) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b);
                let _ = s.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
                );
            }
        });
        addr
    }

    fn http(addr: SocketAddr) -> ProbeResult {
        get(HttpScheme::Http, addr)
    }

    fn https(addr: SocketAddr) -> ProbeResult {
        get(HttpScheme::Https, addr)
    }

    fn get(scheme: HttpScheme, addr: SocketAddr) -> ProbeResult {
        run_probe(&ProbeRequest {
            seq: 0,
            action: ProbeAction::Http {
                scheme,
                host: Some(addr.ip()),
                port: addr.port(),
                path: "/healthz".into(),
                headers: vec![],
            },
            pod_ip: None,
            netns: PathBuf::new(),
            timeout: Duration::from_secs(2),
        })
    }

    fn header_values<'a>(head: &'a str, name: &str) -> Vec<&'a str> {
        head.split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(": "))
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn user_host_header_replaces_the_kubelets() {
        let addr: SocketAddr = "198.18.1.5:8080".parse().expect("addr");
        let head = probe_request(
            addr,
            "/ready",
            &[
                ("host".into(), "app.example".into()),
                ("X-Probe".into(), "1".into()),
            ],
        );
        assert_eq!(header_values(&head, "Host"), ["app.example"]);
        assert_eq!(header_values(&head, "X-Probe"), ["1"]);
        assert_eq!(header_values(&head, "User-Agent"), ["kube-probe/1.30"]);
        assert!(head.starts_with("GET /ready HTTP/1.1\r\n"));
        assert!(head.ends_with("\r\n\r\n"));

        let plain = probe_request(addr, "/", &[]);
        assert_eq!(header_values(&plain, "Host"), ["198.18.1.5:8080"]);
        let ua = probe_request(addr, "/", &[("User-Agent".into(), "mine".into())]);
        assert_eq!(header_values(&ua, "User-Agent"), ["mine"]);
    }

    #[test]
    fn http_probe_status_classes() {
        assert_eq!(http(serve_once("200 OK")), ProbeResult::Success);
        assert_eq!(http(serve_once("302 Found")), ProbeResult::Success);
        assert!(matches!(
            http(serve_once("503 Unavailable")),
            ProbeResult::Failure(_)
        ));
    }

    /// A TLS server with a self-signed certificate for a name that is not
    /// its address (what pods serve), answering one connection with
    /// `status`; its address.
    fn serve_tls_once(status: &'static str) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let ck = rcgen::generate_simple_self_signed(vec!["pod.invalid".into()]).expect("cert");
        let cert = ck.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server config");
        let config = std::sync::Arc::new(config);
        std::thread::spawn(move || {
            if let Ok((s, _)) = l.accept() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, s);
                let mut head = Vec::new();
                let mut b = [0u8; 512];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let _ = tls.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        });
        addr
    }

    #[test]
    fn https_probe_skips_certificate_checks_as_the_kubelet_does() {
        assert_eq!(https(serve_tls_once("200 OK")), ProbeResult::Success);
        assert!(matches!(
            https(serve_tls_once("503 Unavailable")),
            ProbeResult::Failure(_)
        ));
        // A plain HTTP server does not pass an HTTPS probe.
        assert!(matches!(
            https(serve_once("200 OK")),
            ProbeResult::Failure(_)
        ));
    }

    #[test]
    fn http_probe_times_out_on_a_silent_server() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        // Accepted by the kernel backlog, never answered.
        let r = run_probe(&ProbeRequest {
            seq: 0,
            action: ProbeAction::Http {
                scheme: HttpScheme::Http,
                host: Some(addr.ip()),
                port: addr.port(),
                path: "/".into(),
                headers: vec![],
            },
            pod_ip: None,
            netns: PathBuf::new(),
            timeout: Duration::from_millis(200),
        });
        assert!(matches!(r, ProbeResult::Failure(_)));
        drop(l);
    }

    #[test]
    fn tcp_probe_needs_a_listener() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let req = |port| ProbeRequest {
            seq: 0,
            action: ProbeAction::Tcp { host: None, port },
            pod_ip: Some(addr.ip()),
            netns: PathBuf::new(),
            timeout: Duration::from_secs(1),
        };
        assert_eq!(run_probe(&req(addr.port())), ProbeResult::Success);
        drop(l);
        assert!(matches!(
            run_probe(&req(addr.port())),
            ProbeResult::Failure(_)
        ));
    }
}
