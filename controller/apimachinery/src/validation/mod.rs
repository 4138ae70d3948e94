//! kube-apiserver's validation of the built-in kinds: per kind a
//! `validate_create(&obj)` and a `validate_update(&new, &old)` answering
//! every broken rule with upstream's field path, error type and message,
//! in upstream's order. The caller runs v1 defaulting first, as
//! kube-apiserver decodes, defaults and then validates; without it the
//! fields upstream always defaults would answer `Required value`.

pub mod apps;
pub mod budget;
pub mod config_map;
pub mod container;
pub mod endpoint_slice;
pub mod event;
pub mod field;
pub mod ip;
pub mod lease;
pub mod meta;
pub mod names;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod pod_spec;
pub mod pod_update;
pub mod secret;
pub mod service;
pub mod volume;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use field::{BadValue, Error, ErrorList, ErrorType, Path};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

/// Whether `(group, kind)` has validation here.
pub fn validates(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "",
            "Service" | "Pod" | "Node" | "Namespace" | "Event" | "ConfigMap" | "Secret"
        ) | ("apps", "Deployment" | "ReplicaSet")
            | ("coordination.k8s.io", "Lease")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("policy", "PodDisruptionBudget")
    )
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// One kind's create and update validation over its typed object.
fn run<T: DeserializeOwned>(
    new: &Value,
    old: Option<&Value>,
    create: fn(&T) -> ErrorList,
    update: fn(&T, &T) -> ErrorList,
) -> ErrorList {
    // An object that does not decode was refused by decoding already,
    // naming the field; there is nothing more to say about it here.
    let Some(n) = typed::<T>(new) else {
        return ErrorList::new();
    };
    match old.and_then(typed::<T>) {
        Some(o) => update(&n, &o),
        None => create(&n),
    }
}

fn service_create(s: &Service) -> ErrorList {
    let mut s = s.clone();
    service::prepare_create(&mut s);
    service::validate_create(&s)
}

fn service_update(n: &Service, o: &Service) -> ErrorList {
    let mut n = n.clone();
    service::prepare_update(&mut n, o);
    service::validate_update(&n, o)
}

/// Validate `new` of `(group, kind)`, against `old` when it replaces a
/// stored object; empty when valid or when the kind has no rules here.
pub fn validate(group: &str, kind: &str, new: &Value, old: Option<&Value>) -> ErrorList {
    match (group, kind) {
        ("", "Service") => run::<Service>(new, old, service_create, service_update),
        ("", "Pod") => run::<Pod>(new, old, pod::validate_create, pod_update::validate_update),
        ("", "Node") => run::<Node>(new, old, node::validate_create, node::validate_update),
        ("", "Namespace") => run::<Namespace>(
            new,
            old,
            namespace::validate_create,
            namespace::validate_update,
        ),
        ("", "Event") => run::<Event>(new, old, event::validate_create, event::validate_update),
        ("", "ConfigMap") => run::<ConfigMap>(
            new,
            old,
            config_map::validate_create,
            config_map::validate_update,
        ),
        ("", "Secret") => run::<Secret>(new, old, secret::validate_create, secret::validate_update),
        ("apps", "Deployment") => run::<Deployment>(
            new,
            old,
            apps::validate_deployment,
            apps::validate_deployment_update,
        ),
        ("apps", "ReplicaSet") => run::<ReplicaSet>(
            new,
            old,
            apps::validate_replica_set,
            apps::validate_replica_set_update,
        ),
        ("coordination.k8s.io", "Lease") => {
            run::<Lease>(new, old, lease::validate_create, lease::validate_update)
        }
        ("discovery.k8s.io", "EndpointSlice") => run::<EndpointSlice>(
            new,
            old,
            endpoint_slice::validate_create,
            endpoint_slice::validate_update,
        ),
        ("policy", "PodDisruptionBudget") => {
            run::<PodDisruptionBudget>(new, old, budget::validate_create, budget::validate_update)
        }
        _ => ErrorList::new(),
    }
}
