//! The sync loop end to end without a datapath: a real state file and
//! `FileSource`, real health servers on loopback ephemeral ports, and fakes
//! for the engine and the pods' processes. No root, no namespaces, no sleeps:
//! every step is a `tick`, and assertions look at what the loop produced
//! (engine content, signals, the status file), never at how long it took.

use std::time::Duration;

use serde_json::Value;
use sluice_agent::pods::runtime::Sig;
use sluice_agent::state::source::{StateSource, Update};

mod common;
use common::manifests::{service, slice};
use common::runner_loop::{free_port, Loop, TempDir};

// --- state files -------------------------------------------------------------

fn node(labels: &str, annotations: &str, extra_meta: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Node
metadata: {{name: node-a, labels: {{{labels}}}, annotations: {{{annotations}}}{extra_meta}}}
spec: {{podCIDRs: ["198.19.1.0/24"]}}
status: {{addresses: [{{type: InternalIP, address: 198.18.0.11}}]}}
"#
    )
}

fn pod(name: &str, ip: &str, annotations: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: web}}, annotations: {{{annotations}}}}}
spec:
  nodeName: node-a
  terminationGracePeriodSeconds: 30
  containers: [{{name: c, command: [server]}}]
status: {{podIPs: [{{ip: {ip}}}]}}
"#
    )
}

fn local_service(hc_port: u16, ips: &[&str]) -> String {
    let eps: String = ips
        .iter()
        .map(|ip| format!("- {{addresses: [{ip}], nodeName: node-a}}\n"))
        .collect();
    let hc = format!("healthCheckNodePort: {hc_port}");
    format!("{}{}", service("Local", &hc), slice(&eps))
}

// --- tests -----------------------------------------------------------------

#[test]
fn a_file_that_cannot_be_run_changes_nothing() {
    // spec: H1, H3, P2 — issue 8's black hole: an empty file used to unplug
    // and stop the node's pod before the apply failed on the missing Node,
    // while the maps still pointed at the pod and the Local check said 200.
    // Every version below is refused before anything changes.
    let hc = free_port();
    let good = format!(
        "{}{}{}",
        node("", "", ""),
        pod("web-1", "198.19.1.10", ""),
        local_service(hc, &["198.19.1.10"])
    );
    let other_node = good.replace("name: node-a,", "name: node-z,");
    let bigger = format!(
        "{good}{}",
        service("Cluster", "")
            .replace("name: web,", "name: api,")
            .replace("198.18.100.1", "198.18.100.9")
    );
    let cases: [(&str, Option<String>, &str); 6] = [
        (
            "bad port",
            Some(good.replace("port: 80,", "port: 80000,")),
            "spec.ports[0].port",
        ),
        ("empty", Some(String::new()), "no manifests"),
        (
            "truncated",
            Some(good[..good.len() / 3].to_string()),
            "state.yaml",
        ),
        (
            "without this node",
            Some(other_node),
            "no Node object named \"node-a\"",
        ),
        (
            "over capacity",
            Some(bigger),
            "frontends do not fit: the engine holds 1",
        ),
        ("vanished", None, "No such file"),
    ];
    for (what, text, want) in cases {
        let mut l = Loop::start(&format!("cannot-run-{}", what.replace(' ', "-")), &good);
        l.engine.log().max_frontends = Some(1);
        assert_eq!(l.pods.running(), 1);
        assert_eq!(l.http_status(hc, "/"), 200);
        let applies = l.engine.log().applies;
        let generation = l.status()["generation"].as_u64();
        match &text {
            Some(t) => l.write(t),
            None => {
                std::fs::remove_file(l.dir.0.join("state.yaml")).expect("rm");
                l.settle();
            }
        }
        let st = l.status();
        assert_eq!(st["synced"], false, "{what}: {st}");
        let err = st["error"].as_str().unwrap_or("");
        assert!(err.contains(want), "{what}: {err}");
        assert_eq!(st["generation"].as_u64(), generation, "{what}");
        assert_eq!(l.metrics().sync_rejected, 1, "{what}");
        assert_eq!(l.engine.log().applies, applies, "{what}: maps untouched");
        assert_eq!(l.engine.frontend(80), Some((1, 0)), "{what}");
        assert_eq!(l.engine.log().plugged.len(), 1, "{what}: pod stays plugged");
        assert_eq!(l.pods.running(), 1, "{what}: pod keeps running");
        assert!(
            l.pods.signals("default/web-1").is_empty(),
            "{what}: no signal"
        );
        assert_eq!(
            l.http_status(hc, "/"),
            200,
            "{what}: Local check tells the truth"
        );
        assert_eq!(
            l.http_status(l.node_port, "/healthz"),
            200,
            "{what}: node healthy"
        );
        // The good file again: applied as usual.
        l.write(&good.replace("198.18.100.1", "198.18.100.2"));
        let st = l.status();
        assert_eq!(st["synced"], true, "{what}: {st}");
        assert!(st["error"].is_null(), "{what}: {st}");
        assert!(l.engine.log().applies > applies, "{what}");
    }
}

