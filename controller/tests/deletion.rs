//! Graceful deletion and finalizers through the real kubectl, on both
//! stores: a pod bound to a node stays with a deletionTimestamp until its
//! node deletes it at grace 0; an unbound pod goes at once (and `kubectl
//! delete` sees it go); an object with finalizers stays until an update
//! empties them.

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};

fn get(s: &Server, args: &[&str]) -> Option<serde_json::Value> {
    let mut a = vec!["get"];
    a.extend(args);
    a.extend(["-o", "json"]);
    let o = s.kubectl("admin", &a);
    if !o.status.success() {
        assert!(text(&o).contains("NotFound"), "{}", text(&o));
        return None;
    }
    Some(serde_json::from_slice(&o.stdout).expect("json"))
}

const PODS: &str = "apiVersion: v1
kind: Pod
metadata: {name: bound, namespace: default}
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 20
  containers: [{name: c, image: x}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: unbound, namespace: default}
spec:
  containers: [{name: c, image: x}]
";

const HELD: &str = "apiVersion: v1
kind: Service
metadata: {name: held, namespace: default, finalizers: [sluice.dev/hold]}
spec: {ports: [{port: 80}]}
";

fn graceful_pods(backend: Backend) {
    let s = Server::start(&format!("del-pods-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "pods.yaml", PODS);
    ok(&s, "admin", &["create", "--validate=false", "-f", &f]);

    // A bound pod waits for its node: deletionTimestamp = now + its own
    // grace, and it is still there.
    let out = ok(&s, "admin", &["delete", "pod", "bound", "--wait=false"]);
    assert!(out.contains("deleted"), "{out}");
    let pod = get(&s, &["pod", "bound"]).expect("still there");
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 20);
    // Its node finishes the deletion (a kubelet's delete at grace 0).
    ok(
        &s,
        "node-1",
        &["delete", "pod", "bound", "--force", "--grace-period=0"],
    );
    assert!(get(&s, &["pod", "bound"]).is_none());

    // An unbound pod goes at once; kubectl delete waits for it with a
    // watch and returns.
    let out = ok(&s, "admin", &["delete", "pod", "unbound", "--timeout=30s"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(get(&s, &["pod", "unbound"]).is_none());
}

fn finalizers(backend: Backend) {
    let s = Server::start(&format!("del-fin-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "held.yaml", HELD);
    ok(&s, "admin", &["create", "--validate=false", "-f", &f]);
    ok(&s, "admin", &["delete", "service", "held", "--wait=false"]);
    let svc = get(&s, &["service", "held"]).expect("held by its finalizer");
    assert!(svc["metadata"]["deletionTimestamp"].is_string(), "{svc}");
    assert_eq!(svc["metadata"]["deletionGracePeriodSeconds"], 0);
    // Other updates keep it pending...
    ok(&s, "admin", &["label", "service", "held", "x=y"]);
    assert!(get(&s, &["service", "held"]).is_some());
    // ...the one that empties the finalizers removes it.
    ok(
        &s,
        "admin",
        &[
            "patch",
            "service",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    assert!(get(&s, &["service", "held"]).is_none());
}

on_both_stores!(graceful_pods, finalizers);
