//! Service: `ValidateService` and `ValidateServiceUpdate`, with the
//! registry steps upstream runs before them on an update (allocated
//! values kept, type-dependent fields dropped), so the same manifest
//! applied twice passes.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::field::{BadValue, Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::{ip, names};

const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const KUBELET_PORT: i32 = 10250;
const TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
const TOPOLOGY_HINTS: &str = "service.kubernetes.io/topology-aware-hints";
const SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
const ONLY_LB: &str = "may only be used when `type` is 'LoadBalancer'";

fn ty(s: &ServiceSpec) -> &str {
    s.type_.as_deref().unwrap_or_default()
}

fn cluster_ips(s: &ServiceSpec) -> &[String] {
    s.cluster_ips.as_deref().unwrap_or_default()
}

fn headless(s: &ServiceSpec) -> bool {
    cluster_ips(s).first().is_some_and(|ip| ip == "None") || s.cluster_ip.as_deref() == Some("None")
}

/// `IntOrString` as upstream's JSON prints it.
pub fn int_or_string(v: &IntOrString) -> BadValue {
    match v {
        IntOrString::Int(i) => BadValue::Int((*i).into()),
        IntOrString::String(s) => BadValue::json(s),
    }
}

/// `ValidatePortNumOrName`.
pub fn port_num_or_name(errs: &mut ErrorList, path: &Path, v: &IntOrString) {
    match v {
        IntOrString::Int(i) => {
            for m in names::port_number((*i).into()) {
                errs.push(Error::invalid(path, *i, m));
            }
        }
        IntOrString::String(s) => invalid_each(errs, path, s, names::port_name(s)),
    }
}

/// The key upstream's duplicate check prints: its internal port struct
/// with only protocol and port (or node port) set, marshalled with Go's
/// field names.
fn port_key(protocol: &str, port: i32, node_port: i32) -> BadValue {
    BadValue::Json(format!(
        "{{\"Name\":\"\",\"Protocol\":{},\"AppProtocol\":null,\"Port\":{port},\"TargetPort\":0,\"NodePort\":{node_port}}}",
        json!(protocol)
    ))
}

pub fn validate_create(svc: &Service) -> ErrorList {
    let mut errs = meta::object_meta(&svc.metadata, true, names::dns1035_label);
    let empty = ServiceSpec::default();
    let s = svc.spec.as_ref().unwrap_or(&empty);
    let spec = Path::new("spec");
    let ann = svc.metadata.annotations.clone().unwrap_or_default();
    if let (Some(mode), Some(hints)) = (ann.get(TOPOLOGY_MODE), ann.get(TOPOLOGY_HINTS)) {
        if mode != hints {
            errs.push(Error::invalid(
                &Path::new("metadata")
                    .child("annotations")
                    .key(TOPOLOGY_MODE),
                mode,
                format!("must match annotations[{TOPOLOGY_HINTS}] when both are specified"),
            ));
        }
    }
    let ports = s.ports.as_deref().unwrap_or_default();
    if ports.is_empty() && !headless(s) && ty(s) != "ExternalName" {
        errs.push(Error::required(&spec.child("ports"), ""));
    }
    match ty(s) {
        "LoadBalancer" | "NodePort" if headless(s) => errs.push(Error::invalid(
            &spec.child("clusterIPs").index(0),
            "None",
            format!("may not be set to 'None' for {} services", ty(s)),
        )),
        "ExternalName" => external_name(&mut errs, s, &spec),
        _ => {}
    }
    if ty(s) == "LoadBalancer" {
        for (i, p) in ports.iter().enumerate() {
            if p.port == KUBELET_PORT {
                errs.push(Error::invalid(
                    &spec.child("ports").index(i),
                    p.port,
                    format!(
                        "may not expose port {KUBELET_PORT} externally since it is used by kubelet"
                    ),
                ));
            }
        }
    }
    let mut names_seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        port(
            &mut errs,
            p,
            ports.len() > 1,
            &mut names_seen,
            &spec.child("ports").index(i),
        );
    }
    errs.extend(meta::labels(s.selector.as_ref(), &spec.child("selector")));
    session_affinity(&mut errs, s, &spec);
    errs.extend(cluster_ips_related(s));
    for (i, v) in s.external_ips.iter().flatten().enumerate() {
        let p = spec.child("externalIPs").index(i);
        let e = ip::valid_ip(&p, v);
        errs.extend(if e.is_empty() {
            ip::non_special(&p, v)
        } else {
            e
        });
    }
    match ty(s) {
        "" => errs.push(Error::required(&spec.child("type"), "")),
        t if !TYPES.contains(&t) => errs.push(Error::not_supported(&spec.child("type"), t, &TYPES)),
        _ => {}
    }
    duplicate_ports(&mut errs, s, ports, &spec);
    source_ranges(&mut errs, s, &ann, &spec);
    if s.allocate_load_balancer_node_ports.is_some() && ty(s) != "LoadBalancer" {
        errs.push(Error::forbidden(
            &spec.child("allocateLoadBalancerNodePorts"),
            ONLY_LB,
        ));
    }
    if ty(s) == "LoadBalancer" && s.allocate_load_balancer_node_ports.is_none() {
        // Upstream's path has no `spec.`.
        errs.push(Error::required(
            &Path::new("allocateLoadBalancerNodePorts"),
            "",
        ));
    }
    if let Some(class) = &s.load_balancer_class {
        if ty(s) != "LoadBalancer" {
            errs.push(Error::forbidden(&spec.child("loadBalancerClass"), ONLY_LB));
        } else {
            invalid_each(
                &mut errs,
                &spec.child("loadBalancerClass"),
                class,
                names::qualified_name(class),
            );
        }
    }
    traffic_policies(&mut errs, s, &spec);
    errs
}

