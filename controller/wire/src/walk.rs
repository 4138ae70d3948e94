//! A message's bytes → the JSON object the Kubernetes API writes for it.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::{Problem, WireError};
use crate::reader::{Reader, Value as Wire};
use crate::schema::{self, Card, Field, Kind};
use crate::special;

/// How many messages deep the walk follows. Real objects nest about 15
/// deep (a Deployment's pod affinity terms); the bound keeps crafted input
/// from recursing without end.
pub(crate) const MAX_DEPTH: usize = 100;

/// The message `index` read from `bytes`, `depth` messages down.
pub(crate) fn message(
    index: usize,
    bytes: &[u8],
    depth: usize,
) -> Result<Map<String, Value>, WireError> {
    let mut out = Map::new();
    fill(index, bytes, depth, &mut out)?;
    Ok(out)
}

/// Adds the fields of message `index` in `bytes` to `out`. Fields the
/// schema does not know (newer than it, or from another message) are
/// skipped, as protobuf readers do.
fn fill(
    index: usize,
    bytes: &[u8],
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), WireError> {
    if depth > MAX_DEPTH {
        return Err(Problem::TooDeep { limit: MAX_DEPTH }.into());
    }
    let msg = schema::message(index);
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let Some(field) = msg.field(tag) else {
            continue;
        };
        match field.card {
            Card::Single => single(field, value, depth, out),
            Card::Repeated => repeated(field, value, depth, out),
            Card::Map => map_entry(field, value, depth, out),
            // An embedded Go struct: its fields are this object's.
            Card::Inline => match field.kind {
                Kind::Message(i) => len(value).and_then(|b| fill(i, b, depth + 1, out)),
                _ => Ok(()),
            },
        }?;
    }
    Ok(())
}

fn single(
    field: &Field,
    value: Wire<'_>,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), WireError> {
    let converted = convert(field.kind, value, depth).map_err(|e| e.within(field.json))?;
    match converted {
        // gogo-protobuf writes a Go field that is not a pointer even when
        // it holds its zero value; `omitempty` drops it from the JSON.
        Some(v) if !field.keep_zero && is_zero_scalar(&v, field.kind) => {
            out.remove(field.json);
        }
        Some(v) => match out.get_mut(field.json) {
            // A message field seen twice merges, as protobuf says.
            Some(old) => merge(old, v),
            None => {
                out.insert(field.json.to_owned(), v);
            }
        },
        None => {
            out.remove(field.json);
        }
    }
    Ok(())
}

fn repeated(
    field: &Field,
    value: Wire<'_>,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), WireError> {
    // Elements already there (repeated fields may arrive in pieces), so
    // an error names the element by its place in the whole array.
    let before = out
        .get(field.json)
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let at = |i: usize| format!("{}[{}]", field.json, before + i);
    let mut items = Vec::new();
    match (field.kind, value) {
        // Packed numbers: one length-delimited run of varints.
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Wire::Len(bytes)) => {
            let mut reader = Reader::new(bytes);
            while let Some(v) = reader
                .packed_varint()
                .map_err(|p| WireError::from(p).within(&at(items.len())))?
            {
                items.push(varint_value(field.kind, v));
            }
        }
        // Packed doubles: a run of 8-byte values.
        (Kind::Double, Wire::Len(bytes)) => {
            let mut chunks = bytes.chunks_exact(8);
            for chunk in chunks.by_ref() {
                let bits = <[u8; 8]>::try_from(chunk).map_or(0, u64::from_le_bytes);
                let v = double(bits).map_err(|p| WireError::from(p).within(&at(items.len())))?;
                items.push(v);
            }
            if !chunks.remainder().is_empty() {
                let problem = Problem::Truncated {
                    offset: bytes.len() - chunks.remainder().len(),
                    needed: 8,
                    available: chunks.remainder().len(),
                };
                return Err(WireError::from(problem).within(&at(items.len())));
            }
        }
        (kind, value) => {
            let v = convert(kind, value, depth).map_err(|e| e.within(&at(0)))?;
            items.push(v.unwrap_or(Value::Null));
        }
    }
    if items.is_empty() {
        return Ok(());
    }
    let slot = out
        .entry(field.json.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    match slot {
        Value::Array(list) => list.extend(items),
        other => *other = Value::Array(items),
    }
    Ok(())
}

