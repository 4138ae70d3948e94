//! The `pod-template-hash` that names a Deployment's ReplicaSets and tells
//! their pods apart.

use k8s_openapi::api::core::v1::PodTemplateSpec;

/// The label the hash goes in, on the ReplicaSet, its selector and its
/// pods.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

fn fnv1a(hash: u32, bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ u32::from(*b)).wrapping_mul(FNV_PRIME))
}

/// The hash of `template`, with `collision_count` (the Deployment's
/// `status.collisionCount`) mixed in as upstream does, eight bytes little
/// endian, so that a name taken by someone else yields a new one.
///
/// Rendered as upstream renders it: the decimal form of a 32-bit FNV-1a
/// hash, each digit mapped into the alphabet of `rand.SafeEncodeString`
/// (no vowels, no look-alikes), so it looks like `7d4b9c8f6`. The bytes
/// hashed are the template's JSON (fields in a fixed order, maps sorted),
/// not the Go struct dump upstream hashes: the value is stable and differs
/// between templates here, but it is not the one kube-controller-manager
/// computes for the same template. That only changes the names of new
/// ReplicaSets: the new one is found by comparing templates (the hash
/// label left out), so ReplicaSets kube-controller-manager made are still
/// recognised.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    // Serialising these types cannot fail: every map is keyed by strings.
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut h = fnv1a(FNV_OFFSET, &json);
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&c.to_le_bytes());
        h = fnv1a(h, &bytes);
    }
    safe_encode(&h.to_string())
}

/// Upstream's `rand.SafeEncodeString`: each byte picks a letter of the
/// alphabet by its value modulo the alphabet's length.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn template(image_label: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("v".into(), image_label.into())])),
                ..Default::default()
            }),
            spec: None,
        }
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0x811c_9dc5);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn hash_is_stable_short_and_changes_with_template_and_collisions() {
        let a = pod_template_hash(&template("1"), None);
        assert_eq!(a, pod_template_hash(&template("1"), None));
        assert!(a.len() <= 10 && !a.is_empty());
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        assert_ne!(a, pod_template_hash(&template("2"), None));
        assert_ne!(a, pod_template_hash(&template("1"), Some(1)));
        assert_ne!(
            pod_template_hash(&template("1"), Some(1)),
            pod_template_hash(&template("1"), Some(2))
        );
    }

    #[test]
    fn digits_map_as_safe_encode_string_does() {
        // '0' is byte 48, 48 % 27 = 21: '4'; '9' is 57, 57 % 27 = 3: 'f'.
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }
}
