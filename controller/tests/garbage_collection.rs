//! The garbage collector and the namespace loop through the real kubectl,
//! on both stores, with the decision loops running: a Deployment deleted
//! in the background takes its ReplicaSets and pods with it, with
//! `--cascade=orphan` leaves them released, with `--cascade=foreground`
//! waits for them; dependents whose owner's uid no longer exists are
//! collected and those whose owner exists are not; and a deleted
//! namespace is emptied (pods first, gracefully), its conditions said as
//! upstream, then finalized and gone, `kubectl delete namespace` waiting
//! for it.

#[macro_use]
mod common;

use std::time::Duration;

use common::{jsonpath, ok, text, wait_until, write, Backend, Server};

const LIMIT: Duration = Duration::from_secs(60);

/// A Deployment `name` of two pods in `ns`. Nothing plays the kubelet
/// here, so its pods stop at once (grace 0).
fn deployment(name: &str, ns: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{{name: c, image: x}}]
"
    )
}

/// The names of `kind` objects labelled `app=<app>` in `ns`.
fn names(s: &Server, kind: &str, ns: &str, app: &str) -> Vec<String> {
    let l = format!("app={app}");
    let o = s.kubectl("admin", &["get", kind, "-n", ns, "-l", &l, "-o", "name"]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn applied_with_pods(s: &Server, name: &str, ns: &str) -> Vec<String> {
    let f = write(s, &format!("{name}-{ns}.yaml"), &deployment(name, ns));
    ok(s, "admin", &["apply", "-f", &f]);
    wait_until(
        LIMIT,
        &format!("{name}'s two pods"),
        || names(s, "pods", ns, name),
        |p| p.len() == 2,
        || s.log(),
    )
}

/// Whether `kubectl get target` says it is not found.
fn gone(s: &Server, target: &[&str]) -> bool {
    let mut args = vec!["get"];
    args.extend(target);
    let o = s.kubectl("admin", &args);
    !o.status.success() && text(&o).contains("not found")
}

fn background_deletion_takes_dependents(s: &Server) {
    applied_with_pods(s, "web", "default");
    ok(s, "admin", &["delete", "deployment", "web"]);
    wait_until(
        LIMIT,
        "web's ReplicaSets and pods collected",
        || {
            (
                names(s, "rs", "default", "web"),
                names(s, "pods", "default", "web"),
            )
        },
        |(r, p)| r.is_empty() && p.is_empty(),
        || s.log(),
    );
}

fn orphan_deletion_releases_dependents(s: &Server) {
    let pods = applied_with_pods(s, "keep", "default");
    // kubectl waits for the Deployment to be gone: released by then.
    ok(
        s,
        "admin",
        &["delete", "deployment", "keep", "--cascade=orphan"],
    );
    assert!(gone(s, &["deployment", "keep"]));
    let sets = names(s, "rs", "default", "keep");
    assert_eq!(sets.len(), 1, "{sets:?}");
    assert_eq!(
        jsonpath(s, &[&sets[0]], "{.metadata.ownerReferences}"),
        "",
        "the ReplicaSet still names its Deployment"
    );
    // The pods stay, still the ReplicaSet's.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(names(s, "pods", "default", "keep"), pods);
    assert_eq!(
        jsonpath(s, &[&pods[0]], "{.metadata.ownerReferences[0].kind}"),
        "ReplicaSet"
    );
}

fn foreground_deletion_waits_for_dependents(s: &Server) {
    applied_with_pods(s, "fg", "default");
    ok(
        s,
        "admin",
        &[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    // Held by its finalizer while its ReplicaSet (blockOwnerDeletion) is
    // there; the collector passes at most once a second, so the cascade
    // (pods, ReplicaSet, Deployment) takes two passes at least.
    let finalizers = jsonpath(s, &["deployment", "fg"], "{.metadata.finalizers}");
    assert_eq!(finalizers, r#"["foregroundDeletion"]"#);
    wait_until(
        LIMIT,
        "fg, its ReplicaSet and pods gone",
        || {
            (
                gone(s, &["deployment", "fg"]),
                names(s, "rs", "default", "fg"),
                names(s, "pods", "default", "fg"),
            )
        },
        |(d, r, p)| *d && r.is_empty() && p.is_empty(),
        || s.log(),
    );
}

fn config_map(name: &str, owner: &str, uid: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: default
  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: {owner}, uid: {uid}}}]
data: {{a: b}}
"
    )
}

fn dangling_owners_are_collected_and_live_ones_kept(s: &Server) {
    ok(
        s,
        "admin",
        &["create", "configmap", "owner", "--from-literal=a=b"],
    );
    let uid = jsonpath(s, &["configmap", "owner"], "{.metadata.uid}");
    let deps = [
        // An owner deleted while nothing watched.
        config_map("orphaned", "ghost", "00000000-0000-0000-0000-000000000001"),
        // An owner recreated since: same name, another uid.
        config_map("old-owner", "owner", "00000000-0000-0000-0000-000000000002"),
        config_map("owned", "owner", &uid),
    ];
    let f = write(s, "deps.yaml", &deps.join("---\n"));
    ok(s, "admin", &["apply", "-f", &f]);
    wait_until(
        LIMIT,
        "the dependents of absent owners collected",
        || gone(s, &["configmap", "orphaned"]) && gone(s, &["configmap", "old-owner"]),
        |g| *g,
        || s.log(),
    );
    assert!(!gone(s, &["configmap", "owned"]));
    // Its owner deleted (Background): collected too.
    ok(s, "admin", &["delete", "configmap", "owner"]);
    wait_until(
        LIMIT,
        "owned collected with its owner",
        || gone(s, &["configmap", "owned"]),
        |g| *g,
        || s.log(),
    );
}

const CONTENT: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team}
data: {a: b}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: team}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: team}
spec:
  nodeName: far-away
  terminationGracePeriodSeconds: 30
  containers: [{name: c, image: x}]
