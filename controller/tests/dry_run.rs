//! `dryRun=All` end to end with the real kubectl, on both stores: every
//! write verb kubectl can send as a server-side dry run (`diff`, `apply`
//! client- and server-side, `create`, `delete`, `drain`'s cordon and
//! evictions) answers as the real write would and changes nothing: the
//! objects keep their resourceVersions, no Service allocation is held,
//! and watchers started before see no event. Absence is checked without
//! timing: after the dry runs one real "marker" write per watched
//! collection is made, and a watch delivers events in order, so once the
//! marker is seen any event a dry run caused would have been seen first.

#[macro_use]
mod common;
use common::{ok, server_status, text, wait_for, write, Backend, Server};

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

fn get(s: &Server, what: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend(what);
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, "admin", &a)).expect("json")
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const NODES: &str = "apiVersion: v1
kind: Node
metadata: {name: node-1}
";

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: web}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-1a, uid: 6f1c1b1e-0000-4000-8000-000000000002, controller: true}}
spec:
  nodeName: node-1
  containers: [{{name: c, image: x}}]
"
    )
}

fn deployment(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: c, image: {image}}}]}}
"
    )
}

const PDB: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
";

fn service(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec: {{type: NodePort, selector: {{app: web}}, ports: [{{port: 80{extra}}}]{{}}}}
"
    )
    .replace("{}", "")
}

/// A watcher of one collection, started by `kubectl get -w`, printing one
/// `kind/name` line per object listed and per event.
struct Watcher {
    log: std::path::PathBuf,
    child: std::process::Child,
}

impl Watcher {
    /// Start watching `resource` and wait (bounded) until the initial list
    /// naming each of `known` is printed.
    fn start(s: &Server, resource: &str, known: &[&str]) -> Watcher {
        let log = s.dir.join(format!("watch-{resource}.log"));
        let child = s.kubectl_spawn(
            "admin",
            &["get", resource, "-w", "-o", "name", "--output-watch-events"],
            &log,
        );
        let w = Watcher { log, child };
        wait_for(Duration::from_secs(20), "the initial list", || {
            let l = w.lines();
            known
                .iter()
                .all(|k| l.iter().any(|line| line.ends_with(&format!("/{k}"))))
                .then_some(())
        });
        w
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Wait (bounded) for the marker's event, then: every other line is
    /// the initial listing of an object that existed before, each once
    /// (any event would name its object again).
    fn saw_nothing_but_the_marker(mut self, existing: &[&str]) {
        wait_for(Duration::from_secs(20), "the marker's event", || {
            self.lines()
                .iter()
                .any(|l| l.contains("marker"))
                .then_some(())
        });
        let _ = self.child.kill();
        let _ = self.child.wait();
        let lines = self.lines();
        let mut seen = BTreeSet::new();
        for l in lines.iter().filter(|l| !l.contains("marker")) {
            let name = l.rsplit('/').next().unwrap_or_default();
            assert!(
                existing.contains(&name) && seen.insert(name),
                "an event no real write made: {l:?} in {lines:?}"
            );
        }
    }
}

fn dry_runs_change_nothing(backend: Backend) {
    let s = Server::start(&format!("dry-{backend:?}").to_lowercase(), backend);
    let admin = |args: &[&str]| ok(&s, "admin", args);
    let f = write(&s, "nodes.yaml", NODES);
    admin(&["create", "--validate=false", "-f", &f]);
    for p in ["web-1", "web-2"] {
        let f = write(&s, &format!("{p}.yaml"), &pod(p));
        admin(&["create", "--validate=false", "-f", &f]);
        admin(&[
            "patch",
            "pod",
            p,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ]);
    }
    let f = write(&s, "pdb.yaml", PDB);
    admin(&["create", "--validate=false", "-f", &f]);

    // Admission runs in a dry run: the budget refuses the eviction (429).
    let eviction = write(
        &s,
        "evict.json",
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web-1","namespace":"default"}}"#,
    );
    let o = s.kubectl(
        "admin",
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/web-1/eviction?dryRun=All",
            "-f",
            &eviction,
            "-v=6",
        ],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(
        server_status(&o).map(|st| st["code"].clone()),
        Some(429.into()),
        "{}",
        text(&o)
    );
    admin(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":1}}"#,
    ]);

    let web = write(&s, "web.yaml", &deployment(2, "nginx:1"));
    admin(&["apply", "-f", &web]);
    let f = write(&s, "existing.yaml", &service("existing", ""));
    admin(&["create", "-f", &f]);

    let before: Vec<(String, String)> = [
        "deployment/web",
        "pod/web-1",
        "pod/web-2",
        "node/node-1",
        "pdb/web",
        "service/existing",
    ]
    .iter()
    .map(|o| (o.to_string(), rv(&get(&s, &[o]))))
    .collect();
    let watchers = [
        (
            "deployments",
            Watcher::start(&s, "deployments", &["web"]),
            vec!["web"],
        ),
        (
            "pods",
            Watcher::start(&s, "pods", &["web-1", "web-2"]),
            vec!["web-1", "web-2"],
        ),
        (
            "nodes",
            Watcher::start(&s, "nodes", &["node-1"]),
            vec!["node-1"],
        ),
        (
            "services",
            Watcher::start(&s, "services", &["existing"]),
            vec!["existing", "kubernetes"],
        ),
        (
            "poddisruptionbudgets",
            Watcher::start(&s, "poddisruptionbudgets", &["web"]),
            vec!["web"],
        ),
    ];

