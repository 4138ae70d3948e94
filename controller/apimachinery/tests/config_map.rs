//! ConfigMap validation: the cases of upstream's TestValidateConfigMap
//! and TestValidateConfigMapUpdate, with the rendered errors.

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "validname", "namespace": "validns"},
           "data": {"key": "value"}})
}

fn cm(cases: &[(&str, Value, Vec<String>)]) {
    table("", "ConfigMap", &base(), cases);
}

#[test]
fn invalid_config_maps() {
    let long = "a".repeat(254);
    let big = "x".repeat(1024 * 1024 + 1);
    let half = "x".repeat(512 * 1024);
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}),
            vec![s("metadata.name: Required value: name or generateName is required")]),
        ("a bad name", json!({"metadata": {"name": "NoUppercaseOrSpecialCharsLike=Equals"}}),
            vec![format!("metadata.name: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {SUBDOMAIN}")]),
        ("no namespace", json!({"metadata": {"namespace": ""}}), vec![s("metadata.namespace: Required value")]),
        ("a bad namespace", json!({"metadata": {"namespace": "NoUppercaseOrSpecialCharsLike=Equals"}}),
            vec![format!("metadata.namespace: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {LABEL}")]),
        ("key a*b", json!({"data": {"a*b": "value"}}),
            vec![format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}")]),
        ("key .", json!({"data": {".": "value"}}), vec![s("data[.]: Invalid value: \".\": must not be '.'")]),
        ("key ..", json!({"data": {"..": "value"}}), vec![s("data[..]: Invalid value: \"..\": must not be '..'")]),
        ("key ..a", json!({"data": {"..a": "value"}}), vec![s("data[..a]: Invalid value: \"..a\": must not start with '..'")]),
        ("an empty key", json!({"data": {"": "value"}}), vec![format!("data[]: Invalid value: \"\": {CONFIG_KEY}")]),
        ("a key of 254 characters", json!({"data": {long.clone(): "value"}}),
            vec![format!("data[{long}]: Invalid value: \"{long}\": must be no more than 253 characters")]),
        ("a key with a slash", json!({"data": {"a/b": "value"}}),
            vec![format!("data[a/b]: Invalid value: \"a/b\": {CONFIG_KEY}")]),
        ("1 MiB and a byte", json!({"data": {"key": big}}), vec![s("[]: Too long: may not be more than 1048576 bytes")]),
        ("1 MiB and a byte over data and binaryData", json!({"data": {"key": half.clone()}, "binaryData": {"other": b64(&format!("{half}x"))}}),
            vec![s("[]: Too long: may not be more than 1048576 bytes")]),
        ("a key in data and binaryData", json!({"data": {"key": "v1"}, "binaryData": {"key": "djI="}}),
            vec![s("data[key]: Invalid value: \"key\": duplicate of key present in binaryData")]),
        ("binaryData keys a*b, . and ..", json!({"data": null, "binaryData": {"a*b": "djI=", ".": "djI=", "..": "djI="}}),
            vec![s("binaryData[.]: Invalid value: \".\": must not be '.'"),
                 s("binaryData[..]: Invalid value: \"..\": must not be '..'"),
                 format!("binaryData[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}")]),
        ("every error at once", json!({"metadata": {"name": ""}, "data": {"a*b": "v", "key": "v"}, "binaryData": {"key": "djI="}}),
            vec![s("metadata.name: Required value: name or generateName is required"),
                 format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}"),
                 s("data[key]: Invalid value: \"key\": duplicate of key present in binaryData")]),
    ];
    cm(&cases);
}

#[test]
fn valid_config_maps() {
    let key = "a".repeat(253);
    let half = "x".repeat(512 * 1024);
    let cases = vec![
        ("the base", json!({}), vec![]),
        ("no data at all", json!({"data": null}), vec![]),
        (
            "empty data and binaryData",
            json!({"data": {}, "binaryData": {}}),
            vec![],
        ),
        (
            "a key with a leading dot",
            json!({"data": {".ab": "value"}}),
            vec![],
        ),
        (
            "a key of 253 characters",
            json!({"data": {key: "value"}}),
            vec![],
        ),
        (
            "keys of every allowed character",
            json!({"data": {"key.name": "", "KEY_NAME": "", "key-name": "", "a..b": ""}}),
            vec![],
        ),
        (
            "exactly 1 MiB over data and binaryData",
            json!({"data": {"key": half.clone()}, "binaryData": {"other": b64(&half)}}),
            vec![],
        ),
        (
            "binary values that are no UTF-8",
            json!({"binaryData": {"bin": "/w=="}}),
            vec![],
        ),
        (
            "a value holding anything",
            json!({"data": {"key": "a\nb\u{0}\"c"}}),
            vec![],
        ),
        ("immutable", json!({"immutable": true}), vec![]),
    ];
    cm(&cases);
}

#[test]
fn updates() {
    let cases = vec![
        (
            "data changed",
            json!({}),
            json!({"data": {"key": "other", "new": "x"}}),
            vec![],
        ),
        (
            "made immutable with new data",
            json!({}),
            json!({"immutable": true, "data": {"key": "other"}}),
            vec![],
        ),
        (
            "immutable, labels changed",
            json!({"immutable": true}),
            json!({"immutable": true, "metadata": {"labels": {"a": "b"}}}),
            vec![],
        ),
        (
            "immutable, data changed",
            json!({"immutable": true}),
            json!({"immutable": true, "data": {"key": "other"}}),
            vec![s(
                "data: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable, a key added",
            json!({"immutable": true}),
            json!({"immutable": true, "data": {"key": "value", "k2": "v"}}),
            vec![s(
                "data: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable, binaryData added",
            json!({"immutable": true}),
            json!({"immutable": true, "binaryData": {"b": "djI="}}),
            vec![s(
                "binaryData: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable unset",
            json!({"immutable": true}),
            json!({"immutable": null}),
            vec![s(
                "immutable: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable made false with new data",
            json!({"immutable": true}),
            json!({"immutable": false, "data": {"key": "x"}}),
            vec![
                s("immutable: Forbidden: field is immutable when `immutable` is set"),
                s("data: Forbidden: field is immutable when `immutable` is set"),
            ],
        ),
        (
            "renamed",
            json!({}),
            json!({"metadata": {"name": "other"}}),
            vec![s(
                "metadata.name: Invalid value: \"other\": field is immutable",
            )],
        ),
        (
            "a bad key added",
            json!({}),
            json!({"data": {"a*b": "v"}}),
            vec![format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}")],
        ),
        (
            "grown past 1 MiB",
            json!({}),
            json!({"data": {"key": "x".repeat(1024 * 1024 + 1)}}),
            vec![s("[]: Too long: may not be more than 1048576 bytes")],
        ),
        // A key removed leaves `{}`: the same data as none at all.
        (
            "immutable, no data written empty",
            json!({"immutable": true, "data": null}),
            json!({"immutable": true, "data": {"key": null}}),
            vec![],
        ),
    ];
    update_table("", "ConfigMap", &base(), &cases);
}
