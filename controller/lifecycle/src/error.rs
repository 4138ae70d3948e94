//! Errors of the decisions: each names the object and the field that is
//! wrong, so the controller can report it on the object's events.

/// An input the decisions cannot act on, or an allocation that cannot be
/// made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// A required field is absent (`metadata.name` of a Service, say).
    #[error("{kind} {object}: {field}: missing")]
    Missing {
        kind: &'static str,
        object: String,
        field: &'static str,
    },
    /// A field holds a value the decision does not know.
    #[error("{kind} {object}: {field}: {message}")]
    Invalid {
        kind: &'static str,
        object: String,
        field: String,
        message: String,
    },
    /// A flag of the controller's configuration cannot be used.
    #[error("{flag}: {message}")]
    Config { flag: &'static str, message: String },
    /// Every node block of a cluster CIDR is taken.
    #[error("no pod CIDR left: every /{mask} of {cidr} is in use")]
    CidrExhausted { cidr: String, mask: u8 },
}
