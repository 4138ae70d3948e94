//! What the `sluice.dev/v1` kinds have in common: they are Kubernetes
//! objects (`apiVersion`, `kind`, `metadata`, `spec`, `status`), cluster
//! scoped or namespaced, usable by kube-rs through `k8s-openapi`'s
//! `Resource` and `Metadata` (so `Api::all` or `Api::namespaced` works as
//! for the built-in kinds), and each can validate itself.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::k8s::{ListableResource, Metadata, ObjectMeta, Resource};
use crate::validation::FieldErrors;

/// The API group of Sluice's own kinds.
pub const GROUP: &str = "sluice.dev";
/// Their one version.
pub const VERSION: &str = "v1";
/// `GROUP/VERSION`, the `apiVersion` they carry.
pub const API_VERSION: &str = "sluice.dev/v1";

/// A `sluice.dev/v1` kind, of either scope: `Resource::Scope` is
/// `ClusterResourceScope` or `NamespaceResourceScope`, and [`NAMESPACED`]
/// says which without naming the type (for tables and tests).
///
/// [`NAMESPACED`]: SluiceKind::NAMESPACED
pub trait SluiceKind:
    Resource + ListableResource + Metadata<Ty = ObjectMeta> + Serialize + DeserializeOwned + JsonSchema
{
    /// Whether objects of the kind live in a namespace.
    const NAMESPACED: bool;

    /// The `apiVersion` and `kind` this value carries, which a decoder
    /// compares with [`Resource::API_VERSION`] and [`Resource::KIND`].
    fn type_meta(&self) -> (&str, &str);

    /// Every rule of [`crate::validation`] this object breaks.
    fn validate(&self) -> Result<(), FieldErrors>;
}

/// One kind: the Kubernetes object envelope (`apiVersion`, `kind`,
/// `metadata`, `spec`, `status`) around its spec and status types, and the
/// trait impls that make it a [`SluiceKind`]. Written once here so the
/// kinds cannot drift apart in how they are encoded. `scope` is `Cluster`
/// or `Namespace` (`k8s-openapi`'s `ClusterResourceScope` or
/// `NamespaceResourceScope`).
macro_rules! sluice_kind {
    (
        $(#[$doc:meta])*
        $ty:ident {
            spec: $spec:ty,
            status: $status:ty,
            plural: $plural:literal,
            scope: $scope:ident,
            validate: $validate:path $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $ty {
            /// `sluice.dev/v1`.
            pub api_version: String,
            /// The kind's name.
            pub kind: String,
            /// May be left out of a request body, like kube-apiserver allows;
            /// the server then asks for `metadata.name` or `generateName`.
            #[serde(default)]
            #[schemars(schema_with = "crate::openapi::object_meta")]
            pub metadata: $crate::k8s::ObjectMeta,
            pub spec: $spec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$status>,
        }

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
            type Scope = $crate::kind::sluice_scope!($scope);
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
            const NAMESPACED: bool = $crate::kind::sluice_namespaced!($scope);

            fn type_meta(&self) -> (&str, &str) {
                (&self.api_version, &self.kind)
            }

            fn validate(&self) -> Result<(), $crate::validation::FieldErrors> {
                $validate(self)
            }
        }
    };
}

/// The `k8s-openapi` scope type of a `scope:` word.
macro_rules! sluice_scope {
    (Cluster) => {
        $crate::k8s::ClusterResourceScope
    };
    (Namespace) => {
        $crate::k8s::NamespaceResourceScope
    };
}

/// Whether a `scope:` word is namespaced.
macro_rules! sluice_namespaced {
    (Cluster) => {
        false
    };
    (Namespace) => {
        true
    };
}

pub(crate) use {sluice_kind, sluice_namespaced, sluice_scope};