    // kubectl diff: a server-side dry-run patch; it shows the change.
    let changed = write(&s, "web-changed.yaml", &deployment(5, "nginx:2"));
    let o = s.kubectl("admin", &["diff", "-f", &changed]);
    assert_eq!(o.status.code(), Some(1), "a diff is found: {}", text(&o));
    let diff = String::from_utf8_lossy(&o.stdout);
    assert!(
        diff.contains("+  replicas: 5") && diff.contains("-  replicas: 2"),
        "{diff}"
    );
    assert!(
        diff.lines()
            .any(|l| l.starts_with('+') && l.ends_with("image: nginx:2")),
        "{diff}"
    );

    // apply, client- and server-side, as a server dry run.
    let out = admin(&["apply", "--dry-run=server", "-f", &changed, "-o", "json"]);
    let applied: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(applied["spec"]["replicas"], 5);
    let out = admin(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        &changed,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let applied: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(applied["spec"]["replicas"], 5);
    assert!(
        applied["metadata"]["managedFields"]
            .to_string()
            .contains("\"Apply\""),
        "{applied}"
    );

    // create: a Service shows what it would get, holding none of it.
    let f = write(&s, "new.yaml", &service("new", ""));
    let out = admin(&["create", "--dry-run=server", "-o", "json", "-f", &f]);
    let new: Value = serde_json::from_str(&out).expect("json");
    let ip = new["spec"]["clusterIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let port = new["spec"]["ports"][0]["nodePort"].as_i64().unwrap_or(0);
    assert!(ip.starts_with("198.18."), "{new}");
    assert!(port >= 30000, "{new}");
    assert!(new["metadata"].get("resourceVersion").is_none(), "{new}");
    assert!(
        new["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{new}"
    );
    // generateName: a name is made up, as for a real create.
    let gen = write(
        &s,
        "gen.yaml",
        &pod("x").replace("name: x", "generateName: gen-"),
    );
    let out = admin(&[
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "--validate=false",
        "-f",
        &gen,
    ]);
    let g: Value = serde_json::from_str(&out).expect("json");
    let gname = g["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(gname.starts_with("gen-") && gname.len() == 9, "{g}");

    // delete: the object stays; a bound pod's answer is graceful.
    let out = admin(&["delete", "deployment", "web", "--dry-run=server"]);
    assert!(out.contains("(server dry run)"), "{out}");
    let out = admin(&[
        "delete",
        "--raw",
        "/api/v1/namespaces/default/pods/web-2?dryRun=All",
    ]);
    let answered: Value = serde_json::from_str(&out).expect("json");
    assert!(
        answered["metadata"]["deletionTimestamp"].is_string(),
        "{answered}"
    );
    assert_eq!(
        answered["metadata"]["deletionGracePeriodSeconds"], 30,
        "{answered}"
    );

    // drain: the cordon and the evictions are dry runs; nothing goes.
    let out = admin(&["drain", "node-1", "--dry-run=server", "--timeout=60s"]);
    assert!(
        out.contains("evicting pod default/web-1 (server dry run)"),
        "{out}"
    );
    assert!(out.contains("drained (server dry run)"), "{out}");

    // An unknown value is refused, naming it.
    let o = s.kubectl(
        "admin",
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods?dryRun=Everything",
            "-f",
            &gen,
            "-v=6",
        ],
    );
    let said = text(&o);
    assert!(
        said.contains("status=\"422 Unprocessable Entity\"")
            && said.contains(
                "CreateOptions \"\" is invalid: dryRun: Unsupported value: \"Everything\": supported values: \"All\""
            ),
        "{said}"
    );

    for (o, was) in &before {
        assert_eq!(&rv(&get(&s, &[o])), was, "{o} was written");
    }
    let web = get(&s, &["deployment/web"]);
    assert_eq!(web["spec"]["replicas"], 2);
    assert!(get(&s, &["node/node-1"])["spec"]["unschedulable"].is_null());
    for gone in ["service/new", &format!("pod/{gname}")] {
        let o = s.kubectl("admin", &["get", gone]);
        assert!(!o.status.success(), "{gone} was created");
    }

    // The markers, real writes; the Service takes the values the dry run
    // showed, which it could not were they held.
    let taker = service("marker", &format!(", nodePort: {port}")).replace(
        "type: NodePort,",
        &format!("type: NodePort, clusterIP: {ip},"),
    );
    let f = write(&s, "marker-svc.yaml", &taker);
    admin(&["create", "-f", &f]);
    let f = write(&s, "marker-pod.yaml", &pod("marker"));
    admin(&["create", "--validate=false", "-f", &f]);
    let f = write(&s, "marker-node.yaml", &NODES.replace("node-1", "marker"));
    admin(&["create", "--validate=false", "-f", &f]);
    let f = write(
        &s,
        "marker-deploy.yaml",
        &deployment(1, "x").replace("name: web,", "name: marker,"),
    );
    admin(&["create", "-f", &f]);
    let f = write(
        &s,
        "marker-pdb.yaml",
        &PDB.replace("name: web,", "name: marker,"),
    );
    admin(&["create", "--validate=false", "-f", &f]);
    for (what, w, existing) in watchers {
        eprintln!("checking the {what} watcher");
        w.saw_nothing_but_the_marker(&existing);
    }
}

on_both_stores!(dry_runs_change_nothing);
