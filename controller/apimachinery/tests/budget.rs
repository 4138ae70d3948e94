//! PodDisruptionBudget validation (policy/v1).

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
}

#[test]
fn invalid_budgets() {
    let cases = vec![
        ("both set", json!({"spec": {"maxUnavailable": 1}}),
            vec![s("spec: Invalid value: {\"MinAvailable\":1,\"Selector\":{\"matchLabels\":{\"app\":\"web\"}},\"MaxUnavailable\":1,\"UnhealthyPodEvictionPolicy\":null}: minAvailable and maxUnavailable cannot be both set")]),
        ("minAvailable -1", json!({"spec": {"minAvailable": -1}}), vec![s("spec.minAvailable: Invalid value: -1: must be greater than or equal to 0")]),
        ("minAvailable 1.1%", json!({"spec": {"minAvailable": "1.1%"}}), vec![format!("spec.minAvailable: Invalid value: \"1.1%\": {PERCENT}")]),
        ("minAvailable nope", json!({"spec": {"minAvailable": "nope"}}), vec![format!("spec.minAvailable: Invalid value: \"nope\": {PERCENT}")]),
        ("minAvailable 101%", json!({"spec": {"minAvailable": "101%"}}), vec![s("spec.minAvailable: Invalid value: \"101%\": must not be greater than 100%")]),
        ("maxUnavailable 110%", json!({"spec": {"minAvailable": null, "maxUnavailable": "110%"}}),
            vec![s("spec.maxUnavailable: Invalid value: \"110%\": must not be greater than 100%")]),
        ("maxUnavailable -1", json!({"spec": {"minAvailable": null, "maxUnavailable": -1}}),
            vec![s("spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0")]),
        ("unhealthyPodEvictionPolicy Invalid", json!({"spec": {"unhealthyPodEvictionPolicy": "Invalid"}}),
            vec![s("spec.unhealthyPodEvictionPolicy: Unsupported value: \"Invalid\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"")]),
        ("In without values", json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}}),
            vec![s("spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'")]),
        ("operator Foo", json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Foo"}]}}}),
            vec![s("spec.selector.matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector operator")]),
        ("a bad label value", json!({"spec": {"selector": {"matchLabels": {"k": "bad value"}}}}),
            vec![format!("spec.selector.matchLabels: Invalid value: \"bad value\": {LABEL_VALUE}")]),
        ("Exists with values", json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]}}}),
            vec![s("spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")]),
        ("a name with a slash (only once the spec is good)", json!({"metadata": {"name": "a/b"}}),
            vec![s("metadata.name: Invalid value: \"a/b\": may not contain '/'")]),
    ];
    table("policy", "PodDisruptionBudget", &base(), &cases);
}

#[test]
fn valid_budgets() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        ("50%", json!({"spec": {"minAvailable": "50%"}}), vec![]),
        ("100%", json!({"spec": {"minAvailable": "100%"}}), vec![]),
        (
            "maxUnavailable 0",
            json!({"spec": {"minAvailable": null, "maxUnavailable": 0}}),
            vec![],
        ),
        ("neither", json!({"spec": {"minAvailable": null}}), vec![]),
        (
            "an empty selector",
            json!({"spec": {"selector": {}}}),
            vec![],
        ),
        (
            "a name upstream takes for a budget",
            json!({"metadata": {"name": "Web_Budget"}}),
            vec![],
        ),
    ];
    table("policy", "PodDisruptionBudget", &base(), &cases);
}

#[test]
fn updates() {
    let cases = vec![
        (
            "spec changed",
            json!({}),
            json!({"spec": {"minAvailable": 2}}),
            vec![],
        ),
        (
            "spec made invalid",
            json!({}),
            json!({"spec": {"minAvailable": "150%"}}),
            vec![s(
                "spec.minAvailable: Invalid value: \"150%\": must not be greater than 100%",
            )],
        ),
    ];
    update_table("policy", "PodDisruptionBudget", &base(), &cases);
}
