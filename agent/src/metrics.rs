//! `/metrics` in the Prometheus text format: what the agent did, for
//! dashboards and alerts. Rendering is pure; the server reuses the health
//! module's HTTP reader and writer.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;

use crate::health::budget::AcceptError;
use crate::health::{Deadline, HealthCounters, ListenerCounters, ShedReason};

/// kube-proxy's metrics port.
pub const DEFAULT_METRICS_PORT: u16 = 10249;

/// Everything `/metrics` reports, updated by the sync loop.
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    pub datapath: String,
    pub sync_ok: u64,
    pub sync_rejected: u64,
    pub sync_failed: u64,
    pub sync_duration_sum: Duration,
    pub sync_duration_last: Duration,
    pub generation: u64,
    pub endpoints_ready: u64,
    pub endpoints_terminating: u64,
    pub endpoints_not_ready: u64,
    /// Engine counters by label; `verdict_*` are packets by verdict, the rest
    /// packets by what the program did with them.
    pub packets: Vec<(String, u64)>,
    pub health: HealthCounters,
    /// `Local` Services whose `healthCheckNodePort` is taken (by another
    /// Service or the node server) and so not served.
    pub health_port_conflicts: u64,
    /// New flows reset for want of a SNAT port, by Service port and
    /// endpoint.
    pub snat_exhaustion: Vec<crate::control::snat::Exhaustion>,
}

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition of `m`.
pub fn render(m: &MetricsSnapshot) -> String {
    let mut o = String::with_capacity(4096);
    header(
        &mut o,
        "sluice_datapath_info",
        "gauge",
        "Datapath engine in use.",
    );
    let _ = writeln!(
        o,
        "sluice_datapath_info{{mode=\"{}\"}} 1",
        escape(&m.datapath)
    );

    header(
        &mut o,
        "sluice_sync_total",
        "counter",
        "Desired-state syncs by result.",
    );
    for (r, v) in [
        ("ok", m.sync_ok),
        ("rejected", m.sync_rejected),
        ("failed", m.sync_failed),
    ] {
        let _ = writeln!(o, "sluice_sync_total{{result=\"{r}\"}} {v}");
    }
    header(
        &mut o,
        "sluice_sync_duration_seconds",
        "summary",
        "Time to apply a desired state.",
    );
    let _ = writeln!(
        o,
        "sluice_sync_duration_seconds_sum {}",
        m.sync_duration_sum.as_secs_f64()
    );
    let _ = writeln!(
        o,
        "sluice_sync_duration_seconds_count {}",
        m.sync_ok + m.sync_failed
    );
    header(
        &mut o,
        "sluice_sync_last_duration_seconds",
        "gauge",
        "Time the last apply took.",
    );
    let _ = writeln!(
        o,
        "sluice_sync_last_duration_seconds {}",
        m.sync_duration_last.as_secs_f64()
    );
    header(
        &mut o,
        "sluice_sync_generation",
        "gauge",
        "Successful applies since start.",
    );
    let _ = writeln!(o, "sluice_sync_generation {}", m.generation);

    header(
        &mut o,
        "sluice_endpoints",
        "gauge",
        "Endpoints of this node's services by state.",
    );
    for (s, v) in [
        ("ready", m.endpoints_ready),
        ("terminating", m.endpoints_terminating),
        ("not_ready", m.endpoints_not_ready),
    ] {
        let _ = writeln!(o, "sluice_endpoints{{state=\"{s}\"}} {v}");
    }

    header(
        &mut o,
        "sluice_packets_total",
        "counter",
        "Packets through the packet program by verdict.",
    );
    for (k, v) in m.packets.iter().filter(|(k, _)| k.starts_with("verdict_")) {
        let _ = writeln!(
            o,
            "sluice_packets_total{{verdict=\"{}\"}} {v}",
            escape(&k["verdict_".len()..])
        );
    }
    header(
        &mut o,
        "sluice_packet_events_total",
        "counter",
        "Packets by what the program or engine did.",
    );
    for (k, v) in m.packets.iter().filter(|(k, _)| !k.starts_with("verdict_")) {
        let _ = writeln!(
            o,
            "sluice_packet_events_total{{event=\"{}\"}} {v}",
            escape(k)
        );
    }
    header(
        &mut o,
        "sluice_snat_port_exhaustion_total",
        "counter",
        "New connections reset because no SNAT port to the endpoint was free.",
    );
    for e in &m.snat_exhaustion {
        let _ = writeln!(
            o,
            "sluice_snat_port_exhaustion_total{{service=\"{}\",port=\"{}\",endpoint=\"{}\"}} {}",
            escape(&e.service),
            escape(&e.port),
            e.endpoint,
            e.resets
        );
    }

    let n = &m.health.node;
    header(
        &mut o,
        "sluice_health_requests_total",
        "counter",
        "Node health answers by path and code.",
    );
    for (p, c, v) in [
        ("/healthz", 200, n.healthz_200),
        ("/healthz", 503, n.healthz_503),
        ("/livez", 200, n.livez_200),
        ("/livez", 503, n.livez_503),
    ] {
        let _ = writeln!(
            o,
            "sluice_health_requests_total{{path=\"{p}\",code=\"{c}\"}} {v}"
        );
    }
    header(
        &mut o,
        "sluice_service_health_requests_total",
        "counter",
        "Per-Service health answers by code.",
    );
    for s in &m.health.services {
        for (c, v) in [(200, s.answered_200), (503, s.answered_503)] {
            let _ = writeln!(
                o,
                "sluice_service_health_requests_total{{namespace=\"{}\",name=\"{}\",code=\"{c}\"}} {v}",
                escape(&s.namespace),
                escape(&s.name)
            );
        }
    }
    render_health_connections(&mut o, &m.health);
    header(
        &mut o,
        "sluice_health_port_conflicts",
        "gauge",
        "Local Services whose health-check port is taken by another Service or the node server; their check is not served.",
    );
    let _ = writeln!(
        o,
        "sluice_health_port_conflicts {}",
        m.health_port_conflicts
    );
    o
}

