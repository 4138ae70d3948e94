//! What the agent needs to *run* a pod, read from a `Pod` manifest with
//! Kubernetes field names and defaults. Kept here rather than in `state/` so
//! the pod runtime owns its own model; `state::validate` calls
//! [`run_spec_from_manifest`] and keeps the result next to `PodInfo`.
//!
//! Every container of `spec.containers` runs as its own process: there are
//! no images, each command runs on the node inside the pod's network
//! namespace. A pod is ready when all its containers are. Init containers
//! are not run (documented limitation).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use serde_yaml::Value;

use super::env::{expand, PodFields};
pub use super::eviction::{EVICT_ANNOTATION, SAFE_TO_EVICT};
/// Annotation naming an existing network namespace (same as `state::validate`).
pub const NETNS_ANNOTATION: &str = "sluice.dev/netns";
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// A problem in a Pod manifest: the field path (from the object's root, e.g.
/// `spec.containers[0].readinessProbe.periodSeconds`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for SpecError {}

fn err(field: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        message: message.into(),
    }
}

/// A pod as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRunSpec {
    /// `namespace/name`.
    pub key: String,
    /// `metadata.uid` (empty when not given): a new object under an old
    /// name is a new pod, replaced even when nothing else differs.
    pub uid: String,
    /// `spec.nodeName`.
    pub node: String,
    /// `status.podIPs` (for API objects without any, what the agent's IPAM
    /// assigned).
    pub ips: Vec<IpAddr>,
    /// `sluice.dev/netns`: an existing namespace someone else made; the agent
    /// neither creates nor removes it. `None`: the agent makes its own.
    pub netns: Option<String>,
    /// `spec.containers`, never empty: a pod without containers gets one
    /// without a command. A container without a command is not run by the
    /// agent (someone else runs it; its probe still runs); a pod whose
    /// containers have none is a sandbox only and counts as running while
    /// its namespace exists.
    pub containers: Vec<ContainerRun>,
    /// `spec.terminationGracePeriodSeconds` (default 30 s).
    pub termination_grace: Duration,
    pub restart_policy: RestartPolicy,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

impl PodRunSpec {
    /// `safe-to-evict: "false"` (anything else, or absent, is not a request
    /// for protection; the autoscaler reads the value the same way).
    pub fn safe_to_evict_false(&self) -> bool {
        self.annotations
            .get(SAFE_TO_EVICT)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    }

    /// The eviction `sluice.dev/evict` asks for, if any.
    pub fn evict_request(&self) -> Option<super::EvictionReason> {
        self.annotations
            .get(EVICT_ANNOTATION)
            .and_then(|v| super::EvictionReason::from_annotation(v))
    }

    /// The same pod with other annotations: annotations change in place in
    /// Kubernetes, everything else here makes a new pod.
    pub fn same_but_annotations(&self, other: &PodRunSpec) -> bool {
        let mut o = other.clone();
        o.annotations = self.annotations.clone();
        *self == o
    }

    /// Whether the agent starts processes for this pod (else: a sandbox).
    pub fn runs_processes(&self) -> bool {
        self.containers.iter().any(|c| !c.argv.is_empty())
    }

