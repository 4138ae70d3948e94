//! Who may do what: an admin everything; a node (`system:node:<name>`)
//! what Kubernetes' Node authorizer and NodeRestriction admission let a
//! kubelet do — read, and write only its own Node, its own Lease and the
//! status of pods bound to it (plus Events, which kubelets report); the
//! load balancer (`system:sluice:load-balancer`) only reads its four
//! `sluice.dev` kinds.

use axum::http::Method;
use serde_json::Value;

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
}

/// The decision, without I/O.
pub fn decide(who: &Identity, verb: &str, t: &Target) -> Decision {
    let node = match who {
        Identity::Admin { .. } => return Decision::Allow,
        Identity::Node { name } => name,
        Identity::LoadBalancer => return load_balancer(verb, t),
    };
    if matches!(verb, "get" | "list" | "watch") {
        return Decision::Allow;
    }
    let r = t.resource;
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

/// Allow or refuse with a 403 `Status`.
pub async fn check(o: &Objects, who: &Identity, verb: &str, t: &Target) -> Result<(), ApiError> {
    match decide(who, verb, t) {
        Decision::Allow => Ok(()),
        Decision::Deny => Err(forbidden(who, verb, t)),
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
    use crate::api::path::resolve;

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
