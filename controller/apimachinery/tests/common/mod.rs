//! What the per-kind tables share: a base object with a fragment merged
//! in (JSON merge patch: `null` removes), validation through the same
//! entry point the server calls, and upstream's long messages.
#![allow(dead_code)]

use serde_json::Value;
use sluice_apimachinery::validation;

pub const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
pub const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
pub const PERCENT: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
pub const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// RFC 7386 merge of `patch` into `base`.
pub fn merge(base: &Value, patch: &Value) -> Value {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            let mut out = b.clone();
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge(b.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        (_, p) => p.clone(),
    }
}

/// Every error of `obj` (against `old` on an update), rendered.
pub fn errors(group: &str, kind: &str, obj: &Value, old: Option<&Value>) -> Vec<String> {
    validation::validate(group, kind, obj, old).rendered()
}

/// A table: each case's fragment over `base`, its exact errors.
pub fn table(group: &str, kind: &str, base: &Value, cases: &[(&str, Value, Vec<String>)]) {
    let mut failed = Vec::new();
    for (what, fragment, want) in cases {
        let obj = merge(base, fragment);
        let got = errors(group, kind, &obj, None);
        if &got != want {
            failed.push(format!("{what}:\n  want {want:#?}\n  got  {got:#?}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Update cases: `(what, old fragment, new fragment, errors)` over `base`.
pub fn update_table(
    group: &str,
    kind: &str,
    base: &Value,
    cases: &[(&str, Value, Value, Vec<String>)],
) {
    let mut failed = Vec::new();
    for (what, old, new, want) in cases {
        let o = merge(base, old);
        let n = merge(base, new);
        let got = errors(group, kind, &n, Some(&o));
        if &got != want {
            failed.push(format!("{what}:\n  want {want:#?}\n  got  {got:#?}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

pub fn s(v: &str) -> String {
    v.to_string()
}

pub const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `s`'s bytes as the API carries bytes: base64.
pub fn b64(s: &str) -> String {
    match serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec())) {
        Ok(Value::String(v)) => v,
        other => panic!("base64 of {s:?}: {other:?}"),
    }
}
