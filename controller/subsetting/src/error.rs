//! Why the nodes or Services handed to the subsetting decisions cannot be
//! used, naming the object and the field.

/// Input the decisions refuse rather than guess about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("Node: metadata.name: empty")]
    EmptyNodeName,
    /// A node without a zone cannot be placed in a per-zone group or NEG.
    #[error("Node {node}: metadata.labels[topology.kubernetes.io/zone]: missing or empty")]
    MissingZone { node: String },
    #[error("Node {node}: metadata.name: given twice")]
    DuplicateNode { node: String },
    #[error("Node {node}: not known")]
    UnknownNode { node: String },
    #[error("Service: metadata.{field}: empty")]
    EmptyServiceField { field: &'static str },
    #[error("Service {service}: given twice")]
    DuplicateService { service: String },
    #[error("Service {service}: not known")]
    UnknownService { service: String },
}
