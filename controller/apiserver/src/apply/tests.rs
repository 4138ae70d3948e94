//! Server-side apply's rules, without a server. No SPEC rule covers this
//! area; each test names the behaviour, as kube-apiserver shows it.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::fieldset::{PathElement, Set};
use super::managed::{self, Operation};
use super::merge::{compare, field_set, merge, remove};
use super::*;
use crate::meta::MAX_DEPTH;
use crate::path::resolve;

const NOW: &str = "2026-11-23T10:00:00Z";
const LATER: &str = "2026-11-23T10:05:00Z";

fn writer(manager: &str, force: bool) -> Writer {
    Writer {
        manager: manager.into(),
        force,
        now: NOW.into(),
    }
}

fn target(path: &str) -> Target {
    resolve(path).expect("path")
}

fn deployment_target() -> Target {
    target("/apis/apps/v1/namespaces/default/deployments/web")
}

fn deployment(replicas: i64, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}]}
            ]}}
        }
    })
}

/// Apply `config` as `manager` to `live`.
fn apply_as(
    manager: &str,
    force: bool,
    live: Option<&Value>,
    config: &Value,
) -> Result<Value, ApiError> {
    let t = deployment_target();
    let w = writer(manager, force);
    apply(&Request::new(&t, false, &w), live, config)
}

/// `live` with replicas set to `replicas` by `manager`'s apply.
fn reapply(manager: &str, force: bool, live: &Value, replicas: i64) -> Result<Value, ApiError> {
    apply_as(
        manager,
        force,
        Some(live),
        &deployment(replicas, json!({"app": "web"})),
    )
}

/// A deployment created by kubectl's server-side apply.
fn fresh() -> Value {
    apply_as(
        "kubectl",
        false,
        None,
        &deployment(1, json!({"app": "web"})),
    )
    .expect("apply")
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], manager: &str, operation: &str) -> Option<&'a Value> {
    entries
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn field(path: &[&str]) -> Vec<PathElement> {
    path.iter()
        .map(|p| PathElement::Field(p.to_string()))
        .collect()
}

#[test]
fn fields_v1_is_written_and_read_as_kube_apiserver_writes_it() {
    let mut s = Set::new();
    s.insert(&field(&["metadata", "labels", "app"]));
    s.insert(&field(&["metadata", "labels"]));
    let c = PathElement::Key(r#"{"name":"c"}"#.into());
    let containers = field(&["spec", "containers"]);
    let mut elem = containers.clone();
    elem.push(c.clone());
    s.insert(&elem);
    let mut image = elem.clone();
    image.push(PathElement::Field("image".into()));
    s.insert(&image);
    let mut fin = field(&["metadata", "finalizers"]);
    fin.push(PathElement::Value(r#""a/b""#.into()));
    s.insert(&fin);
    let v1 = s.to_fields_v1();
    assert_eq!(
        v1,
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:finalizers": {"v:\"a/b\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}
        })
    );
    assert_eq!(Set::from_fields_v1(&v1), Ok(s.clone()));
    assert!(s.has(&image) && s.has(&elem) && !s.has(&containers));
    // Keys are read in any order and spacing, and written canonically.
    let loose = json!({"f:spec": {"f:ports": {"k:{ \"protocol\": \"TCP\", \"port\": 80 }": {}}}});
    assert_eq!(
        Set::from_fields_v1(&loose).map(|s| s.to_fields_v1()),
        Ok(json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {}}}}))
    );
}

#[test]
fn malformed_fields_v1_is_refused_not_a_panic() {
    for bad in [
        json!([]),
        json!({"f:a": 1}),
        json!({"x:a": {}}),
        json!({"k:[1]": {}}),
        json!({"k:{": {}}),
        json!({"i:-1": {}}),
        json!({"é": {}}),
        json!({"f": {}}),
    ] {
        assert!(Set::from_fields_v1(&bad).is_err(), "{bad}");
    }
    let deep = (0..MAX_DEPTH + 2).fold(json!({}), |v, _| json!({ "f:a": v }));
    assert!(Set::from_fields_v1(&deep).is_err());
}

#[test]
fn applied_fields_are_recorded_in_upstream_form() {
    // kube-apiserver's Apply entry for this configuration: atomic
    // selector as a leaf, containers by name, ports by containerPort and
    // the defaulted protocol, labels' entries without the map itself.
    let set = field_set("Deployment", &deployment(2, json!({"app": "web"}))).expect("set");
    let obj = set.difference(&server_owned()).to_fields_v1();
    assert_eq!(
        obj,
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        })
    );
}

