//! Validation of a spec on its own, every error naming its field path the
//! way kube-apiserver does (`spec.upgradeSettings.maxSurge`,
//! `spec.config.taints[1].key`, `...maintenanceExclusions[holiday].endTime`).
//!
//! Only rules that a single object can answer live here. Rules that need
//! the clock, other objects or the versions table are checked at
//! admission by `sluice-maintenance`: M7's 48 h of maintenance
//! availability in any 32 days (it needs the RRULE expanded) and M7's "no
//! exclusion past the minor version's end of life" (it needs the table).

mod cluster;
mod load_balancer;
mod node_pool;
mod operation;

use std::fmt;

use crate::duration::Duration;
use crate::k8s::Quantity;

pub use cluster::{
    parse_daily_start, validate_cluster, MAX_EXCLUSIONS, MAX_NO_UPGRADES_EXCLUSIONS,
    MAX_NO_UPGRADES_SECONDS,
};
pub use load_balancer::{
    health_check_overrides, validate_health_check, validate_instance_group,
    validate_l4_load_balancer, validate_network_endpoint_group,
};
pub use node_pool::validate_node_pool;
pub use operation::{validate_operation, validate_operation_update};

/// What kind of mistake, as Kubernetes' `field.ErrorType` names it, so the
/// API server can put it in a `Status`'s `details.causes[].reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `FieldValueInvalid`
    Invalid,
    /// `FieldValueRequired`
    Required,
    /// `FieldValueTooMany`
    TooMany,
    /// `FieldValueForbidden`
    Forbidden,
    /// `FieldValueDuplicate`
    Duplicate,
}

impl ErrorKind {
    /// The reason string kube-apiserver uses for this kind.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One broken rule, at one field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub kind: ErrorKind,
    pub message: String,
}

/// Every rule an object breaks, in field order; never empty.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl FieldErrors {
    /// The error at `field`, if any: what tests and callers look up.
    pub fn at(&self, field: &str) -> Option<&FieldError> {
        self.0.iter().find(|e| e.field == field)
    }
}

/// A field path under construction: `Path::root("spec").field("config")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn root(name: &str) -> Path {
        Path(name.to_string())
    }

    pub fn field(&self, name: &str) -> Path {
        Path(format!("{}.{name}", self.0))
    }

    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// A map entry, written `[key]` as kube-apiserver does.
    pub fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
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

/// Collects errors as a validator walks an object.
#[derive(Debug, Default)]
pub struct Errors(Vec<FieldError>);

impl Errors {
    pub fn push(&mut self, path: &Path, kind: ErrorKind, message: impl Into<String>) {
        self.0.push(FieldError {
            field: path.to_string(),
            kind,
            message: message.into(),
        });
    }

    pub fn invalid(&mut self, path: &Path, message: impl Into<String>) {
        self.push(path, ErrorKind::Invalid, message);
    }

    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(FieldErrors(self.0))
        }
    }

    /// A count that may not be negative.
    pub fn non_negative(&mut self, path: &Path, value: Option<i32>) {
        if let Some(v) = value.filter(|v| *v < 0) {
            self.invalid(path, format!("must be 0 or more, got {v}"));
        }
    }

    /// A duration within `0..=max`.
    pub fn duration_within(&mut self, path: &Path, value: Option<Duration>, max: Duration) {
        match value {
            Some(d) if d.is_negative() => {
                self.invalid(path, format!("must not be negative, got {d}"))
            }
            Some(d) if d > max => self.invalid(
                path,
                format!(
                    "must be at most {max} ({} days), got {d}",
                    max.as_secs() / 86_400
                ),
            ),
            _ => {}
        }
    }

    /// A Kubernetes label key (`[prefix/]name`).
    pub fn label_key(&mut self, path: &Path, key: &str) {
        if let Some(why) = label_key_error(key) {
            self.invalid(path, why);
        }
    }

    /// A Kubernetes label value (empty, or a name of at most 63 characters).
    pub fn label_value(&mut self, path: &Path, value: &str) {
        if let Some(why) = label_value_error(value) {
            self.invalid(path, why);
        }
    }

    /// A resource quantity that is a positive amount (`"4"`, `"500m"`, `"16Gi"`).
    pub fn positive_quantity(&mut self, path: &Path, q: &Quantity) {
        match quantity_is_positive(&q.0) {
            Some(true) => {}
            Some(false) => self.invalid(path, format!("must be more than 0, got {:?}", q.0)),
            None => self.invalid(
                path,
                format!(
                    "{:?} is not a quantity (e.g. \"4\", \"500m\", \"16Gi\")",
                    q.0
                ),
            ),
        }
    }
}

