//! core/v1 Event validation: upstream's legacy checks.

mod common;
use common::*;
use serde_json::{json, Value};

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "foo"},
           "involvedObject": {"kind": "Pod", "name": "p", "namespace": "foo"}, "reason": "Started"})
}

fn new_style(extra: Value) -> Value {
    merge(
        &json!({"eventTime": "2026-12-01T10:00:00.000000Z", "reportingComponent": "example.com/ctl",
                "reportingInstance": "i", "action": "Start"}),
        &extra,
    )
}

#[test]
fn invalid_events() {
    let cases = vec![
        (
            "object namespace empty, event's not default",
            json!({"involvedObject": {"namespace": ""}}),
            vec![s(
                "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
            )],
        ),
        (
            "object in another namespace",
            json!({"involvedObject": {"namespace": "bar"}}),
            vec![s(
                "involvedObject.namespace: Invalid value: \"bar\": does not match event.namespace",
            )],
        ),
        (
            "no reporting component",
            new_style(json!({"reportingComponent": ""})),
            vec![
                s("reportingComponent: Required value"),
                s("reportingComponent: Invalid value: \"\": name part must be non-empty"),
                format!("reportingComponent: Invalid value: \"\": {NAME_PART}"),
            ],
        ),
        (
            "reporting instance too long",
            new_style(json!({"reportingInstance": "a".repeat(129)})),
            vec![s(
                "reportingInstance: Invalid value: \"\": can have at most 128 characters",
            )],
        ),
        (
            "no action",
            new_style(json!({"action": ""})),
            vec![s("action: Required value")],
        ),
        (
            "no reason",
            new_style(json!({"reason": ""})),
            vec![s("reason: Required value")],
        ),
        (
            "reason too long",
            new_style(json!({"reason": "r".repeat(129)})),
            vec![s(
                "reason: Invalid value: \"\": can have at most 128 characters",
            )],
        ),
        (
            "message too long",
            new_style(json!({"message": "m".repeat(1025)})),
            vec![s(
                "message: Invalid value: \"\": can have at most 1024 characters",
            )],
        ),
        (
            "new style, object namespace empty outside default",
            new_style(json!({"involvedObject": {"namespace": ""}})),
            vec![s(
                "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
            )],
        ),
        (
            "a name with a slash (only once the event is good)",
            json!({"metadata": {"name": "a/b"}}),
            vec![s(
                "metadata.name: Invalid value: \"a/b\": may not contain '/'",
            )],
        ),
    ];
    table("", "Event", &base(), &cases);
}

#[test]
fn valid_events() {
    let cases = vec![
        ("the base", json!({}), vec![]),
        (
            "object namespace empty in default",
            json!({"metadata": {"namespace": "default"}, "involvedObject": {"namespace": ""}}),
            vec![],
        ),
        ("new style", new_style(json!({})), vec![]),
        (
            "new style, cluster object in kube-system",
            new_style(
                json!({"metadata": {"namespace": "kube-system"}, "involvedObject": {"namespace": ""}}),
            ),
            vec![],
        ),
        (
            "a name upstream takes for an event",
            json!({"metadata": {"name": "p.17a6b3c2f1e0d9c8"}}),
            vec![],
        ),
    ];
    table("", "Event", &base(), &cases);
}

#[test]
fn updates() {
    let cases = vec![
        ("counted again", json!({}), json!({"count": 2}), vec![]),
        (
            "moved to another object namespace",
            json!({}),
            json!({"involvedObject": {"namespace": "bar"}}),
            vec![s(
                "involvedObject.namespace: Invalid value: \"bar\": does not match event.namespace",
            )],
        ),
    ];
    update_table("", "Event", &base(), &cases);
}
