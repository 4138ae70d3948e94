//! Stored objects turned into response bytes cheaply. Pure: no I/O.
//!
//! Objects are stored as compact JSON without a resourceVersion (the
//! store's revision is the truth). Answering with one used to decode the
//! whole object into a `serde_json::Value`, insert the revision and encode
//! it again: most of the time of a list of 100 000 Pods. Here only the top
//! level and `metadata` are split into keys and raw values (everything
//! else, the spec and status, is copied as the bytes it is), the revision
//! is added to `metadata`, and the keys are written back in order; a
//! field selector decodes only the top-level fields it reads. Keys
//! are sorted as `serde_json`'s map sorts them, so the bytes are the same
//! as the slow path's for everything the API server stored (the tests
//! check it); whatever this cannot split (not an object) takes the slow
//! path.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use super::meta;
use super::objects::Selectors;

/// A stored object split at its top level and its metadata.
pub struct Split<'a> {
    top: BTreeMap<String, &'a RawValue>,
    meta: BTreeMap<String, &'a RawValue>,
}

impl<'a> Split<'a> {
    /// `None` when the bytes are not a JSON object with an object (or no)
    /// `metadata`.
    pub fn parse(stored: &'a [u8]) -> Option<Self> {
        let top: BTreeMap<String, &RawValue> = serde_json::from_slice(stored).ok()?;
        let meta = match top.get("metadata") {
            Some(m) => serde_json::from_str(m.get()).ok()?,
            None => BTreeMap::new(),
        };
        Some(Split { top, meta })
    }

    /// `metadata.labels`, the string values only (as the slow path reads
    /// them).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let Some(raw) = self.meta.get("labels") else {
            return BTreeMap::new();
        };
        serde_json::from_str::<BTreeMap<String, Value>>(raw.get())
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
        let rv = RawValue::from_string(format!("\"{rev}\"")).ok()?;
        let mut meta: BTreeMap<String, &RawValue> = self.meta;
        meta.insert("resourceVersion".into(), &rv);
        let meta_raw = RawValue::from_string(serde_json::to_string(&meta).ok()?).ok()?;
        let mut top: BTreeMap<String, &RawValue> = self.top;
        top.insert("metadata".into(), &meta_raw);
        serde_json::to_vec(&top).ok()
    }
}

impl Split<'_> {
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
            let raw = if f == "metadata" {
                // The metadata without the resourceVersion: as selectors
                // see it on the slow path only after it is added, and no
                // field selector reads it.
                serde_json::to_string(&self.meta).ok()
            } else {
                self.top.get(f).map(|r| r.get().to_owned())
            };
            if let Some(v) = raw.and_then(|r| serde_json::from_str::<Value>(&r).ok()) {
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
        return serde_json::from_slice::<&RawValue>(stored).is_ok();
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
    use crate::api::selector::{FieldSelector, LabelSelector};
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
