use super::*;
use axum::http::HeaderValue;

fn now() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

fn accept(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
    h
}

const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

#[test]
fn kubectl_get_is_served_a_table_and_plain_clients_objects() {
    let q = HashMap::new();
    assert_eq!(
        negotiate(&accept(KUBECTL_GET), &q).unwrap(),
        Shape::Table {
            version: "v1",
            include: Include::Metadata
        }
    );
    assert_eq!(negotiate(&HeaderMap::new(), &q).unwrap(), Shape::Object);
    assert_eq!(
        negotiate(&accept("application/json, */*"), &q).unwrap(),
        Shape::Object
    );
    // An unknown Table version is skipped for the next acceptable range.
    assert_eq!(
        negotiate(
            &accept("application/json;as=Table;v=v9;g=meta.k8s.io,application/json"),
            &q
        )
        .unwrap(),
        Shape::Object
    );
    assert_eq!(
        negotiate(
            &accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            &q
        )
        .unwrap(),
        Shape::Metadata { version: "v1" }
    );
}

#[test]
fn what_cannot_be_produced_is_a_406_naming_what_can() {
    let q = HashMap::new();
    for a in [
        "application/vnd.kubernetes.protobuf",
        "text/html",
        "application/json;as=Table;g=apps;v=v1",
    ] {
        let e = negotiate(&accept(a), &q).unwrap_err();
        let body = e.body();
        assert_eq!(body["code"], 406, "{a}");
        assert!(
            body["message"].as_str().unwrap().contains("as=Table"),
            "{a}"
        );
    }
    let mut q = HashMap::new();
    q.insert("includeObject".to_string(), "Everything".to_string());
    let e = negotiate(&accept(KUBECTL_GET), &q).unwrap_err();
    assert_eq!(e.body()["code"], 400);
}

fn pods() -> Value {
    json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "42", "continue": "abc"},
        "items": [
            {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "40",
                          "creationTimestamp": "2026-11-23T11:59:00Z", "labels": {"app": "web"}},
             "spec": {"containers": [{"name": "c"}], "nodeName": "node-a"},
             "status": {"phase": "Running", "podIPs": [{"ip": "198.18.1.5"}],
                        "containerStatuses": [{"ready": true, "state": {"running": {}}}]}},
            {"metadata": {"name": "b", "namespace": "default", "resourceVersion": "41"},
             "spec": {"containers": [{"name": "c"}]}},
        ],
    })
}

#[test]
fn a_list_becomes_rows_with_the_lists_revision_and_continue() {
    let shape = Shape::Table {
        version: "v1",
        include: Include::Metadata,
    };
    let t = convert(pods(), "Pod", shape, now());
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        t["metadata"],
        json!({"resourceVersion": "42", "continue": "abc"})
    );
    let heads: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(&heads[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][5]["priority"], 1);
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0]["cells"],
        json!([
            "a",
            "1/1",
            "Running",
            "0",
            "60s",
            "198.18.1.5",
            "node-a",
            "<none>",
            "<none>"
        ])
    );
    // The row's object is the metadata: kubectl's NAMESPACE column and
    // --show-labels read it.
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["labels"]["app"], "web");
    assert_eq!(rows[1]["cells"][2], "Pending");

    let bare = convert(
        pods(),
        "Pod",
        Shape::Table {
            version: "v1beta1",
            include: Include::None,
        },
        now(),
    );
    assert_eq!(bare["apiVersion"], "meta.k8s.io/v1beta1");
    assert!(bare["rows"][0].get("object").is_none());
    let whole = convert(
        pods(),
        "Pod",
        Shape::Table {
            version: "v1",
            include: Include::Object,
        },
        now(),
    );
    assert_eq!(whole["rows"][0]["object"]["spec"]["nodeName"], "node-a");
}

#[test]
fn one_object_is_a_one_row_table_at_its_revision() {
    let pod = pods()["items"][0].clone();
    let t = convert(
        pod,
        "Pod",
        Shape::Table {
            version: "v1",
            include: Include::Metadata,
        },
        now(),
    );
    assert_eq!(t["metadata"]["resourceVersion"], "40");
    assert_eq!(t["rows"].as_array().unwrap().len(), 1);
}

#[test]
fn metadata_only_keeps_metadata_and_the_list_revision() {
    let shape = Shape::Metadata { version: "v1" };
    let l = convert(pods(), "Pod", shape, now());
    assert_eq!(l["kind"], "PartialObjectMetadataList");
    assert_eq!(l["metadata"]["resourceVersion"], "42");
    assert_eq!(l["items"][1]["metadata"]["name"], "b");
    assert!(l["items"][0].get("spec").is_none());
    let one = convert(pods()["items"][0].clone(), "Pod", shape, now());
    assert_eq!(one["kind"], "PartialObjectMetadata");
}

#[test]
fn watch_events_convert_but_errors_pass_and_bookmarks_keep_their_revision() {
    let shape = Shape::Table {
        version: "v1",
        include: Include::Metadata,
    };
    let added =
        serde_json::to_vec(&json!({"type": "ADDED", "object": pods()["items"][0]})).unwrap();
    let out: Value =
        serde_json::from_slice(&convert_event(&added, "Pod", shape, now()).unwrap()).unwrap();
    assert_eq!(out["type"], "ADDED");
    assert_eq!(out["object"]["kind"], "Table");
    assert_eq!(out["object"]["rows"][0]["cells"][0], "a");
    // Every event carries the columns: kubectl prints the header once.
    assert!(!out["object"]["columnDefinitions"]
        .as_array()
        .unwrap()
        .is_empty());

    let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
    let out: Value =
        serde_json::from_slice(&convert_event(error, "Pod", shape, now()).unwrap()).unwrap();
    assert_eq!(out["object"]["code"], 410);

    let bm = br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"77"}}}"#;
    let out: Value =
        serde_json::from_slice(&convert_event(bm, "Pod", shape, now()).unwrap()).unwrap();
    assert_eq!(out["object"]["metadata"]["resourceVersion"], "77");
    assert_eq!(out["object"]["rows"], json!([]));

    assert!(convert_event(b"not json", "Pod", shape, now()).is_none());
}
