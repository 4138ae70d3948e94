//! The API source end to end through kube-rs: a small stand-in API server
//! on loopback serves the four `sluice.dev/v1` lists and a watch stream;
//! the watchers' joined configuration arrives, and follows a watch event.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

use sluice_lb::config::watch::spawn;
use sluice_lb::config::LbConfig;

/// Lists by plural, and watch events (plural, event) for open watches.
struct Fake {
    lists: BTreeMap<&'static str, Vec<Value>>,
    events: broadcast::Sender<(String, Value)>,
}

/// The plural a request path names: `/apis/sluice.dev/v1/<plural>?…`.
fn plural(target: &str) -> String {
    let path = target.split('?').next().unwrap_or("");
    path.rsplit('/').next().unwrap_or("").to_string()
}

async fn connection(mut s: TcpStream, fake: Arc<Fake>) {
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(e) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break e + 4;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let target = head.split(' ').nth(1).unwrap_or("").to_string();
        let kind = plural(&target);
        if target.contains("watch=true") || target.contains("watch=1") {
            let mut rx = fake.events.subscribe();
            let hdr = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if s.write_all(hdr.as_bytes()).await.is_err() {
                return;
            }
            while let Ok((p, ev)) = rx.recv().await {
                if p != kind {
                    continue;
                }
                let line = format!("{ev}\n");
                let framed = format!("{:x}\r\n{line}\r\n", line.len());
                if s.write_all(framed.as_bytes()).await.is_err() {
                    return;
                }
            }
            return;
        }
        let items = fake.lists.get(kind.as_str()).cloned().unwrap_or_default();
        let body = json!({
            "apiVersion": "sluice.dev/v1",
            "kind": "List",
            "metadata": {"resourceVersion": "1"},
            "items": items,
        })
        .to_string();
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn meta(kind: &str, ns: Option<&str>, name: &str) -> Value {
    let mut m = json!({"name": name, "resourceVersion": "1", "uid": format!("{kind}-{name}")});
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    json!({"apiVersion": "sluice.dev/v1", "kind": kind, "metadata": m})
}

fn with(mut v: Value, key: &str, x: Value) -> Value {
    v[key] = x;
    v
}

fn neg(endpoints: Value, rv: &str) -> Value {
    let mut n = with(
        meta("NetworkEndpointGroup", Some("default"), "web.zone-a"),
        "spec",
        json!({"networkEndpointType": "GCE_VM_IP", "service": "web", "zone": "zone-a", "endpoints": endpoints}),
    );
    n["metadata"]["resourceVersion"] = json!(rv);
    n
}

/// Waits (bounded) for a configuration satisfying `f`.
async fn until(
    rx: &mut tokio::sync::watch::Receiver<Option<LbConfig>>,
    what: &str,
    f: impl Fn(&LbConfig) -> bool,
) -> LbConfig {
    let wait = async {
        loop {
            if let Some(c) = rx.borrow_and_update().clone().filter(|c| f(c)) {
                return c;
            }
            if rx.changed().await.is_err() {
                panic!("the joiner stopped before {what}");
            }
        }
    };
    match tokio::time::timeout(Duration::from_secs(20), wait).await {
        Ok(c) => c,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

#[tokio::test]
async fn the_watchers_join_the_four_kinds_and_follow_a_change() {
    let lb = with(
        meta("L4LoadBalancer", Some("default"), "web"),
        "spec",
        json!({"service": "web", "type": "Internal", "backends": "NetworkEndpointGroups",
               "externalTrafficPolicy": "Cluster", "healthCheck": "web",
               "frontends": [{"ipAddress": "198.19.0.10", "port": 80, "protocol": "TCP"}],
               "networkEndpointGroups": ["web.zone-a"]}),
    );
    let hc = with(
        with(
            meta("HealthCheck", Some("default"), "web"),
            "spec",
            json!({}),
        ),
        "status",
        json!({"port": 10256, "requestPath": "/healthz", "checkIntervalSec": 8, "timeoutSec": 1,
               "healthyThreshold": 1, "unhealthyThreshold": 3}),
    );
    let ig = with(
        meta("InstanceGroup", None, "zone-a"),
        "spec",
        json!({"zone": "zone-a", "instances": []}),
    );
    let (events, _) = broadcast::channel(16);
    let fake = Arc::new(Fake {
        lists: BTreeMap::from([
            ("l4loadbalancers", vec![lb]),
            ("healthchecks", vec![hc]),
            (
                "networkendpointgroups",
                vec![neg(
                    json!([{"instance": "a1", "ipAddress": "198.18.1.2"}]),
                    "1",
                )],
            ),
            ("instancegroups", vec![ig]),
        ]),
        events,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server_fake = fake.clone();
    let server = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(connection(s, server_fake.clone()));
        }
    });
    let url = format!("http://{addr}").parse().expect("url");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
    let (mut rx, tasks) = spawn(client);
    let first = until(&mut rx, "the initial configuration", |c| {
        !c.services.is_empty()
    })
    .await;
    assert_eq!(first.services.len(), 1);
    assert_eq!(first.services[0].name, "default/web");
    let nodes: Vec<&str> = first.services[0]
        .backends
        .iter()
        .map(|b| b.node.as_str())
        .collect();
    assert_eq!(nodes, ["a1"]);
    // The NEG gains an endpoint; the watches may still be connecting, so
    // the event is sent until it lands (bounded by `until`).
    let modified = json!({"type": "MODIFIED", "object": neg(
        json!([{"instance": "a1", "ipAddress": "198.18.1.2"}, {"instance": "a2", "ipAddress": "198.18.1.3"}]),
        "2",
    )});
    let sender = fake.events.clone();
    let resend = tokio::spawn(async move {
        for _ in 0..100 {
            let _ = sender.send(("networkendpointgroups".to_string(), modified.clone()));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let second = until(&mut rx, "the second endpoint", |c| {
        c.services.first().is_some_and(|s| s.backends.len() == 2)
    })
    .await;
    assert_eq!(second.services[0].backends[1].node, "a2");
    resend.abort();
    for t in tasks {
        t.abort();
    }
    server.abort();
}