#[test]
fn apply_creates_the_object_with_one_apply_entry_per_manager() {
    let config = deployment(2, json!({"app": "web"}));
    let created = apply_as("kubectl", false, None, &config).expect("apply");
    let again = apply_as("kubectl", false, Some(&created), &config).expect("again");
    let e = entries(&again);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0]["manager"], "kubectl");
    assert_eq!(e[0]["operation"], "Apply");
    assert_eq!(e[0]["apiVersion"], "apps/v1");
    assert_eq!(e[0]["fieldsType"], "FieldsV1");
    assert!(e[0].get("subresource").is_none());
    assert_eq!(e[0]["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
}

#[test]
fn apply_removes_fields_the_manager_stops_applying() {
    let big = deployment(2, json!({"app": "web", "tier": "front"}));
    let live = apply_as("kubectl", false, None, &big).expect("apply");
    let mut small = deployment(2, json!({"app": "web"}));
    small["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("replicas");
    let out = apply_as("kubectl", false, Some(&live), &small).expect("reapply");
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}), "{out}");
    assert!(out["spec"].get("replicas").is_none(), "{out}");
    let fields = &entries(&out)[0]["fieldsV1"];
    assert!(fields["f:spec"].get("f:replicas").is_none(), "{fields}");
    // An element of an associative list the manager stops applying goes
    // whole; the others stay in their order.
    let mut two = deployment(2, json!({"app": "web"}));
    two["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]);
    let live = apply_as("kubectl", false, Some(&out), &two).expect("two");
    let mut one = two.clone();
    one["spec"]["template"]["spec"]["containers"] = json!([{"name": "b", "image": "y:1"}]);
    let out = apply_as("kubectl", false, Some(&live), &one).expect("one");
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "b", "image": "y:1"}])
    );
}

#[test]
fn apply_keeps_fields_another_manager_owns_when_it_stops_applying_them() {
    let config = deployment(2, json!({"app": "web", "tier": "front"}));
    let live = apply_as("kubectl", false, None, &config).expect("apply");
    // A second applier shares the tier label (same value: no conflict).
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"tier": "front"}}});
    let shared = apply_as("other", false, Some(&live), &other).expect("shared");
    let e = entries(&shared);
    assert!(entry(&e, "other", "Apply").is_some(), "{e:?}");
    let smaller = deployment(2, json!({"app": "web"}));
    let out = apply_as("kubectl", false, Some(&shared), &smaller).expect("smaller");
    assert_eq!(out["metadata"]["labels"]["tier"], "front", "{out}");
    let e = entries(&out);
    let mine = entry(&e, "kubectl", "Apply").expect("kubectl");
    assert!(mine["fieldsV1"]["f:metadata"]["f:labels"]
        .get("f:tier")
        .is_none());
    let theirs = entry(&e, "other", "Apply").expect("other");
    assert!(theirs["fieldsV1"]["f:metadata"]["f:labels"]
        .get("f:tier")
        .is_some());
}

