//! kube-apiserver's validation of the built-in kinds on every write of
//! the object itself (create, update, every patch format, server-side
//! apply, scale): the object defaulted as it will be stored, then
//! validated on create or against the stored object on update
//! (`sluice-apimachinery`), every broken rule in one 422. A refused
//! write stores nothing. Status writes keep the rules they had: only the
//! status moves through them, and the spec is the stored one.

use serde_json::Value;
use sluice_apimachinery::validation;

use super::defaults;
use super::meta::invalid_all;
use super::path::Target;
use super::status::ApiError;

/// Validate `obj` as written to `t`, replacing `old` when it is an
/// update.
pub fn admit(t: &Target, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
    let r = t.resource;
    if t.subresource.is_some() || !validation::validates(r.group, r.kind) {
        return Ok(());
    }
    // Validation reads the object as it will be stored: upstream
    // validates after defaulting, and a defaulted field left out by the
    // client is no error. The write itself defaults it again later.
    let mut new = obj.clone();
    defaults::apply(r.kind, &mut new, old.is_none());
    // The namespace is the request's, as upstream's REST layer sets it
    // before validating.
    if let (Some(ns), Some(m)) = (
        &t.namespace,
        new.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        m.entry("namespace")
            .or_insert_with(|| Value::String(ns.clone()));
    }
    // The stored object too, as kube-apiserver defaults what it reads
    // from storage: one stored before a default was added compares as
    // it reads now.
    let old = old.map(|o| {
        let mut o = o.clone();
        defaults::apply(r.kind, &mut o, false);
        o
    });
    let errs = validation::validate(r.group, r.kind, &new, old.as_ref());
    if errs.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(invalid_all(t, name, &errs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::resolve;
    use serde_json::json;

    #[test]
    fn every_error_is_one_cause_of_one_422() {
        let t = resolve("/api/v1/namespaces/default/services").expect("path");
        let svc = json!({"metadata": {"name": "bad", "namespace": "default"},
            "spec": {"type": "Foo", "ports": [{"port": 70000, "protocol": "TCPX"}]}});
        let e = admit(&t, None, &svc).expect_err("invalid");
        let body = e.body();
        assert_eq!(body["code"], 422);
        assert_eq!(body["reason"], "Invalid");
        assert_eq!(
            body["message"],
            "Service \"bad\" is invalid: [spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.ports[0].protocol: Unsupported value: \"TCPX\": supported values: \"SCTP\", \"TCP\", \"UDP\", spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive, spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"]"
        );
        let causes = body["details"]["causes"]
            .as_array()
            .expect("causes")
            .clone();
        // The target port defaults to the port, and is reported too.
        assert_eq!(causes.len(), 4);
        assert_eq!(
            causes[0],
            json!({"reason": "FieldValueInvalid", "field": "spec.ports[0].port",
                   "message": "Invalid value: 70000: must be between 1 and 65535, inclusive"})
        );
        assert_eq!(causes[3]["reason"], "FieldValueNotSupported");
        assert_eq!(body["details"]["kind"], "Service");
        assert_eq!(body["details"]["name"], "bad");
    }

    #[test]
    fn defaults_come_first_and_groups_name_the_kind() {
        // No protocol, type, session affinity or traffic policy: all
        // defaulted, none an error.
        let t = resolve("/api/v1/namespaces/default/services").expect("path");
        let svc = json!({"metadata": {"name": "ok", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}});
        admit(&t, None, &svc).expect("defaulted");
        let t = resolve("/apis/apps/v1/namespaces/default/deployments").expect("path");
        let d = json!({"metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "strategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {"a": "c"}},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                      "readinessProbe": {"httpGet": {"port": 80}}}]}}}});
        let e = admit(&t, None, &d).expect_err("labels");
        assert_eq!(
            e.message,
            "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"
        );
        let mut old = d.clone();
        old["spec"]["template"]["metadata"]["labels"]["a"] = json!("b");
        let mut new = old.clone();
        new["spec"]["selector"]["matchLabels"]["a"] = json!("c");
        new["spec"]["template"]["metadata"]["labels"]["a"] = json!("c");
        admit(&t, None, &old).expect("valid");
        let t = resolve("/apis/apps/v1/namespaces/default/deployments/d").expect("path");
        let e = admit(&t, Some(&old), &new).expect_err("selector");
        assert!(
            e.message.contains(
                "spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"c\"}}: field is immutable"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn status_writes_are_not_revalidated() {
        let t = resolve("/api/v1/namespaces/default/pods/p/status").expect("path");
        let p =
            json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}});
        admit(&t, Some(&p), &p).expect("status");
    }
}
