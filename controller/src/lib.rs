//! The Sluice controller: a small Kubernetes that the real `kubectl` talks
//! to (issue 9 and on). Today: `init` (the cluster's credentials) and
//! `serve` (HTTPS, bearer tokens, discovery).

pub mod api;
pub mod bootstrap;
pub mod clock;
pub mod identity;
pub mod init;
pub mod kubeconfig;
pub mod leader;
pub mod loops;
pub mod pending;
pub mod pki;
pub mod prefixed;
pub mod providers;
pub mod serve;
