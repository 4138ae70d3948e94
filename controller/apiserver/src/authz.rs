//! Who may do what: an admin everything; a node (`system:node:<name>`)
//! what Kubernetes' Node authorizer and NodeRestriction admission let a
//! kubelet do — read, and write only its own Node, its own Lease and the
//! status of pods bound to it (plus Events, which kubelets report), and
//! read a Secret only when a pod bound to it uses that Secret, as the Node
//! authorizer's graph allows; the load balancer
//! (`system:sluice:load-balancer`) only reads its four `sluice.dev` kinds.

use std::collections::HashMap;

use axum::http::Method;
use serde_json::Value;
use sluice_store::ListOptions;

use super::objects::{key, Objects};
use super::path::Target;
use super::status::ApiError;
use crate::identity::Identity;

/// The Kubernetes verb of a request.
pub fn verb(method: &Method, t: &Target, watch: bool) -> &'static str {
    match (method.as_str(), t.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        // A subresource created on an object (`pods/<name>/eviction`).
        ("POST", true) if t.subresource.is_some() => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The namespace kubelets' heartbeat Leases live in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    /// Allowed if the pod addressed is bound to this node.
    IfPodOnNode(String),
    /// Allowed if a pod bound to this node uses the Secret addressed.
    IfSecretOfPodOnNode(String),
    /// Refused, with the Node authorizer's reason.
    DenyBecause(&'static str),
}

/// The decision, without I/O.
pub fn decide(who: &Identity, verb: &str, t: &Target) -> Decision {
    let node = match who {
        Identity::Admin { .. } => return Decision::Allow,
        Identity::Node { name } => name,
        Identity::LoadBalancer => return load_balancer(verb, t),
    };
    let r = t.resource;
    if (r.group, r.name) == ("", "secrets") {
        return node_secret(node, verb, t);
    }
    if matches!(verb, "get" | "list" | "watch") {
        return Decision::Allow;
    }
    let own = t.name.as_deref() == Some(node.as_str());
    let sub = t.subresource.map(|s| s.name);
    let writes = matches!(verb, "update" | "patch");
    match (r.group, r.name) {
        // Its own Node object (registering it too) and its status.
        ("", "nodes") if verb == "create" || (own && (writes || sub == Some("nodes/status"))) => {
            Decision::Allow
        }
        ("coordination.k8s.io", "leases")
            if t.namespace.as_deref() == Some(NODE_LEASE_NAMESPACE)
                && (verb == "create" || (own && (writes || verb == "delete"))) =>
        {
            Decision::Allow
        }
        ("", "pods") if sub == Some("pods/status") && writes => Decision::IfPodOnNode(node.clone()),
        // A kubelet deletes the pods it has stopped (graceful deletion ends
        // with its delete at grace 0).
        ("", "pods") if sub.is_none() && verb == "delete" => Decision::IfPodOnNode(node.clone()),
        // Sluice's agent drains its own node through the Eviction API
        // (budgets decided here, not by the agent); a kubelet has no
        // such right, so against kube-apiserver the agent's identity needs
        // it granted (README).
        ("", "pods") if sub == Some("pods/eviction") && verb == "create" => {
            Decision::IfPodOnNode(node.clone())
        }
        ("", "events") if verb == "create" || verb == "patch" => Decision::Allow,
        _ => Decision::Deny,
    }
}

/// A node reads one Secret at a time, by name (a get, or a list or watch
/// whose field selector names it, as a kubelet watches each Secret it
/// mounts), and only one a pod bound to it uses; it writes none.
fn node_secret(node: &str, verb: &str, t: &Target) -> Decision {
    if !matches!(verb, "get" | "list" | "watch") {
        return Decision::DenyBecause("can only read resources of this type");
    }
    if t.subresource.is_some() {
        return Decision::DenyBecause("cannot read subresource");
    }
    if t.name.is_none() {
        return Decision::DenyBecause("No Object name found");
    }
    Decision::IfSecretOfPodOnNode(node.to_string())
}

/// The one name a list or watch selects (`fieldSelector=metadata.name=x`),
/// which kube-apiserver's request info takes as the request's name.
pub fn selected_name(q: &HashMap<String, String>) -> Option<String> {
    let sel = q.get("fieldSelector")?.trim();
    let name = sel
        .strip_prefix("metadata.name==")
        .or_else(|| sel.strip_prefix("metadata.name="))?;
    (!name.is_empty() && !name.contains(',')).then(|| name.to_string())
}

/// The names at `key` of each object in the array at `ptr` of `v`.
fn names_in<'a>(v: &'a Value, ptr: &str, key: &'a str) -> impl Iterator<Item = &'a str> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |o| o.pointer(key).and_then(Value::as_str))
}

