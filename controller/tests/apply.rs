//! What a kubectl user does to built-in objects over time, on both stores:
//! client-side `kubectl apply` of a changed manifest (a strategic merge
//! patch with `$setElementOrder` directives, merged by the API types'
//! merge keys), `kubectl patch` in strategic form, `kubectl describe`, and
//! the defaults kube-apiserver fills in that all of them show; server-side
//! apply (`apply --server-side`): field ownership, conflicts and
//! `--force-conflicts`, fields removed when a manager stops applying them,
//! and the move from client-side apply and `kubectl create`.

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

const SERVED: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web, tier: front, extra: x}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: a, image: 'x:1', ports: [{containerPort: 80}]}
      - {name: b, image: 'y:1'}
";

/// The deployment as the server holds it, managedFields included.
fn held(s: &Server, name: &str) -> serde_json::Value {
    get(s, &["get", "deployment", name, "--show-managed-fields"])
}

/// The fields `manager`'s entry of `operation` owns (`FieldsV1`), if any.
fn owned(d: &serde_json::Value, manager: &str, operation: &str) -> Option<serde_json::Value> {
    d["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .map(|e| e["fieldsV1"].clone())
}

fn labels(d: &serde_json::Value) -> Vec<String> {
    d["metadata"]["labels"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn container_names(d: &serde_json::Value) -> Vec<String> {
    d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `kubectl apply --server-side` of `manifest` with more flags; its output
/// and whether it succeeded.
fn ssa(s: &Server, file: &str, manifest: &str, flags: &[&str]) -> (bool, String) {
    let f = write(s, file, manifest);
    let mut args = vec!["apply", "--server-side", "-f", &f];
    args.extend(flags);
    let o = s.kubectl("admin", &args);
    (o.status.success(), text(&o))
}

fn server_side_apply(backend: Backend) {
    let s = Server::start(&format!("ssa-{backend:?}").to_lowercase(), backend);
    let (done, out) = ssa(&s, "web.yaml", SERVED, &[]);
    assert!(
        done && out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let d = held(&s, "web");
    let mine = owned(&d, "kubectl", "Apply").expect("kubectl's entry");
    assert_eq!(
        d["metadata"]["managedFields"].as_array().map(Vec::len),
        Some(1),
        "{d}"
    );
    let containers = &mine["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert!(containers["k:{\"name\":\"b\"}"].is_object(), "{mine}");
    assert!(
        containers["k:{\"name\":\"a\"}"]["f:ports"]
            ["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]
            .is_object(),
        "{mine}"
    );
    assert_eq!(mine["f:spec"]["f:replicas"], serde_json::json!({}));

    // kubectl label records an Update entry of its own.
    ok(&s, "admin", &["label", "deployment", "web", "x=1"]);
    let d = held(&s, "web");
    let label = owned(&d, "kubectl-label", "Update").expect("kubectl-label's entry");
    assert_eq!(
        label,
        serde_json::json!({"f:metadata": {"f:labels": {"f:x": {}}}})
    );

    // Another manager setting kubectl's replicas conflicts, and changes
    // nothing; with --force-conflicts it takes the field.
    let other = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {tier: front}}
spec: {replicas: 5}
";
    let (done, out) = ssa(&s, "other.yaml", other, &["--field-manager", "other"]);
    assert!(!done, "{out}");
    assert!(
        out.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{out}"
    );
    assert!(out.contains("--force-conflicts"), "{out}");
    assert_eq!(held(&s, "web")["spec"]["replicas"], 2);
    let (done, out) = ssa(
        &s,
        "other.yaml",
        other,
        &["--field-manager", "other", "--force-conflicts"],
    );
    assert!(done, "{out}");
    let d = held(&s, "web");
    assert_eq!(d["spec"]["replicas"], 5);
    let mine = owned(&d, "kubectl", "Apply").expect("kubectl's entry");
    assert!(mine["f:spec"].get("f:replicas").is_none(), "{mine}");
    let theirs = owned(&d, "other", "Apply").expect("other's entry");
    assert_eq!(theirs["f:spec"]["f:replicas"], serde_json::json!({}));
    // tier had the value other applied: shared, not taken.
    assert!(
        mine["f:metadata"]["f:labels"]["f:tier"].is_object(),
        "{mine}"
    );
    assert!(
        theirs["f:metadata"]["f:labels"]["f:tier"].is_object(),
        "{theirs}"
    );

    // kubectl applies a smaller manifest: what only it owned goes (the
    // extra label, container b), what others own too stays (tier,
    // replicas, kubectl-label's x).
    let smaller = SERVED
        .replace(
            "labels: {app: web, tier: front, extra: x}",
            "labels: {app: web}",
        )
        .replace("  replicas: 2\n", "")
        .replace("      - {name: b, image: 'y:1'}\n", "");
    let (done, out) = ssa(&s, "web.yaml", &smaller, &[]);
    assert!(done, "{out}");
    let d = held(&s, "web");
    assert_eq!(labels(&d), ["app", "tier", "x"], "{d}");
    assert_eq!(container_names(&d), ["a"], "{d}");
    assert_eq!(d["spec"]["replicas"], 5);
    let mine = owned(&d, "kubectl", "Apply").expect("kubectl's entry");
    assert!(
        mine["f:metadata"]["f:labels"].get("f:tier").is_none(),
        "{mine}"
    );
    assert!(
        mine["f:spec"]["f:template"]["f:spec"]["f:containers"]
            .get("k:{\"name\":\"b\"}")
            .is_none(),
        "{mine}"
    );
    // kubectl-label's field conflicts as an Update entry's does.
    let (done, out) = ssa(
        &s,
        "web.yaml",
        &smaller.replace("labels: {app: web}", "labels: {app: web, x: '2'}"),
        &[],
    );
    assert!(!done, "{out}");
    assert!(
        out.contains(r#"conflict with "kubectl-label" using apps/v1: .metadata.labels.x"#),
        "{out}"
    );
}

/// A PATCH sent as is (what kubectl never sends); the server's answer.
fn raw_patch(s: &Server, path: &str, ctype: &str, body: &str) -> String {
    let token = s.admin_token();
    let req = format!(
        "PATCH {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.raw(req.as_bytes())
}

fn apply_refusals(backend: Backend) {
    let s = Server::start(&format!("ssa-bad-{backend:?}").to_lowercase(), backend);
    ssa(&s, "web.yaml", SERVED, &[]);
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let yaml = "application/apply-patch+yaml";
    let merge = "application/merge-patch+json";
    let named =
        |n: &str| format!("{{apiVersion: apps/v1, kind: Deployment, metadata: {{name: {n}}}}}");
    for (query, ctype, body, status, want) in [
        (
            "?fieldManager=m",
            yaml,
            named("db"),
            "400",
            "the name of the object (db) does not match the name on the URL (web)",
        ),
        (
            "?fieldManager=m",
            yaml,
            named("db"),
            "400",
            "the name of the object (db) does not match the name on the URL (new)",
        ),
        (
            "",
            yaml,
            named("web"),
            "422",
            "fieldManager: Required value: is required for apply patch",
        ),
        (
            "?fieldManager=m",
            yaml,
            "{kind: Deployment, metadata: {name: web}}".to_string(),
            "400",
            "invalid object type: /, Kind=Deployment",
        ),
        (
            "?force=true",
            merge,
            "{}".to_string(),
            "422",
            "force: Forbidden: may not be specified for non-apply patch",
        ),
    ] {
        // The second case applies to an object that does not exist yet.
        let at = match want.contains("(new)") {
            true => path.replace("/web", "/new"),
            false => path.to_string(),
        };
        let answer = raw_patch(&s, &format!("{at}{query}"), ctype, &body);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")) && answer.contains(want),
            "{query} {body}: want {status} {want:?}: {answer}"
        );
    }
    // None of it changed the object or made one.
    let o = s.kubectl("admin", &["get", "deployment", "db"]);
    assert!(!o.status.success(), "{}", text(&o));
    let d = held(&s, "web");
    assert_eq!(
        d["metadata"]["managedFields"].as_array().map(Vec::len),
        Some(1)
    );
}

fn upgrade_from_client_side(backend: Backend) {
    let s = Server::start(&format!("ssa-up-{backend:?}").to_lowercase(), backend);
    // Client-side apply, then server-side apply of a changed manifest:
    // kubectl takes the fields over without --force-conflicts (the
    // last-applied annotation says they were its own), moves
    // kubectl-client-side-apply's entry into its own and applies again,
    // so the label it dropped goes.
    let csa = SERVED
        .replace("name: web", "name: api")
        .replace("tier: front, extra: x", "old: x");
    let f = write(&s, "api.yaml", &csa);
    ok(&s, "admin", &["apply", "-f", &f]);
    let d = held(&s, "api");
    assert!(
        owned(&d, "kubectl-client-side-apply", "Update").is_some(),
        "{d}"
    );
    let changed = csa
        .replace("labels: {app: web, old: x}", "labels: {app: web}")
        .replace("replicas: 2", "replicas: 3");
    let (done, out) = ssa(&s, "api.yaml", &changed, &[]);
    assert!(done, "{out}");
    let d = held(&s, "api");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(labels(&d), ["app"], "{d}");
    assert!(
        owned(&d, "kubectl-client-side-apply", "Update").is_none(),
        "{d}"
    );
    assert!(owned(&d, "kubectl", "Apply").is_some(), "{d}");
    let last = d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok())
        .expect("the annotation stays");
    assert_eq!(last["spec"]["replicas"], 3, "kept up to date: {last}");

    // kubectl create, then server-side apply: the same values are shared,
    // a changed one conflicts with kubectl-create until forced.
    let f = write(&s, "web.yaml", SERVED);
    ok(&s, "admin", &["create", "-f", &f]);
    let (done, out) = ssa(&s, "web.yaml", SERVED, &[]);
    assert!(done, "{out}");
    let d = held(&s, "web");
    assert!(owned(&d, "kubectl-create", "Update").is_some(), "{d}");
    let three = SERVED.replace("replicas: 2", "replicas: 3");
    let (done, out) = ssa(&s, "web.yaml", &three, &[]);
    assert!(!done, "{out}");
    assert!(
        out.contains(r#"conflict with "kubectl-create" using apps/v1: .spec.replicas"#),
        "{out}"
    );
    let (done, out) = ssa(&s, "web.yaml", &three, &["--force-conflicts"]);
    assert!(done, "{out}");
    assert_eq!(held(&s, "web")["spec"]["replicas"], 3);
}

on_both_stores!(
    apply_changes,
    describe,
    server_side_apply,
    apply_refusals,
    upgrade_from_client_side
);
