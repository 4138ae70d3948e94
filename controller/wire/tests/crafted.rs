//! The special JSON forms, on bodies encoded by prost from the upstream
//! messages: Quantity, IntOrString both ways, Time, MicroTime,
//! RawExtension, FieldsV1, bytes, maps, and the zero-value rules.

mod common;

use common::body;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use sluice_wire::{decode, Problem, WireError};

fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    })
}

fn quantity(s: &str) -> Quantity {
    Quantity {
        string: Some(s.into()),
    }
}

fn int(i: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(i),
        str_val: Some(String::new()),
    })
}

fn string(s: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: Some(s.into()),
    })
}

#[test]
fn quantities_are_their_strings() {
    let pod = core::Pod {
        metadata: meta("p"),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("c".into()),
                resources: Some(core::ResourceRequirements {
                    limits: [("cpu".into(), quantity("500m"))].into(),
                    requests: [("memory".into(), quantity("1Gi"))].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Pod", &pod)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m"}, "requests": {"memory": "1Gi"}})
    );
}

#[test]
fn int_or_string_is_a_number_or_a_string() {
    let svc = core::Service {
        metadata: meta("s"),
        spec: Some(core::ServiceSpec {
            ports: vec![
                core::ServicePort {
                    port: Some(80),
                    target_port: int(8080),
                    ..Default::default()
                },
                core::ServicePort {
                    port: Some(443),
                    target_port: string("https"),
                    ..Default::default()
                },
            ],
            cluster_ips: vec!["10.0.0.1".into(), "fd00::1".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Service", &svc)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"],
        json!({
            "ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": "https"}],
            "clusterIPs": ["10.0.0.1", "fd00::1"],
        })
    );
    // maxUnavailable 0 is a set IntOrString: kept, unlike a zero scalar.
    let d = apps::Deployment {
        metadata: meta("d"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: int(0),
                    max_surge: string("25%"),
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("apps/v1", "Deployment", &d)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"],
        json!({
            "replicas": 0,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
        })
    );
}

#[test]
fn a_bad_int_or_string_type_is_named() {
    let svc = core::Service {
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                target_port: Some(IntOrString {
                    r#type: Some(7),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = decode(&body("v1", "Service", &svc)).err();
    assert_eq!(
        err,
        Some(WireError::Malformed {
            path: "spec.ports[0].targetPort".into(),
            problem: Problem::BadIntOrString(7),
        })
    );
}

#[test]
fn times_are_rfc3339_and_the_zero_time_is_omitted() {
    let time = |seconds| {
        Some(meta::Time {
            seconds: Some(seconds),
            nanos: Some(999),
        })
    };
    let ns = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: Some("n".into()),
            creation_timestamp: time(1_795_460_400),
            // What gogo writes for Go's zero time: an empty message.
            deletion_timestamp: Some(meta::Time {
                seconds: None,
                nanos: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Namespace", &ns)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["metadata"],
        json!({"name": "n", "creationTimestamp": "2026-11-23T19:00:00Z"})
    );
}

#[test]
fn micro_times_keep_six_digits() {
    let lease = coordination::Lease {
        metadata: meta("l"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("node-1".into()),
            lease_duration_seconds: Some(40),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_795_460_400),
                nanos: Some(123_456_789),
            }),
            ..Default::default()
        }),
    };
    let got =
        decode(&body("coordination.k8s.io/v1", "Lease", &lease)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"],
        json!({
            "holderIdentity": "node-1",
            "leaseDurationSeconds": 40,
            "renewTime": "2026-11-23T19:00:00.123456Z",
        })
    );
}

#[test]
fn raw_extensions_and_fields_v1_embed_their_json() {
    let rev = apps::ControllerRevision {
        metadata: Some(meta::ObjectMeta {
            name: Some("r".into()),
            managed_fields: vec![meta::ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(meta::FieldsV1 {
                    raw: Some(br#"{"f:spec":{}}"#.to_vec()),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        data: Some(RawExtension {
            raw: Some(br#"{"spec":{"template":{"a":[1,2]}}}"#.to_vec()),
        }),
        revision: Some(3),
    };
    let got =
        decode(&body("apps/v1", "ControllerRevision", &rev)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got["data"], json!({"spec": {"template": {"a": [1, 2]}}}));
    assert_eq!(got["revision"], 3);
    assert_eq!(
        got["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
    );
}

#[test]
fn a_raw_extension_may_hold_a_protobuf_object() {
    let inner = body(
        "v1",
        "Namespace",
        &core::Namespace {
            metadata: meta("inner"),
            ..Default::default()
        },
    );
    let rev = apps::ControllerRevision {
        data: Some(RawExtension { raw: Some(inner) }),
        ..Default::default()
    };
    let got =
        decode(&body("apps/v1", "ControllerRevision", &rev)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["data"],
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inner"}})
    );
}

#[test]
fn a_raw_extension_that_is_not_json_is_named() {
    let rev = apps::ControllerRevision {
        data: Some(RawExtension {
            raw: Some(b"{not json".to_vec()),
        }),
        ..Default::default()
    };
    match decode(&body("apps/v1", "ControllerRevision", &rev)) {
        Err(WireError::Malformed {
            path,
            problem: Problem::NotJson(_),
        }) => assert_eq!(path, "data"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bytes_are_base64_and_maps_are_objects() {
    let secret = core::Secret {
        metadata: meta("s"),
        data: [
            ("bin".into(), vec![0u8, 0xff, 0x10]),
            ("empty".into(), Vec::new()),
        ]
        .into(),
        string_data: [("plain".into(), "text".into())].into(),
        r#type: Some("Opaque".into()),
        immutable: Some(false),
    };
    let got = decode(&body("v1", "Secret", &secret)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s"},
            "data": {"bin": "AP8Q", "empty": ""},
            "stringData": {"plain": "text"},
            "type": "Opaque",
            // A Go *bool set to false: kept.
            "immutable": false,
        })
    );
    let cm = core::ConfigMap {
        metadata: meta("c"),
        binary_data: [("b".into(), b"hi".to_vec())].into(),
        ..Default::default()
    };
    let got = decode(&body("v1", "ConfigMap", &cm)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got["binaryData"], json!({"b": "aGk="}));
}

#[test]
fn zero_scalars_are_omitted_as_omitempty_omits_them() {
    // gogo writes every non-pointer Go field; these are all zero.
    let ns = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: Some("n".into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            generation: Some(0),
            ..Default::default()
        }),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: Some(String::new()),
            ..Default::default()
        }),
    };
    let got = decode(&body("v1", "Namespace", &ns)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "n"},
            "spec": {},
            "status": {},
        })
    );
}

#[test]
fn inline_structs_join_their_parent() {
    let pod = core::Pod {
        spec: Some(core::PodSpec {
            volumes: vec![core::Volume {
                name: Some("v".into()),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: Some("cm".into()),
                        }),
                        default_mode: Some(0o644),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            host_ipc: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Pod", &pod)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"],
        json!({
            "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}],
            "hostIPC": true,
        })
    );
}

#[test]
fn a_probe_s_handler_joins_the_probe() {
    let pod = core::Pod {
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("c".into()),
                liveness_probe: Some(core::Probe {
                    handler: Some(core::ProbeHandler {
                        http_get: Some(core::HttpGetAction {
                            path: Some("/healthz".into()),
                            port: string("http"),
                            http_headers: vec![core::HttpHeader {
                                name: Some("X".into()),
                                value: Some(String::new()),
                            }],
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    period_seconds: Some(10),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Pod", &pod)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"]["containers"][0]["livenessProbe"],
        // HTTPHeader's value has no omitempty in Go: kept when empty.
        json!({
            "httpGet": {"path": "/healthz", "port": "http", "httpHeaders": [{"name": "X", "value": ""}]},
            "periodSeconds": 10,
        })
    );
}

#[test]
fn repeated_numbers_read_packed_or_not() {
    // prost writes k8s' `packed = "false"` fields one by one.
    let pod = core::Pod {
        spec: Some(core::PodSpec {
            security_context: Some(core::PodSecurityContext {
                supplemental_groups: vec![1000, 0, -1],
                run_as_user: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode(&body("v1", "Pod", &pod)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"]["securityContext"],
        // runAsUser 0 is root, set on purpose: kept.
        json!({"supplementalGroups": [1000, 0, -1], "runAsUser": 0})
    );
    // The same list packed: spec(2) { securityContext(14) {
    // supplementalGroups(4) = [1000, 5] } }.
    let groups = [0x22, 3, 0xe8, 0x07, 5];
    let ctx = [&[0x72, groups.len() as u8][..], &groups].concat();
    let spec = [&[0x12, ctx.len() as u8][..], &ctx].concat();
    let got = decode(&common::envelope("v1", "Pod", spec)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"]["securityContext"]["supplementalGroups"],
        json!([1000, 5])
    );
}

#[test]
fn an_error_names_the_element_it_is_in() {
    // spec(2) { containers(2) {name "ok"}, containers(2) {name 0xff} }
    let spec = [0x12, 4, 0x0a, 2, b'o', b'k', 0x12, 3, 0x0a, 1, 0xff];
    let raw = [&[0x12, spec.len() as u8][..], &spec].concat();
    assert_eq!(
        decode(&common::envelope("v1", "Pod", raw)),
        Err(WireError::Malformed {
            path: "spec.containers[1].name".into(),
            problem: Problem::InvalidUtf8,
        })
    );
}
