//! One container of a pod (regular or init): `validateContainerCommon`,
//! its probes and lifecycle hooks, and the host-port conflicts across
//! containers.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, LifecycleHandler, Probe, ResourceRequirements,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::field::{Error, ErrorList, Path};
use super::meta::invalid_each;
use super::names;
use super::service::port_num_or_name;

const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// `validateContainerCommon`: what every kind of container shares.
pub fn common(c: &Container, volumes: &BTreeSet<String>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = path.child("name");
    if c.name.is_empty() {
        errs.push(Error::required(&name, ""));
    } else {
        invalid_each(&mut errs, &name, &c.name, names::dns1123_label(&c.name));
    }
    if c.image.as_deref().unwrap_or_default().is_empty() {
        errs.push(Error::required(&path.child("image"), ""));
    }
    let tmp = path.child("terminationMessagePolicy");
    match c.termination_message_policy.as_deref().unwrap_or_default() {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(Error::required(&tmp, "")),
        p => errs.push(Error::not_supported(
            &tmp,
            p,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    errs.extend(ports(
        c.ports.as_deref().unwrap_or_default(),
        &path.child("ports"),
    ));
    errs.extend(env(
        c.env.as_deref().unwrap_or_default(),
        &path.child("env"),
    ));
    errs.extend(env_from(
        c.env_from.as_deref().unwrap_or_default(),
        &path.child("envFrom"),
    ));
    errs.extend(volume_mounts(c, volumes, &path.child("volumeMounts")));
    let pull = path.child("imagePullPolicy");
    match c.image_pull_policy.as_deref().unwrap_or_default() {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(Error::required(&pull, "")),
        p => errs.push(Error::not_supported(
            &pull,
            p,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    if let Some(r) = &c.resources {
        errs.extend(resources(r, &path.child("resources")));
    }
    if let Some(sc) = &c.security_context {
        errs.extend(security_context(sc, &path.child("securityContext")));
    }
    errs
}

fn ports(list: &[ContainerPort], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut seen = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let at = path.index(i);
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                invalid_each(&mut errs, &at.child("name"), name, msgs);
            } else if !seen.insert(name) {
                errs.push(Error::duplicate(&at.child("name"), name));
            }
        }
        if p.container_port == 0 {
            errs.push(Error::required(&at.child("containerPort"), ""));
        } else {
            for m in names::port_number(p.container_port.into()) {
                errs.push(Error::invalid(
                    &at.child("containerPort"),
                    p.container_port,
                    m,
                ));
            }
        }
        if let Some(h) = p.host_port.filter(|h| *h != 0) {
            for m in names::port_number(h.into()) {
                errs.push(Error::invalid(&at.child("hostPort"), h, m));
            }
        }
        match p.protocol.as_deref().unwrap_or_default() {
            "" => errs.push(Error::required(&at.child("protocol"), "")),
            pr if !PROTOCOLS.contains(&pr) => {
                errs.push(Error::not_supported(&at.child("protocol"), pr, &PROTOCOLS));
            }
            _ => {}
        }
    }
    errs
}

/// `checkHostPortConflicts`: one `protocol/hostIP/hostPort` per group of
/// containers that run together.
pub fn host_port_conflicts(containers: &[Container], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut seen = BTreeSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, p) in c.ports.iter().flatten().enumerate() {
            let Some(h) = p.host_port.filter(|h| *h != 0) else {
                continue;
            };
            let key = format!(
                "{}/{}/{h}",
                p.protocol.as_deref().unwrap_or_default(),
                p.host_ip.as_deref().unwrap_or_default()
            );
            if !seen.insert(key.clone()) {
                let at = path.index(ci).child("ports").index(pi).child("hostPort");
                errs.push(Error::duplicate(&at, key.as_str()));
            }
        }
    }
    errs
}

const FIELD_REFS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn env(list: &[EnvVar], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, e) in list.iter().enumerate() {
        let at = path.index(i);
        if e.name.is_empty() {
            errs.push(Error::required(&at.child("name"), ""));
        } else {
            invalid_each(
                &mut errs,
                &at.child("name"),
                &e.name,
                names::env_var_name(&e.name),
            );
        }
        let Some(from) = &e.value_from else {
            continue;
        };
        let vf = at.child("valueFrom");
        let sources = [
            from.field_ref.is_some(),
            from.resource_field_ref.is_some(),
            from.config_map_key_ref.is_some(),
            from.secret_key_ref.is_some(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if let Some(f) = &from.field_ref {
            let p = vf.child("fieldRef");
            if f.api_version.as_deref().unwrap_or_default().is_empty() {
                errs.push(Error::required(&p.child("apiVersion"), ""));
            }
            if f.field_path.is_empty() {
                errs.push(Error::required(&p.child("fieldPath"), ""));
            } else if !FIELD_REFS.contains(&f.field_path.as_str())
                && !f.field_path.starts_with("metadata.labels[")
                && !f.field_path.starts_with("metadata.annotations[")
            {
                let mut allowed = FIELD_REFS.to_vec();
                allowed.sort_unstable();
                errs.push(Error::not_supported(
                    &p.child("fieldPath"),
                    f.field_path.as_str(),
                    &allowed,
                ));
            }
        }
        for (key, sel) in [
            (
                "configMapKeyRef",
                from.config_map_key_ref.as_ref().map(|s| (&s.name, &s.key)),
            ),
            (
                "secretKeyRef",
                from.secret_key_ref.as_ref().map(|s| (&s.name, &s.key)),
            ),
        ] {
            let Some((name, k)) = sel else {
                continue;
            };
            let p = vf.child(key);
            invalid_each(
                &mut errs,
                &p.child("name"),
                name,
                names::dns1123_subdomain(name),
            );
            if k.is_empty() {
                errs.push(Error::required(&p.child("key"), ""));
            } else {
                invalid_each(&mut errs, &p.child("key"), k, names::config_key(k));
            }
        }
        if sources == 0 {
            errs.push(Error::invalid(
                &vf,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        }
        if !e.value.as_deref().unwrap_or_default().is_empty() {
            if sources != 0 {
                errs.push(Error::invalid(
                    &vf,
                    "",
                    "may not be specified when `value` is not empty",
                ));
            }
        } else if sources > 1 {
            errs.push(Error::invalid(
                &vf,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

fn prefixed_subdomain(v: &str) -> Vec<String> {
    match v.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => names::dns1123_subdomain(&format!("{rest}a")),
        _ => names::dns1123_subdomain(v),
    }
}

fn env_from(list: &[EnvFromSource], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, e) in list.iter().enumerate() {
        let at = path.index(i);
        if let Some(p) = e.prefix.as_deref().filter(|p| !p.is_empty()) {
            invalid_each(&mut errs, &at.child("prefix"), p, names::env_var_name(p));
        }
        let refs = [
            ("configMapRef", e.config_map_ref.as_ref().map(|r| &r.name)),
            ("secretRef", e.secret_ref.as_ref().map(|r| &r.name)),
        ];
        let mut sources = 0;
        for (key, name) in refs {
            let Some(name) = name else {
                continue;
            };
            sources += 1;
            let p = at.child(key).child("name");
            if name.is_empty() {
                errs.push(Error::required(&p, ""));
            } else {
                invalid_each(&mut errs, &p, name, prefixed_subdomain(name));
            }
        }
        // Upstream reports these at the list, without the index.
        match sources {
            0 => errs.push(Error::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            )),
            1 => {}
            _ => errs.push(Error::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            )),
        }
    }
    errs
}

fn volume_mounts(c: &Container, volumes: &BTreeSet<String>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut paths = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let at = path.index(i);
        if m.name.is_empty() {
            errs.push(Error::required(&at.child("name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(Error::not_found(&at.child("name"), m.name.as_str()));
        }
        if m.mount_path.is_empty() {
            errs.push(Error::required(&at.child("mountPath"), ""));
        }
        if !paths.insert(m.mount_path.as_str()) {
            errs.push(Error::invalid(
                &at.child("mountPath"),
                m.mount_path.as_str(),
                "must be unique",
            ));
        }
        if let Some(p) = &m.mount_propagation {
            const MODES: [&str; 3] = ["Bidirectional", "HostToContainer", "None"];
            if !MODES.contains(&p.as_str()) {
                errs.push(Error::not_supported(
                    &at.child("mountPropagation"),
                    p,
                    &MODES,
                ));
            }
        }
    }
    errs
}

const STANDARD_CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

fn standard_container_resource(r: &str) -> bool {
    STANDARD_CONTAINER_RESOURCES.contains(&r) || r.starts_with("hugepages-")
}

/// A quantity's value (for comparisons and the sign), `None` when it does
/// not parse (decoding accepts any string).
pub fn quantity_value(q: &Quantity) -> Option<f64> {
    let s = q.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

fn resource_names(errs: &mut ErrorList, m: &BTreeMap<String, Quantity>, path: &Path) {
    for (r, q) in m {
        let at = path.key(r);
        let msgs = names::qualified_name(r);
        let named = msgs.is_empty();
        invalid_each(errs, &at, r, msgs);
        if !r.contains('/') {
            if named && !standard_resource(r) {
                errs.push(Error::invalid(
                    &at,
                    r,
                    "must be a standard resource type or fully qualified",
                ));
            }
            if !standard_container_resource(r) {
                errs.push(Error::invalid(
                    &at,
                    r,
                    "must be a standard resource for containers",
                ));
            }
        }
        if quantity_value(q).is_some_and(|v| v < 0.0) {
            errs.push(Error::invalid(&at, q.0.as_str(), names::NEGATIVE));
        }
    }
}

/// Upstream's standard resource names (containers' and quotas').
fn standard_resource(r: &str) -> bool {
    const STANDARD: [&str; 17] = [
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
    ];
    STANDARD.contains(&r) || r.starts_with("hugepages-") || r.starts_with("requests.hugepages-")
}

fn resources(r: &ResourceRequirements, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    resource_names(&mut errs, limits, &path.child("limits"));
    resource_names(&mut errs, requests, &path.child("requests"));
    for (res, q) in requests {
        let Some(l) = limits.get(res) else {
            continue;
        };
        if let (Some(qv), Some(lv)) = (quantity_value(q), quantity_value(l)) {
            if qv > lv {
                errs.push(Error::invalid(
                    &path.child("requests"),
                    q.0.as_str(),
                    format!("must be less than or equal to {res} limit of {}", l.0),
                ));
            }
        }
    }
    errs
}

pub fn id_range(errs: &mut ErrorList, path: &Path, v: Option<i64>) {
    if let Some(v) = v.filter(|v| !(0..=i64::from(i32::MAX)).contains(v)) {
        errs.push(Error::invalid(
            path,
            v,
            names::inclusive_range(0, i32::MAX.into()),
        ));
    }
}

fn security_context(sc: &SecurityContext, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    id_range(&mut errs, &path.child("runAsUser"), sc.run_as_user);
    id_range(&mut errs, &path.child("runAsGroup"), sc.run_as_group);
    if let Some(pm) = &sc.proc_mount {
        if pm != "Default" && pm != "Unmasked" {
            errs.push(Error::not_supported(
                &path.child("procMount"),
                pm,
                &["Default", "Unmasked"],
            ));
        }
    }
    if sc.allow_privilege_escalation == Some(false) && sc.privileged == Some(true) {
        errs.push(Error::invalid(
            path,
            super::BadValue::json(sc),
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ));
    }
    errs
}

/// The handler of a probe or a lifecycle hook: exactly one action.
#[derive(Default)]
struct Handler<'a> {
    exec: Option<&'a k8s_openapi::api::core::v1::ExecAction>,
    http_get: Option<&'a k8s_openapi::api::core::v1::HTTPGetAction>,
    tcp_socket: Option<&'a k8s_openapi::api::core::v1::TCPSocketAction>,
    grpc: Option<&'a k8s_openapi::api::core::v1::GRPCAction>,
    sleep: Option<&'a k8s_openapi::api::core::v1::SleepAction>,
}

fn handler(h: &Handler, grace: i64, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut n = 0;
    let mut one = |errs: &mut ErrorList, name: &str| -> bool {
        if n > 0 {
            errs.push(Error::forbidden(
                &path.child(name),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            n += 1;
            true
        }
    };
    if let Some(e) = h.exec {
        if one(&mut errs, "exec") && e.command.as_ref().is_none_or(Vec::is_empty) {
            errs.push(Error::required(&path.child("exec").child("command"), ""));
        }
    }
    if let Some(g) = h.http_get {
        if one(&mut errs, "httpGet") {
            let p = path.child("httpGet");
            if g.path.as_deref().unwrap_or_default().is_empty() {
                errs.push(Error::required(&p.child("path"), ""));
            }
            port_num_or_name(&mut errs, &p.child("port"), &g.port);
            let scheme = g.scheme.as_deref().unwrap_or_default();
            if scheme != "HTTP" && scheme != "HTTPS" {
                errs.push(Error::not_supported(
                    &p.child("scheme"),
                    scheme,
                    &["HTTP", "HTTPS"],
                ));
            }
            for hd in g.http_headers.iter().flatten() {
                if hd.name.is_empty()
                    || !hd
                        .name
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                {
                    errs.push(Error::invalid(
                        &p.child("httpHeaders"),
                        hd.name.as_str(),
                        "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
                    ));
                }
            }
        }
    }
    if let Some(t) = h.tcp_socket {
        if one(&mut errs, "tcpSocket") {
            port_num_or_name(&mut errs, &path.child("tcpSocket").child("port"), &t.port);
        }
    }
    if let Some(g) = h.grpc {
        if one(&mut errs, "grpc") {
            for m in names::port_number(g.port.into()) {
                errs.push(Error::invalid(&path.child("grpc").child("port"), g.port, m));
            }
        }
    }
    if let Some(s) = h.sleep {
        if one(&mut errs, "sleep") && (s.seconds <= 0 || s.seconds > grace) {
            errs.push(Error::invalid(
                &path.child("sleep").child("seconds"),
                s.seconds,
                format!("must be greater than 0 and less than terminationGracePeriodSeconds ({grace}). Enable AllowPodLifecycleSleepActionZeroValue feature gate for zero sleep."),
            ));
        }
    }
    if n == 0 {
        errs.push(Error::required(path, "must specify a handler type"));
    }
    errs
}

fn probe(p: &Probe, grace: i64, path: &Path) -> ErrorList {
    // A probe has no sleep action; a hook no gRPC one.
    let h = Handler {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        ..Handler::default()
    };
    let mut errs = handler(&h, grace, path);
    for (f, v) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(Error::invalid(&path.child(f), v, names::NEGATIVE));
        }
    }
    if let Some(t) = p.termination_grace_period_seconds.filter(|t| *t <= 0) {
        errs.push(Error::invalid(
            &path.child("terminationGracePeriodSeconds"),
            t,
            "must be greater than 0",
        ));
    }
    errs
}

/// Liveness, readiness and startup probes, and lifecycle hooks, of a
/// container that may have them.
pub fn probes_and_hooks(c: &Container, grace: i64, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(l) = &c.lifecycle {
        for (name, h) in [("postStart", &l.post_start), ("preStop", &l.pre_stop)] {
            if let Some(h) = h {
                errs.extend(hook(h, grace, &path.child("lifecycle").child(name)));
            }
        }
    }
    for (name, p, single) in [
        ("livenessProbe", &c.liveness_probe, true),
        ("readinessProbe", &c.readiness_probe, false),
        ("startupProbe", &c.startup_probe, true),
    ] {
        let Some(p) = p else {
            continue;
        };
        let at = path.child(name);
        errs.extend(probe(p, grace, &at));
        let threshold = p.success_threshold.unwrap_or(0);
        if single && threshold != 1 {
            errs.push(Error::invalid(
                &at.child("successThreshold"),
                threshold,
                "must be 1",
            ));
        }
        if !single {
            if let Some(t) = p.termination_grace_period_seconds {
                errs.push(Error::invalid(
                    &at.child("terminationGracePeriodSeconds"),
                    t,
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
    errs
}

fn hook(h: &LifecycleHandler, grace: i64, path: &Path) -> ErrorList {
    let actions = Handler {
        sleep: h.sleep.as_ref(),
        exec: h.exec.as_ref(),
        http_get: h.http_get.as_ref(),
        tcp_socket: h.tcp_socket.as_ref(),
        ..Handler::default()
    };
    handler(&actions, grace, path)
}
