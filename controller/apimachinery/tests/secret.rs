//! Secret validation: the cases of upstream's TestValidateSecret,
//! TestValidateSecretUpdate, TestValidateDockerConfigSecret,
//! TestValidateBasicAuthSecret and TestValidateSSHAuthSecret, with the
//! rendered errors; and `stringData`, read into `data` before them.

mod common;
use common::*;
use serde_json::{json, Value};
use sluice_apimachinery::validation::secret::merge_string_data;

fn base() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": "valid", "namespace": "validns"},
           "data": {"data-1": "YmFy"}})
}

fn typed(t: &str, data: Value) -> Value {
    json!({"type": t, "data": data})
}

const REDACTED: &str = "Invalid value: \"<secret contents redacted>\"";

/// `3 × n` bytes, in base64.
fn bytes_of(n: usize) -> String {
    "YWFh".repeat(n)
}

#[test]
fn invalid_secrets() {
    let sa = "kubernetes.io/service-account-token";
    let sa_required = s("metadata.annotations[kubernetes.io/service-account.name]: Required value");
    let cases = vec![
        ("no name", json!({"metadata": {"name": ""}}),
            vec![s("metadata.name: Required value: name or generateName is required")]),
        ("a bad name", json!({"metadata": {"name": "NoUppercaseOrSpecialCharsLike=Equals"}}),
            vec![format!("metadata.name: Invalid value: \"NoUppercaseOrSpecialCharsLike=Equals\": {SUBDOMAIN}")]),
        ("no namespace", json!({"metadata": {"namespace": ""}}), vec![s("metadata.namespace: Required value")]),
        ("more than 1 MiB", json!({"data": {"over": bytes_of(349_526)}}),
            vec![s("data: Too long: may not be more than 1048576 bytes")]),
        ("key a*b", json!({"data": {"a*b": "d2hvb3Bz"}}), vec![format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}")]),
        ("keys . and ..", json!({"data": {".": "YmFy", "..": "YmFy"}}),
            vec![s("data[.]: Invalid value: \".\": must not be '.'"), s("data[..]: Invalid value: \"..\": must not be '..'")]),
        ("key ..b", json!({"data": {"..b": "YmFy"}}), vec![s("data[..b]: Invalid value: \"..b\": must not start with '..'")]),
        ("a service account token, annotation empty",
            json!({"type": sa, "metadata": {"annotations": {"kubernetes.io/service-account.name": ""}}}), vec![sa_required.clone()]),
        ("a service account token, another annotation",
            json!({"type": sa, "metadata": {"annotations": {"kubernetes.io/service-account.uid": "u"}}}), vec![sa_required.clone()]),
        ("a service account token, no annotations", json!({"type": sa}), vec![sa_required]),
        ("dockercfg without .dockercfg", typed("kubernetes.io/dockercfg", json!({"data-1": null})),
            vec![s("data[.dockercfg]: Required value")]),
        ("dockercfg empty", typed("kubernetes.io/dockercfg", json!({".dockercfg": ""})),
            vec![format!("data[.dockercfg]: {REDACTED}: unexpected end of JSON input")]),
        ("dockercfg bad", typed("kubernetes.io/dockercfg", json!({".dockercfg": b64("bad")})),
            vec![format!("data[.dockercfg]: {REDACTED}: invalid character 'b' looking for beginning of value")]),
        ("dockerconfigjson without .dockerconfigjson", typed("kubernetes.io/dockerconfigjson", json!({})),
            vec![s("data[.dockerconfigjson]: Required value")]),
        ("dockerconfigjson empty", typed("kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": ""})),
            vec![format!("data[.dockerconfigjson]: {REDACTED}: unexpected end of JSON input")]),
        ("dockerconfigjson a list", typed("kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": b64("[]")})),
            vec![format!("data[.dockerconfigjson]: {REDACTED}: json: cannot unmarshal array into Go value of type map[string]interface {{}}")]),
        ("basic-auth without username and password", typed("kubernetes.io/basic-auth", json!({"data-1": null})),
            vec![s("data[username]: Required value"), s("data[password]: Required value")]),
        ("ssh-auth without its key", typed("kubernetes.io/ssh-auth", json!({})), vec![s("data[ssh-privatekey]: Required value")]),
        ("ssh-auth with an empty key", typed("kubernetes.io/ssh-auth", json!({"ssh-privatekey": ""})),
            vec![s("data[ssh-privatekey]: Required value")]),
        ("tls without tls.key", typed("kubernetes.io/tls", json!({"tls.crt": "Y3J0"})), vec![s("data[tls.key]: Required value")]),
        ("tls without tls.crt", typed("kubernetes.io/tls", json!({"tls.key": "a2V5"})), vec![s("data[tls.crt]: Required value")]),
        ("tls without either", typed("kubernetes.io/tls", json!({})),
            vec![s("data[tls.crt]: Required value"), s("data[tls.key]: Required value")]),
        ("every error at once", json!({"metadata": {"name": ""}, "type": "kubernetes.io/tls", "data": {"a*b": ""}}),
            vec![s("metadata.name: Required value: name or generateName is required"),
                 format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}"),
                 s("data[tls.crt]: Required value"), s("data[tls.key]: Required value")]),
    ];
    table("", "Secret", &base(), &cases);
}