";

fn condition(s: &Server, type_: &str) -> String {
    let p = format!(
        "{{.status.conditions[?(@.type==\"{type_}\")].status}} {{.status.conditions[?(@.type==\"{type_}\")].message}}"
    );
    jsonpath(s, &["namespace", "team"], &p)
}

fn a_deleted_namespace_is_emptied_then_goes(s: &Server) {
    ok(s, "admin", &["create", "namespace", "team"]);
    applied_with_pods(s, "web", "team");
    let f = write(s, "team.yaml", CONTENT);
    ok(s, "admin", &["apply", "-f", &f]);
    // kubectl's default wait: it returns once the namespace is gone.
    let log = write(s, "delete-team.log", "");
    let mut waiting = s.kubectl_spawn(
        "admin",
        &["delete", "namespace", "team", "--timeout=90s"],
        std::path::Path::new(&log),
    );
    // The bound pod is deleted gracefully: it waits for its (absent)
    // kubelet, and everything but pods waits for it.
    wait_until(
        LIMIT,
        "the bound pod being deleted",
        || {
            jsonpath(
                s,
                &["pod", "held", "-n", "team"],
                "{.metadata.deletionTimestamp}",
            )
        },
        |t| !t.is_empty(),
        || s.log(),
    );
    let remaining = wait_until(
        LIMIT,
        "the content-remaining condition",
        || condition(s, "NamespaceContentRemaining"),
        |c| c.contains("pods. has 1 resource instances"),
        || s.log(),
    );
    assert!(
        remaining.starts_with("True Some resources are remaining:"),
        "{remaining}"
    );
    assert!(!gone(s, &["configmap", "settings", "-n", "team"]));
    assert!(
        matches!(waiting.try_wait(), Ok(None)),
        "kubectl returned while the namespace was there"
    );
    assert_eq!(
        condition(s, "NamespaceDeletionContentFailure"),
        "False All content successfully deleted, may be waiting on finalization"
    );
    assert_eq!(
        jsonpath(s, &["namespace", "team"], "{.status.phase}"),
        "Terminating"
    );
    // The kubelet's part: the pod stopped, removed.
    ok(
        s,
        "admin",
        &[
            "delete",
            "pod",
            "held",
            "-n",
            "team",
            "--grace-period=0",
            "--force",
        ],
    );
    let exited = wait_until(
        LIMIT,
        "kubectl delete namespace to return",
        || waiting.try_wait().ok().flatten(),
        Option::is_some,
        || s.log(),
    );
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(exited.is_some_and(|e| e.success()), "{said}");
    assert!(said.contains(r#"namespace "team" deleted"#), "{said}");
    assert!(gone(s, &["namespace", "team"]));
    for kind in [
        "deployments",
        "replicasets",
        "pods",
        "services",
        "configmaps",
        "pdb",
    ] {
        let o = ok(s, "admin", &["get", kind, "-n", "team", "-o", "name"]);
        assert_eq!(o, "", "{kind} left in team");
    }
}

fn garbage_collection(backend: Backend) {
    let s = Server::start_on(
        &format!("gc-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true"],
    );
    background_deletion_takes_dependents(&s);
    orphan_deletion_releases_dependents(&s);
    foreground_deletion_waits_for_dependents(&s);
    dangling_owners_are_collected_and_live_ones_kept(&s);
    a_deleted_namespace_is_emptied_then_goes(&s);
}

on_both_stores!(garbage_collection);
