//! What kube-apiserver's validation refuses in the specs the decision loops
//! read, checked with those loops' own reading: a Pod (or a workload's pod
//! template) as the scheduler reads it, a Deployment or ReplicaSet as the
//! workload controllers do. Without this a Deployment with `maxSurge` and
//! `maxUnavailable` both 0, or a pod asking for -1 cpu, was stored; the
//! first left its controller retrying forever, the second gave its node a
//! core it does not have. A refusal is a 422 naming the field.
//!
//! Only writes of the object itself are checked: a status write leaves the
//! spec as stored.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use sluice_model::k8s::Quantity;
use sluice_model::quantity::milli;

use super::meta::invalid;
use super::path::Target;
use super::status::ApiError;

/// A field and what is wrong with it.
type Refusal = (String, String);

/// A Pod as written to `t` (`name` for the error).
pub fn pod(t: &Target, name: &str, p: &Pod) -> Result<(), ApiError> {
    refuse(t, name, pod_spec(p, ""))
}

/// A Deployment as written to `t`.
pub fn deployment(t: &Target, name: &str, d: &Deployment) -> Result<(), ApiError> {
    refuse(
        t,
        name,
        sluice_workloads::deployment::check(d)
            .map_err(|e| e.field_and_message())
            .and_then(|()| template(Some(&d.spec.template), &d.metadata.namespace)),
    )
}

/// A ReplicaSet as written to `t`.
pub fn replica_set(t: &Target, name: &str, rs: &ReplicaSet) -> Result<(), ApiError> {
    refuse(
        t,
        name,
        sluice_workloads::replica_set::check(rs)
            .map_err(|e| e.field_and_message())
            .and_then(|()| template(rs.spec.template.as_ref(), &rs.metadata.namespace)),
    )
}

/// The 422 for a refusal, unless `t` is a subresource (a status write
/// leaves the spec as stored).
fn refuse(t: &Target, name: &str, checked: Result<(), Refusal>) -> Result<(), ApiError> {
    match checked {
        Err((field, message)) if t.subresource.is_none() => Err(invalid(t, name, &field, &message)),
        _ => Ok(()),
    }
}

/// A workload's template: the pod it makes, checked as that pod would be.
fn template(t: Option<&PodTemplateSpec>, namespace: &Option<String>) -> Result<(), Refusal> {
    let Some(t) = t else {
        return Ok(());
    };
    let mut metadata = t.metadata.clone().unwrap_or_default();
    metadata.namespace.clone_from(namespace);
    let p = Pod {
        metadata,
        spec: t.spec.clone(),
        status: None,
    };
    pod_spec(&p, "spec.template.")
}

