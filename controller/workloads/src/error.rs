//! Why an object cannot be reconciled, naming the object and the field.

use sluice_model::policy::disruption::PolicyError;

/// A ReplicaSet or Deployment the controllers cannot act on. Each message
/// starts with the kind and `namespace/name`, then the field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("{kind} {object}: metadata.{field}: missing")]
    MissingMetadata {
        kind: &'static str,
        object: String,
        field: &'static str,
    },
    /// A `matchExpressions` entry that does not parse, or a bad
    /// `maxSurge` / `maxUnavailable`: the inner error names the field.
    #[error("{kind} {object}: {source}")]
    Invalid {
        kind: &'static str,
        object: String,
        source: PolicyError,
    },
    #[error("{kind} {object}: spec.selector: missing or empty, it would select every pod")]
    EmptySelector { kind: &'static str, object: String },
    #[error("{kind} {object}: spec.selector: does not match spec.template.metadata.labels")]
    SelectorMismatch { kind: &'static str, object: String },
    #[error("{kind} {object}: spec.replicas: must be >= 0, got {value}")]
    NegativeReplicas {
        kind: &'static str,
        object: String,
        value: i32,
    },
    #[error("Deployment {object}: spec.strategy.rollingUpdate.maxUnavailable: may not be 0 when maxSurge is 0")]
    NoRollingRoom { object: String },
    #[error("Deployment {object}: spec.strategy.type: {value:?} is not RollingUpdate or Recreate")]
    UnknownStrategy { object: String, value: String },
    #[error("{kind} {object}: spec.{field}: must be >= 0, got {value}")]
    Negative {
        kind: &'static str,
        object: String,
        field: &'static str,
        value: i32,
    },
    #[error("Deployment {object}: spec.progressDeadlineSeconds: {deadline} must be greater than minReadySeconds ({min_ready})")]
    DeadlineNotAfterMinReady {
        object: String,
        deadline: i32,
        min_ready: i32,
    },
    #[error("Deployment {object}: spec.strategy.rollingUpdate: may not be set when spec.strategy.type is Recreate")]
    RollingUpdateWithRecreate { object: String },
}

impl WorkloadError {
    /// The field path and what is wrong with it, apart (an API `Status`
    /// cause carries them separately). Every message is
    /// `<kind> <namespace/name>: <field>: <what>`.
    pub fn field_and_message(&self) -> (String, String) {
        let full = self.to_string();
        let mut parts = full.splitn(3, ": ");
        let _object = parts.next();
        match (parts.next(), parts.next()) {
            (Some(field), Some(message)) => (field.to_owned(), message.to_owned()),
            (Some(message), None) => (String::new(), message.to_owned()),
            _ => (String::new(), full.clone()),
        }
    }
}