    /// The address probes aim at: the first IPv4 pod IP, else the first IP.
    pub fn probe_ip(&self) -> Option<IpAddr> {
        self.ips
            .iter()
            .copied()
            .find(IpAddr::is_ipv4)
            .or_else(|| self.ips.first().copied())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    pub name: String,
    /// `command` followed by `args` (no image: `command` is required for a
    /// process to run; empty: not run by the agent), `$(VAR)` references
    /// to the container's variables expanded.
    pub argv: Vec<String>,
    /// `env[]`: `value` (expanded against the variables before it) or
    /// `valueFrom.fieldRef` (the downward API); other `valueFrom` sources
    /// are refused. See [`super::env`].
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// `ports[]` with a name, for probes that name their port.
    pub named_ports: BTreeMap<String, u16>,
    /// `readinessProbe`; none: ready once running.
    pub readiness: Option<Probe>,
}

impl ContainerRun {
    /// A container the agent does not run and does not probe.
    pub fn placeholder() -> Self {
        ContainerRun {
            name: String::new(),
            argv: Vec::new(),
            env: Vec::new(),
            working_dir: None,
            named_ports: BTreeMap::new(),
            readiness: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

/// A readiness probe with Kubernetes' fields and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub action: ProbeAction,
    /// `initialDelaySeconds`, default 0.
    pub initial_delay: Duration,
    /// `periodSeconds`, default 10, minimum 1.
    pub period: Duration,
    /// `timeoutSeconds`, default 1, minimum 1.
    pub timeout: Duration,
    /// `successThreshold`, default 1.
    pub success_threshold: u32,
    /// `failureThreshold`, default 3.
    pub failure_threshold: u32,
}

/// `httpGet.scheme`. HTTPS is probed as the kubelet does: the server's
/// certificate is not verified (no chain, no name), only used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpScheme {
    #[default]
    Http,
    Https,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// `httpGet`. `host` defaults to the pod IP.
    Http {
        scheme: HttpScheme,
        host: Option<IpAddr>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    /// `tcpSocket`. `host` defaults to the pod IP.
    Tcp { host: Option<IpAddr>, port: u16 },
    /// `exec`: run inside the pod's network namespace; exit 0 is success.
    Exec { command: Vec<String> },
}

/// Read what the runtime needs from a whole `Pod` manifest.
pub fn run_spec_from_manifest(pod: &Value) -> Result<PodRunSpec, SpecError> {
    let meta = pod.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err("metadata.name", "missing"))?;
    let namespace = match meta.and_then(|m| m.get("namespace")) {
        None | Some(Value::Null) => "default",
        Some(v) => v
            .as_str()
            .ok_or_else(|| err("metadata.namespace", "must be a string"))?,
    };
    let mut annotations = BTreeMap::new();
    if let Some(a) = meta.and_then(|m| m.get("annotations")) {
        if let Some(map) = a.as_mapping() {
            for (k, v) in map {
                let k = k
                    .as_str()
                    .ok_or_else(|| err("metadata.annotations", "keys must be strings"))?;
                let v = v.as_str().ok_or_else(|| {
                    err(
                        format!("metadata.annotations[{k}]"),
                        "must be a string (quote \"false\")",
                    )
                })?;
                annotations.insert(k.to_string(), v.to_string());
            }
        } else if !a.is_null() {
            return Err(err("metadata.annotations", "must be a map"));
        }
    }
    let spec = pod.get("spec");
    let node = opt_str(spec, "nodeName", "spec.nodeName")?.unwrap_or_default();
    let fields = PodFields::of(pod, name, namespace);

    let termination_grace = match spec.and_then(|s| s.get("terminationGracePeriodSeconds")) {
        None | Some(Value::Null) => DEFAULT_GRACE,
        Some(v) => {
            let s = v.as_i64().filter(|s| *s >= 0).ok_or_else(|| {
                err(
                    "spec.terminationGracePeriodSeconds",
                    format!("must be a whole number >= 0, got {}", show(v)),
                )
            })?;
            Duration::from_secs(s.unsigned_abs())
        }
    };
    let restart_policy = match opt_str(spec, "restartPolicy", "spec.restartPolicy")?.as_deref() {
        None | Some("Always") => RestartPolicy::Always,
        Some("OnFailure") => RestartPolicy::OnFailure,
        Some("Never") => RestartPolicy::Never,
        Some(o) => {
            return Err(err(
                "spec.restartPolicy",
                format!("{o} is not Always, OnFailure or Never"),
            ))
        }
    };

    let mut ips = Vec::new();
    if let Some(list) = pod.get("status").and_then(|s| s.get("podIPs")) {
        let seq = list
            .as_sequence()
            .ok_or_else(|| err("status.podIPs", "must be a list"))?;
        for (i, e) in seq.iter().enumerate() {
            let f = format!("status.podIPs[{i}].ip");
            let s = e
                .get("ip")
                .and_then(Value::as_str)
                .ok_or_else(|| err(&f, "missing"))?;
            ips.push(
                s.trim()
                    .parse()
                    .map_err(|_| err(&f, format!("{s:?} is not an IP address")))?,
            );
        }
    }
    let netns = annotations.get(NETNS_ANNOTATION).cloned();

    let mut containers = Vec::new();
    if let Some(v) = spec
        .and_then(|s| s.get("containers"))
        .filter(|v| !v.is_null())
    {
        let seq = v
            .as_sequence()
            .ok_or_else(|| err("spec.containers", "must be a list"))?;
        for (i, c) in seq.iter().enumerate() {
            containers.push(container(c, &format!("spec.containers[{i}]"), &fields)?);
        }
    }
    check_containers(&containers)?;
    if containers.is_empty() {
        containers.push(ContainerRun::placeholder());
    }

    Ok(PodRunSpec {
        key: format!("{namespace}/{name}"),
        uid: fields.uid.clone(),
        node,
        ips,
        netns,
        containers,
        termination_grace,
        restart_policy,
        annotations,
    })
}

/// Several containers need distinct names (their logs and events are named
/// after them, as in Kubernetes), and either all have a command or none: the
/// agent cannot run an image, so a pod half run by it and half by someone
/// else would never be consistently up.
fn check_containers(cs: &[ContainerRun]) -> Result<(), SpecError> {
    if cs.len() < 2 {
        return Ok(());
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in cs.iter().enumerate() {
        if c.name.is_empty() || !seen.insert(c.name.as_str()) {
            return Err(err(
                format!("spec.containers[{i}].name"),
                "required and unique when a pod has several containers",
            ));
        }
    }
    let with = cs.iter().position(|c| !c.argv.is_empty());
    let without = cs.iter().position(|c| c.argv.is_empty());
    if let (Some(w), Some(i)) = (with, without) {
        return Err(err(
            format!("spec.containers[{i}].command"),
            format!("required: spec.containers[{w}] has a command, and the agent runs no images"),
        ));
    }
    Ok(())
}

fn show(v: &Value) -> String {
    serde_yaml::to_string(v)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

fn opt_str(parent: Option<&Value>, key: &str, field: &str) -> Result<Option<String>, SpecError> {
    match parent.and_then(|p| p.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| err(field, "must be a string")),
    }
}

fn str_list(v: Option<&Value>, field: &str) -> Result<Vec<String>, SpecError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => {
            let seq = v
                .as_sequence()
                .ok_or_else(|| err(field, "must be a list of strings"))?;
            seq.iter()
                .enumerate()
                .map(|(i, e)| match e {
                    Value::String(s) => Ok(s.clone()),
                    // YAML turns `- 30` into a number; Kubernetes would reject
                    // it, but the intent is unambiguous.
                    Value::Number(n) => Ok(n.to_string()),
                    Value::Bool(b) => Ok(b.to_string()),
                    _ => Err(err(format!("{field}[{i}]"), "must be a string")),
                })
                .collect()
        }
    }
}

fn container(c: &Value, at: &str, fields: &PodFields) -> Result<ContainerRun, SpecError> {
    let name = opt_str(Some(c), "name", &format!("{at}.name"))?.unwrap_or_default();
    let command = str_list(c.get("command"), &format!("{at}.command"))?;
    let args = str_list(c.get("args"), &format!("{at}.args"))?;
    let mut env = Vec::new();
    if let Some(list) = c.get("env").filter(|v| !v.is_null()) {
        let seq = list
            .as_sequence()
            .ok_or_else(|| err(format!("{at}.env"), "must be a list"))?;
        for (i, e) in seq.iter().enumerate() {
            let f = format!("{at}.env[{i}]");
            let n = e
                .get("name")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty() && !s.contains('='))
                .ok_or_else(|| err(format!("{f}.name"), "missing or invalid"))?;
            let v = super::env::env_value(e, &f, fields, &env)?;
            env.push((n.to_string(), v));
        }
    }
    let mut named_ports = BTreeMap::new();
    if let Some(list) = c.get("ports").filter(|v| !v.is_null()) {
        let seq = list
            .as_sequence()
            .ok_or_else(|| err(format!("{at}.ports"), "must be a list"))?;
        for (i, p) in seq.iter().enumerate() {
            let f = format!("{at}.ports[{i}]");
            let num = p
                .get("containerPort")
                .and_then(Value::as_i64)
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n != 0)
                .ok_or_else(|| err(format!("{f}.containerPort"), "must be 1-65535"))?;
            if let Some(n) = opt_str(Some(p), "name", &format!("{f}.name"))? {
                named_ports.insert(n, num);
            }
        }
    }
    let working_dir = opt_str(Some(c), "workingDir", &format!("{at}.workingDir"))?;
    if command.is_empty() && !args.is_empty() {
        // With an image, args would feed its entrypoint; without one there
        // is nothing to run them with.
        return Err(err(
            format!("{at}.command"),
            "required when args is set (no images: the command runs on the node)",
        ));
    }
    let readiness = match c.get("readinessProbe") {
        None | Some(Value::Null) => None,
        Some(p) => Some(probe(p, &format!("{at}.readinessProbe"), &named_ports)?),
    };
    // Kubernetes expands `$(VAR)` in command and args with the
    // container's own variables.
    Ok(ContainerRun {
        name,
        argv: command
            .iter()
            .chain(&args)
            .map(|a| expand(a, &env))
            .collect(),
        env,
        working_dir,
        named_ports,
        readiness,
    })
}

