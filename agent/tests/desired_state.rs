//! Desired state to map content: the control side's half of the packet-path
//! rules, proven without namespaces.

use sluice_agent::control::pods::{desired_pod_links, gateway4};
use sluice_agent::control::routes::desired_routes;
use sluice_agent::control::{build_content, to_addr, ControlError, MapContent};
use sluice_agent::state::parse_state;
use sluice_datapath::maps::{
    ServiceKey, ServiceValue, EP_F_LOCAL, PROTO_TCP, PROTO_UDP, SVC_F_AFFINITY, SVC_F_LOCAL,
};

mod common;
use common::manifests::{service, slice};

const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a}
spec: {podCIDRs: ["198.19.1.0/24", "fd00:19:1::/64"]}
status: {addresses: [{type: InternalIP, address: 198.18.0.11}, {type: InternalIP, address: "fd00:18::11"}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
spec: {podCIDRs: ["198.19.2.0/24", "fd00:19:2::/64"]}
status: {addresses: [{type: InternalIP, address: 198.18.0.12}, {type: InternalIP, address: "fd00:18::12"}]}
"#;

fn ep(ip: &str, node: &str, ready: bool, serving: bool, terminating: bool) -> String {
    format!(
        "- addresses: [{ip}]\n  conditions: {{ready: {ready}, serving: {serving}, terminating: {terminating}}}\n  nodeName: {node}\n"
    )
}

/// Frontends proper, without the per-VIP marker entries (port 0).
fn real_services(c: &MapContent) -> impl Iterator<Item = (&ServiceKey, &ServiceValue)> {
    c.tables.services.iter().filter(|(k, _)| k.port != 0)
}

fn only_service(c: &MapContent) -> ServiceValue {
    let v: Vec<_> = real_services(c).map(|(_, v)| *v).collect();
    assert_eq!(v.len(), 1, "exactly one frontend expected");
    v[0]
}

fn ip4(s: &str) -> [u8; 16] {
    to_addr(s.parse().expect("test address"))
}

#[test]
fn frontend_key_is_vip_port_protocol() {
    // spec: P1
    let text = format!(
        "{NODES}{}{}",
        service("Cluster", ""),
        slice(&ep("198.19.1.10", "node-a", true, true, false))
    );
    let state = parse_state(&text).expect("valid state");
    let c = build_content(&state, "node-a").expect("content");
    let keys: Vec<_> = real_services(&c).map(|(k, _)| *k).collect();
    assert_eq!(keys.len(), 1);
    let k = keys[0];
    assert_eq!(k.addr, ip4("198.18.100.1"));
    assert_eq!(k.port, 80);
    assert_eq!(k.proto, PROTO_TCP);
}

#[test]
fn endpoints_carry_the_slice_target_port() {
    // spec: P2
    let text = format!(
        "{NODES}{}{}",
        service("Cluster", ""),
        slice(&ep("198.19.2.10", "node-b", true, true, false))
    );
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    assert_eq!(c.tables.endpoints.len(), 1);
    assert_eq!(c.tables.endpoints[0].addr, ip4("198.19.2.10"));
    assert_eq!(c.tables.endpoints[0].port, 8080);
    assert_eq!(
        c.tables.endpoints[0].flags & EP_F_LOCAL,
        0,
        "node-b's pod is remote for node-a"
    );
}

#[test]
fn cluster_policy_sees_every_node_and_snats_to_node_ip() {
    // spec: P3
    let eps = ep("198.19.1.10", "node-a", true, true, false)
        + &ep("198.19.2.10", "node-b", true, true, false);
    let text = format!("{NODES}{}{}", service("Cluster", ""), slice(&eps));
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    let v = only_service(&c);
    assert_eq!(v.flags & SVC_F_LOCAL, 0);
    assert_eq!(v.ready, 2);
    assert_eq!(c.node.addr4, ip4("198.18.0.11"));
    assert!(c.node.snat_port_min > 0 && c.node.snat_port_min <= c.node.snat_port_max);
}

#[test]
fn local_policy_sees_only_this_nodes_endpoints() {
    // spec: P4
    let eps = ep("198.19.1.10", "node-a", true, true, false)
        + &ep("198.19.2.10", "node-b", true, true, false);
    let text = format!("{NODES}{}{}", service("Local", ""), slice(&eps));
    let state = parse_state(&text).expect("valid");
    let a = build_content(&state, "node-a").expect("content");
    let v = only_service(&a);
    assert_ne!(v.flags & SVC_F_LOCAL, 0);
    assert_eq!(v.ready, 1);
    assert_eq!(
        a.tables.endpoints[v.ep_base as usize].addr,
        ip4("198.19.1.10")
    );
    assert_ne!(a.tables.endpoints[v.ep_base as usize].flags & EP_F_LOCAL, 0);
    let b = build_content(&state, "node-b").expect("content");
    assert_eq!(
        b.tables.endpoints[only_service(&b).ep_base as usize].addr,
        ip4("198.19.2.10")
    );
}

#[test]
fn slots_are_ready_first_then_serving_terminating() {
    // spec: P5
    let eps = ep("198.19.1.10", "node-a", false, true, true)
        + &ep("198.19.1.11", "node-a", true, true, false)
        + &ep("198.19.1.12", "node-a", false, false, true) // not serving: never used
        + &ep("198.19.1.13", "node-a", false, false, false); // failing readiness
    let text = format!("{NODES}{}{}", service("Cluster", ""), slice(&eps));
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    let v = only_service(&c);
    assert_eq!((v.ready, v.terminating), (1, 1));
    let base = v.ep_base as usize;
    assert_eq!(c.tables.endpoints[base].addr, ip4("198.19.1.11"));
    assert_eq!(c.tables.endpoints[base + 1].addr, ip4("198.19.1.10"));
    // Maglev covers the ready endpoint only, every entry points at slot 0.
    let m = &c.tables.maglev[v.maglev_base as usize..(v.maglev_base + v.maglev_size) as usize];
    assert!(m.iter().all(|&s| s == 0));
}

#[test]
fn nothing_serving_leaves_an_empty_frontend() {
    // spec: P6 (the program answers with a reset when both counts are zero)
    let text = format!(
        "{NODES}{}{}",
        service("Cluster", ""),
        slice(&ep("198.19.1.10", "node-a", false, false, false))
    );
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    let v = only_service(&c);
    assert_eq!((v.ready, v.terminating, v.maglev_size), (0, 0, 0));
}

#[test]
fn maglev_table_is_prime_and_at_least_100x_the_ready_endpoints() {
    let eps: String = (10..20)
        .map(|i| ep(&format!("198.19.1.{i}"), "node-a", true, true, false))
        .collect();
    let text = format!("{NODES}{}{}", service("Cluster", ""), slice(&eps));
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    let v = only_service(&c);
    assert!(v.maglev_size >= 100 * v.ready);
    assert!((2..v.maglev_size)
        .take_while(|d| d * d <= v.maglev_size)
        .all(|d| !v.maglev_size.is_multiple_of(d)));
    // Every node computes the same table for the same endpoints.
    let b = build_content(&parse_state(&text).expect("valid"), "node-b").expect("content");
    assert_eq!(c.tables.maglev, b.tables.maglev);
}

#[test]
fn session_affinity_client_ip_defaults_to_three_hours() {
    let text = format!(
        "{NODES}{}{}",
        service("Cluster", "sessionAffinity: ClientIP"),
        slice(&ep("198.19.1.10", "node-a", true, true, false))
    );
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    let v = only_service(&c);
    assert_ne!(v.flags & SVC_F_AFFINITY, 0);
    assert_eq!(v.affinity_timeout_s, 10_800);
}

#[test]
fn udp_ports_and_ipv6_vips_become_their_own_frontends() {
    let text = format!(
        r#"{NODES}
---
apiVersion: v1
kind: Service
metadata: {{name: dns}}
spec:
  type: LoadBalancer
  ports: [{{name: dns, port: 53, protocol: UDP}}]
status: {{loadBalancer: {{ingress: [{{ip: 198.18.100.2}}, {{ip: "fd00:18:100::2"}}]}}}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: dns-6, labels: {{kubernetes.io/service-name: dns}}}}
addressType: IPv6
ports: [{{name: dns, port: 5353, protocol: UDP}}]
endpoints: [{{addresses: ["fd00:19:1::10"], nodeName: node-a}}]
"#
    );
    let c = build_content(&parse_state(&text).expect("valid"), "node-a").expect("content");
    assert_eq!(real_services(&c).count(), 2);
    let v6 = real_services(&c)
        .find(|(k, _)| k.addr == to_addr("fd00:18:100::2".parse().expect("v6")))
        .expect("v6 frontend");
    assert_eq!(v6.0.proto, PROTO_UDP);
    assert_eq!(v6.1.ready, 1, "conditions default to ready");
    let v4 = real_services(&c)
        .find(|(k, _)| k.addr == ip4("198.18.100.2"))
        .expect("v4 frontend");
    assert_eq!(v4.1.ready, 0, "IPv6 endpoints never serve an IPv4 VIP");
}

#[test]
fn invalid_files_are_rejected_naming_the_field() {
    let cases = [
        (service("Cluster", "").replace("port: 80,", "port: 70000,"), "spec.ports[0].port"),
        (service("Sideways", ""), "spec.externalTrafficPolicy"),
        (service("Cluster", "").replace("198.18.100.1", "not-an-ip"), "status.loadBalancer.ingress[0].ip"),
        (service("Cluster", "").replace("protocol: TCP", "protocol: ICMP"), "spec.ports[0].protocol"),
        (
            service("Cluster", "sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}"),
            "timeoutSeconds",
        ),
        (slice(&ep("fd00::1", "node-a", true, true, false)), "endpoints[0].addresses[0]"),
        ("---\nkind: ConfigMap\nmetadata: {name: x}\n".to_string(), "kind"),
        ("---\nkind: Service\nmetadata: {name: [\n".to_string(), "YAML"),
    ];
    for (doc, field) in cases {
        let text = format!("{NODES}{doc}");
        let err = parse_state(&text).expect_err(&format!("{field} should be rejected"));
        assert!(
            err.to_string().contains(field),
            "error {err} should name {field}"
        );
    }
}

#[test]
fn a_node_missing_from_the_state_is_an_error() {
    let state = parse_state(NODES).expect("valid");
    assert_eq!(
        build_content(&state, "node-z").err(),
        Some(ControlError::NodeMissing("node-z".into()))
    );
}

/// The node's routes as `DST via GATEWAY`.
fn routes(state: &sluice_agent::state::DesiredState, node: &str) -> Vec<String> {
    desired_routes(state, node)
        .iter()
        .map(|r| format!("{} via {}", r.dst, r.via))
        .collect()
}

#[test]
fn routes_go_to_other_nodes_pod_ranges_via_their_internal_ip() {
    let state = parse_state(NODES).expect("valid");
    assert_eq!(
        routes(&state, "node-a"),
        [
            "198.19.2.0/24 via 198.18.0.12",
            "fd00:19:2::/64 via fd00:18::12"
        ]
    );
}

#[test]
fn no_route_goes_via_one_of_the_node_s_own_addresses() {
    // node-c is dead, its Node not yet gone; node-a was given its addresses.
    let text = format!(
        r#"{NODES}
---
apiVersion: v1
kind: Node
metadata: {{name: node-c}}
spec: {{podCIDRs: ["198.19.3.0/24", "fd00:19:3::/64"]}}
status: {{addresses: [{{type: InternalIP, address: 198.18.0.11}}, {{type: InternalIP, address: "fd00:18::11"}}]}}
"#
    );
    let state = parse_state(&text).expect("valid");
    assert_eq!(
        routes(&state, "node-a"),
        [
            "198.19.2.0/24 via 198.18.0.12",
            "fd00:19:2::/64 via fd00:18::12"
        ]
    );
}

#[test]
fn pods_with_a_netns_are_wired_with_a_stable_short_link_name() {
    let text = format!(
        r#"{NODES}
---
apiVersion: v1
kind: Pod
metadata: {{name: web-1, annotations: {{sluice.dev/netns: sl-x-pod1}}}}
spec: {{nodeName: node-a}}
status: {{podIPs: [{{ip: 198.19.1.10}}, {{ip: "fd00:19:1::10"}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web-2, annotations: {{sluice.dev/netns: sl-x-pod2}}}}
spec: {{nodeName: node-b}}
"#
    );
    let state = parse_state(&text).expect("valid");
    let links = desired_pod_links(&state, "node-a");
    assert_eq!(links.len(), 1);
    let l = &links[0];
    assert_eq!(l.key, "default/web-1");
    assert!(l.host_ifname.len() <= 15);
    assert_eq!(l.netns.to_str(), Some("/run/netns/sl-x-pod1"));
    assert_eq!(l.ipv4, Some("198.19.1.10".parse().expect("v4")));
    assert_eq!(l.ipv6, Some("fd00:19:1::10".parse().expect("v6")));
    assert_eq!(
        gateway4(&state, "node-a"),
        Some("198.19.1.1".parse().expect("gw"))
    );
    assert_eq!(
        desired_pod_links(&state, "node-a")[0].host_ifname,
        l.host_ifname
    );
}

#[test]
fn observed_readiness_of_local_pods_overrides_the_file() {
    // spec: P5 — a local pod being evicted turns terminating at once, and the
    // maps fall back to it only when nothing ready is left.
    use sluice_agent::control::overlay::{with_overlay, LiveConditions, Overlay};
    let eps = ep("198.19.1.10", "node-a", true, true, false)
        + &ep("198.19.2.10", "node-b", true, true, false);
    let text = format!("{NODES}{}{}", service("Cluster", ""), slice(&eps));
    let state = parse_state(&text).expect("valid");
    let mut overlay = Overlay::new();
    let terminating = LiveConditions {
        ready: false,
        serving: true,
        terminating: true,
    };
    overlay.insert("198.19.1.10".parse().expect("ip"), terminating);
    // node-b's endpoint is not ours to observe: the overlay must not touch it.
    overlay.insert("198.19.2.10".parse().expect("ip"), terminating);
    let live = with_overlay(&state, "node-a", &overlay);
    let v = only_service(&build_content(&live, "node-a").expect("content"));
    assert_eq!((v.ready, v.terminating), (1, 1));
    let c = build_content(&live, "node-a").expect("content");
    assert_eq!(
        c.tables.endpoints[v.ep_base as usize].addr,
        ip4("198.19.2.10")
    );
}

#[test]
fn node_taints_and_deletion_are_read() {
    let text = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a, deletionTimestamp: "2026-11-22T10:00:00Z"}
spec:
  unschedulable: true
  taints: [{key: ToBeDeletedByClusterAutoscaler, value: "1700000000", effect: NoSchedule}]
status: {addresses: [{type: InternalIP, address: 198.18.0.11}]}
"#;
    let state = parse_state(text).expect("valid");
    let n = &state.nodes["node-a"];
    assert!(n.deleting && n.unschedulable);
    assert_eq!(n.taints, ["ToBeDeletedByClusterAutoscaler"]);
    let bad = text.replace("effect: NoSchedule", "effect: Sometimes");
    let err = parse_state(&bad).expect_err("bad effect");
    assert!(err.to_string().contains("spec.taints[0].effect"), "{err}");
}

fn pdb(spec: &str) -> String {
    format!(
        r#"
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec:
  {spec}
"#
    )
}

#[test]
fn pod_disruption_budgets_are_read() {
    // spec: E6 — budgets come from the state file, with Kubernetes' fields.
    use sluice_agent::pods::disruption::{
        Budget, IntOrPercent, SelectorOp, UnhealthyPodEvictionPolicy,
    };
    let text = format!(
        "{NODES}{}",
        pdb(r#"minAvailable: "50%"
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: In, values: [front]}, {key: canary, operator: DoesNotExist}]"#)
    );
    let state = parse_state(&text).expect("valid");
    let b = &state.pdbs["default/web"];
    assert_eq!(b.budget, Budget::MinAvailable(IntOrPercent::Percent(50)));
    assert_eq!(b.unhealthy_policy, UnhealthyPodEvictionPolicy::AlwaysAllow);
    let sel = b.selector.as_ref().expect("selector");
    assert_eq!(sel.match_labels["app"], "web");
    assert_eq!(sel.match_expressions.len(), 2);
    assert_eq!(sel.match_expressions[1].1, SelectorOp::DoesNotExist);

    let text = format!("{NODES}{}", pdb("maxUnavailable: 1"));
    let state = parse_state(&text).expect("valid");
    let b = &state.pdbs["default/web"];
    assert_eq!(b.budget, Budget::MaxUnavailable(IntOrPercent::Int(1)));
    assert_eq!(
        b.unhealthy_policy,
        UnhealthyPodEvictionPolicy::IfHealthyBudget
    );
    assert!(b.selector.is_none(), "no selector: selects nothing");
}

#[test]
fn invalid_budgets_are_rejected_naming_the_field() {
    let sel = "selector: {matchLabels: {app: web}}";
    let cases = [
        (pdb(&format!("minAvailable: 1\n  maxUnavailable: 1\n  {sel}")), "spec.minAvailable"),
        (pdb(sel), "spec.minAvailable"),
        (pdb(&format!("minAvailable: \"150%\"\n  {sel}")), "spec.minAvailable"),
        (pdb(&format!("maxUnavailable: \"half\"\n  {sel}")), "spec.maxUnavailable"),
        (pdb(&format!("maxUnavailable: \"3\"\n  {sel}")), "spec.maxUnavailable"),
        (pdb(&format!("maxUnavailable: -1\n  {sel}")), "spec.maxUnavailable"),
        (
            pdb("maxUnavailable: 1\n  unhealthyPodEvictionPolicy: Sometimes"),
            "spec.unhealthyPodEvictionPolicy",
        ),
        (
            pdb("maxUnavailable: 1\n  selector: {matchExpressions: [{key: a, operator: Near, values: [x]}]}"),
            "spec.selector.matchExpressions[0].operator",
        ),
        (
            pdb("maxUnavailable: 1\n  selector: {matchExpressions: [{key: a, operator: In}]}"),
            "spec.selector.matchExpressions[0].values",
        ),
        (
            pdb("maxUnavailable: 1\n  selector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}"),
            "spec.selector.matchExpressions[0].values",
        ),
        (pdb("maxUnavailable: 1").replace("policy/v1", "policy/v1beta1"), "apiVersion"),
        (format!("{}{}", pdb("maxUnavailable: 1"), pdb("maxUnavailable: 2")), "duplicate PodDisruptionBudget"),
    ];
    for (doc, field) in cases {
        let text = format!("{NODES}{doc}");
        let err = parse_state(&text).expect_err(&format!("{field} should be rejected: {doc}"));
        assert!(
            err.to_string().contains(field),
            "error {err} should name {field}"
        );
    }
}

#[test]
fn pool_kind_comes_from_the_node_label() {
    // spec: E2, E5 — the pool kind decides what safe-to-evict protects from.
    use sluice_agent::pods::PoolKind;
    let state = parse_state(NODES).expect("valid");
    assert_eq!(state.nodes["node-a"].pool, PoolKind::Standard, "default");
    let labelled = NODES.replacen(
        "metadata: {name: node-a}",
        "metadata: {name: node-a, labels: {sluice.dev/pool-kind: autopilot}}",
        1,
    );
    let state = parse_state(&labelled).expect("valid");
    assert_eq!(state.nodes["node-a"].pool, PoolKind::Autopilot);
    let bad = labelled.replace("autopilot", "Autopilot");
    let err = parse_state(&bad).expect_err("unknown pool kind");
    assert!(
        err.to_string()
            .contains("metadata.labels[sluice.dev/pool-kind]"),
        "{err}"
    );
}

fn pod_doc(name: &str, node: &str, ip: &str, extra_meta: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}{extra_meta}}}
spec: {{nodeName: {node}}}
status: {{podIPs: [{{ip: "{ip}"}}]}}
"#
    )
}

