//! The Eviction subresource and `kubectl drain` end to end, on both stores.
//!
//! The drain mirrors a Kubernetes node drain: two Ready pods of one
//! ReplicaSet on node-1 under a PodDisruptionBudget with `minAvailable: 2`.
//! `kubectl drain` (default grace: each pod's own) is held back by 429s,
//! which it retries every 5 s; `minAvailable: 1` then lets one eviction
//! through at a time. There is no agent and no ReplicaSet controller here,
//! so the test plays both, as they would act in a cluster: node-1's agent
//! sees a pod marked for deletion (bound pods are deleted gracefully:
//! deletionTimestamp, grace from `terminationGracePeriodSeconds`) and
//! deletes it at grace 0 with node-1's own credentials; the ReplicaSet
//! replaces it with a Ready pod on node-2, which gives the budget its next
//! allowance. A drain with `--grace-period=0` or `--force` would only hide
//! that protocol.

#[macro_use]
mod common;
use common::{ok, server_status, text, wait_for, write, Backend, Server};

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

fn json(s: &Server, who: &str, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, who, &a)).expect("json")
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

const NODES: &str = "apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: v1
kind: Node
metadata: {name: node-2}
";

fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: web}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: 6f1c1b1e-0000-4000-8000-000000000001, controller: true}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 20
  containers: [{{name: c, image: x}}]
"
    )
}

fn pdb(name: &str, min_available: u32) -> String {
    format!(
        "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, namespace: default}}
spec:
  minAvailable: {min_available}
  selector:
    matchLabels: {{app: web}}
"
    )
}

