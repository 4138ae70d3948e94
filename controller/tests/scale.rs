//! The scale subresource of Deployments and ReplicaSets end to end, with
//! the real `kubectl scale` on both stores: the parent's `spec.replicas`
//! set (and nothing else), `--current-replicas` checked, a stale
//! resourceVersion refused (409), the scale's manager owning the
//! replicas in managedFields, dry runs, and nodes refused (403).

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};

use serde_json::{json, Value};

fn get(s: &Server, what: &str) -> Value {
    let out = ok(
        s,
        "admin",
        &["get", what, "-o", "json", "--show-managed-fields"],
    );
    serde_json::from_str(&out).expect("json")
}

fn workload(kind: &str, name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: {kind}
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: c, image: nginx:1}}]}}
"
    )
}

/// The managedFields entry of `manager` with `subresource` (`""`: none).
fn entry(obj: &Value, manager: &str, subresource: &str) -> Option<Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["subresource"].as_str().unwrap_or("") == subresource)
        .cloned()
}

fn scale_sets_only_the_replicas(backend: Backend) {
    let s = Server::start(&format!("scale-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "web.yaml", &workload("Deployment", "web", 2));
    ok(&s, "admin", &["apply", "-f", &f]);
    let before = get(&s, "deployment/web");

    let out = ok(&s, "admin", &["scale", "deployment/web", "--replicas=4"]);
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let after = get(&s, "deployment/web");
    assert_eq!(after["spec"]["replicas"], 4);
    assert_eq!(after["metadata"]["generation"], 2);
    let mut rest = after.clone();
    rest["spec"]["replicas"] = before["spec"]["replicas"].clone();
    for k in ["resourceVersion", "generation", "managedFields"] {
        rest["metadata"][k] = before["metadata"][k].clone();
    }
    assert_eq!(rest, before, "only spec.replicas changed");
    // The scale's manager owns the replicas, taken from client-side apply.
    let scaled = entry(&after, "kubectl", "scale").expect("the scale's entry");
    assert_eq!(scaled["operation"], "Update");
    assert_eq!(scaled["apiVersion"], "apps/v1");
    assert_eq!(scaled["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let csa = entry(&after, "kubectl-client-side-apply", "").expect("client-side apply's");
    assert!(
        csa["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "{csa}"
    );
    assert!(
        csa["fieldsV1"]["f:spec"].get("f:selector").is_some(),
        "{csa}"
    );

    // --current-replicas: a precondition kubectl checks on the Scale it
    // reads, then a PUT of the Scale at its resourceVersion.
    let o = s.kubectl(
        "admin",
        &[
            "scale",
            "deployment/web",
            "--current-replicas=3",
            "--replicas=5",
        ],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Expected replicas to be 3, was 4"),
        "{}",
        text(&o)
    );
    assert_eq!(get(&s, "deployment/web")["spec"]["replicas"], 4);
    ok(
        &s,
        "admin",
        &[
            "scale",
            "deployment/web",
            "--current-replicas=4",
            "--replicas=5",
        ],
    );
    let web = get(&s, "deployment/web");
    assert_eq!(web["spec"]["replicas"], 5);

    // The Scale as served.
    let path = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let sc: Value = serde_json::from_str(&ok(&s, "admin", &["get", "--raw", path])).expect("json");
    assert_eq!(sc["kind"], "Scale");
    assert_eq!(sc["apiVersion"], "autoscaling/v1");
    assert_eq!(sc["spec"]["replicas"], 5);
    assert_eq!(sc["status"], json!({"replicas": 0, "selector": "app=web"}));
    assert_eq!(
        sc["metadata"]["resourceVersion"],
        web["metadata"]["resourceVersion"]
    );

    // A Scale at a resourceVersion the parent has left: 409.
    let mut stale = sc.clone();
    stale["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"].clone();
    stale["spec"]["replicas"] = json!(7);
    let f = write(&s, "stale.json", &stale.to_string());
    let o = s.kubectl("admin", &["replace", "--raw", path, "-f", &f]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("Conflict") || text(&o).contains("the object has been modified"),
        "{}",
        text(&o)
    );
    assert_eq!(get(&s, "deployment/web")["spec"]["replicas"], 5);

    // A dry run answers the new count and writes nothing.
    let out = ok(
        &s,
        "admin",
        &[
            "scale",
            "deployment/web",
            "--replicas=9",
            "--dry-run=server",
        ],
    );
    assert!(out.contains("(server dry run)"), "{out}");
    let now = get(&s, "deployment/web");
    assert_eq!(now["spec"]["replicas"], 5);
    assert_eq!(
        now["metadata"]["resourceVersion"],
        web["metadata"]["resourceVersion"]
    );

    // NodeRestriction: a node may read a Scale, never set it.
    ok(&s, "node-1", &["get", "--raw", path]);
    let o = s.kubectl("node-1", &["scale", "deployment/web", "--replicas=1"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Forbidden") || text(&o).contains("forbidden"),
        "{}",
        text(&o)
    );
    assert_eq!(get(&s, "deployment/web")["spec"]["replicas"], 5);

    // ReplicaSets scale the same way, to zero too.
    let f = write(&s, "rs.yaml", &workload("ReplicaSet", "cache", 3));
    ok(&s, "admin", &["create", "-f", &f]);
    ok(&s, "admin", &["scale", "replicaset/cache", "--replicas=0"]);
    let rs = get(&s, "replicaset/cache");
    assert_eq!(rs["spec"]["replicas"], 0);
    assert!(entry(&rs, "kubectl", "scale").is_some(), "{rs}");
}

on_both_stores!(scale_sets_only_the_replicas);
