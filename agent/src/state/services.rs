//! Services and their EndpointSlices: each Service's ports, policy and
//! VIPs checked, and each slice read as its document comes into the
//! endpoints it adds to its Service.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use sluice_model::k8s::{self, IntOrString};

use super::model::*;
use super::validate::{
    meta_entry, namespace_of, namespaced, parse_ip, require_name, Ctx, DEFAULT_AFFINITY_TIMEOUT_S,
    MAX_AFFINITY_TIMEOUT_S, SERVICE_NAME_LABEL,
};
use super::StateError;
use crate::health::DEFAULT_NODE_HEALTH_PORT;

/// A slice read when its document came, kept small until every Service is
/// known: a 10 000-slice file holds these, not 10 000 typed EndpointSlices.
pub(super) struct PendingSlice {
    pub(super) ctx: Ctx,
    /// `namespace/name`, or why the slice has none.
    pub(super) key: Result<String, StateError>,
    /// Its Service's key and endpoints (`None`: an FQDN slice), or the first
    /// fault in it. Reported in the same order as before the slices were
    /// read early: name, duplicate, then content.
    pub(super) read: Result<Option<(String, Vec<EndpointInfo>)>, StateError>,
}

pub(super) fn protocol(ctx: &Ctx, field: &str, p: Option<&str>) -> Result<Protocol, StateError> {
    match p.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        other => Err(ctx.err(field, format!("{other} is not supported (TCP, UDP)"))),
    }
}

pub(super) fn port_number(ctx: &Ctx, field: &str, p: i32) -> Result<u16, StateError> {
    port_number_wide(ctx, field, i64::from(p))
}

/// A port written as a string (`targetPort: "8080"`), which may hold any
/// number.
pub(super) fn port_number_wide(ctx: &Ctx, field: &str, p: i64) -> Result<u16, StateError> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| ctx.err(field, format!("must be 1-65535, got {p}")))
}