#[test]
fn valid_secrets() {
    let auth = b64(r#"{"https://index.docker.io/v1/": {"auth": "Zm9vOmJhcgo="}}"#);
    let cases = vec![
        ("the base", json!({}), vec![]),
        ("no data", json!({"data": null}), vec![]),
        (
            "a key with a leading dot",
            json!({"data": {".dotfile": "YmFy"}}),
            vec![],
        ),
        (
            "exactly 1 MiB",
            json!({"data": {"data-1": bytes_of(349_525), "one": "YQ=="}}),
            vec![],
        ),
        (
            "a type upstream does not know",
            json!({"type": "example.com/custom"}),
            vec![],
        ),
        (
            "a bootstrap token",
            json!({"type": "bootstrap.kubernetes.io/token"}),
            vec![],
        ),
        (
            "a named service account token",
            json!({"type": "kubernetes.io/service-account-token", "metadata": {"annotations": {"kubernetes.io/service-account.name": "sa"}}}),
            vec![],
        ),
        (
            "dockercfg",
            typed(
                "kubernetes.io/dockercfg",
                json!({".dockercfg": auth.clone()}),
            ),
            vec![],
        ),
        (
            "dockerconfigjson",
            typed(
                "kubernetes.io/dockerconfigjson",
                json!({".dockerconfigjson": b64(r#"{"auths": {}}"#)}),
            ),
            vec![],
        ),
        (
            "dockerconfigjson null",
            typed(
                "kubernetes.io/dockerconfigjson",
                json!({".dockerconfigjson": b64("null")}),
            ),
            vec![],
        ),
        (
            "basic-auth with a username only",
            typed("kubernetes.io/basic-auth", json!({"username": "dXNlcg=="})),
            vec![],
        ),
        (
            "basic-auth with an empty password only",
            typed("kubernetes.io/basic-auth", json!({"password": ""})),
            vec![],
        ),
        (
            "ssh-auth",
            typed("kubernetes.io/ssh-auth", json!({"ssh-privatekey": "a2V5"})),
            vec![],
        ),
        (
            "tls with empty contents",
            typed("kubernetes.io/tls", json!({"tls.crt": "", "tls.key": ""})),
            vec![],
        ),
    ];
    table("", "Secret", &base(), &cases);
}

#[test]
fn updates() {
    let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"}});
    let cases = vec![
        (
            "data changed",
            json!({}),
            json!({"data": {"data-1": "b3RoZXI=", "data-2": "eA=="}}),
            vec![],
        ),
        (
            "made immutable",
            json!({}),
            json!({"immutable": true, "data": {"data-1": "b3RoZXI="}}),
            vec![],
        ),
        (
            "immutable, annotated",
            json!({"immutable": true}),
            json!({"immutable": true, "metadata": {"annotations": {"a": "b"}}}),
            vec![],
        ),
        (
            "immutable, data changed",
            json!({"immutable": true}),
            json!({"immutable": true, "data": {"data-1": "b3RoZXI="}}),
            vec![s(
                "data: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable, a key removed",
            json!({"immutable": true}),
            json!({"immutable": true, "data": {"data-1": null}}),
            vec![s(
                "data: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable unset",
            json!({"immutable": true}),
            json!({"immutable": null}),
            vec![s(
                "immutable: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "immutable made false",
            json!({"immutable": true}),
            json!({"immutable": false}),
            vec![s(
                "immutable: Forbidden: field is immutable when `immutable` is set",
            )],
        ),
        (
            "Opaque to tls",
            json!({}),
            tls.clone(),
            vec![s(
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
            )],
        ),
        (
            "tls to Opaque",
            tls,
            json!({}),
            vec![s("type: Invalid value: \"Opaque\": field is immutable")],
        ),
        (
            "renamed",
            json!({}),
            json!({"metadata": {"name": "other"}}),
            vec![s(
                "metadata.name: Invalid value: \"other\": field is immutable",
            )],
        ),
        (
            "a tls secret loses its key",
            json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
            json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": null}}),
            vec![s("data[tls.key]: Required value")],
        ),
    ];
    update_table("", "Secret", &base(), &cases);
}

#[test]
fn string_data_is_validated_as_data() {
    // What the server does before validating: stringData into data.
    let mut obj = merge(
        &base(),
        &json!({"type": "kubernetes.io/basic-auth", "data": null,
        "stringData": {"username": "admin", "a*b": "x"}}),
    );
    merge_string_data(&mut obj);
    assert!(obj.get("stringData").is_none(), "{obj}");
    assert_eq!(obj["data"], json!({"username": "YWRtaW4=", "a*b": "eA=="}));
    assert_eq!(
        errors("", "Secret", &obj, None),
        [format!("data[a*b]: Invalid value: \"a*b\": {CONFIG_KEY}")]
    );
    // A stringData value wins over data's.
    let mut obj = merge(&base(), &json!({"stringData": {"data-1": "new"}}));
    merge_string_data(&mut obj);
    assert_eq!(obj["data"], json!({"data-1": "bmV3"}));
    // An immutable Secret cannot be changed through stringData either.
    let old = merge(&base(), &json!({"immutable": true}));
    let mut new = merge(&old, &json!({"stringData": {"data-1": "new"}}));
    merge_string_data(&mut new);
    assert_eq!(
        errors("", "Secret", &new, Some(&old)),
        ["data: Forbidden: field is immutable when `immutable` is set"]
    );
}
