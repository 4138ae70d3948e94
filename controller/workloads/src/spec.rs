//! The checks both workload kinds share before anything is decided: a
//! selector that parses, selects something and selects the template's own
//! pods, and a replica count that is not negative.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use sluice_model::policy::disruption::Selector;

use crate::owner::display_name;
use crate::WorkloadError;

/// `spec.selector` compiled once. As apps/v1 validation, an empty selector
/// is refused (it would take every pod of the namespace), and so is one the
/// template's labels do not satisfy (the pods made would not be counted,
/// and more would be made forever).
pub(crate) fn selector(
    kind: &'static str,
    meta: &ObjectMeta,
    selector: Option<&LabelSelector>,
    template: Option<&PodTemplateSpec>,
) -> Result<Selector, WorkloadError> {
    let object = display_name(meta);
    let compiled = selector
        .map(Selector::parse)
        .transpose()
        .map_err(|source| WorkloadError::Invalid {
            kind,
            object: object.clone(),
            source,
        })?
        .unwrap_or_default();
    if compiled.match_labels.is_empty() && compiled.match_expressions.is_empty() {
        return Err(WorkloadError::EmptySelector { kind, object });
    }
    let empty = BTreeMap::new();
    let labels = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    if !compiled.matches(labels) {
        return Err(WorkloadError::SelectorMismatch { kind, object });
    }
    Ok(compiled)
}

/// `spec.replicas`, 1 when unset as the API server defaults it.
pub(crate) fn replicas(
    kind: &'static str,
    meta: &ObjectMeta,
    replicas: Option<i32>,
) -> Result<i32, WorkloadError> {
    match replicas.unwrap_or(1) {
        n if n < 0 => Err(WorkloadError::NegativeReplicas {
            kind,
            object: display_name(meta),
            value: n,
        }),
        n => Ok(n),
    }
}

/// An optional count that may not be negative (`minReadySeconds`,
/// `revisionHistoryLimit`, `progressDeadlineSeconds`).
pub(crate) fn non_negative(
    kind: &'static str,
    meta: &ObjectMeta,
    field: &'static str,
    value: Option<i32>,
) -> Result<(), WorkloadError> {
    match value {
        Some(v) if v < 0 => Err(WorkloadError::Negative {
            kind,
            object: display_name(meta),
            field,
            value: v,
        }),
        _ => Ok(()),
    }
}

/// `metadata.uid`, without which nothing can be owned.
pub(crate) fn uid<'a>(kind: &'static str, meta: &'a ObjectMeta) -> Result<&'a str, WorkloadError> {
    meta.uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| WorkloadError::MissingMetadata {
            kind,
            object: display_name(meta),
            field: "uid",
        })
}

/// `metadata.name`.
pub(crate) fn name<'a>(kind: &'static str, meta: &'a ObjectMeta) -> Result<&'a str, WorkloadError> {
    meta.name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| WorkloadError::MissingMetadata {
            kind,
            object: display_name(meta),
            field: "name",
        })
}