#[test]
fn apply_conflicts_on_a_field_another_manager_owns_and_force_takes_it() {
    // Created by client-side kubectl: an Update entry owns replicas.
    let t = deployment_target();
    let w = writer("kubectl-client-side-apply", false);
    let mut created = deployment(1, json!({"app": "web"}));
    record_update(&Request::new(&t, false, &w), None, &mut created);
    let e = entries(&created);
    let csa = entry(&e, "kubectl-client-side-apply", "Update").expect("update entry");
    assert_eq!(csa["time"], NOW);
    assert_eq!(csa["fieldsV1"]["f:spec"]["f:replicas"], json!({}));

    let err = reapply("ssa", false, &created, 3).expect_err("conflict");
    assert_eq!(err.code, StatusCode::CONFLICT);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        err.body()["details"]["causes"],
        json!([{"reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl-client-side-apply\" using apps/v1",
                "field": ".spec.replicas"}])
    );
    // The same value is no conflict: both own it.
    let same = reapply("ssa", false, &created, 1).expect("same value");
    let e = entries(&same);
    for m in ["ssa", "kubectl-client-side-apply"] {
        let owner = e.iter().find(|x| x["manager"] == m).expect("entry");
        assert_eq!(owner["fieldsV1"]["f:spec"]["f:replicas"], json!({}), "{m}");
    }
    // force=true takes it over.
    let forced = reapply("ssa", true, &created, 3).expect("forced");
    assert_eq!(forced["spec"]["replicas"], 3);
    let e = entries(&forced);
    let csa = entry(&e, "kubectl-client-side-apply", "Update").expect("update entry");
    assert!(
        csa["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "{csa}"
    );
    assert_eq!(
        entry(&e, "ssa", "Apply").expect("ssa")["fieldsV1"]["f:spec"]["f:replicas"],
        json!({})
    );
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let first = apply_as(
        "a",
        false,
        None,
        &deployment(1, json!({"app": "web", "x": "1"})),
    )
    .expect("a");
    let err = apply_as(
        "b",
        false,
        Some(&first),
        &deployment(2, json!({"app": "web", "x": "2"})),
    )
    .expect_err("conflicts");
    assert_eq!(
        err.message,
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .metadata.labels.x\n- .spec.replicas"
    );
    assert_eq!(
        err.body()["details"]["causes"].as_array().map(Vec::len),
        Some(2)
    );
}

