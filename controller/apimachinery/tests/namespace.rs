//! Namespace validation.

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "abc"}, "spec": {"finalizers": ["kubernetes"]}})
}

#[test]
fn invalid_namespaces() {
    let long = "a".repeat(64);
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}), vec![s("metadata.name: Required value: name or generateName is required")]),
        ("name -123", json!({"metadata": {"name": "-123"}}), vec![format!("metadata.name: Invalid value: \"-123\": {LABEL}")]),
        ("name with dots", json!({"metadata": {"name": "a.b"}}), vec![s("metadata.name: Invalid value: \"a.b\": must not contain dots")]),
        ("name too long", json!({"metadata": {"name": long}}),
            vec![format!("metadata.name: Invalid value: \"{long}\": must be no more than 63 characters")]),
        ("a namespace", json!({"metadata": {"namespace": "makesnosense"}}), vec![s("metadata.namespace: Forbidden: not allowed on this type")]),
        ("a bad label key", json!({"metadata": {"labels": {"NoUppercaseOrSpecialCharsLike=Equals": "b"}}}),
            vec![format!("metadata.labels: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {NAME_PART}")]),
        ("finalizer Foo", json!({"spec": {"finalizers": ["Foo"]}}),
            vec![s("spec.finalizers: Invalid value: \"Foo\": name is neither a standard finalizer name nor is it fully qualified")]),
        ("an empty finalizer", json!({"spec": {"finalizers": ["", "foo.com/bar"]}}),
            vec![s("spec.finalizers: Invalid value: \"\": name part must be non-empty"),
                 format!("spec.finalizers: Invalid value: \"\": {NAME_PART}"),
                 s("spec.finalizers: Invalid value: \"\": name is neither a standard finalizer name nor is it fully qualified")]),
        ("a bad metadata finalizer", json!({"metadata": {"finalizers": ["bad"]}}),
            vec![s("metadata.finalizers[0]: Invalid value: \"bad\": name is neither a standard finalizer name nor is it fully qualified")]),
    ];
    table("", "Namespace", &base(), &cases);
}

#[test]
fn valid_namespaces() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "a 63-character name",
            json!({"metadata": {"name": "a".repeat(63)}}),
            vec![],
        ),
        (
            "a qualified finalizer",
            json!({"spec": {"finalizers": ["example.com/cleanup"]}}),
            vec![],
        ),
    ];
    table("", "Namespace", &base(), &cases);
}

#[test]
fn updates() {
    let cases = vec![
        (
            "renamed",
            json!({"metadata": {"name": "foo1"}}),
            json!({"metadata": {"name": "bar1"}}),
            vec![s(
                "metadata.name: Invalid value: \"bar1\": field is immutable",
            )],
        ),
        (
            "labelled",
            json!({}),
            json!({"metadata": {"labels": {"team": "a"}}}),
            vec![],
        ),
    ];
    update_table("", "Namespace", &base(), &cases);
}
