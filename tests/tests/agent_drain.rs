//! The agent's own drain through the API, end to end: a controller-run
//! cluster of four `netns` nodes, a Deployment behind a `Cluster`
//! LoadBalancer Service and a PodDisruptionBudget, a client looping over
//! the VIP. `kubectl annotate node X sluice.dev/drain=NodeUpgrade` makes
//! X's agent do what `kubectl drain` does:
//!
//! 1. the Node is cordoned (`spec.unschedulable`), marked as the agent's
//!    cordon (`sluice.dev/drain-cordoned`);
//! 2. each pod is evicted through the Eviction API: a budget allowing
//!    nothing (`maxUnavailable: 0`) refuses (429), the agent retries and
//!    counts the refusals in its status, and no pod goes;
//! 3. once the budget allows one at a time (`minAvailable: 2`), the pods
//!    go one by one, their replacements land on other nodes, and not one
//!    request fails;
//! 4. removing the annotation uncordons the node (only the agent's own
//!    cordon) and the mark goes;
//! 5. another node's drain, with the controller killed outright (SIGKILL)
//!    as its first eviction is accepted and started again: the drain
//!    finishes and, again, not one request fails.
//!
//! Everything goes when the cluster guard drops, also on failure. Waits are
//! bounded; nothing is timed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use sluice_tests::kube_cluster::{lb_service, KubeCluster, KubeClusterSpec};
use sluice_tests::{whoami_bin, Family, Traffic};

const WAIT: Duration = Duration::from_secs(60);

fn manifests(whoami: &Path) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: web}}}}}}
      containers:
      - name: whoami
        image: sluice-whoami
        command: [{whoami}, --tcp, "8080"]
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1, failureThreshold: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web}}
spec:
  maxUnavailable: 0
  selector: {{matchLabels: {{app: web}}}}
---
{}"#,
        lb_service("web", "web", "Cluster", "8080"),
        whoami = whoami.display(),
    )
}

/// The drain's pods in the agent's status file: (phase, PDB refusals).
fn drain_pods(c: &KubeCluster, node: &str) -> Option<Vec<(String, u64)>> {
    let st = c.agent_status(node).ok()?;
    let pods = st["drain"]["pods"].as_array()?;
    Some(
        pods.iter()
            .map(|p| {
                (
                    p["phase"].as_str().unwrap_or("").to_string(),
                    p["pdbRefusals"].as_u64().unwrap_or(0),
                )
            })
            .collect(),
    )
}

/// Every web pod Ready off `node`, and its agent's drain finished.
fn wait_drained(c: &KubeCluster, node: &str) {
    c.wait_for(
        &format!("4 web pods Ready, none on {node}"),
        Duration::from_secs(120),
        || {
            let p = c.pods("app=web").ok()?;
            let live: Vec<_> = p.iter().filter(|p| !p.deleting).collect();
            (live.len() == 4 && live.iter().all(|p| p.ready && p.node != node)).then_some(())
        },
    )
    .expect("drained");
    c.wait_for("the drain finished in the agent's status", WAIT, || {
        let st = c.agent_status(node).ok()?;
        (st["drain"]["finished"] == true && st["drain"]["totals"]["remaining"] == 0).then_some(())
    })
    .expect("finished");
}

/// The looping client got answers, and not one request failed.
fn no_request_failed(traffic: Traffic, during: &str) {
    let (ok, failed, errors) = traffic.finish();
    assert!(
        ok > 0 && failed == 0,
        "{ok} answered, {failed} failed during {during}: {errors:?}"
    );
}

