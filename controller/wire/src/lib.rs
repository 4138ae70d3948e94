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
//! server answers with 415 ([`WireError::is_unsupported`]; [`knows`] asks
//! without decoding); every other error is a malformed body, 400. Input is
//! never trusted: lengths are checked against the bytes left, nesting is
//! bounded (100 messages; RawExtension JSON by serde_json's own limit), and
//! no input panics. The JSON grows in proportion to the body, so the
//! server's body-size limit bounds it.
//!
//! Known limits:
//! - Kinds: core/v1's (Pod, Service, Namespace, ConfigMap, Secret, ...),
//!   apps/v1, batch/v1, policy/v1, coordination/v1, discovery/v1,
//!   events/v1, autoscaling/v1 and v2, networking/v1, rbac/v1,
//!   scheduling/v1, TokenRequest and DeleteOptions. Adding one is a line
//!   in `tools/gen_schema.py`.
//! - The schema is k8s-pb 0.9's: fields newer than it (alpha fields of
//!   Kubernetes 1.36/1.37, which the generator lists) are skipped if sent.
//! - gogo-protobuf writes zero values of non-pointer Go fields, and the
//!   bytes cannot tell them from set zeros: zero scalars are omitted
//!   (`omitempty`) except where the field is required or a Go pointer whose
//!   zero means something (listed in the generator).
//! - `Time` keeps whole seconds, as Go's protobuf reader does.

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