/// Change the budget `web` as a user would, with a merge patch.
fn min_available(s: &Server, n: u32) {
    let p = format!(r#"{{"spec":{{"minAvailable":{n}}}}}"#);
    ok(
        s,
        "admin",
        &["patch", "pdb", "web", "--type=merge", "-p", &p],
    );
}

const READY: &str =
    r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;

/// Create a pod and report it Ready through `/status`, as its node's agent.
fn run_pod(s: &Server, name: &str, node: &str) {
    let f = write(s, &format!("{name}.yaml"), &pod(name, node));
    ok(s, "admin", &["create", "--validate=false", "-f", &f]);
    // node-1 writes its own pods' status; the test bed has no node-2
    // identity, so the admin stands in for it.
    let who = if node == "node-1" { "node-1" } else { "admin" };
    ok(
        s,
        who,
        &[
            "patch",
            "pod",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            READY,
        ],
    );
}

fn evict(s: &Server, name: &str) -> std::process::Output {
    let f = write(
        s,
        &format!("evict-{name}.json"),
        &format!(
            r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{name}","namespace":"default"}}}}"#
        ),
    );
    s.kubectl(
        "admin",
        &[
            "create",
            "--raw",
            &format!("/api/v1/namespaces/default/pods/{name}/eviction"),
            "-f",
            &f,
            "-v=6",
        ],
    )
}

fn drain_held_back_then_let_go(backend: Backend) {
    let s = Server::start(&format!("drain-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "nodes.yaml", NODES);
    ok(&s, "admin", &["create", "--validate=false", "-f", &f]);
    run_pod(&s, "web-1", "node-1");
    run_pod(&s, "web-2", "node-1");
    let budget = write(&s, "pdb.yaml", &pdb("web", 2));
    ok(&s, "admin", &["apply", "--validate=false", "-f", &budget]);

    ok(&s, "admin", &["cordon", "node-1"]);
    let node = json(&s, "admin", &["get", "node", "node-1"]);
    assert_eq!(node["spec"]["unschedulable"], true, "{node}");

    let log = s.dir.join("drain.log");
    let mut drain = s.kubectl_spawn(
        "admin",
        &["drain", "node-1", "--ignore-daemonsets", "--timeout=150s"],
        &log,
    );
    let drain_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // Held back: kubectl reports the 429 and retries.
    wait_for(
        Duration::from_secs(30),
        "drain refused by the budget",
        || {
            drain_log()
                .contains("Cannot evict pod as it would violate the pod's disruption budget")
                .then_some(())
        },
    );
    let pods = json(&s, "admin", &["get", "pods"]);
    assert!(
        items(&pods)
            .iter()
            .all(|p| p["metadata"]["deletionTimestamp"].is_null()),
        "nothing evicted while the budget forbids it: {pods}"
    );

    // The budget relaxed: one disruption at a time.
    min_available(&s, 1);

    // Play node-1's agent and the ReplicaSet until the drain ends.
    let mut marked: BTreeMap<String, Value> = BTreeMap::new();
    let mut replacements = 0;
    let status = wait_for(Duration::from_secs(160), "kubectl drain to finish", || {
        if let Ok(Some(st)) = drain.try_wait() {
            return Some(st);
        }
        let on_node = json(
            &s,
            "node-1",
            &["get", "pods", "--field-selector", "spec.nodeName=node-1"],
        );
        for p in items(&on_node) {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
            if p["metadata"]["deletionTimestamp"].is_null() || marked.contains_key(&name) {
                continue;
            }
            marked.insert(name.clone(), p["metadata"].clone());
            ok(
                &s,
                "node-1",
                &["delete", "pod", &name, "--force", "--grace-period=0"],
            );
            replacements += 1;
            run_pod(&s, &format!("web-r{replacements}"), "node-2");
        }
        None
    });
    let _ = drain.kill();
    assert!(
        status.success(),
        "drain failed: {}\n{}",
        drain_log(),
        s.log()
    );
    let out = drain_log();
    assert!(out.contains("node/node-1 drained"), "{out}");
    for name in ["web-1", "web-2"] {
        assert!(out.contains(&format!("pod/{name} evicted")), "{out}");
        // Evicted gracefully: each waited its own grace for the node.
        let m = marked
            .get(name)
            .unwrap_or_else(|| panic!("{name} never marked: {out}"));
        assert_eq!(m["deletionGracePeriodSeconds"], 20, "{m}");
        assert!(m["deletionTimestamp"].is_string(), "{m}");
    }

    // What the server holds now: node-1 cordoned and empty, the
    // replacements on node-2, the budget's last eviction recorded.
    let node = json(&s, "admin", &["get", "node", "node-1"]);
    assert_eq!(node["spec"]["unschedulable"], true);
    let left = json(
        &s,
        "admin",
        &["get", "pods", "--field-selector", "spec.nodeName=node-1"],
    );
    assert!(items(&left).is_empty(), "{left}");
    let on_2 = json(
        &s,
        "admin",
        &["get", "pods", "--field-selector", "spec.nodeName=node-2"],
    );
    assert_eq!(items(&on_2).len(), 2, "{on_2}");
    let b = json(&s, "admin", &["get", "pdb", "web"]);
    assert_eq!(b["status"]["disruptionsAllowed"], 0, "{b}");
    assert_eq!(b["status"]["desiredHealthy"], 1, "{b}");
    let disrupted = b["status"]["disruptedPods"]
        .as_object()
        .map(|m| m.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    assert_eq!(disrupted.len(), 1, "{b}");
    assert!(["web-1", "web-2"].contains(&disrupted[0].as_str()), "{b}");
}

fn eviction_refusals(backend: Backend) {
    let s = Server::start(&format!("evict-{backend:?}").to_lowercase(), backend);
    run_pod(&s, "web-1", "node-1");
    let budget = write(&s, "pdb.yaml", &pdb("web", 1));
    ok(&s, "admin", &["create", "--validate=false", "-f", &budget]);

    // 429, the budget named in the causes.
    let o = evict(&s, "web-1");
    assert!(!o.status.success());
    let st = server_status(&o).unwrap_or_else(|| panic!("no Status: {}", text(&o)));
    assert_eq!(st["code"], 429, "{st}");
    assert_eq!(st["reason"], "TooManyRequests", "{st}");
    assert_eq!(
        st["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &st["details"]["causes"][0];
    assert_eq!(cause["reason"], "DisruptionBudget", "{st}");
    assert!(
        cause["message"]
            .as_str()
            .is_some_and(|m| m.contains("disruption budget web needs 1 healthy pods")),
        "{st}"
    );

    // Two budgets over one pod: 500, as kube-apiserver.
    let second = write(&s, "pdb2.yaml", &pdb("web-too", 0));
    ok(&s, "admin", &["create", "--validate=false", "-f", &second]);
    let o = evict(&s, "web-1");
    let st = server_status(&o).unwrap_or_else(|| panic!("no Status: {}", text(&o)));
    assert_eq!(st["code"], 500, "{st}");
    assert!(
        st["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than one PodDisruptionBudget")),
        "{st}"
    );
    assert!(json(&s, "admin", &["get", "pod", "web-1"])["metadata"]["deletionTimestamp"].is_null());

    // Allowed once the budgets permit: 201, and the bound pod is marked.
    ok(&s, "admin", &["delete", "pdb", "web-too"]);
    min_available(&s, 0);
    let o = evict(&s, "web-1");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status=\"201 Created\""),
        "{}",
        text(&o)
    );
    let p = json(&s, "admin", &["get", "pod", "web-1"]);
    assert!(p["metadata"]["deletionTimestamp"].is_string(), "{p}");
    // Two evictions at once with one disruption to give: exactly one
    // spends it (the budget's status is written against its revision).
    run_pod(&s, "web-2", "node-1");
    run_pod(&s, "web-3", "node-1");
    min_available(&s, 1);
    let both = std::thread::scope(|sc| {
        let a = sc.spawn(|| evict(&s, "web-2").status.success());
        let b = sc.spawn(|| evict(&s, "web-3").status.success());
        [a.join().unwrap_or(false), b.join().unwrap_or(false)]
    });
    assert_eq!(
        both.iter().filter(|x| **x).count(),
        1,
        "one allowance, one eviction: {both:?}"
    );

    // A node evicts the pods bound to it (its agent drains through the
    // Eviction API), no others.
    run_pod(&s, "web-4", "node-2");
    let body = write(
        &s,
        "evict-web-4.json",
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web-4","namespace":"default"}}"#,
    );
    let as_node = |pod: &str, body: &str| {
        s.kubectl(
            "node-1",
            &[
                "create",
                "--raw",
                &format!("/api/v1/namespaces/default/pods/{pod}/eviction"),
                "-f",
                body,
            ],
        )
    };
    let o = as_node("web-4", &body);
    assert!(text(&o).contains("Forbidden"), "{}", text(&o));
    assert!(json(&s, "admin", &["get", "pod", "web-4"])["metadata"]["deletionTimestamp"].is_null());
    let own = s.dir.join("evict-web-2.json").display().to_string();
    let o = as_node("web-2", &own);
    assert!(!text(&o).contains("Forbidden"), "{}", text(&o));
}

on_both_stores!(drain_held_back_then_let_go, eviction_refusals);
