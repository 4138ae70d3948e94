//! Objects through the real kubectl, on both stores: create, get (-o
//! yaml), list with label and field selectors, label, replace with a stale
//! resourceVersion (409), delete, watch (`get -w`), and what a node's
//! identity may and may not write (NodeRestriction). Each scenario runs
//! on the embedded store and on etcd.

#[macro_use]
mod common;
use common::{item_names, ok, text, write, Backend, Server};

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec:
  nodeName: node-1
  containers: [{name: c, image: x}]
";

fn json(s: &Server, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, "admin", &a)).expect("json")
}

fn crud(backend: Backend) {
    let s = Server::start(&format!("crud-{backend:?}").to_lowercase(), backend);
    // Validation against the OpenAPI document comes with it (issue 9).
    let pod = write(&s, "pod.yaml", POD);
    assert!(
        ok(&s, "admin", &["create", "--validate=false", "-f", &pod]).contains("pod/web-1 created")
    );
    let o = s.kubectl("admin", &["create", "--validate=false", "-f", &pod]);
    assert!(text(&o).contains("AlreadyExists"), "{}", text(&o));

    let got = json(&s, &["get", "pod", "web-1"]);
    assert_eq!(got["metadata"]["namespace"], "default");
    assert_eq!(got["spec"]["nodeName"], "node-1");
    assert!(
        got["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36),
        "{got}"
    );
    let rv1 = got["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(!rv1.is_empty());
    assert!(ok(&s, "admin", &["get", "pod", "web-1", "-o", "yaml"]).contains("name: web-1"));

    ok(&s, "admin", &["label", "pod", "web-1", "tier=front"]);
    let names = |args: &[&str]| item_names(&json(&s, args));
    assert_eq!(names(&["get", "pods", "-l", "tier=front"]), vec!["web-1"]);
    assert!(names(&["get", "pods", "-l", "tier=back"]).is_empty());
    assert_eq!(
        names(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=node-1"
        ]),
        vec!["web-1"]
    );
    assert!(names(&["get", "pods", "--field-selector", "spec.nodeName=node-2"]).is_empty());

    // A replace made against the first version loses to the label's.
    let stale = write(
        &s,
        "stale.yaml",
        &POD.replace(
            "namespace: default,",
            &format!("namespace: default, resourceVersion: \"{rv1}\","),
        ),
    );
    let o = s.kubectl("admin", &["replace", "-f", &stale]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("the object has been modified"),
        "{}",
        text(&o)
    );

    // A watch sees the deletion.
    let mut w = Command::new(common::kubectl_bin())
        .arg("--kubeconfig")
        .arg(s.kubeconfig("admin"))
        .args([
            "get",
            "pods",
            "-w",
            "-o",
            "name",
            "--request-timeout",
            "30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl -w");
    let stdout = w.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).ok().as_deref(),
        Some("pod/web-1")
    );
    // The pod is bound to node-1 and no agent runs here: a graceful delete
    // would wait for it (tests/deletion.rs), so delete as its node would.
    assert!(ok(
        &s,
        "admin",
        &["delete", "pod", "web-1", "--force", "--grace-period=0"]
    )
    .contains("deleted"));
    let seen = rx.recv_timeout(Duration::from_secs(20)).ok();
    let _ = w.kill();
    let _ = w.wait();
    assert_eq!(
        seen.as_deref(),
        Some("pod/web-1"),
        "the watch reported the deletion"
    );
    assert!(names(&["get", "pods"]).is_empty());
}

