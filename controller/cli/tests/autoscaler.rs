//! `sluice autoscaler explain` and `simulate` against a live controller
//! whose pool loop makes simulated nodes (`--node-provider sim:1`) and
//! whose autoscaler loop runs; and what that loop writes for people to
//! read: the status ConfigMap and the nodes' reasons. The unneeded time is
//! the default 10 minutes, so no node goes while the test looks.

use std::time::Duration;

mod common;
use common::{code, run, text, wait_for, with_pool, Controller, OK};

const LIMIT: Duration = Duration::from_secs(90);

const POOL: &str = "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a]
  initialNodeCount: 2
  config: {capacity: {cpu: \"2\", memory: 4Gi}}
  autoscaling: {enabled: true, minNodeCount: 1, maxNodeCount: 3}
";

/// `held` may not be evicted; `huge` asks for more cpu than any node of
/// the pool has.
const APPS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: held, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: held}}
  template:
    metadata:
      labels: {app: held}
      annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"}
    spec:
      containers:
      - {name: c, image: pause, resources: {requests: {cpu: 100m, memory: 64Mi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: huge, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: huge}}
  template:
    metadata: {labels: {app: huge}}
    spec:
      containers:
      - {name: c, image: pause, resources: {requests: {cpu: \"8\", memory: 64Mi}}}
";

fn get(c: &Controller, args: &[&str]) -> String {
    let o = c.kubectl(args);
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// The one pod of Deployment `app`: its name and node (empty until bound).
fn pod_of(c: &Controller, app: &str) -> Option<(String, String)> {
    let out = get(
        c,
        &[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            &format!("app={app}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ],
    );
    let line = out.lines().next()?;
    let (name, node) = line.split_once(' ').unwrap_or((line, ""));
    (!name.is_empty()).then(|| (name.to_owned(), node.to_owned()))
}

/// Every object's resourceVersion the autoscaler (or a CLI acting like
/// it) could write.
fn versions(c: &Controller) -> String {
    get(
        c,
        &[
            "get",
            "nodes,pods,nodepools,configmaps,events,poddisruptionbudgets",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}={.metadata.resourceVersion}{\"\\n\"}{end}",
        ],
    )
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

#[test]
fn the_autoscaler_explains_itself_and_simulates_without_writing() {
    let c = with_pool("autoscaler", POOL);
    let kc = c.kubeconfig();
    wait_for(LIMIT, "pool-a's two nodes", || {
        let out = get(
            &c,
            &[
                "get",
                "nodes",
                "-l",
                "cloud.google.com/gke-nodepool=pool-a",
                "-o",
                "name",
            ],
        );
        (out.lines().count() == 2).then_some(())
    });
    let apps = c.dir.join("apps.yaml");
    std::fs::write(&apps, APPS).expect("apps");
    let o = c.kubectl(&["apply", "-f", &apps.display().to_string()]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let (held, node) = wait_for(LIMIT, "held bound to a node", || {
        pod_of(&c, "held").filter(|(_, n)| !n.is_empty())
    });
    let (huge, _) = wait_for(LIMIT, "huge's pod", || pod_of(&c, "huge"));

    // spec: C1 — a pod too big for any pool is explained, pool by pool,
    // in upstream's wording.
    let key = format!("default/{huge}");
    let o = wait_for(LIMIT, "huge explained", || {
        let o = run(&kc, &["autoscaler", "explain", "pod", &key]);
        (code(&o) == Some(OK)).then_some(o)
    });
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("didn't trigger scale-up: 1 Insufficient cpu"),
        "{out}"
    );
    assert!(out.contains("pool-a/zone-a: "), "{out}");
    let o = run(
        &kc,
        &["autoscaler", "explain", "pod", &key, "--format", "json"],
    );
    let v = json(&o);
    assert_eq!(v["verdict"], "NotTriggerScaleUp", "{v}");
    assert_eq!(
        v["message"], "pod didn't trigger scale-up: 1 Insufficient cpu",
        "{v}"
    );
    assert!(v["nodeGroups"]["pool-a/zone-a"].is_string(), "{v}");

    // spec: E5 — a node held by a safe-to-evict "false" pod names that
    // pod and the reason.
    let o = run(&kc, &["autoscaler", "explain", "node", &node]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("utilization: cpu"), "{out}");
    assert!(
        out.contains(&format!(
            "BlockedByPod: pod default/{held} (NotSafeToEvictAnnotation)"
        )),
        "{out}"
    );
    let o = run(
        &kc,
        &["autoscaler", "explain", "node", &node, "--format", "json"],
    );
    let v = json(&o);
    assert_eq!(v["reason"], "BlockedByPod", "{v}");
    assert_eq!(v["blockingPod"]["pod"], format!("default/{held}"), "{v}");
    assert_eq!(
        v["blockingPod"]["reason"], "NotSafeToEvictAnnotation",
        "{v}"
    );
    assert!(v["utilization"]["cpu"].is_number(), "{v}");

    // spec: C5 — the same reason is on the node, written by the loop.
    wait_for(LIMIT, "the reason on the node", || {
        get(
            &c,
            &[
                "get",
                "node",
                &node,
                "-o",
                "jsonpath={.metadata.annotations.sluice\\.dev/autoscaler-scale-down-blocked}",
            ],
        )
        .contains("NotSafeToEvictAnnotation")
        .then_some(())
    });

    // The status ConfigMap, in upstream's schema.
    let yaml = wait_for(LIMIT, "the status ConfigMap", || {
        let s = get(
            &c,
            &[
                "get",
                "configmap",
                "-n",
                "kube-system",
                "cluster-autoscaler-status",
                "-o",
                "jsonpath={.data.status}",
            ],
        );
        (!s.is_empty()).then_some(s)
    });
    let status: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("status YAML");
    for key in ["time", "autoscalerStatus", "clusterWide", "nodeGroups"] {
        assert!(status.get(key).is_some(), "{key} missing:\n{yaml}");
    }
    for key in ["health", "scaleUp", "scaleDown"] {
        assert!(status["clusterWide"].get(key).is_some(), "{key}:\n{yaml}");
        assert!(status["nodeGroups"][0].get(key).is_some(), "{key}:\n{yaml}");
    }
    assert_eq!(status["nodeGroups"][0]["name"], "pool-a/zone-a", "{yaml}");
    assert_eq!(
        status["clusterWide"]["scaleDown"]["status"], "CandidatesPresent",
        "{yaml}"
    );
    let updated = get(
        &c,
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "cluster-autoscaler-status",
            "-o",
            "jsonpath={.metadata.annotations.cluster-autoscaler\\.kubernetes\\.io/last-updated}",
        ],
    );
    assert!(!updated.is_empty(), "no last-updated annotation");

    // simulate writes nothing: every resourceVersion is the same after.
    // The loop itself may write meanwhile, so a differing pair is tried
    // again; a simulate that wrote would differ every time.
    let mut same = false;
    for _ in 0..5 {
        let before = versions(&c);
        let o = run(&kc, &["autoscaler", "simulate", "--format", "json"]);
        assert_eq!(code(&o), Some(OK), "{}", text(&o));
        let v = json(&o);
        assert!(v["pods"][&key].is_object(), "{v}");
        assert!(v["resizes"].as_array().is_some_and(Vec::is_empty), "{v}");
        let o = run(&kc, &["autoscaler", "simulate"]);
        assert_eq!(code(&o), Some(OK), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("would add: nothing"),
            "{}",
            text(&o)
        );
        if versions(&c) == before {
            same = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(same, "simulate changed a resourceVersion");
}
