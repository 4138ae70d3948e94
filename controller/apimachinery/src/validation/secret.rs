//! Secret: the ConfigMap's key and size rules over `data`, the keys each
//! well-known `type` needs, the type fixed once created, nothing of the
//! data changed once `immutable` is set; and `stringData`, which the
//! API reads into `data` and never stores.
//!
//! No message here ever carries a value of the Secret: a value that is
//! not the JSON its type needs is named as `<secret contents redacted>`,
//! as upstream does, since errors travel into clients' logs.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use serde_json::{Map, Value};

use super::config_map::{immutable_update, same_map, MAX_SIZE};
use super::field::{Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::names;

pub const OPAQUE: &str = "Opaque";
pub const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
pub const DOCKERCFG: &str = "kubernetes.io/dockercfg";
pub const DOCKERCFG_KEY: &str = ".dockercfg";
pub const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
pub const BASIC_AUTH: &str = "kubernetes.io/basic-auth";
pub const SSH_AUTH: &str = "kubernetes.io/ssh-auth";
pub const SSH_PRIVATE_KEY: &str = "ssh-privatekey";
pub const TLS: &str = "kubernetes.io/tls";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

const REDACTED: &str = "<secret contents redacted>";

/// Read `stringData` into `data` (each value base64-encoded, replacing a
/// `data` value of the same key, as upstream's conversion does) and take
/// it out, so it is never stored nor read back. Left as sent when
/// `stringData` holds anything but strings: decoding names that field.
pub fn merge_string_data(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let strings = match m.get("stringData") {
        None => return,
        Some(Value::Null) => Map::new(),
        Some(Value::Object(s)) if s.values().all(Value::is_string) => s.clone(),
        Some(_) => return,
    };
    m.remove("stringData");
    if strings.is_empty() {
        return;
    }
    let data = m
        .entry("data")
        .and_modify(|d| {
            if d.is_null() {
                *d = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(data) = data.as_object_mut() else {
        return;
    };
    for (k, v) in strings {
        let bytes = v.as_str().unwrap_or_default().as_bytes().to_vec();
        // ByteString serialises as base64; it cannot fail.
        if let Ok(encoded) = serde_json::to_value(ByteString(bytes)) {
            data.insert(k, encoded);
        }
    }
}

/// Go's `json.Unmarshal` into a `map[string]interface{}`: what it says
/// of `bytes`, or nothing when they are a JSON object (or `null`). The
/// common wordings are Go's; other syntax errors keep serde's words.
pub fn go_json_object_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_) | Value::Null) => None,
        Ok(v) => {
            let what = match v {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            Some(format!(
                "json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"
            ))
        }
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".into()),
        Err(e) => {
            let first = bytes.iter().find(|c| !c.is_ascii_whitespace());
            let at = e.column().checked_sub(1).and_then(|c| {
                let line_start = bytes
                    .split(|b| *b == b'\n')
                    .take(e.line().saturating_sub(1))
                    .map(|l| l.len() + 1)
                    .sum::<usize>();
                bytes.get(line_start + c)
            });
            let msg = e.to_string();
            match (first, at) {
                (Some(&c), _) if !starts_value(c) => Some(format!(
                    "invalid character {} looking for beginning of value",
                    go_char(c)
                )),
                (_, Some(&c)) if msg.starts_with("trailing characters") => Some(format!(
                    "invalid character {} after top-level value",
                    go_char(c)
                )),
                _ => Some(msg),
            }
        }
    }
}

/// A decoding error of a Secret's `data` or `stringData` without the value
/// it quotes: serde names a mistyped value (`invalid type: integer
/// `1234`, expected a string`, the PIN a YAML author left unquoted) and
/// the character base64 stumbled on. Said as Go says it instead, which
/// names neither.
pub fn redacted_decode_message(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        let what = rest.split([' ', ',']).next().unwrap_or("value");
        let expected = rest.rsplit_once(", expected ").map_or("", |(_, e)| e);
        return format!("invalid type: {what}, expected {expected}");
    }
    let lower = message.to_ascii_lowercase();
    if lower.contains("symbol") || lower.contains("padding") || lower.contains("length") {
        return match lower.rsplit_once("offset ") {
            Some((_, n)) => format!(
                "illegal base64 data at input byte {}",
                n.trim_end_matches('.').trim()
            ),
            None => "illegal base64 data".into(),
        };
    }
    REDACTED.into()
}

fn starts_value(c: u8) -> bool {
    matches!(c, b'{' | b'[' | b'"' | b'-' | b't' | b'f' | b'n') || c.is_ascii_digit()
}

/// Go's `quoteChar`: `'x'`, with `'` and `"` escaped, others quoted.
fn go_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        c if c.is_ascii_graphic() || c == b' ' => format!("'{}'", c as char),
        c => {
            let q = super::field::go_quote(&(c as char).to_string());
            format!("'{}'", q.trim_matches('"'))
        }
    }
}

fn data_of(s: &Secret) -> impl Iterator<Item = (&String, &ByteString)> {
    s.data.iter().flatten()
}

fn has(s: &Secret, key: &str) -> bool {
    s.data.as_ref().is_some_and(|d| d.contains_key(key))
}

