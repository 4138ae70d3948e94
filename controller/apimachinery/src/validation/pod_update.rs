//! Pod update: `ValidatePodUpdate`. A pod's spec is fixed once created
//! but for container images, a shorter `activeDeadlineSeconds`, added
//! tolerations, removed scheduling gates and a negative grace period
//! raised to 1.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Toleration};
use serde_json::Value;

use super::field::{BadValue, Error, ErrorList, Path};
use super::pod::{metadata_and_spec, MIRROR};
use super::{meta, names, pod_spec};

const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Container count unchanged (else validation stops), images set.
fn containers(n: &[Container], o: &[Container], path: &Path) -> (ErrorList, bool) {
    let mut errs = ErrorList::new();
    if n.len() != o.len() {
        errs.push(Error::forbidden(
            path,
            "pod updates may not add or remove containers",
        ));
        return (errs, true);
    }
    for (i, c) in n.iter().enumerate() {
        let image = c.image.as_deref().unwrap_or_default();
        if image.is_empty() {
            errs.push(Error::required(&path.index(i).child("image"), ""));
        }
        if image.trim() != image {
            errs.push(Error::invalid(
                &path.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    (errs, false)
}

fn annotations(n: &Pod, o: &Pod) -> ErrorList {
    let mut errs = ErrorList::new();
    let get = |p: &Pod| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIRROR))
            .cloned()
    };
    let path = Path::new("metadata").child("annotations").key(MIRROR);
    match (get(n), get(o)) {
        (Some(_), None) => errs.push(Error::forbidden(&path, "may not add mirror pod annotation")),
        (a, Some(b)) if a.as_ref() != Some(&b) => {
            errs.push(Error::forbidden(
                &path,
                "may not remove or update mirror pod annotation",
            ));
        }
        _ => {}
    }
    errs
}

fn only_added_tolerations(n: &[Toleration], o: &[Toleration], path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    for old in o {
        let found = n.iter().any(|t| {
            let mut c = old.clone();
            c.toleration_seconds = t.toleration_seconds;
            &c == t
        });
        if !found {
            errs.push(Error::forbidden(
                path,
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return errs;
        }
    }
    errs.extend(pod_spec::tolerations(n, path));
    errs
}

/// Upstream compares specs with empty and absent lists and maps alike.
fn normalized(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, normalized(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(normalized).collect()),
        v => v,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// What changed, one line per top-level field: upstream prints a diff
/// here too (its own format; clients match the text before it).
fn diff(old: &Value, new: &Value) -> String {
    let mut keys: Vec<&String> = old
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    keys.extend(new.as_object().into_iter().flatten().map(|(k, _)| k));
    keys.sort();
    keys.dedup();
    let mut lines = Vec::new();
    for k in keys {
        let (a, b) = (old.get(k), new.get(k));
        if a != b {
            let show = |v: Option<&Value>| v.map_or_else(|| "null".to_string(), Value::to_string);
            lines.push(format!("  {k}: {} -> {}", show(a), show(b)));
        }
    }
    lines.join("\n")
}

pub fn validate_update(new: &Pod, old: &Pod) -> ErrorList {
    let mut errs = meta::object_meta_update(&new.metadata, &old.metadata);
    errs.extend(metadata_and_spec(new));
    errs.extend(annotations(new, old));
    let empty = PodSpec::default();
    let n = new.spec.as_ref().unwrap_or(&empty);
    let o = old.spec.as_ref().unwrap_or(&empty);
    let spec = Path::new("spec");
    let (e, stop) = containers(&n.containers, &o.containers, &spec.child("containers"));
    errs.extend(e);
    if stop {
        return errs;
    }
    let (ni, oi) = (
        n.init_containers.as_deref().unwrap_or_default(),
        o.init_containers.as_deref().unwrap_or_default(),
    );
    let (e, stop) = containers(ni, oi, &spec.child("initContainers"));
    errs.extend(e);
    if stop {
        return errs;
    }
    let ads = spec.child("activeDeadlineSeconds");
    match (n.active_deadline_seconds, o.active_deadline_seconds) {
        (Some(v), _) if !(0..=i64::from(i32::MAX)).contains(&v) => {
            errs.push(Error::invalid(
                &ads,
                v,
                names::inclusive_range(0, i32::MAX.into()),
            ));
            return errs;
        }
        (Some(v), Some(old)) if old < v => {
            errs.push(Error::invalid(
                &ads,
                v,
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => errs.push(Error::invalid(
            &ads,
            BadValue::Json("null".into()),
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    errs.extend(only_added_tolerations(
        n.tolerations.as_deref().unwrap_or_default(),
        o.tolerations.as_deref().unwrap_or_default(),
        &spec.child("tolerations"),
    ));
    let old_gates: Vec<&str> = o
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect();
    for (i, g) in n.scheduling_gates.iter().flatten().enumerate() {
        if !old_gates.contains(&g.name.as_str()) {
            errs.push(Error::forbidden(
                &spec.child("schedulingGates").index(i).child("name"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    g.name
                ),
            ));
        }
    }
    let mut munged = n.clone();
    let keep_images = |new: &mut [Container], old: &[Container]| {
        for (c, oc) in new.iter_mut().zip(old) {
            c.image.clone_from(&oc.image);
        }
    };
    keep_images(&mut munged.containers, &o.containers);
    if let Some(list) = munged.init_containers.as_mut() {
        keep_images(list, oi);
    }
    munged.active_deadline_seconds = o.active_deadline_seconds;
    munged.scheduling_gates.clone_from(&o.scheduling_gates);
    munged.tolerations.clone_from(&o.tolerations);
    let raised = o.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && munged.termination_grace_period_seconds == Some(1);
    if raised {
        munged.termination_grace_period_seconds = o.termination_grace_period_seconds;
    }
    let as_json = |s: &PodSpec| normalized(serde_json::to_value(s).unwrap_or(Value::Null));
    let (mj, oj) = (as_json(&munged), as_json(o));
    if mj != oj {
        errs.push(Error::forbidden(
            &spec,
            format!(
                "pod updates may not change fields other than {UPDATABLE}\n{}",
                diff(&oj, &mj)
            ),
        ));
    }
    errs
}
