//! From the desired state to what the per-Service health servers answer.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::state::{DesiredState, ServiceInfo, TrafficPolicy};

/// One `Local` Service's health check on this node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceHealthEntry {
    pub namespace: String,
    pub name: String,
    /// `healthCheckNodePort`; `None` means the check is answered on the node
    /// server under `/service/<namespace>/<name>` (see the module docs).
    pub port: Option<u16>,
    /// This node's ready, non-terminating endpoints (H3).
    pub local_endpoints: u32,
}

/// This node's endpoints of `svc` that may take new connections (H3): on this
/// node, ready, not terminating. A pod listed once per IP family (dual-stack
/// slices) is one pod, so the count is the larger of the two families'
/// distinct addresses rather than their sum.
pub fn local_endpoint_count(svc: &ServiceInfo, node: &str) -> u32 {
    let mut v4 = BTreeSet::new();
    let mut v6 = BTreeSet::new();
    for ep in &svc.endpoints {
        if ep.node.as_deref() != Some(node) || !ep.ready || ep.terminating {
            continue;
        }
        match ep.addr {
            IpAddr::V4(a) => {
                v4.insert(a);
            }
            IpAddr::V6(a) => {
                v6.insert(a);
            }
        }
    }
    u32::try_from(v4.len().max(v6.len())).unwrap_or(u32::MAX)
}

/// The health entries of every `Local` LoadBalancer Service, sorted by
/// namespace and name. `Cluster` Services have none: the node server answers
/// for them (H2). A Service counts as a LoadBalancer when it has a
/// health-check port (only LoadBalancer Services get one) or an ingress VIP.
pub fn service_health_entries(state: &DesiredState, node: &str) -> Vec<ServiceHealthEntry> {
    let mut out: Vec<ServiceHealthEntry> = state
        .services
        .values()
        .filter(|s| s.policy == TrafficPolicy::Local)
        .filter(|s| s.health_check_node_port.is_some() || !s.vips.is_empty())
        .map(|s| {
            let (namespace, name) = split_key(&s.key);
            ServiceHealthEntry {
                namespace: namespace.to_string(),
                name: name.to_string(),
                port: s.health_check_node_port,
                local_endpoints: local_endpoint_count(s, node),
            }
        })
        .collect();
    out.sort();
    out
}

/// The entries already offered, each count lowered to what `next` says
/// where that is lower; Services that come or go wait for the next full
/// offer. Offered before the maps change, so a pod turning terminating or
/// unready fails the `Local` check at once (H3), even if the map update then
/// fails and is retried, while a pod turning ready is counted only once the
/// maps hold it.
pub fn lowered_entries(
    offered: &[ServiceHealthEntry],
    next: &[ServiceHealthEntry],
) -> Vec<ServiceHealthEntry> {
    offered
        .iter()
        .map(|o| {
            let same = next
                .iter()
                .find(|n| n.namespace == o.namespace && n.name == o.name && n.port == o.port);
            ServiceHealthEntry {
                local_endpoints: same.map_or(o.local_endpoints, |n| {
                    n.local_endpoints.min(o.local_endpoints)
                }),
                ..o.clone()
            }
        })
        .collect()
}

