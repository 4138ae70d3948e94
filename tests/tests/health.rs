//! Load-balancer health checks end to end (spec H1–H3): a client namespace
//! probes the nodes' agents over the same links the VIP traffic uses, while
//! the state file changes under them.
//!
//! Health answers come from the agent, not from the packet path, so these run
//! under the emulated engine only; the packet path itself is proven per
//! engine in `loadbalancer.rs`.

use std::net::SocketAddr;

use sluice_tests::{
    http_get, tcp_request, Cluster, ClusterSpec, EndpointSpec, Engine, Family, HttpAnswer, Policy,
    ServiceSpec, TcpOutcome,
};

const HC_PORT: u16 = 30_123;

fn probe(c: &Cluster, node: usize, port: u16, path: &str) -> HttpAnswer {
    let addr = SocketAddr::new(Family::V4.node_ip(node), port);
    http_get(c.client_ns(), addr, path)
        .unwrap_or_else(|e| panic!("probing {addr}{path}: {e:#}\n{}", c.agent_log(node)))
}

fn local_web() -> ServiceSpec {
    ServiceSpec::lb("web", 1)
        .policy(Policy::Local)
        .tcp("http", 80, 8080)
        .health_check_node_port(HC_PORT)
}

#[test]
fn every_node_passes_for_cluster_services_with_or_without_pods() {
    // spec: H1, H2
    let c = Cluster::start(
        "hcl",
        Engine::Emulated,
        ClusterSpec::new(2).pod("web-1", 1).service(
            ServiceSpec::lb("web", 1)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::not_ready("web-1")),
        ),
    )
    .expect("cluster");
    for node in [1, 2] {
        let a = probe(&c, node, 10256, "/healthz");
        assert_eq!(a.status, 200, "node {node}: {a:?}");
        assert_eq!(a.header("Content-Type"), Some("application/json"));
        assert_eq!(a.header("X-Content-Type-Options"), Some("nosniff"));
        let j = a.json().expect("json");
        assert_eq!(j["healthy"], true);
        assert_eq!(j["nodeEligible"], true);
        assert!(
            j["lastUpdated"].is_string() && j["currentTime"].is_string(),
            "{j}"
        );
        let l = probe(&c, node, 10256, "/livez");
        assert_eq!(l.status, 200);
        assert!(l.json().expect("json").get("nodeEligible").is_none());
    }
}

#[test]
fn local_service_check_follows_ready_terminating_and_failing_pods() {
    // spec: H3, H4, P5
    let mut c = Cluster::start(
        "hlo",
        Engine::Emulated,
        ClusterSpec::new(2)
            .pod("web-1", 1)
            .service(local_web().endpoint(EndpointSpec::ready("web-1"))),
    )
    .expect("cluster");

    let a = probe(&c, 1, HC_PORT, "/");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("X-Load-Balancing-Endpoint-Weight"), Some("1"));
    let j = a.json().expect("json");
    assert_eq!(j["service"]["namespace"], "default");
    assert_eq!(j["service"]["name"], "web");
    assert_eq!(j["localEndpoints"], 1);
    assert_eq!(j["serviceProxyHealthy"], true);
    // Node 2 has no serving pod of its own: it fails the check (H3).
    let b = probe(&c, 2, HC_PORT, "/");
    assert_eq!(b.status, 503, "{b:?}");
    assert_eq!(b.json().expect("json")["localEndpoints"], 0);

    // The pod starts terminating: the check fails at once, while the VIP
    // still reaches it as a last resort for the load balancer's window (H4, P5).
    c.update(|s| {
        if let Some(e) = s.service_mut("web").and_then(|w| w.endpoint_mut("web-1")) {
            *e = EndpointSpec::terminating("web-1");
        }
    })
    .expect("update");
    let a = probe(&c, 1, HC_PORT, "/");
    assert_eq!(a.status, 503, "terminating only: {a:?}");
    assert_eq!(a.json().expect("json")["localEndpoints"], 0);
    let vip = c.vip("web", Family::V4, 80).expect("vip");
    match tcp_request(c.client_ns(), vip).expect("client") {
        TcpOutcome::Reply { reply, .. } => assert_eq!(reply.pod, "web-1"),
        other => panic!("terminating fallback: {other:?}"),
    }

    // Failing readiness: fails too.
    c.update(|s| {
        if let Some(e) = s.service_mut("web").and_then(|w| w.endpoint_mut("web-1")) {
            *e = EndpointSpec::not_ready("web-1");
        }
    })
    .expect("update");
    assert_eq!(probe(&c, 1, HC_PORT, "/").status, 503);

    // Ready again: passes again.
    c.update(|s| {
        if let Some(e) = s.service_mut("web").and_then(|w| w.endpoint_mut("web-1")) {
            *e = EndpointSpec::ready("web-1");
        }
    })
    .expect("update");
    assert_eq!(probe(&c, 1, HC_PORT, "/").status, 200);
}

#[test]
fn a_node_marked_for_deletion_fails_healthz_but_stays_live() {
    // spec: H2 (a node the autoscaler is removing stops taking new flows)
    let mut c = Cluster::start(
        "htn",
        Engine::Emulated,
        ClusterSpec::new(1).pod("web-1", 1).service(
            ServiceSpec::lb("web", 1)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::ready("web-1")),
        ),
    )
    .expect("cluster");
    assert_eq!(probe(&c, 1, 10256, "/healthz").status, 200);
    c.update(|s| {
        s.node_taints
            .insert(1, vec!["ToBeDeletedByClusterAutoscaler".to_string()]);
    })
    .expect("update");
    let h = probe(&c, 1, 10256, "/healthz");
    assert_eq!(h.status, 503, "{h:?}");
    assert_eq!(h.json().expect("json")["nodeEligible"], false);
    assert_eq!(probe(&c, 1, 10256, "/livez").status, 200);
}

#[test]
fn metrics_report_syncs_health_answers_and_packets() {
    let c = Cluster::start(
        "hme",
        Engine::Emulated,
        ClusterSpec::new(1).pod("web-1", 1).service(
            ServiceSpec::lb("web", 1)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::ready("web-1")),
        ),
    )
    .expect("cluster");
    let vip = c.vip("web", Family::V4, 80).expect("vip");
    assert!(matches!(
        tcp_request(c.client_ns(), vip).expect("client"),
        TcpOutcome::Reply { .. }
    ));
    assert_eq!(probe(&c, 1, 10256, "/healthz").status, 200);
    // The sync loop refreshes the metrics on every poll (200 ms here); a
    // scraper sees counters at most one poll old.
    let mut m = probe(&c, 1, 10249, "/metrics");
    for _ in 0..50 {
        if m.body
            .contains("sluice_health_requests_total{path=\"/healthz\",code=\"200\"} 1")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        m = probe(&c, 1, 10249, "/metrics");
    }
    assert_eq!(m.status, 200);
    for needle in [
        "sluice_datapath_info{mode=\"emulated\"} 1",
        "sluice_sync_total{result=\"ok\"}",
        "sluice_endpoints{state=\"ready\"} 2",
        "sluice_health_requests_total{path=\"/healthz\",code=\"200\"} 1",
    ] {
        assert!(m.body.contains(needle), "missing {needle:?} in\n{}", m.body);
    }
    let pass = m
        .body
        .lines()
        .find_map(|l| l.strip_prefix("sluice_packets_total{verdict=\"pass\"} "))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("pass counter");
    assert!(pass > 0, "packets went through the program");
}
