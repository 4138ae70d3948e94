//! Input the autoscaler cannot read. A malformed pod, node or pool never
//! stops a decision: it is reported (in the decision and the status) and
//! left out, naming the object and the field.

/// One unreadable object or field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct InputError {
    /// `pod default/web-0`, `node n1`, `nodepool pool-a`.
    pub object: String,
    /// The field path as a manifest spells it, or empty for the whole object.
    pub field: String,
    pub message: String,
}

impl InputError {
    pub fn new(
        object: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            object: object.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<sluice_scheduler::InputError> for InputError {
    fn from(e: sluice_scheduler::InputError) -> Self {
        InputError::new(e.object, e.field, e.message)
    }
}

/// Configuration the autoscaler refuses: the loop's flags or the priority
/// expander's ConfigMap, a pool's TPU topology. Admission runs the same
/// checks, so a stored object never fails here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "expander {0:?} is not one of random, most-pods, least-waste, least-nodes, price, priority"
    )]
    UnknownExpander(String),
    #[error("expander {0:?} is listed twice")]
    DuplicateExpander(String),
    #[error("expander {0:?} comes after random, which always picks one option")]
    AfterStrategy(String),
    #[error("the expander list is empty")]
    NoExpander,
    #[error("priorities: {0}")]
    Priorities(String),
    #[error("priorities: priority {priority}: {regex:?} is not a regular expression: {message}")]
    PriorityRegex {
        priority: i64,
        regex: String,
        message: String,
    },
    #[error("tpuTopology: {0}")]
    TpuTopology(String),
}