#[test]
fn the_agents_own_drain_goes_through_the_api() {
    let mut c =
        KubeCluster::start("ad", &KubeClusterSpec::new(&["t-a", "t-b"], 2)).expect("cluster");
    let nodes = c.nodes().expect("nodes");
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    let whoami = whoami_bin().expect("sluice-whoami (cargo build -p sluice-tests --bins)");
    c.apply(&manifests(&whoami)).expect("apply");
    c.set_vips("web", 1).expect("vips");
    c.wait_for("4 web pods Ready", WAIT, || {
        let p = c.pods("app=web").ok()?;
        (p.iter().filter(|p| p.ready).count() == 4).then_some(())
    })
    .expect("pods Ready");
    let pods = c.pods("app=web").expect("pods");
    let drained = pods[0].node.clone();
    let entry = nodes
        .iter()
        .find(|n| n.name != drained)
        .expect("another node")
        .clone();
    let on_drained: Vec<String> = pods
        .iter()
        .filter(|p| p.node == drained)
        .map(|p| p.name.clone())
        .collect();
    let (v4, v6) = c.node_addrs(&entry.name).expect("the entry's addresses");
    c.route_vips_via(&v4, &v6).expect("route");
    let traffic = Traffic::start(c.client(), SocketAddr::new(Family::V4.vip(1), 80));

    // spec: U1, U2 — the agent cordons its node first.
    c.kubectl(&["annotate", "node", &drained, "sluice.dev/drain=NodeUpgrade"])
        .expect("annotate");
    c.wait_for("the node cordoned by its agent", WAIT, || {
        let n = c.get_json(&["node", &drained]).ok()?;
        let ours = n["metadata"]["annotations"]["sluice.dev/drain-cordoned"] == "true";
        (n["spec"]["unschedulable"] == true && ours).then_some(())
    })
    .expect("cordon");

    // spec: E6, U1 — the budget is the Eviction API's: 429, retried, and
    // no pod goes while it allows nothing.
    c.wait_for("every drained pod refused twice", WAIT, || {
        let d = drain_pods(&c, &drained)?;
        (d.len() == on_drained.len()
            && d.iter()
                .all(|(phase, n)| phase == "refused-by-pdb-retrying" && *n >= 2))
        .then_some(())
    })
    .expect("refusals");
    let still = c.pods("app=web").expect("pods");
    for name in &on_drained {
        assert!(
            still.iter().any(|p| &p.name == name && !p.deleting),
            "{name} went past a budget allowing nothing: {still:?}"
        );
    }

    // The budget allows one at a time: the drain completes, replacements
    // elsewhere, not one request lost.
    c.apply(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n\
         spec: {minAvailable: 3, selector: {matchLabels: {app: web}}}\n",
    )
    .expect("budget");
    wait_drained(&c, &drained);
    no_request_failed(traffic, "the drain");

    // The annotation goes: the agent's cordon goes with it.
    c.kubectl(&["annotate", "node", &drained, "sluice.dev/drain-"])
        .expect("annotate");
    c.wait_for("the node uncordoned, the mark gone", WAIT, || {
        let n = c.get_json(&["node", &drained]).ok()?;
        let unmarked = n["metadata"]["annotations"]["sluice.dev/drain-cordoned"].is_null();
        (n["spec"]["unschedulable"] != true && unmarked).then_some(())
    })
    .expect("uncordon");

    // spec: E6, U1 — a controller killed mid-drain and restarted on its
    // store: the drain resumes where it was and nothing is lost.
    let pods = c.pods("app=web").expect("pods");
    let second = pods
        .iter()
        .map(|p| p.node.clone())
        .find(|n| *n != entry.name && *n != drained)
        .expect("a node with a pod, neither the entry nor the first drained");
    let traffic = Traffic::start(c.client(), SocketAddr::new(Family::V4.vip(1), 80));
    c.kubectl(&["annotate", "node", &second, "sluice.dev/drain=NodeUpgrade"])
        .expect("annotate");
    c.wait_for("a pod of the second node evicted", WAIT, || {
        let p = c.pods("app=web").ok()?;
        p.iter()
            .any(|p| p.node == second && p.deleting)
            .then_some(())
    })
    .expect("first eviction");
    c.crash_and_restart_controller()
        .expect("controller restarted");
    wait_drained(&c, &second);
    no_request_failed(traffic, "the drain across a controller crash");
}
