//! The generated tables checked against k8s-openapi, an independent
//! description of the same JSON: for every kind, a body with every field
//! the schema knows set (to a non-zero value, nested as deep as the schema
//! goes) is decoded, read into k8s-openapi's type for the kind and written
//! back. A JSON name k8s-openapi does not know, a shape it does not expect
//! (a number where it wants a string, an object where it wants an array)
//! or an inline struct not flattened shows up as a difference.

use serde_json::Value;

use super::{generated, message, Card, Kind};

/// How deep the synthetic body nests; the schema's deepest real path
/// (pod affinity terms in a Deployment) is well inside it.
const DEPTH: usize = 30;

/// Fields the schema (k8s-pb) has and k8s-openapi v1_37 has not: removed
/// or renamed alpha fields, skipped by the comparison.
const ONLY_IN_K8S_PB: &[&str] = &["workloadRef"];

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    varint(out, u64::from(tag) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint_field(out: &mut Vec<u8>, tag: u32, v: u64) {
    varint(out, u64::from(tag) << 3);
    varint(out, v);
}

/// One value of `kind` as field `tag`, or nothing past the depth.
fn value(out: &mut Vec<u8>, tag: u32, kind: Kind, depth: usize) {
    let mut inner = Vec::new();
    match kind {
        Kind::String => return len_field(out, tag, b"x"),
        Kind::Bytes => return len_field(out, tag, b"hi"),
        Kind::Bool => return varint_field(out, tag, 1),
        Kind::Int32 | Kind::Int64 => return varint_field(out, tag, 7),
        Kind::Double => {
            varint(out, u64::from(tag) << 3 | 1);
            return out.extend(1.5f64.to_bits().to_le_bytes());
        }
        Kind::Message(i) if depth < DEPTH => inner = synthetic(i, depth + 1),
        Kind::Message(_) => return,
        Kind::Quantity => len_field(&mut inner, 1, b"1"),
        Kind::IntOrString => varint_field(&mut inner, 2, 5),
        Kind::Time => varint_field(&mut inner, 1, 1_795_460_400),
        Kind::MicroTime => {
            varint_field(&mut inner, 1, 1_795_460_400);
            varint_field(&mut inner, 2, 5_000);
        }
        Kind::Duration => varint_field(&mut inner, 1, 1_000_000_000),
        Kind::RawJson => len_field(&mut inner, 1, br#"{"a":1}"#),
    }
    len_field(out, tag, &inner);
}

/// Message `index` with every field set once (maps: one entry).
fn synthetic(index: usize, depth: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for field in message(index).fields {
        if ONLY_IN_K8S_PB.contains(&field.json) {
            continue;
        }
        match field.card {
            Card::Single | Card::Repeated | Card::Inline => {
                value(&mut out, field.tag, field.kind, depth)
            }
            Card::Map => {
                let mut entry = Vec::new();
                len_field(&mut entry, 1, b"k");
                value(&mut entry, 2, field.kind, depth);
                len_field(&mut out, field.tag, &entry);
            }
        }
    }
    out
}

/// Where two JSON values differ, as paths.
fn differences(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => differences(v, w, format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}: only in the decoder's JSON")),
                }
            }
            // k8s-openapi writes apiVersion and kind for every resource
            // type, even nested (a StatefulSet's volumeClaimTemplates),
            // where Go's empty TypeMeta writes nothing.
            let nested_type_meta =
                |k: &str| path.contains('.') && (k == "apiVersion" || k == "kind");
            for k in y
                .keys()
                .filter(|k| !x.contains_key(*k) && !nested_type_meta(k))
            {
                out.push(format!("{path}.{k}: only in k8s-openapi's JSON"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differences(v, w, format!("{path}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}

/// The decoder's JSON for `kind`, read into k8s-openapi's `T` and back.
fn round_trip<T>(api_version: &str, kind: &str) -> Vec<String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let Some(index) = super::kind(api_version, kind) else {
        return vec![format!("{api_version} {kind}: not in the schema")];
    };
    let mut body = crate::envelope::MAGIC.to_vec();
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, api_version.as_bytes());
    len_field(&mut type_meta, 2, kind.as_bytes());
    len_field(&mut body, 1, &type_meta);
    len_field(&mut body, 2, &synthetic(index, 0));
    let ours = match crate::decode(&body) {
        Ok(v) => v,
        Err(e) => return vec![format!("{kind}: {e}")],
    };
    let theirs = match serde_json::from_value::<T>(ours.clone()) {
        Ok(t) => serde_json::to_value(t).unwrap_or_default(),
        Err(e) => {
            return vec![format!(
                "{kind}: k8s-openapi refuses the decoder's JSON: {e}"
            )]
        }
    };
    let mut out = Vec::new();
    differences(&ours, &theirs, kind.to_owned(), &mut out);
    out
}

#[test]
fn every_field_of_every_kind_reads_back_through_k8s_openapi() {
    use k8s_openapi::api::{
        apps::v1 as apps, authentication::v1 as authn, autoscaling::v1 as as1,
        autoscaling::v2 as as2, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
        discovery::v1 as disc, events::v1 as events, networking::v1 as net, policy::v1 as policy,
        rbac::v1 as rbac, scheduling::v1 as sched,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let mut problems = Vec::new();
    macro_rules! check {
        ($($v:literal $k:literal $t:ty),* $(,)?) => {
            $(problems.extend(round_trip::<$t>($v, $k));)*
        };
    }
    check!(
        "v1" "Pod" core::Pod, "v1" "Service" core::Service, "v1" "Namespace" core::Namespace,
        "v1" "ConfigMap" core::ConfigMap, "v1" "Secret" core::Secret,
        "v1" "Endpoints" core::Endpoints, "v1" "Node" core::Node,
        "v1" "ServiceAccount" core::ServiceAccount, "v1" "Event" core::Event,
        "v1" "PersistentVolumeClaim" core::PersistentVolumeClaim,
        "v1" "PersistentVolume" core::PersistentVolume,
        "v1" "ReplicationController" core::ReplicationController,
        "v1" "LimitRange" core::LimitRange, "v1" "ResourceQuota" core::ResourceQuota,
        "v1" "Binding" core::Binding, "v1" "PodTemplate" core::PodTemplate,
        "apps/v1" "Deployment" apps::Deployment, "apps/v1" "ReplicaSet" apps::ReplicaSet,
        "apps/v1" "StatefulSet" apps::StatefulSet, "apps/v1" "DaemonSet" apps::DaemonSet,
        "apps/v1" "ControllerRevision" apps::ControllerRevision,
        "policy/v1" "PodDisruptionBudget" policy::PodDisruptionBudget,
        "policy/v1" "Eviction" policy::Eviction,
        "coordination.k8s.io/v1" "Lease" coord::Lease,
        "discovery.k8s.io/v1" "EndpointSlice" disc::EndpointSlice,
        "events.k8s.io/v1" "Event" events::Event,
        "autoscaling/v1" "Scale" as1::Scale,
        "autoscaling/v1" "HorizontalPodAutoscaler" as1::HorizontalPodAutoscaler,
        "autoscaling/v2" "HorizontalPodAutoscaler" as2::HorizontalPodAutoscaler,
        "batch/v1" "Job" batch::Job, "batch/v1" "CronJob" batch::CronJob,
        "meta.k8s.io/v1" "DeleteOptions" meta::DeleteOptions,
        "networking.k8s.io/v1" "Ingress" net::Ingress,
        "networking.k8s.io/v1" "IngressClass" net::IngressClass,
        "networking.k8s.io/v1" "NetworkPolicy" net::NetworkPolicy,
        "scheduling.k8s.io/v1" "PriorityClass" sched::PriorityClass,
        "authentication.k8s.io/v1" "TokenRequest" authn::TokenRequest,
        "rbac.authorization.k8s.io/v1" "Role" rbac::Role,
        "rbac.authorization.k8s.io/v1" "ClusterRole" rbac::ClusterRole,
        "rbac.authorization.k8s.io/v1" "RoleBinding" rbac::RoleBinding,
        "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" rbac::ClusterRoleBinding,
    );
    assert_eq!(
        generated::KINDS.len(),
        41,
        "a kind was added: check it here too"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
