//! `fieldValidation`, as kube-apiserver applies it to every write: the
//! object is decoded into its Kubernetes type (k8s-openapi for the built-in
//! kinds, the model crate for `sluice.dev/v1`), a value of the wrong type
//! is a 422 naming the field, and a field the type does not have is
//! refused (`Strict`, what kubectl sends), reported in a `Warning` header
//! (`Warn`, the default without the parameter) or ignored (`Ignore`).
//! Under `Warn` and `Ignore` the unknown fields are taken out of the
//! object before it is stored, as kube-apiserver stores only what its
//! typed decoding read; everything else is kept as sent (no re-encoding,
//! so no known value changes its spelling).

use std::collections::HashMap;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use sluice_model::cluster::Cluster;
use sluice_model::decode::{
    decode, remove_unknown, DecodeError, DecodeErrorKind, Decoded, FieldValidation, Step,
};
use sluice_model::k8s;
use sluice_model::kind::SluiceKind;
use sluice_model::load_balancer::{
    HealthCheck, InstanceGroup, L4LoadBalancer, NetworkEndpointGroup,
};
use sluice_model::node_pool::NodePool;
use sluice_model::operation::Operation;
use sluice_model::policy::disruption::{Budget, Selector, UnhealthyPodEvictionPolicy};
use sluice_model::validation::FieldErrors;

use super::meta::invalid;
use super::path::Target;
use super::semantics;
use super::status::ApiError;
use super::validate;

/// The mode a request asks for (`fieldValidation=`), kube-apiserver's
/// default (`Warn`) when it asks for none.
pub fn mode(q: &HashMap<String, String>) -> Result<FieldValidation, ApiError> {
    match q.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("fieldValidation: {other:?} is not Strict, Warn or Ignore"),
        )),
    }
}

/// The unknown fields decoding found: to warn about, and to remove.
#[derive(Default)]
struct Unknown {
    warn: Vec<String>,
    paths: Vec<Vec<Step>>,
}

impl<T> From<Decoded<T>> for Unknown {
    fn from(d: Decoded<T>) -> Self {
        Unknown {
            warn: d.unknown_fields,
            paths: d.unknown_paths,
        }
    }
}

fn check_as<T: DeserializeOwned>(
    obj: &Value,
    mode: FieldValidation,
) -> Result<Unknown, DecodeError> {
    decode::<T, _>(obj.clone(), mode).map(Unknown::from)
}

/// A kind the decision loops read: decoded, validated as kube-apiserver
/// does (`upstream`, so its wording comes first), then the decoded value
/// checked as the loops will read it (`semantics`), with no second
/// decode.
fn checked<T: DeserializeOwned>(
    t: &Target,
    obj: &Value,
    mode: FieldValidation,
    upstream: impl Fn() -> Result<(), ApiError>,
    semantic: fn(&Target, &str, &T) -> Result<(), ApiError>,
) -> Result<Unknown, ApiError> {
    let d = decode::<T, _>(obj.clone(), mode).map_err(|e| decode_error(t, obj, e))?;
    upstream()?;
    semantic(t, name_of(obj), &d.value)?;
    Ok(d.into())
}

/// A `sluice.dev/v1` kind: decoded, then its spec validated (the rules of
/// the model crate, every error with its field).
fn check_kind<K: SluiceKind + DeserializeOwned>(
    t: &Target,
    obj: &Value,
    mode: FieldValidation,
) -> Result<Unknown, ApiError> {
    let d = decode::<K, _>(obj.clone(), mode).map_err(|e| decode_error(t, obj, e))?;
    if let Err(errs) = d.value.validate() {
        return Err(field_errors(t, name_of(obj), &errs));
    }
    Ok(d.into())
}

/// A 422 listing every broken rule, each with its field, as
/// kube-apiserver's `Invalid` status.
pub fn field_errors(t: &Target, name: &str, errs: &FieldErrors) -> ApiError {
    let mut err = invalid(t, name, "", "");
    err.message = format!("{} {name:?} is invalid: {errs}", t.resource.kind);
    let causes: Vec<Value> = errs
        .0
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.message, "field": e.field}))
        .collect();
    err.details = Some(
        json!({"name": name, "group": t.resource.group, "kind": t.resource.kind, "causes": causes}),
    );
    err
}