/// `namespace/name`; a key without a namespace is in `default`.
fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::EndpointInfo;

    fn ep(addr: &str, node: &str, ready: bool, serving: bool, terminating: bool) -> EndpointInfo {
        EndpointInfo {
            addr: addr.parse().expect("test address"),
            node: Some(node.into()),
            ready,
            serving,
            terminating,
            ports: Default::default(),
        }
    }

    fn svc(
        key: &str,
        policy: TrafficPolicy,
        hcnp: Option<u16>,
        eps: Vec<EndpointInfo>,
    ) -> ServiceInfo {
        ServiceInfo {
            key: key.to_string(),
            policy,
            affinity_timeout_s: None,
            health_check_node_port: hcnp,
            vips: vec!["203.0.113.10".parse().expect("vip")],
            ports: Vec::new(),
            endpoints: eps,
        }
    }

    fn state(svcs: Vec<ServiceInfo>) -> DesiredState {
        let mut s = DesiredState::default();
        for v in svcs {
            s.services.insert(v.key.clone(), v);
        }
        s
    }

    fn entry(name: &str, port: Option<u16>, n: u32) -> ServiceHealthEntry {
        ServiceHealthEntry {
            namespace: "ns".into(),
            name: name.into(),
            port,
            local_endpoints: n,
        }
    }

    // spec: H3 — a pod turning terminating drops out of the count before the
    // maps change; one turning ready is not counted early.
    #[test]
    fn lowered_entries_only_go_down() {
        let offered = vec![entry("a", Some(30000), 2), entry("b", None, 1)];
        let next = vec![
            entry("a", Some(30000), 1),
            entry("b", None, 3),
            entry("new", Some(30001), 0),
        ];
        assert_eq!(
            lowered_entries(&offered, &next),
            vec![entry("a", Some(30000), 1), entry("b", None, 1)]
        );
        // A Service gone from `next` keeps its count until the full offer.
        assert_eq!(lowered_entries(&offered, &[]), offered);
    }

    // spec: H3 — no serving pod on the node: 0 local endpoints (fails).
    #[test]
    fn no_endpoint_on_this_node() {
        let s = svc(
            "ns/a",
            TrafficPolicy::Local,
            Some(30000),
            vec![ep("10.0.1.5", "other", true, true, false)],
        );
        assert_eq!(local_endpoint_count(&s, "me"), 0);
    }

    // spec: H3 — a ready, non-terminating local pod counts.
    #[test]
    fn ready_local_endpoint_counts() {
        let s = svc(
            "ns/a",
            TrafficPolicy::Local,
            Some(30000),
            vec![
                ep("10.0.0.5", "me", true, true, false),
                ep("10.0.0.6", "me", true, true, false),
                ep("10.0.1.5", "other", true, true, false),
            ],
        );
        assert_eq!(local_endpoint_count(&s, "me"), 2);
    }

    // spec: H3 — pods failing readiness do not count.
    #[test]
    fn failing_readiness_does_not_count() {
        let s = svc(
            "ns/a",
            TrafficPolicy::Local,
            Some(30000),
            vec![ep("10.0.0.5", "me", false, false, false)],
        );
        assert_eq!(local_endpoint_count(&s, "me"), 0);
    }

    // spec: H3 — only terminating pods (even still serving): fail.
    #[test]
    fn terminating_only_does_not_count() {
        let s = svc(
            "ns/a",
            TrafficPolicy::Local,
            Some(30000),
            vec![
                ep("10.0.0.5", "me", false, true, true),
                ep("10.0.0.6", "me", true, true, true),
            ],
        );
        assert_eq!(local_endpoint_count(&s, "me"), 0);
    }

    #[test]
    fn dual_stack_pod_counts_once_and_duplicates_collapse() {
        let s = svc(
            "ns/a",
            TrafficPolicy::Local,
            Some(30000),
            vec![
                ep("10.0.0.5", "me", true, true, false),
                ep("10.0.0.5", "me", true, true, false),
                ep("fd00::5", "me", true, true, false),
            ],
        );
        assert_eq!(local_endpoint_count(&s, "me"), 1);
    }

    // spec: H2 — Cluster services get no per-service server; spec: H3 — Local
    // ones do, with their own port or none (answered on 10256).
    #[test]
    fn entries_only_for_local_load_balancers() {
        let mut not_lb = svc("ns/internal", TrafficPolicy::Local, None, vec![]);
        not_lb.vips.clear();
        let st = state(vec![
            svc(
                "ns/cluster",
                TrafficPolicy::Cluster,
                Some(30001),
                vec![ep("10.0.0.5", "me", true, true, false)],
            ),
            svc(
                "ns/local",
                TrafficPolicy::Local,
                Some(30002),
                vec![ep("10.0.0.5", "me", true, true, false)],
            ),
            svc("ns/noport", TrafficPolicy::Local, None, vec![]),
            not_lb,
        ]);
        let e = service_health_entries(&st, "me");
        assert_eq!(
            e,
            vec![
                ServiceHealthEntry {
                    namespace: "ns".into(),
                    name: "local".into(),
                    port: Some(30002),
                    local_endpoints: 1
                },
                ServiceHealthEntry {
                    namespace: "ns".into(),
                    name: "noport".into(),
                    port: None,
                    local_endpoints: 0
                },
            ]
        );
    }
}
