//! `/metrics` in the Prometheus text format. Rendering is pure; the server
//! is the agent's (`sluice_agent::metrics_server`), with its connection
//! budget, so idle sockets cannot pile up (64 at most, the longest-waiting
//! one shed for a newcomer, 5 s for the one request).
//!
//! The default address is `127.0.0.1:10260`: the load balancer's interface
//! carries client traffic to the VIPs, and the metrics are not for those
//! clients; a scraper elsewhere asks for another address
//! (`--metrics-bind-address 0.0.0.0:10260`).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use sluice_agent::health::ListenerCounters;

use crate::desired::BackendId;

pub const DEFAULT_METRICS_ADDRESS: &str = "127.0.0.1:10260";

/// One configured backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendSample {
    pub service: String,
    pub node: String,
    pub healthy: bool,
    /// `None`: left out of the engine's state (no MAC or id yet).
    pub id: Option<BackendId>,
}

/// Everything `/metrics` reports, kept by the main loop.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub engine: String,
    pub services: u64,
    pub backends: Vec<BackendSample>,
    /// Frames per backend id, from the engine.
    pub packets: std::collections::BTreeMap<BackendId, u64>,
    pub flows: u64,
    /// (Service, node, to, count).
    pub transitions: Vec<(String, String, &'static str, u64)>,
    pub applies_ok: u64,
    pub applies_failed: u64,
    /// The `/metrics` listener's own connections (filled when served).
    pub listener: Option<ListenerCounters>,
}

pub type Shared = Arc<Mutex<Snapshot>>;

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn sn(service: &str, node: &str) -> String {
    format!("service=\"{}\",node=\"{}\"", escape(service), escape(node))
}

/// The Prometheus text exposition of `m`.
pub fn render(m: &Snapshot) -> String {
    let mut o = String::with_capacity(1024 + 160 * m.backends.len());
    header(
        &mut o,
        "sluice_lb_engine_info",
        "gauge",
        "Load-balancer engine in use.",
    );
    let _ = writeln!(
        o,
        "sluice_lb_engine_info{{engine=\"{}\"}} 1",
        escape(&m.engine)
    );
    header(&mut o, "sluice_lb_services", "gauge", "Services served.");
    let _ = writeln!(o, "sluice_lb_services {}", m.services);
    header(
        &mut o,
        "sluice_lb_backend_healthy",
        "gauge",
        "The health check's verdict per configured backend (1 healthy).",
    );
    for b in &m.backends {
        let _ = writeln!(
            o,
            "sluice_lb_backend_healthy{{{}}} {}",
            sn(&b.service, &b.node),
            u8::from(b.healthy)
        );
    }
    header(
        &mut o,
        "sluice_lb_backend_packets_total",
        "counter",
        "Frames delivered to each backend.",
    );
    for b in &m.backends {
        if let Some(id) = b.id {
            let v = m.packets.get(&id).copied().unwrap_or(0);
            let _ = writeln!(
                o,
                "sluice_lb_backend_packets_total{{{}}} {v}",
                sn(&b.service, &b.node)
            );
        }
    }
    header(
        &mut o,
        "sluice_lb_backends_unresolved",
        "gauge",
        "Configured backends left out of the engine: no MAC (or no id) yet.",
    );
    let _ = writeln!(
        o,
        "sluice_lb_backends_unresolved {}",
        m.backends.iter().filter(|b| b.id.is_none()).count()
    );
    header(
        &mut o,
        "sluice_lb_health_transitions_total",
        "counter",
        "Health verdict changes per backend, by the verdict reached.",
    );
    for (s, n, to, v) in &m.transitions {
        let _ = writeln!(
            o,
            "sluice_lb_health_transitions_total{{{},to=\"{to}\"}} {v}",
            sn(s, n)
        );
    }
    header(
        &mut o,
        "sluice_lb_flows",
        "gauge",
        "Entries in the flow table.",
    );
    let _ = writeln!(o, "sluice_lb_flows {}", m.flows);
    header(
        &mut o,
        "sluice_lb_applies_total",
        "counter",
        "Desired states handed to the engine, by result.",
    );
    for (r, v) in [("ok", m.applies_ok), ("failed", m.applies_failed)] {
        let _ = writeln!(o, "sluice_lb_applies_total{{result=\"{r}\"}} {v}");
    }
    if let Some(l) = &m.listener {
        header(
            &mut o,
            "sluice_lb_metrics_connections",
            "gauge",
            "Open /metrics connections.",
        );
        let _ = writeln!(o, "sluice_lb_metrics_connections {}", l.open);
        header(
            &mut o,
            "sluice_lb_metrics_connections_dropped_total",
            "counter",
            "/metrics connections refused, shed or timed out.",
        );
        let _ = writeln!(
            o,
            "sluice_lb_metrics_connections_dropped_total {}",
            l.refused + l.shed_total() + l.timed_out_total()
        );
    }
    o
}

/// Serves `/metrics` on `listener` until the task is dropped, with the
/// agent's server (its connection budget included).
pub async fn serve(listener: TcpListener, snapshot: Shared) -> std::io::Result<()> {
    sluice_agent::metrics_server::serve(listener, move |own| {
        let mut m = snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        m.listener = Some(own);
        render(&m)
    })
    .await
}

/// Binds `addr` (errors name it).
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    use anyhow::Context as _;
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding /metrics on {addr}"))
}