fn node_restriction(backend: Backend) {
    let s = Server::start(&format!("nr-{backend:?}").to_lowercase(), backend);
    let node = |name: &str| {
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nspec: {{podCIDRs: [198.19.1.0/24]}}\n")
    };
    let n1 = write(&s, "n1.yaml", &node("node-1"));
    let n2 = write(&s, "n2.yaml", &node("node-2"));
    // A node registers itself and labels its own Node...
    ok(&s, "node-1", &["create", "-f", &n1]);
    ok(&s, "node-1", &["label", "node", "node-1", "ready=yes"]);
    // ...reads what it needs...
    ok(&s, "admin", &["create", "-f", &n2]);
    ok(&s, "node-1", &["get", "nodes"]);
    // ...and writes nothing else.
    let o = s.kubectl("node-1", &["label", "node", "node-2", "x=y"]);
    assert!(
        text(&o).contains("Forbidden") && text(&o).contains("system:node:node-1"),
        "{}",
        text(&o)
    );
    let o = s.kubectl("node-1", &["delete", "node", "node-1"]);
    assert!(text(&o).contains("Forbidden"), "{}", text(&o));
    let o = s.kubectl("node-1", &["create", "namespace", "x"]);
    assert!(text(&o).contains("Forbidden"), "{}", text(&o));
    // NodeRestriction reads the name of what a node creates: only its own.
    let n3 = write(&s, "n3.yaml", &node("node-3"));
    let o = s.kubectl("node-1", &["create", "-f", &n3]);
    assert!(
        text(&o).contains("node \"node-1\" is not allowed to modify node \"node-3\""),
        "{}",
        text(&o)
    );
    // Only an admin (the scheduler) binds pods to nodes.
    let pod = write(
        &s,
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: [{name: c, image: x}]}\n",
    );
    ok(&s, "admin", &["create", "-f", &pod]);
    let binding = write(
        &s,
        "binding.json",
        r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}}"#,
    );
    let bind = [
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/p/binding",
        "-f",
        &binding,
    ];
    let o = s.kubectl("node-1", &bind);
    assert!(text(&o).contains("Forbidden"), "{}", text(&o));
    ok(&s, "admin", &bind);
    let got: serde_json::Value =
        serde_json::from_str(&ok(&s, "admin", &["get", "pod", "p", "-o", "json"])).expect("json");
    assert_eq!(got["spec"]["nodeName"], "node-1", "{got}");
    let scheduled = got["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(scheduled["status"], "True", "{got}");
    // A pod is bound once; the second answer says to which node.
    let o = s.kubectl("admin", &bind);
    assert!(
        text(&o).contains("already assigned to node \"node-1\""),
        "{}",
        text(&o)
    );
    // The bound pod's status is now node-1's to write.
    ok(
        &s,
        "node-1",
        &[
            "patch",
            "pod",
            "p",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ],
    );
    // The admin may.
    ok(&s, "admin", &["label", "node", "node-2", "x=y"]);
}

