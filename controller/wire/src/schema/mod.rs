//! The messages the decoder knows: field numbers, types and JSON names.
//!
//! The tables themselves are generated (`generated.rs`, by
//! `tools/gen_schema.py`); this module holds their shape and the lookups.

mod generated;

#[cfg(test)]
mod against_openapi;

/// One protobuf message of the Kubernetes API.
#[derive(Debug)]
pub(crate) struct Message {
    /// The protobuf name (`k8s.io.api.apps.v1.Deployment`): for tests and
    /// `Debug`, never for decoding.
    #[allow(dead_code)]
    pub(crate) name: &'static str,
    /// Sorted by tag.
    pub(crate) fields: &'static [Field],
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) tag: u32,
    /// The name in the Kubernetes JSON API (`podIP`, `clusterIPs`).
    pub(crate) json: &'static str,
    pub(crate) kind: Kind,
    pub(crate) card: Card,
    /// Emit the field even when it holds 0/false: a Go pointer field whose
    /// zero value means something (see `tools/gen_schema.py`).
    pub(crate) keep_zero: bool,
}

/// What a field (or a map's value) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    /// No kind served today has one (HPA v2 metrics would); kept so the
    /// generator can add kinds without touching the walker.
    #[allow(dead_code)]
    Double,
    /// Another message: an index into the message table.
    Message(usize),
    /// `resource.Quantity`: its string form.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `meta.v1.Time`: RFC 3339 to the second.
    Time,
    /// `meta.v1.MicroTime`: RFC 3339 to the microsecond.
    MicroTime,
    /// `meta.v1.Duration`: Go's duration string (no served kind has one
    /// yet; as for `Double`).
    #[allow(dead_code)]
    Duration,
    /// `runtime.RawExtension`, `meta.v1.FieldsV1`: JSON bytes, embedded.
    RawJson,
}

/// How many values a field holds and how they are written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Card {
    /// One value; the last one on the wire wins (messages merge).
    Single,
    /// A JSON array.
    Repeated,
    /// A JSON object keyed by string (protobuf map entries: 1 key, 2 value).
    Map,
    /// A Go struct embedded `json:",inline"`: its fields join the parent's.
    Inline,
}

/// The message for a top-level `apiVersion` and `kind`, if known.
pub(crate) fn kind(api_version: &str, kind: &str) -> Option<usize> {
    // DeleteOptions is sent under whichever group's version the client
    // deletes in, and is the same message in all of them.
    if kind == "DeleteOptions" {
        return generated::KINDS
            .iter()
            .find(|(_, k, _)| *k == "DeleteOptions")
            .map(|(_, _, i)| *i);
    }
    generated::KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, i)| *i)
}

/// The message at `index`; indexes come only from the generated tables.
pub(crate) fn message(index: usize) -> &'static Message {
    // The generator writes only indexes it has written a message for; the
    // unit test below checks that, so this never falls back in practice.
    generated::MESSAGES.get(index).unwrap_or(&EMPTY)
}

static EMPTY: Message = Message {
    name: "(none)",
    fields: &[],
};

impl Message {
    /// The field with protobuf number `tag`, if the schema has it.
    pub(crate) fn field(&self, tag: u32) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        fields
            .binary_search_by_key(&tag, |f| f.tag)
            .ok()
            .and_then(|i| fields.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_names_a_message_and_fields_are_sorted() {
        let n = generated::MESSAGES.len();
        for m in generated::MESSAGES {
            assert!(
                m.fields.windows(2).all(|w| w[0].tag < w[1].tag),
                "{}",
                m.name
            );
            for f in m.fields {
                if let Kind::Message(i) = f.kind {
                    assert!(i < n, "{}.{} -> {i}", m.name, f.json);
                }
            }
        }
        for (_, _, i) in generated::KINDS {
            assert!(*i < n);
        }
    }

    #[test]
    fn finds_kinds_by_api_version() {
        let d = kind("apps/v1", "Deployment").map(|i| message(i).name);
        assert_eq!(d, Some("k8s.io.api.apps.v1.Deployment"));
        assert_eq!(kind("apps/v1", "Pod"), None);
        assert!(kind("policy/v1", "DeleteOptions").is_some());
    }

    #[test]
    fn json_names_keep_their_acronyms() {
        let spec = kind("v1", "Service")
            .and_then(|i| message(i).field(2))
            .map(|f| f.kind);
        let Some(Kind::Message(spec)) = spec else {
            panic!("Service.spec is not a message: {spec:?}");
        };
        let names: Vec<_> = message(spec).fields.iter().map(|f| f.json).collect();
        assert!(names.contains(&"clusterIP"), "{names:?}");
        assert!(names.contains(&"clusterIPs"), "{names:?}");
        assert!(names.contains(&"externalIPs"), "{names:?}");
    }
}
