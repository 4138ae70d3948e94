//! API objects to a [`DesiredState`], pure: the same per-object readings
//! as the state file (`validate.rs`, `services.rs`), but an invalid object
//! is set aside with its fault instead of refusing everything. The API
//! server is shared by many writers; one bad Service must not freeze the
//! node's datapath for all the others (kube-proxy skips such objects too).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use sluice_model::k8s::{EndpointSlice, Node, ObjectMeta, Pod, PodDisruptionBudget, Service};

use super::ipam::{Assigned, Claim, Ipam};
use crate::state::model::DesiredState;
use crate::state::services::{
    attach_slice, finish_endpoints, service_info, slice_endpoints, Claims, PendingSlice,
};
use crate::state::validate::{
    namespaced, node_info, pdb_spec, pod_address_fault, pod_info, Ctx, DRAIN_ANNOTATION,
    EVICT_ANNOTATION, POOL_KIND_LABEL,
};
use crate::state::StateError;

/// What the watchers hold at one moment, as the reflectors' stores hand it
/// out (shared, never copied until read).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub nodes: Vec<Arc<Node>>,
    pub services: Vec<Arc<Service>>,
    pub slices: Vec<Arc<EndpointSlice>>,
    /// The Pods bound to this node (the watch's field selector).
    pub pods: Vec<Arc<Pod>>,
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
}

/// One object left out of the state, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectFault {
    /// `Kind namespace/name` (`Node name` for nodes).
    pub object: String,
    /// The field at fault, e.g. `spec.ports[0].port`; empty for the whole
    /// object.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ObjectFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.object)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}

impl From<StateError> for ObjectFault {
    fn from(e: StateError) -> Self {
        ObjectFault {
            object: e.object,
            field: e.field,
            message: e.message,
        }
    }
}

/// The state the objects describe, and every object left out of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapped {
    pub state: DesiredState,
    /// Sorted, so two builds of the same objects report alike.
    pub faults: Vec<ObjectFault>,
}

/// Map a snapshot to the desired state. Objects are taken in name order, so
/// when two claim one thing (a VIP and port, a health-check port, a pod
/// address) every agent keeps the same one.
pub fn map_snapshot(snap: &Snapshot) -> Mapped {
    map_with(snap, None)
}

/// As [`map_snapshot`], and `node`'s pods without `status.podIPs` get
/// addresses from `ipam` (its pod CIDRs), so they are wired and started at
/// once rather than after the status writer's round trip.
pub fn map_snapshot_assigning(snap: &Snapshot, node: &str, ipam: &mut Ipam) -> Mapped {
    map_with(snap, Some((node, ipam)))
}

fn map_with(snap: &Snapshot, ipam: Option<(&str, &mut Ipam)>) -> Mapped {
    let mut out = Mapped::default();
    let mut faults = Vec::new();
    map_nodes(snap, &mut out.state, &mut faults);
    let assigned = ipam
        .map(|(node, ipam)| assign_addresses(snap, &out.state, node, ipam))
        .unwrap_or_default();
    map_pods(snap, &assigned, &mut out.state, &mut faults);
    map_services(snap, &mut out.state, &mut faults);
    map_slices(snap, &mut out.state, &mut faults);
    map_pdbs(snap, &mut out.state, &mut faults);
    finish_endpoints(&mut out.state);
    faults.sort();
    out.faults = faults;
    out
}

