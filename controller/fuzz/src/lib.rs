//! What the fuzz targets share: turning the fuzzer's bytes into the parts
//! of a request, and the invariants every answer must keep.

use serde_json::Value;
use sluice_apiserver::resources::RESOURCES;
use sluice_apiserver::status::ApiError;

/// The namespace namespaced objects are created in.
pub const NAMESPACE: &str = "default";

/// The collection path of every resource served (not subresources), in
/// the table's order: the first byte of an input picks one.
pub fn collections() -> Vec<String> {
    RESOURCES
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let base = if r.group.is_empty() {
                format!("/api/{}", r.version)
            } else {
                format!("/apis/{}/{}", r.group, r.version)
            };
            if r.namespaced {
                format!("{base}/namespaces/{NAMESPACE}/{}", r.name)
            } else {
                format!("{base}/{}", r.name)
            }
        })
        .collect()
}

/// The collection picked by `b`.
pub fn collection(b: u8) -> String {
    let all = collections();
    all[usize::from(b) % all.len()].clone()
}

/// `fieldValidation` values, the last one invalid (a 400).
pub const MODES: &[&str] = &["Strict", "Warn", "Ignore", "", "strict"];

/// Split `data` at its first NUL byte (never valid inside JSON or YAML
/// text, so the parts stay realistic bodies).
pub fn split_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// An error must be a `Status` a client can read: a client error (bad
/// input is never the server's fault), with a reason and a message.
pub fn check_error(e: &ApiError, input: &[u8]) {
    let code = e.code.as_u16();
    assert!(
        (400..500).contains(&code),
        "bad input answered {code} {}: {} (input {:?})",
        e.reason,
        e.message,
        String::from_utf8_lossy(input)
    );
    assert!(!e.reason.is_empty(), "a Status without a reason");
    assert!(!e.message.is_empty(), "a Status without a message");
    let body = e.body();
    assert_eq!(body["kind"], "Status");
    let text = serde_json::to_vec(&body).expect("a Status serializes");
    let back: Value = serde_json::from_slice(&text).expect("a Status parses back");
    assert_eq!(back, body);
}

/// An accepted object must be what the server can store and serve back:
/// an object with a valid name that serializes and parses to itself.
pub fn check_stored(obj: &Value) {
    assert!(obj.is_object(), "stored a non-object: {obj}");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .expect("a stored object has a name");
    assert!(!name.is_empty());
    let text = serde_json::to_vec(obj).expect("a stored object serializes");
    let back: Value = serde_json::from_slice(&text).expect("a stored object parses back");
    assert_eq!(&back, obj, "the round trip changed the object");
}
