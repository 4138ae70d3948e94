//! Desired state: what this node should run, from Kubernetes manifests.

pub mod manifests;
pub mod model;
pub mod source;
pub mod validate;

pub use model::*;
pub use validate::{parse_state, StateError};
