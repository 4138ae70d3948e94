//! An etcd server for a test: Debian's `etcd-server` (`/usr/bin/etcd`, or
//! `$SLUICE_ETCD`), on 127.0.0.1 with free ports, in a data directory of its
//! own under the temp dir. Dropping the guard kills the process and removes
//! the directory, also when the test fails.

use std::fs::File;
use std::net::TcpListener;
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
        let dir = tempfile::Builder::new()
            .prefix("sluice-etcd-")
            .tempdir()
            .map_err(|e| format!("temp dir for etcd: {e}"))?;
        let client_port = free_port()?;
        let peer_port = free_port()?;
        let endpoint = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log_path = dir.path().join("etcd.log");
        let log = File::create(&log_path).map_err(|e| format!("etcd log file: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("etcd log file: {e}"))?;
        let child = Command::new(etcd_binary())
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
