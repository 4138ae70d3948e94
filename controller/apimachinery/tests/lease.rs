//! Lease validation (coordination.k8s.io).

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "l", "namespace": "default"},
           "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})
}

const G: &str = "coordination.k8s.io";

#[test]
fn invalid_leases() {
    let cases = vec![
        ("bad name and namespace", json!({"metadata": {"name": "invalidName++", "namespace": "==invalid_Namespace=="}}),
            vec![format!("metadata.name: Invalid value: \"invalidName++\": {SUBDOMAIN}"),
                 format!("metadata.namespace: Invalid value: \"==invalid_Namespace==\": {LABEL}")]),
        ("no namespace", json!({"metadata": {"namespace": ""}}), vec![s("metadata.namespace: Required value")]),
        ("no name", json!({"metadata": {"name": null}}), vec![s("metadata.name: Required value: name or generateName is required")]),
        ("a lease of 0 seconds", json!({"spec": {"leaseDurationSeconds": 0}}),
            vec![s("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0")]),
        ("a negative lease", json!({"spec": {"leaseDurationSeconds": -5}}),
            vec![s("spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0")]),
        ("transitions -1", json!({"spec": {"leaseTransitions": -1}}),
            vec![s("spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0")]),
        ("a preferred holder without a strategy", json!({"spec": {"preferredHolder": "holder2"}}),
            vec![s("spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined")]),
        ("strategy foobar", json!({"spec": {"strategy": "foobar"}}),
            vec![s("spec.strategy.strategy: Unsupported value: \"foobar\": supported values: \"OldestEmulationVersion\"")]),
        ("strategy with too many slashes", json!({"spec": {"strategy": "example.com/foobar/toomanyslashes"}}),
            vec![s("spec.strategy.strategy: Invalid value: \"example.com/foobar/toomanyslashes\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]),
    ];
    table(G, "Lease", &base(), &cases);
}

#[test]
fn valid_leases() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "a lease of 1 second",
            json!({"spec": {"leaseDurationSeconds": 1}}),
            vec![],
        ),
        (
            "no spec fields",
            json!({"spec": {"holderIdentity": null, "leaseDurationSeconds": null}}),
            vec![],
        ),
        (
            "a qualified strategy and holder",
            json!({"spec": {"strategy": "example.com/foobar", "preferredHolder": "x"}}),
            vec![],
        ),
        (
            "the known strategy",
            json!({"spec": {"strategy": "OldestEmulationVersion"}}),
            vec![],
        ),
    ];
    table(G, "Lease", &base(), &cases);
}

#[test]
fn updates() {
    let cases =
        vec![
            (
                "duration 0 and transitions -1",
                json!({}),
                json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}),
                vec![s("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
                 s("spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0")],
            ),
            (
                "renewed by another holder",
                json!({}),
                json!({"spec": {"holderIdentity": "you", "leaseTransitions": 1}}),
                vec![],
            ),
            (
                "renamed",
                json!({}),
                json!({"metadata": {"name": "m"}}),
                vec![s("metadata.name: Invalid value: \"m\": field is immutable")],
            ),
        ];
    update_table(G, "Lease", &base(), &cases);
}
