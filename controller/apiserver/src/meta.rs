//! Object metadata as the API server owns it, decided without I/O: what a
//! create fills in (uid, creationTimestamp, a name from `generateName`),
//! what an update may not change, and the `Invalid` errors that name the
//! field. The caller passes the clock's reading and the random parts.

use axum::http::StatusCode;
use serde_json::{json, Map, Value};

use sluice_apimachinery::validation::ErrorList;

use super::path::Target;
use super::status::ApiError;
use crate::identity::is_dns_subdomain;

/// The kind's `apiVersion`: `v1` for core, `<group>/<version>` otherwise.
pub fn api_version(t: &Target) -> String {
    let r = t.resource;
    if r.group.is_empty() {
        r.version.to_string()
    } else {
        format!("{}/{}", r.group, r.version)
    }
}

/// A 422 `Invalid` naming the object and the field.
pub fn invalid(t: &Target, name: &str, field: &str, message: &str) -> ApiError {
    let kind = t.resource.kind;
    let mut e = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("{kind} {name:?} is invalid: {field}: {message}"),
    );
    e.details = Some(json!({
        "name": name,
        "group": t.resource.group,
        "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
    }));
    e
}

/// kube-apiserver's 422 for every broken rule of one object: the
/// aggregate message (`<Kind[.group]> "<name>" is invalid: [e1, e2]`, a
/// single error without brackets) and one cause per error.
pub fn invalid_all(t: &Target, name: &str, errs: &ErrorList) -> ApiError {
    let r = t.resource;
    let mut e = ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        errs.message(r.kind, r.group, name),
    );
    let causes: Vec<Value> = errs
        .iter()
        .map(|c| json!({"reason": c.kind.reason(), "message": c.body(), "field": c.field}))
        .collect();
    e.details = Some(json!({"name": name, "group": r.group, "kind": r.kind, "causes": causes}));
    e
}

fn meta_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    o.entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

/// Check `obj` against the path it was sent to and fill in what the
/// server owns. `suffix` is five random lowercase alphanumerics for
/// `generateName`, `uid` a fresh UUID, `now` RFC 3339.
pub fn prepare_create(
    t: &Target,
    mut obj: Value,
    suffix: &str,
    uid: &str,
    now: &str,
) -> Result<Value, ApiError> {
    let kind = t.resource.kind;
    let av = api_version(t);
    if !obj.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("the body must be a {kind} object"),
        ));
    }
    // Defaulted when absent, refused when it names another kind.
    for (field, want) in [("kind", kind.to_string()), ("apiVersion", av.clone())] {
        match obj.get(field) {
            None | Some(Value::Null) => {
                obj[field] = json!(want);
            }
            Some(Value::String(s)) if *s == want => {}
            Some(other) => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("{field} {other} does not match the path: expected {want:?}"),
                ))
            }
        }
    }
    let Some(meta) = meta_mut(&mut obj) else {
        return Err(invalid(t, "", "metadata", "must be an object"));
    };
    let name = match (
        meta.get("name").and_then(Value::as_str),
        meta.get("generateName").and_then(Value::as_str),
    ) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(g)) if !g.is_empty() => format!("{g}{suffix}"),
        _ => {
            return Err(invalid(
                t,
                "",
                "metadata.name",
                "name or generateName is required",
            ));
        }
    };
    if !is_dns_subdomain(&name) {
        return Err(invalid(
            t,
            &name,
            "metadata.name",
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    }
    meta.insert("name".into(), json!(name));
    match (&t.namespace, meta.get("namespace").and_then(Value::as_str)) {
        (Some(ns), Some(m)) if m != ns => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("the namespace of the provided object ({m}) does not match the namespace sent on the request ({ns})"),
            ))
        }
        (Some(ns), _) => {
            meta.insert("namespace".into(), json!(ns));
        }
        (None, _) => {
            meta.remove("namespace");
        }
    }
    meta.insert("uid".into(), json!(uid));
    meta.insert("creationTimestamp".into(), json!(now));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.insert("generation".into(), json!(1));
    validate_metadata(t, &obj)?;
    check_depth(t, &obj)?;
    Ok(obj)
}

/// A label or annotation key: an optional DNS-subdomain prefix and `/`,
/// then a name of at most 63 characters, alphanumeric at both ends with
/// `-`, `_` and `.` inside.
fn valid_qualified_name(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| p.len() <= 253 && is_dns_subdomain(p))
        && valid_label_value(name)
        && !name.is_empty()
}

