//! The mapping on fixtures written as the API server serves them.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::pods::{EvictionReason, PoolKind};
use crate::state::model::{Protocol, TargetPort, TrafficPolicy};

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> Arc<K> {
    Arc::new(serde_json::from_value(v).expect("fixture decodes"))
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("fixture address")
}

fn node(name: &str, addr: &str, cidr: &str) -> Arc<Node> {
    obj(json!({
        "metadata": {"name": name},
        "spec": {"podCIDRs": [cidr]},
        "status": {"addresses": [
            {"type": "Hostname", "address": name},
            {"type": "InternalIP", "address": addr},
        ]},
    }))
}

fn lb_service(name: &str, vip: &str, port: i32, extra_spec: Value) -> Arc<Service> {
    let mut spec = json!({
        "type": "LoadBalancer",
        "ports": [{"name": "http", "port": port, "protocol": "TCP", "targetPort": "web"}],
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(e.clone());
    }
    obj(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": [{"ip": vip}]}},
    }))
}

fn slice(name: &str, service: &str, endpoints: Value) -> Arc<EndpointSlice> {
    obj(json!({
        "metadata": {
            "name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
}

fn pod(name: &str, node: &str, ip: &str, extra: Value) -> Arc<Pod> {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "web", "command": ["/bin/web"]}],
        },
        "status": {"podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]},
    });
    merge(&mut v, extra);
    obj(v)
}

/// `extra` laid over `v`, objects merged key by key.
fn merge(v: &mut Value, extra: Value) {
    match (v, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, x) in b {
                merge(a.entry(k).or_insert(Value::Null), x);
            }
        }
        (v, x) => *v = x,
    }
}

fn fault_objects(m: &Mapped) -> Vec<&str> {
    m.faults.iter().map(|f| f.object.as_str()).collect()
}

#[test]
fn nodes_keep_internal_ips_cidrs_taints_and_the_sluice_keys() {
    let n = obj::<Node>(json!({
        "metadata": {
            "name": "node-1",
            "deletionTimestamp": "2026-11-23T10:00:00Z",
            "annotations": {"sluice.dev/drain": "NodeUpgrade", "sluice.dev/cordoned-at": "2026-11-23T09:00:00Z"},
            "labels": {"sluice.dev/pool-kind": "autopilot"},
        },
        "spec": {
            "podCIDRs": ["198.19.1.0/24", "fd00:19:1::/64"],
            "unschedulable": true,
            "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}],
        },
        "status": {"addresses": [
            {"type": "ExternalIP", "address": "198.18.9.9"},
            {"type": "InternalIP", "address": "198.18.0.11"},
            {"type": "InternalIP", "address": "fd00:18::11"},
        ]},
    }));
    let m = map_snapshot(&Snapshot {
        nodes: vec![n],
        ..Snapshot::default()
    });
    assert!(m.faults.is_empty(), "{:?}", m.faults);
    let info = &m.state.nodes["node-1"];
    assert_eq!(info.addrs, vec![ip("198.18.0.11"), ip("fd00:18::11")]);
    assert_eq!(info.pod_cidrs.len(), 2);
    assert_eq!(info.taints, vec!["ToBeDeletedByClusterAutoscaler"]);
    assert!(info.deleting && info.unschedulable);
    assert_eq!(info.drain, Some(EvictionReason::NodeUpgrade));
    assert_eq!(info.pool, PoolKind::Autopilot);
    assert!(!info.cordoned_by_agent);
    // spec: A3 — the controller's cordon time, read off the Node.
    let at: sluice_model::k8s::jiff::Timestamp = "2026-11-23T09:00:00Z".parse().expect("a time");
    assert_eq!(info.cordoned_at, Some(std::time::SystemTime::from(at)));
}

