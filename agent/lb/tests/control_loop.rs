//! The whole control loop (`run_with`) in a load-balancer namespace, with a
//! node behind a veth answering its health check, and an engine that
//! records what it is handed: the backend appears once its MAC is resolved,
//! turns healthy on 200s and unhealthy on 503s, `/metrics` says so, and the
//! engine is shut down when the loop is told to stop.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use sluice_lb::config::file::parse;
use sluice_lb::desired::LbDesired;
use sluice_lb::engine::{LbCounters, LbEngine};
use sluice_lb::run::{run_with, Source};

mod control_support;

/// What the engine was handed, and whether it was shut down.
#[derive(Default)]
struct Record {
    applied: Vec<LbDesired>,
    shut: bool,
}

struct Recording(Arc<Mutex<Record>>);

impl LbEngine for Recording {
    fn kind(&self) -> &'static str {
        "recording"
    }
    fn apply(&mut self, desired: &LbDesired) -> anyhow::Result<()> {
        let mut r = self.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        r.applied.push(desired.clone());
        Ok(())
    }
    fn counters(&self) -> anyhow::Result<LbCounters> {
        let r = self.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let mut c = LbCounters::default();
        // Something per backend id the engine holds, to see it in /metrics.
        for b in r
            .applied
            .last()
            .iter()
            .flat_map(|d| &d.services)
            .flat_map(|s| &s.backends)
        {
            c.packets_per_backend.insert(b.id, 40 + u64::from(b.id));
        }
        c.flows = 3;
        Ok(c)
    }
    fn shutdown(self: Box<Self>) -> anyhow::Result<()> {
        let mut r = self.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        r.shut = true;
        Ok(())
    }
}

const CONFIG: &str = r#"
services:
- name: ns/web
  frontends: [{ipAddress: 198.19.0.10, port: 80, protocol: TCP}]
  healthCheck: {port: 10256, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 2}
  backends:
  - {node: node-a, ipAddress: 198.18.42.2}
"#;

/// The node's health server: 200 while `up`, else 503; counts requests.
async fn health_server(l: TcpListener, up: Arc<AtomicBool>, hits: Arc<AtomicU16>) {
    while let Ok((mut s, _)) = l.accept().await {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).await;
        hits.fetch_add(1, Ordering::Relaxed);
        let a = if up.load(Ordering::Relaxed) {
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        } else {
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        };
        let _ = s.write_all(a.as_bytes()).await;
    }
}

async fn scrape(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return String::new();
    };
    let _ = s
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits (bounded) until the newest applied state satisfies `f`.
async fn until(rec: &Arc<Mutex<Record>>, what: &str, f: impl Fn(&LbDesired) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let done = rec
            .lock()
            .map(|r| r.applied.last().is_some_and(&f))
            .unwrap_or(false);
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_loop_serves_a_backend_once_resolved_and_follows_its_health() {
    // spec: H4, H5
    let control_support::Segment {
        lb,
        node: _node,
        node_mac: mac,
        health: server,
        health_addr,
    } = control_support::segment("lbloop", 42);
    let cfg = parse(CONFIG).expect("config");
    let rec = Arc::new(Mutex::new(Record::default()));
    let engine_rec = rec.clone();
    let watched = rec.clone();
    let text = lb
        .in_ns(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let rec = watched;
                let up = Arc::new(AtomicBool::new(true));
                let hits = Arc::new(AtomicU16::new(0));
                let l = TcpListener::from_std(server).expect("listener");
                tokio::spawn(health_server(l, up.clone(), hits.clone()));
                let metrics = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let metrics_addr = metrics.local_addr().expect("addr");
                let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
                let lb_loop = tokio::spawn(run_with(
                    "lb0",
                    Source::File(cfg),
                    metrics,
                    Box::new(Recording(engine_rec)),
                    async move {
                        let _ = stop_rx.await;
                    },
                ));
                let backend =
                    |d: &LbDesired| d.services.first().and_then(|s| s.backends.first()).cloned();
                until(&rec, "the backend, healthy, with its MAC", |d| {
                    backend(d).is_some_and(|b| b.healthy && b.mac == mac)
                })
                .await;
                let healthy_text = scrape(metrics_addr).await;
                up.store(false, Ordering::Relaxed);
                until(&rec, "the backend unhealthy", |d| {
                    backend(d).is_some_and(|b| !b.healthy)
                })
                .await;
                let unhealthy_text = scrape(metrics_addr).await;
                let _ = stop_tx.send(());
                let ended = lb_loop.await;
                assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
                assert!(hits.load(Ordering::Relaxed) >= 3);
                (healthy_text, unhealthy_text)
            })
        })
        .expect("in the lb");
    let (healthy_text, unhealthy_text) = text;
    let r = rec.lock().expect("record");
    assert!(r.shut, "the engine was shut down");
    // Handed over only on changes: far fewer states than loop turns.
    assert!(r.applied.len() <= 4, "{} states applied", r.applied.len());
    // The backend was healthy without a MAC never: the first state that
    // lists it has its MAC.
    assert!(r
        .applied
        .iter()
        .flat_map(|d| &d.services)
        .flat_map(|s| &s.backends)
        .all(|b| b.mac == mac && b.address == health_addr.ip()));
    let has = |t: &str, l: &str| t.lines().any(|x| x == l);
    assert!(
        has(
            &healthy_text,
            "sluice_lb_backend_healthy{service=\"ns/web\",node=\"node-a\"} 1"
        ),
        "{healthy_text}"
    );
    assert!(has(
        &healthy_text,
        "sluice_lb_engine_info{engine=\"recording\"} 1"
    ));
    assert!(
        has(
            &unhealthy_text,
            "sluice_lb_backend_healthy{service=\"ns/web\",node=\"node-a\"} 0"
        ),
        "{unhealthy_text}"
    );
    assert!(has(
        &unhealthy_text,
        "sluice_lb_health_transitions_total{service=\"ns/web\",node=\"node-a\",to=\"unhealthy\"} 1"
    ));
    assert!(
        has(&unhealthy_text, "sluice_lb_flows 3"),
        "{unhealthy_text}"
    );
}
