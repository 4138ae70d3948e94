//! ConfigMap: keys that can be file names, no key in both `data` and
//! `binaryData`, at most 1 MiB of values, and nothing of the data
//! changed once `immutable` is set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::field::{Error, ErrorList, Path};
use super::meta::{self, invalid_each};
use super::names;

/// `core.MaxSecretSize`: what a ConfigMap's or a Secret's values may
/// hold together (keys not counted), so the object fits in one etcd
/// request with room for its metadata.
pub const MAX_SIZE: usize = 1024 * 1024;

/// What an immutable object's data fields answer when changed.
pub const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// Upstream compares the maps with `reflect.DeepEqual`, where a nil map
/// and an empty one differ; a map stored empty reads back absent from
/// etcd's protobuf, so here absent and empty are the same data.
pub fn same_map<V: PartialEq>(
    a: Option<&BTreeMap<String, V>>,
    b: Option<&BTreeMap<String, V>>,
) -> bool {
    let empty = BTreeMap::new();
    a.unwrap_or(&empty) == b.unwrap_or(&empty)
}

pub fn validate_create(c: &ConfigMap) -> ErrorList {
    let mut errs = meta::object_meta(&c.metadata, true, names::dns1123_subdomain);
    let binary = c.binary_data.as_ref();
    let mut total = 0usize;
    for (k, v) in c.data.iter().flatten() {
        total = total.saturating_add(v.len());
        let at = Path::new("data").key(k);
        invalid_each(&mut errs, &at, k, names::config_key(k));
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(Error::invalid(
                &at,
                k,
                "duplicate of key present in binaryData",
            ));
        }
    }
    for (k, v) in binary.into_iter().flatten() {
        total = total.saturating_add(v.0.len());
        invalid_each(
            &mut errs,
            &Path::new("binaryData").key(k),
            k,
            names::config_key(k),
        );
    }
    if total > MAX_SIZE {
        // Upstream's path for the whole object is `NewPath("")`, which
        // renders as an empty subscript.
        errs.push(Error::too_long(&Path::new("[]"), MAX_SIZE));
    }
    errs
}

pub fn validate_update(n: &ConfigMap, o: &ConfigMap) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(immutable_update(
        o.immutable,
        n.immutable,
        &[
            ("data", same_map(n.data.as_ref(), o.data.as_ref())),
            (
                "binaryData",
                same_map(n.binary_data.as_ref(), o.binary_data.as_ref()),
            ),
        ],
    ));
    errs.extend(validate_create(n));
    errs
}

/// A ConfigMap's or a Secret's update once the stored one is `immutable`:
/// it stays so, and each data field (`(path, unchanged)`) stays as it was.
pub fn immutable_update(was: Option<bool>, is: Option<bool>, fields: &[(&str, bool)]) -> ErrorList {
    let mut errs = ErrorList::default();
    if was != Some(true) {
        return errs;
    }
    if is != Some(true) {
        errs.push(Error::forbidden(&Path::new("immutable"), IMMUTABLE_SET));
    }
    for (path, unchanged) in fields {
        if !unchanged {
            errs.push(Error::forbidden(&Path::new(path), IMMUTABLE_SET));
        }
    }
    errs
}