fn external_name(errs: &mut ErrorList, s: &ServiceSpec, spec: &Path) {
    const NOT_EXTERNAL: &str = "may not be set for ExternalName services";
    if !cluster_ips(s).is_empty() {
        errs.push(Error::forbidden(&spec.child("clusterIPs"), NOT_EXTERNAL));
    }
    if s.ip_families.as_ref().is_some_and(|f| !f.is_empty()) {
        errs.push(Error::forbidden(&spec.child("ipFamilies"), NOT_EXTERNAL));
    }
    if s.ip_family_policy.is_some() {
        errs.push(Error::forbidden(
            &spec.child("ipFamilyPolicy"),
            NOT_EXTERNAL,
        ));
    }
    let name = s.external_name.as_deref().unwrap_or_default();
    let cname = name.strip_suffix('.').unwrap_or(name);
    if cname.is_empty() {
        errs.push(Error::required(&spec.child("externalName"), ""));
    } else {
        invalid_each(
            errs,
            &spec.child("externalName"),
            cname,
            names::dns1123_subdomain(cname),
        );
    }
}

fn port(
    errs: &mut ErrorList,
    p: &ServicePort,
    need_name: bool,
    seen: &mut BTreeSet<String>,
    path: &Path,
) {
    let name = p.name.as_deref().unwrap_or_default();
    if need_name && name.is_empty() {
        errs.push(Error::required(&path.child("name"), ""));
    } else if !name.is_empty() {
        invalid_each(errs, &path.child("name"), name, names::dns1123_label(name));
        if !seen.insert(name.to_string()) {
            errs.push(Error::duplicate(&path.child("name"), name));
        }
    }
    for m in names::port_number(p.port.into()) {
        errs.push(Error::invalid(&path.child("port"), p.port, m));
    }
    match p.protocol.as_deref().unwrap_or_default() {
        "" => errs.push(Error::required(&path.child("protocol"), "")),
        pr if !PROTOCOLS.contains(&pr) => {
            errs.push(Error::not_supported(
                &path.child("protocol"),
                pr,
                &PROTOCOLS,
            ));
        }
        _ => {}
    }
    let target = p.target_port.clone().unwrap_or(IntOrString::Int(0));
    port_num_or_name(errs, &path.child("targetPort"), &target);
    if let Some(app) = &p.app_protocol {
        invalid_each(
            errs,
            &path.child("appProtocol"),
            app,
            names::qualified_name(app),
        );
    }
}

