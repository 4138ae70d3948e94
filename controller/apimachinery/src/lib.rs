//! The pure half of the API server: what kube-apiserver decides about a
//! request without reading or writing anything. It links neither an HTTP
//! stack nor a store, so the fuzz targets and unit tests drive exactly
//! what the server runs.
//!
//! - [`validation`]: each built-in kind's create and update validation,
//!   with upstream's field paths, error types and messages.

pub mod validation;
