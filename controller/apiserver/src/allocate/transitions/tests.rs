use serde_json::{json, Value};

use super::*;
use crate::allocate::{fill, Family};

fn cfg() -> Config {
    Config::from_flags("198.18.0.0/16,fd00:198:18::/112", "30000-32767").expect("cfg")
}

fn svc(spec: Value) -> Value {
    json!({"metadata": {"name": "web"}, "spec": spec})
}

/// Plan `spec` as a create, fill its needs from `values` in order, and
/// return what would be stored.
fn created(spec: Value, values: &[Alloc]) -> (Plan, Value) {
    let mut v = svc(spec);
    let (plan, mut view) = super::plan(&cfg(), None, &mut v).expect("plan");
    for (need, a) in plan.needs.iter().zip(values) {
        fill(&mut view, &need.slot, *a);
    }
    view.write(&mut v);
    (plan, v)
}

fn ip(s: &str) -> Alloc {
    Alloc::Ip(s.parse().expect("ip"))
}

fn updated(old: &Value, new_spec: Value) -> Result<(Plan, Value), Refusal> {
    let mut v = svc(new_spec);
    let (plan, _) = super::plan(&cfg(), Some(old), &mut v)?;
    Ok((plan, v))
}

fn invalid_fields(r: Refusal) -> Vec<String> {
    match r {
        Refusal::Invalid(errs) => errs.iter().map(FieldError::text).collect(),
        Refusal::Internal(m) => vec![m],
    }
}

#[test]
fn a_node_port_service_needs_an_address_and_one_port_per_port_number() {
    let (plan, stored) = created(
        json!({"type": "NodePort", "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "web", "port": 80, "protocol": "TCP"}]}),
        &[ip("198.18.1.1"), Alloc::Port(30500), Alloc::Port(30600)],
    );
    assert_eq!(
        plan.needs
            .iter()
            .map(|n| n.slot.clone())
            .collect::<Vec<_>>(),
        vec![
            Slot::ClusterIp(0),
            Slot::NodePort(vec![0, 1]),
            Slot::NodePort(vec![2])
        ]
    );
    assert_eq!(plan.needs[0].pool, Pool::Ip(Family::V4));
    assert!(plan.claims.is_empty() && plan.releases.is_empty());
    assert_eq!(stored["spec"]["clusterIP"], "198.18.1.1");
    assert_eq!(stored["spec"]["clusterIPs"], json!(["198.18.1.1"]));
    assert_eq!(stored["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(stored["spec"]["ipFamilyPolicy"], "SingleStack");
    let nps: Vec<&Value> = (0..3)
        .map(|i| &stored["spec"]["ports"][i]["nodePort"])
        .collect();
    assert_eq!(nps, [&json!(30500), &json!(30500), &json!(30600)]);
}

#[test]
fn asked_for_values_are_claimed_and_checked_against_the_ranges() {
    let mut v = svc(json!({"type": "NodePort", "clusterIP": "198.18.0.10",
        "ports": [{"port": 80, "nodePort": 30080}, {"port": 80, "protocol": "UDP"}]}));
    let (plan, view) = super::plan(&cfg(), None, &mut v).expect("plan");
    assert!(plan.needs.is_empty(), "{:?}", plan.needs);
    assert_eq!(
        plan.claims
            .iter()
            .map(|c| (c.alloc, c.field.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (ip("198.18.0.10"), "spec.clusterIPs[0]"),
            (Alloc::Port(30080), "spec.ports[0].nodePort")
        ]
    );
    // The UDP port of the same number shares the asked-for node port.
    assert_eq!(view.ports[1].node_port, 30080);
    for (spec, text) in [
        (json!({"clusterIP": "198.19.0.10"}),
            "spec.clusterIPs[0]: Invalid value: \"198.19.0.10\": failed to allocate IP 198.19.0.10: the provided IP (198.19.0.10) is not in the valid range. The range of valid IPs is 198.18.0.0/16"),
        (json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 29000}]}),
            "spec.ports[0].nodePort: Invalid value: 29000: provided port is not in the valid range. The range of valid ports is 30000-32767"),
        // No port number at all: the value as sent is named (it was 0).
        (json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 99999}]}),
            "spec.ports[0].nodePort: Invalid value: 99999: provided port is not in the valid range. The range of valid ports is 1-65535"),
        (json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}, {"port": 81, "nodePort": 30080, "protocol": "UDP"}]}),
            "spec.ports[1].nodePort: Invalid value: 30080: provided port is already allocated"),
        (json!({"ports": [{"port": 80, "nodePort": 30080}]}),
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"),
    ] {
        let e = super::plan(&cfg(), None, &mut svc(spec.clone())).expect_err("refused");
        assert_eq!(invalid_fields(e), vec![text.to_string()], "{spec}");
    }
}

