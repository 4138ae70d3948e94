//! What `kubectl get` prints, and the other shapes of a read, on both
//! stores: the server answers `kubectl get`'s Table request with the
//! columns kubectl users read (READY/STATUS for Pods, STATUS/ROLES for
//! Nodes, TYPE/EXTERNAL-IP/PORT(S) for Services), `-o wide` adds the wide
//! ones, `get -w` prints rows as they change; metadata-only reads
//! (kube-rs's `list_metadata`) get `PartialObjectMetadata`; what cannot be
//! produced is a 406. Also `deletecollection` with selectors (kube-rs's
//! `delete_collection`), and the system namespaces a new cluster has.

#[macro_use]
mod common;
use common::{kube_client, ok, wait_for, write, Backend, Server};

use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams, PostParams};
use sluice_model::k8s::Pod;

const OBJECTS: &str = "apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {node-role.kubernetes.io/worker: ''}}
status:
  conditions: [{type: Ready, status: 'True'}]
  addresses: [{type: InternalIP, address: 198.18.0.2}]
  nodeInfo: {kubeletVersion: v1.37.0, osImage: Debian, kernelVersion: '6.1', containerRuntimeVersion: sluice, machineID: m, systemUUID: s, bootID: b, kubeProxyVersion: '', operatingSystem: linux, architecture: amd64}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: default, labels: {app: web}}
spec:
  nodeName: node-1
  containers: [{name: a, image: x}, {name: b, image: x}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 198.18.0.10
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080, nodePort: 30080, protocol: TCP}]
";

/// The header line and the row of `name` from kubectl's table output.
fn row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let words = |l: &str| l.split_whitespace().map(String::from).collect();
    let mut lines = out.lines();
    let head = words(lines.next().unwrap_or_default());
    let row = words(
        lines
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_default(),
    );
    (head, row)
}