/// A budget as kube-apiserver admits it: one of `minAvailable` and
/// `maxUnavailable`, non-negative, a percentage at most 100%, a selector
/// that parses, a known unhealthy-pod policy. Checked with the model's own
/// parsing, so a stored budget is one the Eviction API can always read.
fn check_budget(
    t: &Target,
    obj: &Value,
    mode: FieldValidation,
    upstream: impl Fn() -> Result<(), ApiError>,
) -> Result<Unknown, ApiError> {
    let unknown =
        check_as::<k8s::PodDisruptionBudget>(obj, mode).map_err(|e| decode_error(t, obj, e))?;
    upstream()?;
    let Ok(pdb) = serde_json::from_value::<k8s::PodDisruptionBudget>(obj.clone()) else {
        return Ok(unknown);
    };
    let Some(spec) = pdb.spec else {
        return Ok(unknown);
    };
    let checked = (|| {
        if spec.min_available.is_some() || spec.max_unavailable.is_some() {
            Budget::of(&spec)?;
        }
        if let Some(sel) = &spec.selector {
            Selector::parse(sel)?;
        }
        UnhealthyPodEvictionPolicy::parse(&spec).map(|_| ())
    })();
    match checked {
        Ok(()) => Ok(unknown),
        Err(e) => Err(invalid(t, name_of(obj), &e.field(), &e.message())),
    }
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn decode_error(t: &Target, obj: &Value, e: DecodeError) -> ApiError {
    let name = name_of(obj);
    let field = if e.field.is_empty() {
        "<body>"
    } else {
        e.field.as_str()
    };
    // A Secret's values never travel back in an error, not even the
    // mistyped or mis-encoded one the sender holds in a CI log.
    let secret_value = t.resource.kind == "Secret"
        && ["data", "stringData"].iter().any(|f| {
            field == *f
                || field.starts_with(&format!("{f}."))
                || field.starts_with(&format!("{f}["))
        });
    let message = if secret_value {
        sluice_apimachinery::validation::secret::redacted_decode_message(&e.message)
    } else {
        e.message.clone()
    };
    let mut err = invalid(t, name, field, &message);
    if e.kind == DecodeErrorKind::UnknownField {
        err.message = format!("{} {name:?}: {}", t.resource.kind, e.message);
    }
    err
}

/// Decode `obj` as the kind `t` serves and take its unknown fields out
/// (`Warn`, `Ignore`; `Strict` refuses them), having validated it as
/// kube-apiserver does (on create, or against `old`, the stored object,
/// on update: `validate.rs`) and checked what the decision loops will
/// read of it (`semantics`); the unknown fields to warn about.
pub fn check(
    t: &Target,
    obj: &mut Value,
    mode: FieldValidation,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let unknown = decoded(t, obj, mode, old)?;
    remove_unknown(obj, &unknown.paths);
    Ok(unknown.warn)
}

fn decoded(
    t: &Target,
    obj: &Value,
    mode: FieldValidation,
    old: Option<&Value>,
) -> Result<Unknown, ApiError> {
    let r = t.resource;
    let upstream = || validate::admit(t, old, obj);
    let result = match (r.group, r.kind) {
        ("", "Namespace") => check_as::<Namespace>(obj, mode),
        ("", "Node") => check_as::<k8s::Node>(obj, mode),
        ("", "Pod") => return checked(t, obj, mode, upstream, semantics::pod),
        ("", "Service") => check_as::<k8s::Service>(obj, mode),
        ("", "Event") => check_as::<k8s::Event>(obj, mode),
        ("", "ConfigMap") => check_as::<ConfigMap>(obj, mode),
        ("", "Secret") => check_as::<Secret>(obj, mode),
        ("apps", "Deployment") => return checked(t, obj, mode, upstream, semantics::deployment),
        ("apps", "ReplicaSet") => return checked(t, obj, mode, upstream, semantics::replica_set),
        ("coordination.k8s.io", "Lease") => check_as::<k8s::Lease>(obj, mode),
        ("discovery.k8s.io", "EndpointSlice") => check_as::<k8s::EndpointSlice>(obj, mode),
        ("policy", "PodDisruptionBudget") => return check_budget(t, obj, mode, upstream),
        ("sluice.dev", "Cluster") => return check_kind::<Cluster>(t, obj, mode),
        ("sluice.dev", "NodePool") => return check_kind::<NodePool>(t, obj, mode),
        ("sluice.dev", "Operation") => return check_kind::<Operation>(t, obj, mode),
        ("sluice.dev", "L4LoadBalancer") => return check_kind::<L4LoadBalancer>(t, obj, mode),
        ("sluice.dev", "HealthCheck") => return check_kind::<HealthCheck>(t, obj, mode),
        ("sluice.dev", "NetworkEndpointGroup") => {
            return check_kind::<NetworkEndpointGroup>(t, obj, mode)
        }
        ("sluice.dev", "InstanceGroup") => return check_kind::<InstanceGroup>(t, obj, mode),
        // Every kind served has its type above; a new one without is
        // stored as sent.
        _ => Ok(Unknown::default()),
    };
    let unknown = result.map_err(|e| decode_error(t, obj, e))?;
    upstream()?;
    Ok(unknown)
}

/// `Warning` header values for unknown fields under `Warn`.
pub fn warnings(unknown: &[String]) -> Vec<String> {
    unknown
        .iter()
        .map(|f| format!("299 - \"unknown field \\\"{f}\\\"\""))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}})
    }

    #[test]
    fn budgets_the_eviction_api_could_not_read_are_refused() {
        let t = resolve("/apis/policy/v1/namespaces/default/poddisruptionbudgets").expect("path");
        let pdb = |spec: Value| json!({"metadata": {"name": "b"}, "spec": spec});
        for (spec, field, words) in [
            // kube-apiserver's validation answers first, in its words.
            (
                json!({"minAvailable": 1, "maxUnavailable": 1}),
                "spec",
                "minAvailable and maxUnavailable cannot be both set",
            ),
            (
                json!({"minAvailable": "150%"}),
                "spec.minAvailable",
                "must not be greater than 100%",
            ),
            (
                json!({"maxUnavailable": -1}),
                "spec.maxUnavailable",
                "must be greater than or equal to 0",
            ),
            (
                json!({"minAvailable": "half"}),
                "spec.minAvailable",
                "a valid percent string",
            ),
            (
                json!({"minAvailable": 1, "selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}),
                "spec.selector.matchExpressions[0].operator",
                "not a valid selector operator",
            ),
            (
                json!({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"}),
                "spec.unhealthyPodEvictionPolicy",
                "IfHealthyBudget",
            ),
        ] {
            let e = check(&t, &mut pdb(spec.clone()), FieldValidation::Strict, None).unwrap_err();
            let body = e.body();
            assert_eq!(body["code"], 422, "{spec}");
            assert_eq!(
                body["details"]["causes"][0]["field"], field,
                "{spec}: {body}"
            );
            assert!(
                body["message"].as_str().unwrap().contains(words),
                "{spec}: {body}"
            );
        }
        for ok in [
            json!({"minAvailable": "50%"}),
            json!({"maxUnavailable": 0}),
            json!({}),
        ] {
            check(&t, &mut pdb(ok.clone()), FieldValidation::Strict, None)
                .unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
    }

    #[test]
    fn unknown_fields_follow_the_mode() {
        let t = resolve("/api/v1/namespaces/default/pods").expect("path");
        let mut p = pod();
        p["spec"]["colour"] = json!("red");
        p["spec"]["containers"][0]["imagePullPolice"] = json!("Always");
        let e = check(&t, &mut p.clone(), FieldValidation::Strict, None).expect_err("strict");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.contains("unknown field \"spec.colour\""),
            "{}",
            e.message
        );
        // Warn and Ignore take them out of what is stored, the rest as sent.
        let mut warned = p.clone();
        let w = check(&t, &mut warned, FieldValidation::Warn, None).expect("warn");
        assert_eq!(w, ["spec.colour", "spec.containers[0].imagePullPolice"]);
        assert_eq!(warned, pod());
        let mut ignored = p.clone();
        assert!(check(&t, &mut ignored, FieldValidation::Ignore, None)
            .expect("ignore")
            .is_empty());
        assert_eq!(ignored, pod());
        assert!(check(&t, &mut pod(), FieldValidation::Strict, None)
            .expect("known")
            .is_empty());
    }

    #[test]
    fn a_secret_decoding_error_quotes_no_value() {
        let t = resolve("/api/v1/namespaces/default/secrets").expect("path");
        for (body, words) in [
            (
                json!({"stringData": {"pin": 1234}}),
                "invalid type: integer, expected a string",
            ),
            (
                json!({"data": {"pin": "!!!!"}}),
                "illegal base64 data at input byte 0",
            ),
            (
                json!({"data": "hunter2"}),
                "invalid type: string, expected a map",
            ),
        ] {
            let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
            common_merge(&mut s, &body);
            let e = check(&t, &mut s, FieldValidation::Strict, None).expect_err("mistyped");
            let text = e.body().to_string();
            assert!(text.contains(words), "{text}");
            assert!(
                !text.contains("1234") && !text.contains("hunter2") && !text.contains("33"),
                "{text}"
            );
        }
    }

    fn common_merge(obj: &mut Value, with: &Value) {
        if let (Some(o), Some(w)) = (obj.as_object_mut(), with.as_object()) {
            o.extend(w.clone());
        }
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let t = resolve("/api/v1/namespaces/default/pods").expect("path");
        let mut p = pod();
        p["spec"]["terminationGracePeriodSeconds"] = json!("thirty");
        let e = check(&t, &mut p.clone(), FieldValidation::Strict, None).expect_err("type");
        assert_eq!(
            e.body()["details"]["causes"][0]["field"],
            "spec.terminationGracePeriodSeconds"
        );
    }

    #[test]
    fn sluice_kinds_are_validated_with_every_field_named() {
        // spec: U1 — maxSurge and maxUnavailable both 0 under SURGE.
        let t = resolve("/apis/sluice.dev/v1/nodepools").expect("path");
        let np = json!({"apiVersion": "sluice.dev/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"locations": ["z-a"], "initialNodeCount": 1, "config": {"capacity": {"cpu": "2", "memory": "4Gi"}},
                     "upgradeSettings": {"maxSurge": 0, "maxUnavailable": 0}}});
        let e = check(&t, &mut np.clone(), FieldValidation::Strict, None).expect_err("invalid");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        let causes = e.body()["details"]["causes"].clone();
        assert!(
            causes.to_string().contains("spec.upgradeSettings"),
            "{causes}"
        );
    }

    #[test]
    fn modes_from_the_query() {
        let q = |v: &str| HashMap::from([("fieldValidation".to_string(), v.to_string())]);
        assert_eq!(
            mode(&HashMap::new()).expect("default"),
            FieldValidation::Warn
        );
        assert_eq!(mode(&q("Strict")).expect("strict"), FieldValidation::Strict);
        assert!(mode(&q("strict")).is_err());
    }
}
