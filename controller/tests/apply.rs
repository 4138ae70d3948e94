//! What a kubectl user does to built-in objects over time, on both stores:
//! client-side `kubectl apply` of a changed manifest (a strategic merge
//! patch with `$setElementOrder` directives, merged by the API types'
//! merge keys), `kubectl patch` in strategic form, `kubectl describe`, and
//! the defaults kube-apiserver fills in that all of them show.

#[macro_use]
mod common;
use common::{ok, text, write, Backend, Server};

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: a
        image: x:1
        ports: [{containerPort: 80}]
        env: [{name: A, value: '1'}]
      - {name: b, image: y:1}
";

fn get(s: &Server, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, "admin", &a)).expect("json")
}

fn apply_changes(backend: Backend) {
    let s = Server::start(&format!("apply-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "web.yaml", DEPLOYMENT);
    ok(&s, "admin", &["apply", "-f", &f]);

    // Someone else adds an env var the manifest does not have.
    ok(
        &s,
        "admin",
        &["set", "env", "deployment/web", "-c", "a", "EXTRA=1"],
    );
    // The manifest changes one container's image; apply sends only that.
    write(&s, "web.yaml", &DEPLOYMENT.replace("x:1", "x:2"));
    let out = ok(&s, "admin", &["apply", "-f", &f]);
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let d = get(&s, &["get", "deployment", "web"]);
    let c = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(c[0]["image"], "x:2");
    assert_eq!(c[1]["image"], "y:1");
    assert_eq!(c[0]["ports"][0]["containerPort"], 80);
    let env: Vec<&str> = c[0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(env, ["A", "EXTRA"], "a field another writer added survives");
    assert!(
        !d.to_string().contains("$setElementOrder"),
        "no directive is stored: {d}"
    );
    // Defaults, as kube-apiserver fills them in.
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(c[0]["ports"][0]["protocol"], "TCP");
    assert_eq!(
        d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
        30
    );

    // Removing a container from the manifest removes it (the
    // last-applied annotation tells kubectl it was ours).
    let one = DEPLOYMENT
        .replace("x:1", "x:2")
        .replace("      - {name: b, image: y:1}\n", "");
    write(&s, "web.yaml", &one);
    ok(&s, "admin", &["apply", "-f", &f]);
    let d = get(&s, &["get", "deployment", "web"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{d}"
    );

    // kubectl patch (strategic by default) merges a container by name.
    ok(
        &s,
        "admin",
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"a","env":[{"name":"B","value":"2"}]}]}}}}"#,
        ],
    );
    let d = get(&s, &["get", "deployment", "web"]);
    let env = &d["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env.as_array().map(Vec::len), Some(3), "{env}");

    // A malformed one is a 422 that names the field, and changes nothing.
    let before = get(&s, &["get", "deployment", "web"]);
    let o = s.kubectl(
        "admin",
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"image":"z"}]}}}}"#,
        ],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("merge key"), "{}", text(&o));
    assert_eq!(get(&s, &["get", "deployment", "web"]), before);
}

fn describe(backend: Backend) {
    let s = Server::start(&format!("describe-{backend:?}").to_lowercase(), backend);
    let f = write(
        &s,
        "objects.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec:
  containers:
  - name: c
    image: x:1
    resources: {limits: {cpu: '1', memory: 1Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Node
metadata: {name: node-1}
",
    );
    ok(&s, "admin", &["apply", "-f", &f]);
    let pod = ok(&s, "admin", &["describe", "pod", "web-1"]);
    for want in [
        "Name:",
        "web-1",
        "Status:",
        "Pending",
        "QoS Class:",
        "Guaranteed",
        "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
        "node.kubernetes.io/unreachable:NoExecute op=Exists for 300s",
    ] {
        assert!(pod.contains(want), "describe pod lacks {want:?}:\n{pod}");
    }
    let svc = ok(&s, "admin", &["describe", "service", "web"]);
    for want in [
        "Type:",
        "LoadBalancer",
        "80/TCP",
        "TargetPort:",
        "Session Affinity:",
        "External Traffic Policy:",
        "Cluster",
    ] {
        assert!(
            svc.contains(want),
            "describe service lacks {want:?}:\n{svc}"
        );
    }
    let node = ok(&s, "admin", &["describe", "node", "node-1"]);
    assert!(node.contains("Name:") && node.contains("node-1"), "{node}");
}

on_both_stores!(apply_changes, describe);
