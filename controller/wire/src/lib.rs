//! Kubernetes protobuf request bodies → the JSON the Kubernetes API speaks.
//!
//! client-go, and so kubectl's `create deployment`, `create service`,
//! `create namespace` and the other generator commands, sends built-in kinds
//! as `Content-Type: application/vnd.kubernetes.protobuf` and does not fall
//! back to JSON. The controller stores and serves JSON; [`decode`] turns
//! such a body into the object kubectl would have sent as JSON.
//!
//! ```no_run
//! # fn body() -> Vec<u8> { Vec::new() }
//! let object = sluice_wire::decode(&body())?; // a serde_json::Value
//! assert_eq!(object["kind"], "Deployment");
//! # Ok::<(), sluice_wire::WireError>(())
//! ```
//!
//! On the wire a body is the magic `k8s\0`, then a `runtime.Unknown` whose
//! `typeMeta` names the apiVersion and kind and whose `raw` bytes are the
//! object's own message. The messages are walked by tables generated from
//! the `k8s-pb` and `k8s-openapi` crates (`tools/gen_schema.py`), with Go's
//! JSON forms for Quantity, IntOrString, Time, MicroTime, Duration,
//! RawExtension and FieldsV1, base64 for bytes, and `omitempty`'s rules for
//! zero values (see [`WireError`] for what is refused).
//!
//! An unknown apiVersion/kind is [`WireError::UnknownKind`], which the
//! server answers with 415. Input is never trusted: lengths are checked
//! against the bytes left, nesting is bounded, and no input panics.

mod envelope;
mod error;
mod reader;
mod schema;
mod special;
mod walk;

pub use error::{Problem, WireError};

/// The JSON object for a Kubernetes protobuf body (magic bytes included),
/// with `apiVersion` and `kind` from its envelope.
pub fn decode(bytes: &[u8]) -> Result<serde_json::Value, WireError> {
    envelope::decode(bytes, 0)
}

/// Whether this decoder has a schema for `api_version` and `kind`: the
/// server can tell 415 from 400 without decoding.
pub fn knows(api_version: &str, kind: &str) -> bool {
    schema::kind(api_version, kind).is_some()
}
