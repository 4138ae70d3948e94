//! The configuration's two sources: the strict file, and the API's four
//! kinds joined (read as dynamic objects, as the watchers hand them over).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use kube::api::DynamicObject;
use serde_json::{json, Value};

use sluice_lb::config::file::parse;
use sluice_lb::config::join::join;
use sluice_lb::config::objects::read_all;
use sluice_lb::config::{HealthCheck, LbConfig};
use sluice_lb::desired::Protocol;

const GOOD: &str = r#"
services:
- name: default/web
  frontends:
  - {ipAddress: 198.19.0.10, port: 80, protocol: TCP}
  - {ipAddress: "fd00::10", port: 53, protocol: UDP}
  healthCheck: {port: 30123, requestPath: /healthz, checkIntervalSec: 3, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 2}
  backends:
  - {node: node-b, ipAddress: 198.18.1.3}
  - {node: node-a, ipAddress: 198.18.1.2, ipv6Address: "fd00::1:2"}
- name: default/db
  frontends:
  - {ipAddress: 198.19.0.11, port: 5432, protocol: TCP}
"#;

#[test]
fn a_good_file_gives_sorted_services_with_defaults_filled() {
    let cfg = parse(GOOD).expect("valid");
    let names: Vec<&str> = cfg.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["default/db", "default/web"]);
    let db = &cfg.services[0];
    assert_eq!(db.health_check, HealthCheck::gke_cluster_default());
    assert!(db.backends.is_empty());
    let web = &cfg.services[1];
    assert_eq!(web.health_check.port, 30123);
    assert_eq!(web.health_check.interval, Duration::from_secs(3));
    assert_eq!(web.health_check.unhealthy_threshold, 2);
    let nodes: Vec<&str> = web.backends.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(nodes, ["node-a", "node-b"]);
    assert_eq!(web.backends[0].ipv6, Some("fd00::1:2".parse().expect("v6")));
    assert!(web
        .frontends
        .iter()
        .any(|f| f.protocol == Protocol::Udp
            && f.address == "fd00::10".parse::<IpAddr>().expect("v6")));
}

/// The field a refused document names.
fn refused(text: &str) -> String {
    parse(text).expect_err("refused").field
}

#[test]
fn file_errors_name_the_field() {
    let base = "services:\n- name: s\n  frontends:\n  - {ipAddress: 198.19.0.10, port: 80, protocol: TCP}\n";
    assert_eq!(
        refused(&format!(
            "{base}  - {{ipAddress: 198.19.0.10, port: 70000, protocol: TCP}}\n"
        )),
        "services[0].frontends[1].port"
    );
    assert_eq!(
        refused(&format!(
            "{base}  - {{ipAddress: 198.19.0.10, port: 0, protocol: TCP}}\n"
        )),
        "services[0].frontends[1].port"
    );
    assert_eq!(
        refused(&format!(
            "{base}  - {{ipAddress: 198.19.0.10, port: 81, protocol: SCTP}}\n"
        )),
        "services[0].frontends[1].protocol"
    );
    assert_eq!(
        refused(&format!(
            "{base}  - {{ipAddress: 198.19.0.300, port: 81, protocol: TCP}}\n"
        )),
        "services[0].frontends[1].ipAddress"
    );
    for vip in [
        "0.0.0.0",
        "127.0.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "\"::\"",
    ] {
        assert_eq!(
            refused(&format!(
                "{base}  - {{ipAddress: {vip}, port: 81, protocol: TCP}}\n"
            )),
            "services[0].frontends[1].ipAddress",
            "{vip}"
        );
    }
    assert_eq!(
        refused(&format!("{base}  healthCheck: {{timeoutSec: 9}}\n")),
        "services[0].healthCheck.timeoutSec"
    );
    assert_eq!(
        refused(&format!("{base}  healthCheck: {{requestPath: healthz}}\n")),
        "services[0].healthCheck.requestPath"
    );
    assert_eq!(
        refused(&format!("{base}  healthCheck: {{intervalSec: 9}}\n")),
        "services[0].healthCheck.intervalSec"
    );
    assert_eq!(
        refused(&format!(
            "{base}  backends:\n  - {{node: a, ipAddress: \"fd00::1\"}}\n"
        )),
        "services[0].backends[0].ipAddress"
    );
    assert_eq!(
        refused(&format!(
            "{base}  backends:\n  - {{node: a, ipAddress: 198.18.0.2}}\n  - {{node: a, ipAddress: 198.18.0.3}}\n"
        )),
        "services[0].backends"
    );
    assert_eq!(
        refused(&format!("{base}  colour: red\n")),
        "services[0].colour"
    );
    // Two Services: the same name, or the same frontend.
    let twice = format!("{base}{}", base.replace("services:\n", ""));
    assert_eq!(refused(&twice), "services[1].name");
    let clash = format!(
        "{base}{}",
        base.replace("services:\n", "")
            .replace("name: s", "name: t")
    );
    assert_eq!(refused(&clash), "services[1].frontends[0]");
    assert_eq!(refused("services: 3"), "services");
    // Never a panic, whatever the bytes.
    for junk in [
        "",
        "---",
        "[",
        "services: [{}]",
        "\u{0}\u{1}",
        "services:\n- name: [a]",
    ] {
        let _ = parse(junk);
    }
    assert_eq!(parse("").map(|c| c.services.len()), Ok(0));
}