/// A source that has seen a change and never finishes reading it, as a
/// parser stuck on a hostile file would.
struct StuckSource {
    first: Option<String>,
    since: std::time::Instant,
}

impl StateSource for StuckSource {
    fn poll(&mut self) -> Update {
        match self.first.take() {
            Some(text) => match sluice_agent::state::parse_state(&text) {
                Ok(s) => Update::State(s),
                Err(e) => Update::Rejected(e.to_string()),
            },
            None => Update::Unchanged,
        }
    }
    fn describe(&self) -> String {
        "stuck".into()
    }
    fn busy_since(&self) -> Option<std::time::Instant> {
        self.first.is_none().then_some(self.since)
    }
}

#[test]
fn a_change_that_is_never_parsed_turns_healthz_unhealthy() {
    // spec: H1 — issue 8: a file that stalled the parser for 79 s left
    // /healthz at 200 throughout. A change still being read counts as a
    // queued update: unhealthy once it has waited the health timeout
    // (2 × the 30 s sync period here), as a stuck kube-proxy sync is.
    let dir = TempDir::new("stuck");
    let source = StuckSource {
        first: Some(node("", "", "")),
        since: std::time::Instant::now(),
    };
    let mut l = Loop::start_with(dir, Box::new(source));
    assert_eq!(l.status()["synced"], true);
    assert_eq!(l.http_status(l.node_port, "/healthz"), 200);
    l.clock.advance(Duration::from_secs(59));
    l.tick();
    assert_eq!(
        l.http_status(l.node_port, "/healthz"),
        200,
        "within the timeout"
    );
    l.clock.advance(Duration::from_secs(2));
    l.tick();
    assert_eq!(
        l.http_status(l.node_port, "/healthz"),
        503,
        "past the timeout"
    );
}

/// The drain report's phase for pod `default/<name>`.
fn drain_phase(st: &Value, name: &str) -> Option<String> {
    st["drain"]["pods"].as_array()?.iter().find_map(|p| {
        (p["namespace"] == "default" && p["name"] == name)
            .then(|| p["phase"].as_str().map(str::to_string))
            .flatten()
    })
}

#[test]
fn a_health_port_conflict_is_counted_and_reported() {
    // spec: H3 — a Service whose health-check port is the node server's
    // (configurable, unlike 10256 the file check rejects) is not served, and
    // says so in /metrics and the status file.
    let mut l = Loop::start("conflict", &node("", "", ""));
    let port = l.node_port;
    l.write(&format!(
        "{}{}{}",
        node("", "", ""),
        pod("web-1", "198.19.1.10", ""),
        local_service(port, &["198.19.1.10"])
    ));
    assert_eq!(l.metrics().health_port_conflicts, 1);
    let st = l.status();
    assert_eq!(
        st["healthPortConflicts"],
        serde_json::json!([format!("default/web:{port}")]),
        "{st}"
    );
    // The node server keeps its meaning on that port.
    assert_eq!(l.http_status(port, "/livez"), 200);
}

#[test]
fn the_pool_kind_label_reaches_the_drain() {
    // spec: E2, E5 — `sluice.dev/pool-kind: autopilot` protects a
    // safe-to-evict "false" pod from an upgrade drain; standard does not.
    let protected = r#"cluster-autoscaler.kubernetes.io/safe-to-evict: "false""#;
    for (kind, kept) in [("autopilot", true), ("standard", false)] {
        let pods = format!(
            "{}{}",
            pod("keep", "198.19.1.10", protected),
            pod("plain", "198.19.1.11", "")
        );
        let mut l = Loop::start(kind, &format!("{}{pods}", node("", "", "")));
        assert_eq!(l.pods.running(), 2);
        l.write(&format!(
            "{}{pods}",
            node(
                &format!("sluice.dev/pool-kind: {kind}"),
                "sluice.dev/drain: NodeUpgrade",
                ""
            )
        ));
        let st = l.status();
        assert_eq!(
            drain_phase(&st, "keep") == Some("protected".into()),
            kept,
            "{kind}: {st}"
        );
        assert_eq!(l.pods.signals("default/keep").is_empty(), kept, "{kind}");
        assert_eq!(l.pods.signals("default/plain"), [Sig::Term], "{kind}");
    }
}

