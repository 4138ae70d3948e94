//! From manifest text to a [`DesiredState`], rejecting the whole file at the
//! first invalid field so a half-understood file never reaches the datapath.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use serde::Deserialize;

use super::limits::{check_nesting, check_size, MAX_NESTING};
use super::manifests::{self, IntOrString};
use super::model::*;
use super::typed::{decode, TypeError};
use crate::health::DEFAULT_NODE_HEALTH_PORT;
use crate::pods::disruption::{
    Budget, IntOrPercent, LabelSelector, PdbSpec, SelectorOp, UnhealthyPodEvictionPolicy,
};
use crate::pods::{EvictionReason, PoolKind};

/// Annotation naming an existing network namespace for a pod run elsewhere.
pub const NETNS_ANNOTATION: &str = "sluice.dev/netns";
/// Annotation on a Node asking its agent to drain it, naming the reason
/// (which sets the grace-period cap and PDB handling): `NodeUpgrade`,
/// `ScaleDown`, `BluePoolDeletion`, `AutoscaledBlueGreen` or `UserDrain`.
pub const DRAIN_ANNOTATION: &str = "sluice.dev/drain";
/// Annotation on a Pod asking the agent of its node to evict it once, with
/// the same reason names (and grace caps, PDB handling) as a drain.
pub use crate::pods::spec::EVICT_ANNOTATION;
/// Node label naming its pool's kind: `standard` (default) or `autopilot`.
pub const POOL_KIND_LABEL: &str = "sluice.dev/pool-kind";
/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds`.
pub const DEFAULT_AFFINITY_TIMEOUT_S: u32 = 10_800;
/// Kubernetes' upper bound for the same field.
pub const MAX_AFFINITY_TIMEOUT_S: i64 = 86_400;

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

struct Ctx {
    doc: usize,
    object: String,
}

impl Ctx {
    /// A type error inside this object: its path is the field.
    fn typed(&self, e: TypeError) -> StateError {
        self.err(e.field, e.message)
    }

    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> StateError {
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

/// Parse and validate a multi-document YAML file of manifests.
///
/// Bounded before the parser runs (size, nesting: see `limits.rs`), and
/// an empty file is refused: a file caught between truncate and write must
/// never read as "this node runs nothing".
pub fn parse_state(text: &str) -> Result<DesiredState, StateError> {
    check_size(text.len() as u64).map_err(|e| file_err(e.to_string()))?;
    check_nesting(text, MAX_NESTING).map_err(|e| file_err(e.to_string()))?;
    let mut state = DesiredState::default();
    let mut slices: Vec<(Ctx, manifests::EndpointSlice)> = Vec::new();
    // Where each Pod came from and whether it uses the node's addresses,
    // for the address checks once every Node is known.
    let mut pod_docs: Vec<(Ctx, String, bool)> = Vec::new();
    // healthCheckNodePort → the Service that has it.
    let mut hc_ports: BTreeMap<u16, String> = BTreeMap::new();
    // (VIP, port, protocol) → the Service that has it.
    let mut frontends: BTreeMap<(IpAddr, u16, Protocol), String> = BTreeMap::new();
    let mut objects = 0usize;

    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let doc_no = i + 1;
        let value = serde_yaml::Value::deserialize(doc).map_err(|e| StateError {
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
        match kind.as_str() {
            "Node" => {
                let n: manifests::Node = decode(value).map_err(|e| ctx.typed(e))?;
                let node = node_info(&ctx, n)?;
                if state.nodes.insert(node.name.clone(), node).is_some() {
                    return Err(ctx.err("metadata.name", "duplicate Node"));
                }
            }
            "Pod" => {
                let run = crate::pods::run_spec_from_manifest(&value);
                let p: manifests::Pod = decode(value).map_err(|e| ctx.typed(e))?;
                let run = run.map_err(|e| ctx.err(e.field.clone(), e.message.clone()))?;
                let host_network = p.spec.host_network;
                let pod = pod_info(&ctx, p, run)?;
                let key = pod.key.clone();
                if state.pods.contains_key(&key) {
                    return Err(ctx.err("metadata.name", "duplicate Pod"));
                }
                state.pods.insert(key.clone(), pod);
                pod_docs.push((ctx, key, host_network));
            }
            "Service" => {
                let s: manifests::Service = decode(value).map_err(|e| ctx.typed(e))?;
                let svc = service_info(&ctx, s)?;
                // Duplicates first: a second copy of a Service is a
                // duplicate, not a clash with itself.
                if state.services.contains_key(&svc.key) {
                    return Err(ctx.err("metadata.name", "duplicate Service"));
                }
                if let Some(p) = svc.health_check_node_port {
                    let field = "spec.healthCheckNodePort";
                    if p == DEFAULT_NODE_HEALTH_PORT {
                        return Err(ctx.err(
                            field,
                            format!("port {p} is the node's own health port"),
                        ));
                    }
                    if let Some(other) = hc_ports.get(&p) {
                        return Err(ctx.err(
                            field,
                            format!("port {p} already used by Service {other}"),
                        ));
                    }
                    hc_ports.insert(p, svc.key.clone());
                }
                claim_frontends(&ctx, &svc, &mut frontends)?;
                state.services.insert(svc.key.clone(), svc);
            }
            "EndpointSlice" => {
                let s: manifests::EndpointSlice = decode(value).map_err(|e| ctx.typed(e))?;
                slices.push((ctx, s));
            }
            "PodDisruptionBudget" => {
                if api_version != "policy/v1" {
                    return Err(ctx.err(
                        "apiVersion",
                        format!("{api_version:?} is not policy/v1"),
                    ));
                }
                let b: manifests::PodDisruptionBudget =
                    decode(value).map_err(|e| ctx.typed(e))?;
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
    for (ctx, slice) in slices {
        attach_slice(&ctx, slice, &mut state, &mut seen_slices)?;
    }
    for svc in state.services.values_mut() {
        // Deterministic order: every node builds the same Maglev table.
        svc.endpoints.sort_by_key(|e| e.addr);
        // Held for as long as the state runs: no growth slack.
        svc.endpoints.shrink_to_fit();
    }
    Ok(state)
}

/// One VIP, port and protocol belongs to one Service: with two, the
/// datapath would forward to one while the other's health check answered
/// for it.
fn claim_frontends(
    ctx: &Ctx,
    svc: &ServiceInfo,
    frontends: &mut BTreeMap<(IpAddr, u16, Protocol), String>,
) -> Result<(), StateError> {
    for vip in &svc.vips {
        for (i, p) in svc.ports.iter().enumerate() {
            let key = (*vip, p.port, p.protocol);
            if let Some(other) = frontends.get(&key) {
                return Err(ctx.err(
                    format!("spec.ports[{i}]"),
                    format!(
                        "{} port {} {} is already Service {other}'s",
                        vip,
                        p.port,
                        p.protocol.as_str()
                    ),
                ));
            }
            frontends.insert(key, svc.key.clone());
        }
    }
    Ok(())
}

fn namespaced(m: &manifests::ObjectMeta) -> String {
    format!("{}/{}", m.namespace.as_deref().unwrap_or("default"), m.name)
}

fn require_name(ctx: &Ctx, m: &manifests::ObjectMeta) -> Result<(), StateError> {
    if m.name.is_empty() {
        return Err(ctx.err("metadata.name", "missing"));
    }
    Ok(())
}

fn parse_ip(ctx: &Ctx, field: &str, s: &str) -> Result<IpAddr, StateError> {
    s.trim()
        .parse()
        .map_err(|_| ctx.err(field, format!("{s:?} is not an IP address")))
}

fn node_info(ctx: &Ctx, n: manifests::Node) -> Result<NodeInfo, StateError> {
    require_name(ctx, &n.metadata)?;
    let mut addrs: Vec<IpAddr> = Vec::new();
    for (i, a) in n.status.addresses.iter().enumerate() {
        if a.kind != "InternalIP" {
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
    for (i, c) in n.spec.pod_cidrs.iter().enumerate() {
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
    for (i, t) in n.spec.taints.iter().enumerate() {
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
        taints.push(t.key.clone());
    }
    let drain = reason_annotation(ctx, &n.metadata, DRAIN_ANNOTATION)?;
    let pool = match n.metadata.labels.get(POOL_KIND_LABEL) {
        None => PoolKind::Standard,
        Some(v) => PoolKind::from_label(v).ok_or_else(|| {
            ctx.err(
                format!("metadata.labels[{POOL_KIND_LABEL}]"),
                format!("{v:?} is not standard or autopilot"),
            )
        })?,
    };
    Ok(NodeInfo {
        name: n.metadata.name,
        drain,
        pool,
        addrs,
        pod_cidrs,
        taints,
        deleting: n.metadata.deletion_timestamp.is_some(),
        unschedulable: n.spec.unschedulable,
    })
}

fn pod_info(
    ctx: &Ctx,
    p: manifests::Pod,
    run: crate::pods::PodRunSpec,
) -> Result<PodInfo, StateError> {
    require_name(ctx, &p.metadata)?;
    let mut ips = Vec::new();
    for (i, ip) in p.status.pod_ips.iter().enumerate() {
        ips.push(parse_ip(ctx, &format!("status.podIPs[{i}].ip"), &ip.ip)?);
    }
    let netns = p.metadata.annotations.get(NETNS_ANNOTATION).cloned();
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
    for (i, c) in p.status.conditions.iter().enumerate() {
        if c.kind != "Ready" {
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
    Ok(PodInfo {
        key: namespaced(&p.metadata),
        node: p.spec.node_name,
        ips,
        netns,
        run,
        labels: p.metadata.labels,
        ready,
        deleting: p.metadata.deletion_timestamp.is_some(),
        evict,
    })
}

/// An annotation naming an eviction reason (`sluice.dev/drain`,
/// `sluice.dev/evict`).
fn reason_annotation(
    ctx: &Ctx,
    meta: &manifests::ObjectMeta,
    name: &str,
) -> Result<Option<EvictionReason>, StateError> {
    match meta.annotations.get(name) {
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
    let mut owners: BTreeMap<IpAddr, &str> = BTreeMap::new();
    for (ctx, key, host_network) in pods {
        let Some(pod) = state.pods.get(key) else {
            continue;
        };
        if *host_network {
            continue;
        }
        let cidrs = state
            .nodes
            .get(&pod.node)
            .map(|n| n.pod_cidrs.as_slice())
            .unwrap_or_default();
        for (i, ip) in pod.ips.iter().enumerate() {
            let field = format!("status.podIPs[{i}].ip");
            if !cidrs.is_empty() && !cidrs.iter().any(|c| c.contains(ip)) {
                let list: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
                return Err(ctx.err(
                    field,
                    format!(
                        "{ip} is outside Node {}'s spec.podCIDRs ({})",
                        pod.node,
                        list.join(", ")
                    ),
                ));
            }
            if let Some(other) = owners.insert(*ip, key) {
                if other != key.as_str() {
                    return Err(ctx.err(field, format!("{ip} is already Pod {other}'s address")));
                }
            }
        }
    }
    Ok(())
}

fn pdb_spec(ctx: &Ctx, b: manifests::PodDisruptionBudget) -> Result<PdbSpec, StateError> {
    require_name(ctx, &b.metadata)?;
    let selector = match b.spec.selector {
        None => None,
        Some(sel) => {
            let mut match_expressions = Vec::new();
            for (i, r) in sel.match_expressions.iter().enumerate() {
                let f = |x: &str| format!("spec.selector.matchExpressions[{i}].{x}");
                if r.key.is_empty() {
                    return Err(ctx.err(f("key"), "missing"));
                }
                let values = || r.values.iter().cloned().collect();
                let op = match r.operator.as_str() {
                    "In" | "NotIn" if r.values.is_empty() => {
                        return Err(ctx.err(f("values"), format!("required for {}", r.operator)))
                    }
                    "In" => SelectorOp::In(values()),
                    "NotIn" => SelectorOp::NotIn(values()),
                    "Exists" | "DoesNotExist" if !r.values.is_empty() => {
                        return Err(
                            ctx.err(f("values"), format!("must be empty for {}", r.operator))
                        )
                    }
                    "Exists" => SelectorOp::Exists,
                    "DoesNotExist" => SelectorOp::DoesNotExist,
                    o => {
                        return Err(ctx.err(
                            f("operator"),
                            format!("{o:?} is not In, NotIn, Exists or DoesNotExist"),
                        ))
                    }
                };
                match_expressions.push((r.key.clone(), op));
            }
            Some(LabelSelector {
                match_labels: sel.match_labels,
                match_expressions,
            })
        }
    };
    let budget = match (&b.spec.min_available, &b.spec.max_unavailable) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(
                "spec.minAvailable",
                "set together with spec.maxUnavailable; set one of them",
            ))
        }
        (None, None) => {
            return Err(ctx.err(
                "spec.minAvailable",
                "one of spec.minAvailable or spec.maxUnavailable is required",
            ))
        }
        (Some(v), None) => Budget::MinAvailable(int_or_percent(ctx, "spec.minAvailable", v)?),
        (None, Some(v)) => Budget::MaxUnavailable(int_or_percent(ctx, "spec.maxUnavailable", v)?),
    };
    let unhealthy_policy = match b.spec.unhealthy_pod_eviction_policy.as_deref() {
        None | Some("IfHealthyBudget") => UnhealthyPodEvictionPolicy::IfHealthyBudget,
        Some("AlwaysAllow") => UnhealthyPodEvictionPolicy::AlwaysAllow,
        Some(o) => {
            return Err(ctx.err(
                "spec.unhealthyPodEvictionPolicy",
                format!("{o:?} is not IfHealthyBudget or AlwaysAllow"),
            ))
        }
    };
    Ok(PdbSpec {
        key: namespaced(&b.metadata),
        namespace: b.metadata.namespace.unwrap_or_else(|| "default".into()),
        selector,
        budget,
        unhealthy_policy,
    })
}

/// A non-negative count or a whole percentage 0–100 (`"25%"`), as the API
/// server accepts for a PDB's `minAvailable` / `maxUnavailable`.
fn int_or_percent(ctx: &Ctx, field: &str, v: &IntOrString) -> Result<IntOrPercent, StateError> {
    match v {
        IntOrString::Int(n) => u32::try_from(*n)
            .map(IntOrPercent::Int)
            .map_err(|_| ctx.err(field, format!("must be >= 0, got {n}"))),
        IntOrString::String(s) => {
            let p = s
                .strip_suffix('%')
                .and_then(|d| d.parse::<u32>().ok())
                .filter(|_| !s.starts_with('+'))
                .ok_or_else(|| {
                    ctx.err(
                        field,
                        format!("{s:?} is neither a whole number nor a percentage like \"50%\""),
                    )
                })?;
            if p > 100 {
                return Err(ctx.err(field, format!("{s:?} is more than 100%")));
            }
            Ok(IntOrPercent::Percent(p))
        }
    }
}

fn protocol(ctx: &Ctx, field: &str, p: Option<&str>) -> Result<Protocol, StateError> {
    match p.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        other => Err(ctx.err(field, format!("{other} is not supported (TCP, UDP)"))),
    }
}

fn port_number(ctx: &Ctx, field: &str, p: i64) -> Result<u16, StateError> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| ctx.err(field, format!("must be 1-65535, got {p}")))
}

fn service_info(ctx: &Ctx, s: manifests::Service) -> Result<ServiceInfo, StateError> {
    require_name(ctx, &s.metadata)?;
    let policy = match s.spec.external_traffic_policy.as_deref() {
        None | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(o) => {
            return Err(ctx.err(
                "spec.externalTrafficPolicy",
                format!("{o} is not Cluster or Local"),
            ))
        }
    };
    let affinity_timeout_s = match s.spec.session_affinity.as_deref() {
        None | Some("None") => None,
        Some("ClientIP") => {
            let t = s
                .spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds);
            match t {
                None => Some(DEFAULT_AFFINITY_TIMEOUT_S),
                Some(t) if (1..=MAX_AFFINITY_TIMEOUT_S).contains(&t) => Some(t as u32),
                Some(t) => {
                    return Err(ctx.err(
                        "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                        format!("must be 1-{MAX_AFFINITY_TIMEOUT_S}, got {t}"),
                    ))
                }
            }
        }
        Some(o) => {
            return Err(ctx.err(
                "spec.sessionAffinity",
                format!("{o} is not None or ClientIP"),
            ))
        }
    };
    let health_check_node_port = match s.spec.health_check_node_port {
        None => None,
        Some(p) => Some(port_number(ctx, "spec.healthCheckNodePort", p)?),
    };
    let is_lb = s.spec.kind.as_deref() == Some("LoadBalancer");
    let mut vips = Vec::new();
    if is_lb {
        for (i, ing) in s.status.load_balancer.ingress.iter().enumerate() {
            if let Some(ip) = &ing.ip {
                let field = format!("status.loadBalancer.ingress[{i}].ip");
                let ip = parse_ip(ctx, &field, ip)?;
                if !vips.contains(&ip) {
                    vips.push(ip);
                }
            }
        }
    }
    let mut ports: Vec<ServicePortInfo> = Vec::new();
    for (i, p) in s.spec.ports.iter().enumerate() {
        let f = |x: &str| format!("spec.ports[{i}].{x}");
        let port = port_number(ctx, &f("port"), p.port)?;
        let proto = protocol(ctx, &f("protocol"), p.protocol.as_deref())?;
        let name = p.name.clone().unwrap_or_default();
        if name.is_empty() && s.spec.ports.len() > 1 {
            return Err(ctx.err(f("name"), "required when a Service has several ports"));
        }
        let target = match &p.target_port {
            None => TargetPort::Number(port),
            Some(IntOrString::Int(t)) => {
                TargetPort::Number(port_number(ctx, &f("targetPort"), *t)?)
            }
            Some(IntOrString::String(t)) => match t.parse::<i64>() {
                Ok(n) => TargetPort::Number(port_number(ctx, &f("targetPort"), n)?),
                Err(_) if !t.is_empty() => TargetPort::Name(t.clone()),
                Err(_) => return Err(ctx.err(f("targetPort"), "empty")),
            },
        };
        if ports.iter().any(|q| q.port == port && q.protocol == proto) {
            return Err(ctx.err(f("port"), format!("duplicate {port}/{}", proto.as_str())));
        }
        ports.push(ServicePortInfo {
            name,
            port,
            protocol: proto,
            target,
        });
    }
    Ok(ServiceInfo {
        key: namespaced(&s.metadata),
        policy,
        affinity_timeout_s,
        health_check_node_port,
        vips,
        ports,
        endpoints: Vec::new(),
    })
}

fn attach_slice(
    ctx: &Ctx,
    slice: manifests::EndpointSlice,
    state: &mut DesiredState,
    seen: &mut BTreeMap<String, ()>,
) -> Result<(), StateError> {
    require_name(ctx, &slice.metadata)?;
    if seen.insert(namespaced(&slice.metadata), ()).is_some() {
        return Err(ctx.err("metadata.name", "duplicate EndpointSlice"));
    }
    let family_v4 = match slice.address_type.as_str() {
        "IPv4" => true,
        "IPv6" => false,
        // FQDN slices carry no addresses a packet path can use.
        "FQDN" => return Ok(()),
        o => return Err(ctx.err("addressType", format!("{o:?} is not IPv4, IPv6 or FQDN"))),
    };
    let svc_name = slice
        .metadata
        .labels
        .get(SERVICE_NAME_LABEL)
        .ok_or_else(|| ctx.err(format!("metadata.labels[{SERVICE_NAME_LABEL}]"), "missing"))?;
    let ns = slice.metadata.namespace.as_deref().unwrap_or("default");
    let svc_key = format!("{ns}/{svc_name}");
    let mut ports = BTreeMap::new();
    for (i, p) in slice.ports.iter().enumerate() {
        let proto = protocol(ctx, &format!("ports[{i}].protocol"), p.protocol.as_deref())?;
        let Some(num) = p.port else {
            // Kubernetes: an unset port means "all ports"; nothing to translate to.
            continue;
        };
        let num = port_number(ctx, &format!("ports[{i}].port"), num)?;
        ports.insert((p.name.clone().unwrap_or_default(), proto), num);
    }
    let ports = Arc::new(ports);
    let mut node_names: Vec<Arc<str>> = Vec::new();
    let mut endpoints = Vec::new();
    for (i, ep) in slice.endpoints.iter().enumerate() {
        if ep.addresses.is_empty() {
            return Err(ctx.err(format!("endpoints[{i}].addresses"), "empty"));
        }
        // Kubernetes consumers use the first address only.
        let field = format!("endpoints[{i}].addresses[0]");
        let addr = parse_ip(ctx, &field, &ep.addresses[0])?;
        if addr.is_ipv4() != family_v4 {
            return Err(ctx.err(
                field,
                format!("{addr} is not of addressType {}", slice.address_type),
            ));
        }
        let ready = ep.conditions.ready.unwrap_or(true);
        let node = ep
            .node_name
            .as_deref()
            .map(|n| match node_names.iter().find(|x| &***x == n) {
                Some(x) => x.clone(),
                None => {
                    let x: Arc<str> = Arc::from(n);
                    node_names.push(x.clone());
                    x
                }
            });
        endpoints.push(EndpointInfo {
            addr,
            node,
            ready,
            serving: ep.conditions.serving.unwrap_or(ready),
            terminating: ep.conditions.terminating.unwrap_or(false),
            ports: ports.clone(),
        });
    }
    // A slice may arrive before its Service; kube-proxy keeps it and uses it
    // once the Service exists. Here the file is the whole truth, so a slice
    // without a Service simply has no effect.
    if let Some(svc) = state.services.get_mut(&svc_key) {
        for ep in endpoints {
            if let Some(old) = svc.endpoints.iter_mut().find(|e| e.addr == ep.addr) {
                // The same address in two slices (e.g. during a rollout):
                // merge ports, keep the most serving view.
                Arc::make_mut(&mut old.ports).extend(ep.ports.iter().map(|(k, v)| (k.clone(), *v)));
                old.ready |= ep.ready;
                old.serving |= ep.serving;
                old.terminating &= ep.terminating;
            } else {
                svc.endpoints.push(ep);
            }
        }
    }
    Ok(())
}
