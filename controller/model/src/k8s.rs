//! The upstream Kubernetes types Sluice serves, re-exported from
//! `k8s-openapi` (one version feature for the whole workspace, chosen in the
//! root `Cargo.toml`).

pub use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
pub use k8s_openapi::api::coordination::v1::Lease;
pub use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
pub use k8s_openapi::api::discovery::v1::EndpointSlice;
pub use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, ListMeta, MicroTime, ObjectMeta, OwnerReference, Status, Time,
};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
pub use k8s_openapi::jiff;
pub use k8s_openapi::{
    ClusterResourceScope, ListableResource, Metadata, NamespaceResourceScope, Resource,
};

/// `events.k8s.io/v1` Events (what `kubectl events` reads); [`Event`] is the
/// core `v1` one that `kubectl describe` lists.
pub mod events_v1 {
    pub use k8s_openapi::api::events::v1::Event;
}