/// A label value: empty, or at most 63 characters, alphanumeric at both
/// ends with `-`, `_` and `.` inside.
fn valid_label_value(v: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.starts_with(alnum)
            && v.ends_with(alnum)
            && v.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.')))
}

/// The deepest nesting of objects and lists a stored object may have:
/// what the store's JSON decoder reads back (serde_json refuses the 128th
/// level). A body cannot be deeper when decoded, but a JSON patch's `copy`
/// into the copied value, or server-side apply's `managedFields` entry
/// for a deep body (four levels down), can make it so; stored, such an
/// object could never be read again (every `get` a 500).
pub const MAX_DEPTH: usize = 127;

/// How deeply `v` nests objects and lists (a scalar is 0). Recursive:
/// only ever given values built from decoded bodies plus a few levels.
pub fn depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A 422 for an object nested deeper than `MAX_DEPTH`: checked on every
/// object a write stores, after its managedFields were recorded (their
/// `fieldsV1` nest four levels deeper than the fields they name).
pub fn check_depth(t: &Target, obj: &Value) -> Result<(), ApiError> {
    if depth(obj) > MAX_DEPTH {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(invalid(
            t,
            name,
            "<body>",
            &format!("the object nests objects and lists more than {MAX_DEPTH} levels deep"),
        ));
    }
    Ok(())
}

/// kube-apiserver's limit on all annotations of one object.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Labels and annotations as kube-apiserver accepts them.
pub fn validate_metadata(t: &Target, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for (field, is_labels) in [("labels", true), ("annotations", false)] {
        let Some(v) = obj.pointer(&format!("/metadata/{field}")) else {
            continue;
        };
        if v.is_null() {
            continue;
        }
        let map = v.as_object().ok_or_else(|| {
            invalid(
                t,
                name,
                &format!("metadata.{field}"),
                "must be a map of strings",
            )
        })?;
        let mut size = 0;
        for (k, val) in map {
            let at = format!("metadata.{field}[{k}]");
            let s = val
                .as_str()
                .ok_or_else(|| invalid(t, name, &at, &format!("{val} is not a string")))?;
            if !valid_qualified_name(k) {
                return Err(invalid(
                    t,
                    name,
                    &format!("metadata.{field}"),
                    &format!("Invalid value: {k:?}: a key must be a name of at most 63 alphanumerics, '-', '_' or '.' (starting and ending alphanumeric), optionally prefixed by a DNS subdomain and '/'"),
                ));
            }
            if is_labels && !valid_label_value(s) {
                return Err(invalid(
                    t,
                    name,
                    &at,
                    &format!("Invalid value: {s:?}: a label value must be empty or at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"),
                ));
            }
            size += k.len() + s.len();
        }
        if !is_labels && size > MAX_ANNOTATIONS_BYTES {
            return Err(invalid(
                t,
                name,
                "metadata.annotations",
                &format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
            ));
        }
    }
    Ok(())
}

/// Set `metadata.resourceVersion` (stored objects carry none: the store's
/// revision is the truth). [`sluice_store::NO_REVISION`] (what a dry-run
/// create answers: it was never stored) sets none, as kube-apiserver.
pub fn with_resource_version(mut obj: Value, rev: i64) -> Value {
    if let Some(m) = meta_mut(&mut obj) {
        if rev == sluice_store::NO_REVISION {
            m.remove("resourceVersion");
        } else {
            m.insert("resourceVersion".into(), json!(rev.to_string()));
        }
    }
    obj
}

/// The resourceVersion an update was made against, if it says.
pub fn sent_resource_version(obj: &Value) -> Result<Option<i64>, String> {
    match obj.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("metadata.resourceVersion: {s:?} is not a resource version")),
        Some(other) => Err(format!(
            "metadata.resourceVersion: {other} must be a string"
        )),
    }
}

