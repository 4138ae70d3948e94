//! Input the scheduler cannot read: a quantity, a selector or an operator
//! that does not parse. The API server validates these upstream; Sluice
//! reports them instead of panicking, naming the object and the field.

/// One unreadable field of a Pod or a Node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct InputError {
    /// `pod default/web-0` or `node n1`.
    pub object: String,
    /// The field path as a manifest spells it, e.g.
    /// `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl InputError {
    pub(crate) fn new(object: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            object: object.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }
}
