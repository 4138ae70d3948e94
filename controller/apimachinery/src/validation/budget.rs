//! PodDisruptionBudget (policy/v1): one of `minAvailable` and
//! `maxUnavailable`, each a count or a percentage up to 100%, a valid
//! selector, a known unhealthy-pod policy. Only the spec is the
//! strategy's; the name gets the generic rules, and only when the spec
//! has no errors (upstream's order).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::field::{BadValue, Error, ErrorList, Path};
use super::{meta, names};

const POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

fn int_or_percent_json(v: &Option<IntOrString>) -> String {
    match v {
        None => "null".into(),
        Some(IntOrString::Int(i)) => i.to_string(),
        Some(IntOrString::String(s)) => json!(s).to_string(),
    }
}

/// The internal spec, marshalled with Go's field names (what upstream's
/// "cannot be both set" error prints).
fn spec_value(s: &PodDisruptionBudgetSpec) -> BadValue {
    BadValue::Json(format!(
        "{{\"MinAvailable\":{},\"Selector\":{},\"MaxUnavailable\":{},\"UnhealthyPodEvictionPolicy\":{}}}",
        int_or_percent_json(&s.min_available),
        json!(s.selector),
        int_or_percent_json(&s.max_unavailable),
        json!(s.unhealthy_pod_eviction_policy)
    ))
}

fn percent_value(v: &IntOrString) -> Option<i64> {
    match v {
        IntOrString::String(s) if names::is_percent(s) => s.trim_end_matches('%').parse().ok(),
        _ => None,
    }
}

/// `ValidatePositiveIntOrPercent`.
pub fn positive_int_or_percent(errs: &mut ErrorList, path: &Path, v: &IntOrString) {
    match v {
        IntOrString::String(s) if !names::is_percent(s) => {
            errs.push(Error::invalid(
                path,
                BadValue::json(s),
                names::percent_error(),
            ));
        }
        IntOrString::Int(i) if *i < 0 => errs.push(Error::invalid(path, *i, names::NEGATIVE)),
        _ => {}
    }
}

/// `IsNotMoreThan100Percent`.
pub fn not_more_than_100(errs: &mut ErrorList, path: &Path, v: &IntOrString) {
    if percent_value(v).is_some_and(|p| p > 100) {
        errs.push(Error::invalid(
            path,
            super::service::int_or_string(v),
            "must not be greater than 100%",
        ));
    }
}

/// The value upstream compares with 0: a percentage's number, else the
/// integer (a string that is neither counts as 0).
pub fn int_or_percent_value(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(i) => (*i).into(),
        IntOrString::String(s) => percent_value(v).or_else(|| s.parse().ok()).unwrap_or(0),
    }
}

fn spec(s: &PodDisruptionBudgetSpec) -> ErrorList {
    let path = Path::new("spec");
    let mut errs = ErrorList::new();
    if s.min_available.is_some() && s.max_unavailable.is_some() {
        errs.push(Error::invalid(
            &path,
            spec_value(s),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (f, v) in [
        ("minAvailable", &s.min_available),
        ("maxUnavailable", &s.max_unavailable),
    ] {
        if let Some(v) = v {
            positive_int_or_percent(&mut errs, &path.child(f), v);
            not_more_than_100(&mut errs, &path.child(f), v);
        }
    }
    errs.extend(meta::label_selector(
        s.selector.as_ref(),
        &path.child("selector"),
    ));
    if let Some(p) = s
        .unhealthy_pod_eviction_policy
        .as_deref()
        .filter(|p| !POLICIES.contains(p))
    {
        errs.push(Error::not_supported(
            &path.child("unhealthyPodEvictionPolicy"),
            p,
            &POLICIES,
        ));
    }
    errs
}

pub fn validate_create(b: &PodDisruptionBudget) -> ErrorList {
    let errs = spec(&b.spec.clone().unwrap_or_default());
    if !errs.is_empty() {
        return errs;
    }
    meta::object_meta(&b.metadata, true, meta::path_segment_name)
}

pub fn validate_update(n: &PodDisruptionBudget, o: &PodDisruptionBudget) -> ErrorList {
    let mut errs = meta::object_meta_update(&n.metadata, &o.metadata);
    errs.extend(spec(&n.spec.clone().unwrap_or_default()));
    errs
}
