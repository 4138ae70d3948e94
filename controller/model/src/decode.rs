//! Decoding a request body into a typed object, naming the field that does
//! not fit: a mistyped value (`spec.initialNodeCount: invalid type: string
//! "three", expected i32`) or, when strict, a field the type does not have
//! (`spec.upgradeSettings.maxSurges`). The three modes are kube-apiserver's
//! `fieldValidation` values.

use serde::{Deserialize, Deserializer};

use crate::kind::SluiceKind;

/// What to do with fields the type does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Refuse the object (kubectl sends this by default).
    Strict,
    /// Drop them and report them, for the response's `Warning` headers.
    Warn,
    /// Drop them silently.
    Ignore,
}

/// A decoded value and the unknown fields that were dropped (never any
/// under [`FieldValidation::Strict`]).
#[derive(Debug)]
pub struct Decoded<T> {
    pub value: T,
    /// Their paths as kube-apiserver writes them, to warn about (none
    /// under [`FieldValidation::Ignore`]).
    pub unknown_fields: Vec<String>,
    /// Their paths step by step, under `Warn` and `Ignore` alike: what
    /// [`remove_unknown`] takes out of the document that was decoded.
    pub unknown_paths: Vec<Vec<Step>>,
}

/// One step of a path into a JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Take the fields at `paths` out of `doc` (the document a [`decode`]
/// reported them in), so that what is kept is what the type holds, as
/// kube-apiserver keeps only what its typed decoding read. Paths that do
/// not lead anywhere are passed over; nothing else changes.
pub fn remove_unknown(doc: &mut serde_json::Value, paths: &[Vec<Step>]) {
    for path in paths {
        let Some((Step::Key(last), parents)) = path.split_last() else {
            continue;
        };
        let parent = parents.iter().try_fold(&mut *doc, |at, step| match step {
            Step::Key(k) => at.get_mut(k.as_str()),
            Step::Index(i) => at.get_mut(*i),
        });
        if let Some(m) = parent.and_then(serde_json::Value::as_object_mut) {
            m.remove(last.as_str());
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// Not valid JSON/YAML, or a value of the wrong type.
    Malformed,
    /// A field the kind does not have (strict only).
    UnknownField,
    /// `apiVersion` or `kind` is not the one expected.
    WrongKind,
}

/// Where decoding failed and why; `field` is empty when the fault is the
/// document as a whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct DecodeError {
    pub field: String,
    pub kind: DecodeErrorKind,
    pub message: String,
}

/// Decode any `T` from `de` under `mode`.
pub fn decode<'de, T, D>(de: D, mode: FieldValidation) -> Result<Decoded<T>, DecodeError>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let mut unknown = Vec::new();
    let mut paths = Vec::new();
    let value = {
        let mut note = |path: serde_ignored::Path<'_>| {
            unknown.push(render(&path));
            let mut steps = Vec::new();
            steps_of(&path, &mut steps);
            paths.push(steps);
        };
        let de = serde_ignored::Deserializer::new(de, &mut note);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            DecodeError {
                // serde_path_to_error writes "." for the document itself.
                field: if field == "." { String::new() } else { field },
                kind: DecodeErrorKind::Malformed,
                message: e.into_inner().to_string(),
            }
        })?
    };
    if mode == FieldValidation::Strict {
        if let Some(first) = unknown.first() {
            let all = unknown.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>();
            return Err(DecodeError {
                field: first.clone(),
                kind: DecodeErrorKind::UnknownField,
                message: format!(
                    "strict decoding error: unknown field {}",
                    all.join(", unknown field ")
                ),
            });
        }
    }
    if mode == FieldValidation::Ignore {
        unknown.clear();
    }
    Ok(Decoded {
        value,
        unknown_fields: unknown,
        unknown_paths: paths,
    })
}

/// The steps of `path`, root first.
fn steps_of(path: &serde_ignored::Path<'_>, out: &mut Vec<Step>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            steps_of(parent, out);
            out.push(Step::Index(*index));
        }
        Path::Map { parent, key } => {
            steps_of(parent, out);
            out.push(Step::Key(key.clone()));
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => steps_of(parent, out),
    }
}

/// Decode a `sluice.dev/v1` object and check that it says what it is.
pub fn decode_object<'de, K, D>(de: D, mode: FieldValidation) -> Result<Decoded<K>, DecodeError>
where
    K: SluiceKind,
    D: Deserializer<'de>,
{
    let decoded: Decoded<K> = decode(de, mode)?;
    let (api_version, kind) = decoded.value.type_meta();
    for (field, got, want) in [
        ("apiVersion", api_version, K::API_VERSION),
        ("kind", kind, K::KIND),
    ] {
        if got != want {
            return Err(DecodeError {
                field: field.to_string(),
                kind: DecodeErrorKind::WrongKind,
                message: format!("expected {want:?}, got {got:?}"),
            });
        }
    }
    Ok(decoded)
}

/// A JSON body, strictly: what `kubectl apply` sends with
/// `fieldValidation=Strict`.
pub fn from_json_strict<K: SluiceKind>(body: &[u8]) -> Result<K, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let decoded = decode_object(&mut de, FieldValidation::Strict)?;
    // Trailing bytes after the object are as malformed as a bad object.
    de.end().map_err(|e| DecodeError {
        field: String::new(),
        kind: DecodeErrorKind::Malformed,
        message: e.to_string(),
    })?;
    Ok(decoded.value)
}

/// `spec.config.labels`, `spec.locations[2]`; kube-apiserver's spelling.
fn render(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", render(parent)),
        Path::Map { parent, key } => match render(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => render(parent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        #[serde(default)]
        items: Vec<Inner>,
        #[serde(default)]
        labels: std::collections::BTreeMap<String, String>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        port: i64,
    }

    #[test]
    fn unknown_fields_are_removed_and_nothing_else() {
        let mut doc = json!({"name": "n", "colour": "red", "a.b": 1,
            "items": [{"port": 1}, {"port": 2, "nodePorte": 3}],
            "labels": {"colour": "blue", "x.y/z": "w"}});
        for mode in [FieldValidation::Warn, FieldValidation::Ignore] {
            let d = decode::<Outer, _>(doc.clone(), mode).expect("decodes");
            assert_eq!(d.unknown_paths.len(), 3, "{mode:?}");
            let mut kept = doc.clone();
            remove_unknown(&mut kept, &d.unknown_paths);
            assert_eq!(
                kept,
                json!({"name": "n", "items": [{"port": 1}, {"port": 2}],
                    "labels": {"colour": "blue", "x.y/z": "w"}})
            );
        }
        let d = decode::<Outer, _>(doc.clone(), FieldValidation::Ignore).expect("decodes");
        assert!(d.unknown_fields.is_empty());
        // A path that leads nowhere changes nothing.
        let before = doc.clone();
        remove_unknown(
            &mut doc,
            &[vec![
                Step::Key("items".into()),
                Step::Index(9),
                Step::Key("x".into()),
            ]],
        );
        assert_eq!(doc, before);
    }
}
