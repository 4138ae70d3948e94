//! Bodies built with prost's encoder of the upstream messages (the k8s-pb
//! crate), wrapped as client-go wraps them.

#![allow(dead_code)]

use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;

/// `k8s\0` + a runtime.Unknown holding `object` as apiVersion/kind.
pub fn body(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    envelope(api_version, kind, object.encode_to_vec())
}

/// The envelope around raw bytes, with the empty contentEncoding and
/// contentType client-go writes.
pub fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// A fixture file's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
