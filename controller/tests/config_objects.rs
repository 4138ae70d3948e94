//! ConfigMaps and Secrets through the real kubectl, on both stores: the
//! create generators (literals, files, TLS pairs, registry logins),
//! `get` with upstream's columns, `describe`, edits and every patch
//! format, updates upstream refuses (immutable data, a Secret's type,
//! bad keys, more than 1 MiB) in kube-apiserver's words, watches, and
//! deletes; Secrets readable by a node only through a pod bound to it,
//! and never in the server's log.

#[macro_use]
mod common;
use std::process::Command;
use std::time::Duration;

use common::{jsonpath, kubectl_bin, ok, text, wait_for, write, Backend, Server};

/// `kubectl args` as `who` must fail, its output holding each of `want`.
fn refused(s: &Server, who: &str, args: &[&str], want: &[&str]) {
    let o = s.kubectl(who, args);
    let out = text(&o);
    assert!(!o.status.success(), "{args:?} was accepted: {out}");
    for w in want {
        assert!(out.contains(w), "{args:?}: want {w:?} in\n{out}");
    }
}

/// `kubectl patch target --type=format -p body` must fail likewise.
fn patch_refused(s: &Server, target: &str, format: &str, body: &str, want: &[&str]) {
    let format = format!("--type={format}");
    refused(s, "admin", &["patch", target, &format, "-p", body], want);
}

/// `kubectl edit` with an editor that replaces `from` by `to` in place.
fn edit(s: &Server, target: &str, from: &str, to: &str) {
    let script = s.dir.join("editor.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nsed -i 's/{from}/{to}/' \"$1\"\n"),
    )
    .expect("editor");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let o = Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(s.kubeconfig("admin"))
        .args(["edit", target])
        .env("KUBE_EDITOR", &script)
        .output()
        .expect("kubectl edit");
    assert!(o.status.success(), "edit {target}: {}", text(&o));
}

const IMMUTABLE: &str = "field is immutable when `immutable` is set";
const CONFIG_KEY: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

fn config_maps(s: &Server) {
    let file = write(s, "settings.conf", "color=blue\nsize=3\n");
    ok(
        s,
        "admin",
        &[
            "create",
            "configmap",
            "app",
            "--from-literal=k=v",
            &format!("--from-file={file}"),
        ],
    );
    let listed = ok(s, "admin", &["get", "cm"]);
    let mut lines = listed.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{listed}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..2], ["app", "2"], "{listed}");
    let described = ok(s, "admin", &["describe", "configmap", "app"]);
    for want in [
        "Name:",
        "app",
        "Namespace:",
        "default",
        "settings.conf",
        "color=blue",
        "k:",
    ] {
        assert!(described.contains(want), "{want} in\n{described}");
    }

    // Every way of changing it goes through the same rules.
    edit(s, "configmap/app", "^  k: v$", "  k: edited");
    assert_eq!(jsonpath(s, &["cm", "app"], "{.data.k}"), "edited");
    ok(
        s,
        "admin",
        &[
            "patch",
            "cm",
            "app",
            "-p",
            r#"{"data": {"k": "strategic"}}"#,
        ],
    );
    ok(
        s,
        "admin",
        &[
            "patch",
            "cm",
            "app",
            "--type=json",
            "-p",
            r#"[{"op": "add", "path": "/data/j", "value": "x"}]"#,
        ],
    );
    let bad_key = r#"{"data": {"a*b": "x"}}"#;
    for format in ["merge", "strategic"] {
        let want = "The ConfigMap \"app\" is invalid: data[a*b]: Invalid value: \"a*b\": ";
        patch_refused(s, "cm/app", format, bad_key, &[want, CONFIG_KEY]);
    }
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, namespace: default}\ndata: {one: \"1\"}\n";
    let f = write(s, "applied.yaml", manifest);
    ok(s, "admin", &["apply", "-f", &f]);
    ok(
        s,
        "admin",
        &["apply", "--server-side", "--force-conflicts", "-f", &f],
    );
    let dup = write(
        s,
        "dup.yaml",
        &manifest.replace(
            "data: {one: \"1\"}",
            "data: {one: \"1\"}\nbinaryData: {one: djI=}",
        ),
    );
    for apply in [
        &["apply", "-f", &dup][..],
        &["apply", "--server-side", "-f", &dup],
    ] {
        refused(
            s,
            "admin",
            apply,
            &["data[one]: Invalid value: \"one\": duplicate of key present in binaryData"],
        );
    }

    // Immutable: the data is fixed, and so is the flag.
    ok(
        s,
        "admin",
        &[
            "patch",
            "cm",
            "app",
            "--type=merge",
            "-p",
            r#"{"immutable": true}"#,
        ],
    );
    patch_refused(
        s,
        "cm/app",
        "merge",
        r#"{"data": {"k": "again"}}"#,
        &[&format!(
            "The ConfigMap \"app\" is invalid: data: Forbidden: {IMMUTABLE}"
        )],
    );
    patch_refused(
        s,
        "cm/app",
        "merge",
        r#"{"immutable": false}"#,
        &[&format!("immutable: Forbidden: {IMMUTABLE}")],
    );
    ok(s, "admin", &["label", "cm", "app", "tier=web"]);
    assert_eq!(jsonpath(s, &["cm", "app"], "{.data.k}"), "strategic");

    // More than 1 MiB of values: 422 naming the whole object; more than
    // the 3 MiB a request may carry: 413 before anything is decoded.
    let big = write(s, "big.txt", &"x".repeat(1536 * 1024));
    refused(
        s,
        "admin",
        &["create", "configmap", "big", &format!("--from-file={big}")],
        &["ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"],
    );
    let huge = write(s, "huge.txt", &"x".repeat(4 * 1024 * 1024));
    refused(
        s,
        "admin",
        &[
            "create",
            "configmap",
            "huge",
            &format!("--from-file={huge}"),
        ],
        &["larger than 3145728 bytes"],
    );
    let names = ok(s, "admin", &["get", "cm", "-o", "name"]);
    assert!(!names.contains("big") && !names.contains("huge"), "{names}");

    ok(s, "admin", &["delete", "cm", "app", "applied"]);
    refused(
        s,
        "admin",
        &["get", "cm", "app"],
        &["configmaps \"app\" not found"],
    );
}

