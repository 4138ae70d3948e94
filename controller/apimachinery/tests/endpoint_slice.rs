//! EndpointSlice validation (discovery.k8s.io).

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": "hello", "namespace": "default"},
           "addressType": "IPv4",
           "endpoints": [{"addresses": ["10.1.2.3"]}],
           "ports": [{"name": "http", "protocol": "TCP", "port": 80}]})
}

const G: &str = "discovery.k8s.io";

fn addresses(t: &str, list: Value) -> Value {
    json!({"addressType": t, "endpoints": [{"addresses": list}]})
}

#[test]
fn invalid_slices() {
    let many: Vec<Value> = (0..1001)
        .map(|_| json!({"addresses": ["10.0.0.1"]}))
        .collect();
    let many_addresses: Vec<String> = (0..101)
        .map(|i| format!("10.0.0.{}", i % 250 + 1))
        .collect();
    let too_many_ports: Vec<Value> = (0..20001)
        .map(|i| json!({"name": format!("p{i}"), "protocol": "TCP"}))
        .collect();
    let cases = vec![
        ("address type IPv7", json!({"addressType": "IPv7"}),
            vec![s("addressType: Unsupported value: \"IPv7\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"")]),
        ("address type IP (legacy)", json!({"addressType": "IP"}),
            vec![s("addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"")]),
        ("two unnamed ports", json!({"ports": [{"name": "", "protocol": "TCP"}, {"name": "", "protocol": "TCP"}]}),
            vec![s("ports[1].name: Duplicate value: \"\"")]),
        ("port name aCapital", json!({"ports": [{"name": "aCapital", "protocol": "TCP"}]}),
            vec![format!("ports[0].name: Invalid value: \"aCapital\": {LABEL}")]),
        ("port protocol foo", json!({"ports": [{"name": "http", "protocol": "foo"}]}),
            vec![s("ports[0].protocol: Unsupported value: \"foo\": supported values: \"SCTP\", \"TCP\", \"UDP\"")]),
        ("20001 ports", json!({"ports": too_many_ports}), vec![s("ports: Too many: 20001: must have at most 20000 items")]),
        ("1001 endpoints", json!({"endpoints": many}), vec![s("endpoints: Too many: 1001: must have at most 1000 items")]),
        ("an endpoint without addresses", addresses("IPv4", json!([])),
            vec![s("endpoints[0].addresses: Required value: must contain at least 1 address")]),
        ("101 addresses", addresses("IPv4", json!(many_addresses)),
            vec![s("endpoints[0].addresses: Too many: 101: must have at most 100 items")]),
        ("a bad topology key", json!({"endpoints": [{"addresses": ["10.1.2.3"], "deprecatedTopology": {"--INVALID": "example"}}]}),
            vec![format!("endpoints[0].deprecatedTopology: Invalid value: \"--INVALID\": {NAME_PART}")]),
        ("a bad host name", json!({"endpoints": [{"addresses": ["10.1.2.3"], "hostname": "--INVALID"}]}),
            vec![format!("endpoints[0].hostname: Invalid value: \"--INVALID\": {LABEL}")]),
        ("a bad name", json!({"metadata": {"name": "*&^"}}),
            vec![format!("metadata.name: Invalid value: \"*&^\": {SUBDOMAIN}")]),
        ("an IPv4 address out of range", addresses("IPv4", json!(["123.456.789.012"])),
            vec![s("endpoints[0].addresses[0]: Invalid value: \"123.456.789.012\": must be a valid IPv4 address")]),
        ("an IPv6 address in an IPv4 slice", addresses("IPv4", json!(["123.456.789.012", "2001:4860:4860::8888"])),
            vec![s("endpoints[0].addresses[0]: Invalid value: \"123.456.789.012\": must be a valid IPv4 address"),
                 s("endpoints[0].addresses[1]: Invalid value: \"2001:4860:4860::8888\": must be a valid IPv4 address")]),
        ("bad FQDNs", addresses("FQDN", json!(["foo.*", "FOO.example.com", "underscores_are_bad.example.com", "*.example.com"])),
            ["foo.*", "FOO.example.com", "underscores_are_bad.example.com", "*.example.com"].iter().enumerate()
                .map(|(i, a)| format!("endpoints[0].addresses[{i}]: Invalid value: \"{a}\": {SUBDOMAIN}")).collect()),
        ("appProtocol --", json!({"ports": [{"name": "http", "protocol": "TCP", "appProtocol": "--"}]}),
            vec![format!("ports[0].appProtocol: Invalid value: \"--\": {NAME_PART}")]),
        ("a bad zone hint", json!({"endpoints": [{"addresses": ["10.1.2.3"], "hints": {"forZones": [{"name": "inv@lid"}]}}]}),
            vec![format!("endpoints[0].hints.forZones[0].name: Invalid value: \"inv@lid\": {LABEL_VALUE}")]),
        ("a zone hinted twice", json!({"endpoints": [{"addresses": ["10.1.2.3"], "hints": {"forZones": [{"name": "zone-a"}, {"name": "zone-b"}, {"name": "zone-a"}]}}]}),
            vec![s("endpoints[0].hints.forZones[2].name: Duplicate value: \"zone-a\"")]),
        ("an empty object", json!({"metadata": {"name": null, "namespace": null}, "addressType": "", "endpoints": null, "ports": null}),
            vec![s("metadata.name: Required value: name or generateName is required"), s("metadata.namespace: Required value"), s("addressType: Required value")]),
        ("a loopback address", addresses("IPv4", json!(["127.0.0.1"])),
            vec![s("endpoints[0].addresses[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)")]),
        ("a link-local IPv6 address", addresses("IPv6", json!(["fe80::9656:d028:8652:66b6"])),
            vec![s("endpoints[0].addresses[0]: Invalid value: \"fe80::9656:d028:8652:66b6\": may not be in the link-local range (169.254.0.0/16, fe80::/10)")]),
        ("a bad node name", json!({"endpoints": [{"addresses": ["10.1.2.3"], "nodeName": "INvalid-node-name"}]}),
            vec![format!("endpoints[0].nodeName: Invalid value: \"INvalid-node-name\": {SUBDOMAIN}")]),
    ];
    table(G, "EndpointSlice", &base(), &cases);
}

#[test]
fn valid_slices() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "no endpoints, no ports",
            json!({"endpoints": [], "ports": []}),
            vec![],
        ),
        (
            "100 addresses",
            addresses(
                "IPv4",
                json!((0..100)
                    .map(|i| format!("10.0.1.{}", i + 1))
                    .collect::<Vec<_>>()),
            ),
            vec![],
        ),
        (
            "FQDNs",
            addresses("FQDN", json!(["foo.example.com", "example.com.", "a-b.c"])),
            vec![],
        ),
        ("IPv6", addresses("IPv6", json!(["2001:db8::1"])), vec![]),
        (
            "one unnamed port",
            json!({"ports": [{"protocol": "UDP", "port": 53}]}),
            vec![],
        ),
    ];
    table(G, "EndpointSlice", &base(), &cases);
}

#[test]
fn updates() {
    let cases = vec![
        (
            "address type changed",
            json!({}),
            json!({"addressType": "IPv6", "endpoints": [{"addresses": ["2001:db8::1"]}]}),
            vec![s(
                "addressType: Invalid value: \"IPv6\": field is immutable",
            )],
        ),
        (
            "endpoints changed",
            json!({}),
            json!({"endpoints": [{"addresses": ["10.1.2.4"]}]}),
            vec![],
        ),
    ];
    update_table(G, "EndpointSlice", &base(), &cases);
}
