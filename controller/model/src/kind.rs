//! What the three `sluice.dev/v1` kinds have in common: they are Kubernetes
//! objects (`apiVersion`, `kind`, `metadata`, `spec`, `status`), cluster
//! scoped, usable by kube-rs through `k8s-openapi`'s `Resource` and
//! `Metadata`, and each can validate itself.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::k8s::{ClusterResourceScope, ListableResource, Metadata, ObjectMeta, Resource};
use crate::validation::FieldErrors;

/// The API group of Sluice's own kinds.
pub const GROUP: &str = "sluice.dev";
/// Their one version.
pub const VERSION: &str = "v1";
/// `GROUP/VERSION`, the `apiVersion` they carry.
pub const API_VERSION: &str = "sluice.dev/v1";

/// A `sluice.dev/v1` kind.
pub trait SluiceKind:
    Resource<Scope = ClusterResourceScope>
    + ListableResource
    + Metadata<Ty = ObjectMeta>
    + Serialize
    + DeserializeOwned
    + JsonSchema
{
    /// The `apiVersion` and `kind` this value carries, which a decoder
    /// compares with [`Resource::API_VERSION`] and [`Resource::KIND`].
    fn type_meta(&self) -> (&str, &str);

    /// Every rule of [`crate::validation`] this object breaks.
    fn validate(&self) -> Result<(), FieldErrors>;
}

/// The trait impls of one kind, whose struct has the fields `api_version`,
/// `kind`, `metadata`, `spec` and `status`.
macro_rules! sluice_kind {
    ($ty:ident, $spec:ty, plural = $plural:literal, validate = $validate:path) => {
        impl $ty {
            /// A new object named `name` with `spec` and no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                $ty {
                    api_version: $crate::kind::API_VERSION.to_string(),
                    kind: stringify!($ty).to_string(),
                    metadata: $crate::k8s::ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }

        impl $crate::k8s::Resource for $ty {
            const API_VERSION: &'static str = $crate::kind::API_VERSION;
            const GROUP: &'static str = $crate::kind::GROUP;
            const KIND: &'static str = stringify!($ty);
            const VERSION: &'static str = $crate::kind::VERSION;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $crate::k8s::ClusterResourceScope;
        }

        impl $crate::k8s::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!(stringify!($ty), "List");
        }

        impl $crate::k8s::Metadata for $ty {
            type Ty = $crate::k8s::ObjectMeta;

            fn metadata(&self) -> &$crate::k8s::ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut $crate::k8s::ObjectMeta {
                &mut self.metadata
            }
        }

        impl $crate::kind::SluiceKind for $ty {
            fn type_meta(&self) -> (&str, &str) {
                (&self.api_version, &self.kind)
            }

            fn validate(&self) -> Result<(), $crate::validation::FieldErrors> {
                $validate(self)
            }
        }
    };
}

pub(crate) use sluice_kind;
