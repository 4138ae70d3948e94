//! What marks a slice as this controller's for a Service: its labels,
//! its owner reference and its generated name.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};
use sluice_model::k8s::{EndpointSlice, ObjectMeta, OwnerReference, Service};

use super::desired::AddressFamily;
use crate::LifecycleError;

/// Label naming the Service a slice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`] (upstream's, so tools
/// that look for it find Sluice's slices).
pub const MANAGED_BY_VALUE: &str = "endpointslice-controller.k8s.io";
/// Label upstream puts on the slices of a headless Service.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";

/// The parts of a Service its slices are built from.
#[derive(Debug, Clone)]
pub struct ServiceRef {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// The labels every slice carries: the Service's own, then the two
    /// this controller owns (and the headless one).
    pub labels: BTreeMap<String, String>,
    /// `spec.clusterIP: None`.
    pub headless: bool,
}

impl ServiceRef {
    /// Read the Service's identity; a Service without name, namespace or
    /// uid cannot own slices.
    pub fn of(service: &Service) -> Result<Self, LifecycleError> {
        let m = &service.metadata;
        let object = || {
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or(""),
                m.name.as_deref().unwrap_or("")
            )
        };
        let missing = |field| LifecycleError::Missing {
            kind: "Service",
            object: object(),
            field,
        };
        let name = m.name.clone().ok_or_else(|| missing("metadata.name"))?;
        let namespace = m
            .namespace
            .clone()
            .ok_or_else(|| missing("metadata.namespace"))?;
        let uid = m.uid.clone().ok_or_else(|| missing("metadata.uid"))?;
        let headless = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
        // The Service's labels are copied, except the ones this controller
        // owns, which a user label must not override.
        let mut labels: BTreeMap<String, String> = m
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| {
                ![SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
        labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
        if headless {
            labels.insert(HEADLESS_LABEL.into(), String::new());
        }
        Ok(ServiceRef {
            name,
            namespace,
            uid,
            labels,
            headless,
        })
    }

    /// The owner reference of every slice: the Service, as controller, so
    /// deleting the Service deletes its slices.
    pub fn owner(&self) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// A new slice (no name yet: the API server generates it from
    /// `<svc>-`).
    pub fn new_slice(
        &self,
        family: AddressFamily,
        ports: Vec<EndpointPort>,
        endpoints: Vec<Endpoint>,
    ) -> EndpointSlice {
        EndpointSlice {
            address_type: family.as_str().into(),
            endpoints: Some(endpoints),
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", self.name)),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels.clone()),
                owner_references: Some(vec![self.owner()]),
                ..ObjectMeta::default()
            },
            ports: Some(ports),
        }
    }
}

/// The slice is this controller's and of the Service named `service`.
pub fn is_ours(slice: &EndpointSlice, service: &str) -> bool {
    let labels = slice.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    label(SERVICE_NAME_LABEL) == Some(service) && label(MANAGED_BY_LABEL) == Some(MANAGED_BY_VALUE)
}

/// The slice is owned by the Service with `uid` (a slice left by an
/// earlier Service of the same name is not reused, only deleted).
pub fn owned_by(slice: &EndpointSlice, uid: &str) -> bool {
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Service" && o.uid == uid && o.controller == Some(true))
}
