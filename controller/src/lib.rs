//! The Sluice controller: a small Kubernetes that the real `kubectl` talks
//! to. `init` makes the cluster's credentials; `serve` runs the API server
//! (`sluice-apiserver`) over HTTPS and, while it leads, the decision loops
//! and the node providers.

/// The API server, its own crate; here under the name the controller's
/// modules, tests and benches use.
pub use sluice_apiserver as api;
pub use sluice_apiserver::{clock, identity};
pub mod bootstrap;
pub mod init;
pub mod kubeconfig;
pub mod leader;
pub mod loops;
pub mod pending;
pub mod pki;
pub mod prefixed;
pub mod providers;
pub mod serve;