#[test]
fn pod_evict_annotation_names_a_drain_reason() {
    use sluice_agent::pods::EvictionReason;
    let ok = pod_doc(
        "web-1",
        "node-a",
        "198.19.1.10",
        ", annotations: {sluice.dev/evict: ScaleDown}",
    );
    let state = parse_state(&format!("{NODES}{ok}")).expect("valid");
    assert_eq!(
        state.pods["default/web-1"].evict,
        Some(EvictionReason::ScaleDown)
    );
    for bad in ["scale-down", "Deletion", ""] {
        let doc = ok.replace("ScaleDown", &format!("\"{bad}\""));
        let err = parse_state(&format!("{NODES}{doc}")).expect_err(bad);
        assert!(
            err.to_string()
                .contains("metadata.annotations[sluice.dev/evict]"),
            "{err}"
        );
    }
}

#[test]
fn health_check_node_ports_are_unique_and_not_the_node_port() {
    // spec: H3 — one Service per health-check port, never the node's 10256.
    let local = |name: &str, port: i64| {
        let vip = if name == "web" {
            "198.18.100.1"
        } else {
            "198.18.100.2"
        };
        service("Local", &format!("healthCheckNodePort: {port}"))
            .replace("name: web,", &format!("name: {name},"))
            .replace("198.18.100.1", vip)
    };
    let two = format!("{NODES}{}{}", local("web", 31000), local("api", 31000));
    let err = parse_state(&two).expect_err("shared port");
    let msg = err.to_string();
    assert!(
        msg.contains("Service default/api: spec.healthCheckNodePort: port 31000 already used by Service default/web"),
        "{msg}"
    );
    for port in [10256, 0, 65536] {
        let err = parse_state(&format!("{NODES}{}", local("web", port))).expect_err("bad port");
        assert!(
            err.to_string().contains("spec.healthCheckNodePort"),
            "{port}: {err}"
        );
    }
    let fine = format!("{NODES}{}{}", local("web", 31000), local("api", 31001));
    assert!(parse_state(&fine).is_ok());
}