/// The keys and contents a well-known type needs.
fn typed_keys(s: &Secret, errs: &mut ErrorList) {
    let data = Path::new("data");
    let kind = s.type_.as_deref().unwrap_or_default();
    match kind {
        SERVICE_ACCOUNT_TOKEN => {
            let named = s
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SERVICE_ACCOUNT_NAME))
                .is_some_and(|v| !v.is_empty());
            if !named {
                let at = Path::new("metadata")
                    .child("annotations")
                    .key(SERVICE_ACCOUNT_NAME);
                errs.push(Error::required(&at, ""));
            }
        }
        DOCKERCFG | DOCKER_CONFIG_JSON => {
            let key = if kind == DOCKERCFG {
                DOCKERCFG_KEY
            } else {
                DOCKER_CONFIG_JSON_KEY
            };
            let at = data.key(key);
            match s.data.as_ref().and_then(|d| d.get(key)) {
                None => errs.push(Error::required(&at, "")),
                Some(v) => {
                    if let Some(why) = go_json_object_error(&v.0) {
                        errs.push(Error::invalid(&at, REDACTED, why));
                    }
                }
            }
        }
        // Either is enough, and either may be empty.
        BASIC_AUTH if !has(s, "username") && !has(s, "password") => {
            errs.push(Error::required(&data.key("username"), ""));
            errs.push(Error::required(&data.key("password"), ""));
        }
        SSH_AUTH => {
            let key = s.data.as_ref().and_then(|d| d.get(SSH_PRIVATE_KEY));
            if key.is_none_or(|k| k.0.is_empty()) {
                errs.push(Error::required(&data.key(SSH_PRIVATE_KEY), ""));
            }
        }
        TLS => {
            // Present is enough: the contents are not parsed.
            for key in [TLS_CERT, TLS_KEY] {
                if !has(s, key) {
                    errs.push(Error::required(&data.key(key), ""));
                }
            }
        }
        // Opaque, bootstrap tokens and types upstream does not know.
        _ => {}
    }
}

/// The caller has run v1 defaulting (`type` Opaque when unset) and
/// merged `stringData` into `data` (`merge_string_data`).
pub fn validate_create(s: &Secret) -> ErrorList {
    let mut errs = meta::object_meta(&s.metadata, true, names::dns1123_subdomain);
    let data = Path::new("data");
    let mut total = 0usize;
    for (k, v) in data_of(s) {
        invalid_each(&mut errs, &data.key(k), k, names::config_key(k));
        total = total.saturating_add(v.0.len());
    }
    if total > MAX_SIZE {
        errs.push(Error::too_long(&data, MAX_SIZE));
    }
    typed_keys(s, &mut errs);
    errs
}

pub fn validate_update(n: &Secret, o: &Secret) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    let (nt, ot) = (
        n.type_.as_deref().unwrap_or_default(),
        o.type_.as_deref().unwrap_or_default(),
    );
    if nt != ot {
        errs.push(Error::invalid(&Path::new("type"), nt, names::IMMUTABLE));
    }
    errs.extend(immutable_update(
        o.immutable,
        n.immutable,
        &[("data", same_map(n.data.as_ref(), o.data.as_ref()))],
    ));
    errs.extend(validate_create(n));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_data_becomes_base64_data_and_goes() {
        let mut s =
            json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "over", "c": ""}});
        merge_string_data(&mut s);
        assert_eq!(s, json!({"data": {"a": "eA==", "b": "b3Zlcg==", "c": ""}}));
        let mut s = json!({"stringData": {"k": "v"}, "data": null});
        merge_string_data(&mut s);
        assert_eq!(s, json!({"data": {"k": "dg=="}}));
        let mut s = json!({"stringData": null});
        merge_string_data(&mut s);
        assert_eq!(s, json!({}));
        // Not strings: left for decoding to name.
        let bad = json!({"stringData": {"k": 1}});
        let mut s = bad.clone();
        merge_string_data(&mut s);
        assert_eq!(s, bad);
        let mut s = json!(5);
        merge_string_data(&mut s);
        assert_eq!(s, json!(5));
    }

    #[test]
    fn decoding_errors_lose_their_values() {
        assert_eq!(
            redacted_decode_message("invalid type: integer `1234`, expected a string"),
            "invalid type: integer, expected a string"
        );
        assert_eq!(
            redacted_decode_message("invalid type: string \"hunter2\", expected a map"),
            "invalid type: string, expected a map"
        );
        assert_eq!(
            redacted_decode_message("Invalid symbol 33, offset 4."),
            "illegal base64 data at input byte 4"
        );
        assert_eq!(
            redacted_decode_message("Invalid padding"),
            "illegal base64 data"
        );
        assert_eq!(redacted_decode_message("hunter2"), REDACTED);
    }

    #[test]
    fn json_errors_read_as_go_writes_them() {
        assert_eq!(go_json_object_error(b"{}"), None);
        assert_eq!(go_json_object_error(b"null"), None);
        assert_eq!(
            go_json_object_error(b"").as_deref(),
            Some("unexpected end of JSON input")
        );
        assert_eq!(
            go_json_object_error(b"{\"a\":").as_deref(),
            Some("unexpected end of JSON input")
        );
        assert_eq!(
            go_json_object_error(b"bad").as_deref(),
            Some("invalid character 'b' looking for beginning of value")
        );
        assert_eq!(
            go_json_object_error(b"[]").as_deref(),
            Some("json: cannot unmarshal array into Go value of type map[string]interface {}")
        );
        assert_eq!(
            go_json_object_error(b"{} x").as_deref(),
            Some("invalid character 'x' after top-level value")
        );
        assert_eq!(go_char(b'\''), "'\\''");
        assert_eq!(go_char(b'\x01'), "'\\x01'");
    }
}