/// Whether `pod` uses the Secret `name` of its namespace: in a volume (a
/// `secret` volume, a projected one, or a volume plugin's `secretRef` or
/// `nodePublishSecretRef`), an env var or `envFrom` of any container, or
/// as an image pull secret: what upstream's `VisitPodSecretNames` visits.
pub fn pod_uses_secret(pod: &Value, name: &str) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let is = |n: &str| n == name;
    if names_in(spec, "/imagePullSecrets", "/name").any(is) {
        return true;
    }
    for c in ["containers", "initContainers", "ephemeralContainers"] {
        let list = format!("/{c}");
        for container in spec
            .pointer(&list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if names_in(container, "/env", "/valueFrom/secretKeyRef/name").any(is)
                || names_in(container, "/envFrom", "/secretRef/name").any(is)
            {
                return true;
            }
        }
    }
    let volumes = spec.pointer("/volumes").and_then(Value::as_array);
    for v in volumes.into_iter().flatten().filter_map(Value::as_object) {
        for source in v.values() {
            let direct = [
                "/secretName",
                "/secretRef/name",
                "/nodePublishSecretRef/name",
            ]
            .iter()
            .filter_map(|p| source.pointer(p).and_then(Value::as_str))
            .any(is);
            if direct || names_in(source, "/sources", "/secret/name").any(is) {
                return true;
            }
        }
    }
    false
}

/// Whether a pod bound to `node` in the namespace of `t` uses the Secret
/// `t` names. Reads the namespace's pods: a node asks for each Secret once
/// per pod it starts, not per request it serves.
async fn secret_of_pod_on_node(o: &Objects, node: &str, t: &Target) -> bool {
    let Some(name) = t.name.as_deref() else {
        return false;
    };
    let Ok(pods) = crate::path::resolve(&format!(
        "/api/v1/namespaces/{}/pods",
        t.namespace.as_deref().unwrap_or_default()
    )) else {
        return false;
    };
    let prefix = key(&pods, None);
    let mut after: Option<String> = None;
    loop {
        let page = o
            .store
            .list(ListOptions {
                prefix: &prefix,
                limit: Some(500),
                start_after: after.as_deref(),
                at_revision: None,
            })
            .await;
        let Ok(page) = page else {
            return false;
        };
        let found = page.items.iter().any(|kv| {
            serde_json::from_slice::<Value>(&kv.value).is_ok_and(|p| {
                p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                    && pod_uses_secret(&p, name)
            })
        });
        if found {
            return true;
        }
        match page.items.last() {
            Some(last) if page.more => after = Some(last.key.clone()),
            _ => return false,
        }
    }
}

/// The kinds `sluice-lb` reads, by resource name (group `sluice.dev`).
pub const LOAD_BALANCER_READS: [&str; 4] = [
    "l4loadbalancers",
    "healthchecks",
    "networkendpointgroups",
    "instancegroups",
];

/// The load balancer: get, list and watch of its four kinds (their status
/// subresources included), nothing else.
fn load_balancer(verb: &str, t: &Target) -> Decision {
    let r = t.resource;
    if r.group == "sluice.dev"
        && LOAD_BALANCER_READS.contains(&r.name)
        && matches!(verb, "get" | "list" | "watch")
    {
        Decision::Allow
    } else {
        Decision::Deny
    }
}

fn forbidden(who: &Identity, verb: &str, t: &Target) -> ApiError {
    let r = t.subresource.unwrap_or(t.resource);
    let scope = match &t.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".into(),
    };
    ApiError::forbidden(
        &who.user(),
        &format!(
            "{verb} resource \"{}\" in API group \"{}\"{scope}",
            r.name, r.group
        ),
    )
}

fn forbidden_because(who: &Identity, verb: &str, t: &Target, why: &str) -> ApiError {
    let mut e = forbidden(who, verb, t);
    e.message = format!("{}: {why}", e.message);
    e
}

/// Allow or refuse with a 403 `Status`; `selected`: the one name a list
/// or watch selects (`selected_name`), which counts as the request's.
pub async fn check(
    o: &Objects,
    who: &Identity,
    verb: &str,
    t: &Target,
    selected: Option<String>,
) -> Result<(), ApiError> {
    let named;
    let t = match selected {
        Some(name) if t.name.is_none() && matches!(verb, "list" | "watch") => {
            named = Target {
                name: Some(name),
                ..t.clone()
            };
            &named
        }
        _ => t,
    };
    match decide(who, verb, t) {
        Decision::Allow => Ok(()),
        Decision::Deny => Err(forbidden(who, verb, t)),
        Decision::DenyBecause(why) => Err(forbidden_because(who, verb, t, why)),
        Decision::IfSecretOfPodOnNode(node) => {
            if secret_of_pod_on_node(o, &node, t).await {
                Ok(())
            } else {
                let why = format!("no relationship found between node '{node}' and this object");
                Err(forbidden_because(who, verb, t, &why))
            }
        }
        Decision::IfPodOnNode(node) => {
            let name = t.name.as_deref().unwrap_or_default();
            let bound = match o.store.get(&key(t, Some(name))).await {
                Ok(Some(kv)) => serde_json::from_slice::<Value>(&kv.value)
                    .ok()
                    .and_then(|p| {
                        p.pointer("/spec/nodeName")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    }),
                _ => None,
            };
            if bound.as_deref() == Some(node.as_str()) {
                Ok(())
            } else {
                Err(forbidden(who, verb, t))
            }
        }
    }
}

