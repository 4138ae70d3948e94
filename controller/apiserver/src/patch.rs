//! The patch formats kubectl sends, applied without I/O:
//!
//! - JSON merge patch (RFC 7386; `label`, `annotate`, `patch --type
//!   merge`, and what kubectl sends for `sluice.dev` kinds); strategic
//!   merge patch (client-side `apply`, `cordon`, `patch` of built-in
//!   kinds) is in `strategic/`;
//! - JSON patch (RFC 6902; `patch --type json`): add, remove, replace,
//!   move, copy, test, with RFC 6901 pointers;
//! - server-side apply (`apply --server-side`, `application/apply-patch+yaml`)
//!   is told apart here and carried out by `apply/` (merge, field
//!   ownership, conflicts, pruning).

use serde_json::{json, Value};

/// Which format a `Content-Type` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl Format {
    pub const SUPPORTED: &'static [&'static str] = &[
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
        "application/apply-patch+yaml",
    ];

    pub fn of(content_type: &str) -> Option<Format> {
        let ct = content_type.split(';').next().unwrap_or("").trim();
        match ct {
            "application/merge-patch+json" => Some(Format::Merge),
            "application/strategic-merge-patch+json" => Some(Format::Strategic),
            "application/json-patch+json" => Some(Format::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Format::Apply),
            _ => None,
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// RFC 6901: `/a/b~1c/0` → `["a", "b/c", "0"]`.
fn pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let rest = p
        .strip_prefix('/')
        .ok_or_else(|| format!("path {p:?} does not start with /"))?;
    Ok(rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// The parent container of `path` and the last token.
fn parent<'a>(doc: &'a mut Value, path: &[String]) -> Result<(&'a mut Value, String), String> {
    let (last, init) = path
        .split_last()
        .ok_or_else(|| "the whole document cannot be the target".to_string())?;
    let mut cur = doc;
    for tok in init {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(tok)
                .ok_or_else(|| format!("{tok:?} does not exist"))?,
            Value::Array(a) => {
                let i: usize = tok
                    .parse()
                    .map_err(|_| format!("{tok:?} is not an index"))?;
                a.get_mut(i)
                    .ok_or_else(|| format!("index {i} is out of range"))?
            }
            _ => return Err(format!("{tok:?} is inside a value that is not a container")),
        };
    }
    Ok((cur, last.clone()))
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = doc;
    for tok in path {
        cur = match cur {
            Value::Object(m) => m.get(tok)?,
            Value::Array(a) => a.get(tok.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    // Found with the patch fuzz target: `copy` of a 100-level value into
    // its own leaf made a pod 200 levels deep, which the store kept and
    // could never read back. The document's other branches are within the
    // limit already (it held before this operation).
    if path.len() + super::meta::depth(&value) > MAX_PATCH_DEPTH {
        return Err(format!(
            "the result would nest objects and lists more than {MAX_PATCH_DEPTH} levels deep"
        ));
    }
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (p, last) = parent(doc, path)?;
    match p {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse()
                    .map_err(|_| format!("{last:?} is not an index"))?
            };
            if i > a.len() {
                return Err(format!("index {i} is out of range"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err("the target's parent is not a container".into()),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, String> {
    let (p, last) = parent(doc, path)?;
    match p {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| format!("{last:?} does not exist")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("{last:?} is not an index"))?;
            if i >= a.len() {
                return Err(format!("index {i} is out of range"));
            }
            Ok(a.remove(i))
        }
        _ => Err("the target's parent is not a container".into()),
    }
}

/// The deepest a JSON patch may make the document: the store's limit
/// (`meta::MAX_DEPTH`), checked per operation so that repeated copies of
/// a value into itself cannot build a document deep enough to overflow
/// the stack of whatever walks it next (dropping it included).
const MAX_PATCH_DEPTH: usize = super::meta::MAX_DEPTH;

/// RFC 6902 JSON patch; on error the document is left as it was (the
/// operations run on a copy).
/// kube-apiserver's bound on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// How much a JSON patch may copy in all (kube-apiserver bounds it by its
/// request size): without it, a patch of a few kilobytes that copies the
/// document into itself thirty times asks for gigabytes.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch is a list of operations")?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(format!(
            "the allowed count of operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, this one has {}",
            ops.len()
        ));
    }
    let mut copied = 0usize;
    let mut work = doc.clone();
    for (i, op) in ops.iter().enumerate() {
        let at = |m: String| format!("operation {i}: {m}");
        let field = |k: &str| {
            op.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| at(format!("missing {k:?}")))
        };
        let path = pointer(field("path")?).map_err(at)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| at("missing \"value\"".into()))
        };
        match field("op")? {
            "add" => add(&mut work, &path, value()?).map_err(at)?,
            "remove" => {
                remove(&mut work, &path).map_err(at)?;
            }
            "replace" => {
                remove(&mut work, &path).map_err(at)?;
                add(&mut work, &path, value()?).map_err(at)?;
            }
            "move" | "copy" => {
                let from = pointer(field("from")?).map_err(at)?;
                let v = if field("op")? == "move" {
                    remove(&mut work, &from).map_err(at)?
                } else {
                    let v =
                        get(&work, &from).ok_or_else(|| at("\"from\" does not exist".into()))?;
                    copied += serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
                    if copied > MAX_JSON_PATCH_COPY_BYTES {
                        return Err(at(format!(
                            "the patch copies more than {MAX_JSON_PATCH_COPY_BYTES} bytes in all"
                        )));
                    }
                    v.clone()
                };
                add(&mut work, &path, v).map_err(at)?;
            }
            "test" => {
                if get(&work, &path) != Some(&value()?) {
                    return Err(at("test failed".into()));
                }
            }
            other => {
                return Err(at(format!(
                    "{other:?} is not add, remove, replace, move, copy or test"
                )))
            }
        }
    }
    *doc = work;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge(&mut t, &json!({"a": "z", "c": {"f": null}, "n": [1]}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}, "n": [1]}));
    }

    #[test]
    fn json_patch_cannot_blow_up_the_object() {
        // Each copy doubles the object: 30 of them would need gigabytes.
        let mut doc = json!({"a": "x".repeat(1024)});
        let bomb: Vec<Value> = (0..30)
            .map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")}))
            .collect();
        let before = doc.clone();
        let e = json_patch(&mut doc, &Value::Array(bomb)).unwrap_err();
        assert!(e.contains("copies more than"), "{e}");
        assert_eq!(doc, before, "a refused patch changes nothing");

        let many: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        let e = json_patch(&mut doc, &Value::Array(many)).unwrap_err();
        assert!(e.contains("10000"), "{e}");
    }

    #[test]
    fn json_patch_follows_rfc6902() {
        let mut d = json!({"metadata": {"labels": {"a/b": "1"}}, "spec": {"list": [1, 2]}});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/metadata/labels/x", "value": "y"},
                {"op": "remove", "path": "/metadata/labels/a~1b"},
                {"op": "add", "path": "/spec/list/-", "value": 3},
                {"op": "replace", "path": "/spec/list/0", "value": 0},
                {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
                {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
                {"op": "test", "path": "/spec/moved/2", "value": 3}
            ]),
        )
        .expect("patch");
        assert_eq!(
            d,
            json!({"metadata": {"labels": {"x": "y"}}, "spec": {"list": [0, 2, 3], "moved": [0, 2, 3]}})
        );
        // A failing operation leaves the document untouched.
        let before = d.clone();
        let e = json_patch(
            &mut d,
            &json!([{"op": "remove", "path": "/metadata/labels/x"},
                                            {"op": "test", "path": "/spec/list/0", "value": 9}]),
        )
        .expect_err("test fails");
        assert!(e.contains("operation 1: test failed"), "{e}");
        assert_eq!(d, before);
        for bad in [
            json!({}),
            json!([{"op": "jump", "path": "/a"}]),
            json!([{"op": "add", "path": "a", "value": 1}]),
        ] {
            assert!(json_patch(&mut d, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_patch_bounds_the_depth_and_the_bytes_it_copies() {
        // Found with the patch fuzz target: a value 100 levels deep copied
        // into its own deepest object (200 levels, past what the store
        // reads back).
        let deep = (0..100).fold(json!({}), |v, _| json!({ "a": v }));
        let mut d = json!({ "x": deep });
        let into_leaf = format!("/x{}/b", "/a".repeat(99));
        let e = json_patch(
            &mut d,
            &json!([{"op": "copy", "from": "/x", "path": into_leaf}]),
        )
        .expect_err("too deep");
        assert!(e.contains("levels deep"), "{e}");
        // Each copy of the document into itself doubles it: refused once
        // the copies pass the limit, long before memory runs out.
        let mut d = json!({ "s": "x".repeat(1024 * 1024) });
        let doubling: Vec<Value> = (0..8)
            .map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")}))
            .collect();
        let e = json_patch(&mut d, &Value::Array(doubling)).expect_err("too big");
        assert!(e.contains("copies more than"), "{e}");
    }

    #[test]
    fn formats_are_told_by_their_content_type() {
        assert_eq!(
            Format::of("application/apply-patch+yaml; charset=utf-8"),
            Some(Format::Apply)
        );
        assert_eq!(Format::of("text/plain"), None);
    }
}
