//! The sync loop under test: a real state file and `FileSource`, real
//! health servers on loopback ephemeral ports, fakes for the engine and the
//! pods' processes, and an injected clock. Every step is a `tick`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;
use sluice_agent::health::{HealthConfig, HealthHandle, ManualClock};
use sluice_agent::metrics::MetricsSnapshot;
use sluice_agent::pods::{PodManager, PoolKind};
use sluice_agent::runner::Runner;
use sluice_agent::state::source::{FileSource, StateSource};

use super::{FakeEngine, FakePods};

pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A temporary directory removed when the guard goes, also on failure.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("sluice-runner-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Loop {
    pub runner: Option<Runner>,
    pub clock: Arc<ManualClock>,
    pub engine: FakeEngine,
    pub pods: FakePods,
    pub metrics: Arc<Mutex<MetricsSnapshot>>,
    pub node_port: u16,
    pub dir: TempDir,
}

impl Loop {
    pub fn start(name: &str, state: &str) -> Loop {
        let dir = TempDir::new(name);
        std::fs::write(dir.0.join("state.yaml"), state).expect("write state");
        let source = Box::new(FileSource::new(dir.0.join("state.yaml")));
        Loop::start_with(dir, source)
    }

    pub fn start_with(dir: TempDir, source: Box<dyn StateSource>) -> Loop {
        let node_port = free_port();
        let cfg = HealthConfig::new(Duration::from_secs(30)).on_ip(LOOPBACK, node_port);
        let clock = Arc::new(ManualClock::new(
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ));
        let health = HealthHandle::start(cfg, clock.clone()).expect("health servers");
        let engine = FakeEngine::default();
        let pods = FakePods::default();
        let metrics = Arc::new(Mutex::new(MetricsSnapshot::default()));
        let runner = Runner::new(
            "node-a".into(),
            source,
            Box::new(engine.clone()),
            health,
            metrics.clone(),
            PodManager::new(
                Box::new(pods.clone()),
                Box::new(pods.clone()),
                PoolKind::Standard,
            ),
            Some(dir.0.join("status.json")),
        );
        let mut l = Loop {
            runner: Some(runner),
            clock,
            engine,
            pods,
            metrics,
            node_port,
            dir,
        };
        l.settle();
        l
    }

    pub fn tick(&mut self) {
        if let Some(r) = self.runner.as_mut() {
            r.tick();
        }
    }

    /// Enough ticks for a new state to be applied, its pods' namespaces
    /// plugged, their processes started and their readiness applied.
    pub fn settle(&mut self) {
        for _ in 0..6 {
            self.tick();
        }
    }

    pub fn write(&mut self, state: &str) {
        std::fs::write(self.dir.0.join("state.yaml"), state).expect("write state");
        self.settle();
    }

    pub fn status(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.0.join("status.json")).expect("status file");
        serde_json::from_str(&text).expect("status JSON")
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn http_status(&self, port: u16, path: &str) -> u16 {
        http_status(SocketAddr::new(LOOPBACK, port), path)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(r) = self.runner.take() {
            // Only health servers and fakes to stop: no routes, no links.
            let _ = r.shutdown();
        }
    }
}

pub fn free_port() -> u16 {
    let l = TcpListener::bind((LOOPBACK, 0)).expect("bind ephemeral");
    l.local_addr().expect("local addr").port()
}

pub fn http_status(addr: SocketAddr, path: &str) -> u16 {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