/// One protobuf map entry (`key = 1`, `value = 2`) into the JSON object.
fn map_entry(
    field: &Field,
    value: Wire<'_>,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), WireError> {
    let entry = len(value).map_err(|e| e.within(field.json))?;
    let mut key = "";
    let mut val = Wire::Len(&[]);
    let mut reader = Reader::new(entry);
    while let Some((tag, v)) = reader
        .next_field()
        .map_err(|p| WireError::from(p).within(field.json))?
    {
        match tag {
            1 => {
                key = len(v)
                    .and_then(|b| std::str::from_utf8(b).map_err(|_| Problem::InvalidUtf8.into()))
                    .map_err(|e| e.within(field.json))?;
            }
            2 => val = v,
            _ => {}
        }
    }
    let segment = || format!("{}[{key:?}]", field.json);
    let converted = convert(field.kind, val, depth).map_err(|e| e.within(&segment()))?;
    let slot = out
        .entry(field.json.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(map) = slot {
        map.insert(key.to_owned(), converted.unwrap_or(Value::Null));
    }
    Ok(())
}

/// One value of schema kind `kind`; `None` when Go's JSON would write
/// null (the zero Time, an empty RawExtension), which the API omits.
fn convert(kind: Kind, value: Wire<'_>, depth: usize) -> Result<Option<Value>, WireError> {
    let v = match (kind, value) {
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Wire::Varint(v)) => varint_value(kind, v),
        (Kind::Double, Wire::Fixed64(bits)) => double(bits)?,
        (Kind::String, Wire::Len(b)) => Value::String(utf8(b)?.to_owned()),
        (Kind::Bytes, Wire::Len(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Kind::Message(i), Wire::Len(b)) => Value::Object(message(i, b, depth + 1)?),
        (Kind::Quantity, Wire::Len(b)) => special::quantity(b)?,
        (Kind::IntOrString, Wire::Len(b)) => special::int_or_string(b)?,
        (Kind::Duration, Wire::Len(b)) => special::duration(b)?,
        (Kind::Time, Wire::Len(b)) => return Ok(special::time(b)?),
        (Kind::MicroTime, Wire::Len(b)) => return Ok(special::micro_time(b)?),
        (Kind::RawJson, Wire::Len(b)) => match special::raw_json(b)? {
            Some(raw) => embedded(raw, depth)?,
            None => return Ok(None),
        },
        (kind, value) => {
            return Err(Problem::WrongWireType {
                got: value.wire_type().number(),
                expected: expected(kind),
            }
            .into())
        }
    };
    Ok(Some(v))
}

/// A RawExtension's bytes: JSON as a rule; a nested protobuf object (with
/// the `k8s\0` magic) when a protobuf client embedded one.
fn embedded(raw: &[u8], depth: usize) -> Result<Value, WireError> {
    if raw.starts_with(crate::envelope::MAGIC) {
        if depth >= MAX_DEPTH {
            return Err(Problem::TooDeep { limit: MAX_DEPTH }.into());
        }
        return crate::envelope::decode(raw, depth + 1);
    }
    serde_json::from_slice(raw).map_err(|e| Problem::NotJson(e.to_string()).into())
}

fn varint_value(kind: Kind, v: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(v != 0),
        // int32 is sign-extended to 64 bits on the wire; the low 32 bits
        // are the value.
        Kind::Int32 => Value::from(v as i32),
        _ => Value::from(v as i64),
    }
}

fn double(bits: u64) -> Result<Value, Problem> {
    let f = f64::from_bits(bits);
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or(Problem::NotFinite(f))
}

fn utf8(bytes: &[u8]) -> Result<&str, Problem> {
    std::str::from_utf8(bytes).map_err(|_| Problem::InvalidUtf8)
}

/// The bytes of a length-delimited field; any other wire type is refused.
pub(crate) fn len<'a>(value: Wire<'a>) -> Result<&'a [u8], WireError> {
    match value {
        Wire::Len(b) => Ok(b),
        other => Err(Problem::WrongWireType {
            got: other.wire_type().number(),
            expected: "length-delimited (2)",
        }
        .into()),
    }
}

fn expected(kind: Kind) -> &'static str {
    match kind {
        Kind::Int32 | Kind::Int64 | Kind::Bool => "varint (0)",
        Kind::Double => "fixed64 (1)",
        _ => "length-delimited (2)",
    }
}

/// The zero value of a scalar, which `omitempty` leaves out.
fn is_zero_scalar(v: &Value, kind: Kind) -> bool {
    match kind {
        Kind::String | Kind::Bytes => v.as_str() == Some(""),
        Kind::Bool => v == &Value::Bool(false),
        Kind::Int32 | Kind::Int64 => v.as_i64() == Some(0),
        Kind::Double => v.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Protobuf's merge of a field seen twice: objects merge key by key,
/// arrays append, anything else is replaced.
fn merge(old: &mut Value, new: Value) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => a.extend(b),
        (slot, v) => *slot = v,
    }
}