fn obj(kind: &str, ns: Option<&str>, name: &str, rest: Value) -> DynamicObject {
    let mut v = json!({
        "apiVersion": "sluice.dev/v1",
        "kind": kind,
        "metadata": {"name": name},
    });
    if let Some(ns) = ns {
        v["metadata"]["namespace"] = json!(ns);
    }
    if let (Some(m), Some(r)) = (v.as_object_mut(), rest.as_object()) {
        for (k, x) in r {
            m.insert(k.clone(), x.clone());
        }
    }
    serde_json::from_value(v).expect("a dynamic object")
}

fn lb(ns: &str, name: &str, spec: Value) -> DynamicObject {
    obj("L4LoadBalancer", Some(ns), name, json!({ "spec": spec }))
}

fn hc_status(ns: &str, name: &str, port: u16) -> DynamicObject {
    obj(
        "HealthCheck",
        Some(ns),
        name,
        json!({
            "spec": {"port": 1},
            "status": {"port": port, "requestPath": "/healthz", "checkIntervalSec": 3,
                       "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 2,
                       "someFutureField": true}
        }),
    )
}

fn neg(ns: &str, name: &str, endpoints: Value) -> DynamicObject {
    obj(
        "NetworkEndpointGroup",
        Some(ns),
        name,
        json!({"spec": {"networkEndpointType": "GCE_VM_IP", "service": "web", "zone": "z", "endpoints": endpoints}}),
    )
}

fn ig(name: &str, instances: Value) -> DynamicObject {
    obj(
        "InstanceGroup",
        None,
        name,
        json!({"spec": {"zone": name, "instances": instances}, "status": {"warnings": []}}),
    )
}

fn joined(
    lbs: &[DynamicObject],
    hcs: &[DynamicObject],
    negs: &[DynamicObject],
    igs: &[DynamicObject],
) -> (LbConfig, Vec<String>) {
    let (objects, mut faults) = read_all(lbs, hcs, negs, igs);
    let (cfg, more) = join(&objects);
    faults.extend(more);
    (cfg, faults.into_iter().map(|f| f.to_string()).collect())
}

