//! The envelope every Kubernetes protobuf body comes in: the magic bytes,
//! then a `runtime.Unknown` naming the object's apiVersion and kind.

use serde_json::{Map, Value};

use crate::error::{Problem, WireError};
use crate::reader::Reader;
use crate::{schema, walk};

/// The four bytes before every Kubernetes protobuf body.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// The one content type an envelope may declare for its `raw` bytes.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What `runtime.Unknown` holds: `typeMeta = 1` {apiVersion = 1, kind = 2},
/// `raw = 2`, `contentEncoding = 3`, `contentType = 4`.
#[derive(Default)]
struct Unknown<'a> {
    api_version: &'a str,
    kind: &'a str,
    raw: &'a [u8],
    content_encoding: &'a str,
    content_type: &'a str,
}

/// A whole body (magic included) → the object's JSON, `depth` messages
/// down (0 at the top; more for objects embedded in RawExtensions).
pub(crate) fn decode(body: &[u8], depth: usize) -> Result<Value, WireError> {
    let rest = body.strip_prefix(MAGIC).ok_or(WireError::BadMagic)?;
    let unknown = unknown(rest)?;
    if !unknown.content_encoding.is_empty() {
        return Err(WireError::ContentEncoding(
            unknown.content_encoding.to_owned(),
        ));
    }
    if !unknown.content_type.is_empty() && unknown.content_type != PROTOBUF {
        return Err(WireError::ContentType(unknown.content_type.to_owned()));
    }
    if unknown.api_version.is_empty() {
        return Err(WireError::MissingTypeMeta("apiVersion"));
    }
    if unknown.kind.is_empty() {
        return Err(WireError::MissingTypeMeta("kind"));
    }
    let index =
        schema::kind(unknown.api_version, unknown.kind).ok_or_else(|| WireError::UnknownKind {
            api_version: unknown.api_version.to_owned(),
            kind: unknown.kind.to_owned(),
        })?;
    let mut object = Map::new();
    object.insert("apiVersion".into(), unknown.api_version.into());
    object.insert("kind".into(), unknown.kind.into());
    object.extend(walk::message(index, unknown.raw, depth)?);
    Ok(Value::Object(object))
}

fn unknown(bytes: &[u8]) -> Result<Unknown<'_>, WireError> {
    let mut out = Unknown::default();
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let segment = match tag {
            1 => "typeMeta",
            2 => "raw",
            3 => "contentEncoding",
            4 => "contentType",
            _ => continue,
        };
        let b = walk::len(value).map_err(|e| e.within(segment))?;
        match tag {
            1 => type_meta(b, &mut out).map_err(|e| e.within(segment))?,
            2 => out.raw = b,
            3 => out.content_encoding = utf8(b).map_err(|e| e.within(segment))?,
            _ => out.content_type = utf8(b).map_err(|e| e.within(segment))?,
        }
    }
    Ok(out)
}

fn type_meta<'a>(bytes: &'a [u8], out: &mut Unknown<'a>) -> Result<(), WireError> {
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let (slot, name) = match tag {
            1 => (&mut out.api_version, "apiVersion"),
            2 => (&mut out.kind, "kind"),
            _ => continue,
        };
        *slot = walk::len(value)
            .and_then(utf8)
            .map_err(|e| e.within(name))?;
    }
    Ok(())
}

fn utf8(bytes: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(bytes).map_err(|_| Problem::InvalidUtf8.into())
}