#[test]
fn pod_ips_must_fit_the_node_and_be_unique() {
    let inside = pod_doc("web-1", "node-a", "198.19.1.10", "");
    assert!(parse_state(&format!("{NODES}{inside}")).is_ok());
    // node-b's range on a node-a pod.
    let outside = pod_doc("web-1", "node-a", "198.19.2.10", "");
    let err = parse_state(&format!("{NODES}{outside}")).expect_err("outside");
    assert!(err.to_string().contains("status.podIPs[0].ip"), "{err}");
    assert!(err.to_string().contains("podCIDRs"), "{err}");
    let v6 = pod_doc("web-1", "node-a", "fd00:19:2::10", "");
    assert!(parse_state(&format!("{NODES}{v6}")).is_err());
    let twice = format!("{inside}{}", pod_doc("web-2", "node-a", "198.19.1.10", ""));
    let err = parse_state(&format!("{NODES}{twice}")).expect_err("same IP");
    assert!(
        err.to_string()
            .contains("198.19.1.10 is already Pod default/web-1's address"),
        "{err}"
    );
    // Host-network pods carry the node's address; a node-less pod is not checked.
    let host = outside.replace(
        "spec: {nodeName: node-a}",
        "spec: {nodeName: node-a, hostNetwork: true}",
    );
    assert!(parse_state(&format!("{NODES}{host}")).is_ok());
    let elsewhere = pod_doc("web-1", "node-z", "203.0.113.5", "");
    assert!(parse_state(&format!("{NODES}{elsewhere}")).is_ok());
}

