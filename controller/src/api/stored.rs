//! Stored objects turned into response bytes cheaply. Pure: no I/O.
//!
//! Objects are stored as compact JSON without a resourceVersion (the
//! store's revision is the truth). Answering with one used to decode the
//! whole object into a `serde_json::Value`, insert the revision and encode
//! it again: most of the time of a list of 100 000 Pods. Here only the top
//! level and `metadata` are split into keys and raw values (everything
//! else, the spec and status, is copied as the bytes it is), the revision
//! is added to `metadata`, and the keys are written back in order. Keys
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

/// The stored object as an answer at `rev` when `sel` selects it (`None`
/// when it does not); `Err` when the stored bytes are not JSON.
pub fn render(stored: &[u8], rev: i64, sel: &Selectors) -> Result<Option<Vec<u8>>, String> {
    // Field selectors read any field: they need the decoded object.
    if sel.fields.is_empty() {
        if let Some(split) = Split::parse(stored) {
            if !sel.labels.matches(&split.labels()) {
                return Ok(None);
            }
            if let Some(bytes) = split.render(rev) {
                return Ok(Some(bytes));
            }
        }
    }
    render_decoded(stored, rev, sel)
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
        ];
        for o in &objects {
            let stored = serde_json::to_vec(o).expect("encode");
            for s in &selectors {
                assert_eq!(
                    render(&stored, 42, s),
                    render_decoded(&stored, 42, s),
                    "{o} with {:?}",
                    s.labels
                );
            }
        }
        // Field selectors take the slow path: the same by construction.
        let stored = serde_json::to_vec(&objects[0]).expect("encode");
        let f = sel("", "spec.nodeName=n1");
        assert_eq!(render(&stored, 7, &f), render_decoded(&stored, 7, &f));
        assert!(render(&stored, 7, &f).expect("ok").is_some());
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