pub(super) fn service_info(ctx: &Ctx, s: k8s::Service) -> Result<ServiceInfo, StateError> {
    require_name(ctx, &s.metadata)?;
    let spec = s.spec.unwrap_or_default();
    let policy = match spec.external_traffic_policy.as_deref() {
        None | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(o) => {
            return Err(ctx.err(
                "spec.externalTrafficPolicy",
                format!("{o} is not Cluster or Local"),
            ))
        }
    };
    let affinity_timeout_s = match spec.session_affinity.as_deref() {
        None | Some("None") => None,
        Some("ClientIP") => {
            let t = spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds);
            match t {
                None => Some(DEFAULT_AFFINITY_TIMEOUT_S),
                Some(t) => Some(
                    u32::try_from(t)
                        .ok()
                        .filter(|t| (1..=MAX_AFFINITY_TIMEOUT_S).contains(t))
                        .ok_or_else(|| {
                            ctx.err(
                                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                                format!("must be 1-{MAX_AFFINITY_TIMEOUT_S}, got {t}"),
                            )
                        })?,
                ),
            }
        }
        Some(o) => {
            return Err(ctx.err(
                "spec.sessionAffinity",
                format!("{o} is not None or ClientIP"),
            ))
        }
    };
    let health_check_node_port = match spec.health_check_node_port {
        None => None,
        Some(p) => Some(port_number(ctx, "spec.healthCheckNodePort", p)?),
    };
    let is_lb = spec.type_.as_deref() == Some("LoadBalancer");
    let mut vips = Vec::new();
    if is_lb {
        let ingress = s
            .status
            .and_then(|st| st.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default();
        for (i, ing) in ingress.iter().enumerate() {
            if let Some(ip) = &ing.ip {
                let field = format!("status.loadBalancer.ingress[{i}].ip");
                let ip = parse_ip(ctx, &field, ip)?;
                if !vips.contains(&ip) {
                    vips.push(ip);
                }
            }
        }
    }
    let spec_ports = spec.ports.unwrap_or_default();
    let mut ports: Vec<ServicePortInfo> = Vec::new();
    for (i, p) in spec_ports.iter().enumerate() {
        let f = |x: &str| format!("spec.ports[{i}].{x}");
        let port = port_number(ctx, &f("port"), p.port)?;
        let proto = protocol(ctx, &f("protocol"), p.protocol.as_deref())?;
        let name = p.name.clone().unwrap_or_default();
        if name.is_empty() && spec_ports.len() > 1 {
            return Err(ctx.err(f("name"), "required when a Service has several ports"));
        }
        let target = match &p.target_port {
            None => TargetPort::Number(port),
            Some(IntOrString::Int(t)) => {
                TargetPort::Number(port_number(ctx, &f("targetPort"), *t)?)
            }
            Some(IntOrString::String(t)) => match t.parse::<i64>() {
                Ok(n) => TargetPort::Number(port_number_wide(ctx, &f("targetPort"), n)?),
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

/// Read a slice as its document comes: its name, then what it adds to its
/// Service. The typed slice is dropped here.
pub(super) fn read_slice(ctx: Ctx, slice: k8s::EndpointSlice) -> PendingSlice {
    let key = require_name(&ctx, &slice.metadata).map(|()| namespaced(&slice.metadata));
    let read = match &key {
        Ok(_) => slice_endpoints(&ctx, slice),
        // Reported through `key`; nothing more is read.
        Err(e) => Err(e.clone()),
    };
    PendingSlice { ctx, key, read }
}

pub(super) fn slice_endpoints(
    ctx: &Ctx,
    slice: k8s::EndpointSlice,
) -> Result<Option<(String, Vec<EndpointInfo>)>, StateError> {
    let family_v4 = match slice.address_type.as_str() {
        "IPv4" => true,
        "IPv6" => false,
        // FQDN slices carry no addresses a packet path can use.
        "FQDN" => return Ok(None),
        o => return Err(ctx.err("addressType", format!("{o:?} is not IPv4, IPv6 or FQDN"))),
    };
    let svc_name = meta_entry(&slice.metadata.labels, SERVICE_NAME_LABEL)
        .ok_or_else(|| ctx.err(format!("metadata.labels[{SERVICE_NAME_LABEL}]"), "missing"))?;
    let svc_key = format!("{}/{svc_name}", namespace_of(&slice.metadata));
    let mut ports = BTreeMap::new();
    for (i, p) in slice.ports.iter().flatten().enumerate() {
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
    for (i, ep) in slice.endpoints.iter().flatten().enumerate() {
        let Some(first) = ep.addresses.first() else {
            return Err(ctx.err(format!("endpoints[{i}].addresses"), "empty"));
        };
        // Kubernetes consumers use the first address only.
        let field = format!("endpoints[{i}].addresses[0]");
        let addr = parse_ip(ctx, &field, first)?;
        if addr.is_ipv4() != family_v4 {
            return Err(ctx.err(
                field,
                format!("{addr} is not of addressType {}", slice.address_type),
            ));
        }
        let conditions = ep.conditions.clone().unwrap_or_default();
        let ready = conditions.ready.unwrap_or(true);
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
            serving: conditions.serving.unwrap_or(ready),
            terminating: conditions.terminating.unwrap_or(false),
            ports: ports.clone(),
        });
    }
    Ok(Some((svc_key, endpoints)))
}

pub(super) fn attach_slice(
    slice: PendingSlice,
    state: &mut DesiredState,
    seen: &mut BTreeMap<String, ()>,
) -> Result<(), StateError> {
    let key = slice.key?;
    if seen.insert(key, ()).is_some() {
        return Err(slice.ctx.err("metadata.name", "duplicate EndpointSlice"));
    }
    let Some((svc_key, endpoints)) = slice.read? else {
        return Ok(());
    };
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

/// Every Service's endpoints in address order (every node builds the same
/// Maglev table), without growth slack (held as long as the state runs).
pub(super) fn finish_endpoints(state: &mut DesiredState) {
    for svc in state.services.values_mut() {
        svc.endpoints.sort_by_key(|e| e.addr);
        svc.endpoints.shrink_to_fit();
    }
}

/// What Services hold that no two may: a health-check node port (never the
/// node's own, 10256), and a VIP, port and protocol (with two, the datapath
/// would forward for one while the other's health check answered for it).
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// healthCheckNodePort → the Service that has it.
    hc_ports: BTreeMap<u16, String>,
    /// (VIP, port, protocol) → the Service that has it.
    frontends: BTreeMap<(IpAddr, u16, Protocol), String>,
}

impl Claims {
    /// The first thing `svc` claims that is taken.
    pub(super) fn fault(&self, ctx: &Ctx, svc: &ServiceInfo) -> Option<StateError> {
        if let Some(p) = svc.health_check_node_port {
            let field = "spec.healthCheckNodePort";
            if p == DEFAULT_NODE_HEALTH_PORT {
                return Some(ctx.err(field, format!("port {p} is the node's own health port")));
            }
            if let Some(other) = self.hc_ports.get(&p) {
                return Some(ctx.err(field, format!("port {p} already used by Service {other}")));
            }
        }
        for vip in &svc.vips {
            for (i, p) in svc.ports.iter().enumerate() {
                if let Some(other) = self.frontends.get(&(*vip, p.port, p.protocol)) {
                    return Some(ctx.err(
                        format!("spec.ports[{i}]"),
                        format!(
                            "{vip} port {} {} is already Service {other}'s",
                            p.port,
                            p.protocol.as_str()
                        ),
                    ));
                }
            }
        }
        None
    }

    /// Hold what `svc` claims (after [`Claims::fault`] found it free).
    pub(super) fn record(&mut self, svc: &ServiceInfo) {
        if let Some(p) = svc.health_check_node_port {
            self.hc_ports.insert(p, svc.key.clone());
        }
        for vip in &svc.vips {
            for p in &svc.ports {
                self.frontends
                    .insert((*vip, p.port, p.protocol), svc.key.clone());
            }
        }
    }
}
