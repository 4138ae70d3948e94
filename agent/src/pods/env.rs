//! A container's environment as Kubernetes builds it (pure): `env[].value`
//! with `$(VAR)` references to the variables defined before it,
//! `env[].valueFrom.fieldRef` (the downward API) from the pod's own
//! fields, and `$(VAR)` expansion of `command` and `args` with the
//! result. `HOSTNAME` (the pod's name) is set by the runtime, as a
//! container runtime sets it, and is not one of the container's variables.

use serde_yaml::Value;

use super::spec::SpecError;

/// The pod fields `fieldRef` may name, read from the manifest (for API
/// objects the agent fills the addresses in before reading, so they are
/// known before the status is written back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFields {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub node_name: String,
    pub service_account: String,
    pub pod_ips: Vec<String>,
    pub host_ips: Vec<String>,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

/// The `fieldPath`s [`PodFields::resolve`] knows, for error messages.
pub const FIELD_PATHS: &str = "metadata.name, metadata.namespace, metadata.uid, \
metadata.labels['<key>'], metadata.annotations['<key>'], spec.nodeName, \
spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP, status.hostIPs";

fn string_at<'a>(v: Option<&'a Value>, path: &[&str]) -> Option<&'a str> {
    let mut cur = v?;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

/// `status.<list>[].ip`, else the single `status.<one>`.
fn addresses(pod: &Value, list: &str, one: &str) -> Vec<String> {
    let listed: Vec<String> = pod
        .get("status")
        .and_then(|s| s.get(list))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("ip").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    string_at(Some(pod), &["status", one])
        .filter(|s| !s.is_empty())
        .map(|s| vec![s.to_string()])
        .unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
        .collect()
}

impl PodFields {
    /// Read from a whole Pod manifest; the namespace already defaulted.
    pub fn of(pod: &Value, name: &str, namespace: &str) -> Self {
        let meta = pod.get("metadata");
        let spec = pod.get("spec");
        PodFields {
            name: name.to_string(),
            namespace: namespace.to_string(),
            uid: string_at(meta, &["uid"]).unwrap_or_default().to_string(),
            node_name: string_at(spec, &["nodeName"])
                .unwrap_or_default()
                .to_string(),
            service_account: string_at(spec, &["serviceAccountName"])
                .unwrap_or("default")
                .to_string(),
            pod_ips: addresses(pod, "podIPs", "podIP"),
            host_ips: addresses(pod, "hostIPs", "hostIP"),
            labels: string_map(meta.and_then(|m| m.get("labels"))),
            annotations: string_map(meta.and_then(|m| m.get("annotations"))),
        }
    }

    /// The value of `fieldPath`, or `None` when it names no field the
    /// downward API offers through `env`.
    pub fn resolve(&self, path: &str) -> Option<String> {
        let keyed = |prefix: &str, map: &[(String, String)]| -> Option<Option<String>> {
            let key = path
                .strip_prefix(prefix)?
                .strip_prefix("['")?
                .strip_suffix("']")?;
            Some(
                map.iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.clone())
                    .or(Some(String::new())),
            )
        };
        if let Some(v) = keyed("metadata.labels", &self.labels) {
            return v;
        }
        if let Some(v) = keyed("metadata.annotations", &self.annotations) {
            return v;
        }
        let first = |ips: &[String]| ips.first().cloned().unwrap_or_default();
        Some(match path {
            "metadata.name" => self.name.clone(),
            "metadata.namespace" => self.namespace.clone(),
            "metadata.uid" => self.uid.clone(),
            "spec.nodeName" => self.node_name.clone(),
            "spec.serviceAccountName" => self.service_account.clone(),
            "status.podIP" => first(&self.pod_ips),
            "status.podIPs" => self.pod_ips.join(","),
            "status.hostIP" => first(&self.host_ips),
            "status.hostIPs" => self.host_ips.join(","),
            _ => return None,
        })
    }
}

