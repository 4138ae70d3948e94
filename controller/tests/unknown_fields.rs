//! `fieldValidation` end to end with the real kubectl: `Warn` and `Ignore`
//! store the object without its unknown fields (as kube-apiserver, which
//! keeps what its typed decoding read), `Warn` says so in a `Warning`
//! header kubectl prints, `Strict` refuses naming every one.

#[macro_use]
mod common;

use common::{ok, text, write, Backend, Server};
use serde_json::Value;

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: odd, namespace: default, labels: {app: odd}}
spec:
  colour: red
  containers: [{name: c, image: x, imagePullPolice: Always}]
";

fn pod(s: &Server) -> Value {
    pod_named(s, "odd")
}

fn unknown_fields_are_dropped_unless_strict(backend: Backend) {
    let s = Server::start(&format!("unknown-fields-{backend:?}"), backend);
    let f = write(&s, "pod.yaml", POD);

    let strict = s.kubectl("admin", &["create", "-f", &f]);
    assert!(!strict.status.success());
    let msg = text(&strict);
    for field in ["spec.colour", "spec.containers[0].imagePullPolice"] {
        assert!(msg.contains(&format!("unknown field \"{field}\"")), "{msg}");
    }

    let warned = s.kubectl("admin", &["create", "--validate=warn", "-f", &f]);
    assert!(warned.status.success(), "{}", text(&warned));
    let err = String::from_utf8_lossy(&warned.stderr);
    assert!(err.contains("unknown field \"spec.colour\""), "{err}");
    let stored = pod(&s);
    assert!(stored["spec"].get("colour").is_none(), "{stored}");
    assert!(stored["spec"]["containers"][0]
        .get("imagePullPolice")
        .is_none());
    assert_eq!(stored["spec"]["containers"][0]["image"], "x");

    // An update under Ignore: the known change made, the unknown gone,
    // nothing said.
    let f = write(&s, "pod2.yaml", &POD.replace("app: odd", "app: even"));
    let ignored = s.kubectl("admin", &["replace", "--validate=ignore", "-f", &f]);
    assert!(ignored.status.success(), "{}", text(&ignored));
    assert!(!String::from_utf8_lossy(&ignored.stderr).contains("unknown field"));
    let stored = pod(&s);
    assert_eq!(stored["metadata"]["labels"]["app"], "even");
    assert!(stored["spec"].get("colour").is_none(), "{stored}");

    // A merge patch of the status subresource without fieldValidation
    // (kube-apiserver's default, Warn): the unknown status field is gone.
    let status = r#"{"status":{"phase":"Running","mood":"happy"}}"#;
    let patched = s.kubectl(
        "admin",
        &[
            "patch",
            "pod",
            "odd",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
            "-v=8",
        ],
    );
    assert!(patched.status.success(), "{}", text(&patched));
    let stored = pod(&s);
    assert_eq!(stored["status"]["phase"], "Running");
    assert!(stored["status"].get("mood").is_none(), "{stored}");
}

/// A field twice in one body: `Strict` refuses naming its path, `Warn`
/// stores the last and says so, `Ignore` stores the last quietly (kube-
/// apiserver's duplicate-field handling).
fn duplicate_fields_are_named(backend: Backend) {
    let s = Server::start(&format!("dup-fields-{backend:?}"), backend);
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"twice","namespace":"default","labels":{"a":"1","a":"2"}},
        "spec":{"containers":[{"name":"c","image":"x","image":"y"}]}}"#;
    let f = write(&s, "twice.json", body);
    let raw = |q: &str| {
        s.kubectl(
            "admin",
            &[
                "create",
                "--raw",
                &format!("/api/v1/namespaces/default/pods{q}"),
                "-f",
                &f,
            ],
        )
    };
    let strict = raw("?fieldValidation=Strict");
    assert!(!strict.status.success(), "{}", text(&strict));
    let msg = text(&strict);
    for field in ["metadata.labels.a", "spec.containers[0].image"] {
        assert!(
            msg.contains(&format!("duplicate field \"{field}\"")),
            "{msg}"
        );
    }
    assert!(
        !s.kubectl("admin", &["get", "pod", "twice"])
            .status
            .success(),
        "nothing stored"
    );

    let warned = raw("");
    assert!(warned.status.success(), "{}", text(&warned));
    let err = String::from_utf8_lossy(&warned.stderr);
    assert!(
        err.contains("duplicate field \"spec.containers[0].image\""),
        "{err}"
    );
    let stored = pod_named(&s, "twice");
    assert_eq!(
        stored["spec"]["containers"][0]["image"], "y",
        "the last one kept"
    );
    assert_eq!(stored["metadata"]["labels"]["a"], "2");

    ok(&s, "admin", &["delete", "pod", "twice", "--grace-period=0"]);
    let ignored = raw("?fieldValidation=Ignore");
    assert!(ignored.status.success(), "{}", text(&ignored));
    assert!(!String::from_utf8_lossy(&ignored.stderr).contains("duplicate"));
}

fn pod_named(s: &Server, name: &str) -> Value {
    serde_json::from_str(&ok(s, "admin", &["get", "pod", name, "-o", "json"])).expect("json")
}

on_both_stores!(
    unknown_fields_are_dropped_unless_strict,
    duplicate_fields_are_named
);
