//! What the PodDisruptionBudgets see of each pod (E6).
//!
//! A budget counts healthy pods cluster-wide, but the agent only observes
//! its own. So:
//!
//! - pods on this node: what the agent observes (running and passing
//!   readiness, not terminating); it plays the kubelet for them, and the
//!   file's status of its own pods lags behind it;
//! - pods on other nodes: the file. The Pod's `Ready` condition when it has
//!   one; else the EndpointSlice conditions of its addresses (ready and not
//!   terminating in some slice); else not healthy, as Kubernetes counts a
//!   pod without `Ready=True`.
//!
//! A pod being deleted (`deletionTimestamp`) is never healthy.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::pods::PodHealth;
use crate::state::{DesiredState, PodInfo};

/// Every pod of `state` with its health as the budgets count it;
/// `local_ready` holds this node's pods the agent sees ready.
pub fn pod_health(
    state: &DesiredState,
    node: &str,
    local_ready: &BTreeMap<String, bool>,
) -> Vec<PodHealth> {
    let ready_addrs: BTreeSet<IpAddr> = state
        .services
        .values()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.ready && !e.terminating)
        .map(|e| e.addr)
        .collect();
    state
        .pods
        .values()
        .map(|p| {
            let healthy = !p.deleting
                && if p.node == node {
                    local_ready.get(&p.key).copied().unwrap_or(false)
                } else {
                    healthy_in_file(p, &ready_addrs)
                };
            PodHealth {
                key: p.key.clone(),
                namespace: p
                    .key
                    .split_once('/')
                    .map_or("default", |(ns, _)| ns)
                    .to_string(),
                labels: p.labels.clone(),
                healthy,
            }
        })
        .collect()
}

fn healthy_in_file(pod: &PodInfo, ready_addrs: &BTreeSet<IpAddr>) -> bool {
    pod.ready
        .unwrap_or_else(|| pod.ips.iter().any(|ip| ready_addrs.contains(ip)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::parse_state;

    const FILE: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a}
spec: {podCIDRs: ["198.19.1.0/24"]}
status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
spec: {podCIDRs: ["198.19.2.0/24"]}
status: {addresses: [{type: InternalIP, address: 198.18.0.12}]}
---
kind: Pod
metadata: {name: local, labels: {app: web}}
spec: {nodeName: node-a}
status: {podIPs: [{ip: 198.19.1.10}], conditions: [{type: Ready, status: "True"}]}
---
kind: Pod
metadata: {name: cond-false, labels: {app: web}}
spec: {nodeName: node-b}
status: {podIPs: [{ip: 198.19.2.10}], conditions: [{type: Ready, status: "False"}]}
---
kind: Pod
metadata: {name: by-slice, labels: {app: web}}
spec: {nodeName: node-b}
status: {podIPs: [{ip: 198.19.2.11}]}
---
kind: Pod
metadata: {name: slice-terminating, labels: {app: web}}
spec: {nodeName: node-b}
status: {podIPs: [{ip: 198.19.2.12}]}
---
kind: Pod
metadata: {name: unknown, labels: {app: web}}
spec: {nodeName: node-b}
status: {podIPs: [{ip: 198.19.2.13}]}
---
kind: Pod
metadata: {name: deleting, labels: {app: web}, deletionTimestamp: "2026-11-22T10:00:00Z"}
spec: {nodeName: node-b}
status: {podIPs: [{ip: 198.19.2.14}], conditions: [{type: Ready, status: "True"}]}
---
kind: Service
metadata: {name: web}
spec: {type: LoadBalancer, ports: [{port: 80}]}
---
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [198.19.2.10], nodeName: node-b}
- {addresses: [198.19.2.11], nodeName: node-b, conditions: {ready: true}}
- {addresses: [198.19.2.12], nodeName: node-b, conditions: {ready: false, serving: true, terminating: true}}
"#;

    // spec: E6 — healthy pods are counted from the agent's own observation
    // for its node and from the file (Pod condition first, then slices) for
    // the others.
    #[test]
    fn health_sources() {
        let state = parse_state(FILE).expect("valid");
        let healthy = |local: bool| -> BTreeMap<String, bool> {
            let local_ready = BTreeMap::from([("default/local".to_string(), local)]);
            pod_health(&state, "node-a", &local_ready)
                .into_iter()
                .map(|p| (p.key.trim_start_matches("default/").to_string(), p.healthy))
                .collect()
        };
        let h = healthy(false);
        assert!(!h["local"], "the agent's view wins over the file's Ready");
        assert!(healthy(true)["local"]);
        assert!(!h["cond-false"], "Ready=False wins over a ready endpoint");
        assert!(h["by-slice"]);
        assert!(!h["slice-terminating"]);
        assert!(!h["unknown"], "no condition, no endpoint: not healthy");
        assert!(!h["deleting"]);
    }
}