/// One `env[]` entry's value: `value` expanded against the variables
/// defined before it, or what `valueFrom.fieldRef` names. Any other
/// `valueFrom` source is refused naming its field.
pub fn env_value(
    e: &Value,
    at: &str,
    fields: &PodFields,
    before: &[(String, String)],
) -> Result<String, SpecError> {
    let err = |field: String, message: String| SpecError { field, message };
    let value = match e.get("value") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(err(format!("{at}.value"), "must be a string".into())),
    };
    let Some(from) = e.get("valueFrom").filter(|v| !v.is_null()) else {
        return Ok(expand(&value.unwrap_or_default(), before));
    };
    if value.as_deref().is_some_and(|v| !v.is_empty()) {
        return Err(err(
            format!("{at}.valueFrom"),
            "may not be set when value is not empty".into(),
        ));
    }
    let Some(map) = from.as_mapping() else {
        return Err(err(format!("{at}.valueFrom"), "must be an object".into()));
    };
    for (k, v) in map {
        let kind = k.as_str().unwrap_or_default();
        if kind != "fieldRef" && !v.is_null() {
            return Err(err(
                format!("{at}.valueFrom.{kind}"),
                "not supported: the agent resolves only fieldRef (no ConfigMaps, Secrets or \
                 resource limits to read)"
                    .into(),
            ));
        }
    }
    let path_field = format!("{at}.valueFrom.fieldRef.fieldPath");
    let path = from
        .get("fieldRef")
        .and_then(|f| f.get("fieldPath"))
        .and_then(Value::as_str)
        .ok_or_else(|| err(path_field.clone(), "missing".into()))?;
    fields.resolve(path).ok_or_else(|| {
        err(
            path_field,
            format!("{path:?} is not supported (one of {FIELD_PATHS})"),
        )
    })
}

