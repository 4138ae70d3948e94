//! The lab's health-check part: what a load balancer probing the nodes is
//! told (H1–H3), while a pod turns terminating and a node is marked for
//! deletion, and that what still reaches a failing node meanwhile is served
//! (H4, P5).

use std::net::SocketAddr;

use anyhow::Result;
use serde_json::Value;
use sluice_tests::{http_get, tcp_request, Cluster, ClusterSpec, EndpointSpec, Family, TcpOutcome};

/// `healthCheckNodePort` of the lab's `Local` Service.
pub const LOCAL_HC_PORT: u16 = 30_080;
/// The `Local` Service whose check is shown.
pub const LOCAL_SERVICE: &str = "web-local";
const TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Printed rows and how many did not show what they should.
#[derive(Default)]
struct Report {
    failures: usize,
}

impl Report {
    fn row(&mut self, node: usize, check: &str, answer: &str, ok: bool) {
        if !ok {
            self.failures += 1;
        }
        let verdict = if ok { "ok" } else { "FAIL" };
        println!("  node-{node}  {check:<34} {answer:<46} {verdict}");
    }
}

/// GET `path` on node `node`'s `port` from the client namespace.
fn probe(c: &Cluster, node: usize, port: u16, path: &str) -> (u16, Value) {
    let addr = SocketAddr::new(Family::V4.node_ip(node), port);
    match http_get(c.client_ns(), addr, path) {
        Ok(a) => (a.status, a.json().unwrap_or(Value::Null)),
        Err(_) => (0, Value::Null),
    }
}

fn node_check(r: &mut Report, c: &Cluster, node: usize, path: &str, want: u16, eligible: bool) {
    let (code, j) = probe(c, node, 10256, path);
    let mut answer = format!("{code} healthy={}", j["healthy"]);
    let mut ok = code == want;
    if path == "/healthz" {
        answer.push_str(&format!(" nodeEligible={}", j["nodeEligible"]));
        ok &= j["nodeEligible"] == eligible;
    }
    r.row(node, &format!(":10256{path}"), &answer, ok);
}

fn local_check(r: &mut Report, c: &Cluster, node: usize, want: u16, endpoints: u64) {
    let (code, j) = probe(c, node, LOCAL_HC_PORT, "/");
    let answer = format!(
        "{code} localEndpoints={} serviceProxyHealthy={}",
        j["localEndpoints"], j["serviceProxyHealthy"]
    );
    let ok = code == want && j["localEndpoints"].as_u64() == Some(endpoints);
    r.row(
        node,
        &format!(":{LOCAL_HC_PORT}/ ({LOCAL_SERVICE}, Local)"),
        &answer,
        ok,
    );
}

fn set_endpoint(spec: &mut ClusterSpec, pod: &str, e: EndpointSpec) {
    if let Some(ep) = spec
        .service_mut(LOCAL_SERVICE)
        .and_then(|s| s.endpoint_mut(pod))
    {
        *ep = e;
    }
}

/// The health-check walk-through; the number of checks that failed.
pub fn demo(c: &mut Cluster) -> Result<usize> {
    let mut r = Report::default();
    println!("==> load-balancer health checks: what a load balancer probing each node is told");
    for node in 1..=c.spec().nodes {
        node_check(&mut r, c, node, "/healthz", 200, true);
        local_check(&mut r, c, node, 200, 1);
    }

    println!(
        "  -- web-1 turns terminating (its pod is being evicted): node-1 fails the Local check"
    );
    c.update(|s| set_endpoint(s, "web-1", EndpointSpec::terminating("web-1")))?;
    local_check(&mut r, c, 1, 503, 0);
    local_check(&mut r, c, 2, 200, 1);
    // Until the load balancer's unhealthy threshold, node-1 still gets new
    // connections: the terminating pod serves them as a last resort.
    c.route_vips_via(1)?;
    let vip = c.vip(LOCAL_SERVICE, Family::V4, 80)?;
    let answer = match tcp_request(c.client_ns(), vip)? {
        TcpOutcome::Reply { reply, .. } => {
            format!("answered by {} (terminating fallback)", reply.pod)
        }
        other => format!("{other:?}"),
    };
    let ok = answer.starts_with("answered by web-1");
    r.row(
        1,
        &format!("new connection to {LOCAL_SERVICE}"),
        &answer,
        ok,
    );
    c.update(|s| set_endpoint(s, "web-1", EndpointSpec::ready("web-1")))?;
    local_check(&mut r, c, 1, 200, 1);

    println!("  -- node-2 tainted {TAINT}: /healthz fails, /livez does not");
    c.update(|s| {
        s.node_taints.insert(2, vec![TAINT.into()]);
    })?;
    node_check(&mut r, c, 2, "/healthz", 503, false);
    node_check(&mut r, c, 2, "/livez", 200, true);
    c.update(|s| {
        s.node_taints.remove(&2);
    })?;
    node_check(&mut r, c, 2, "/healthz", 200, true);
    println!();
    Ok(r.failures)
}
