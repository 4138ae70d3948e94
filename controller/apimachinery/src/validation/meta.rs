//! What every kind's validation starts with: `metadata` (name by the
//! kind's rule, namespace, labels, annotations, finalizers, owner
//! references), its update rules, and label selectors.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::field::{BadValue, Error, ErrorList, Path};
use super::names;

/// A kind's rule for `metadata.name`.
pub type NameRule = fn(&str) -> Vec<String>;

/// One `Invalid` per message, all at `path` with `value`.
pub fn invalid_each(errs: &mut ErrorList, path: &Path, value: &str, msgs: Vec<String>) {
    for m in msgs {
        errs.push(Error::invalid(path, value, m));
    }
}

/// Core/v1 Event and PodDisruptionBudget names: only what a URL's path
/// segment can carry.
pub fn path_segment_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v == "." || v == ".." {
        errs.push(format!("may not be '{v}'"));
    }
    for c in ['/', '%'] {
        if v.contains(c) {
            errs.push(format!("may not contain '{c}'"));
        }
    }
    errs
}

/// Upstream validates a `generateName` as a name whose trailing `-` is
/// fine.
fn mask_trailing_dash(v: &str) -> String {
    match v.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => format!("{rest}a"),
        _ => v.to_string(),
    }
}

/// `ValidateObjectMeta` for a create.
pub fn object_meta(m: &ObjectMeta, namespaced: bool, name_rule: NameRule) -> ErrorList {
    let path = Path::new("metadata");
    let mut errs = ErrorList::new();
    if let Some(g) = m.generate_name.as_deref().filter(|g| !g.is_empty()) {
        invalid_each(
            &mut errs,
            &path.child("generateName"),
            g,
            name_rule(&mask_trailing_dash(g)),
        );
    }
    match m.name.as_deref().unwrap_or_default() {
        "" => errs.push(Error::required(
            &path.child("name"),
            "name or generateName is required",
        )),
        name => invalid_each(&mut errs, &path.child("name"), name, name_rule(name)),
    }
    let ns = m.namespace.as_deref().unwrap_or_default();
    if namespaced {
        if ns.is_empty() {
            errs.push(Error::required(&path.child("namespace"), ""));
        } else {
            invalid_each(
                &mut errs,
                &path.child("namespace"),
                ns,
                names::dns1123_label(ns),
            );
        }
    } else if !ns.is_empty() {
        errs.push(Error::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    if let Some(g) = m.generation.filter(|g| *g < 0) {
        errs.push(Error::invalid(
            &path.child("generation"),
            g,
            names::NEGATIVE,
        ));
    }
    errs.extend(labels(m.labels.as_ref(), &path.child("labels")));
    errs.extend(annotations(
        m.annotations.as_ref(),
        &path.child("annotations"),
    ));
    errs.extend(owner_references(m, &path.child("ownerReferences")));
    errs.extend(finalizers(
        m.finalizers.as_deref().unwrap_or_default(),
        &path.child("finalizers"),
    ));
    errs
}

/// `ValidateObjectMetaUpdate`: name and namespace stay. (The server keeps
/// uid, creationTimestamp and the deletion fields itself, and accepts an
/// update without a resourceVersion, as it does for every kind.)
pub fn object_meta_update(new: &ObjectMeta, old: &ObjectMeta) -> ErrorList {
    let path = Path::new("metadata");
    let mut errs = ErrorList::new();
    for (field, n, o) in [
        ("name", &new.name, &old.name),
        ("namespace", &new.namespace, &old.namespace),
    ] {
        let (n, o) = (n.as_deref().unwrap_or(""), o.as_deref().unwrap_or(""));
        if n != o {
            errs.push(Error::invalid(&path.child(field), n, names::IMMUTABLE));
        }
    }
    if let (Some(n), Some(o)) = (new.generation, old.generation) {
        if n < o {
            errs.push(Error::invalid(
                &path.child("generation"),
                n,
                "must not be decremented",
            ));
        }
    }
    errs
}

/// Labels (or a selector's `matchLabels`, a node selector): errors at the
/// map's path, no key subscript, as upstream.
pub fn labels(m: Option<&BTreeMap<String, String>>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (k, v) in m.into_iter().flatten() {
        invalid_each(&mut errs, path, k, names::qualified_name(k));
        invalid_each(&mut errs, path, v, names::label_value(v));
    }
    errs
}

/// kube-apiserver's limit on all annotations of one object.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

pub fn annotations(m: Option<&BTreeMap<String, String>>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut size = 0;
    for (k, v) in m.into_iter().flatten() {
        invalid_each(&mut errs, path, k, names::qualified_name(&k.to_lowercase()));
        size += k.len() + v.len();
    }
    if size > MAX_ANNOTATIONS_BYTES {
        errs.push(Error::too_long(path, MAX_ANNOTATIONS_BYTES));
    }
    errs
}

fn owner_references(m: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let refs = m.owner_references.as_deref().unwrap_or_default();
    let mut controllers = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let p = path.index(i);
        let gv = r.api_version.as_str();
        if gv.is_empty() {
            errs.push(Error::required(&p.child("apiVersion"), "must not be empty"));
        } else if gv.split('/').count() > 2 || gv.starts_with('/') || gv.ends_with('/') {
            errs.push(Error::invalid(
                &p.child("apiVersion"),
                gv,
                "must be <group>/<version> or <version>",
            ));
        }
        for (f, v) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
            if v.is_empty() {
                errs.push(Error::required(&p.child(f), "must not be empty"));
            }
        }
        if gv == "v1" && r.kind == "Event" {
            errs.push(Error::invalid(
                &p.child("kind"),
                "Event",
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            controllers.push(format!("{}/{}", r.kind, r.name));
        }
    }
    if controllers.len() > 1 {
        errs.push(Error::invalid(
            path,
            BadValue::json(&refs),
            format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {} and {}",
                controllers[0], controllers[1]
            ),
        ));
    }
    errs
}

const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Each finalizer a qualified name, and one without a `/` a standard
/// one; `orphan` and `foregroundDeletion` not both.
pub fn finalizers(list: &[String], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, f) in list.iter().enumerate() {
        invalid_each(&mut errs, path, f, names::qualified_name(f));
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
            errs.push(Error::invalid(
                &path.index(i),
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    let has = |n: &str| list.iter().any(|f| f == n);
    if has("orphan") && has("foregroundDeletion") {
        errs.push(Error::invalid(
            path,
            BadValue::json(&list),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// `metav1.LabelSelector` with strict label values.
pub fn label_selector(s: Option<&LabelSelector>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(s) = s else {
        return errs;
    };
    errs.extend(labels(s.match_labels.as_ref(), &path.child("matchLabels")));
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errs.push(Error::required(
                &p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(Error::forbidden(
                &p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errs.push(Error::invalid(
                &p.child("operator"),
                op,
                "not a valid selector operator",
            )),
        }
        invalid_each(
            &mut errs,
            &p.child("key"),
            &e.key,
            names::qualified_name(&e.key),
        );
        for (j, v) in values.iter().enumerate() {
            invalid_each(
                &mut errs,
                &p.child("values").index(j),
                v,
                names::label_value(v),
            );
        }
    }
    errs
}

/// Whether `s` selects objects labelled `labels` (upstream converts the
/// selector and matches; an unparseable one matches nothing).
pub fn selector_matches(s: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let ml = s.match_labels.iter().flatten();
    let labels_ok = ml.into_iter().all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = s.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let got = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => got.is_some_and(|v| values.contains(v)),
            "NotIn" => got.is_none_or(|v| !values.contains(v)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// A selector with neither labels nor expressions.
pub fn selector_is_empty(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
}