/// `$(VAR)` references in `input` replaced by `vars`' values, as Kubernetes
/// expands `command`, `args` and `env[].value`: `$$` is a literal `$`, a
/// reference to an unknown variable and an unclosed `$(` stay as written,
/// and a `$` before anything else is kept. The last definition of a name
/// wins.
pub fn expand(input: &str, vars: &[(String, String)]) -> String {
    let lookup = |name: &str| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| format!("$({name})"))
    };
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.chars().next() {
            // A `$` at the very end is kept.
            None => {
                out.push('$');
                rest = after;
            }
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after.find(')') {
                Some(close) => {
                    out.push_str(&lookup(&after[1..close]));
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            Some(c) => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn references_expand_and_dollar_dollar_escapes_as_kubernetes_does() {
        let v = vars(&[("POD_IP", "198.19.1.2"), ("PORT", "8080"), ("EMPTY", "")]);
        let cases = [
            ("--ip=$(POD_IP):$(PORT)", "--ip=198.19.1.2:8080"),
            ("$$(POD_IP)", "$(POD_IP)"),
            ("$$$(PORT)", "$8080"),
            ("$(UNKNOWN) stays", "$(UNKNOWN) stays"),
            ("$(EMPTY)x", "x"),
            ("open $(POD_IP", "open $(POD_IP"),
            ("$PORT and $", "$PORT and $"),
            ("$()", "$()"),
            ("no refs", "no refs"),
            ("é$(PORT)é", "é8080é"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, &v), want, "{input}");
        }
    }

    #[test]
    fn the_last_definition_of_a_name_wins() {
        let v = vars(&[("A", "1"), ("A", "2")]);
        assert_eq!(expand("$(A)", &v), "2");
    }

    fn manifest() -> Value {
        serde_yaml::from_str(
            r#"
metadata:
  name: web
  uid: u-1
  labels: {app: web}
spec: {nodeName: node-a}
status:
  podIPs: [{ip: 198.19.1.2}, {ip: "fd00:19:1::2"}]
  hostIP: 198.18.0.11
"#,
        )
        .expect("test yaml")
    }

    #[test]
    fn field_refs_read_the_pods_own_fields() {
        let f = PodFields::of(&manifest(), "web", "default");
        for (path, want) in [
            ("metadata.name", "web"),
            ("metadata.namespace", "default"),
            ("metadata.uid", "u-1"),
            ("spec.nodeName", "node-a"),
            ("spec.serviceAccountName", "default"),
            ("status.podIP", "198.19.1.2"),
            ("status.podIPs", "198.19.1.2,fd00:19:1::2"),
            ("status.hostIP", "198.18.0.11"),
            ("status.hostIPs", "198.18.0.11"),
            ("metadata.labels['app']", "web"),
            ("metadata.annotations['none']", ""),
        ] {
            assert_eq!(f.resolve(path).as_deref(), Some(want), "{path}");
        }
        assert_eq!(f.resolve("status.phase"), None);
    }

    fn entry(y: &str) -> Value {
        serde_yaml::from_str(y).expect("test yaml")
    }

    #[test]
    fn env_values_refer_to_earlier_variables_and_field_refs_are_not_expanded() {
        let f = PodFields::of(&manifest(), "web", "default");
        let before = vars(&[("HOST", "h")]);
        let v = env_value(&entry("{name: A, value: 'at-$(HOST)'}"), "e", &f, &before);
        assert_eq!(v, Ok("at-h".to_string()));
        let v = env_value(
            &entry("{name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}"),
            "e",
            &f,
            &before,
        );
        assert_eq!(v, Ok("198.19.1.2".to_string()));
    }

    #[test]
    fn other_value_sources_and_unknown_paths_are_refused_naming_the_field() {
        let f = PodFields::of(&manifest(), "web", "default");
        let cases = [
            (
                "{name: S, valueFrom: {secretKeyRef: {name: s, key: k}}}",
                "env[0].valueFrom.secretKeyRef",
            ),
            (
                "{name: C, valueFrom: {configMapKeyRef: {name: c, key: k}}}",
                "env[0].valueFrom.configMapKeyRef",
            ),
            (
                "{name: R, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}",
                "env[0].valueFrom.resourceFieldRef",
            ),
            (
                "{name: P, valueFrom: {fieldRef: {fieldPath: status.phase}}}",
                "env[0].valueFrom.fieldRef.fieldPath",
            ),
            (
                "{name: P, valueFrom: {fieldRef: {}}}",
                "env[0].valueFrom.fieldRef.fieldPath",
            ),
            (
                "{name: B, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}",
                "env[0].valueFrom",
            ),
        ];
        for (y, field) in cases {
            let e = env_value(&entry(y), "env[0]", &f, &[]).expect_err(y);
            assert_eq!(e.field, field, "{y}: {e}");
        }
    }

    #[test]
    fn the_downward_api_and_references_reach_env_and_argv() {
        let v: Value = serde_yaml::from_str(
            r#"
metadata: {name: web, namespace: shop, uid: u-7}
spec:
  nodeName: node-a
  containers:
  - name: c
    command: [sluice-whoami, --name, $(NAME)]
    args: [--ip, $(POD_IP), --tcp, "$(PORT)", --literal, $$(PORT), $(NOPE)]
    env:
    - {name: NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: PORT, value: "8080"}
    - {name: WHERE, value: "$(NAME).$(NS)@$(NODE)"}
status: {podIPs: [{ip: 198.19.1.5}], hostIP: 198.18.0.11}
"#,
        )
        .expect("test yaml");
        let p = crate::pods::spec::run_spec_from_manifest(&v).expect("valid");
        let c = &p.containers[0];
        let env: std::collections::BTreeMap<&str, &str> = c
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(env["NAME"], "web");
        assert_eq!(env["NS"], "shop");
        assert_eq!(env["POD_IP"], "198.19.1.5");
        assert_eq!(env["HOST_IP"], "198.18.0.11");
        assert_eq!(env["UID"], "u-7");
        assert_eq!(env["WHERE"], "web.shop@node-a");
        assert_eq!(
            c.argv,
            [
                "sluice-whoami",
                "--name",
                "web",
                "--ip",
                "198.19.1.5",
                "--tcp",
                "8080",
                "--literal",
                "$(PORT)",
                "$(NOPE)"
            ]
        );
    }
}