/// NodeRestriction on a create, where the name is in the body: a node
/// creates only its own Node and its own Lease (kube-apiserver's
/// admission answers with the same words).
pub fn check_created(who: &Identity, t: &Target, body: &Value) -> Result<(), ApiError> {
    let Identity::Node { name: node } = who else {
        return Ok(());
    };
    let r = t.resource;
    let what = match (r.group, r.name) {
        ("", "nodes") => "node",
        ("coordination.k8s.io", "leases") => "lease",
        _ => return Ok(()),
    };
    let named = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if named == node {
        return Ok(());
    }
    let mut e = ApiError::forbidden(
        &who.user(),
        &format!(
            "create resource \"{}\" in API group \"{}\"",
            r.name, r.group
        ),
    );
    e.message = format!(
        "{} {named:?} is forbidden: node {node:?} is not allowed to modify {what} {named:?}",
        r.name
    );
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;

    fn d(who: &Identity, verb: &str, path: &str) -> Decision {
        decide(who, verb, &resolve(path).expect(path))
    }

    #[test]
    fn nodes_read_and_write_only_their_own() {
        let n1 = Identity::Node {
            name: "node-1".into(),
        };
        assert_eq!(d(&n1, "list", "/api/v1/pods"), Decision::Allow);
        assert_eq!(
            d(&n1, "get", "/api/v1/namespaces/default/services/web"),
            Decision::Allow
        );
        assert_eq!(
            d(&n1, "update", "/api/v1/nodes/node-1/status"),
            Decision::Allow
        );
        assert_eq!(d(&n1, "patch", "/api/v1/nodes/node-1"), Decision::Allow);
        assert_eq!(
            d(&n1, "update", "/api/v1/nodes/node-2/status"),
            Decision::Deny
        );
        assert_eq!(d(&n1, "delete", "/api/v1/nodes/node-1"), Decision::Deny);
        assert_eq!(
            d(
                &n1,
                "update",
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"
            ),
            Decision::Allow
        );
        assert_eq!(
            d(
                &n1,
                "update",
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-2"
            ),
            Decision::Deny
        );
        assert_eq!(
            d(&n1, "update", "/api/v1/namespaces/default/pods/web/status"),
            Decision::IfPodOnNode("node-1".into())
        );
        assert_eq!(
            d(&n1, "update", "/api/v1/namespaces/default/pods/web"),
            Decision::Deny
        );
        assert_eq!(
            d(&n1, "delete", "/api/v1/namespaces/default/pods/web"),
            Decision::IfPodOnNode("node-1".into())
        );
        // Its own drain: evictions of the pods bound to it, nothing else.
        assert_eq!(
            d(
                &n1,
                "create",
                "/api/v1/namespaces/default/pods/web/eviction"
            ),
            Decision::IfPodOnNode("node-1".into())
        );
        assert_eq!(
            d(&n1, "create", "/api/v1/namespaces/default/pods"),
            Decision::Deny
        );
        assert_eq!(
            d(&n1, "create", "/api/v1/namespaces/default/services"),
            Decision::Deny
        );
        assert_eq!(
            d(&n1, "delete", "/apis/sluice.dev/v1/nodepools/p"),
            Decision::Deny
        );
        // NodeRestriction: a node reads a workload's scale, never sets it.
        for verb in ["update", "patch"] {
            for path in [
                "/apis/apps/v1/namespaces/default/deployments/web/scale",
                "/apis/apps/v1/namespaces/default/replicasets/web/scale",
            ] {
                assert_eq!(d(&n1, verb, path), Decision::Deny, "{verb} {path}");
            }
        }
        assert_eq!(
            d(
                &n1,
                "get",
                "/apis/apps/v1/namespaces/default/deployments/web/scale"
            ),
            Decision::Allow
        );
        let admin = Identity::Admin {
            user: "admin".into(),
        };
        assert_eq!(d(&admin, "delete", "/api/v1/nodes/node-1"), Decision::Allow);
    }

    #[test]
    fn nodes_read_single_secrets_and_write_none() {
        let n1 = Identity::Node {
            name: "node-1".into(),
        };
        let ns = "/api/v1/namespaces/default/secrets";
        assert_eq!(
            d(&n1, "get", &format!("{ns}/db")),
            Decision::IfSecretOfPodOnNode("node-1".into())
        );
        for verb in ["list", "watch"] {
            assert_eq!(
                d(&n1, verb, ns),
                Decision::DenyBecause("No Object name found")
            );
            assert_eq!(
                d(&n1, verb, "/api/v1/secrets"),
                Decision::DenyBecause("No Object name found")
            );
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert_eq!(
                d(&n1, verb, &format!("{ns}/db")),
                Decision::DenyBecause("can only read resources of this type"),
                "{verb}"
            );
        }
        // ConfigMaps stay readable to nodes; none writes them.
        assert_eq!(
            d(&n1, "list", "/api/v1/namespaces/default/configmaps"),
            Decision::Allow
        );
        assert_eq!(
            d(&n1, "create", "/api/v1/namespaces/default/configmaps"),
            Decision::Deny
        );
        let admin = Identity::Admin {
            user: "admin".into(),
        };
        assert_eq!(d(&admin, "list", "/api/v1/secrets"), Decision::Allow);
        assert_eq!(
            d(&Identity::LoadBalancer, "get", &format!("{ns}/db")),
            Decision::Deny
        );
    }

    #[test]
    fn one_selected_name_counts_as_the_request_name() {
        let q = |v: &str| HashMap::from([("fieldSelector".to_string(), v.to_string())]);
        assert_eq!(selected_name(&q("metadata.name=db")).as_deref(), Some("db"));
        assert_eq!(
            selected_name(&q("metadata.name==db")).as_deref(),
            Some("db")
        );
        for other in [
            "",
            "metadata.name=",
            "metadata.name=a,type=x",
            "type=x",
            "metadata.name!=db",
        ] {
            assert_eq!(selected_name(&q(other)), None, "{other}");
        }
        assert_eq!(selected_name(&HashMap::new()), None);
    }

    #[test]
    fn pods_use_secrets_where_upstream_looks() {
        use serde_json::json;
        let uses = |spec: Value| pod_uses_secret(&json!({ "spec": spec }), "s");
        for spec in [
            json!({"imagePullSecrets": [{"name": "s"}]}),
            json!({"containers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
            json!({"initContainers": [{"envFrom": [{"secretRef": {"name": "s"}}]}]}),
            json!({"ephemeralContainers": [{"envFrom": [{"secretRef": {"name": "s"}}]}]}),
            json!({"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}),
            json!({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "s"}}, {"secret": {"name": "s"}}]}}]}),
            json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]}),
            json!({"volumes": [{"name": "v", "rbd": {"secretRef": {"name": "s"}}}]}),
            json!({"volumes": [{"name": "v", "azureFile": {"secretName": "s"}}]}),
        ] {
            assert!(uses(spec.clone()), "{spec}");
        }
        for spec in [
            json!({}),
            json!({"containers": [{"envFrom": [{"configMapRef": {"name": "s"}}]}]}),
            json!({"containers": [{"env": [{"name": "s", "value": "s"}]}]}),
            json!({"volumes": [{"name": "s", "configMap": {"name": "s"}}]}),
            json!({"imagePullSecrets": [{"name": "t"}]}),
            json!({"volumes": "s", "containers": 3}),
        ] {
            assert!(!uses(spec.clone()), "{spec}");
        }
    }

    #[test]
    fn the_load_balancer_reads_its_four_kinds_and_nothing_else() {
        let lb = Identity::LoadBalancer;
        for path in [
            "/apis/sluice.dev/v1/namespaces/default/l4loadbalancers/web",
            "/apis/sluice.dev/v1/l4loadbalancers",
            "/apis/sluice.dev/v1/namespaces/default/healthchecks",
            "/apis/sluice.dev/v1/namespaces/default/networkendpointgroups/web.zone-a",
            "/apis/sluice.dev/v1/instancegroups/zone-a",
        ] {
            for verb in ["get", "list", "watch"] {
                assert_eq!(d(&lb, verb, path), Decision::Allow, "{verb} {path}");
            }
            for verb in ["create", "update", "patch", "delete"] {
                assert_eq!(d(&lb, verb, path), Decision::Deny, "{verb} {path}");
            }
        }
        for path in [
            "/api/v1/nodes",
            "/api/v1/namespaces/default/services",
            "/api/v1/namespaces/default/pods",
            "/apis/sluice.dev/v1/clusters",
            "/apis/sluice.dev/v1/nodepools",
        ] {
            assert_eq!(d(&lb, "list", path), Decision::Deny, "{path}");
        }
    }
}