fn session_affinity(errs: &mut ErrorList, s: &ServiceSpec, spec: &Path) {
    let path = spec.child("sessionAffinityConfig");
    match s.session_affinity.as_deref().unwrap_or_default() {
        "" => errs.push(Error::required(&spec.child("sessionAffinity"), "")),
        "ClientIP" => {
            const WHEN: &str = "when session affinity type is ClientIP";
            let Some(cfg) = &s.session_affinity_config else {
                errs.push(Error::required(&path, WHEN));
                return;
            };
            let Some(client) = &cfg.client_ip else {
                errs.push(Error::required(&path.child("clientIP"), WHEN));
                return;
            };
            let t = path.child("clientIP").child("timeoutSeconds");
            match client.timeout_seconds {
                None => errs.push(Error::required(&t, WHEN)),
                Some(v) if v <= 0 || v > 86400 => errs.push(Error::invalid(
                    &t,
                    v,
                    "must be greater than 0 and less than 86400",
                )),
                Some(_) => {}
            }
        }
        "None" => {
            if s.session_affinity_config.is_some() {
                errs.push(Error::forbidden(
                    &path,
                    "must not be set when session affinity is None",
                ));
            }
        }
        a => errs.push(Error::not_supported(
            &spec.child("sessionAffinity"),
            a,
            &["ClientIP", "None"],
        )),
    }
}

