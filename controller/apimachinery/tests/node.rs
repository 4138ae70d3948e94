//! Node validation: taints (under upstream's `metadata.taints` path),
//! pod CIDRs, resources, and the update rules.

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "abc"}, "spec": {}})
}

fn taints(list: Value) -> Value {
    json!({"spec": {"taints": list}})
}

#[test]
fn invalid_nodes() {
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}), vec![s("metadata.name: Required value: name or generateName is required")]),
        ("a namespace", json!({"metadata": {"namespace": "default"}}), vec![s("metadata.namespace: Forbidden: not allowed on this type")]),
        ("bad label key", json!({"metadata": {"labels": {"NoUppercaseOrSpecialCharsLike=Equals": "b"}}}),
            vec![format!("metadata.labels: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {NAME_PART}")]),
        ("taint without a key", taints(json!([{"key": "", "value": "special-user-1", "effect": "NoSchedule"}])),
            vec![s("metadata.taints[0].key: Invalid value: \"\": name part must be non-empty"),
                 format!("metadata.taints[0].key: Invalid value: \"\": {NAME_PART}")]),
        ("taint with a bad value", taints(json!([{"key": "dedicated", "value": "some\\bad\\value", "effect": "NoSchedule"}])),
            vec![format!("metadata.taints[0].value: Invalid value: \"some\\\\bad\\\\value\": {LABEL_VALUE}")]),
        ("taint without an effect", taints(json!([{"key": "dedicated", "value": "v", "effect": ""}])),
            vec![s("metadata.taints[0].effect: Required value")]),
        ("taint effect Sometimes", taints(json!([{"key": "dedicated", "value": "v", "effect": "Sometimes"}])),
            vec![s("metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"")]),
        ("the same taint twice", taints(json!([{"key": "dedicated", "value": "a", "effect": "NoSchedule"}, {"key": "dedicated", "value": "b", "effect": "NoSchedule"}])),
            vec![s("metadata.taints[1]: Duplicate value: {\"Key\":\"dedicated\",\"Value\":\"b\",\"Effect\":\"NoSchedule\",\"TimeAdded\":null}: taints must be unique by key and effect pair")]),
        ("pod CIDR without a prefix", json!({"spec": {"podCIDRs": ["192.168.0.0"]}}),
            vec![s("spec.podCIDRs[0]: Invalid value: \"192.168.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]),
        ("two IPv4 pod CIDRs, the same", json!({"spec": {"podCIDRs": ["10.0.0.0/16", "10.0.0.0/16"]}}),
            vec![s("spec.podCIDRs: Invalid value: [\"10.0.0.0/16\",\"10.0.0.0/16\"]: may specify no more than one CIDR for each IP family"),
                 s("spec.podCIDRs[1]: Duplicate value: \"10.0.0.0/16\"")]),
        ("negative capacity", json!({"status": {"capacity": {"cpu": "-1"}}}),
            vec![s("status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0")]),
    ];
    table("", "Node", &base(), &cases);
}

#[test]
fn valid_nodes() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "a subdomain name",
            json!({"metadata": {"name": "node-1.example.com"}}),
            vec![],
        ),
        (
            "a taint per effect on one key",
            taints(
                json!([{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}]),
            ),
            vec![],
        ),
        (
            "dual-stack pod CIDRs",
            json!({"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}),
            vec![],
        ),
    ];
    table("", "Node", &base(), &cases);
}

#[test]
fn updates() {
    let cases = vec![
        ("pod CIDR changed", json!({"spec": {"podCIDRs": ["192.123.0.0/16"]}}), json!({"spec": {"podCIDRs": ["192.168.0.0/16"]}}),
            vec![s("spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid")]),
        ("pod CIDR assigned", json!({}), json!({"spec": {"podCIDRs": ["192.168.0.0/16"]}}), vec![]),
        ("provider ID changed", json!({"spec": {"providerID": "a"}}), json!({"spec": {"providerID": "b"}}),
            vec![s("spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid")]),
        ("renamed", json!({}), json!({"metadata": {"name": "bar"}}),
            vec![s("metadata.name: Invalid value: \"bar\": field is immutable")]),
        ("a bad taint added (reported by both passes, as upstream)", json!({}), taints(json!([{"key": "k", "effect": "Sometimes"}])),
            vec![s("metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""),
                 s("metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"")]),
        ("cordoned", json!({}), json!({"spec": {"unschedulable": true}}), vec![]),
    ];
    update_table("", "Node", &base(), &cases);
}
