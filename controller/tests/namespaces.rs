//! Namespaces' lifecycle through the real kubectl, on both stores:
//! NamespaceLifecycle admission in kube-apiserver's words (a create in a
//! missing namespace is a 404, in a Terminating one a 403, the immortal
//! namespaces cannot be deleted), a deleted namespace shown Terminating
//! while its `kubernetes` finalizer holds it and gone once `finalize`
//! empties it, and `kubectl delete --cascade` setting the garbage
//! collector's finalizers on the owner.

#[macro_use]
mod common;

use common::{jsonpath, ok, text, write, Backend, Server};

/// `kubectl args` as the admin must fail, its output holding `want`.
fn refused(s: &Server, args: &[&str], want: &str) {
    let o = s.kubectl("admin", args);
    let out = text(&o);
    assert!(!o.status.success(), "{args:?} was accepted: {out}");
    assert!(out.contains(want), "{args:?}: want {want:?} in\n{out}");
}

fn missing_namespaces(s: &Server) {
    let missing = r#"namespaces "nowhere" not found"#;
    refused(
        s,
        &[
            "create",
            "configmap",
            "c",
            "-n",
            "nowhere",
            "--from-literal=a=b",
        ],
        // kubectl's generators word the server's error their own way.
        r#"failed to create configmap: namespaces "nowhere" not found"#,
    );
    // Server-side apply creating, and a POST of a manifest, are refused too.
    let manifest = write(
        s,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: nowhere}\ndata: {a: b}\n",
    );
    refused(s, &["apply", "--server-side", "-f", &manifest], missing);
    refused(
        s,
        &["create", "-f", &manifest],
        "Error from server (NotFound)",
    );
    refused(s, &["create", "-f", &manifest], missing);
    // The namespace made, the same create succeeds.
    ok(s, "admin", &["create", "namespace", "nowhere"]);
    ok(s, "admin", &["apply", "--server-side", "-f", &manifest]);
}

fn terminating_namespaces(s: &Server) {
    ok(s, "admin", &["create", "namespace", "team-a"]);
    assert_eq!(
        jsonpath(s, &["namespace", "team-a"], "{.spec.finalizers}"),
        r#"["kubernetes"]"#
    );
    ok(
        s,
        "admin",
        &[
            "create",
            "configmap",
            "keep",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
    );
    ok(
        s,
        "admin",
        &["delete", "namespace", "team-a", "--wait=false"],
    );
    // Held by its finalizer, Terminating, in kubectl's table too.
    let listed = ok(s, "admin", &["get", "namespaces", "team-a"]);
    let row: Vec<&str> = listed
        .lines()
        .nth(1)
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(
        row.get(..2),
        Some(&["team-a", "Terminating"][..]),
        "{listed}"
    );
    assert!(!jsonpath(s, &["namespace", "team-a"], "{.metadata.deletionTimestamp}").is_empty());

    refused(
        s,
        &[
            "create",
            "configmap",
            "new",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
        r#"configmaps "new" is forbidden: unable to create new content in namespace team-a because it is being terminated"#,
    );
    // What is in it may still change (and be cleaned up).
    ok(
        s,
        "admin",
        &["label", "configmap", "keep", "-n", "team-a", "x=y"],
    );
    // A normal update cannot drop the finalizer: only `finalize` moves it.
    ok(
        s,
        "admin",
        &[
            "patch",
            "namespace",
            "team-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"finalizers":[]}}"#,
        ],
    );
    assert_eq!(
        jsonpath(s, &["namespace", "team-a"], "{.spec.finalizers}"),
        r#"["kubernetes"]"#
    );
    // A second delete changes nothing.
    ok(
        s,
        "admin",
        &["delete", "namespace", "team-a", "--wait=false"],
    );
    assert_eq!(
        jsonpath(s, &["namespace", "team-a"], "{.status.phase}"),
        "Terminating"
    );
    let finalized = write(
        s,
        "finalize.json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"},"spec":{"finalizers":[]}}"#,
    );
    ok(
        s,
        "admin",
        &[
            "replace",
            "--raw",
            "/api/v1/namespaces/team-a/finalize",
            "-f",
            &finalized,
        ],
    );
    refused(
        s,
        &["get", "namespace", "team-a"],
        r#"namespaces "team-a" not found"#,
    );
}

fn protected_namespaces(s: &Server) {
    for ns in ["default", "kube-system", "kube-public"] {
        refused(
            s,
            &["delete", "namespace", ns, "--wait=false"],
            &format!(
                r#"Error from server (Forbidden): namespaces "{ns}" is forbidden: this namespace may not be deleted"#
            ),
        );
        assert_eq!(jsonpath(s, &["namespace", ns], "{.status.phase}"), "Active");
    }
}

fn cascades(s: &Server) {
    for (cascade, finalizer) in [("orphan", "orphan"), ("foreground", "foregroundDeletion")] {
        ok(
            s,
            "admin",
            &["create", "configmap", cascade, "--from-literal=a=b"],
        );
        let flag = format!("--cascade={cascade}");
        ok(
            s,
            "admin",
            &["delete", "configmap", cascade, &flag, "--wait=false"],
        );
        assert_eq!(
            jsonpath(s, &["configmap", cascade], "{.metadata.finalizers}"),
            format!(r#"["{finalizer}"]"#)
        );
        // The collector's work done, the last finalizer removed: gone.
        ok(
            s,
            "admin",
            &[
                "patch",
                "configmap",
                cascade,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
        );
        refused(
            s,
            &["get", "configmap", cascade],
            &format!(r#"configmaps "{cascade}" not found"#),
        );
    }
    ok(
        s,
        "admin",
        &["create", "configmap", "bg", "--from-literal=a=b"],
    );
    ok(
        s,
        "admin",
        &["delete", "configmap", "bg", "--cascade=background"],
    );
    refused(
        s,
        &["get", "configmap", "bg"],
        r#"configmaps "bg" not found"#,
    );
}

fn namespaces(backend: Backend) {
    let s = Server::start(&format!("ns-{backend:?}").to_lowercase(), backend);
    missing_namespaces(&s);
    terminating_namespaces(&s);
    protected_namespaces(&s);
    cascades(&s);
}

on_both_stores!(namespaces);