fn secs(p: &Value, key: &str, at: &str, default: u64, min: i64) -> Result<Duration, SpecError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(Duration::from_secs(default)),
        Some(v) => v
            .as_i64()
            .filter(|n| *n >= min)
            .map(|n| Duration::from_secs(n.unsigned_abs()))
            .ok_or_else(|| {
                err(
                    format!("{at}.{key}"),
                    format!("must be a whole number >= {min}, got {}", show(v)),
                )
            }),
    }
}

fn count(p: &Value, key: &str, at: &str, default: u32) -> Result<u32, SpecError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                err(
                    format!("{at}.{key}"),
                    format!("must be a whole number >= 1, got {}", show(v)),
                )
            }),
    }
}

fn probe_port(
    v: Option<&Value>,
    field: &str,
    named: &BTreeMap<String, u16>,
) -> Result<u16, SpecError> {
    match v {
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
            .ok_or_else(|| err(field, format!("must be 1-65535, got {n}"))),
        Some(Value::String(s)) => match s.parse::<i64>() {
            Ok(n) => u16::try_from(n)
                .ok()
                .filter(|n| *n != 0)
                .ok_or_else(|| err(field, format!("must be 1-65535, got {n}"))),
            Err(_) => named.get(s).copied().ok_or_else(|| {
                err(
                    field,
                    format!("{s:?} names no port of the container (ports[].name)"),
                )
            }),
        },
        _ => Err(err(field, "missing")),
    }
}

