//! Decisions after a controller's `kill -9` start from complete caches:
//! a loop that acted on one kind's list before another's had come saw a
//! Service without pods (its EndpointSlice written empty, so every agent
//! answered new connections with resets) or a ReplicaSet without pods (new
//! ones made, the surplus then deleted). Upstream's controllers wait for
//! their informers to sync for the same reason. Both stores.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{ok, wait_for, write, Backend, Server};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
/// Pods of the ReplicaSet, each given an address and Ready by hand (no
/// agent runs here).
const REPLICAS: usize = 6;
/// Pods of no Service, to make the pods' list longer than the others'.
const BYSTANDERS: usize = 150;

fn manifests() -> String {
    let mut m = format!(
        "apiVersion: v1
kind: Node
metadata: {{name: rc-node}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: web, namespace: default}}
spec:
  replicas: {REPLICAS}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      nodeName: rc-node
      containers: [{{name: c, image: web}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
"
    );
    for i in 0..BYSTANDERS {
        m.push_str(&format!(
            "---
apiVersion: v1
kind: Pod
metadata: {{name: idle-{i}, namespace: default, labels: {{app: idle}}}}
spec:
  nodeName: rc-node
  containers: [{{name: c, image: idle}}]
"
        ));
    }
    m
}

fn json(s: &Server, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&ok(s, "admin", &a)).unwrap_or(Value::Null)
}

/// The pods labelled `app: <app>`: name → uid.
fn pods_of(s: &Server, app: &str) -> BTreeMap<String, String> {
    let label = format!("app={app}");
    json(s, &["get", "pods", "-n", "default", "-l", &label])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let m = &p["metadata"];
            (
                m["name"].as_str().unwrap_or_default().to_owned(),
                m["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Service `svc`'s one slice: (resourceVersion, endpoint addresses).
fn slice_of(s: &Server, svc: &str) -> Option<(String, Vec<String>)> {
    let label = format!("kubernetes.io/service-name={svc}");
    let list = json(s, &["get", "endpointslices", "-n", "default", "-l", &label]);
    let items = list["items"].as_array()?;
    let [one] = items.as_slice() else {
        return None;
    };
    let addrs = one["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    Some((
        one["metadata"]["resourceVersion"].as_str()?.to_owned(),
        addrs,
    ))
}

/// What the agent would report for pod `name`: running at `ip`, Ready.
fn make_ready(s: &Server, name: &str, ip: &str) {
    let status = format!(
        r#"{{"status":{{"phase":"Running","podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
    );
    ok(
        s,
        "admin",
        &[
            "patch",
            "pod",
            name,
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
    );
}

/// A ReplicaSet of one pod and a Service over it, both named `name`.
fn marker(name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeName: rc-node
      containers: [{{name: c, image: mark}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{app: {name}}}
  ports: [{{port: 80, targetPort: 8080}}]
"
    )
}

fn caches_complete_before_decisions(backend: Backend) {
    let mut s = Server::start_on(
        &format!("restartcaches-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true"],
    );
    let f = write(&s, "all.yaml", &manifests());
    ok(&s, "admin", &["apply", "-f", &f]);
    // The node reports Ready (just now: the node lifecycle's grace of 40 s
    // outlasts the test), so its pods are not marked NotReady meanwhile.
    let now = ok(
        &s,
        "admin",
        &[
            "get",
            "node",
            "rc-node",
            "-o",
            "jsonpath={.metadata.creationTimestamp}",
        ],
    );
    let ready = format!(
        r#"{{"status":{{"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"{now}","lastTransitionTime":"{now}"}}]}}}}"#,
        now = now.trim()
    );
    ok(
        &s,
        "admin",
        &[
            "patch",
            "node",
            "rc-node",
            "--subresource=status",
            "--type=merge",
            "-p",
            &ready,
        ],
    );
    let pods = wait_for(WAIT, "the ReplicaSet's pods", || {
        let p = pods_of(&s, "web");
        (p.len() == REPLICAS).then_some(p)
    });
    for (i, name) in pods.keys().enumerate() {
        make_ready(&s, name, &format!("198.19.0.{}", 10 + i));
    }
    let (version, addrs) = wait_for(WAIT, "every pod in the web slice", || {
        slice_of(&s, "web").filter(|(_, a)| a.len() == REPLICAS)
    });

    // kill -9 and the same serve again, three times over.
    for round in 0..3 {
        s.restart();
        // A ReplicaSet and a Service made after the restart: once its pod
        // is in its slice, both loops have worked their queues past the
        // keys they took at start (first in, first out), web's among them.
        let name = format!("mark-{round}");
        let f = write(&s, "mark.yaml", &marker(&name));
        ok(&s, "admin", &["apply", "-f", &f]);
        let pod = wait_for(WAIT, &format!("{name}'s pod"), || {
            pods_of(&s, &name).into_keys().next()
        });
        make_ready(&s, &pod, &format!("198.19.1.{}", 10 + round));
        wait_for(WAIT, &format!("{name}'s slice"), || {
            slice_of(&s, &name).filter(|(_, a)| a.len() == 1)
        });

        // spec: the EndpointSlice controller's rule — a slice holds the
        // Service's serving pods: never rewritten without them.
        let now = slice_of(&s, "web");
        assert_eq!(
            now,
            Some((version.clone(), addrs.clone())),
            "round {round}: the web slice was rewritten after the restart\n{}",
            s.log()
        );
        // spec: the ReplicaSet controller's rule — replicas pods, no more:
        // none made or deleted for want of a complete view.
        assert_eq!(
            pods_of(&s, "web"),
            pods,
            "round {round}: the ReplicaSet's pods changed after the restart"
        );
    }
}

on_both_stores!(caches_complete_before_decisions);
