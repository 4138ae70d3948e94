//! A cluster run by `sluice-controller`, end to end through namespaces:
//! four nodes from the `netns` provider (real agents registering
//! themselves), a Deployment and Services applied with kubectl, traffic
//! from a client namespace. One test, in order:
//!
//! 1. a readiness flip of one pod travels agent → pod status →
//!    EndpointSlice → every agent: its maps (no request through the
//!    `Cluster` VIP reaches the unready pod) and the `Local` health check
//!    of every node (its `localEndpoints` follows the API's count);
//! 2. `kubectl drain` keeps the `Cluster` Service answering with zero
//!    failed requests from a client looping over the VIP;
//! 3. `kubectl rollout restart` keeps it answering too, every replica
//!    replaced one at a time (maxSurge 1, maxUnavailable 0);
//! 4. a node killed outright (agent SIGKILLed, namespace deleted): its
//!    pods are evicted and rescheduled on live nodes, its Node deleted once
//!    the pool replaced it, and the pods bound to it collected.
//!
//! Everything goes when the cluster guard drops, also on failure (the
//! logs are printed first). Waits are bounded; nothing is timed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use sluice_tests::kube_cluster::{lb_service, KubeCluster, KubeClusterSpec, PodView};
use sluice_tests::{http_get, tcp_request, whoami_bin, Family, TcpOutcome, Traffic};

const WAIT: Duration = Duration::from_secs(60);

fn manifests(whoami: &Path, flip_node: &str, ready_file: &Path) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web, role: replica}}}}
  template:
    metadata: {{labels: {{app: web, role: replica}}}}
    spec:
      terminationGracePeriodSeconds: 5
      tolerations:
      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
      - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}}
      containers:
      - name: whoami
        image: sluice-whoami
        command: [{whoami}, --tcp, "8080"]
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1, failureThreshold: 1}}
---
apiVersion: v1
kind: Pod
metadata: {{name: flip, labels: {{app: web, role: flip}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {flip_node}}}
  terminationGracePeriodSeconds: 2
  containers:
  - name: whoami
    image: sluice-whoami
    command: [{whoami}, --tcp, "8080"]
    readinessProbe:
      exec: {{command: [test, -f, {ready}]}}
      periodSeconds: 1
      failureThreshold: 1
      successThreshold: 1
---
{}---
{}"#,
        lb_service("web", "web", "Cluster", "8080"),
        lb_service("web-local", "web", "Local", "8080"),
        whoami = whoami.display(),
        ready = ready_file.display(),
    )
}

fn ready_on(pods: &[PodView]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in pods.iter().filter(|p| p.ready && !p.deleting) {
        *out.entry(p.node.clone()).or_insert(0) += 1;
    }
    out
}

/// Every node's `Local` health check counts the ready web pods the API
/// shows on it.
fn health_matches_api(c: &KubeCluster, hc_port: u16) -> Option<()> {
    let pods = c.pods("app=web").ok()?;
    let want = ready_on(&pods);
    for n in c.nodes().ok()?.iter().filter(|n| n.ready == "True") {
        let ip = n.ipv4.as_ref()?.parse().ok()?;
        let answer = http_get(c.client(), SocketAddr::new(ip, hc_port), "/healthz").ok()?;
        let local = answer.json().ok()?["localEndpoints"].as_u64()?;
        let expected = want.get(&n.name).copied().unwrap_or(0) as u64;
        if local != expected {
            return None;
        }
        let healthy = answer.status == 200;
        if healthy != (expected > 0) {
            return None;
        }
    }
    Some(())
}