/// A pod, `prefix` before each field path (`spec.template.` in a
/// template).
fn pod_spec(p: &Pod, prefix: &str) -> Result<(), Refusal> {
    let at = |field: &str| format!("{prefix}{field}");
    let empty = PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty);
    if spec.containers.is_empty() {
        return Err((
            at("spec.containers"),
            "required: at least one container".into(),
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    let inits = spec.init_containers.iter().flatten();
    let all = inits
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(
            spec.containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
        );
    for (path, c) in all {
        if c.name.is_empty() {
            return Err((at(&format!("{path}.name")), "required".into()));
        }
        if !names.insert(c.name.as_str()) {
            return Err((
                at(&format!("{path}.name")),
                format!("duplicate value {:?}", c.name),
            ));
        }
        within_limits(c).map_err(|(f, m)| (at(&format!("{path}.{f}")), m))?;
    }
    // Everything the scheduler reads: quantities (none negative), node
    // affinity, tolerations, spread constraints, pod (anti-)affinity.
    sluice_scheduler::check_pod(p).map_err(|e| (at(&e.field), e.message))
}

/// Each request at most its limit, and no limit negative, as
/// kube-apiserver has them.
fn within_limits(c: &Container) -> Result<(), Refusal> {
    let Some(res) = c.resources.as_ref() else {
        return Ok(());
    };
    let read = |field: String, q: &Quantity| milli(q).map_err(|e| (field.clone(), e.to_string()));
    for (name, q) in res.limits.iter().flatten() {
        let limit = read(format!("resources.limits.{name}"), q)?;
        if limit < 0 {
            return Err((
                format!("resources.limits.{name}"),
                format!("{:?} must be greater than or equal to 0", q.0),
            ));
        }
        let Some(rq) = res.requests.as_ref().and_then(|m| m.get(name)) else {
            continue;
        };
        let field = format!("resources.requests.{name}");
        if read(field.clone(), rq)? > limit {
            return Err((
                field,
                format!(
                    "{:?} must be less than or equal to {name} limit of {:?}",
                    rq.0, q.0
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;
    use serde_json::{json, Value};
    use sluice_model::decode::FieldValidation;

    /// What `fields::check` (which calls these) says of `obj` written to
    /// `path`.
    fn check(t: &Target, obj: &Value) -> Result<(), ApiError> {
        crate::fields::check(t, &mut obj.clone(), FieldValidation::Strict, None).map(drop)
    }

    fn refusal(path: &str, obj: Value) -> (String, String) {
        let t = resolve(path).expect("path");
        let e = check(&t, &obj).expect_err("refused");
        let body = e.body();
        assert_eq!(body["code"], 422, "{body}");
        let cause = &body["details"]["causes"][0];
        (
            cause["field"].as_str().unwrap_or_default().to_string(),
            body["message"].as_str().unwrap_or_default().to_string(),
        )
    }

    fn pod_with(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    }

    const PODS: &str = "/api/v1/namespaces/default/pods";

    #[test]
    fn pods_the_scheduler_could_not_read_or_kube_apiserver_refuses() {
        for (spec, field, words) in [
            // Where kube-apiserver's validation has the rule, its field
            // and words come first.
            (json!({"containers": []}), "spec.containers", "Required value"),
            (
                json!({"containers": [{"name": "c", "image": "x"}, {"name": "c", "image": "x"}]}),
                "spec.containers[1].name",
                "Duplicate value",
            ),
            (
                json!({"initContainers": [{"name": "c", "image": "x"}], "containers": [{"name": "c", "image": "x"}]}),
                "spec.initContainers[0].name",
                "Duplicate value",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "-1"}}}]}),
                "spec.containers[0].resources.requests[cpu]",
                "greater than or equal to 0",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}),
                "spec.containers[0].resources.requests",
                "less than or equal to cpu limit",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"limits": {"memory": "-1Gi"}}}]}),
                "spec.containers[0].resources.limits[memory]",
                "greater than or equal to 0",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x"}], "topologySpreadConstraints": [{"maxSkew": 0,
                    "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
                "spec.topologySpreadConstraints[0].maxSkew",
                "must be greater than zero",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x"}], "affinity": {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "", "labelSelector": {"matchLabels": {"a": "b"}}}]}}}),
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                "can not be empty",
            ),
        ] {
            let (f, m) = refusal(PODS, pod_with(spec.clone()));
            assert_eq!(f, field, "{spec}: {m}");
            assert!(m.contains(words), "{spec}: {m}");
        }
        let t = resolve(PODS).expect("path");
        let fine = pod_with(
            json!({"containers": [{"name": "c", "image": "x", "resources":
            {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}),
        );
        check(&t, &fine).expect("a valid pod");
    }

    #[test]
    fn a_status_write_does_not_check_the_spec() {
        let t = resolve("/api/v1/namespaces/default/pods/p/status").expect("path");
        check(&t, &pod_with(json!({"containers": []}))).expect("status only");
    }

    fn deployment(strategy: Value, template_spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "default"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "strategy": strategy,
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": template_spec}}})
    }

    #[test]
    fn workloads_the_controllers_could_not_act_on_are_refused() {
        const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
        let c = json!({"containers": [{"name": "c", "image": "x"}]});
        let (f, m) = refusal(
            DEPLOYMENTS,
            deployment(
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
                c.clone(),
            ),
        );
        assert_eq!(f, "spec.strategy.rollingUpdate.maxUnavailable", "{m}");
        assert!(m.contains("may not be 0 when `maxSurge` is 0"), "{m}");
        // The template is checked as the pod it makes.
        let (f, _) = refusal(
            DEPLOYMENTS,
            deployment(
                json!({}),
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "-2"}}}]}),
            ),
        );
        assert_eq!(
            f,
            "spec.template.spec.containers[0].resources.requests[cpu]"
        );
        let mut neg = deployment(json!({}), c.clone());
        neg["spec"]["replicas"] = json!(-1);
        assert_eq!(refusal(DEPLOYMENTS, neg).0, "spec.replicas");
        let t = resolve(DEPLOYMENTS).expect("path");
        check(&t, &deployment(json!({}), c.clone())).expect("valid");

        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "other"}}, "spec": c}}});
        let (f, _) = refusal("/apis/apps/v1/namespaces/default/replicasets", rs);
        assert_eq!(f, "spec.template.metadata.labels");
    }
}
