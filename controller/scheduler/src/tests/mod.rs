//! Unit tests over small hand-built Nodes and Pods.

mod cluster;
mod consistency;
mod decisions;
mod filters;
mod inter_pod;
mod resources;
mod spread;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sluice_model::k8s::{Node, Pod};

use crate::{schedule, Cluster, Decision};

/// A node of `cpu` cores, `mem` and room for `pods` pods, labelled with
/// its hostname.
pub(crate) fn node(name: &str, cpu: &str, mem: &str, pods: u32) -> NodeB {
    NodeB(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": pods.to_string()}},
    }))
}

/// Nodes `a1` in zone a and `b1` in zone b (room for `b_pods` pods).
pub(crate) fn two_zones(b_pods: u32) -> Vec<NodeB> {
    vec![
        node("a1", "8", "8Gi", 110).zone("a"),
        node("b1", "8", "8Gi", b_pods).zone("b"),
    ]
}

pub(crate) struct NodeB(pub Value);

impl NodeB {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    pub fn zone(self, z: &str) -> Self {
        self.label("topology.kubernetes.io/zone", z)
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let t = json!({"key": key, "value": value, "effect": effect});
        match self.0["spec"]["taints"].as_array_mut() {
            Some(a) => a.push(t),
            None => self.0["spec"]["taints"] = json!([t]),
        }
        self
    }
    pub fn cordon(mut self) -> Self {
        self.0["spec"]["unschedulable"] = json!(true);
        self
    }
    pub fn build(self) -> Node {
        serde_json::from_value(self.0).expect("node")
    }
}

/// A pod `default/<name>` with one container requesting nothing.
pub(crate) fn pod(name: &str) -> PodB {
    PodB(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {}},
        "spec": {"containers": [{"name": "c"}]},
    }))
}

#[derive(Clone)]
pub(crate) struct PodB(pub Value);

impl PodB {
    pub fn req(mut self, cpu: &str, mem: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": cpu, "memory": mem}});
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    pub fn spec(mut self, field: &str, v: Value) -> Self {
        self.0["spec"][field] = v;
        self
    }
    pub fn on(self, node: &str) -> Self {
        self.spec("nodeName", json!(node))
    }
    pub fn tolerate(self, t: Value) -> Self {
        self.spec("tolerations", json!([t]))
    }
    pub fn anti(mut self, app: &str, key: &str) -> Self {
        self.0["spec"]["affinity"]["podAntiAffinity"] = json!({
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": app}},
                "topologyKey": key,
            }]
        });
        self
    }
    pub fn spread(self, app: &str, key: &str, max_skew: i32, when: &str) -> Self {
        self.spec(
            "topologySpreadConstraints",
            json!([{
                "maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": app}},
            }]),
        )
    }
    pub fn build(self) -> Pod {
        serde_json::from_value(self.0).expect("pod")
    }
}

/// An `app=web` pod spread over zones (maxSkew 1, DoNotSchedule).
pub(crate) fn web(name: &str) -> PodB {
    pod(name)
        .label("app", "web")
        .spread("web", "topology.kubernetes.io/zone", 1, "DoNotSchedule")
}

/// Two `app=web` pods bound to `node`.
pub(crate) fn two_web_on(node: &str) -> Vec<PodB> {
    ["x", "y"]
        .map(|n| pod(n).label("app", "web").on(node))
        .into()
}

pub(crate) fn cluster(nodes: Vec<NodeB>, pods: Vec<PodB>) -> Cluster {
    let nodes: Vec<Node> = nodes.into_iter().map(NodeB::build).collect();
    let pods: Vec<Pod> = pods.into_iter().map(PodB::build).collect();
    let (c, errors) = Cluster::from_objects(&nodes, &pods);
    assert_eq!(errors, vec![]);
    c
}

/// The node the pod was bound to, or a panic naming the decision.
pub(crate) fn bound(c: &mut Cluster, p: PodB) -> String {
    match schedule(c, &p.build()) {
        Decision::Bind { node } => node,
        other => panic!("expected a binding, got {other:?}"),
    }
}

/// The message and reasons of an unschedulable decision.
pub(crate) fn refused(c: &mut Cluster, p: PodB) -> (String, BTreeMap<String, usize>) {
    match schedule(c, &p.build()) {
        Decision::Unschedulable { message, reasons } => (message, reasons),
        other => panic!("expected unschedulable, got {other:?}"),
    }
}
