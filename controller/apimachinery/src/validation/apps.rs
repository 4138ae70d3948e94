//! Deployment and ReplicaSet (apps/v1): a selector that is set, valid and
//! matches the template, the template a pod that restarts always, the
//! rollout strategy, and (the apps/v1 strategy's rule) the selector fixed
//! once created.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, ReplicaSet};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use super::budget::{int_or_percent_value, not_more_than_100, positive_int_or_percent};
use super::field::{BadValue, Error, ErrorList, Path};
use super::service::int_or_string;
use super::{meta, names, pod_spec};

fn nonnegative(errs: &mut ErrorList, path: &Path, v: Option<i32>) {
    if let Some(v) = v.filter(|v| *v < 0) {
        errs.push(Error::invalid(path, v, names::NEGATIVE));
    }
}

/// Whether upstream's `LabelSelectorAsSelector` converts it.
fn converts(s: &LabelSelector) -> bool {
    s.match_expressions.iter().flatten().all(|e| {
        let n = e.values.as_ref().map_or(0, Vec::len);
        let op_ok = match e.operator.as_str() {
            "In" | "NotIn" => n > 0,
            "Exists" | "DoesNotExist" => n == 0,
            _ => false,
        };
        op_ok
            && names::qualified_name(&e.key).is_empty()
            && e.values
                .iter()
                .flatten()
                .all(|v| names::label_value(v).is_empty())
    }) && s
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| names::qualified_name(k).is_empty() && names::label_value(v).is_empty())
}