#[test]
fn updates_take_the_fields_they_change_from_appliers() {
    let t = deployment_target();
    let live = fresh();
    // kubectl scale-like update of replicas by another manager.
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(5);
    let w = Writer {
        now: LATER.into(),
        ..writer("kubectl-edit", false)
    };
    record_update(&Request::new(&t, false, &w), Some(&live), &mut new);
    let e = entries(&new);
    let edit = entry(&e, "kubectl-edit", "Update").expect("edit");
    assert_eq!(edit["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(edit["time"], LATER);
    let kubectl = entry(&e, "kubectl", "Apply").expect("kubectl");
    assert!(kubectl["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    // Appliers first, as kube-apiserver sorts them.
    assert_eq!(e[0]["operation"], "Apply");
    // An update that changes nothing records nothing.
    let mut same = new.clone();
    record_update(&Request::new(&t, false, &w), Some(&new), &mut same);
    assert_eq!(same, new);
    // A removed field leaves every manager.
    let mut gone = new.clone();
    gone["metadata"]["labels"] = json!({});
    record_update(&Request::new(&t, false, &w), Some(&new), &mut gone);
    let e = entries(&gone);
    let kubectl = entry(&e, "kubectl", "Apply").expect("kubectl");
    assert!(
        kubectl["fieldsV1"]["f:metadata"].get("f:labels").is_none(),
        "{kubectl}"
    );
}

#[test]
fn a_create_records_its_manager_and_objects_it_adds_own_themselves() {
    let t = deployment_target();
    let w = writer("kubectl-create", false);
    let mut obj = deployment(1, json!({"app": "web"}));
    obj["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": 1}});
    record_update(&Request::new(&t, false, &w), None, &mut obj);
    let f = &entries(&obj)[0]["fieldsV1"];
    assert_eq!(f["f:metadata"]["f:labels"], json!({".": {}, "f:app": {}}));
    // As from kube-apiserver, whose zero Deployment holds spec, template,
    // its metadata and spec, strategy and a null containers list.
    assert!(f["f:spec"].get(".").is_none(), "{f}");
    let template = &f["f:spec"]["f:template"];
    assert!(template.get(".").is_none(), "{f}");
    assert!(template["f:spec"].get(".").is_none(), "{f}");
    assert!(template["f:spec"]["f:containers"].get(".").is_none(), "{f}");
    assert!(template["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]
        .get(".")
        .is_some());
    assert_eq!(
        f["f:spec"]["f:strategy"],
        json!({"f:rollingUpdate": {".": {}, "f:maxSurge": {}}})
    );
    assert!(f.get("f:apiVersion").is_none() && f["f:metadata"].get("f:name").is_none());
}

#[test]
fn sent_managed_fields_are_taken_when_they_decode_and_ignored_when_not() {
    let t = deployment_target();
    let w = writer("kubectl-patch", false);
    let live = fresh();
    // kubectl's client-side-apply upgrade rewrites the entries with a
    // JSON patch: taken as sent.
    let mut rewritten = live.clone();
    rewritten["metadata"]["managedFields"][0]["manager"] = json!("renamed");
    record_update(&Request::new(&t, false, &w), Some(&live), &mut rewritten);
    assert_eq!(entries(&rewritten)[0]["manager"], "renamed");
    // Entries that do not decode are replaced by the live ones.
    for bad in [
        json!([{"manager": "x", "operation": "Delete", "apiVersion": "v1", "fieldsType": "FieldsV1"}]),
        json!([{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1"}]),
        json!([{"manager": "x", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV2"}]),
        json!([{"manager": "x", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"bad": {}}}]),
        json!("not a list"),
    ] {
        let mut new = live.clone();
        new["metadata"]["managedFields"] = bad.clone();
        record_update(&Request::new(&t, false, &w), Some(&live), &mut new);
        assert_eq!(entries(&new), entries(&live), "{bad}");
    }
    // `[]` or `[{}]` clears them; the object is untracked after.
    for reset in [json!([]), json!([{}])] {
        let mut new = live.clone();
        new["metadata"]["managedFields"] = reset;
        record_update(&Request::new(&t, false, &w), Some(&live), &mut new);
        assert!(new["metadata"].get("managedFields").is_none(), "{new}");
    }
    // The status subresource never takes sent entries.
    let mut new = live.clone();
    new["metadata"]["managedFields"][0]["manager"] = json!("renamed");
    record_update(&Request::new(&t, true, &w), Some(&live), &mut new);
    assert_eq!(entries(&new), entries(&live));
}

#[test]
fn status_belongs_to_the_status_subresource_only() {
    let t = deployment_target();
    let live = fresh();
    let mut with_status = live.clone();
    with_status["status"] = json!({"replicas": 1});
    let w = writer("kube-controller-manager", false);
    let mut main = with_status.clone();
    record_update(&Request::new(&t, false, &w), Some(&live), &mut main);
    assert_eq!(
        entries(&main),
        entries(&live),
        "the main resource owns no status"
    );
    record_update(&Request::new(&t, true, &w), Some(&live), &mut with_status);
    let e = entries(&with_status);
    let s = entry(&e, "kube-controller-manager", "Update").expect("status entry");
    assert_eq!(s["subresource"], "status");
    assert_eq!(
        s["fieldsV1"],
        json!({"f:status": {".": {}, "f:replicas": {}}})
    );
}

#[test]
fn an_untracked_object_belongs_to_before_first_apply() {
    let mut live = deployment(1, json!({"app": "web"}));
    live["metadata"]["uid"] = json!("u");
    let err = reapply("kubectl", false, &live, 4).expect_err("conflict");
    assert!(
        err.message
            .contains("conflict with \"before-first-apply\" using apps/v1: .spec.replicas"),
        "{}",
        err.message
    );
    let ok = reapply("kubectl", false, &live, 1).expect("same values");
    let e = entries(&ok);
    assert!(entry(&e, BEFORE_FIRST_APPLY, "Update").is_some(), "{e:?}");
    // An update of an untracked object leaves it untracked.
    let t = deployment_target();
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(2);
    record_update(
        &Request::new(&t, false, &writer("x", false)),
        Some(&live),
        &mut new,
    );
    assert!(new["metadata"].get("managedFields").is_none());
}

#[test]
fn kubectl_takes_over_fields_client_side_apply_set_as_the_annotation_says() {
    let t = deployment_target();
    let csa = deployment(1, json!({"app": "web"}));
    let mut live = csa.clone();
    live["metadata"]["annotations"] = json!({LAST_APPLIED: canonical(&csa)});
    record_update(
        &Request::new(&t, false, &writer("kubectl-client-side-apply", false)),
        None,
        &mut live,
    );
    let changed = deployment(3, json!({"app": "web"}));
    // Another manager name has no such upgrade.
    assert!(apply_as("other", false, Some(&live), &changed).is_err());
    let out = apply_as("kubectl", false, Some(&live), &changed).expect("upgrade");
    assert_eq!(out["spec"]["replicas"], 3);
    let annotation = out["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .expect("annotation");
    let kept: Value = serde_json::from_str(annotation).expect("json");
    assert_eq!(kept["spec"]["replicas"], 3, "{annotation}");
    // A field whose live value differs from the annotation still conflicts.
    let mut drifted = live.clone();
    drifted["spec"]["replicas"] = json!(2);
    assert!(apply_as("kubectl", false, Some(&drifted), &changed).is_err());
}

#[test]
fn configurations_that_name_another_object_or_kind_are_refused() {
    let live = fresh();
    let mut other = deployment(1, json!({}));
    other["metadata"]["name"] = json!("db");
    let e = apply_as("kubectl", false, Some(&live), &other).expect_err("name");
    assert_eq!(e.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        e.message,
        "the name of the object (db) does not match the name on the URL (web)"
    );
    let mut ns = deployment(1, json!({}));
    ns["metadata"]["namespace"] = json!("prod");
    let e = apply_as("kubectl", false, None, &ns).expect_err("namespace");
    assert!(
        e.message.contains("namespace of the object (prod)"),
        "{}",
        e.message
    );
    for (field, bad, message) in [
        (
            "apiVersion",
            Value::Null,
            "invalid object type: /, Kind=Deployment",
        ),
        ("kind", Value::Null, "invalid object type: apps/v1, Kind="),
        (
            "apiVersion",
            json!("apps/v2"),
            "invalid object type: apps/v2, Kind=Deployment",
        ),
    ] {
        let mut c = deployment(1, json!({}));
        c[field] = bad;
        let e = apply_as("kubectl", false, None, &c).expect_err("gvk");
        assert_eq!(
            (e.code, e.message.as_str()),
            (StatusCode::BAD_REQUEST, message)
        );
    }
    let mut mf = deployment(1, json!({}));
    mf["metadata"]["managedFields"] = json!([]);
    let e = apply_as("kubectl", false, None, &mf).expect_err("managedFields");
    assert_eq!(e.message, "metadata.managedFields must be nil");
    let e = apply_as("kubectl", false, None, &json!([1])).expect_err("not an object");
    assert_eq!(e.code, StatusCode::BAD_REQUEST);
    // Associative lists must name each element by its keys, once.
    for containers in [
        json!([{"image": "x"}]),
        json!([{"name": "a"}, {"name": "a"}]),
    ] {
        let mut c = deployment(1, json!({}));
        c["spec"]["template"]["spec"]["containers"] = containers;
        let e = apply_as("kubectl", false, None, &c).expect_err("keys");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.contains(".spec.template.spec.containers"),
            "{}",
            e.message
        );
    }
}

#[test]
fn merged_lists_keep_the_configuration_order_and_live_elements_in_place() {
    let live = json!({"spec": {"containers": [
        {"name": "a", "image": "1"}, {"name": "x", "image": "live-only"}, {"name": "b", "image": "1"}]}});
    let config = json!({"spec": {"containers": [
        {"name": "b", "image": "2"}, {"name": "c", "image": "new"}, {"name": "a", "image": "2"}]}});
    let out = merge("Pod", &live, &config).expect("merge");
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["x", "b", "c", "a"]);
    assert_eq!(out["spec"]["containers"][1]["image"], "2");
    // Atomic lists are replaced, set lists merged, nulls unset a field.
    let live = json!({"metadata": {"finalizers": ["a"]}, "spec": {"tolerations": [{"key": "k"}], "nodeName": "n"}});
    let config =
        json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [], "nodeName": null}});
    let out = merge("Pod", &live, &config).expect("merge");
    assert_eq!(
        out,
        json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"tolerations": []}})
    );
}

#[test]
fn comparisons_count_objects_that_appear_or_go() {
    let c = compare(
        "Pod",
        &json!({"spec": {"a": 1, "gone": {"x": 1}}}),
        &json!({"spec": {"a": 2, "new": {"y": 1}}}),
    )
    .expect("compare");
    let paths = |s: &Set| {
        s.paths()
            .iter()
            .map(|p| super::fieldset::path_string(p))
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&c.modified), [".spec.a"]);
    assert_eq!(paths(&c.added), [".spec.new", ".spec.new.y"]);
    assert_eq!(paths(&c.removed), [".spec.gone", ".spec.gone.x"]);
    let mut s = Set::new();
    s.insert(&field(&["spec", "a"]));
    let mut elem = field(&["spec", "containers"]);
    elem.push(PathElement::Key(r#"{"name":"b"}"#.into()));
    s.insert(&elem);
    let out = remove(
        "Pod",
        &json!({"spec": {"a": 1, "containers": [{"name": "a"}, {"name": "b"}]}}),
        &s,
    );
    assert_eq!(out, json!({"spec": {"containers": [{"name": "a"}]}}));
}

#[test]
fn writers_are_checked_as_kube_apiserver_checks_patch_options() {
    let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let ua = "kubectl/v1.37.1 (linux/amd64) kubernetes/abc";
    let e = super::writer("patch", true, &q(&[]), ua, NOW.into()).expect_err("no manager");
    assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        e.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let e =
        super::writer("patch", false, &q(&[("force", "true")]), ua, NOW.into()).expect_err("force");
    assert!(e.message.contains("force: Forbidden"), "{}", e.message);
    let long = "m".repeat(129);
    assert!(super::writer(
        "create",
        false,
        &q(&[("fieldManager", &long)]),
        ua,
        NOW.into()
    )
    .is_err());
    assert!(super::writer(
        "update",
        false,
        &q(&[("fieldManager", "a\u{1}")]),
        ua,
        NOW.into()
    )
    .is_err());
    let w = super::writer("create", false, &q(&[]), ua, NOW.into()).expect("writer");
    assert_eq!(w.manager, "kubectl", "the User-Agent's product");
    let w = super::writer(
        "patch",
        true,
        &q(&[("fieldManager", "m"), ("force", "true")]),
        ua,
        NOW.into(),
    )
    .expect("writer");
    assert_eq!((w.manager.as_str(), w.force), ("m", true));
}

#[test]
fn update_entries_past_ten_merge_into_ancient_changes() {
    let mut m = managed::Managed::new();
    for i in 0..12 {
        let mut s = Set::new();
        s.insert(&field(&["spec", &format!("f{i}")]));
        m.insert(
            managed::ManagerId::new(&format!("m{i:02}"), Operation::Update, "v1", ""),
            managed::Entry {
                api_version: "v1".into(),
                time: Some(format!("2026-01-01T00:00:{i:02}Z")),
                set: s,
            },
        );
    }
    managed::cap_updates(&mut m, managed::MAX_UPDATE_MANAGERS);
    assert_eq!(m.len(), 10);
    let ancient = m
        .iter()
        .find(|(id, _)| id.manager == managed::ANCIENT_CHANGES)
        .map(|(_, e)| e.set.paths().len());
    assert_eq!(ancient, Some(3), "the three oldest, merged");
}

#[test]
fn hostile_nesting_is_refused_not_a_stack_overflow() {
    let deep = (0..MAX_DEPTH + 5).fold(json!(1), |v, _| json!({ "a": v }));
    let config =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": deep});
    assert!(field_set("Pod", &config).is_err());
    assert!(compare("Pod", &json!({}), &config).is_err());
    assert!(merge("Pod", &json!({}), &config).is_err());
    let t = target("/api/v1/namespaces/default/pods/p");
    let w = writer("kubectl", false);
    let e = apply(&Request::new(&t, false, &w), None, &config).expect_err("too deep");
    assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
}

#[test]
fn an_apply_to_the_status_subresource_owns_only_status() {
    let t = deployment_target();
    let live = fresh();
    let w = writer("controller", false);
    // The spec it sends is not its business: no conflict with kubectl's
    // replicas, no ownership.
    let mut config = deployment(9, json!({"app": "web"}));
    config["status"] = json!({"replicas": 1});
    let out = apply(&Request::new(&t, true, &w), Some(&live), &config).expect("status apply");
    let e = entries(&out);
    let mine = entry(&e, "controller", "Apply").expect("entry");
    assert_eq!(mine["subresource"], "status");
    assert_eq!(mine["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
    assert_eq!(
        entry(&e, "kubectl", "Apply"),
        entries(&live).first(),
        "kubectl's entry is untouched"
    );
}
#[test]
fn force_must_be_a_boolean() {
    let ua = "kubectl/v1.37.1 (linux/amd64) kubernetes/abc";
    let w = |v: &str| {
        let q: HashMap<String, String> = [("fieldManager", "m"), ("force", v)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        super::writer("patch", true, &q, ua, NOW.into())
    };
    assert!(w("true").expect("true").force);
    assert!(w("1").expect("1").force);
    assert!(!w("false").expect("false").force);
    let e = w("maybe").map(|_| ()).expect_err("not a boolean");
    assert_eq!(e.code, StatusCode::BAD_REQUEST);
    assert!(e.message.contains("\"maybe\""), "{}", e.message);
}
