//! The columns of the L4 load balancer's objects (issue 11): what a user
//! checks first — the kind an LB got and what stands behind it, a health
//! check's effective values (its status: the overrides applied), each
//! NEG's and instance group's size.

use serde_json::Value;
use sluice_model::k8s::jiff::Timestamp;

use super::{col, int, int_at, or_none, str_at, Cell, Cells, Column, AGE, NAME};

fn count(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(0, |a| i64::try_from(a.len()).unwrap_or(i64::MAX))
}

/// `ip:port/PROTO` of at most three frontends, then how many more.
fn frontends(lb: &Value) -> String {
    let all: Vec<String> = lb
        .pointer("/spec/frontends")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{}:{}/{}",
                str_at(f, "/ipAddress").unwrap_or_default(),
                int_at(f, "/port"),
                str_at(f, "/protocol").unwrap_or_default()
            )
        })
        .collect();
    match all.len() {
        0 => "<none>".into(),
        n if n <= 3 => all.join(","),
        n => format!("{} + {} more...", all[..3].join(","), n - 3),
    }
}

/// `groups/members`: the NEGs or instance groups, and the nodes in them.
fn backends(lb: &Value) -> String {
    let groups = count(lb, "/spec/networkEndpointGroups") + count(lb, "/spec/instanceGroups");
    format!("{groups}/{}", int_at(lb, "/status/members"))
}

fn seconds(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr).and_then(Value::as_i64) {
        Some(s) => format!("{s}s"),
        None => "<none>".into(),
    }
}

fn lb_cells(lb: &Value, now: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(lb),
        Cell::Str(or_none(str_at(lb, "/spec/type"))),
        Cell::Str(or_none(str_at(lb, "/spec/externalTrafficPolicy"))),
        Cell::Str(frontends(lb)),
        Cell::Str(backends(lb)),
        Cell::age(lb, now),
    ]
}

fn hc_cells(hc: &Value, _: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(hc),
        Cell::Int(int_at(hc, "/status/port")),
        Cell::Str(or_none(str_at(hc, "/status/requestPath"))),
        Cell::Str(seconds(hc, "/status/checkIntervalSec")),
        Cell::Str(seconds(hc, "/status/timeoutSec")),
        Cell::Int(int_at(hc, "/status/healthyThreshold")),
        Cell::Int(int_at(hc, "/status/unhealthyThreshold")),
    ]
}

fn neg_cells(neg: &Value, now: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(neg),
        Cell::Str(or_none(str_at(neg, "/spec/service"))),
        Cell::Str(or_none(str_at(neg, "/spec/zone"))),
        Cell::Int(count(neg, "/spec/endpoints")),
        Cell::age(neg, now),
    ]
}

fn ig_cells(ig: &Value, now: Timestamp) -> Vec<Cell> {
    vec![
        Cell::name(ig),
        Cell::Str(or_none(str_at(ig, "/spec/zone"))),
        Cell::Int(count(ig, "/spec/instances")),
        Cell::age(ig, now),
    ]
}

/// The columns of one of the four kinds; `None` for any other.
pub fn for_kind(kind: &str) -> Option<(Vec<Column>, Cells)> {
    Some(match kind {
        "L4LoadBalancer" => (
            vec![
                NAME,
                col(
                    "Type",
                    "The kind of load balancer, decided when it was made.",
                ),
                col("Policy", "The Service's externalTrafficPolicy."),
                col(
                    "Frontends",
                    "The addresses, ports and protocols it answers on.",
                ),
                col(
                    "Backends",
                    "Its NEGs or instance groups / the nodes in them.",
                ),
                AGE,
            ],
            lb_cells,
        ),
        "HealthCheck" => (
            vec![
                NAME,
                int("Port", "The port probed (effective)."),
                col("Path", "The HTTP path probed (effective)."),
                col("Interval", "Time between probes (effective)."),
                col("Timeout", "Time a probe may take (effective)."),
                int("Healthy", "Passing probes before a node takes traffic."),
                int(
                    "Unhealthy",
                    "Failing probes before a node is steered away from.",
                ),
            ],
            hc_cells,
        ),
        "NetworkEndpointGroup" => (
            vec![
                NAME,
                col("Service", "The Service the NEG serves."),
                col("Zone", "The zone of its nodes."),
                int("Endpoints", "How many nodes it holds."),
                AGE,
            ],
            neg_cells,
        ),
        "InstanceGroup" => (
            vec![
                NAME,
                col("Zone", "The zone of its nodes."),
                int("Instances", "How many nodes it holds."),
                AGE,
            ],
            ig_cells,
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::strs;
    use super::for_kind;
    use serde_json::json;

    #[test]
    fn rows_read_the_spec_and_the_effective_status() {
        let lb = json!({"metadata": {"name": "web", "creationTimestamp": "2026-11-23T11:00:00Z"},
            "spec": {"type": "Internal", "externalTrafficPolicy": "Local",
                "frontends": [{"ipAddress": "198.19.0.1", "port": 80, "protocol": "TCP"},
                    {"ipAddress": "198.19.0.1", "port": 81, "protocol": "TCP"},
                    {"ipAddress": "198.19.0.1", "port": 82, "protocol": "TCP"},
                    {"ipAddress": "198.19.0.1", "port": 53, "protocol": "UDP"}],
                "networkEndpointGroups": ["web.a", "web.b"]},
            "status": {"members": 24}});
        assert_eq!(
            strs("L4LoadBalancer", lb),
            [
                "web",
                "Internal",
                "Local",
                "198.19.0.1:80/TCP,198.19.0.1:81/TCP,198.19.0.1:82/TCP + 1 more...",
                "2/24",
                "60m"
            ]
        );
        let hc = json!({"metadata": {"name": "web"}, "spec": {},
            "status": {"port": 10256, "requestPath": "/healthz", "checkIntervalSec": 8,
                "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 3}});
        assert_eq!(
            strs("HealthCheck", hc),
            ["web", "10256", "/healthz", "8s", "1s", "1", "3"]
        );
        // Nothing written yet: placeholders, no panic.
        assert_eq!(strs("HealthCheck", json!({}))[2..4], ["<none>", "<none>"]);
        assert_eq!(
            strs("L4LoadBalancer", json!({"spec": 3}))[3..5],
            ["<none>", "0/0"]
        );
        assert!(for_kind("Pod").is_none());
    }
}