/// `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ips_related(s: &ServiceSpec) -> ErrorList {
    let mut errs = ErrorList::new();
    if ty(s) == "ExternalName" {
        return errs;
    }
    let spec = Path::new("spec");
    let ips_path = spec.child("clusterIPs");
    let ips = cluster_ips(s);
    let ips_json = || BadValue::json(&ips);
    let primary = s.cluster_ip.as_deref().unwrap_or_default();
    if !primary.is_empty() {
        match ips.first() {
            None => errs.push(Error::required(&ips_path, "")),
            Some(first) if first != primary => {
                errs.push(Error::invalid(
                    &ips_path,
                    ips_json(),
                    "first value must match `clusterIP`",
                ));
            }
            Some(_) => {}
        }
    } else if !ips.is_empty() {
        errs.push(Error::invalid(
            &ips_path,
            ips_json(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = s.ip_families.as_deref().unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (i, f) in families.iter().enumerate() {
        let p = spec.child("ipFamilies").index(i);
        if f != "IPv4" && f != "IPv6" {
            errs.push(Error::not_supported(&p, f, &["IPv4", "IPv6"]));
        }
        if !seen.insert(f) {
            errs.push(Error::duplicate(&p, f));
        }
    }
    if let Some(pol) = &s.ip_family_policy {
        const POLICIES: [&str; 3] = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !POLICIES.contains(&pol.as_str()) {
            errs.push(Error::not_supported(
                &spec.child("ipFamilyPolicy"),
                pol,
                &POLICIES,
            ));
        }
    }
    let mut bad_ip = false;
    for (i, v) in ips.iter().enumerate() {
        if i == 0 && v == "None" {
            if ips.len() > 1 {
                errs.push(Error::invalid(
                    &ips_path,
                    ips_json(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let e = ip::valid_ip(&ips_path.index(i), v);
        bad_ip |= !e.is_empty();
        errs.extend(e);
    }
    if ips.len() > 2 {
        errs.push(Error::invalid(
            &ips_path,
            ips_json(),
            "may only hold up to 2 values",
        ));
    }
    if bad_ip {
        return errs;
    }
    if ips.len() > 1 {
        // Upstream's dual-stack test: both families present.
        let v6 = ips.iter().filter(|v| ip::is_v6(v)).count();
        if v6 == 0 || v6 == ips.len() {
            errs.push(Error::invalid(
                &ips_path,
                ips_json(),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !headless(s) {
        for (i, (v, f)) in ips.iter().zip(families).enumerate() {
            let want = match (f.as_str(), ip::is_v6(v)) {
                ("IPv4", true) => "IPv4",
                ("IPv6", false) => "IPv6",
                _ => continue,
            };
            errs.push(Error::invalid(
                &ips_path.index(i),
                v,
                format!("expected an {want} value as indicated by `ipFamilies[{i}]`"),
            ));
        }
    }
    errs
}

fn duplicate_ports(errs: &mut ErrorList, s: &ServiceSpec, ports: &[ServicePort], spec: &Path) {
    let path = spec.child("ports");
    if ty(s) == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if p.node_port.unwrap_or(0) != 0 {
                errs.push(Error::forbidden(
                    &path.index(i).child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let proto = |p: &ServicePort| p.protocol.clone().unwrap_or_default();
    let mut node_ports = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let np = p.node_port.unwrap_or(0);
        if np != 0 && !node_ports.insert((proto(p), np)) {
            errs.push(Error::duplicate(&path.index(i).child("nodePort"), np));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        if !seen.insert((proto(p), p.port)) {
            errs.push(Error::duplicate(
                &path.index(i),
                port_key(&proto(p), p.port, 0),
            ));
        }
    }
}

fn source_ranges(
    errs: &mut ErrorList,
    s: &ServiceSpec,
    ann: &std::collections::BTreeMap<String, String>,
    spec: &Path,
) {
    let ranges = s.load_balancer_source_ranges.as_deref().unwrap_or_default();
    let lb = ty(s) == "LoadBalancer";
    if !ranges.is_empty() {
        // Upstream's path spells the field with a capital L.
        let path = spec.child("LoadBalancerSourceRanges");
        if !lb {
            errs.push(Error::forbidden(&path, ONLY_LB));
        }
        for (i, r) in ranges.iter().enumerate() {
            errs.extend(ip::valid_cidr(&path.index(i), r.trim()));
        }
    } else if let Some(v) = ann.get(SOURCE_RANGES) {
        let path = Path::new("metadata")
            .child("annotations")
            .key(SOURCE_RANGES);
        if !lb {
            errs.push(Error::forbidden(&path, ONLY_LB));
        }
        let v = v.trim();
        if !v.is_empty() {
            for r in v.split(',') {
                if !ip::valid_cidr(&path, r.trim()).is_empty() {
                    errs.push(Error::invalid(
                        &path,
                        v,
                        "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 ",
                    ));
                    break;
                }
            }
        }
    }
}

fn traffic_policies(errs: &mut ErrorList, s: &ServiceSpec, spec: &Path) {
    let external = externally_accessible(s);
    let etp = s.external_traffic_policy.as_deref().unwrap_or_default();
    let etp_path = spec.child("externalTrafficPolicy");
    if !external {
        if !etp.is_empty() {
            errs.push(Error::invalid(
                &etp_path,
                etp,
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        errs.push(Error::required(&etp_path, ""));
    } else if etp != "Cluster" && etp != "Local" {
        errs.push(Error::not_supported(&etp_path, etp, &["Cluster", "Local"]));
    }
    let hc = s.health_check_node_port.unwrap_or(0);
    let hc_path = spec.child("healthCheckNodePort");
    let needs_hc = ty(s) == "LoadBalancer" && etp == "Local";
    if !needs_hc && hc != 0 {
        errs.push(Error::invalid(
            &hc_path,
            hc,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    } else if needs_hc && hc != 0 {
        // 0 is what the allocator fills in after validation here.
        for m in names::port_number(hc.into()) {
            errs.push(Error::invalid(&hc_path, hc, m));
        }
    }
    let itp_path = spec.child("internalTrafficPolicy");
    match s.internal_traffic_policy.as_deref() {
        None if matches!(ty(s), "ClusterIP" | "NodePort" | "LoadBalancer") => {
            errs.push(Error::required(&itp_path, ""));
        }
        Some(p) if p != "Cluster" && p != "Local" => {
            errs.push(Error::not_supported(&itp_path, p, &["Cluster", "Local"]));
        }
        _ => {}
    }
    if let Some(td) = &s.traffic_distribution {
        const TD: [&str; 3] = ["PreferClose", "PreferSameNode", "PreferSameZone"];
        if !TD.contains(&td.as_str()) {
            errs.push(Error::not_supported(
                &spec.child("trafficDistribution"),
                td,
                &TD,
            ));
        }
    }
}

/// The registry's steps before an update is validated: values the client
/// left out kept from the stored Service (`patchAllocatedValues`), and a
/// change to ExternalName dropping the IP fields it carried unchanged
/// (`dropTypeDependentFields`); then `clusterIPs` follows `clusterIP`.
pub fn prepare_update(new: &mut Service, old: &Service) {
    let (Some(n), Some(o)) = (new.spec.as_mut(), old.spec.as_ref()) else {
        return;
    };
    if ty(n) != "ExternalName" && ty(o) != "ExternalName" {
        if n.cluster_ip.as_deref().unwrap_or_default().is_empty() {
            n.cluster_ip.clone_from(&o.cluster_ip);
            if n.cluster_ips.as_ref().is_none_or(Vec::is_empty) {
                n.cluster_ips.clone_from(&o.cluster_ips);
            }
        }
        if n.ip_families.as_ref().is_none_or(Vec::is_empty) {
            n.ip_families.clone_from(&o.ip_families);
        }
        if n.ip_family_policy.is_none() {
            n.ip_family_policy.clone_from(&o.ip_family_policy);
        }
    }
    drop_left_behind(n, o);
    if ty(n) == "ExternalName" && ty(o) != "ExternalName" {
        if n.cluster_ip == o.cluster_ip {
            n.cluster_ip = None;
        }
        if n.cluster_ips == o.cluster_ips {
            n.cluster_ips = None;
        }
        if n.ip_families == o.ip_families {
            n.ip_families = None;
        }
        if n.ip_family_policy == o.ip_family_policy {
            n.ip_family_policy = None;
        }
    }
    prepare_create(new);
}

fn needs_node_ports(s: &ServiceSpec) -> bool {
    ty(s) == "NodePort"
        || (ty(s) == "LoadBalancer" && s.allocate_load_balancer_node_ports != Some(false))
}

fn externally_accessible(s: &ServiceSpec) -> bool {
    matches!(ty(s), "NodePort" | "LoadBalancer")
        || s.external_ips.as_ref().is_some_and(|e| !e.is_empty())
}

/// `dropTypeDependentFields`: what a type change leaves behind, dropped
/// when the client did not change it.
fn drop_left_behind(n: &mut ServiceSpec, o: &ServiceSpec) {
    if needs_node_ports(o) && !needs_node_ports(n) {
        let old: BTreeSet<i32> = o
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.node_port)
            .collect();
        let ports = n.ports.iter().flatten();
        let net_new = ports
            .filter_map(|p| p.node_port)
            .any(|np| np != 0 && !old.contains(&np));
        if !net_new {
            for p in n.ports.iter_mut().flatten() {
                p.node_port = None;
            }
        }
    }
    let lb_local = |s: &ServiceSpec| {
        ty(s) == "LoadBalancer" && s.external_traffic_policy.as_deref() == Some("Local")
    };
    if lb_local(o) && !lb_local(n) && n.health_check_node_port == o.health_check_node_port {
        n.health_check_node_port = None;
    }
    if ty(o) == "LoadBalancer" && ty(n) != "LoadBalancer" {
        if n.allocate_load_balancer_node_ports == o.allocate_load_balancer_node_ports {
            n.allocate_load_balancer_node_ports = None;
        }
        if n.load_balancer_class == o.load_balancer_class {
            n.load_balancer_class = None;
        }
    }
    if externally_accessible(o)
        && !externally_accessible(n)
        && n.external_traffic_policy == o.external_traffic_policy
    {
        n.external_traffic_policy = None;
    }
}

/// `clusterIPs` from `clusterIP` when only the latter is given, as the
/// strategy syncs them before validating.
pub fn prepare_create(svc: &mut Service) {
    if let Some(s) = svc.spec.as_mut() {
        let ip = s.cluster_ip.clone().unwrap_or_default();
        if !ip.is_empty() && s.cluster_ips.as_ref().is_none_or(Vec::is_empty) {
            s.cluster_ips = Some(vec![ip]);
        }
    }
}

pub fn validate_update(new: &Service, old: &Service) -> ErrorList {
    let mut errs = meta::object_meta_update(&new.metadata, &old.metadata);
    let empty = ServiceSpec::default();
    let n = new.spec.as_ref().unwrap_or(&empty);
    let o = old.spec.as_ref().unwrap_or(&empty);
    let spec = Path::new("spec");
    let transitions_checked =
        ty(n) != "ExternalName" && ty(o) != "ExternalName" && !(headless(n) && headless(o));
    if transitions_checked {
        cluster_ips_update(&mut errs, n, o, &spec);
    }
    if ty(n) == "LoadBalancer"
        && ty(o) == "LoadBalancer"
        && n.load_balancer_class != o.load_balancer_class
    {
        errs.push(Error::invalid(
            &spec.child("loadBalancerClass"),
            BadValue::json(&n.load_balancer_class),
            "may not change once set",
        ));
    }
    let needs_hc = |s: &ServiceSpec| {
        ty(s) == "LoadBalancer" && s.external_traffic_policy.as_deref() == Some("Local")
    };
    if needs_hc(n)
        && needs_hc(o)
        && n.health_check_node_port.unwrap_or(0) != 0
        && n.health_check_node_port != o.health_check_node_port
    {
        errs.push(Error::forbidden(
            &spec.child("healthCheckNodePort"),
            names::IMMUTABLE,
        ));
    }
    errs.extend(validate_create(new));
    errs
}

fn cluster_ips_update(errs: &mut ErrorList, n: &ServiceSpec, o: &ServiceSpec, spec: &Path) {
    let path = spec.child("clusterIPs");
    let (ni, oi) = (cluster_ips(n), cluster_ips(o));
    let list = || BadValue::json(&ni);
    const ONCE: &str = "may not change once set";
    if oi.is_empty() {
        return;
    }
    if ni.len() == oi.len() {
        for (i, (a, b)) in ni.iter().zip(oi).enumerate() {
            if a != b {
                errs.push(Error::invalid(&path.index(i), list(), ONCE));
            }
        }
    } else if ni.is_empty() {
        errs.push(Error::invalid(
            &path.index(0),
            list(),
            "primary clusterIP can not be unset",
        ));
    } else if ni[0] != oi[0] {
        errs.push(Error::invalid(&path.index(0), list(), ONCE));
    } else if ni.len() < oi.len() && n.ip_family_policy.as_deref() != Some("SingleStack") {
        errs.push(Error::invalid(
            &spec.child("ipFamilyPolicy"),
            BadValue::json(&n.ip_family_policy),
            "must be set to 'SingleStack' when releasing the secondary clusterIP",
        ));
    }
    let (nf, of) = (
        n.ip_families.as_deref().unwrap_or_default(),
        o.ip_families.as_deref().unwrap_or_default(),
    );
    if !of.is_empty() && !headless(n) {
        let fpath = spec.child("ipFamilies");
        if nf.is_empty() && ni.is_empty() {
            errs.push(Error::invalid(
                &fpath.index(0),
                BadValue::json(&nf),
                "primary ipFamily can not be unset",
            ));
        } else if nf.iter().zip(of).any(|(a, b)| a != b) {
            errs.push(Error::invalid(&fpath.index(0), BadValue::json(&nf), ONCE));
        } else if nf.len() < of.len() && n.ip_family_policy.as_deref() != Some("SingleStack") {
            errs.push(Error::invalid(
                &spec.child("ipFamilyPolicy"),
                BadValue::json(&n.ip_family_policy),
                "must be set to 'SingleStack' when releasing the secondary ipFamily",
            ));
        }
    }
}
