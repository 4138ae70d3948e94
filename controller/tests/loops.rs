//! The leader's decision loops end to end, driven as a user drives a
//! cluster: Nodes register with Leases, `kubectl apply` makes a Deployment
//! and a Service, and then, without anything else acting, the controller
//! makes the ReplicaSet and its pods, schedules them over the nodes and
//! zones, gives each Node its pod CIDR, publishes EndpointSlices from the
//! pods' status, reports a pod that fits nowhere as kube-scheduler does,
//! and when a Node stops renewing its Lease marks it Unknown, taints it,
//! evicts its pods when their toleration runs out and has them replaced
//! on the node that is left.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{ok, wait_for, write, Backend, Server};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_model::k8s::{EndpointSlice, Event, Lease, Node, Pod};

const APP: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: x
        ports: [{name: http, containerPort: 8080}]
        resources: {requests: {cpu: 500m, memory: 64Mi}}
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway,
         labelSelector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: '100'}}}]
";

fn node(name: &str, zone: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone,
            "kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }))
    .expect("node")
}

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                 "renewTime": now_micro()},
    }))
    .expect("lease")
}

fn now_micro() -> String {
    let t = sluice_model::k8s::jiff::Timestamp::now();
    format!("{}", t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

/// The test's runtime and the APIs it drives.
struct Apis {
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    nodes: Api<Node>,
    leases: Api<Lease>,
    pods: Api<Pod>,
    slices: Api<EndpointSlice>,
}

impl Apis {
    fn of(s: &Server) -> Self {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let client = rt.block_on(common::kube_client(s));
        Apis {
            nodes: Api::all(client.clone()),
            leases: Api::namespaced(client.clone(), "kube-node-lease"),
            pods: Api::namespaced(client.clone(), "default"),
            slices: Api::namespaced(client.clone(), "default"),
            rt,
            client,
        }
    }
}

/// Nodes (name, zone) registered as their kubelets do, each with a Lease.
fn register(
    rt: &tokio::runtime::Runtime,
    nodes: &Api<Node>,
    leases: &Api<Lease>,
    which: &[(&str, &str)],
) {
    let pp = PostParams::default();
    rt.block_on(async {
        for (n, z) in which {
            nodes.create(&pp, &node(n, z)).await.expect("node");
            leases.create(&pp, &lease(n)).await.expect("lease");
        }
    });
}

/// How many of a slice's endpoints are ready.
fn ready_in(s: &EndpointSlice) -> usize {
    s.endpoints
        .iter()
        .flatten()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count()
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

fn cluster_loops(backend: Backend) {
    let s = Server::start_on(
        &format!("loops-{backend:?}").to_lowercase(),
        backend,
        &[
            "--controllers=true",
            "--cluster-cidr",
            "198.19.0.0/16",
            "--node-monitor-grace-period",
            "3",
        ],
    );
    let Apis {
        rt,
        client,
        nodes,
        leases,
        pods,
        slices,
    } = Apis::of(&s);
    register(
        &rt,
        &nodes,
        &leases,
        &[("node-1", "zone-a"), ("node-2", "zone-b")],
    );
    // Both kubelets renew their Leases until node-2 is made to go silent
    // below. (With node-2 silent from the start, its pods were evicted
    // 3 s + 2 s in, before a loaded machine had got through the checks
    // that expect them serving.)
    let node_2_alive = Arc::new(AtomicBool::new(true));
    let renew = {
        let leases = leases.clone();
        let node_2_alive = node_2_alive.clone();
        rt.spawn(async move {
            loop {
                let patch = json!({"spec": {"renewTime": now_micro()}});
                for n in ["node-1", "node-2"] {
                    if n == "node-2" && !node_2_alive.load(Ordering::Relaxed) {
                        continue;
                    }
                    let _ = leases
                        .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    // Pod CIDRs for both, from --cluster-cidr.
    let cidrs = wait_for(Duration::from_secs(20), "pod CIDRs allocated", || {
        let got: Vec<String> = rt
            .block_on(nodes.list(&ListParams::default()))
            .ok()?
            .items
            .iter()
            .filter_map(|n| n.spec.as_ref()?.pod_cidr.clone())
            .collect();
        (got.len() == 2).then_some(got)
    });
    assert!(
        cidrs
            .iter()
            .all(|c| c.starts_with("198.19.") && c.ends_with("/24")),
        "{cidrs:?}"
    );
    assert_ne!(cidrs[0], cidrs[1]);

    let app = write(&s, "app.yaml", APP);
    ok(&s, "admin", &["apply", "-f", &app]);

    // The Deployment's ReplicaSet makes 4 pods, the scheduler spreads
    // them over both zones.
    let placed = wait_for(Duration::from_secs(30), "4 web pods bound", || {
        let list = rt
            .block_on(pods.list(&ListParams::default().labels("app=web")))
            .ok()?;
        let bound: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| !node_of(p).is_empty())
            .collect();
        (bound.len() == 4).then_some(bound)
    });
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in &placed {
        *per_node.entry(node_of(p)).or_default() += 1;
        let owner = &p.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(owner.kind, "ReplicaSet");
        let scheduled = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
            .map(|c| c.status.clone());
        assert_eq!(scheduled.as_deref(), Some("True"));
    }
    assert_eq!(per_node.len(), 2, "spread over both zones: {per_node:?}");

    // Each kubelet reports its pods running and ready: the Service's
    // EndpointSlice follows, with the resolved named port and zones.
    for (i, p) in placed.iter().enumerate() {
        let name = p.metadata.name.clone().unwrap_or_default();
        let status = json!({"status": {"phase": "Running", "podIP": format!("198.18.9.{}", i + 1),
            "podIPs": [{"ip": format!("198.18.9.{}", i + 1)}],
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]}});
        let who = node_of(p);
        ok(
            &s,
            if who == "node-1" { "node-1" } else { "admin" },
            &[
                "patch",
                "pod",
                &name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status.to_string(),
            ],
        );
    }
    // One slice holds all four: the loop waits for its own writes to be
    // back in its cache before planning again, so a burst of pod changes
    // does not create a second slice (generateName) and split them.
    let all = common::wait_until(
        Duration::from_secs(20),
        "one slice with 4 ready endpoints",
        || {
            rt.block_on(
                slices.list(&ListParams::default().labels("kubernetes.io/service-name=web")),
            )
            .map(|l| l.items)
            .unwrap_or_default()
        },
        |items| items.len() == 1 && ready_in(&items[0]) == 4,
        || s.log(),
    );
    let slice = all.into_iter().next().expect("one slice");
    assert_eq!(slice.ports.as_ref().and_then(|p| p[0].port), Some(8080));
    let zones: Vec<String> = slice
        .endpoints
        .iter()
        .flatten()
        .filter_map(|e| e.zone.clone())
        .collect();
    assert!(
        zones.contains(&"zone-a".into()) && zones.contains(&"zone-b".into()),
        "{zones:?}"
    );
    // A live Node relabelled to another zone: its endpoints follow at
    // once, not at the Service's next change.
    ok(
        &s,
        "admin",
        &[
            "label",
            "node",
            "node-1",
            "--overwrite",
            "topology.kubernetes.io/zone=zone-c",
        ],
    );
    wait_for(
        Duration::from_secs(20),
        "node-1's endpoints in zone-c",
        || {
            let list = rt
                .block_on(
                    slices.list(&ListParams::default().labels("kubernetes.io/service-name=web")),
                )
                .ok()?;
            let on_1: Vec<Option<String>> = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter().flatten())
                .filter(|e| e.node_name.as_deref() == Some("node-1"))
                .map(|e| e.zone.clone())
                .collect();
            (!on_1.is_empty() && on_1.iter().all(|z| z.as_deref() == Some("zone-c"))).then_some(())
        },
    );

    // The pod that fits nowhere: kube-scheduler's words, in its condition
    // and in an Event.
    let message = wait_for(
        Duration::from_secs(20),
        "huge reported unschedulable",
        || {
            let p = rt.block_on(pods.get("huge")).ok()?;
            let c = p
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
            assert_eq!(c.reason.as_deref(), Some("Unschedulable"));
            c.message
        },
    );
    assert_eq!(message, "0/2 nodes are available: 2 Insufficient cpu.");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let evs = rt
        .block_on(events.list(&ListParams::default()))
        .expect("events");
    assert!(
        evs.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.name.as_deref() == Some("huge")),
        "a FailedScheduling event"
    );

    // node-2 goes silent: Unknown, tainted, its pods evicted after their
    // 2 s toleration and replaced on node-1.
    node_2_alive.store(false, Ordering::Relaxed);
    let n2 = wait_for(Duration::from_secs(30), "node-2 marked unreachable", || {
        let n = rt.block_on(nodes.get("node-2")).ok()?;
        let tainted = n
            .spec
            .as_ref()?
            .taints
            .as_ref()?
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute");
        tainted.then_some(n)
    });
    let ready = n2
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status);
    assert_eq!(ready.as_deref(), Some("Unknown"));
    wait_for(
        Duration::from_secs(40),
        "all 4 serving pods on node-1",
        || {
            let list = rt
                .block_on(pods.list(&ListParams::default().labels("app=web")))
                .ok()?;
            let live: Vec<&Pod> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            (live.len() == 4 && live.iter().all(|p| node_of(p) == "node-1")).then_some(())
        },
    );
    renew.abort();
    let table = ok(&s, "admin", &["get", "nodes,pods", "-o", "wide"]);
    assert!(
        table.contains("node-1") && table.contains("web-"),
        "{table}"
    );
}

/// A NodePool makes its nodes through the `sim` provider: the count per
/// zone is reached, a deleted Node is replaced, and a smaller count
/// removes nodes; the pool's status says where it stands.
fn node_pools_make_nodes(backend: Backend) {
    let s = Server::start_on(
        &format!("pools-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true", "--node-provider", "sim:0"],
    );
    let pool = write(
        &s,
        "pool.yaml",
        "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a, zone-b]
  initialNodeCount: 2
  config: {capacity: {cpu: '2', memory: 4Gi}}
",
    );
    ok(&s, "admin", &["apply", "-f", &pool]);
    let names = |s: &Server| -> Vec<String> {
        ok(
            s,
            "admin",
            &[
                "get",
                "nodes",
                "-l",
                "cloud.google.com/gke-nodepool=pool-a",
                "-o",
                "name",
            ],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    };
    let first = wait_for(Duration::from_secs(30), "4 nodes in the pool", || {
        let n = names(&s);
        (n.len() == 4).then_some(n)
    });
    let zones = ok(
        &s,
        "admin",
        &["get", "nodes", "-L", "topology.kubernetes.io/zone"],
    );
    assert_eq!(zones.matches("zone-a").count(), 2, "{zones}");
    assert_eq!(zones.matches("zone-b").count(), 2, "{zones}");

    // A Node deleted from under the pool: its instance is replaced.
    ok(&s, "admin", &["delete", &first[0]]);
    wait_for(Duration::from_secs(30), "the deleted node replaced", || {
        let n = names(&s);
        (n.len() == 4 && !n.contains(&first[0])).then_some(())
    });
    let status = ok(
        &s,
        "admin",
        &[
            "get",
            "nodepool",
            "pool-a",
            "-o",
            "jsonpath={.status.conditions}",
        ],
    );
    assert!(
        status.contains("NodesReady") || status.contains("Ready"),
        "{status}"
    );

    // Fewer per zone: the surplus goes.
    ok(
        &s,
        "admin",
        &[
            "patch",
            "nodepool",
            "pool-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"initialNodeCount":1}}"#,
        ],
    );
    wait_for(Duration::from_secs(30), "2 nodes left", || {
        (names(&s).len() == 2).then_some(())
    });
}

/// A Service created while its 60 ready pods keep changing, each change a
/// sync on the heels of the last one's write: every endpoint ends up in
/// one slice. A sync planned against a cache that did not yet hold the
/// slice the previous sync created would make a second one (generateName)
/// and split the endpoints between them. On one host the watch event
/// nearly always beats the next sync, so this rarely meets that race; the
/// wait itself is proven in `endpoint_slices::tracker`'s tests.
fn a_burst_of_ready_pods_fills_one_slice(backend: Backend) {
    const PODS: usize = 60;
    let s = Server::start_on(
        &format!("burst-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true", "--cluster-cidr", "198.19.0.0/16"],
    );
    let a = Apis::of(&s);
    let (rt, pods) = (&a.rt, &a.pods);
    let pp = PostParams::default();
    register(rt, &a.nodes, &a.leases, &[("node-1", "zone-a")]);
    rt.block_on(async {
        for i in 0..PODS {
            let pod: Pod = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("burst-{i}"), "namespace": "default",
                    "labels": {"app": "burst"}},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
            }))
            .expect("pod");
            pods.create(&pp, &pod).await.expect("pod");
            let ip = format!("198.18.10.{}", i + 1);
            let status = json!({"status": {"phase": "Running", "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": "True"}]}});
            pods.patch_status(
                &format!("burst-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .expect("status");
        }
        // The Service comes while its pods keep changing: its first sync
        // creates the slice, and each pod change is another sync on the
        // heels of that write.
        let svc: sluice_model::k8s::Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "burst", "namespace": "default"},
            "spec": {"selector": {"app": "burst"}, "ports": [{"port": 80, "targetPort": 8080}]},
        }))
        .expect("service");
        Api::<sluice_model::k8s::Service>::namespaced(a.client.clone(), "default")
            .create(&pp, &svc)
            .await
            .expect("service");
        for round in 0..5 {
            let writes = (0..PODS).map(|i| {
                let pods = pods.clone();
                async move {
                    let touch = json!({"metadata": {"annotations": {"round": round.to_string()}}});
                    pods.patch(
                        &format!("burst-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&touch),
                    )
                    .await
                    .expect("touch");
                }
            });
            futures::future::join_all(writes).await;
        }
    });
    common::wait_until(
        Duration::from_secs(20),
        "one slice with every endpoint ready",
        || {
            rt.block_on(
                a.slices
                    .list(&ListParams::default().labels("kubernetes.io/service-name=burst")),
            )
            .map(|l| l.items.iter().map(ready_in).collect::<Vec<_>>())
            .unwrap_or_default()
        },
        |ready| ready.as_slice() == [PODS],
        || s.log(),
    );
}

