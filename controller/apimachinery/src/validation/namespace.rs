//! Namespace: a DNS-1123 label, cluster-scoped, finalizers standard or
//! qualified (errors at `spec.finalizers`, no index, as upstream).

use k8s_openapi::api::core::v1::Namespace;

use super::field::{ErrorList, Path};
use super::meta::{self, invalid_each};
use super::names;

pub fn validate_create(n: &Namespace) -> ErrorList {
    let mut errs = meta::object_meta(&n.metadata, false, names::dns1123_label);
    let path = Path::new("spec").child("finalizers");
    let list = n
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_deref())
        .unwrap_or_default();
    for f in list {
        invalid_each(&mut errs, &path, f, names::qualified_name(f));
        if !f.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&f.as_str())
        {
            errs.push(super::Error::invalid(
                &path,
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// The spec cannot change through an update (the strategy keeps the
/// stored one); only the metadata rules apply.
pub fn validate_update(n: &Namespace, o: &Namespace) -> ErrorList {
    meta::object_meta_update(&n.metadata, &o.metadata)
}
