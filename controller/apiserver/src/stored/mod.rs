//! Stored objects turned into response bytes cheaply. Pure: no I/O.
//!
//! Objects are stored as compact JSON without a resourceVersion (the
//! store's revision is the truth). Answering with one used to decode the
//! whole object into a `serde_json::Value`, insert the revision and encode
//! it again: most of the time of a list of 100 000 Pods. Here the object's
//! top level and its `metadata` are scanned for where their members are
//! (`scan.rs`, one pass, no decoding), and the revision is spliced into
//! the bytes at the place `serde_json`'s sorted map would have written it;
//! everything else is copied as it is. Selectors decode only what they
//! read: the labels, or the top-level fields a field selector names. The
//! bytes are the same as the slow path's for everything the API server
//! stores (the tests check it); what the scan does not take (whitespace,
//! escaped or unsorted keys, anything but an object) takes the slow path.

mod scan;

use std::collections::BTreeMap;

use serde_json::Value;

use super::meta;
use super::objects::Selectors;
use scan::{Member, Object};

/// A stored object: where its top-level members and its metadata's are
/// (offsets in `bytes`).
pub struct Split<'a> {
    bytes: &'a [u8],
    top: Object<'a>,
    meta: Option<Object<'a>>,
}

/// Where a member with `key` goes among sorted `members`: replacing one
/// (`Ok(i)`), or inserted before the member at `i` (`Err(i)`, at the end
/// when `i == members.len()`).
fn place(members: &[Member<'_>], key: &str) -> Result<usize, usize> {
    members.binary_search_by(|m| m.key.as_bytes().cmp(key.as_bytes()))
}

/// `bytes` with the member `key` of the object `obj` (found in them) set
/// to `value`, into `out`.
fn splice(out: &mut Vec<u8>, bytes: &[u8], obj: &Object<'_>, key: &str, value: &[u8]) {
    let member = |out: &mut Vec<u8>| {
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
    };
    match place(&obj.members, key) {
        Ok(i) => {
            let m = &obj.members[i];
            let v0 = m.value.as_ptr() as usize - bytes.as_ptr() as usize;
            out.extend_from_slice(&bytes[..v0]);
            out.extend_from_slice(value);
            out.extend_from_slice(&bytes[v0 + m.value.len()..]);
        }
        Err(i) if i < obj.members.len() => {
            let at = obj.members[i].start;
            out.extend_from_slice(&bytes[..at]);
            member(out);
            out.push(b',');
            out.extend_from_slice(&bytes[at..]);
        }
        Err(_) => {
            out.extend_from_slice(&bytes[..obj.close]);
            if !obj.members.is_empty() {
                out.push(b',');
            }
            member(out);
            out.extend_from_slice(&bytes[obj.close..]);
        }
    }
}

impl<'a> Split<'a> {
    /// `None` when the bytes are not a compact JSON object with sorted
    /// keys and an object (or no) `metadata`.
    pub fn parse(stored: &'a [u8]) -> Option<Self> {
        let (top, meta) = scan::scan(stored, "metadata")?;
        if meta.is_none() && place(&top.members, "metadata").is_ok() {
            // A metadata that is no object: the decoding path's to answer.
            return None;
        }
        Some(Split {
            bytes: stored,
            top,
            meta,
        })
    }

    fn meta_member(&self, key: &str) -> Option<&'a [u8]> {
        let meta = self.meta.as_ref()?;
        place(&meta.members, key)
            .ok()
            .map(|i| meta.members[i].value)
    }

    /// `metadata.labels`, the string values only (as the slow path reads
    /// them).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let Some(raw) = self.meta_member("labels") else {
            return BTreeMap::new();
        };
        serde_json::from_slice::<BTreeMap<String, Value>>(raw)
            .map(|m| {
                m.into_iter()
                    .filter_map(|(k, v)| match v {
                        Value::String(s) => Some((k, s)),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The object with `metadata.resourceVersion` set to `rev`.
    pub fn render(self, rev: i64) -> Option<Vec<u8>> {
        let rv = format!("\"{rev}\"");
        let mut out = Vec::with_capacity(self.bytes.len() + rv.len() + 32);
        match &self.meta {
            Some(meta) => splice(&mut out, self.bytes, meta, "resourceVersion", rv.as_bytes()),
            None => {
                let meta = format!("{{\"resourceVersion\":{rv}}}");
                splice(&mut out, self.bytes, &self.top, "metadata", meta.as_bytes());
            }
        }
        Some(out)
    }

    /// Whether `sel` selects the object: labels from the metadata, and
    /// for a field selector only the top-level fields it reads, decoded
    /// (matching reads nothing else, so the answer is the whole object's).
    pub fn selected_by(&self, sel: &Selectors) -> bool {
        if !sel.labels.matches(&self.labels()) {
            return false;
        }
        if sel.fields.is_empty() {
            return true;
        }
        let mut partial = serde_json::Map::new();
        for f in sel.fields.top_level_fields() {
            // The metadata as stored has no resourceVersion: as selectors
            // see it on the slow path only after it is added, and no field
            // selector reads it.
            let raw = place(&self.top.members, f)
                .ok()
                .map(|i| self.top.members[i].value);
            if let Some(v) = raw.and_then(|r| serde_json::from_slice::<Value>(r).ok()) {
                partial.insert(f.to_owned(), v);
            }
        }
        sel.fields.matches(&Value::Object(partial))
    }
}

/// The stored object as an answer at `rev` when `sel` selects it (`None`
/// when it does not); `Err` when the stored bytes are not JSON.
pub fn render(stored: &[u8], rev: i64, sel: &Selectors) -> Result<Option<Vec<u8>>, String> {
    if let Some(split) = Split::parse(stored) {
        if !split.selected_by(sel) {
            return Ok(None);
        }
        if let Some(bytes) = split.render(rev) {
            return Ok(Some(bytes));
        }
    }
    render_decoded(stored, rev, sel)
}

/// Whether `sel` selects the stored object (unreadable bytes select
/// nothing), without writing it out.
pub fn selects(stored: &[u8], sel: &Selectors) -> bool {
    if sel.is_empty() {
        return Split::parse(stored).is_some()
            || serde_json::from_slice::<serde::de::IgnoredAny>(stored).is_ok();
    }
    match Split::parse(stored) {
        Some(split) => split.selected_by(sel),
        None => serde_json::from_slice::<Value>(stored).is_ok_and(|v| sel.matches(&v)),
    }
}

/// The slow path: the whole object decoded, as every answer was made
/// before (kept for field selectors and anything `Split` refuses).
pub fn render_decoded(stored: &[u8], rev: i64, sel: &Selectors) -> Result<Option<Vec<u8>>, String> {
    let obj: Value = serde_json::from_slice(stored).map_err(|e| e.to_string())?;
    let obj = meta::with_resource_version(obj, rev);
    if !sel.matches(&obj) {
        return Ok(None);
    }
    serde_json::to_vec(&obj)
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::{FieldSelector, LabelSelector};
    use serde_json::json;

    fn sel(labels: &str, fields: &str) -> Selectors {
        Selectors {
            labels: LabelSelector::parse(labels).expect("labels"),
            fields: FieldSelector::parse(fields).expect("fields"),
        }
    }

    /// Issue 9's cheap list: the fast path answers byte for byte what the
    /// decode-and-encode path answers, for what the API server stores and
    /// for every label selector; it selects the same objects.
    #[test]
    fn the_fast_path_gives_the_same_bytes_as_decoding() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p1", "namespace": "default", "uid": "u",
                                "labels": {"app": "web", "tier": "a"}, "generation": 1,
                                "annotations": {"x": "\"quoted\" \u{e9}\\ \n"}},
                   "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]},
                   "status": {"phase": "Running", "ratio": 0.25}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p2", "labels": {"app": "db", "n": 3}},
                   "spec": {}}),
            json!({"kind": "Namespace", "metadata": {"name": "ns"}}),
            json!({"kind": "Odd"}),
            json!({"kind": "Odd", "metadata": null}),
            json!([1, 2]),
        ];
        let selectors = [
            sel("", ""),
            sel("app=web", ""),
            sel("app!=web,tier", ""),
            sel("app in (web,db),!missing", ""),
            sel("n", ""),
            sel("", "spec.nodeName=n1"),
            sel("", "metadata.name=p1,metadata.namespace=default"),
            sel("app=web", "status.phase!=Running"),
            sel("", "metadata.name!=p2"),
        ];
        for o in &objects {
            let stored = serde_json::to_vec(o).expect("encode");
            for s in &selectors {
                let slow = render_decoded(&stored, 42, s);
                assert_eq!(render(&stored, 42, s), slow, "{o} with {:?}", s.labels);
                let selected = slow.as_ref().is_ok_and(Option::is_some);
                assert_eq!(selects(&stored, s), selected, "{o} with {:?}", s.fields);
            }
        }
        let stored = serde_json::to_vec(&objects[0]).expect("encode");
        assert!(render(&stored, 7, &sel("", "spec.nodeName=n1"))
            .expect("ok")
            .is_some());
        assert!(render(b"not json", 1, &sel("", "")).is_err());
    }

    /// The splice against the decoding path over many shapes of object:
    /// metadata members before and after `resourceVersion` (and one
    /// already there), empty and missing metadata, top-level keys on both
    /// sides of `metadata`, values with brackets and quotes in strings.
    #[test]
    fn the_splice_matches_decoding_for_generated_objects() {
        let meta_keys = [
            "annotations",
            "creationTimestamp",
            "labels",
            "name",
            "namespace",
            "resourceVersion",
            "uid",
            "zz",
        ];
        let top_keys = [
            "apiVersion",
            "data",
            "kind",
            "metadata",
            "spec",
            "status",
            "zzz",
        ];
        let values = [
            json!("x"),
            json!("a\"}]{[,"),
            json!(1),
            json!(-2.5),
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!({"app": "web", "n": 1}),
            json!([{"a": [1, {"b": "]"}]}]),
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n
        };
        let selectors = [sel("", ""), sel("app=web", ""), sel("", "metadata.name=x")];
        let mut spliced = 0;
        for _ in 0..2000 {
            let mut top = serde_json::Map::new();
            for k in top_keys {
                if next(3) == 0 {
                    continue;
                }
                let v = if k == "metadata" && next(5) != 0 {
                    let mut m = serde_json::Map::new();
                    for mk in meta_keys {
                        if next(2) == 0 {
                            m.insert(mk.into(), values[next(values.len())].clone());
                        }
                    }
                    Value::Object(m)
                } else {
                    values[next(values.len())].clone()
                };
                top.insert(k.into(), v);
            }
            let stored = serde_json::to_vec(&Value::Object(top)).expect("encode");
            spliced += usize::from(Split::parse(&stored).is_some());
            for s in &selectors {
                assert_eq!(
                    render(&stored, 77, s),
                    render_decoded(&stored, 77, s),
                    "{}",
                    String::from_utf8_lossy(&stored)
                );
            }
        }
        // Most shapes are spliced, not decoded (the rest have a metadata
        // that is not an object).
        assert!(spliced > 1500, "{spliced}");
    }

    #[test]
    fn the_revision_is_written_into_the_metadata() {
        let stored = br#"{"kind":"Pod","metadata":{"name":"p"},"spec":{}}"#;
        let out = render(stored, 9, &sel("", ""))
            .expect("ok")
            .expect("selected");
        assert_eq!(
            out,
            br#"{"kind":"Pod","metadata":{"name":"p","resourceVersion":"9"},"spec":{}}"#
        );
    }
}