/// Pods answering `n` requests through the Cluster VIP.
fn answered_by(c: &KubeCluster, n: usize) -> BTreeMap<String, usize> {
    let vip = SocketAddr::new(Family::V4.vip(1), 80);
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let key = match tcp_request(c.client(), vip) {
            Ok(TcpOutcome::Reply { reply, .. }) => reply.pod,
            other => format!("{other:?}"),
        };
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

#[test]
fn readiness_drain_and_a_dead_node_through_the_controller() {
    let mut spec = KubeClusterSpec::new(&["t-a", "t-b"], 2);
    spec.monitor_grace_s = 6;
    let c = KubeCluster::start("cc", &spec).expect("the cluster");
    let nodes = c.nodes().expect("nodes");
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    let entry = nodes[0].clone();
    let flip_node = nodes[1].name.clone();
    let ready_file = c.dir.join("flip-ready");
    std::fs::write(&ready_file, b"").expect("ready file");
    let whoami = whoami_bin().expect("sluice-whoami (cargo build -p sluice-tests --bins)");
    c.apply(&manifests(&whoami, &flip_node, &ready_file))
        .expect("apply");
    c.set_vips("web", 1).expect("vips");
    c.set_vips("web-local", 2).expect("vips");
    let (v4, v6) = c.node_addrs(&entry.name).expect("the entry's addresses");
    c.route_vips_via(&v4, &v6).expect("route");
    c.wait_for("4 web pods Ready", WAIT, || {
        let p = c.pods("app=web").ok()?;
        (p.iter().filter(|p| p.ready).count() == 4).then_some(())
    })
    .expect("pods Ready");
    let hc: u16 = c
        .kubectl(&[
            "get",
            "service",
            "web-local",
            "-o",
            "jsonpath={.spec.healthCheckNodePort}",
        ])
        .expect("service")
        .trim()
        .parse()
        .expect("a healthCheckNodePort");
    c.wait_for("every node's health check as the API", WAIT, || {
        health_matches_api(&c, hc)
    })
    .expect("health checks");

    // 1. Readiness flip: the probe fails on the node, the status says so,
    // the slice says so, every agent acts on it.
    // spec: H3 — a node's Local check passes only with a ready local pod.
    std::fs::remove_file(&ready_file).expect("remove the ready file");
    c.wait_for("flip Ready=False in its status", WAIT, || {
        let p = c.pods("role=flip").ok()?;
        p.first().is_some_and(|p| !p.ready).then_some(())
    })
    .expect("status");
    c.wait_for("flip not ready in the EndpointSlice", WAIT, || {
        let flip = c.pods("role=flip").ok()?.first()?.ips.first()?.clone();
        let slices = c
            .get_json(&["endpointslices", "-l", "kubernetes.io/service-name=web"])
            .ok()?;
        let not_ready = slices["items"]
            .as_array()?
            .iter()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .any(|e| e["addresses"][0] == flip.as_str() && e["conditions"]["ready"] == false);
        not_ready.then_some(())
    })
    .expect("slice");
    c.wait_for("every node's health check without flip", WAIT, || {
        health_matches_api(&c, hc)
    })
    .expect("health checks after the flip");
    let seen = answered_by(&c, 30);
    assert!(
        !seen.contains_key("flip") && seen.values().sum::<usize>() == 30,
        "the unready pod is out of every map: {seen:?}"
    );
    std::fs::write(&ready_file, b"").expect("ready file back");
    c.wait_for("flip answering again", WAIT, || {
        answered_by(&c, 8).contains_key("flip").then_some(())
    })
    .expect("flip back");
    c.wait_for("every node's health check with flip", WAIT, || {
        health_matches_api(&c, hc)
    })
    .expect("health checks after the flip back");

    // 2. A drain under traffic: not one request fails.
    // spec: E6 — the drain's evictions go through the Eviction API (the
    // PDB-free replicas here), each pod within its grace.
    let pods = c.pods("role=replica").expect("pods");
    let drained = pods
        .iter()
        .map(|p| p.node.clone())
        .find(|n| *n != entry.name)
        .expect("a replica off the entry node");
    let traffic = Traffic::start(c.client(), SocketAddr::new(Family::V4.vip(1), 80));
    c.kubectl(&[
        "drain",
        &drained,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=60s",
    ])
    .expect("kubectl drain");
    c.wait_for("3 replicas Ready off the drained node", WAIT, || {
        let p = c.pods("role=replica").ok()?;
        let live: Vec<&PodView> = p.iter().filter(|p| !p.deleting).collect();
        (live.len() == 3 && live.iter().all(|p| p.ready && p.node != drained)).then_some(())
    })
    .expect("replicas moved");
    let (ok, failed, errors) = traffic.finish();
    assert!(
        ok > 0 && failed == 0,
        "{ok} answered, {failed} failed during the drain: {errors:?}"
    );
    c.kubectl(&["uncordon", &drained]).expect("uncordon");

    // A rolling update (maxSurge 1, maxUnavailable 0 for 3 replicas) under
    // traffic: every old pod replaced, not one request failed.
    let before: Vec<String> = c
        .pods("role=replica")
        .expect("pods")
        .into_iter()
        .map(|p| p.name)
        .collect();
    let traffic = Traffic::start(c.client(), SocketAddr::new(Family::V4.vip(1), 80));
    c.kubectl(&["rollout", "restart", "deployment/web"])
        .expect("rollout restart");
    c.kubectl(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .expect("rollout status");
    c.wait_for("3 new replicas Ready, the old ones gone", WAIT, || {
        let p = c.pods("role=replica").ok()?;
        let done = p.len() == 3
            && p.iter()
                .all(|p| p.ready && !p.deleting && !before.contains(&p.name));
        done.then_some(())
    })
    .expect("rolled");
    let (ok, failed, errors) = traffic.finish();
    assert!(
        ok > 0 && failed == 0,
        "{ok} answered, {failed} failed during the rollout: {errors:?}"
    );

    // 3. A node killed outright: its pods go elsewhere.
    let pods = c.pods("role=replica").expect("pods");
    let victim = pods
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| p.node.clone())
        .find(|n| *n != entry.name)
        .expect("a replica off the entry node");
    c.kill_node(&victim).expect("kill the node");
    c.wait_for(&format!("{victim} Ready=Unknown"), WAIT, || {
        let n = c.nodes().ok()?;
        n.iter()
            .find(|n| n.name == victim)
            .is_none_or(|n| n.ready == "Unknown")
            .then_some(())
    })
    .expect("the dead node noticed");
    c.wait_for("3 replicas Ready on live nodes", WAIT, || {
        let p = c.pods("role=replica").ok()?;
        let live = p
            .iter()
            .filter(|p| !p.deleting && p.node != victim && p.ready)
            .count();
        (live == 3).then_some(())
    })
    .expect("pods rescheduled");
    // The pool replaced the instance; the dead Node goes, and then (after
    // the pod GC's 40 s quarantine) the pods that were bound to it.
    c.wait_for(&format!("the Node {victim} deleted"), WAIT, || {
        let n = c.nodes().ok()?;
        n.iter().all(|n| n.name != victim).then_some(())
    })
    .expect("stale Node deleted");
    c.wait_for(
        "the dead node's pods collected",
        Duration::from_secs(90),
        || {
            let p = c.pods("app=web").ok()?;
            p.iter().all(|p| p.node != victim).then_some(())
        },
    )
    .expect("orphaned pods deleted");
}