// A request that cannot be read (a typo in `sluice.dev/drain`,
// `sluice.dev/evict` or the pool kind) is named, and the object kept
// without it: the Node stays in the state (its agent would otherwise apply
// nothing more), the Pod keeps running (its agent would otherwise stop it).
#[test]
fn an_unreadable_request_is_named_and_the_object_kept_without_it() {
    let n = obj::<Node>(json!({
        "metadata": {
            "name": "node-1",
            "annotations": {"sluice.dev/drain": "NodeUpgrde", "sluice.dev/drain-cordoned": "true", "sluice.dev/cordoned-at": "yesterday"},
            "labels": {"sluice.dev/pool-kind": "autopilot"},
        },
        "spec": {"podCIDRs": ["198.19.1.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.11"}]},
    }));
    let p = pod(
        "web-1",
        "node-1",
        "198.19.1.5",
        json!({"metadata": {"annotations": {"sluice.dev/evict": "later"}}}),
    );
    let m = map_snapshot(&Snapshot {
        nodes: vec![n],
        pods: vec![p],
        ..Snapshot::default()
    });
    let info = &m.state.nodes["node-1"];
    assert_eq!(info.drain, None);
    assert_eq!(
        info.pool,
        PoolKind::Autopilot,
        "the rest of the Node counts"
    );
    assert!(info.cordoned_by_agent);
    // An unreadable cordon time is dropped, not a fault: the drain counts
    // from when the agent saw it.
    assert_eq!(info.cordoned_at, None);
    assert_eq!(m.state.pods["default/web-1"].evict, None);
    let fields: Vec<(&str, &str)> = m
        .faults
        .iter()
        .map(|f| (f.object.as_str(), f.field.as_str()))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("Node node-1", "metadata.annotations[sluice.dev/drain]"),
            (
                "Pod default/web-1",
                "metadata.annotations[sluice.dev/evict]"
            ),
        ]
    );
    assert!(m.faults[0].message.contains("NodeUpgrde"), "{:?}", m.faults);
}

#[test]
fn services_get_their_endpoints_from_every_slice_with_conditions_and_ports() {
    let snap = Snapshot {
        services: vec![lb_service(
            "web",
            "198.18.100.1",
            80,
            json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 30100}),
        )],
        slices: vec![
            slice(
                "web-a",
                "web",
                json!([
                    {"addresses": ["198.19.1.5"], "nodeName": "node-1",
                     "conditions": {"ready": true, "serving": true, "terminating": false}},
                    {"addresses": ["198.19.2.5"], "nodeName": "node-2",
                     "conditions": {"ready": false, "serving": true, "terminating": true}},
                ]),
            ),
            // A second slice of the same Service; and one of no Service.
            slice(
                "web-b",
                "web",
                json!([{"addresses": ["198.19.1.6"], "nodeName": "node-1"}]),
            ),
            slice("orphan", "gone", json!([{"addresses": ["198.19.1.7"]}])),
        ],
        ..Snapshot::default()
    };
    let m = map_snapshot(&snap);
    assert!(m.faults.is_empty(), "{:?}", m.faults);
    let svc = &m.state.services["default/web"];
    assert_eq!(svc.policy, TrafficPolicy::Local);
    assert_eq!(svc.health_check_node_port, Some(30100));
    assert_eq!(svc.vips, vec![ip("198.18.100.1")]);
    assert_eq!(svc.ports[0].target, TargetPort::Name("web".into()));
    let got: Vec<(IpAddr, Option<&str>, bool, bool, bool)> = svc
        .endpoints
        .iter()
        .map(|e| (e.addr, e.node.as_deref(), e.ready, e.serving, e.terminating))
        .collect();
    assert_eq!(
        got,
        vec![
            (ip("198.19.1.5"), Some("node-1"), true, true, false),
            // No conditions: ready and serving, as Kubernetes reads it.
            (ip("198.19.1.6"), Some("node-1"), true, true, false),
            (ip("198.19.2.5"), Some("node-2"), false, true, true),
        ]
    );
    let port = svc.endpoints[0]
        .ports
        .get(&("http".to_string(), Protocol::Tcp));
    assert_eq!(port, Some(&8080));
}

