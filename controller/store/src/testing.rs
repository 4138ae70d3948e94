//! An etcd server for a test: Debian's `etcd-server` (`/usr/bin/etcd`, or
//! `$SLUICE_ETCD`), on 127.0.0.1 with free ports, in a data directory of its
//! own under the temp dir. Dropping the guard kills the process and removes
//! the directory, also when the test fails.

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long etcd gets to answer (it starts in under a second on loopback).
const READY_WITHIN: Duration = Duration::from_secs(30);
/// Attempts, should another process take a port between choice and bind.
const ATTEMPTS: usize = 3;

pub struct EtcdServer {
    child: Child,
    dir: TempDir,
    endpoint: String,
}

impl EtcdServer {
    pub async fn start() -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match Self::start_once().await {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// `http://127.0.0.1:PORT`, for `EtcdStore::connect`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    async fn start_once() -> Result<Self, String> {
        sweep_stale("sluice-etcd-");
        let dir = tempfile::Builder::new()
            .prefix(&format!("sluice-etcd-{}-", std::process::id()))
            .tempdir()
            .map_err(|e| format!("temp dir for etcd: {e}"))?;
        let client_port = free_port()?;
        let peer_port = free_port()?;
        let endpoint = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log_path = dir.path().join("etcd.log");
        let log = File::create(&log_path).map_err(|e| format!("etcd log file: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("etcd log file: {e}"))?;
        let mut cmd = Command::new(etcd_binary());
        // SAFETY: prctl and getppid are async-signal-safe and touch only
        // the child, between fork and exec.
        unsafe {
            cmd.pre_exec(die_with_parent);
        }
        let child = cmd
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", etcd_binary().display()))?;
        // From here on the guard owns the process and the directory.
        let mut server = EtcdServer {
            child,
            dir,
            endpoint,
        };
        server.wait_ready().await?;
        Ok(server)
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("etcd exited with {status}: {}", self.log_tail()));
            }
            let opts = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(1))
                .with_timeout(Duration::from_secs(2));
            if let Ok(mut c) = etcd_client::Client::connect([&self.endpoint], Some(opts)).await {
                if c.get("\0", None).await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "etcd not ready within {READY_WITHIN:?}: {}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        // The directory goes with `dir`, after the process is gone.
        self.kill();
    }
}

fn etcd_binary() -> PathBuf {
    std::env::var_os("SLUICE_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"))
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// Run in a test's child between fork and exec: the child is killed when
/// the thread that started it goes, so a test process killed outright (a
/// runner stopped with SIGKILL, a timeout) leaves no server behind, where
/// its guard's `Drop` never runs.
pub fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: plain syscalls on the calling process.
    unsafe {
        let parent = libc::getppid();
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The parent may have gone before the call took effect.
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    Ok(())
}

/// Removes what test processes that were killed outright left in the temp
/// directory: each `<prefix><pid>-…` entry whose process is gone (its
/// children went with it, [`die_with_parent`]; its guard never ran).
pub fn sweep_stale(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