fn nodes(cfg: &LbConfig, service: &str) -> Vec<(String, Ipv4Addr)> {
    cfg.services
        .iter()
        .find(|s| s.name == service)
        .map(|s| {
            s.backends
                .iter()
                .map(|b| (b.node.clone(), b.address))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn backends_come_from_the_lbs_negs_or_its_instance_groups_and_the_check_from_the_status() {
    let web = lb(
        "default",
        "web",
        json!({"service": "web", "type": "Internal", "backends": "NetworkEndpointGroups",
               "externalTrafficPolicy": "Local", "healthCheck": "web",
               "frontends": [{"ipAddress": "198.19.0.10", "port": 80, "protocol": "TCP"}],
               "networkEndpointGroups": ["web.zone-a", "web.zone-b"]}),
    );
    let ext = lb(
        "default",
        "ext",
        json!({"service": "ext", "type": "ExternalTargetPool", "backends": "InstanceGroups",
               "healthCheck": "ext",
               "frontends": [{"ipAddress": "198.19.0.11", "port": 443, "protocol": "TCP"}],
               "instanceGroups": ["zone-a"]}),
    );
    let negs = [
        neg(
            "default",
            "web.zone-a",
            json!([{"instance": "a1", "ipAddress": "198.18.1.2", "ipv6Address": "fd00::1:2"}]),
        ),
        neg(
            "default",
            "web.zone-b",
            json!([{"instance": "b1", "ipAddress": "198.18.2.2"}]),
        ),
        // Same name, another namespace: not this LB's.
        neg(
            "other",
            "web.zone-a",
            json!([{"instance": "x", "ipAddress": "198.18.9.9"}]),
        ),
    ];
    let igs = [ig(
        "zone-a",
        json!([{"name": "a1", "ipAddress": "198.18.1.2"}, {"name": "a2", "ipAddress": "198.18.1.3"}]),
    )];
    let (cfg, faults) = joined(
        &[web, ext],
        &[
            hc_status("default", "web", 30123),
            hc_status("default", "ext", 10256),
        ],
        &negs,
        &igs,
    );
    assert!(faults.is_empty(), "{faults:?}");
    assert_eq!(
        nodes(&cfg, "default/web"),
        [
            ("a1".to_string(), Ipv4Addr::new(198, 18, 1, 2)),
            ("b1".to_string(), Ipv4Addr::new(198, 18, 2, 2))
        ]
    );
    assert_eq!(nodes(&cfg, "default/ext").len(), 2);
    let web = cfg
        .services
        .iter()
        .find(|s| s.name == "default/web")
        .expect("web");
    // The status, not the spec (port 1 there).
    assert_eq!(web.health_check.port, 30123);
    assert_eq!(web.health_check.interval, Duration::from_secs(3));
    assert_eq!(web.frontends.len(), 1);
}

#[test]
fn an_lb_whose_check_has_no_status_yet_is_skipped_and_the_rest_served() {
    let spec = |vip: &str, hc: &str| {
        json!({"healthCheck": hc, "backends": "InstanceGroups", "instanceGroups": ["z"],
               "frontends": [{"ipAddress": vip, "port": 80, "protocol": "TCP"}]})
    };
    let pending = obj("HealthCheck", Some("ns"), "new", json!({"spec": {}}));
    let (cfg, faults) = joined(
        &[
            lb("ns", "new", spec("198.19.0.1", "new")),
            lb("ns", "old", spec("198.19.0.2", "old")),
            lb("ns", "orphan", spec("198.19.0.3", "gone")),
        ],
        &[pending, hc_status("ns", "old", 10256)],
        &[],
        &[ig("z", json!([{"name": "n", "ipAddress": "198.18.0.2"}]))],
    );
    let names: Vec<&str> = cfg.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ns/old"]);
    assert!(
        faults
            .iter()
            .any(|f| f.contains("L4LoadBalancer ns/new") && f.contains("no status yet")),
        "{faults:?}"
    );
    assert!(
        faults.iter().any(|f| f.contains("ns/gone does not exist")),
        "{faults:?}"
    );
}

#[test]
fn bad_objects_are_left_out_naming_the_field_and_the_rest_still_served() {
    let good = lb(
        "ns",
        "good",
        json!({"healthCheck": "hc", "networkEndpointGroups": ["good.z", "good.missing"],
               "frontends": [{"ipAddress": "198.19.0.1", "port": 80, "protocol": "TCP"}]}),
    );
    let bad_port = lb(
        "ns",
        "badport",
        json!({"healthCheck": "hc", "frontends": [{"ipAddress": "198.19.0.2", "port": 99999, "protocol": "TCP"}]}),
    );
    let clash = lb(
        "ns",
        "zclash",
        json!({"healthCheck": "hc", "frontends": [{"ipAddress": "198.19.0.1", "port": 80, "protocol": "TCP"}]}),
    );
    let no_spec = obj("L4LoadBalancer", Some("ns"), "nospec", json!({}));
    let bad_check = obj(
        "HealthCheck",
        Some("ns"),
        "slow",
        json!({"status": {"port": 10256, "requestPath": "/healthz", "checkIntervalSec": 1,
                          "timeoutSec": 5, "healthyThreshold": 1, "unhealthyThreshold": 3}}),
    );
    let uses_bad_check = lb(
        "ns",
        "slow",
        json!({"healthCheck": "slow", "frontends": [{"ipAddress": "198.19.0.3", "port": 80, "protocol": "TCP"}]}),
    );
    let negs = [
        neg(
            "ns",
            "good.z",
            json!([{"instance": "n1", "ipAddress": "198.18.0.2"}]),
        ),
        // A NEG with a bad endpoint is left out whole.
        neg(
            "ns",
            "good.bad",
            json!([{"instance": "n2", "ipAddress": "not-an-ip"}]),
        ),
    ];
    let (cfg, faults) = joined(
        &[good, bad_port, clash, no_spec, uses_bad_check],
        &[hc_status("ns", "hc", 10256), bad_check],
        &negs,
        &[],
    );
    let names: Vec<&str> = cfg.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ns/good"], "{faults:?}");
    assert_eq!(nodes(&cfg, "ns/good").len(), 1);
    let has = |a: &str, b: &str| faults.iter().any(|f| f.contains(a) && f.contains(b));
    assert!(
        has("L4LoadBalancer ns/badport", "spec.frontends[0].port"),
        "{faults:?}"
    );
    assert!(
        has("L4LoadBalancer ns/zclash", "already a frontend of ns/good"),
        "{faults:?}"
    );
    assert!(has("L4LoadBalancer ns/nospec", "no spec"), "{faults:?}");
    assert!(
        has("L4LoadBalancer ns/slow", "status.timeoutSec"),
        "{faults:?}"
    );
    assert!(
        has(
            "NetworkEndpointGroup ns/good.bad",
            "spec.endpoints[0].ipAddress"
        ),
        "{faults:?}"
    );
    assert!(
        has("L4LoadBalancer ns/good", "ns/good.missing does not exist"),
        "{faults:?}"
    );
}
