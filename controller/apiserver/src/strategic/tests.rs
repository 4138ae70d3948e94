use super::*;
use serde_json::json;

fn patched(kind: &str, mut obj: Value, patch: Value) -> Value {
    apply(kind, &mut obj, &patch).unwrap();
    obj
}

fn deployment() -> Value {
    json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "a", "image": "x:1", "ports": [{"containerPort": 80}],
         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"name": "b", "image": "y:1"},
    ]}}}})
}

#[test]
fn kubectl_apply_changes_one_container_by_name() {
    // What kubectl 1.37's client-side apply sent for an image change.
    let out = patched(
        "Deployment",
        deployment(),
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"image": "x:4", "name": "a"}]}}}}),
    );
    let c = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(c[0]["image"], "x:4");
    assert_eq!(
        c[0]["ports"][0]["containerPort"], 80,
        "merged, not replaced"
    );
    assert_eq!(c[1]["image"], "y:1");
    assert!(out["spec"]["template"]["spec"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with('$')));
}

#[test]
fn elements_are_added_deleted_and_reordered_by_key() {
    let out = patched(
        "Deployment",
        deployment(),
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
            "containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "z"}]}}}}),
    );
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "a"]);
}

#[test]
fn nested_lists_merge_by_their_own_keys() {
    let out = patched(
        "Deployment",
        deployment(),
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
             "$setElementOrder/env": [{"name": "A"}, {"name": "B"}, {"name": "C"}]}]}}}}),
    );
    let env = &out["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(
        env,
        &json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
    );
}

#[test]
fn lists_without_a_strategy_are_replaced_and_null_deletes() {
    let pod = json!({"spec": {"tolerations": [{"key": "a"}, {"key": "b"}], "nodeName": "n"}});
    let out = patched(
        "Pod",
        pod,
        json!({"spec": {"tolerations": [{"key": "c"}], "nodeName": null}}),
    );
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "c"}]));
    assert!(out["spec"].get("nodeName").is_none());
}

#[test]
fn scalar_sets_and_their_directives() {
    let obj = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = patched(
        "Pod",
        obj.clone(),
        json!({"metadata": {"finalizers": ["c", "a"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let out = patched(
        "Pod",
        obj.clone(),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    let out = patched(
        "Pod",
        obj,
        json!({"metadata": {"finalizers": [{"$patch": "replace"}, "z"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["z"]));
}

#[test]
fn map_directives_replace_delete_and_retain() {
    let obj = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                              "selector": {"matchLabels": {"a": "1"}}}});
    let out = patched(
        "Deployment",
        obj.clone(),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
    );
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let out = patched(
        "Deployment",
        obj.clone(),
        json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"b": "2"}}}}),
    );
    assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
    let out = patched(
        "Deployment",
        obj,
        json!({"spec": {"selector": {"$patch": "delete"}}}),
    );
    assert!(out["spec"].get("selector").is_none());
}

#[test]
fn conditions_merge_by_type_in_status() {
    let node = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}});
    let out = patched(
        "Node",
        node,
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    assert_eq!(out["status"]["conditions"][0]["status"], "False");
    assert_eq!(out["status"]["conditions"][1]["type"], "MemoryPressure");
}

#[test]
fn bad_patches_are_errors_naming_where_and_change_nothing_they_touch() {
    for (patch, words) in [
        (json!([1]), "must be a JSON object"),
        (json!({"spec": {"$patch": "explode"}}), "spec: $patch"),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            "spec.template.spec.containers: an element has no merge key \"name\"",
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": ["x"]}}}}),
            "elements must be objects",
        ),
        (
            json!({"spec": {"$frobnicate": 1}}),
            "unknown patch directive",
        ),
        (json!({"spec": {"$retainKeys": "type"}}), "must be a list"),
        (json!({"$patch": "delete"}), "whole object"),
    ] {
        let mut obj = deployment();
        let e = apply("Deployment", &mut obj, &patch).unwrap_err();
        assert!(e.contains(words), "{patch}: {e}");
    }
}

#[test]
fn a_new_field_is_stored_without_directives() {
    let out = patched(
        "Pod",
        json!({}),
        json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}],
                                        "$setElementOrder/env": []}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"containers": [{"name": "a", "env": []}]}})
    );
}

#[test]
fn long_lists_merge_by_key_with_duplicates_and_deletes() {
    // 20 000 elements on each side: linear work (a hostile 3 MiB patch is
    // about this size), and every element lands once.
    let n = 20_000;
    let target = json!({"metadata": {"finalizers": (0..n).map(|i| format!("f{i}")).collect::<Vec<_>>()},
        "spec": {"containers": (0..n).map(|i| json!({"name": format!("c{i}"), "image": "x"})).collect::<Vec<_>>()}});
    let mut ops: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("c{}", i + n / 2), "image": "y"}))
        .collect();
    ops.push(json!({"name": "c0", "$patch": "delete"}));
    let order: Vec<Value> = (0..n + n / 2)
        .rev()
        .map(|i| json!({"name": format!("c{i}")}))
        .collect();
    let out = patched(
        "Pod",
        target,
        json!({"metadata": {"finalizers": (0..n).map(|i| format!("f{}", i + n / 2)).collect::<Vec<_>>()},
               "spec": {"containers": ops, "$setElementOrder/containers": order}}),
    );
    let c = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(c.len(), n + n / 2 - 1);
    assert_eq!(c[0]["name"], format!("c{}", n + n / 2 - 1));
    assert_eq!(c[c.len() - 1]["name"], "c1");
    assert_eq!(c[c.len() - 1]["image"], "x");
    assert_eq!(c[0]["image"], "y");
    assert_eq!(
        out["metadata"]["finalizers"].as_array().unwrap().len(),
        n + n / 2
    );
}
