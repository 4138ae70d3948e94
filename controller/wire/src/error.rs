//! What can be wrong with a body, named so the server can answer with it.

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// The body does not start with the 4 bytes `k8s\0` that every
    /// Kubernetes protobuf body starts with.
    #[error("not a Kubernetes protobuf body: it does not start with the magic bytes k8s\\0")]
    BadMagic,
    /// The envelope names no apiVersion or no kind.
    #[error("the body's typeMeta names no {0}")]
    MissingTypeMeta(&'static str),
    /// The envelope names a kind this decoder has no schema for (the server
    /// answers 415 Unsupported Media Type).
    #[error("no protobuf schema for apiVersion {api_version:?} kind {kind:?}")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope says the object is compressed or otherwise encoded.
    #[error("unsupported contentEncoding {0:?} (only the identity encoding is read)")]
    ContentEncoding(String),
    /// The envelope says the object is in a content type other than protobuf.
    #[error("unsupported contentType {0:?} inside the protobuf envelope")]
    ContentType(String),
    /// The bytes are not the message they should be; `path` says where
    /// (JSON field names from the top, `[3]` for an element).
    #[error("malformed protobuf at {path}: {problem}")]
    Malformed {
        /// Where in the object: `spec.template.spec.containers[0].image`.
        path: String,
        /// What is wrong there.
        problem: Problem,
    },
}

/// What is wrong at one place in a message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    /// A length or fixed-width value runs past the end of its message.
    #[error("{needed} bytes needed at offset {offset}, {available} left")]
    Truncated {
        /// Offset within the enclosing message.
        offset: usize,
        /// What the field or its length prefix asked for.
        needed: u64,
        /// What was left.
        available: usize,
    },
    /// A varint longer than 10 bytes, or one that overflows 64 bits.
    #[error("malformed varint at offset {offset}")]
    BadVarint {
        /// Offset within the enclosing message.
        offset: usize,
    },
    /// Field number 0, or one beyond protobuf's 2^29 - 1.
    #[error("invalid field number {number} at offset {offset}")]
    BadFieldNumber {
        /// The number read.
        number: u64,
        /// Offset within the enclosing message.
        offset: usize,
    },
    /// A wire type protobuf does not have, or groups (3, 4), which no
    /// Kubernetes message uses.
    #[error("unsupported wire type {wire_type} at offset {offset}")]
    BadWireType {
        /// The wire type read.
        wire_type: u8,
        /// Offset within the enclosing message.
        offset: usize,
    },
    /// A known field sent with a wire type its schema type never has.
    #[error("wire type {got} where the schema says {expected}")]
    WrongWireType {
        /// The wire type read.
        got: u8,
        /// What the schema's type is encoded as.
        expected: &'static str,
    },
    /// Messages nested deeper than the decoder follows.
    #[error("messages nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// A string field that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A RawExtension or FieldsV1 whose bytes are not JSON.
    #[error("embedded object is not JSON: {0}")]
    NotJson(String),
    /// A time outside the years 0 to 9999 that RFC 3339 can write.
    #[error("time {seconds}s from the Unix epoch is outside RFC 3339's years 0 to 9999")]
    TimeOutOfRange {
        /// Seconds since the Unix epoch.
        seconds: i64,
    },
    /// An IntOrString whose `type` is neither 0 (int) nor 1 (string).
    #[error("IntOrString type {0} is neither 0 (int) nor 1 (string)")]
    BadIntOrString(i64),
    /// A double that JSON cannot hold (NaN, infinity).
    #[error("number {0} is not finite")]
    NotFinite(f64),
}

impl WireError {
    /// Whether the body is well-formed but in a form this decoder does not
    /// read (a kind it has no schema for, a compressed object): the server
    /// answers 415 Unsupported Media Type, and 400 Bad Request otherwise.
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            WireError::UnknownKind { .. }
                | WireError::ContentEncoding(_)
                | WireError::ContentType(_)
        )
    }

    /// A problem at the top of the object.
    pub(crate) fn at_top(problem: Problem) -> Self {
        WireError::Malformed {
            path: String::new(),
            problem,
        }
    }

    /// The same error with `segment` prepended to its path, as it bubbles
    /// up out of a field. Built only on the error path, so the happy path
    /// allocates no path strings.
    pub(crate) fn within(self, segment: &str) -> Self {
        match self {
            WireError::Malformed { path, problem } => {
                let path = match (path.is_empty(), path.starts_with('[')) {
                    (true, _) => segment.to_owned(),
                    (false, true) => format!("{segment}{path}"),
                    (false, false) => format!("{segment}.{path}"),
                };
                WireError::Malformed { path, problem }
            }
            other => other,
        }
    }
}

impl From<Problem> for WireError {
    fn from(problem: Problem) -> Self {
        WireError::at_top(problem)
    }
}