const PASSWORD: &str = "hunter2-s3cret";

fn secrets(s: &Server) {
    ok(
        s,
        "admin",
        &[
            "create",
            "secret",
            "generic",
            "db",
            &format!("--from-literal=password={PASSWORD}"),
        ],
    );
    let (crt, key) = (s.dir.join("apiserver.crt"), s.dir.join("apiserver.key"));
    ok(
        s,
        "admin",
        &[
            "create",
            "secret",
            "tls",
            "web",
            &format!("--cert={}", crt.display()),
            &format!("--key={}", key.display()),
        ],
    );
    ok(
        s,
        "admin",
        &[
            "create",
            "secret",
            "docker-registry",
            "reg",
            "--docker-server=registry.example",
            "--docker-username=u",
            "--docker-password=p",
        ],
    );
    let listed = ok(s, "admin", &["get", "secret"]);
    let rows: Vec<Vec<&str>> = listed
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "TYPE", "DATA", "AGE"], "{listed}");
    for want in [
        ["db", "Opaque", "1"],
        ["reg", "kubernetes.io/dockerconfigjson", "1"],
        ["web", "kubernetes.io/tls", "2"],
    ] {
        assert!(
            rows.iter().any(|r| r.len() == 4 && r[..3] == want),
            "{want:?} in\n{listed}"
        );
    }
    let described = ok(s, "admin", &["describe", "secret", "db"]);
    assert!(
        described.contains("password:") && described.contains("14 bytes"),
        "{described}"
    );
    assert!(!described.contains(PASSWORD), "{described}");

    // stringData is read into data and not kept.
    let f = write(
        s,
        "login.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: login, namespace: default}\ntype: kubernetes.io/basic-auth\nstringData: {username: admin}\n",
    );
    ok(s, "admin", &["create", "-f", &f]);
    assert_eq!(
        jsonpath(s, &["secret", "login"], "{.data.username}"),
        "YWRtaW4="
    );
    let yaml = ok(s, "admin", &["get", "secret", "login", "-o", "yaml"]);
    assert!(!yaml.contains("stringData"), "{yaml}");
    ok(
        s,
        "admin",
        &[
            "patch",
            "secret",
            "login",
            "--type=merge",
            "-p",
            r#"{"stringData": {"password": "pw"}}"#,
        ],
    );
    assert_eq!(
        jsonpath(s, &["secret", "login"], "{.data.password}"),
        "cHc="
    );

    // The type is fixed; a TLS Secret needs both keys.
    patch_refused(
        s,
        "secret/db",
        "merge",
        r#"{"type": "kubernetes.io/tls"}"#,
        &[
            "The Secret \"db\" is invalid",
            "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
            "data[tls.crt]: Required value",
            "data[tls.key]: Required value",
        ],
    );
    patch_refused(
        s,
        "secret/web",
        "json",
        r#"[{"op": "remove", "path": "/data/tls.key"}]"#,
        &["The Secret \"web\" is invalid: data[tls.key]: Required value"],
    );
    let f = write(
        s,
        "frozen.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: frozen, namespace: default}\nimmutable: true\ndata: {a: eA==}\n",
    );
    ok(s, "admin", &["apply", "--server-side", "-f", &f]);
    refused(
        s,
        "admin",
        &[
            "apply",
            "--server-side",
            "-f",
            &write(
                s,
                "thawed.yaml",
                &std::fs::read_to_string(&f)
                    .unwrap_or_default()
                    .replace("eA==", "eQ=="),
            ),
        ],
        &[&format!(
            "The Secret \"frozen\" is invalid: data: Forbidden: {IMMUTABLE}"
        )],
    );

    nodes_read_only_their_pods_secrets(s);

    ok(
        s,
        "admin",
        &["delete", "secret", "db", "web", "reg", "login", "frozen"],
    );
    let left = ok(s, "admin", &["get", "secrets", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
    let log = s.log();
    for leak in [PASSWORD, "aHVudGVyMi1zM2NyZXQ="] {
        assert!(!log.contains(leak), "the server logged a secret:\n{log}");
    }
}

fn nodes_read_only_their_pods_secrets(s: &Server) {
    let why = "no relationship found between node 'node-1' and this object";
    refused(s, "node-1", &["get", "secret", "db"], &["Forbidden", why]);
    refused(s, "node-1", &["get", "secrets"], &["Forbidden"]);
    refused(s, "node-1", &["delete", "secret", "db"], &["Forbidden"]);
    let pod = write(
        s,
        "uses-db.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: uses-db, namespace: default}\nspec:\n  nodeName: node-1\n  containers: [{name: c, image: x, env: [{name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}]}]\n",
    );
    ok(s, "admin", &["create", "-f", &pod]);
    assert_eq!(
        ok(
            s,
            "node-1",
            &["get", "secret", "db", "-o", "jsonpath={.type}"]
        ),
        "Opaque"
    );
    // One Secret watched by name, as a kubelet does.
    ok(
        s,
        "node-1",
        &[
            "get",
            "secrets",
            "--field-selector=metadata.name=db",
            "-o",
            "name",
        ],
    );
    refused(s, "node-1", &["get", "secret", "web"], &[why]);
    refused(s, "node-1", &["get", "secrets"], &["Forbidden"]);
    ok(
        s,
        "admin",
        &["delete", "pod", "uses-db", "--grace-period=0", "--force"],
    );
    refused(s, "node-1", &["get", "secret", "db"], &[why]);
}

fn watched(s: &Server) {
    for (kind, create) in [
        ("configmaps", &["create", "configmap"][..]),
        ("secrets", &["create", "secret", "generic"]),
    ] {
        let log = s.dir.join(format!("watch-{kind}.log"));
        let mut child =
            s.kubectl_spawn("admin", &["get", kind, "--watch-only", "-o", "name"], &log);
        // The watch is open once a create made after it started is seen:
        // a new object each try, as one made before it opened never shows.
        let mut tries = 0;
        wait_for(Duration::from_secs(30), kind, || {
            tries += 1;
            let name = format!("seen-{tries}");
            let mut args = create.to_vec();
            args.extend([name.as_str(), "--from-literal=a=b"]);
            ok(s, "admin", &args);
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            out.contains("/seen-").then_some(())
        });
        let _ = child.kill();
        let _ = child.wait();
        ok(s, "admin", &["delete", kind, "--all"]);
    }
    let resources = ok(s, "admin", &["api-resources", "--api-group="]);
    let line = |name: &str| {
        resources
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(
        line("configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"],
        "{resources}"
    );
    assert_eq!(
        line("secrets"),
        ["secrets", "v1", "true", "Secret"],
        "{resources}"
    );
}

fn config_objects(backend: Backend) {
    let s = Server::start(&format!("config-{backend:?}").to_lowercase(), backend);
    config_maps(&s);
    secrets(&s);
    watched(&s);
}

on_both_stores!(config_objects);
