//! From manifest text to a [`DesiredState`], rejecting the whole file at the
//! first invalid field so a half-understood file never reaches the datapath.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use sluice_model::k8s::{self, ObjectMeta};
use sluice_model::policy::disruption::PolicyError;

use super::limits::{check_nesting, check_size, MAX_NESTING};
use super::model::*;
use super::services::{
    attach_slice, finish_endpoints, read_slice, service_info, Claims, PendingSlice,
};
use super::typed::{decode, TypeError};
use crate::pods::disruption::{Budget, PdbSpec, Selector, UnhealthyPodEvictionPolicy};
use crate::pods::{EvictionReason, PoolKind};

/// Annotation naming an existing network namespace for a pod run elsewhere.
pub const NETNS_ANNOTATION: &str = "sluice.dev/netns";
/// The Sluice annotations and label the agent reads, named in the model
/// crate with the policy they select.
pub use crate::pods::eviction::{
    CORDONED_AT_ANNOTATION, DRAIN_ANNOTATION, DRAIN_CORDONED_ANNOTATION, EVICT_ANNOTATION,
    POOL_KIND_LABEL,
};
/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds`.
pub const DEFAULT_AFFINITY_TIMEOUT_S: u32 = 10_800;
/// Kubernetes' upper bound for the same field.
pub const MAX_AFFINITY_TIMEOUT_S: u32 = 86_400;

/// Where in the file a problem is and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError {
    /// 1-based document index in a multi-document file; 0 for file-level.
    pub doc: usize,
    /// `Kind namespace/name`, when known.
    pub object: String,
    /// Field path, e.g. `spec.ports[0].port`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.doc > 0 {
            write!(f, "document {}", self.doc)?;
            if !self.object.is_empty() {
                write!(f, ", {}", self.object)?;
            }
            write!(f, ": ")?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for StateError {}

pub(super) struct Ctx {
    doc: usize,
    object: String,
}

impl Ctx {
    /// An object that came from no document (the API server's): errors
    /// name it, not a document number.
    pub(super) fn object(object: impl Into<String>) -> Ctx {
        Ctx {
            doc: 0,
            object: object.into(),
        }
    }

    /// A type error inside this object: its path is the field.
    pub(super) fn typed(&self, e: TypeError) -> StateError {
        self.err(e.field, e.message)
    }

    /// A budget rule broken: the model names the field.
    fn policy(&self, e: PolicyError) -> StateError {
        self.err(e.field(), e.message())
    }

    pub(super) fn err(&self, field: impl Into<String>, message: impl Into<String>) -> StateError {
        StateError {
            doc: self.doc,
            object: self.object.clone(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A file-level problem (no document to point at).
fn file_err(message: impl Into<String>) -> StateError {
    StateError {
        doc: 0,
        object: String::new(),
        field: String::new(),
        message: message.into(),
    }
}

/// `metadata.<key>` as a string, if it is one.
fn meta_str<'a>(value: &'a serde_yaml::Value, key: &str) -> Option<&'a str> {
    value.get("metadata")?.get(key)?.as_str()
}

/// Fields taken out of a document before its typed decode, having been read
/// already: the k8s-openapi types would refuse any `apiVersion` but their
/// own, where the agent reads every version of the kinds it knows (and
/// checks `policy/v1` for budgets itself).
const READ_ELSEWHERE: &[&str] = &["apiVersion", "kind"];
/// A Pod's containers, grace period and restart policy are read by
/// `pods::spec` from the document as written, into its `PodRunSpec`, with
/// its own defaults and wording; typing them a second time would refuse what
/// it accepts (k8s-openapi's Quantity takes no plain number, `cpu: 1`) and
/// word one fault two ways.
const POD_SPEC_READ_ELSEWHERE: &[&str] = &[
    "containers",
    "initContainers",
    "ephemeralContainers",
    "terminationGracePeriodSeconds",
    "restartPolicy",
];

fn remove_keys(value: &mut serde_yaml::Value, keys: &[&str]) {
    if let Some(m) = value.as_mapping_mut() {
        for k in keys {
            m.shift_remove(*k);
        }
    }
}

/// Parse and validate a multi-document YAML file of manifests.
///
/// Bounded before the parser runs (size, nesting: see `limits.rs`), and
/// an empty file is refused: a file caught between truncate and write must
/// never read as "this node runs nothing".
pub fn parse_state(text: &str) -> Result<DesiredState, StateError> {
    check_size(text.len() as u64).map_err(|e| file_err(e.to_string()))?;
    check_nesting(text, MAX_NESTING).map_err(|e| file_err(e.to_string()))?;
    let mut state = DesiredState::default();
    let mut slices: Vec<PendingSlice> = Vec::new();
    // Where each Pod came from and whether it uses the node's addresses,
    // for the address checks once every Node is known.
    let mut pod_docs: Vec<(Ctx, String, bool)> = Vec::new();
    let mut claims = Claims::default();
    let mut objects = 0usize;

    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let doc_no = i + 1;
        let mut value = serde_yaml::Value::deserialize(doc).map_err(|e| StateError {
            doc: doc_no,
            object: String::new(),
            field: String::new(),
            message: format!("not valid YAML: {e}"),
        })?;
        if value.is_null() {
            continue;
        }
        objects += 1;
        let mut ctx = Ctx {
            doc: doc_no,
            object: String::new(),
        };
        if !value.is_mapping() {
            return Err(ctx.err(
                "",
                "not a Kubernetes object (expected a mapping with kind and apiVersion)",
            ));
        }
        let field_str = |field: &str| -> Result<String, StateError> {
            match value.get(field) {
                None | Some(serde_yaml::Value::Null) => Ok(String::new()),
                Some(v) => v.as_str().map(str::to_string).ok_or_else(|| StateError {
                    doc: doc_no,
                    object: String::new(),
                    field: field.into(),
                    message: "expected a string".into(),
                }),
            }
        };
        let kind = field_str("kind")?;
        let api_version = field_str("apiVersion")?;
        let name = meta_str(&value, "name").unwrap_or("");
        ctx.object = match kind.as_str() {
            "Node" | "" => format!("{kind} {name}").trim().to_string(),
            _ => format!(
                "{kind} {}/{name}",
                meta_str(&value, "namespace").unwrap_or("default")
            ),
        };
        if !kind.is_empty() {
            remove_keys(&mut value, READ_ELSEWHERE);
        }
        match kind.as_str() {
            "Node" => {
                let n: k8s::Node = decode(value).map_err(|e| ctx.typed(e))?;
                let node = node_info(&ctx, n)?;
                if state.nodes.insert(node.name.clone(), node).is_some() {
                    return Err(ctx.err("metadata.name", "duplicate Node"));
                }
            }
            "Pod" => {
                let run = crate::pods::run_spec_from_manifest(&value);
                if let Some(spec) = value.get_mut("spec") {
                    remove_keys(spec, POD_SPEC_READ_ELSEWHERE);
                }
                let p: k8s::Pod = decode(value).map_err(|e| ctx.typed(e))?;
                let run = run.map_err(|e| ctx.err(e.field.clone(), e.message.clone()))?;
                let host_network = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.host_network)
                    .unwrap_or(false);
                let pod = pod_info(&ctx, p, run)?;
                let key = pod.key.clone();
                if state.pods.contains_key(&key) {
                    return Err(ctx.err("metadata.name", "duplicate Pod"));
                }
                state.pods.insert(key.clone(), pod);
                pod_docs.push((ctx, key, host_network));
            }
            "Service" => {
                let s: k8s::Service = decode(value).map_err(|e| ctx.typed(e))?;
                let svc = service_info(&ctx, s)?;
                // Duplicates first: a second copy of a Service is a
                // duplicate, not a clash with itself.
                if state.services.contains_key(&svc.key) {
                    return Err(ctx.err("metadata.name", "duplicate Service"));
                }
                if let Some(e) = claims.fault(&ctx, &svc) {
                    return Err(e);
                }
                claims.record(&svc);
                state.services.insert(svc.key.clone(), svc);
            }
            "EndpointSlice" => {
                let s: k8s::EndpointSlice = decode(value).map_err(|e| ctx.typed(e))?;
                slices.push(read_slice(ctx, s));
            }
            "PodDisruptionBudget" => {
                if api_version != "policy/v1" {
                    return Err(ctx.err(
                        "apiVersion",
                        format!("{api_version:?} is not policy/v1"),
                    ));
                }
                let b: k8s::PodDisruptionBudget = decode(value).map_err(|e| ctx.typed(e))?;
                let pdb = pdb_spec(&ctx, b)?;
                if state.pdbs.insert(pdb.key.clone(), pdb).is_some() {
                    return Err(ctx.err("metadata.name", "duplicate PodDisruptionBudget"));
                }
            }
            "" => return Err(ctx.err("kind", "missing")),
            other => {
                return Err(ctx.err(
                    "kind",
                    format!(
                        "{other} is not supported (Node, Pod, Service, EndpointSlice, PodDisruptionBudget)"
                    ),
                ))
            }
        }
    }
    if objects == 0 {
        return Err(file_err(
            "no manifests: an empty file is refused, never read as \"run nothing\" \
             (a file caught between truncate and write looks like this)",
        ));
    }

    check_pod_ips(&state, &pod_docs)?;

    let mut seen_slices = BTreeMap::new();
    for slice in slices {
        attach_slice(slice, &mut state, &mut seen_slices)?;
    }
    finish_endpoints(&mut state);
    Ok(state)
}

pub(super) fn name_of(m: &ObjectMeta) -> &str {
    m.name.as_deref().unwrap_or_default()
}

pub(super) fn namespace_of(m: &ObjectMeta) -> &str {
    m.namespace.as_deref().unwrap_or("default")
}

pub(super) fn namespaced(m: &ObjectMeta) -> String {
    format!("{}/{}", namespace_of(m), name_of(m))
}

pub(super) fn require_name(ctx: &Ctx, m: &ObjectMeta) -> Result<(), StateError> {
    if name_of(m).is_empty() {
        return Err(ctx.err("metadata.name", "missing"));
    }
    Ok(())
}

/// A label or an annotation, absent when the object has no such map.
pub(super) fn meta_entry<'a>(
    map: &'a Option<BTreeMap<String, String>>,
    key: &str,
) -> Option<&'a String> {
    map.as_ref().and_then(|m| m.get(key))
}

pub(super) fn parse_ip(ctx: &Ctx, field: &str, s: &str) -> Result<IpAddr, StateError> {
    s.trim()
        .parse()
        .map_err(|_| ctx.err(field, format!("{s:?} is not an IP address")))
}

pub(super) fn node_info(ctx: &Ctx, n: k8s::Node) -> Result<NodeInfo, StateError> {
    require_name(ctx, &n.metadata)?;
    let spec = n.spec.unwrap_or_default();
    let addresses = n.status.and_then(|s| s.addresses).unwrap_or_default();
    let mut addrs: Vec<IpAddr> = Vec::new();
    for (i, a) in addresses.iter().enumerate() {
        if a.type_ != "InternalIP" {
            continue;
        }
        let ip = parse_ip(ctx, &format!("status.addresses[{i}].address"), &a.address)?;
        if addrs.iter().any(|x| x.is_ipv4() == ip.is_ipv4()) {
            return Err(ctx.err(
                format!("status.addresses[{i}]"),
                "more than one InternalIP of the same family",
            ));
        }
        addrs.push(ip);
    }
    let mut pod_cidrs = Vec::new();
    for (i, c) in spec.pod_cidrs.iter().flatten().enumerate() {
        let net: IpNet = c.parse().map_err(|_| {
            ctx.err(
                format!("spec.podCIDRs[{i}]"),
                format!("{c:?} is not a CIDR"),
            )
        })?;
        if net.trunc() != net {
            return Err(ctx.err(
                format!("spec.podCIDRs[{i}]"),
                format!("{c:?} has host bits set"),
            ));
        }
        pod_cidrs.push(net);
    }
    let mut taints = Vec::new();
    for (i, t) in spec.taints.unwrap_or_default().into_iter().enumerate() {
        if t.key.is_empty() {
            return Err(ctx.err(format!("spec.taints[{i}].key"), "missing"));
        }
        match t.effect.as_str() {
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
            o => {
                return Err(ctx.err(
                    format!("spec.taints[{i}].effect"),
                    format!("{o:?} is not NoSchedule, PreferNoSchedule or NoExecute"),
                ))
            }
        }
        taints.push(t.key);
    }
    let drain = reason_annotation(ctx, &n.metadata, DRAIN_ANNOTATION)?;
    let pool = match meta_entry(&n.metadata.labels, POOL_KIND_LABEL) {
        None => PoolKind::Standard,
        Some(v) => PoolKind::from_label(v).ok_or_else(|| {
            ctx.err(
                format!("metadata.labels[{POOL_KIND_LABEL}]"),
                format!("{v:?} is not standard or autopilot"),
            )
        })?,
    };
    Ok(NodeInfo {
        deleting: n.metadata.deletion_timestamp.is_some(),
        name: n.metadata.name.unwrap_or_default(),
        drain,
        cordoned_by_agent: meta_entry(&n.metadata.annotations, DRAIN_CORDONED_ANNOTATION)
            .is_some_and(|v| v == "true"),
        // The controller's own stamp: an unreadable one is no reason to
        // refuse the Node; the drain then counts from when it saw it.
        cordoned_at: meta_entry(&n.metadata.annotations, CORDONED_AT_ANNOTATION)
            .and_then(|v| v.parse::<sluice_model::k8s::jiff::Timestamp>().ok())
            .map(std::time::SystemTime::from),
        pool,
        addrs,
        pod_cidrs,
        taints,
        unschedulable: spec.unschedulable.unwrap_or(false),
    })
}

pub(super) fn pod_info(
    ctx: &Ctx,
    p: k8s::Pod,
    run: crate::pods::PodRunSpec,
) -> Result<PodInfo, StateError> {
    require_name(ctx, &p.metadata)?;
    let status = p.status.unwrap_or_default();
    let mut ips = Vec::new();
    for (i, ip) in status.pod_ips.iter().flatten().enumerate() {
        ips.push(parse_ip(ctx, &format!("status.podIPs[{i}].ip"), &ip.ip)?);
    }
    let netns = meta_entry(&p.metadata.annotations, NETNS_ANNOTATION).cloned();
    if let Some(ns) = &netns {
        if ns.is_empty() || ns.contains('/') || ns == "." || ns == ".." {
            return Err(ctx.err(
                format!("metadata.annotations[{NETNS_ANNOTATION}]"),
                format!("{ns:?} is not a network namespace name"),
            ));
        }
    }
    let evict = reason_annotation(ctx, &p.metadata, EVICT_ANNOTATION)?;
    let mut ready = None;
    for (i, c) in status.conditions.iter().flatten().enumerate() {
        if c.type_ != "Ready" {
            continue;
        }
        match c.status.as_str() {
            "True" | "False" | "Unknown" => ready = Some(c.status == "True"),
            o => {
                return Err(ctx.err(
                    format!("status.conditions[{i}].status"),
                    format!("{o:?} is not True, False or Unknown"),
                ))
            }
        }
    }
    let reported = ReportedStatus {
        start_time: status.start_time.as_ref().map(|t| t.0.into()),
        conditions: status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                let since = c.last_transition_time.as_ref().map(|t| t.0.into());
                (c.type_.clone(), c.status.clone(), since)
            })
            .collect(),
    };
    let host_network = p
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    Ok(PodInfo {
        key: namespaced(&p.metadata),
        node: p.spec.and_then(|s| s.node_name).unwrap_or_default(),
        ips,
        netns,
        run,
        labels: p.metadata.labels.unwrap_or_default(),
        ready,
        deleting: p.metadata.deletion_timestamp.is_some(),
        deletion_deadline: p
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| std::time::SystemTime::from(t.0)),
        uid: p.metadata.uid.clone(),
        host_network,
        reported,
        evict,
        daemon_set: p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.kind == "DaemonSet"),
    })
}

/// An annotation naming an eviction reason (`sluice.dev/drain`,
/// `sluice.dev/evict`).
fn reason_annotation(
    ctx: &Ctx,
    meta: &ObjectMeta,
    name: &str,
) -> Result<Option<EvictionReason>, StateError> {
    match meta_entry(&meta.annotations, name) {
        None => Ok(None),
        Some(v) => EvictionReason::from_annotation(v).map(Some).ok_or_else(|| {
            ctx.err(
                format!("metadata.annotations[{name}]"),
                format!("{v:?} is not {}", EvictionReason::ANNOTATION_VALUES),
            )
        }),
    }
}

/// Pod addresses as an IPAM would hand them out: inside the pod CIDRs of the
/// pod's node (when the file gives that Node and its CIDRs) and never one
/// address for two pods. Host-network pods use the node's addresses and are
/// left out. Every node checks every pod, so all agents reading one file
/// reject it alike.
fn check_pod_ips(state: &DesiredState, pods: &[(Ctx, String, bool)]) -> Result<(), StateError> {
    let mut owners: BTreeMap<IpAddr, String> = BTreeMap::new();
    for (ctx, key, host_network) in pods {
        let Some(pod) = state.pods.get(key) else {
            continue;
        };
        if *host_network {
            continue;
        }
        if let Some(e) = pod_address_fault(ctx, state, &owners, pod) {
            return Err(e);
        }
        for ip in &pod.ips {
            owners.insert(*ip, key.clone());
        }
    }
    Ok(())
}

/// The first address of `pod` an IPAM would not have handed out: outside
/// its node's `spec.podCIDRs` (when the state gives them), or already
/// another pod's (`owners`: address → pod key).
pub(super) fn pod_address_fault(
    ctx: &Ctx,
    state: &DesiredState,
    owners: &BTreeMap<IpAddr, String>,
    pod: &PodInfo,
) -> Option<StateError> {
    let cidrs = state
        .nodes
        .get(&pod.node)
        .map(|n| n.pod_cidrs.as_slice())
        .unwrap_or_default();
    for (i, ip) in pod.ips.iter().enumerate() {
        let field = format!("status.podIPs[{i}].ip");
        if !cidrs.is_empty() && !cidrs.iter().any(|c| c.contains(ip)) {
            let list: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
            return Some(ctx.err(
                field,
                format!(
                    "{ip} is outside Node {}'s spec.podCIDRs ({})",
                    pod.node,
                    list.join(", ")
                ),
            ));
        }
        if let Some(other) = owners.get(ip).filter(|o| **o != pod.key) {
            return Some(ctx.err(field, format!("{ip} is already Pod {other}'s address")));
        }
    }
    None
}

pub(super) fn pdb_spec(ctx: &Ctx, b: k8s::PodDisruptionBudget) -> Result<PdbSpec, StateError> {
    require_name(ctx, &b.metadata)?;
    let spec = b.spec.unwrap_or_default();
    let selector = spec
        .selector
        .as_ref()
        .map(Selector::parse)
        .transpose()
        .map_err(|e| ctx.policy(e))?;
    // The API server takes a budget with neither field (and the controller
    // applies it as asking for nothing); a file that names a budget and
    // asks for nothing is refused, as it most likely lost a line.
    if spec.min_available.is_none() && spec.max_unavailable.is_none() {
        return Err(ctx.err(
            "spec.minAvailable",
            "one of spec.minAvailable or spec.maxUnavailable is required",
        ));
    }
    let budget = Budget::of(&spec).map_err(|e| ctx.policy(e))?;
    let unhealthy_policy = UnhealthyPodEvictionPolicy::parse(&spec).map_err(|e| ctx.policy(e))?;
    Ok(PdbSpec {
        key: namespaced(&b.metadata),
        namespace: namespace_of(&b.metadata).to_string(),
        selector,
        budget,
        unhealthy_policy,
    })
}