#[test]
fn a_budget_in_the_file_holds_the_drain() {
    // spec: E6 — the file's PodDisruptionBudget (minAvailable: 1) lets one
    // of two ready pods go; the other is refused and waits for a retry.
    let pdb = r#"
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
"#;
    let pods = format!(
        "{}{}{pdb}",
        pod("web-1", "198.19.1.10", ""),
        pod("web-2", "198.19.1.11", "")
    );
    let mut l = Loop::start("budget", &format!("{}{pods}", node("", "", "")));
    assert_eq!(l.pods.running(), 2);
    l.write(&format!(
        "{}{pods}",
        node("", "sluice.dev/drain: UserDrain", "")
    ));
    let st = l.status();
    let phases: Vec<Option<String>> = ["web-1", "web-2"]
        .iter()
        .map(|n| drain_phase(&st, n))
        .collect();
    let gone = phases
        .iter()
        .filter(|p| {
            matches!(
                p.as_deref(),
                Some("terminating" | "exited-gracefully" | "killed-after-grace")
            )
        })
        .count();
    let refused = phases
        .iter()
        .filter(|p| p.as_deref() == Some("refused-by-pdb-retrying"))
        .count();
    assert_eq!((gone, refused), (1, 1), "{st}");
    // The budget's status as the disruption controller would write it: two
    // pods expected, one must stay, the allowance is spent.
    assert_eq!(
        st["budgets"],
        serde_json::json!([{
            "pdb": "default/web",
            "expectedPods": 2,
            "currentHealthy": 1,
            "desiredHealthy": 1,
            "disruptionsAllowed": 0,
        }]),
        "{st}"
    );
    assert_eq!(l.pods.running(), 1);
}

#[test]
fn a_failing_node_health_check_neither_evicts_pods_nor_unreadies_endpoints() {
    // spec: H5 — the node fails its load-balancer health check (being
    // deleted, tainted by the autoscaler: H2), which only steers new
    // connections away at the load balancer: its pods keep running, their
    // endpoints stay ready in the maps and in the Local check.
    // spec: H4 — so until the load balancer's unhealthy threshold is
    // reached, connections it still sends are served as before.
    let hc = free_port();
    let rest = format!(
        "{}{}",
        pod("web-1", "198.19.1.10", ""),
        local_service(hc, &["198.19.1.10"])
    );
    let mut l = Loop::start("h5", &format!("{}{rest}", node("", "", "")));
    assert_eq!(l.http_status(l.node_port, "/healthz"), 200);
    let before = l.engine.frontend(80);
    assert_eq!(before, Some((1, 0)));

    let dying = node("", "", r#", deletionTimestamp: "2026-11-23T04:00:00Z""#).replace(
        "spec: {",
        "spec: {taints: [{key: ToBeDeletedByClusterAutoscaler, effect: NoSchedule}], ",
    );
    l.write(&format!("{dying}{rest}"));
    assert_eq!(l.status()["synced"], true);
    assert_eq!(l.http_status(l.node_port, "/healthz"), 503, "H2: fails");
    assert_eq!(l.engine.frontend(80), before, "endpoints untouched");
    assert_eq!(l.http_status(hc, "/"), 200, "the Local check still passes");
    assert!(l.pods.signals("default/web-1").is_empty(), "no eviction");
    assert_eq!(l.pods.running(), 1);
    assert_eq!(l.pods.w().spawned.len(), 1, "no restart");
}

#[test]
fn what_a_previous_agent_plugged_is_released_once_the_first_pods_are_plugged() {
    // spec: P2 — a pod deleted while no agent ran must not keep its link
    // or its addresses: the engine releases what no pod claims, once, with
    // every pod of the first state already plugged (so theirs are kept).
    let hc = free_port();
    let two = format!(
        "{}{}{}{}",
        node("", "", ""),
        pod("web-1", "198.19.1.10", ""),
        pod("web-2", "198.19.1.11", ""),
        local_service(hc, &["198.19.1.10", "198.19.1.11"])
    );
    let mut l = Loop::start("release-unclaimed", &two);
    let plugged = |l: &Loop| l.engine.log().plugged.clone();
    let both: std::collections::BTreeSet<String> =
        ["default/web-1", "default/web-2"].map(String::from).into();
    assert_eq!(plugged(&l), both);
    assert_eq!(l.engine.log().released, [both]);

    // Later states (a pod leaving, one coming back) release nothing more:
    // only a previous agent leaves unclaimed entries behind.
    let one = format!(
        "{}{}{}",
        node("", "", ""),
        pod("web-1", "198.19.1.10", ""),
        local_service(hc, &["198.19.1.10"])
    );
    l.write(&one);
    l.write(&two);
    assert_eq!(l.engine.log().released.len(), 1);
}