// --- issue 8: bad input is refused whole, naming document, object and field

#[test]
fn type_errors_name_the_object_and_the_field_path() {
    // spec: H1 — a file the agent cannot read whole is refused whole.
    let cases = [
        (
            service("Cluster", "").replace("port: 80,", "port: eighty,"),
            "document 3, Service default/web: spec.ports[0].port: expected an integer, got \"eighty\"",
        ),
        (
            service("Cluster", "").replace(
                "ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]",
                "ports: {name: http, port: 80}",
            ),
            "document 3, Service default/web: spec.ports: expected a list, got an object",
        ),
        (
            slice("- {addresses: [198.19.1.2], conditions: {ready: maybe}}"),
            "document 3, EndpointSlice default/web-1: endpoints[0].conditions.ready: expected a boolean (true or false), got \"maybe\"",
        ),
        (
            service("Cluster", "").replace("targetPort: 8080", "targetPort: [1]"),
            "spec.ports[0].targetPort: expected an integer or a string",
        ),
        (
            "---\nkind: Node\napiVersion: v1\nmetadata: {name: node-c}\nspec: {unschedulable: often}\n".into(),
            "document 3, Node node-c: spec.unschedulable: expected a boolean (true or false), got \"often\"",
        ),
        (
            "---\nkind: [Service]\nmetadata: {name: x}\n".into(),
            "document 3: kind: expected a string",
        ),
        ("---\n- just\n- a list\n".into(), "document 3: not a Kubernetes object"),
    ];
    for (doc, want) in cases {
        let err = parse_state(&format!("{NODES}{doc}")).expect_err(want);
        assert!(err.to_string().contains(want), "got: {err}\nwant: {want}");
    }
}

