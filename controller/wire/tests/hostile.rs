//! Bytes from the network: truncated, garbage, huge, deeply nested. Each
//! gives a `WireError`, never a panic, an unbounded allocation or an
//! unbounded recursion.

mod common;

use common::{body, envelope, fixture};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use proptest::prelude::*;
use sluice_wire::{decode, Problem, WireError};

#[test]
fn every_truncation_of_a_kubectl_body_is_an_error_or_a_whole_prefix() {
    let full = fixture("deployment_d1.pb");
    let whole = decode(&full).unwrap_or_else(|e| panic!("{e}"));
    for n in 0..full.len() {
        match decode(&full[..n]) {
            Err(_) => {}
            // A cut between the envelope's fields leaves a valid, shorter
            // envelope: the typeMeta alone (no object yet), or the whole
            // object without the trailing contentEncoding/contentType.
            Ok(v) => assert!(
                v == whole || v.get("metadata").is_none(),
                "cut at {n} of {} decoded to {v}",
                full.len()
            ),
        }
    }
    // Most cuts fall inside the object's own bytes.
    let errors = (0..full.len())
        .filter(|n| decode(&full[..*n]).is_err())
        .count();
    assert!(errors > full.len() * 9 / 10, "{errors} of {}", full.len());
}

#[test]
fn a_body_without_the_magic_is_refused() {
    assert_eq!(decode(b""), Err(WireError::BadMagic));
    assert!(!WireError::BadMagic.is_unsupported());
    assert_eq!(decode(b"k8s"), Err(WireError::BadMagic));
    assert_eq!(decode(b"{\"kind\":\"Pod\"}"), Err(WireError::BadMagic));
    let mut body = fixture("namespace_n1.pb");
    body[3] = 1;
    assert_eq!(decode(&body), Err(WireError::BadMagic));
}

#[test]
fn an_unknown_kind_is_named() {
    let body = envelope("example.com/v1", "Widget", Vec::new());
    assert_eq!(
        decode(&body),
        Err(WireError::UnknownKind {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
        })
    );
    assert!(decode(&body).is_err_and(|e| e.is_unsupported()));
    assert!(!sluice_wire::knows("example.com/v1", "Widget"));
    assert!(sluice_wire::knows("apps/v1", "Deployment"));
    // A known kind under a version it is not served in.
    let body = envelope("apps/v1", "Pod", Vec::new());
    assert!(matches!(decode(&body), Err(WireError::UnknownKind { .. })));
}

#[test]
fn an_envelope_without_type_meta_is_named() {
    assert_eq!(
        decode(b"k8s\0"),
        Err(WireError::MissingTypeMeta("apiVersion"))
    );
    let body = envelope("v1", "", Vec::new());
    assert_eq!(decode(&body), Err(WireError::MissingTypeMeta("kind")));
}

#[test]
fn a_compressed_object_is_refused() {
    let mut body = envelope("v1", "Namespace", Vec::new());
    // contentEncoding (field 3) = "gzip", appended after the envelope.
    body.extend([0x1a, 4, b'g', b'z', b'i', b'p']);
    assert_eq!(
        decode(&body),
        Err(WireError::ContentEncoding("gzip".into()))
    );
}

#[test]
fn a_length_beyond_the_input_is_refused_without_allocating() {
    // raw (field 2) claims 2^62 bytes.
    let mut body = b"k8s\0".to_vec();
    body.extend([0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    match decode(&body) {
        Err(WireError::Malformed {
            problem: Problem::Truncated { needed, .. },
            ..
        }) => assert_eq!(needed, 1 << 62),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wrong_wire_type_is_named_with_its_path() {
    // ObjectMeta.name (field 1 of metadata) sent as a varint.
    let mut raw = vec![0x0a, 2, 0x08, 5];
    raw.extend([0x12, 0]);
    match decode(&envelope("v1", "Namespace", raw)) {
        Err(WireError::Malformed { path, problem }) => {
            assert_eq!(path, "metadata.name");
            assert!(matches!(problem, Problem::WrongWireType { got: 0, .. }));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_utf8_is_named() {
    let raw = vec![0x0a, 4, 0x0a, 2, 0xff, 0xfe];
    match decode(&envelope("v1", "Namespace", raw)) {
        Err(WireError::Malformed { path, problem }) => {
            assert_eq!(path, "metadata.name");
            assert_eq!(problem, Problem::InvalidUtf8);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_fields_are_skipped_without_descending() {
    // Field 99 of Namespace, a deep tower of nested length-delimited bytes:
    // unknown, so it is skipped whole.
    let mut junk = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x0a];
        push_varint(&mut outer, junk.len() as u64);
        outer.extend(junk);
        junk = outer;
    }
    let mut raw = vec![0x9a, 0x06];
    push_varint(&mut raw, junk.len() as u64);
    raw.extend(junk);
    let got = decode(&envelope("v1", "Namespace", raw)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace"})
    );
}

#[test]
fn nesting_through_raw_extensions_is_bounded() {
    // A ControllerRevision whose data holds a protobuf ControllerRevision,
    // 300 deep: past the bound, an error, not a stack overflow.
    let mut inner = body(
        "apps/v1",
        "ControllerRevision",
        &apps::ControllerRevision::default(),
    );
    for _ in 0..300 {
        let rev = apps::ControllerRevision {
            data: Some(RawExtension { raw: Some(inner) }),
            ..Default::default()
        };
        inner = body("apps/v1", "ControllerRevision", &rev);
    }
    match decode(&inner) {
        Err(WireError::Malformed { path, problem }) => {
            assert!(matches!(problem, Problem::TooDeep { limit: 100 }));
            assert!(path.starts_with("data.data.data"), "{path}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deeply_nested_json_in_a_raw_extension_is_bounded() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let rev = apps::ControllerRevision {
        data: Some(RawExtension {
            raw: Some(deep.into_bytes()),
        }),
        ..Default::default()
    };
    match decode(&body("apps/v1", "ControllerRevision", &rev)) {
        Err(WireError::Malformed {
            problem: Problem::NotJson(why),
            ..
        }) => assert!(why.contains("recursion"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_empty_elements_stay_proportional() {
    // 100k empty containers: 2 bytes each on the wire; decoding finishes
    // and yields exactly that many objects.
    let spec = core::PodSpec {
        containers: vec![core::Container::default(); 100_000],
        ..Default::default()
    };
    let pod = core::Pod {
        spec: Some(spec),
        ..Default::default()
    };
    let got = decode(&body("v1", "Pod", &pod)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got["spec"]["containers"].as_array().map(Vec::len),
        Some(100_000)
    );
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let mut with_magic = b"k8s\0".to_vec();
        with_magic.extend(&bytes);
        let _ = decode(&with_magic);
    }

    #[test]
    fn random_objects_in_a_valid_envelope_never_panic(
        raw in proptest::collection::vec(any::<u8>(), 0..512),
        kind in prop::sample::select(vec![
            ("apps/v1", "Deployment"), ("v1", "Pod"), ("v1", "Service"),
            ("v1", "Secret"), ("apps/v1", "ControllerRevision"),
            ("coordination.k8s.io/v1", "Lease"), ("policy/v1", "PodDisruptionBudget"),
        ]),
    ) {
        let _ = decode(&envelope(kind.0, kind.1, raw));
    }

    #[test]
    fn mutated_kubectl_bodies_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut body = fixture("deployment_d2.pb");
        for (at, byte) in flips {
            let i = at.index(body.len());
            body[i] = byte;
        }
        let _ = decode(&body);
    }
}