/// The selector, then the template against it
/// (`ValidatePodTemplateSpecForReplicaSet`).
fn selector_and_template(
    errs: &mut ErrorList,
    selector: Option<&LabelSelector>,
    template: Option<&PodTemplateSpec>,
    spec: &Path,
) {
    let sp = spec.child("selector");
    match selector {
        None => errs.push(Error::required(&sp, "")),
        Some(s) => {
            errs.extend(meta::label_selector(Some(s), &sp));
            if meta::selector_is_empty(s) {
                // The same words for a ReplicaSet, as upstream.
                errs.push(Error::invalid(
                    &sp,
                    BadValue::json(s),
                    "empty selector is invalid for deployment",
                ));
            }
        }
    }
    if let Some(s) = selector.filter(|s| !converts(s)) {
        errs.push(Error::invalid(
            &sp,
            BadValue::json(s),
            "invalid label selector",
        ));
        return;
    }
    let tp = spec.child("template");
    let empty = PodTemplateSpec::default();
    let t = template.unwrap_or(&empty);
    let tm = t.metadata.clone().unwrap_or_default();
    let labels = tm.labels.clone().unwrap_or_default();
    // No selector matches nothing; an empty one everything.
    let matches =
        selector.is_some_and(|s| meta::selector_is_empty(s) || meta::selector_matches(s, &labels));
    if !matches {
        errs.push(Error::invalid(
            &tp.child("metadata").child("labels"),
            BadValue::json(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(template_spec(t, &tp));
    let ps = t.spec.clone().unwrap_or_default();
    let rp = ps.restart_policy.as_deref().unwrap_or_default();
    if rp != "Always" {
        errs.push(Error::not_supported(
            &tp.child("spec").child("restartPolicy"),
            rp,
            &["Always"],
        ));
    }
    if ps.active_deadline_seconds.is_some() {
        errs.push(Error::forbidden(
            &tp.child("spec").child("activeDeadlineSeconds"),
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
}

/// `ValidatePodTemplateSpec`.
pub fn template_spec(t: &PodTemplateSpec, path: &Path) -> ErrorList {
    let m = t.metadata.clone().unwrap_or_default();
    let mut errs = meta::labels(m.labels.as_ref(), &path.child("labels"));
    errs.extend(meta::annotations(
        m.annotations.as_ref(),
        &path.child("annotations"),
    ));
    let empty = PodSpec::default();
    let s = t.spec.as_ref().unwrap_or(&empty);
    errs.extend(pod_spec::validate(s, &path.child("spec"), false));
    if s.ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(Error::forbidden(
            &path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// The internal strategy, marshalled with Go's field names.
fn strategy_value(s: &DeploymentStrategy) -> BadValue {
    let ru = s.rolling_update.as_ref().map(|r| {
        let v = |x: &Option<_>| x.as_ref().map_or(json!(null), |x| json!(x));
        json!({"MaxUnavailable": v(&r.max_unavailable), "MaxSurge": v(&r.max_surge)})
    });
    BadValue::Json(format!(
        "{{\"Type\":{},\"RollingUpdate\":{}}}",
        json!(s.type_.clone().unwrap_or_default()),
        json!(ru)
    ))
}

fn strategy(errs: &mut ErrorList, s: &DeploymentStrategy, path: &Path) {
    match s.type_.as_deref().unwrap_or_default() {
        "Recreate" => {
            if s.rolling_update.is_some() {
                errs.push(Error::forbidden(
                    &path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let rp = path.child("rollingUpdate");
            let Some(r) = &s.rolling_update else {
                errs.push(Error::required(
                    &rp,
                    "this should be defaulted and never be nil",
                ));
                return;
            };
            let zero = k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0);
            let mu = r.max_unavailable.clone().unwrap_or(zero.clone());
            let ms = r.max_surge.clone().unwrap_or(zero);
            positive_int_or_percent(errs, &rp.child("maxUnavailable"), &mu);
            positive_int_or_percent(errs, &rp.child("maxSurge"), &ms);
            if int_or_percent_value(&mu) == 0 && int_or_percent_value(&ms) == 0 {
                errs.push(Error::invalid(
                    &rp.child("maxUnavailable"),
                    int_or_string(&mu),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            not_more_than_100(errs, &rp.child("maxUnavailable"), &mu);
        }
        _ => errs.push(Error::not_supported(
            path,
            strategy_value(s),
            &["Recreate", "RollingUpdate"],
        )),
    }
}

fn deployment_spec(d: &Deployment) -> ErrorList {
    let spec = Path::new("spec");
    let mut errs = ErrorList::new();
    let s = &d.spec;
    nonnegative(&mut errs, &spec.child("replicas"), s.replicas);
    selector_and_template(&mut errs, Some(&s.selector), Some(&s.template), &spec);
    strategy(
        &mut errs,
        &s.strategy.clone().unwrap_or_default(),
        &spec.child("strategy"),
    );
    nonnegative(
        &mut errs,
        &spec.child("minReadySeconds"),
        s.min_ready_seconds,
    );
    nonnegative(
        &mut errs,
        &spec.child("revisionHistoryLimit"),
        s.revision_history_limit,
    );
    if let Some(p) = s.progress_deadline_seconds {
        nonnegative(&mut errs, &spec.child("progressDeadlineSeconds"), Some(p));
        if p <= s.min_ready_seconds.unwrap_or(0) {
            errs.push(Error::invalid(
                &spec.child("progressDeadlineSeconds"),
                p,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

pub fn validate_deployment(d: &Deployment) -> ErrorList {
    let mut errs = meta::object_meta(&d.metadata, true, names::dns1123_subdomain);
    errs.extend(deployment_spec(d));
    errs
}

fn selector_fixed(errs: &mut ErrorList, n: Option<&LabelSelector>, o: Option<&LabelSelector>) {
    let norm = |s: Option<&LabelSelector>| {
        s.map(|s| {
            let labels: BTreeMap<String, String> = s.match_labels.clone().unwrap_or_default();
            (labels, s.match_expressions.clone().unwrap_or_default())
        })
    };
    if norm(n) != norm(o) {
        errs.push(Error::invalid(
            &Path::new("spec").child("selector"),
            BadValue::json(&n),
            names::IMMUTABLE,
        ));
    }
}

pub fn validate_deployment_update(n: &Deployment, o: &Deployment) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(deployment_spec(n));
    selector_fixed(&mut errs, Some(&n.spec.selector), Some(&o.spec.selector));
    errs
}

fn replica_set_spec(rs: &ReplicaSet) -> ErrorList {
    let spec = Path::new("spec");
    let mut errs = ErrorList::new();
    let s = &rs.spec;
    nonnegative(&mut errs, &spec.child("replicas"), s.replicas);
    nonnegative(
        &mut errs,
        &spec.child("minReadySeconds"),
        s.min_ready_seconds,
    );
    selector_and_template(&mut errs, Some(&s.selector), s.template.as_ref(), &spec);
    errs
}

pub fn validate_replica_set(rs: &ReplicaSet) -> ErrorList {
    let mut errs = meta::object_meta(&rs.metadata, true, names::dns1123_subdomain);
    errs.extend(replica_set_spec(rs));
    errs
}

pub fn validate_replica_set_update(n: &ReplicaSet, o: &ReplicaSet) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(replica_set_spec(n));
    selector_fixed(&mut errs, Some(&n.spec.selector), Some(&o.spec.selector));
    errs
}