fn listener_labels(l: &ListenerCounters) -> String {
    format!("listener=\"{}\",port=\"{}\"", l.listener.as_str(), l.port)
}

/// One sample per health listener.
fn per_listener(
    o: &mut String,
    h: &HealthCounters,
    (name, kind, help): (&str, &str, &str),
    value: impl Fn(&ListenerCounters) -> u64,
) {
    header(o, name, kind, help);
    for l in &h.listeners {
        let _ = writeln!(o, "{name}{{{}}} {}", listener_labels(l), value(l));
    }
}

/// Connection counters of every health listener, labelled
/// `listener="node"|"service"` and `port`.
fn render_health_connections(o: &mut String, h: &HealthCounters) {
    per_listener(
        o,
        h,
        (
            "sluice_health_connections_open",
            "gauge",
            "Open connections per health listener.",
        ),
        |l| l.open,
    );
    per_listener(
        o,
        h,
        (
            "sluice_health_connections_accepted_total",
            "counter",
            "Connections accepted per health listener.",
        ),
        |l| l.accepted,
    );
    per_listener(
        o,
        h,
        (
            "sluice_health_connections_refused_total",
            "counter",
            "Connections closed at once: the listener's budget was full and every connection in it was answering.",
        ),
        |l| l.refused,
    );
    header(
        o,
        "sluice_health_connections_shed_total",
        "counter",
        "Connections dropped to make room (budget full, or descriptors exhausted), by what they were doing.",
    );
    for l in &h.listeners {
        for r in ShedReason::ALL {
            let _ = writeln!(
                o,
                "sluice_health_connections_shed_total{{{},reason=\"{}\"}} {}",
                listener_labels(l),
                r.as_str(),
                l.shed(r)
            );
        }
    }
    header(
        o,
        "sluice_health_connections_timed_out_total",
        "counter",
        "Connections closed by a deadline: request head (the first counted from the accept), keep-alive idle, or write.",
    );
    for l in &h.listeners {
        for d in Deadline::ALL {
            let _ = writeln!(
                o,
                "sluice_health_connections_timed_out_total{{{},deadline=\"{}\"}} {}",
                listener_labels(l),
                d.as_str(),
                l.timed_out(d)
            );
        }
    }
    header(
        o,
        "sluice_health_accept_errors_total",
        "counter",
        "Failed accepts per health listener: out of descriptors or socket memory, or another error.",
    );
    for l in &h.listeners {
        for (kind, v) in [
            (AcceptError::Descriptors, l.accept_descriptors),
            (AcceptError::Other, l.accept_other),
        ] {
            let _ = writeln!(
                o,
                "sluice_health_accept_errors_total{{{},kind=\"{}\"}} {v}",
                listener_labels(l),
                kind.as_str()
            );
        }
    }
}

/// Serve `/metrics` on `addr` until the runtime stops (see
/// [`crate::metrics_server`]), its own connections counted under
/// `listener="metrics"`.
pub async fn serve(addr: SocketAddr, snapshot: Arc<Mutex<MetricsSnapshot>>) -> std::io::Result<()> {
    serve_on(TcpListener::bind(addr).await?, snapshot).await
}