/// The cluster autoscaler grows an autoscaled pool for pods that fit
/// nowhere, then, the Deployment scaled down, removes the node left
/// unneeded through the pool (spec: C3, C4): its size and the node it
/// names are in the pool's `status.autoscaler`.
fn the_autoscaler_grows_and_shrinks_a_pool(backend: Backend) {
    let s = Server::start_on(
        &format!("autoscale-{backend:?}").to_lowercase(),
        backend,
        &[
            "--controllers=true",
            "--node-provider",
            "sim:0",
            "--scale-down-unneeded-time",
            "2s",
            "--scale-down-delay-after-add",
            "0s",
        ],
    );
    let pool = write(
        &s,
        "pool.yaml",
        "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec:
  locations: [zone-a]
  initialNodeCount: 1
  config: {capacity: {cpu: '2', memory: 4Gi}}
  autoscaling: {enabled: true, minNodeCount: 1, maxNodeCount: 4}
",
    );
    ok(&s, "admin", &["apply", "-f", &pool]);
    let app = write(
        &s,
        "app.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      # Nothing runs a sim node's pods, so nothing would finish a graceful
      # deletion: a bound pod deleted with its grace stays Terminating
      # until the autoscaler counts it as long terminating (grace + 30 s
      # after its deletionTimestamp). With no grace it goes at once.
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: pause
        resources: {requests: {cpu: 1500m, memory: 1Gi}}
",
    );
    ok(&s, "admin", &["apply", "-f", &app]);
    let nodes = |s: &Server| {
        ok(
            s,
            "admin",
            &[
                "get",
                "nodes",
                "-l",
                "cloud.google.com/gke-nodepool=pool-a",
                "-o",
                "name",
            ],
        )
        .lines()
        .count()
    };
    wait_for(Duration::from_secs(60), "3 nodes for 3 pods", || {
        (nodes(&s) == 3).then_some(())
    });
    ok(
        &s,
        "admin",
        &["scale", "deployment/big", "-n", "default", "--replicas=1"],
    );
    wait_for(Duration::from_secs(90), "back to 1 node", || {
        (nodes(&s) == 1).then_some(())
    });
    let sizes = ok(
        &s,
        "admin",
        &[
            "get",
            "nodepool",
            "pool-a",
            "-o",
            "jsonpath={.status.autoscaler.targetSizes}",
        ],
    );
    assert!(sizes.contains(r#""zone-a":1"#), "{sizes}");
}

on_both_stores!(
    cluster_loops,
    node_pools_make_nodes,
    a_burst_of_ready_pods_fills_one_slice,
    the_autoscaler_grows_and_shrinks_a_pool
);