/// The agent's report of web-1's state, through the status subresource.
fn report_status(s: &Server, status: &str) {
    ok(
        s,
        "admin",
        &[
            "patch",
            "pod",
            "web-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ],
    );
}

fn tables(backend: Backend) {
    let s = Server::start(&format!("print-{backend:?}").to_lowercase(), backend);
    let f = write(&s, "objects.yaml", OBJECTS);
    ok(&s, "admin", &["apply", "--validate=false", "-f", &f]);
    report_status(
        &s,
        r#"{"status":{"phase":"Running","podIPs":[{"ip":"198.18.1.5"}],"containerStatuses":[
              {"name":"a","image":"x","imageID":"","ready":true,"restartCount":2,"state":{"running":{}}},
              {"name":"b","image":"x","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}"#,
    );

    let (head, pod) = row(&ok(&s, "admin", &["get", "pods"]), "web-1");
    assert_eq!(head, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(&pod[..4], ["web-1", "1/2", "CrashLoopBackOff", "2"]);
    let (head, pod) = row(&ok(&s, "admin", &["get", "pods", "-o", "wide"]), "web-1");
    assert_eq!(&head[5..7], ["IP", "NODE"]);
    assert_eq!(&pod[5..7], ["198.18.1.5", "node-1"]);

    let (head, node) = row(&ok(&s, "admin", &["get", "nodes"]), "node-1");
    assert_eq!(head, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(&node[..3], ["node-1", "Ready", "worker"]);
    assert_eq!(node[4], "v1.37.0");
    ok(&s, "admin", &["cordon", "node-1"]);
    let (_, node) = row(&ok(&s, "admin", &["get", "nodes", "-o", "wide"]), "node-1");
    assert_eq!(node[1], "Ready,SchedulingDisabled");
    assert_eq!(node[5], "198.18.0.2");

    let (head, svc) = row(&ok(&s, "admin", &["get", "svc"]), "web");
    assert_eq!(
        head,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        &svc[1..5],
        ["LoadBalancer", "198.18.0.10", "<pending>", "80:30080/TCP"]
    );

    // `kubectl get all` expands the `all` category discovery names: the
    // pod and the Service, with their kinds, and nothing of the others.
    let all = ok(&s, "admin", &["get", "all"]);
    assert!(all.contains("pod/web-1"), "{all}");
    assert!(all.contains("service/web"), "{all}");
    assert!(!all.contains("event"), "{all}");

    // --show-labels and -A read the row's metadata.
    let out = ok(&s, "admin", &["get", "pods", "-A", "--show-labels"]);
    let (head, pod) = row(&out, "default");
    assert_eq!(head[0], "NAMESPACE");
    assert_eq!(pod.last().map(String::as_str), Some("app=web"));

    // A new cluster has kube-apiserver's namespaces.
    let out = ok(&s, "admin", &["get", "namespaces"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let (head, r) = row(&out, ns);
        assert_eq!(head, ["NAME", "STATUS", "AGE"]);
        assert_eq!(r.get(1).map(String::as_str), Some("Active"), "{out}");
    }

    // `get -w` prints the table, then a row per change.
    let log = s.dir.join("watch.log");
    let mut w = s.kubectl_spawn(
        "admin",
        &["get", "pods", "-w", "--request-timeout", "30s"],
        &log,
    );
    wait_for(Duration::from_secs(20), "the watch's first rows", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|l| l.contains("web-1"))
    });
    report_status(
        &s,
        r#"{"status":{"containerStatuses":[
              {"name":"a","image":"x","imageID":"","ready":true,"restartCount":2,"state":{"running":{}}},
              {"name":"b","image":"x","imageID":"","ready":true,"restartCount":1,"state":{"running":{}}}]}}"#,
    );
    let seen = wait_for(Duration::from_secs(20), "a row for the change", || {
        std::fs::read_to_string(&log).ok().filter(|l| {
            l.lines()
                .any(|r| r.contains("2/2") && r.contains("Running"))
        })
    });
    let _ = w.kill();
    let _ = w.wait();
    assert_eq!(
        seen.lines().filter(|l| l.starts_with("NAME")).count(),
        1,
        "{seen}"
    );

    let token = s.admin_token();
    // `/version/` answers as `/version` does (the Python client asks so).
    for path in ["/version", "/version/"] {
        let answer = s.raw(
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        assert!(answer.contains("\"gitVersion\""), "{path}: {answer}");
    }

    // Something the server cannot produce is a 406, not JSON the client
    // did not ask for.
    let answer = s.raw(
        format!(
            "GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Accept: application/vnd.kubernetes.protobuf\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 406"), "{answer}");
    assert!(answer.contains("NotAcceptable"), "{answer}");
    let answer = s.raw(
        format!(
            "GET /api/v1/pods?includeObject=All HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Accept: application/json;as=Table;v=v1;g=meta.k8s.io\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("includeObject"), "{answer}");
}

fn collections(backend: Backend) {
    let s = Server::start(&format!("delcol-{backend:?}").to_lowercase(), backend);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = kube_client(&s).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        for (name, app) in [("a-1", "a"), ("a-2", "a"), ("b-1", "b")] {
            let p: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }))
            .expect("pod");
            pods.create(&PostParams::default(), &p)
                .await
                .expect("create");
        }
        // Metadata only: what metadata watchers and `list_metadata` read.
        let meta = pods
            .list_metadata(&ListParams::default())
            .await
            .expect("metadata list");
        let mut names: Vec<_> = meta
            .items
            .iter()
            .filter_map(|m| m.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["a-1", "a-2", "b-1"]);
        assert!(meta.metadata.resource_version.is_some());

        // A precondition that does not hold for every object deletes none.
        let wrong = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some("00000000-0000-4000-8000-000000000000".into()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let e = pods
            .delete_collection(&wrong, &ListParams::default().labels("app=a"))
            .await
            .expect_err("a precondition no pod meets");
        assert!(
            matches!(e, kube::Error::Api(ref s) if s.code == 409),
            "{e:?}"
        );
        assert_eq!(
            pods.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .len(),
            3
        );

        let gone = pods
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels("app=a"),
            )
            .await
            .expect("delete collection");
        let deleted: Vec<_> = gone
            .left()
            .expect("the deleted list")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert_eq!(deleted.len(), 2, "{deleted:?}");
        let left: Vec<_> = pods
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert_eq!(left, ["b-1"]);

        // Across every namespace there is no deletecollection of a
        // namespaced kind (kube-apiserver serves none either).
        let all: Api<Pod> = Api::all(client);
        let e = all
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .expect_err("all namespaces");
        assert!(
            matches!(e, kube::Error::Api(ref s) if s.code == 405),
            "{e:?}"
        );
    });
}

on_both_stores!(tables, collections);