#[test]
fn duplicates_are_refused_as_duplicates() {
    let svc = service("Local", "healthCheckNodePort: 31000");
    let err = parse_state(&format!("{NODES}{svc}{svc}")).expect_err("duplicate");
    assert_eq!(
        err.to_string(),
        "document 4, Service default/web: metadata.name: duplicate Service"
    );
    let s = slice("- {addresses: [198.19.1.2]}");
    let err = parse_state(&format!("{NODES}{svc}{s}{s}")).expect_err("duplicate");
    assert!(err.to_string().contains("duplicate EndpointSlice"), "{err}");
    let err = parse_state(&format!("{NODES}---{NODES}")).expect_err("duplicate");
    assert!(
        err.to_string()
            .contains("Node node-a: metadata.name: duplicate Node"),
        "{err}"
    );
}

#[test]
fn two_services_cannot_claim_one_vip_port_and_protocol() {
    // spec: P1, H3 — one frontend, one Service: otherwise the datapath
    // forwards for one while the other's health check answers.
    let web = service("Cluster", "");
    let api = service("Local", "healthCheckNodePort: 31000").replace("name: web,", "name: api,");
    let err = parse_state(&format!("{NODES}{web}{api}")).expect_err("same frontend");
    assert_eq!(
        err.to_string(),
        "document 4, Service default/api: spec.ports[0]: 198.18.100.1 port 80 TCP is already Service default/web's"
    );
    // Same VIP, other port or protocol: fine.
    let udp = api.replace("protocol: TCP", "protocol: UDP");
    assert!(parse_state(&format!("{NODES}{web}{udp}")).is_ok());
    let other_port = api.replace("port: 80,", "port: 81,");
    assert!(parse_state(&format!("{NODES}{web}{other_port}")).is_ok());
}