fn probe_host(p: &Value, at: &str) -> Result<Option<IpAddr>, SpecError> {
    match opt_str(Some(p), "host", &format!("{at}.host"))? {
        None => Ok(None),
        Some(h) if h.is_empty() => Ok(None),
        Some(h) => h.parse().map(Some).map_err(|_| {
            err(
                format!("{at}.host"),
                format!("{h:?} is not an IP address (no DNS on the node side)"),
            )
        }),
    }
}

fn probe(p: &Value, at: &str, named: &BTreeMap<String, u16>) -> Result<Probe, SpecError> {
    let http = p.get("httpGet").filter(|v| !v.is_null());
    let tcp = p.get("tcpSocket").filter(|v| !v.is_null());
    let exec = p.get("exec").filter(|v| !v.is_null());
    if p.get("grpc").is_some_and(|v| !v.is_null()) {
        return Err(err(
            format!("{at}.grpc"),
            "not supported (httpGet, tcpSocket, exec)",
        ));
    }
    let action = match (http, tcp, exec) {
        (Some(h), None, None) => {
            let f = format!("{at}.httpGet");
            let scheme = match opt_str(Some(h), "scheme", &format!("{f}.scheme"))?.as_deref() {
                None | Some("HTTP") => HttpScheme::Http,
                Some("HTTPS") => HttpScheme::Https,
                Some(o) => {
                    return Err(err(
                        format!("{f}.scheme"),
                        format!("{o} is not a scheme (HTTP or HTTPS)"),
                    ))
                }
            };
            let path = opt_str(Some(h), "path", &format!("{f}.path"))?.unwrap_or_default();
            // Kubernetes probes "/" when the path is empty and adds the
            // leading slash when it is missing.
            let path = if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            };
            if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(err(format!("{f}.path"), "must not contain spaces"));
            }
            let mut headers = Vec::new();
            if let Some(list) = h.get("httpHeaders").filter(|v| !v.is_null()) {
                let seq = list
                    .as_sequence()
                    .ok_or_else(|| err(format!("{f}.httpHeaders"), "must be a list"))?;
                for (i, e) in seq.iter().enumerate() {
                    let hf = format!("{f}.httpHeaders[{i}]");
                    let n = e
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|n| {
                            !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                        })
                        .ok_or_else(|| err(format!("{hf}.name"), "missing or invalid"))?;
                    let v = e.get("value").and_then(Value::as_str).unwrap_or("");
                    if v.contains(['\r', '\n']) {
                        return Err(err(format!("{hf}.value"), "must be one line"));
                    }
                    headers.push((n.to_string(), v.to_string()));
                }
            }
            ProbeAction::Http {
                scheme,
                host: probe_host(h, &f)?,
                port: probe_port(h.get("port"), &format!("{f}.port"), named)?,
                path,
                headers,
            }
        }
        (None, Some(t), None) => {
            let f = format!("{at}.tcpSocket");
            ProbeAction::Tcp {
                host: probe_host(t, &f)?,
                port: probe_port(t.get("port"), &format!("{f}.port"), named)?,
            }
        }
        (None, None, Some(e)) => {
            let f = format!("{at}.exec.command");
            let command = str_list(e.get("command"), &f)?;
            if command.is_empty() {
                return Err(err(f, "missing"));
            }
            ProbeAction::Exec { command }
        }
        (None, None, None) => {
            return Err(err(at, "needs one of httpGet, tcpSocket, exec"));
        }
        _ => return Err(err(at, "may have only one of httpGet, tcpSocket, exec")),
    };
    Ok(Probe {
        action,
        initial_delay: secs(p, "initialDelaySeconds", at, 0, 0)?,
        period: secs(p, "periodSeconds", at, 10, 1)?,
        timeout: secs(p, "timeoutSeconds", at, 1, 1)?,
        success_threshold: count(p, "successThreshold", at, 1)?,
        failure_threshold: count(p, "failureThreshold", at, 3)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(y: &str) -> Result<PodRunSpec, SpecError> {
        let v: Value = serde_yaml::from_str(y).expect("test yaml");
        run_spec_from_manifest(&v)
    }

    #[test]
    fn defaults_follow_kubernetes() {
        let p = parse(
            r#"
kind: Pod
metadata: {name: web}
spec:
  nodeName: node-a
  containers:
  - name: c
    command: [sh, -c]
    args: ["exec sleep 1000"]
    env: [{name: A, value: "1"}]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {port: http}}
status: {podIPs: [{ip: 198.19.1.5}]}
"#,
        )
        .expect("valid");
        assert_eq!(p.key, "default/web");
        assert_eq!(p.termination_grace, Duration::from_secs(30));
        assert_eq!(p.restart_policy, RestartPolicy::Always);
        assert_eq!(p.containers.len(), 1);
        let c = &p.containers[0];
        assert_eq!(c.argv, ["sh", "-c", "exec sleep 1000"]);
        assert_eq!(c.env, [("A".to_string(), "1".to_string())]);
        let r = c.readiness.clone().expect("probe");
        assert_eq!(r.initial_delay, Duration::ZERO);
        assert_eq!(r.period, Duration::from_secs(10));
        assert_eq!(r.timeout, Duration::from_secs(1));
        assert_eq!((r.success_threshold, r.failure_threshold), (1, 3));
        assert_eq!(
            r.action,
            ProbeAction::Http {
                scheme: HttpScheme::Http,
                host: None,
                port: 8080,
                path: "/".into(),
                headers: vec![]
            }
        );
        assert!(!p.safe_to_evict_false());
    }

    #[test]
    fn https_probes_are_read() {
        let p = parse(
            "metadata: {name: web}\nspec: {containers: [{command: [x], readinessProbe: {httpGet: {port: 8443, scheme: HTTPS}}}]}",
        )
        .expect("valid");
        let action = p.containers[0].readiness.as_ref().map(|r| r.action.clone());
        assert!(
            matches!(
                action,
                Some(ProbeAction::Http {
                    scheme: HttpScheme::Https,
                    port: 8443,
                    ..
                })
            ),
            "{action:?}"
        );
    }

    #[test]
    fn every_container_is_read() {
        let p = parse(
            r#"
metadata: {name: two}
spec:
  containers:
  - {name: web, command: [web], readinessProbe: {tcpSocket: {port: 80}}}
  - {name: sidecar, command: [side], args: [-v]}
"#,
        )
        .expect("valid");
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["web", "sidecar"]);
        assert_eq!(p.containers[1].argv, ["side", "-v"]);
        assert!(p.containers[0].readiness.is_some());
        assert!(p.containers[1].readiness.is_none());
        // No containers at all: a sandbox.
        let p = parse("metadata: {name: s}\nspec: {}").expect("valid");
        assert_eq!(p.containers, [ContainerRun::placeholder()]);
    }

    #[test]
    fn several_containers_need_names_and_commands() {
        for (y, field) in [
            (
                "spec: {containers: [{name: a, command: [x]}, {name: a, command: [y]}]}",
                "spec.containers[1].name",
            ),
            (
                "spec: {containers: [{name: a, command: [x]}, {command: [y]}]}",
                "spec.containers[1].name",
            ),
            (
                "spec: {containers: [{name: a, command: [x]}, {name: b, image: i}]}",
                "spec.containers[1].command",
            ),
            (
                "spec: {containers: [{name: a, command: [x]}, {name: b, command: [y], readinessProbe: {exec: {command: [t]}, periodSeconds: 0}}]}",
                "spec.containers[1].readinessProbe.periodSeconds",
            ),
        ] {
            let e = parse(&format!("metadata: {{name: p}}\n{y}")).expect_err(y);
            assert_eq!(e.field, field, "{y}: {e}");
        }
    }

    #[test]
    fn safe_to_evict_and_grace() {
        let p = parse(
            r#"
metadata:
  name: x
  namespace: ns
  annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: "false"}
spec:
  terminationGracePeriodSeconds: 7200
  containers: [{name: c, image: registry.k8s.io/pause}]
"#,
        )
        .expect("valid");
        assert!(p.safe_to_evict_false());
        assert_eq!(p.termination_grace, Duration::from_secs(7200));
        assert!(!p.runs_processes(), "no command: a sandbox only");
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (
                "spec: {terminationGracePeriodSeconds: -1}",
                "spec.terminationGracePeriodSeconds",
            ),
            (
                "spec: {containers: [{command: [x], readinessProbe: {tcpSocket: {port: 80}, periodSeconds: 0}}]}",
                "spec.containers[0].readinessProbe.periodSeconds",
            ),
            (
                "spec: {containers: [{command: [x], readinessProbe: {httpGet: {port: 80, scheme: https}}}]}",
                "spec.containers[0].readinessProbe.httpGet.scheme",
            ),
            (
                "spec: {containers: [{command: [x], readinessProbe: {httpGet: {port: web}}}]}",
                "spec.containers[0].readinessProbe.httpGet.port",
            ),
            (
                "spec: {containers: [{command: [x], readinessProbe: {exec: {command: [true]}, tcpSocket: {port: 1}}}]}",
                "spec.containers[0].readinessProbe",
            ),
            (
                "spec: {containers: [{command: [x], readinessProbe: {exec: {command: [true]}, failureThreshold: 0}}]}",
                "spec.containers[0].readinessProbe.failureThreshold",
            ),
            (
                "spec: {containers: [{command: [x], env: [{name: A, valueFrom: {fieldRef: {}}}]}]}",
                "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
            ),
            (
                "spec: {containers: [{command: [x], env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]}]}",
                "spec.containers[0].env[0].valueFrom.secretKeyRef",
            ),
            ("spec: {restartPolicy: Sometimes}", "spec.restartPolicy"),
            ("spec: {containers: [{args: [x]}]}", "spec.containers[0].command"),
        ];
        for (spec, field) in cases {
            let e = parse(&format!("metadata: {{name: p}}\n{spec}")).expect_err(spec);
            assert_eq!(e.field, field, "{spec}: {e}");
        }
        assert_eq!(
            parse("spec: {}").expect_err("no name").field,
            "metadata.name"
        );
    }
}
