//! Node providers that need the controller itself (its authenticator, its
//! credentials), rather than only `sluice_nodepools`' trait.
//!
//! - [`netns`]: the lab's nodes, network namespaces running real agents.

pub mod netns;
