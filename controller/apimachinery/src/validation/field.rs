//! kube-apiserver's `field.Error`: a path, a type, the offending value and
//! a detail, rendered as `spec.ports[0].port: Invalid value: 70000: must
//! be between 1 and 65535, inclusive`; and the list one object collects,
//! aggregated into a 422's message the way `errors.NewInvalid` does.

use std::fmt;

/// A field path: `spec.containers[0].ports`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A path from its first (possibly dotted) segment.
    pub fn new(root: &str) -> Path {
        Path(root.to_string())
    }

    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// A map key, unquoted as upstream renders it: `limits[cpu]`.
    pub fn key(&self, k: &str) -> Path {
        Path(format!("{}[{k}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `field.ErrorType`: the cause's `reason` and the message's prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    NotFound,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
}

impl ErrorType {
    /// `Status.details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::NotFound => "Not found",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The bad value as upstream prints it (apimachinery ≥ 0.34): numbers and
/// booleans bare, Go strings quoted, everything else as JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadValue {
    /// Not printed (Required, Forbidden, TooLong, Internal).
    Omitted,
    Int(i64),
    Bool(bool),
    Str(String),
    /// Already rendered JSON (`null`, `["a"]`, `{"a":"b"}`, `"20%"`).
    Json(String),
}

impl BadValue {
    pub fn json(v: &impl serde::Serialize) -> BadValue {
        BadValue::Json(serde_json::to_string(v).unwrap_or_else(|_| "null".into()))
    }

    fn render(&self) -> Option<String> {
        match self {
            BadValue::Omitted => None,
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::Bool(b) => Some(b.to_string()),
            BadValue::Str(s) => Some(go_quote(s)),
            BadValue::Json(j) => Some(j.clone()),
        }
    }
}

impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}

impl From<i32> for BadValue {
    fn from(v: i32) -> Self {
        BadValue::Int(v.into())
    }
}

impl From<&str> for BadValue {
    fn from(v: &str) -> Self {
        BadValue::Str(v.to_string())
    }
}

impl From<&String> for BadValue {
    fn from(v: &String) -> Self {
        BadValue::Str(v.clone())
    }
}

impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Bool(v)
    }
}

/// Go's `strconv.Quote` for the strings a manifest carries: quotes and
/// backslashes escaped, control characters as `\n`, `\t` or `\xNN`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {}", self.body())]
pub struct Error {
    pub kind: ErrorType,
    pub field: String,
    pub value: BadValue,
    pub detail: String,
}

impl Error {
    fn new(kind: ErrorType, path: &Path, value: BadValue, detail: impl Into<String>) -> Error {
        Error {
            kind,
            field: path.to_string(),
            value,
            detail: detail.into(),
        }
    }

    pub fn required(path: &Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Required, path, BadValue::Omitted, detail)
    }

    pub fn invalid(path: &Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Invalid, path, value.into(), detail)
    }

    /// `supported values: "a", "b"`, in the order given.
    pub fn not_supported(path: &Path, value: impl Into<BadValue>, valid: &[&str]) -> Error {
        let list: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
        let detail = if list.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", list.join(", "))
        };
        Error::new(ErrorType::NotSupported, path, value.into(), detail)
    }

    pub fn duplicate(path: &Path, value: impl Into<BadValue>) -> Error {
        Error::new(ErrorType::Duplicate, path, value.into(), "")
    }

    pub fn not_found(path: &Path, value: impl Into<BadValue>) -> Error {
        Error::new(ErrorType::NotFound, path, value.into(), "")
    }

    pub fn forbidden(path: &Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Forbidden, path, BadValue::Omitted, detail)
    }

    pub fn too_long(path: &Path, max: usize) -> Error {
        let unit = if max == 1 { "byte" } else { "bytes" };
        let detail = format!("may not be more than {max} {unit}");
        Error::new(ErrorType::TooLong, path, BadValue::Omitted, detail)
    }

    pub fn too_many(path: &Path, actual: usize, max: usize) -> Error {
        let unit = if max == 1 { "item" } else { "items" };
        let detail = format!("must have at most {max} {unit}");
        Error::new(
            ErrorType::TooMany,
            path,
            BadValue::Int(count(actual)),
            detail,
        )
    }

    pub fn internal(path: &Path, detail: impl Into<String>) -> Error {
        Error::new(ErrorType::Internal, path, BadValue::Omitted, detail)
    }

    /// `<prefix>[: <value>][: <detail>]`: the cause's `message`.
    pub fn body(&self) -> String {
        let mut s = self.kind.prefix().to_string();
        if let Some(v) = self.value.render() {
            s.push_str(": ");
            s.push_str(&v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Every error of one object, in the order the rules ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorList(pub Vec<Error>);

impl ErrorList {
    pub fn new() -> ErrorList {
        ErrorList(Vec::new())
    }

    pub fn push(&mut self, e: Error) {
        self.0.push(e);
    }

    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Error> {
        self.0.iter()
    }

    /// Each error's full text: what tests compare.
    pub fn rendered(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// The aggregate upstream puts after `is invalid: `: duplicates (by
    /// text) dropped, one error bare, several in brackets.
    pub fn aggregate(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for e in &self.0 {
            let s = e.to_string();
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        match seen.len() {
            1 => seen.remove(0),
            _ => format!("[{}]", seen.join(", ")),
        }
    }

    /// `<Kind[.group]> "<name>" is invalid: <aggregate>`.
    pub fn message(&self, kind: &str, group: &str, name: &str) -> String {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        if self.0.is_empty() {
            return format!("{gk} {} is invalid", go_quote(name));
        }
        format!("{gk} {} is invalid: {}", go_quote(name), self.aggregate())
    }
}

impl IntoIterator for ErrorList {
    type Item = Error;
    type IntoIter = std::vec::IntoIter<Error>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_render_as_upstream() {
        let p = Path::new("spec").child("ports").index(0);
        let e = Error::invalid(
            &p.child("port"),
            70000,
            "must be between 1 and 65535, inclusive",
        );
        assert_eq!(
            e.to_string(),
            "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
        );
        let e = Error::not_supported(&p.child("protocol"), "TCPX", &["SCTP", "TCP", "UDP"]);
        assert_eq!(
            e.to_string(),
            "spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert_eq!(
            Error::required(&Path::new("spec.ports"), "").to_string(),
            "spec.ports: Required value"
        );
        assert_eq!(
            Error::too_many(&Path::new("endpoints"), 1001, 1000).to_string(),
            "endpoints: Too many: 1001: must have at most 1000 items"
        );
        assert_eq!(
            Error::too_long(&Path::new("metadata.annotations"), 262144).to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(
            Error::duplicate(&Path::new("a").key("cpu"), "x\n\"y\"").to_string(),
            "a[cpu]: Duplicate value: \"x\\n\\\"y\\\"\""
        );
    }

    #[test]
    fn the_aggregate_drops_repeats_and_brackets_many() {
        let a = Error::required(&Path::new("a"), "");
        let b = Error::forbidden(&Path::new("b"), "no");
        let one = ErrorList(vec![a.clone(), a.clone()]);
        assert_eq!(
            one.message("Pod", "", "p"),
            "Pod \"p\" is invalid: a: Required value"
        );
        let two = ErrorList(vec![a, b]);
        assert_eq!(
            two.message("Deployment", "apps", "d"),
            "Deployment.apps \"d\" is invalid: [a: Required value, b: Forbidden: no]"
        );
        assert_eq!(
            ErrorList::new().message("Pod", "", "p"),
            "Pod \"p\" is invalid"
        );
    }
}
