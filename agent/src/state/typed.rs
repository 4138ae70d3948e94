//! Typed decoding of one manifest into its k8s-openapi type with the failing
//! field's path, and serde's wording turned into what a Kubernetes user
//! reads: `spec.ports[0].port: expected an integer, got "eighty"` rather
//! than `invalid type: string "eighty", expected i32`.

use serde::de::DeserializeOwned;

/// Where decoding stopped and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// `spec.ports[0].port`; empty at the top.
    pub field: String,
    pub message: String,
}

/// Decode `value` as `T`, naming the field that does not fit.
pub fn decode<T: DeserializeOwned>(value: serde_yaml::Value) -> Result<T, TypeError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = field_path(&e.path().to_string());
        TypeError {
            field,
            message: reword(&e.inner().to_string()),
        }
    })
}

/// serde_path_to_error writes `.` for the root and `?` for a step it could
/// not name; keep only what a user can follow.
fn field_path(p: &str) -> String {
    if p == "." {
        return String::new();
    }
    p.to_string()
}

/// `invalid type: string "eighty", expected i64` →
/// `expected an integer, got "eighty"`.
pub fn reword(msg: &str) -> String {
    // serde_yaml appends " at line L column C" to errors with a position;
    // the values decoded here have none, but keep whatever follows.
    if let Some(rest) = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))
    {
        if let Some((got, expected)) = rest.split_once(", expected ") {
            // A number too large for its field (k8s-openapi's are 32-bit
            // for ports and most counts): the type is right, the size not.
            if let Some(n) = got
                .strip_prefix("integer `")
                .and_then(|g| g.strip_suffix('`'))
            {
                if expected_name(expected) == "an integer" {
                    return format!("{n} is out of range (at most a 32-bit integer)");
                }
            }
            return format!(
                "expected {}, got {}",
                expected_name(expected),
                got_name(got)
            );
        }
    }
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return format!("missing required field {field:?}");
    }
    msg.to_string()
}

fn expected_name(e: &str) -> String {
    match e {
        "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "isize"
        | "usize" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "a boolean (true or false)".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        "a string" | "a borrowed string" => "a string".into(),
        // k8s-openapi's visitors name their type; these two are not objects.
        "IntOrString" => "an integer or a string".into(),
        "a 32-bit integer" => "an integer".into(),
        "Time" | "MicroTime" => "a time (RFC 3339)".into(),
        s if s.starts_with("struct ") => "an object".into(),
        // Any other k8s-openapi type (`ServiceSpec`, `ObjectMeta`) is an
        // object.
        s if is_type_name(s) => "an object".into(),
        s if s.starts_with("a sequence") => "a list".into(),
        s => s.to_string(),
    }
}

fn is_type_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric())
}

fn got_name(g: &str) -> String {
    if let Some(s) = g.strip_prefix("string ") {
        return s.to_string();
    }
    match g {
        "map" => "an object".into(),
        "sequence" => "a list".into(),
        "unit value" => "null".into(),
        s => {
            // `integer `5``, `boolean `true``, `floating point `1.5``
            if let Some((_, v)) = s.split_once(' ') {
                return v.trim_matches('`').to_string();
            }
            s.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Port {
        #[serde(default)]
        port: i64,
        #[serde(default)]
        ready: Option<bool>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Spec {
        #[serde(default)]
        ports: Vec<Port>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Obj {
        spec: Spec,
    }

    fn err(yaml: &str) -> TypeError {
        let v: serde_yaml::Value = serde_yaml::from_str(yaml).expect("yaml");
        decode::<Obj>(v).expect_err("must not decode")
    }

    #[test]
    fn a_string_for_an_integer_names_the_path_and_both_types() {
        let e = err("spec: {ports: [{port: eighty}]}");
        assert_eq!(e.field, "spec.ports[0].port");
        assert_eq!(e.message, "expected an integer, got \"eighty\"");
    }

    #[test]
    fn a_map_for_a_list_and_a_word_for_a_boolean() {
        let e = err("spec: {ports: {port: 80}}");
        assert_eq!(e.field, "spec.ports");
        assert_eq!(e.message, "expected a list, got an object");
        let e = err("spec: {ports: [{port: 1}, {ready: maybe}]}");
        assert_eq!(e.field, "spec.ports[1].ready");
        assert_eq!(
            e.message,
            "expected a boolean (true or false), got \"maybe\""
        );
    }

    fn k8s_err<T: DeserializeOwned + std::fmt::Debug>(yaml: &str) -> TypeError {
        let v: serde_yaml::Value = serde_yaml::from_str(yaml).expect("yaml");
        decode::<T>(v).expect_err("must not decode")
    }

    #[test]
    fn k8s_openapi_types_are_worded_for_a_kubernetes_user() {
        use sluice_model::k8s::Service;
        let e = k8s_err::<Service>("spec: {ports: [{port: eighty}]}");
        assert_eq!(e.field, "spec.ports[0].port");
        assert_eq!(e.message, "expected an integer, got \"eighty\"");
        let e = k8s_err::<Service>("spec: {ports: [{port: 1, targetPort: [1]}]}");
        assert_eq!(e.field, "spec.ports[0].targetPort");
        assert_eq!(e.message, "expected an integer or a string, got a list");
        let e = k8s_err::<Service>("spec: [1]");
        assert_eq!(e.field, "spec");
        assert_eq!(e.message, "expected an object, got a list");
        let e = k8s_err::<Service>("spec: {ports: [{port: 99999999999}]}");
        assert_eq!(
            e.message,
            "99999999999 is out of range (at most a 32-bit integer)"
        );
        let e = k8s_err::<Service>("metadata: {labels: {a: [x]}}");
        assert_eq!(e.field, "metadata.labels.a");
        assert_eq!(e.message, "expected a string, got a list");
    }

    #[test]
    fn a_missing_required_field_is_named() {
        let e = err("{}");
        assert_eq!(e.message, "missing required field \"spec\"");
    }
}
