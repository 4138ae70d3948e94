//! Small builders the unit tests of both controllers share.

use std::collections::BTreeMap;

/// A label (or annotation) map from pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
