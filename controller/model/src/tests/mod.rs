//! Tests per kind: a full example round trip, every validation rule with
//! its field path (naming its spec rule), unknown fields refused with their
//! path.

mod cluster;
mod load_balancer;
mod node_pool;
mod openapi;
mod operation;
mod short_lived;

use crate::decode::{decode_object, DecodeError, FieldValidation};
use crate::kind::SluiceKind;
use crate::validation::ErrorKind;

/// Decode a YAML document strictly.
pub fn strict<K: SluiceKind>(yaml: &str) -> Result<K, DecodeError> {
    decode_object(
        serde_yaml::Deserializer::from_str(yaml),
        FieldValidation::Strict,
    )
    .map(|d| d.value)
}

/// The example decodes strictly, validates, and encodes back to the same
/// document, in YAML and in JSON.
pub fn round_trip<K: SluiceKind + PartialEq + std::fmt::Debug>(yaml: &str) -> K {
    let obj: K = strict(yaml).unwrap_or_else(|e| panic!("example does not decode: {e}"));
    obj.validate()
        .unwrap_or_else(|e| panic!("example is invalid: {e}"));
    let original: serde_yaml::Value = serde_yaml::from_str(yaml).expect("yaml");
    let encoded = serde_yaml::to_value(&obj).expect("encode");
    assert_eq!(encoded, original, "YAML round trip changed the object");
    let json = serde_json::to_vec(&obj).expect("json");
    let back: K = crate::decode::from_json_strict(&json).expect("json decodes strictly");
    assert_eq!(back, obj, "JSON round trip changed the object");
    obj
}

/// `obj` breaks exactly one rule: at `field`, with an error of `kind`
/// whose message holds `words`.
pub fn assert_rule<K: SluiceKind>(obj: &K, field: &str, kind: ErrorKind, words: &str) {
    let errors = obj.validate().expect_err("should be invalid");
    let e = errors
        .at(field)
        .unwrap_or_else(|| panic!("no error at {field}; got: {errors}"));
    assert_eq!(e.kind, kind, "{e}");
    assert!(e.message.contains(words), "{e} does not say {words:?}");
    assert_eq!(errors.0.len(), 1, "more than the one error: {errors}");
}

/// The unknown field is refused in strict mode, naming its path, and
/// dropped and reported in `Warn` mode.
pub fn assert_unknown_field<K: SluiceKind + std::fmt::Debug>(yaml: &str, path: &str) {
    let err = strict::<K>(yaml).expect_err("strict decoding should refuse");
    assert_eq!(err.field, path, "{err}");
    assert_eq!(err.kind, crate::decode::DecodeErrorKind::UnknownField);
    assert!(
        err.to_string().contains(&format!("unknown field {path:?}")),
        "{err}"
    );
    let warned = decode_object::<K, _>(
        serde_yaml::Deserializer::from_str(yaml),
        FieldValidation::Warn,
    )
    .expect("warn mode decodes");
    assert_eq!(warned.unknown_fields, vec![path.to_string()]);
}

/// Apply `edit` to the decoded example.
pub fn edited<K: SluiceKind>(yaml: &str, edit: impl FnOnce(&mut K)) -> K {
    let mut obj: K = strict(yaml).expect("example decodes");
    edit(&mut obj);
    obj
}

/// An RFC 3339 instant.
pub fn time(s: &str) -> crate::k8s::Time {
    crate::k8s::Time(s.parse().expect("timestamp"))
}

/// The example with `edit` applied breaks exactly one rule, as
/// [`assert_rule`] checks.
pub fn breaks<K: SluiceKind>(
    yaml: &str,
    edit: impl FnOnce(&mut K),
    field: &str,
    kind: ErrorKind,
    words: &str,
) {
    assert_rule(&edited(yaml, edit), field, kind, words);
}
