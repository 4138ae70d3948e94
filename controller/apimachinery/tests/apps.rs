//! Deployment and ReplicaSet validation (apps/v1), with the strategy's
//! selector immutability.

mod common;
use common::*;
use serde_json::{json, Value};

fn template() -> Value {
    json!({"metadata": {"labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c", "image": "x", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}],
                    "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30}})
}

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": template(),
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}})
}

fn replica_set() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": template()}})
}

const NOT_ALWAYS: &str =
    "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"";

#[test]
fn invalid_deployments() {
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}), vec![s("metadata.name: Required value: name or generateName is required")]),
        ("no namespace", json!({"metadata": {"namespace": ""}}), vec![s("metadata.namespace: Required value")]),
        ("an empty selector", json!({"spec": {"selector": {"matchLabels": null}}}),
            vec![s("spec.selector: Invalid value: {}: empty selector is invalid for deployment")]),
        ("a selector the template does not match", json!({"spec": {"template": {"metadata": {"labels": {"a": null, "c": "d"}}}}}),
            vec![s("spec.template.metadata.labels: Invalid value: {\"c\":\"d\"}: `selector` does not match template `labels`")]),
        ("replicas -1", json!({"spec": {"replicas": -1}}), vec![s("spec.replicas: Invalid value: -1: must be greater than or equal to 0")]),
        ("strategy randomtype", json!({"spec": {"strategy": {"type": "randomtype", "rollingUpdate": null}}}),
            vec![s("spec.strategy: Unsupported value: {\"Type\":\"randomtype\",\"RollingUpdate\":null}: supported values: \"Recreate\", \"RollingUpdate\"")]),
        ("Recreate with rollingUpdate", json!({"spec": {"strategy": {"type": "Recreate"}}}),
            vec![s("spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'")]),
        ("maxSurge 20Percent", json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": "20Percent"}}}}),
            vec![format!("spec.strategy.rollingUpdate.maxSurge: Invalid value: \"20Percent\": {PERCENT}")]),
        ("maxUnavailable 110%", json!({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": "110%"}}}}),
            vec![s("spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"110%\": must not be greater than 100%")]),
        ("both 0", json!({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}}}),
            vec![s("spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0")]),
        ("progress deadline under minReadySeconds", json!({"spec": {"minReadySeconds": 10, "progressDeadlineSeconds": 5}}),
            vec![s("spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds")]),
        ("template restartPolicy Never", json!({"spec": {"template": {"spec": {"restartPolicy": "Never"}}}}), vec![s(NOT_ALWAYS)]),
        ("template activeDeadlineSeconds", json!({"spec": {"template": {"spec": {"activeDeadlineSeconds": 10}}}}),
            vec![s("spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported")]),
        ("a bad selector operator", json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}}}),
            vec![s("spec.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"),
                 s("spec.selector: Invalid value: {\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Near\",\"values\":[\"b\"]}],\"matchLabels\":{\"a\":\"b\"}}: invalid label selector")]),
        ("a template container named Bad_Name", json!({"spec": {"template": {"spec": {"containers": [{"name": "Bad_Name", "image": "x",
                "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}}}}),
            vec![format!("spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\": {LABEL}")]),
    ];
    table("apps", "Deployment", &deployment(), &cases);
}

#[test]
fn valid_deployments() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "Recreate",
            json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}),
            vec![],
        ),
        (
            "maxSurge over 100%",
            json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": "200%", "maxUnavailable": 0}}}}),
            vec![],
        ),
        ("replicas 0", json!({"spec": {"replicas": 0}}), vec![]),
        (
            "a selector by expression",
            json!({"spec": {"selector": {"matchLabels": null, "matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}}}),
            vec![],
        ),
    ];
    table("apps", "Deployment", &deployment(), &cases);
}

#[test]
fn deployment_updates() {
    let cases = vec![
        (
            "selector changed",
            json!({}),
            json!({"spec": {"selector": {"matchLabels": {"a": "c"}}, "template": {"metadata": {"labels": {"a": "c"}}}}}),
            vec![s(
                "spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"c\"}}: field is immutable",
            )],
        ),
        (
            "image changed and scaled",
            json!({}),
            json!({"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "c", "image": "y",
            "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}}}}),
            vec![],
        ),
        (
            "scaled to -1",
            json!({}),
            json!({"spec": {"replicas": -1}}),
            vec![s(
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            )],
        ),
    ];
    update_table("apps", "Deployment", &deployment(), &cases);
}

#[test]
fn invalid_replica_sets() {
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}), vec![s("metadata.name: Required value: name or generateName is required")]),
        ("no namespace", json!({"metadata": {"namespace": null}}), vec![s("metadata.namespace: Required value")]),
        ("an empty selector", json!({"spec": {"selector": {"matchLabels": null}}}),
            vec![s("spec.selector: Invalid value: {}: empty selector is invalid for deployment")]),
        ("a selector the template does not match", json!({"spec": {"template": {"metadata": {"labels": {"a": null, "c": "d"}}}}}),
            vec![s("spec.template.metadata.labels: Invalid value: {\"c\":\"d\"}: `selector` does not match template `labels`")]),
        ("no template", json!({"spec": {"template": null}}),
            vec![s("spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`"),
                 s("spec.template.spec.containers: Required value"),
                 s("spec.template.spec.terminationGracePeriodSeconds: Required value"),
                 s("spec.template.spec.restartPolicy: Required value"),
                 s("spec.template.spec.dnsPolicy: Required value"),
                 s("spec.template.spec.restartPolicy: Unsupported value: \"\": supported values: \"Always\"")]),
        ("replicas -1", json!({"spec": {"replicas": -1}}), vec![s("spec.replicas: Invalid value: -1: must be greater than or equal to 0")]),
        ("a bad template label", json!({"spec": {"template": {"metadata": {"labels": {"NoUppercaseOrSpecialCharsLike=Equals": "b"}}}}}),
            vec![format!("spec.template.labels: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {NAME_PART}")]),
        ("template restartPolicy OnFailure", json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}),
            vec![s("spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"")]),
        ("template activeDeadlineSeconds", json!({"spec": {"template": {"spec": {"activeDeadlineSeconds": 1}}}}),
            vec![s("spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported")]),
        ("minReadySeconds -1", json!({"spec": {"minReadySeconds": -1}}),
            vec![s("spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0")]),
    ];
    table("apps", "ReplicaSet", &replica_set(), &cases);
}

#[test]
fn valid_replica_sets() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "more template labels than the selector",
            json!({"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}}),
            vec![],
        ),
        (
            "a 253-character name",
            json!({"metadata": {"name": format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61))}}),
            vec![],
        ),
    ];
    table("apps", "ReplicaSet", &replica_set(), &cases);
}

#[test]
fn replica_set_updates() {
    let cases = vec![
        ("selector changed", json!({}), json!({"spec": {"selector": {"matchLabels": {"a": "b", "x": "y"}}, "template": {"metadata": {"labels": {"x": "y"}}}}}),
            vec![s("spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"b\",\"x\":\"y\"}}: field is immutable")]),
        ("scaled", json!({}), json!({"spec": {"replicas": 3}}), vec![]),
    ];
    update_table("apps", "ReplicaSet", &replica_set(), &cases);
}