#[test]
fn an_invalid_object_is_left_out_and_named_and_the_others_kept() {
    let bad_port = obj::<Service>(json!({
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 0}]},
    }));
    let bad_slice = obj::<EndpointSlice>(json!({
        "metadata": {"name": "web-x", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["not-an-ip"]}],
    }));
    let snap = Snapshot {
        nodes: vec![
            node("node-1", "198.18.0.11", "198.19.1.0/24"),
            obj(json!({"metadata": {"name": "node-9"},
                       "status": {"addresses": [{"type": "InternalIP", "address": "nine"}]}})),
        ],
        services: vec![bad_port, lb_service("web", "198.18.100.1", 80, json!({}))],
        slices: vec![
            bad_slice,
            slice("web-a", "web", json!([{"addresses": ["198.19.1.5"]}])),
        ],
        ..Snapshot::default()
    };
    let m = map_snapshot(&snap);
    assert_eq!(
        fault_objects(&m),
        vec![
            "EndpointSlice default/web-x",
            "Node node-9",
            "Service default/bad"
        ]
    );
    let shown: Vec<String> = m.faults.iter().map(ToString::to_string).collect();
    assert!(
        shown.contains(&"Service default/bad: spec.ports[0].port: must be 1-65535, got 0".into()),
        "{shown:?}"
    );
    assert!(
        shown.contains(
            &"Node node-9: status.addresses[0].address: \"nine\" is not an IP address".into()
        ),
        "{shown:?}"
    );
    assert!(m.state.nodes.contains_key("node-1"));
    assert_eq!(m.state.services["default/web"].endpoints.len(), 1);
}

#[test]
fn the_later_of_two_services_claiming_a_frontend_or_health_port_is_left_out() {
    let snap = Snapshot {
        services: vec![
            lb_service("b", "198.18.100.1", 80, json!({})),
            lb_service("a", "198.18.100.1", 80, json!({})),
            lb_service(
                "c",
                "198.18.100.2",
                80,
                json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 10256}),
            ),
        ],
        ..Snapshot::default()
    };
    let m = map_snapshot(&snap);
    // Name order decides, whatever order the store lists them in.
    assert_eq!(
        m.state.services.keys().collect::<Vec<_>>(),
        vec!["default/a"]
    );
    let shown: Vec<String> = m.faults.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        vec![
            "Service default/b: spec.ports[0]: 198.18.100.1 port 80 TCP is already Service default/a's",
            "Service default/c: spec.healthCheckNodePort: port 10256 is the node's own health port",
        ]
    );
}

#[test]
fn pods_bound_here_become_pods_to_run_and_ended_or_clashing_ones_do_not() {
    let snap = Snapshot {
        nodes: vec![node("node-1", "198.18.0.11", "198.19.1.0/24")],
        pods: vec![
            pod(
                "web-1",
                "node-1",
                "198.19.1.5",
                json!({"metadata": {"annotations": {"sluice.dev/evict": "UserDrain"}}}),
            ),
            pod("web-2", "node-1", "198.19.1.5", json!({})),
            pod("outside", "node-1", "198.19.7.5", json!({})),
            pod(
                "done",
                "node-1",
                "198.19.1.9",
                json!({"status": {"phase": "Succeeded"}}),
            ),
            pod(
                "host",
                "node-1",
                "198.18.0.11",
                json!({"spec": {"hostNetwork": true}}),
            ),
        ],
        ..Snapshot::default()
    };
    let m = map_snapshot(&snap);
    assert_eq!(
        m.state.pods.keys().collect::<Vec<_>>(),
        vec!["default/host", "default/web-1"]
    );
    let web = &m.state.pods["default/web-1"];
    assert_eq!(web.node, "node-1");
    assert_eq!(web.ips, vec![ip("198.19.1.5")]);
    assert_eq!(web.ready, Some(true));
    assert_eq!(web.evict, Some(EvictionReason::UserDrain));
    assert_eq!(web.run.containers[0].argv, vec!["/bin/web"]);
    assert_eq!(web.labels.get("app").map(String::as_str), Some("web"));
    let shown: Vec<String> = m.faults.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        vec![
            "Pod default/outside: status.podIPs[0].ip: 198.19.7.5 is outside Node node-1's spec.podCIDRs (198.19.1.0/24)",
            "Pod default/web-2: status.podIPs[0].ip: 198.19.1.5 is already Pod default/web-1's address",
        ]
    );
}

#[test]
fn budgets_are_read_and_one_asking_for_nothing_is_named() {
    let snap = Snapshot {
        pdbs: vec![
            obj(json!({
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            })),
            obj(json!({
                "metadata": {"name": "empty", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "x"}}},
            })),
        ],
        ..Snapshot::default()
    };
    let m = map_snapshot(&snap);
    assert_eq!(m.state.pdbs.keys().collect::<Vec<_>>(), vec!["default/web"]);
    assert_eq!(m.state.pdbs["default/web"].namespace, "default");
    assert_eq!(fault_objects(&m), vec!["PodDisruptionBudget default/empty"]);
}