/// An update of `old` (as stored) to `new`: the path's name and namespace,
/// the server-owned fields kept; `generation` grows when the spec changed
/// ([`generation_grows`]).
pub fn prepare_update(t: &Target, old: &Value, mut new: Value) -> Result<Value, ApiError> {
    let name = t.name.clone().unwrap_or_default();
    if new.pointer("/metadata/name").and_then(Value::as_str) != Some(name.as_str()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                new.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
        ));
    }
    let kind = t.resource.kind;
    if new
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != kind)
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("kind must be {kind}"),
        ));
    }
    new["kind"] = json!(kind);
    new["apiVersion"] = json!(api_version(t));
    let spec_changed = generation_grows(kind, old, &new);
    let Some(meta) = meta_mut(&mut new) else {
        return Err(invalid(t, &name, "metadata", "must be an object"));
    };
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "generation",
    ] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(v) => {
                meta.insert(field.into(), v.clone());
            }
            None => {
                meta.remove(field);
            }
        }
    }
    if spec_changed {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        meta.insert("generation".into(), json!(g + 1));
    }
    meta.remove("resourceVersion");
    validate_metadata(t, &new)?;
    check_depth(t, &new)?;
    Ok(new)
}

/// Whether an update from `old` to `new` is a new generation: a change of
/// the spec, or for an EndpointSlice (which has no spec) a change of
/// anything but its metadata, or of its labels, as upstream's
/// endpointslice strategy counts it. Controllers compare a cached slice's
/// generation with the one their write got to tell a stale cache.
fn generation_grows(kind: &str, old: &Value, new: &Value) -> bool {
    if kind != "EndpointSlice" {
        return old.get("spec") != new.get("spec");
    }
    let content = |v: &Value| -> Vec<(String, Value)> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "kind" | "apiVersion"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let labels = |v: &Value| v.pointer("/metadata/labels").cloned();
    content(old) != content(new) || labels(old) != labels(new)
}

