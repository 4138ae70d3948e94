//! Desired state: what this node should run, from Kubernetes manifests.

pub mod advertised;
pub mod api;
pub mod limits;
pub mod model;
mod services;
pub mod source;
pub mod typed;
pub mod validate;
pub mod watch;

pub use model::*;
pub use validate::{parse_state, StateError};