#[test]
fn the_same_objects_in_any_order_map_alike() {
    let a = vec![
        lb_service("x", "198.18.100.1", 80, json!({})),
        lb_service("y", "198.18.100.2", 80, json!({})),
    ];
    let slices = vec![
        slice("x-1", "x", json!([{"addresses": ["198.19.1.5"]}])),
        slice("x-2", "x", json!([{"addresses": ["198.19.1.4"]}])),
    ];
    let one = map_snapshot(&Snapshot {
        services: a.clone(),
        slices: slices.clone(),
        ..Snapshot::default()
    });
    let two = map_snapshot(&Snapshot {
        services: a.into_iter().rev().collect(),
        slices: slices.into_iter().rev().collect(),
        ..Snapshot::default()
    });
    assert_eq!(one, two);
    let addrs: Vec<IpAddr> = one.state.services["default/x"]
        .endpoints
        .iter()
        .map(|e| e.addr)
        .collect();
    assert_eq!(addrs, vec![ip("198.19.1.4"), ip("198.19.1.5")]);
}

/// A pod as `kubectl create` leaves it: bound, no status yet.
fn new_pod(name: &str, node: &str) -> Arc<Pod> {
    obj(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "command": ["/bin/web"]}],
        },
        "status": {"phase": "Pending"},
    }))
}

#[test]
fn pods_without_status_addresses_get_one_per_family_from_the_node_cidrs_at_once() {
    let dual: Arc<Node> = obj(json!({
        "metadata": {"name": "node-1"},
        "spec": {"podCIDRs": ["198.19.1.0/24", "fd00:19:1::/64"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.11"}]},
    }));
    let mut snap = Snapshot {
        nodes: vec![dual],
        pods: vec![
            new_pod("b", "node-1"),
            new_pod("a", "node-1"),
            // Its status is the record: kept, and its address skipped.
            pod("held", "node-1", "198.19.1.2", json!({})),
        ],
        ..Snapshot::default()
    };
    let mut ipam = super::super::ipam::Ipam::default();
    let m = map_snapshot_assigning(&snap, "node-1", &mut ipam);
    assert!(m.faults.is_empty(), "{:?}", m.faults);
    let a = &m.state.pods["default/a"];
    assert_eq!(a.ips, vec![ip("198.19.1.3"), ip("fd00:19:1::2")]);
    assert_eq!(a.run.ips, a.ips, "the runtime wires what the state says");
    assert_eq!(
        m.state.pods["default/b"].ips,
        vec![ip("198.19.1.4"), ip("fd00:19:1::3")]
    );
    assert_eq!(m.state.pods["default/held"].ips, vec![ip("198.19.1.2")]);
    assert_eq!(a.uid.as_deref(), Some("uid-a"));
    // Rebuilt after "a" left: "b" keeps its addresses.
    snap.pods.remove(1);
    let m = map_snapshot_assigning(&snap, "node-1", &mut ipam);
    assert_eq!(
        m.state.pods["default/b"].ips,
        vec![ip("198.19.1.4"), ip("fd00:19:1::3")]
    );
    // Without IPAM (the state file) nothing is assigned.
    let m = map_snapshot(&snap);
    assert!(m.state.pods["default/b"].ips.is_empty());
}

#[test]
fn a_pod_the_full_node_range_cannot_hold_is_left_out_naming_the_cidr() {
    let tiny: Arc<Node> = obj(json!({
        "metadata": {"name": "node-1"},
        "spec": {"podCIDRs": ["198.19.1.0/30"]},
    }));
    let snap = Snapshot {
        nodes: vec![tiny],
        pods: vec![new_pod("a", "node-1"), new_pod("b", "node-1")],
        ..Snapshot::default()
    };
    let m = map_snapshot_assigning(&snap, "node-1", &mut super::super::ipam::Ipam::default());
    assert_eq!(m.state.pods["default/a"].ips, vec![ip("198.19.1.2")]);
    assert!(!m.state.pods.contains_key("default/b"));
    assert_eq!(fault_objects(&m), vec!["Pod default/b"]);
    assert!(
        m.faults[0].message.contains("198.19.1.0/30"),
        "{}",
        m.faults[0]
    );
}