/// A name suffix for `generateName` from random bytes (kube-apiserver's
/// alphabet: no vowels, no look-alikes).
pub fn name_suffix(random: &[u8; 5]) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// A version-4 UUID from 16 random bytes.
pub fn uuid(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;

    #[test]
    fn create_fills_what_the_server_owns_and_checks_the_rest() {
        let t = resolve("/api/v1/namespaces/default/pods").expect("path");
        let o = prepare_create(
            &t,
            json!({"metadata": {"generateName": "web-", "resourceVersion": "9"}}),
            "x7k2q",
            "u-1",
            "2026-11-23T10:00:00Z",
        )
        .expect("create");
        assert_eq!(o["kind"], "Pod");
        assert_eq!(o["apiVersion"], "v1");
        assert_eq!(o["metadata"]["name"], "web-x7k2q");
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["uid"], "u-1");
        assert!(o["metadata"].get("resourceVersion").is_none());

        let e = prepare_create(
            &t,
            json!({"metadata": {"name": "Bad_Name"}}),
            "x",
            "u",
            "now",
        )
        .expect_err("name");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.body()["details"]["causes"][0]["field"], "metadata.name");
        let e = prepare_create(
            &t,
            json!({"metadata": {"name": "a", "namespace": "other"}}),
            "x",
            "u",
            "now",
        )
        .expect_err("ns");
        assert!(
            e.message.contains("does not match the namespace"),
            "{}",
            e.message
        );
        let e = prepare_create(
            &t,
            json!({"kind": "Service", "metadata": {"name": "a"}}),
            "x",
            "u",
            "now",
        )
        .expect_err("kind");
        assert_eq!(e.code, StatusCode::BAD_REQUEST);
        assert!(prepare_create(&t, json!([1]), "x", "u", "now").is_err());
        assert!(prepare_create(&t, json!({"metadata": {}}), "x", "u", "now").is_err());
    }

    #[test]
    fn updates_keep_server_fields_and_count_spec_generations() {
        let t = resolve("/apis/apps/v1/namespaces/d/deployments/web").expect("path");
        let old = json!({"metadata": {"name": "web", "namespace": "d", "uid": "u", "generation": 3}, "spec": {"replicas": 1}});
        let new = json!({"metadata": {"name": "web", "uid": "forged", "resourceVersion": "5"}, "spec": {"replicas": 2}});
        let u = prepare_update(&t, &old, new).expect("update");
        assert_eq!(u["metadata"]["uid"], "u");
        assert_eq!(u["metadata"]["namespace"], "d");
        assert_eq!(u["metadata"]["generation"], 4);
        assert!(u["metadata"].get("resourceVersion").is_none());
        let renamed = json!({"metadata": {"name": "other"}});
        assert!(prepare_update(&t, &old, renamed).is_err());
    }

    #[test]
    fn endpoint_slices_count_a_generation_for_anything_but_metadata() {
        let t =
            resolve("/apis/discovery.k8s.io/v1/namespaces/d/endpointslices/web-x").expect("path");
        let old = json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": "web-x", "namespace": "d", "uid": "u", "generation": 2,
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "endpoints": [{"addresses": ["198.18.9.1"]}]});
        let generation = |new: Value| {
            prepare_update(&t, &old, new).expect("update")["metadata"]["generation"].clone()
        };
        let mut same = old.clone();
        same["metadata"]["annotations"] = json!({"note": "x"});
        assert_eq!(generation(same), 2, "an annotation is metadata only");
        let mut endpoints = old.clone();
        endpoints["endpoints"] = json!([{"addresses": ["198.18.9.2"]}]);
        assert_eq!(generation(endpoints), 3);
        let mut labels = old.clone();
        labels["metadata"]["labels"]["extra"] = json!("1");
        assert_eq!(generation(labels), 3, "labels count, as upstream");
        let mut ports = old.clone();
        ports["ports"] = json!([{"port": 8080}]);
        assert_eq!(generation(ports), 3);
    }

    #[test]
    fn labels_and_annotations_are_checked() {
        let t = resolve("/api/v1/namespaces/default/pods").expect("path");
        let with = |m: Value| prepare_create(&t, json!({"metadata": m}), "x", "u", "now");
        assert!(
            with(json!({"name": "a", "labels": {"app.kubernetes.io/name": "web-1", "e": ""}}))
                .is_ok()
        );
        for (m, field) in [
            (
                json!({"name": "a", "labels": {"app": "bad value"}}),
                "metadata.labels[app]",
            ),
            (
                json!({"name": "a", "labels": {"-x": "y"}}),
                "metadata.labels",
            ),
            (
                json!({"name": "a", "labels": {"a": 1}}),
                "metadata.labels[a]",
            ),
            (json!({"name": "a", "labels": ["x"]}), "metadata.labels"),
            (
                json!({"name": "a", "annotations": {"Bad Key": "v"}}),
                "metadata.annotations",
            ),
            (
                json!({"name": "a", "annotations": {"k": "x".repeat(300 * 1024)}}),
                "metadata.annotations",
            ),
        ] {
            let e = with(m.clone()).expect_err("invalid");
            assert_eq!(e.body()["details"]["causes"][0]["field"], field, "{m}");
        }
    }

    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |v, _| json!([v]))
    }

    #[test]
    fn objects_deeper_than_the_store_reads_back_are_refused() {
        // The limit is serde_json's: MAX_DEPTH levels parse, one more not.
        for (levels, parses) in [(MAX_DEPTH, true), (MAX_DEPTH + 1, false)] {
            let text = serde_json::to_vec(&nested(levels)).expect("encode");
            assert_eq!(
                serde_json::from_slice::<Value>(&text).is_ok(),
                parses,
                "{levels}"
            );
        }
        // Found with the patch fuzz target (its check that a stored object
        // parses back): server-side apply of a pod whose spec nests 125
        // objects records its fields under metadata.managedFields[0]
        // .fieldsV1, four levels further down, past the limit; the object
        // was stored and every read of it failed with 500 "stored object
        // unreadable".
        let t = resolve("/api/v1/namespaces/default/pods/a").expect("path");
        let old = json!({"metadata": {"name": "a", "namespace": "default"}});
        let deep = json!({"metadata": {"name": "a"}, "spec": nested(MAX_DEPTH)});
        let e = prepare_update(&t, &old, deep.clone()).expect_err("too deep");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.message.contains("levels deep"), "{}", e.message);
        let t = resolve("/api/v1/namespaces/default/pods").expect("path");
        assert!(prepare_create(&t, deep, "x", "u", "now").is_err());
        let ok = json!({"metadata": {"name": "a"}, "spec": nested(MAX_DEPTH - 1)});
        assert!(prepare_create(&t, ok, "x", "u", "now").is_ok());
    }

    #[test]
    fn uuids_and_suffixes_have_their_shapes() {
        let u = uuid([0xff; 16]);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_eq!(name_suffix(&[0, 1, 2, 3, 200]).len(), 5);
        assert_eq!(
            sent_resource_version(&json!({"metadata": {"resourceVersion": "12"}})),
            Ok(Some(12))
        );
        assert!(sent_resource_version(&json!({"metadata": {"resourceVersion": "x"}})).is_err());
    }
}