fn sorted<K>(objects: &[Arc<K>], key: impl Fn(&K) -> String) -> Vec<(String, &K)> {
    let mut v: Vec<(String, &K)> = objects.iter().map(|o| (key(o), &**o)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Annotations and labels that ask the agent for something (a drain, an
/// eviction, a pool kind). One that cannot be read is reported and the
/// object read without it: a typo in `sluice.dev/drain` must not take the
/// Node out of the state (its agent would apply nothing more), nor one in
/// `sluice.dev/evict` take the Pod out (its agent would stop it).
const REQUESTS: [&str; 3] = [DRAIN_ANNOTATION, EVICT_ANNOTATION, POOL_KIND_LABEL];

/// `read` of `obj`; if it fails on one of [`REQUESTS`], the fault is
/// reported and `obj` read again without that entry.
fn lenient<K: Clone, T>(
    obj: &K,
    meta: impl Fn(&mut K) -> &mut ObjectMeta,
    read: impl Fn(K) -> Result<T, StateError>,
    faults: &mut Vec<ObjectFault>,
) -> Result<T, StateError> {
    let e = match read(obj.clone()) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let Some(entry) = REQUESTS
        .iter()
        .find(|k| e.field.ends_with(&format!("[{k}]")))
    else {
        return Err(e);
    };
    let mut without = obj.clone();
    let m = meta(&mut without);
    for map in [&mut m.annotations, &mut m.labels].into_iter().flatten() {
        map.remove(*entry);
    }
    let v = read(without)?;
    faults.push(e.into());
    Ok(v)
}

fn map_nodes(snap: &Snapshot, state: &mut DesiredState, faults: &mut Vec<ObjectFault>) {
    for (name, n) in sorted(&snap.nodes, |n| n.metadata.name.clone().unwrap_or_default()) {
        let ctx = Ctx::object(format!("Node {name}"));
        let read = |n: Node| node_info(&ctx, n);
        match lenient(n, |n| &mut n.metadata, read, faults) {
            Ok(info) => {
                state.nodes.insert(info.name.clone(), info);
            }
            Err(e) => faults.push(e.into()),
        }
    }
}

/// Succeeded and Failed pods have ended for good: nothing to run or wire.
fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn host_network(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// Addresses for `node`'s pods that have none in their status.
fn assign_addresses(
    snap: &Snapshot,
    state: &DesiredState,
    node: &str,
    ipam: &mut Ipam,
) -> Assigned {
    let claims: Vec<Claim> = snap
        .pods
        .iter()
        .filter(|p| !is_terminal(p) && !host_network(p))
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .map(|p| Claim {
            key: namespaced(&p.metadata),
            // An unreadable address is the pod's own fault, reported when
            // it is read; it still claims the pod has addresses.
            status_ips: status_ips(p),
        })
        .collect();
    let cidrs = state
        .nodes
        .get(node)
        .map(|n| n.pod_cidrs.clone())
        .unwrap_or_default();
    ipam.assign(&cidrs, &claims)
}

fn status_ips(p: &Pod) -> Vec<IpAddr> {
    let listed = p.status.as_ref().and_then(|s| s.pod_ips.as_ref());
    let mut out = Vec::new();
    for ip in listed.into_iter().flatten() {
        match ip.ip.parse() {
            Ok(a) => out.push(a),
            Err(_) => out.push(IpAddr::from([0, 0, 0, 0])),
        }
    }
    out
}

/// The pod as the agent runs it: the addresses it assigned, and the node's
/// addresses as `status.hostIP(s)` (what the status writer reports, so the
/// downward API reads the same before and after the round trip and the
/// pod is not restarted when its status comes back).
fn as_run(p: &Pod, ips: Option<&Vec<IpAddr>>, state: &DesiredState) -> Pod {
    use sluice_model::k8s_openapi::api::core::v1::{HostIP, PodIP, PodStatus};
    let mut pod = p.clone();
    let status = pod.status.get_or_insert_with(PodStatus::default);
    if let Some(ips) = ips {
        status.pod_ip = ips.first().map(ToString::to_string);
        status.pod_ips = Some(ips.iter().map(|ip| PodIP { ip: ip.to_string() }).collect());
    }
    let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if let Some(n) = node.and_then(|n| state.nodes.get(n)) {
        if !n.addrs.is_empty() {
            status.host_ip = n.addrs.first().map(ToString::to_string);
            status.host_ips = Some(
                n.addrs
                    .iter()
                    .map(|ip| HostIP { ip: ip.to_string() })
                    .collect(),
            );
        }
    }
    pod
}

fn map_pods(
    snap: &Snapshot,
    assigned: &Assigned,
    state: &mut DesiredState,
    faults: &mut Vec<ObjectFault>,
) {
    // Pod address → the pod that has it.
    let mut owners: BTreeMap<IpAddr, String> = BTreeMap::new();
    for (key, p) in sorted(&snap.pods, |p| namespaced(&p.metadata)) {
        if is_terminal(p) {
            continue;
        }
        let ctx = Ctx::object(format!("Pod {key}"));
        let ips = match assigned.get(&key) {
            Some(Err(full)) => {
                faults.push(ctx.err("status.podIPs", full.to_string()).into());
                continue;
            }
            Some(Ok(ips)) => Some(ips),
            None => None,
        };
        let hn = host_network(p);
        let p = as_run(p, ips, state);
        let read = |p: Pod| {
            serde_yaml::to_value(&p)
                .map_err(|e| ctx.err("", format!("cannot be read: {e}")))
                .and_then(|v| {
                    crate::pods::run_spec_from_manifest(&v)
                        .map_err(|e| ctx.err(e.field.clone(), e.message.clone()))
                })
                .and_then(|run| pod_info(&ctx, p, run))
        };
        let pod = match lenient(&p, |p| &mut p.metadata, read, faults) {
            Ok(pod) => pod,
            Err(e) => {
                faults.push(e.into());
                continue;
            }
        };
        if !hn {
            if let Some(e) = pod_address_fault(&ctx, state, &owners, &pod) {
                faults.push(e.into());
                continue;
            }
            for ip in &pod.ips {
                owners.insert(*ip, key.clone());
            }
        }
        state.pods.insert(key, pod);
    }
}

fn map_services(snap: &Snapshot, state: &mut DesiredState, faults: &mut Vec<ObjectFault>) {
    let mut claims = Claims::default();
    for (key, s) in sorted(&snap.services, |s| namespaced(&s.metadata)) {
        let ctx = Ctx::object(format!("Service {key}"));
        let svc = match service_info(&ctx, s.clone()) {
            Ok(svc) => svc,
            Err(e) => {
                faults.push(e.into());
                continue;
            }
        };
        // What the file refuses whole is refused here to the later Service.
        if let Some(e) = claims.fault(&ctx, &svc) {
            faults.push(e.into());
            continue;
        }
        claims.record(&svc);
        state.services.insert(key, svc);
    }
}

fn map_slices(snap: &Snapshot, state: &mut DesiredState, faults: &mut Vec<ObjectFault>) {
    let mut seen = BTreeMap::new();
    for (key, s) in sorted(&snap.slices, |s| namespaced(&s.metadata)) {
        let ctx = Ctx::object(format!("EndpointSlice {key}"));
        let read = slice_endpoints(&ctx, s.clone());
        let pending = PendingSlice {
            ctx,
            key: Ok(key),
            read,
        };
        // A slice of a Service not (or not yet) known adds nothing; it is
        // used once the Service comes, at the next build.
        if let Err(e) = attach_slice(pending, state, &mut seen) {
            faults.push(e.into());
        }
    }
}

fn map_pdbs(snap: &Snapshot, state: &mut DesiredState, faults: &mut Vec<ObjectFault>) {
    for (key, b) in sorted(&snap.pdbs, |b| namespaced(&b.metadata)) {
        let ctx = Ctx::object(format!("PodDisruptionBudget {key}"));
        match pdb_spec(&ctx, b.clone()) {
            Ok(pdb) => {
                state.pdbs.insert(key, pdb);
            }
            Err(e) => faults.push(e.into()),
        }
    }
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