/// Seven days, the ceiling of every soak and wait (B4, A1).
pub const SEVEN_DAYS: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why `key` is not a Kubernetes label (or taint) key, if it is not.
/// Why `v` is not a Kubernetes version as GKE spells one (`1.33.2`,
/// `v1.33`, `1.33.2-gke.1200000`), if it is not: it is what nodes report
/// and what versions are compared by, so a typo must not start an upgrade.
pub fn version_error(v: &str) -> Option<String> {
    const MAX: usize = 64;
    if v.len() > MAX {
        return Some(format!(
            "a version has at most {MAX} characters, got {}",
            v.len()
        ));
    }
    let core = v.strip_prefix('v').unwrap_or(v);
    let (numbers, suffix) = core.split_once('-').unwrap_or((core, ""));
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.len() <= 6 && p.bytes().all(|b| b.is_ascii_digit());
    let suffix_ok = suffix.is_empty() && !core.ends_with('-')
        || !suffix.is_empty()
            && suffix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.');
    if (2..=3).contains(&parts.len()) && parts.iter().all(numeric) && suffix_ok {
        return None;
    }
    Some(format!(
        "{v:?} is not a version: MAJOR.MINOR[.PATCH][-SUFFIX], e.g. 1.33.2 or 1.33.2-gke.1200000"
    ))
}

pub fn label_key_error(key: &str) -> Option<String> {
    check_label_key(key)
        .err()
        .map(|why| format!("{key:?} is not a valid label key: {why}"))
}

/// Why `value` is not a Kubernetes label (or taint) value, if it is not.
pub fn label_value_error(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    check_name(value, 63)
        .err()
        .map(|why| format!("{value:?} is not a valid label value: {why}"))
}

fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Err(
                "the prefix must be a DNS subdomain (lower case, at most 253 characters)".into(),
            );
        }
    }
    check_name(name, 63)
}

/// Kubernetes' qualified name: alphanumerics, `-`, `_`, `.`, starting and
/// ending alphanumeric.
fn check_name(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() || name.len() > max {
        return Err(format!("must be 1 to {max} characters"));
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = name.as_bytes();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err("must start and end with a letter or digit".into());
    }
    if !bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("may hold only letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

/// `Some(positive?)` for a quantity Kubernetes would parse, `None`
/// otherwise. Enough of the grammar to refuse typos; the exact value is
/// the scheduler's business (later issues).
fn quantity_is_positive(q: &str) -> Option<bool> {
    const SUFFIXES: [&str; 16] = [
        "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let (sign, rest) = match q.as_bytes().first() {
        Some(b'-') => (-1, &q[1..]),
        Some(b'+') => (1, &q[1..]),
        _ => (1, q),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    let exponent_ok = suffix
        .strip_prefix(['e', 'E'])
        .map(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
        })
        .unwrap_or(false);
    if !(SUFFIXES.contains(&suffix) || exponent_ok) {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    Some(sign > 0 && value > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for q in ["4", "500m", "16Gi", "1.5", "1e3", "+2"] {
            assert_eq!(quantity_is_positive(q), Some(true), "{q}");
        }
        for q in ["0", "-1", "0Gi"] {
            assert_eq!(quantity_is_positive(q), Some(false), "{q}");
        }
        for q in ["", "four", "16GB", "1.2.3", "Gi"] {
            assert_eq!(quantity_is_positive(q), None, "{q}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        for k in ["app", "cloud.google.com/gke-nodepool", "a_b.c-d", "x/y"] {
            assert_eq!(check_label_key(k), Ok(()), "{k}");
        }
        for k in ["", "-app", "app-", "Bad/x", "a//b", "/x", &"a".repeat(64)] {
            assert!(check_label_key(k).is_err(), "{k}");
        }
        let mut errors = Errors::default();
        errors.label_value(&Path::root("v"), "");
        errors.label_value(&Path::root("v"), "ok-1");
        errors.label_value(&Path::root("v"), "no way");
        let errs = errors.into_result().expect_err("one bad value");
        assert_eq!(errs.0.len(), 1);
        assert_eq!(errs.0[0].field, "v");
    }

    #[test]
    fn paths_read_like_kube_apiserver() {
        let p = Path::root("spec").field("taints").index(1).field("key");
        assert_eq!(p.as_str(), "spec.taints[1].key");
        assert_eq!(Path::root("m").key("holiday").as_str(), "m[holiday]");
    }
}
