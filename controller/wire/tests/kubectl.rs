//! Bodies captured from the real kubectl (v1.37) against a throwaway TLS
//! listener, each compared with the JSON the same command prints with
//! `--dry-run=client -o json` (both files under `tests/fixtures/`, made
//! by `tools/capture_kubectl.py`, which re-makes them byte for byte).
//!
//! The two sides differ, and only, in what Go's JSON writes as `null`:
//! `metadata.creationTimestamp: null` (the zero Time), which the decoder
//! omits; `normalise` drops nulls from the expected side.

use serde_json::Value;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Drops the members Go wrote as null: the zero Time of an object not yet
/// created.
fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(normalise);
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

fn check(name: &str) {
    let decoded = sluice_wire::decode(&fixture(&format!("{name}.pb")))
        .unwrap_or_else(|e| panic!("{name}.pb: {e}"));
    let mut expected: Value = serde_json::from_slice(&fixture(&format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}.json: {e}"));
    normalise(&mut expected);
    assert_eq!(
        decoded,
        expected,
        "{name}: decoded\n{}\nexpected\n{}",
        serde_json::to_string_pretty(&decoded).unwrap_or_default(),
        serde_json::to_string_pretty(&expected).unwrap_or_default()
    );
}

#[test]
fn create_deployment() {
    check("deployment_d1");
}

#[test]
fn create_deployment_with_zero_replicas_and_a_port() {
    check("deployment_d2");
}

#[test]
fn create_service_clusterip() {
    check("service_s1");
}

#[test]
fn create_namespace() {
    check("namespace_n1");
}

#[test]
fn create_pdb_with_a_percentage() {
    check("pdb_p1");
}

#[test]
fn create_pdb_with_a_number() {
    check("pdb_p2");
}

#[test]
fn create_configmap() {
    check("configmap_c1");
}

#[test]
fn create_secret() {
    check("secret_sec1");
}

#[test]
fn create_job() {
    check("job_j1");
}

#[test]
fn create_cronjob() {
    check("cronjob_cj1");
}

#[test]
fn create_ingress() {
    check("ingress_i1");
}

#[test]
fn create_role() {
    check("role_r1");
}

#[test]
fn create_clusterrolebinding() {
    check("clusterrolebinding_crb1");
}

#[test]
fn create_priorityclass() {
    check("priorityclass_pc1");
}

#[test]
fn create_quota() {
    check("quota_q1");
}

#[test]
fn create_serviceaccount() {
    check("serviceaccount_sa1");
}

#[test]
fn create_secret_docker_registry() {
    check("secret_dr1");
}

#[test]
fn create_service_nodeport() {
    check("service_np1");
}

#[test]
fn create_service_externalname() {
    check("service_en1");
}

/// `kubectl create token sa1 --duration=10m` has no `--dry-run`; the JSON
/// is Go's for the same TokenRequest (status.token has no `omitempty`, the
/// zero expirationTimestamp is null and so omitted).
#[test]
fn create_token() {
    let decoded = sluice_wire::decode(&fixture("token_sa1.pb")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        decoded,
        serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {},
            "spec": {"expirationSeconds": 600},
            "status": {"token": ""},
        })
    );
}