fn node_pools(backend: Backend) {
    // spec: U1 — maxSurge and maxUnavailable may not both be 0 under SURGE.
    let s = Server::start(&format!("np-{backend:?}").to_lowercase(), backend);
    let pool = "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a]
  initialNodeCount: 3
  config: {capacity: {cpu: \"2\", memory: 4Gi}}
  upgradeSettings: {maxSurge: 0, maxUnavailable: 0}
";
    let f = write(&s, "np.yaml", pool);
    let o = s.kubectl("admin", &["apply", "-f", &f]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("spec.upgradeSettings.maxSurge"),
        "{}",
        text(&o)
    );
    let f = write(&s, "np.yaml", &pool.replace("maxSurge: 0", "maxSurge: 1"));
    assert!(ok(&s, "admin", &["apply", "-f", &f]).contains("nodepool.sluice.dev/pool-a created"));
    // A second apply patches it (client-side apply's merge patch).
    let f = write(&s, "np.yaml", &pool.replace("maxSurge: 0", "maxSurge: 2"));
    assert!(ok(&s, "admin", &["apply", "-f", &f]).contains("configured"));
    let np = json(&s, &["get", "np", "pool-a"]);
    assert_eq!(np["spec"]["upgradeSettings"]["maxSurge"], 2, "{np}");
    assert_eq!(np["metadata"]["generation"], 2, "{np}");
}

fn patches(backend: Backend) {
    let s = Server::start(&format!("pa-{backend:?}").to_lowercase(), backend);
    let pod = write(&s, "pod.yaml", POD);
    // Server-side apply creates what is missing, then records the manager.
    assert!(ok(&s, "admin", &["apply", "--server-side", "-f", &pod]).contains("serverside-applied"));
    let again = write(
        &s,
        "pod2.yaml",
        &POD.replace("app: web", "app: web, tier: front"),
    );
    ok(&s, "admin", &["apply", "--server-side", "-f", &again]);
    let got = json(&s, &["get", "pod", "web-1", "--show-managed-fields"]);
    assert_eq!(got["metadata"]["labels"]["tier"], "front", "{got}");
    let mf = &got["metadata"]["managedFields"];
    assert_eq!(mf.as_array().map(Vec::len), Some(1), "{mf}");
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Apply");
    assert!(
        mf[0]["fieldsV1"]["f:metadata"]["f:labels"]["f:tier"].is_object(),
        "{mf}"
    );
    // JSON patch: applied whole, or not at all when a test fails.
    let add = r#"[{"op":"add","path":"/metadata/labels/x","value":"y"}]"#;
    ok(
        &s,
        "admin",
        &["patch", "pod", "web-1", "--type", "json", "-p", add],
    );
    let failing = r#"[{"op":"remove","path":"/metadata/labels/x"},{"op":"test","path":"/spec/nodeName","value":"node-9"}]"#;
    let o = s.kubectl(
        "admin",
        &["patch", "pod", "web-1", "--type", "json", "-p", failing],
    );
    assert!(
        text(&o).contains("operation 1: test failed"),
        "{}",
        text(&o)
    );
    assert_eq!(
        json(&s, &["get", "pod", "web-1"])["metadata"]["labels"]["x"],
        "y"
    );
    // cordon sends a strategic merge patch.
    let n = write(
        &s,
        "n.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n",
    );
    ok(&s, "admin", &["create", "-f", &n]);
    ok(&s, "admin", &["cordon", "node-1"]);
    assert_eq!(
        json(&s, &["get", "node", "node-1"])["spec"]["unschedulable"],
        true
    );
    ok(&s, "admin", &["uncordon", "node-1"]);
    assert_ne!(
        json(&s, &["get", "node", "node-1"])["spec"]["unschedulable"],
        true
    );
}

/// kubectl's generators (`kubectl create deployment`, `service`, ...)
/// send built-in kinds as Kubernetes protobuf, with no JSON fallback: the
/// server reads them as it reads JSON.
fn kubectl_generators(backend: Backend) {
    let s = Server::start(&format!("gen-{backend:?}").to_lowercase(), backend);
    ok(
        &s,
        "admin",
        &[
            "create",
            "deployment",
            "d1",
            "--image=x",
            "--replicas=2",
            "--port=8080",
        ],
    );
    let d = json(&s, &["get", "deployment", "d1"]);
    assert_eq!(d["spec"]["replicas"], 2, "{d}");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "x",
        "{d}"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        8080
    );
    ok(
        &s,
        "admin",
        &["create", "service", "clusterip", "s1", "--tcp=80:8080"],
    );
    let svc = json(&s, &["get", "service", "s1"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080, "{svc}");
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("198.18.")),
        "{svc}"
    );
    ok(&s, "admin", &["create", "namespace", "gen"]);
    ok(
        &s,
        "admin",
        &[
            "create",
            "poddisruptionbudget",
            "p1",
            "--selector=app=d1",
            "--min-available=1",
        ],
    );
    let pdb = json(&s, &["get", "pdb", "p1"]);
    assert_eq!(pdb["spec"]["minAvailable"], 1, "{pdb}");
    // A protobuf body cut short: a 400 naming it, nothing stored.
    let token = s.admin_token();
    let head = format!(
        "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: 12\r\nConnection: close\r\n\r\nk8s\0\n\x0c\n\x02v1\x12\x03P"
    );
    let answer = s.raw(head.as_bytes());
    assert!(
        answer.contains(" 400 ") && answer.contains("protobuf"),
        "{answer}"
    );
}

on_both_stores!(
    crud,
    node_restriction,
    node_pools,
    patches,
    kubectl_generators
);
