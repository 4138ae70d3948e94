//! Pure tests over small hand-built clusters, each naming the rule it
//! proves (`// spec: C4`).

mod expanders;
mod scale_down;
mod scale_up;
mod timing;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::{Node, Pod, PodDisruptionBudget};
use sluice_model::node_pool::NodePool;

use crate::{decide, Decision, Options, PoolExtras, Reservation, Snapshot, State};

pub(crate) fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

pub(crate) fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

pub(crate) const MIN: i64 = 60;

/// A pool of `cpu`/`mem` nodes over `zones`, autoscaled per zone.
pub(crate) fn pool(name: &str, zones: &[&str], cpu: &str, mem: &str, min: i32, max: i32) -> Value {
    json!({
        "apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "locations": zones,
            "config": {"capacity": {"cpu": cpu, "memory": mem}},
            "autoscaling": {"enabled": true, "minNodeCount": min, "maxNodeCount": max},
        },
    })
}

pub(crate) fn node(name: &str, pool: &str, zone: &str, cpu: &str, mem: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {
            "cloud.google.com/gke-nodepool": pool,
            "topology.kubernetes.io/zone": zone,
            "kubernetes.io/hostname": name,
        }},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": mem, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": mem, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

fn owner(kind: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": uid, "uid": uid, "controller": true}])
}

/// A pod of a ReplicaSet `rs`, requesting `cpu` and `mem`, that the
/// scheduler could not place.
pub(crate) fn pending(name: &str, rs: &str, cpu: &str, mem: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": rs},
                     "ownerReferences": owner("ReplicaSet", rs)},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })
}

/// A running, Ready pod of ReplicaSet `rs` on `node`.
pub(crate) fn running(name: &str, rs: &str, node: &str, cpu: &str, mem: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": rs},
                     "ownerReferences": owner("ReplicaSet", rs),
                     "creationTimestamp": "2025-12-01T00:00:00Z"},
        "spec": {"nodeName": node,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        "status": {"phase": "Running", "startTime": "2025-12-01T00:00:00Z",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

pub(crate) fn set(mut v: Value, path: &[&str], to: Value) -> Value {
    let mut cur = &mut v;
    for (i, k) in path.iter().enumerate() {
        let slot = match k.parse::<usize>() {
            Ok(n) if cur.is_array() => &mut cur[n],
            _ => &mut cur[*k],
        };
        if i + 1 == path.len() {
            *slot = to.clone();
            break;
        }
        if slot.is_null() {
            *slot = json!({});
        }
        cur = slot;
    }
    v
}

pub(crate) fn annotate(v: Value, key: &str, value: &str) -> Value {
    let mut v = v;
    v["metadata"]["annotations"][key] = json!(value);
    v
}

/// A test cluster: objects as JSON, turned into typed objects per decision.
#[derive(Default)]
pub(crate) struct World {
    pub nodes: Vec<Value>,
    pub pods: Vec<Value>,
    pub pools: Vec<Value>,
    pub pdbs: Vec<Value>,
    pub extras: BTreeMap<String, PoolExtras>,
    pub reservations: Vec<Reservation>,
    pub options: Options,
    pub profile: Option<sluice_model::cluster::AutoscalingProfile>,
    pub pod_cidrs_left: Option<u64>,
}

fn typed<T: serde::de::DeserializeOwned>(vs: &[Value]) -> Vec<T> {
    vs.iter()
        .map(|v| serde_json::from_value(v.clone()).expect("test object"))
        .collect()
}

impl World {
    pub fn decide(&self, state: &State, now: Timestamp) -> Decision {
        let nodes: Vec<Node> = typed(&self.nodes);
        let pods: Vec<Pod> = typed(&self.pods);
        let pools: Vec<NodePool> = typed(&self.pools);
        let pdbs: Vec<PodDisruptionBudget> = typed(&self.pdbs);
        let snap = Snapshot {
            nodes: &nodes,
            pods: &pods,
            pools: &pools,
            pdbs: &pdbs,
            profile: self.profile,
            extras: &self.extras,
            reservations: &self.reservations,
            pod_cidrs_left: self.pod_cidrs_left,
            options: &self.options,
        };
        decide(&snap, state, now)
    }

    /// Per pool zone, the size the decision sets.
    pub fn targets(d: &Decision) -> BTreeMap<String, i32> {
        d.targets
            .iter()
            .map(|t| (format!("{}/{}", t.pool, t.zone), t.to))
            .collect()
    }
}

/// `(pool/zone, size)` pairs as a map, for comparing with [`World::targets`].
pub(crate) fn sizes(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}