/// `serve` on a bound listener.
pub async fn serve_on(
    listener: TcpListener,
    snapshot: Arc<Mutex<MetricsSnapshot>>,
) -> std::io::Result<()> {
    crate::metrics_server::serve(listener, move |own: ListenerCounters| {
        let mut m = snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        m.health.listeners.push(own);
        render(&m)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::ListenerKind;

    #[test]
    fn renders_prometheus_text_with_every_family() {
        let m = MetricsSnapshot {
            datapath: "emulated".into(),
            sync_ok: 3,
            sync_rejected: 1,
            endpoints_ready: 2,
            endpoints_terminating: 1,
            packets: vec![("verdict_pass".into(), 10), ("reset".into(), 2)],
            health_port_conflicts: 1,
            snat_exhaustion: vec![crate::control::snat::Exhaustion {
                service: "default/web".into(),
                port: "http".into(),
                endpoint: "[fd00:19:1::10]:8080".parse().expect("addr"),
                resets: 4,
            }],
            health: HealthCounters {
                listeners: vec![ListenerCounters {
                    listener: ListenerKind::Service,
                    port: 30123,
                    open: 7,
                    accepted: 9,
                    refused: 1,
                    shed: [4, 3, 2],
                    timed_out: [5, 6, 0],
                    accept_descriptors: 8,
                    accept_other: 0,
                }],
                ..HealthCounters::default()
            },
            ..MetricsSnapshot::default()
        };
        let text = render(&m);
        for line in [
            "sluice_datapath_info{mode=\"emulated\"} 1",
            "sluice_sync_total{result=\"ok\"} 3",
            "sluice_sync_total{result=\"rejected\"} 1",
            "sluice_endpoints{state=\"ready\"} 2",
            "sluice_endpoints{state=\"terminating\"} 1",
            "sluice_packets_total{verdict=\"pass\"} 10",
            "sluice_packet_events_total{event=\"reset\"} 2",
            "sluice_snat_port_exhaustion_total{service=\"default/web\",port=\"http\",endpoint=\"[fd00:19:1::10]:8080\"} 4",
            "sluice_health_requests_total{path=\"/healthz\",code=\"200\"} 0",
            "sluice_health_port_conflicts 1",
            "sluice_health_connections_open{listener=\"service\",port=\"30123\"} 7",
            "sluice_health_connections_accepted_total{listener=\"service\",port=\"30123\"} 9",
            "sluice_health_connections_refused_total{listener=\"service\",port=\"30123\"} 1",
            "sluice_health_connections_shed_total{listener=\"service\",port=\"30123\",reason=\"idle\"} 4",
            "sluice_health_connections_shed_total{listener=\"service\",port=\"30123\",reason=\"partial_request\"} 3",
            "sluice_health_connections_shed_total{listener=\"service\",port=\"30123\",reason=\"stalled_write\"} 2",
            "sluice_health_connections_timed_out_total{listener=\"service\",port=\"30123\",deadline=\"head\"} 5",
            "sluice_health_connections_timed_out_total{listener=\"service\",port=\"30123\",deadline=\"idle\"} 6",
            "sluice_health_accept_errors_total{listener=\"service\",port=\"30123\",kind=\"descriptors\"} 8",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Every sample belongs to a family declared with HELP and TYPE.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = l.split(['{', ' ']).next().unwrap_or("");
            let base = name.trim_end_matches("_sum").trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {base} ")),
                "{name} has no TYPE"
            );
        }
    }

    // spec: H1 — idle sockets on /metrics cannot take the descriptors the
    // health listeners need: the metrics port sheds its longest-waiting
    // connection for a newcomer, and a scrape still gets through.
    #[tokio::test]
    async fn idle_sockets_on_metrics_are_shed_and_a_scrape_still_answers() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(serve_on(
            listener,
            Arc::new(Mutex::new(MetricsSnapshot::default())),
        ));
        let mut idle = Vec::new();
        for _ in 0..(crate::metrics_server::MAX_CONNECTIONS * 3) {
            idle.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        let mut scrape = tokio::net::TcpStream::connect(addr).await.expect("connect");
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut out = String::new();
        tokio::time::timeout(
            crate::metrics_server::REQUEST_TIMEOUT,
            scrape.read_to_string(&mut out),
        )
        .await
        .expect("answered in time")
        .expect("read");
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let shed: u64 = out
            .lines()
            .find(|l| {
                l.starts_with("sluice_health_connections_shed_total{")
                    && l.contains("listener=\"metrics\"")
                    && l.contains("reason=\"idle\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no metrics shed counter in:\n{out}"));
        assert!(
            shed >= (crate::metrics_server::MAX_CONNECTIONS * 2) as u64,
            "shed {shed}"
        );
        server.abort();
    }
}