#[test]
fn an_empty_file_is_refused_not_read_as_run_nothing() {
    for text in ["", "\n", "---\n", "# only a comment\n---\n---\n"] {
        let err = parse_state(text).expect_err("empty");
        assert!(err.to_string().contains("no manifests"), "{text:?}: {err}");
    }
}

#[test]
fn deep_nesting_is_refused_before_the_parser_runs() {
    // 100 000 levels took the parser about half a minute before it refused
    // them; the pre-scan refuses at once, naming the line.
    for (deep, line) in [
        (
            format!(
                "{NODES}---\nkind: Service\nx: {}{}\n",
                "[".repeat(100_000),
                "]".repeat(100_000)
            ),
            15,
        ),
        (
            format!("{NODES}---\nkind: Service\nx:\n{}y\n", "- ".repeat(100_000)),
            16,
        ),
    ] {
        let err = parse_state(&deep).expect_err("too deep");
        let want = format!("line {line}: nested more than 100 levels");
        assert!(err.to_string().contains(&want), "{err}");
    }
}

#[test]
fn alias_bombs_are_refused_not_expanded() {
    // "Billion laughs": nine levels of nine aliases would expand to 387
    // million nodes; the parser's repetition limit refuses it.
    let mut text = String::from(
        "---\nkind: Service\nmetadata: {name: x}\na0: &a0 [x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let err = parse_state(&format!("{NODES}{text}")).expect_err("alias bomb");
    let msg = err.to_string();
    assert!(msg.starts_with("document 3: not valid YAML"), "{msg}");
    assert!(msg.contains("repetition limit"), "{msg}");
}

// spec: P3 (SNAT exhaustion is reported by Service, port and endpoint)
#[test]
fn snat_exhaustion_is_named_by_service_port_and_endpoint() {
    use sluice_agent::control::snat::{frontend_names, name_exhaustion};
    use sluice_datapath::maps::SnatExhaustKey;
    let text = format!(
        "{NODES}{}{}",
        service("Cluster", ""),
        slice(&ep("198.19.1.10", "node-a", true, true, false))
    );
    let state = parse_state(&text).expect("valid state");
    let c = build_content(&state, "node-a").expect("content");
    let id = only_service(&c).id;
    let key = |svc_id| SnatExhaustKey {
        addr: ip4("198.19.1.10"),
        port: 8080,
        _pad: 0,
        svc_id,
    };
    let names = frontend_names(&state);
    let named = name_exhaustion(&[(key(id), 3), (key(7), 1)], &names);
    let got: Vec<_> = named
        .iter()
        .map(|e| {
            (
                e.service.as_str(),
                e.port.as_str(),
                e.endpoint.to_string(),
                e.resets,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("default/web", "http", "198.19.1.10:8080".to_string(), 3),
            // A frontend no Service has any more is named by its id.
            ("frontend 0x00000007", "", "198.19.1.10:8080".to_string(), 1),
        ]
    );
    assert!(name_exhaustion(&[], &names).is_empty());
}