#[test]
fn load_balancers_may_go_without_node_ports() {
    let (plan, stored) = created(
        json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
            "ports": [{"port": 80}, {"port": 81, "nodePort": 30081}]}),
        &[ip("198.18.1.1")],
    );
    assert_eq!(plan.needs.len(), 1, "the address only");
    assert_eq!(plan.claims.len(), 1, "the port asked for");
    assert!(stored["spec"]["ports"][0].get("nodePort").is_none());
}

#[test]
fn local_load_balancers_get_a_health_check_port_released_on_cluster() {
    let spec =
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]});
    let (plan, stored) = created(
        spec,
        &[ip("198.18.1.1"), Alloc::Port(30500), Alloc::Port(30501)],
    );
    assert_eq!(plan.needs[2].slot, Slot::HealthCheck);
    assert_eq!(stored["spec"]["healthCheckNodePort"], 30501);
    // kubectl apply of the same manifest: nothing changes.
    let (again, same) = updated(
        &stored,
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
    )
    .expect("same");
    assert_eq!(again, Plan::default());
    assert_eq!(same["spec"]["healthCheckNodePort"], 30501);
    assert_eq!(same["spec"]["ports"][0]["nodePort"], 30500);
    assert_eq!(same["spec"]["clusterIP"], "198.18.1.1");
    // To Cluster: the health-check port goes.
    let mut cluster = stored["spec"].clone();
    cluster["externalTrafficPolicy"] = json!("Cluster");
    let (plan, after) = updated(&stored, cluster).expect("cluster");
    assert_eq!(plan.releases, vec![Alloc::Port(30501)]);
    assert!(after["spec"].get("healthCheckNodePort").is_none());
    // Set to something else while not needed: refused.
    let mut odd = after["spec"].clone();
    odd["healthCheckNodePort"] = json!(30777);
    let e = updated(&after, odd).expect_err("not needed");
    assert!(invalid_fields(e)[0].starts_with("spec.healthCheckNodePort: Invalid value: 30777"));
}

#[test]
fn type_changes_allocate_and_release() {
    let (_, np) = created(
        json!({"type": "NodePort", "externalTrafficPolicy": "Cluster", "ports": [{"port": 80}]}),
        &[ip("198.18.1.1"), Alloc::Port(30500)],
    );
    // NodePort to ClusterIP with the manifest's node ports left as stored.
    let mut to_cluster = np["spec"].clone();
    to_cluster["type"] = json!("ClusterIP");
    let (plan, cluster) = updated(&np, to_cluster).expect("to ClusterIP");
    assert_eq!(plan.releases, vec![Alloc::Port(30500)]);
    assert!(plan.needs.is_empty() && plan.claims.is_empty());
    assert!(cluster["spec"]["ports"][0].get("nodePort").is_none());
    assert!(cluster["spec"].get("externalTrafficPolicy").is_none());
    assert_eq!(cluster["spec"]["clusterIP"], "198.18.1.1");
    // And back: a port to choose, the address kept.
    let mut to_np = cluster["spec"].clone();
    to_np["type"] = json!("NodePort");
    let (plan, _) = updated(&cluster, to_np).expect("to NodePort");
    assert_eq!(plan.needs.len(), 1);
    assert_eq!(plan.needs[0].slot, Slot::NodePort(vec![0]));
    // To ExternalName: the address goes; back from it: a new one.
    let (plan, ext) = updated(
        &cluster,
        json!({"type": "ExternalName", "externalName": "example.test",
        "clusterIP": "198.18.1.1", "ports": [{"port": 80}]}),
    )
    .expect("to ExternalName");
    assert_eq!(plan.releases, vec![ip("198.18.1.1")]);
    assert!(ext["spec"].get("clusterIP").is_none() && ext["spec"].get("clusterIPs").is_none());
    let (plan, _) =
        updated(&ext, json!({"type": "ClusterIP", "ports": [{"port": 80}]})).expect("back");
    assert_eq!(plan.needs[0].slot, Slot::ClusterIp(0));
}

#[test]
fn the_cluster_ip_cannot_change() {
    let (_, c) = created(json!({"ports": [{"port": 80}]}), &[ip("198.18.1.1")]);
    let mut changed = c["spec"].clone();
    changed["clusterIP"] = json!("198.18.1.2");
    changed.as_object_mut().expect("spec").remove("clusterIPs");
    let e = updated(&c, changed).expect_err("immutable");
    assert_eq!(
        invalid_fields(e),
        vec!["spec.clusterIP: Invalid value: \"198.18.1.2\": field is immutable".to_string()]
    );
}

#[test]
fn a_node_port_moved_by_the_client_releases_the_old_one() {
    let (_, np) = created(
        json!({"type": "NodePort", "ports": [{"name": "web", "port": 80}]}),
        &[ip("198.18.1.1"), Alloc::Port(30500)],
    );
    let mut moved = np["spec"].clone();
    moved["ports"][0]["nodePort"] = json!(30900);
    let (plan, _) = updated(&np, moved).expect("moved");
    assert_eq!(plan.releases, vec![Alloc::Port(30500)]);
    assert_eq!(plan.claims[0].alloc, Alloc::Port(30900));
}
