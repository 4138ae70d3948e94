//! The annotations a Deployment keeps on its ReplicaSets: the revision
//! (and the revisions a rolled-back-to ReplicaSet had before), the replica
//! counts proportional scaling reads, and the Deployment's own annotations
//! copied over.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;

/// The rollout number of a ReplicaSet, and of its Deployment.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The earlier revisions of a ReplicaSet that was rolled back to.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when it last sized this ReplicaSet.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` of the Deployment then.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Longest `revision-history` kept, in characters (upstream's limit).
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// Annotations of the Deployment that are not copied to its ReplicaSets:
/// the ones above (each ReplicaSet has its own) and kubectl's record of
/// the applied manifest.
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

fn get<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The revision of a ReplicaSet: 0 when absent, `None` when unreadable.
pub(super) fn revision(rs: &ReplicaSet) -> Option<i64> {
    match get(rs, REVISION) {
        None => Some(0),
        Some(v) => v.parse().ok(),
    }
}

/// An `i32` annotation, if present and readable.
pub(super) fn replicas_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    get(rs, key)?.parse().ok()
}

/// Set `desired-replicas` and `max-replicas`; whether anything changed.
pub(super) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.to_string(), v);
            changed = true;
        }
    }
    changed
}

/// Upstream's `SetNewReplicaSetAnnotations`: copy the Deployment's
/// annotations, raise the revision to `new_revision` if it is lower
/// (recording the old one in `revision-history` when the ReplicaSet had
/// one: a rollback to it), and for a ReplicaSet about to be created
/// (`!exists`) the replica counts. Whether anything changed.
pub(super) fn set_new_rs_annotations(
    deployment_annotations: Option<&BTreeMap<String, String>>,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
    desired_and_max: (i32, i32),
) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in deployment_annotations.into_iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) || a.get(k) == Some(v) {
            continue;
        }
        a.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = a.get(REVISION).cloned();
    let old_number = match old.as_deref() {
        None => 0,
        // An unreadable revision is left alone, as upstream does.
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return changed,
        },
    };
    if old_number < new_revision {
        a.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            append_history(a, &old);
        }
    }
    if !exists && set_replicas_annotations(rs, desired_and_max.0, desired_and_max.1) {
        changed = true;
    }
    changed
}

/// Add `old` to `revision-history`, dropping the oldest entries to stay
/// under the length limit.
fn append_history(a: &mut BTreeMap<String, String>, old: &str) {
    let history = a.get(REVISION_HISTORY).cloned().unwrap_or_default();
    if history.is_empty() {
        a.insert(REVISION_HISTORY.into(), old.to_string());
        return;
    }
    let mut entries: Vec<&str> = history.split(',').collect();
    let mut total = history.len() + old.len() + 1;
    let mut start = 0;
    while total > MAX_REVISION_HISTORY_CHARS && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total <= MAX_REVISION_HISTORY_CHARS {
        entries.drain(..start);
        entries.push(old);
        a.insert(REVISION_HISTORY.into(), entries.join(","));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs_with(pairs: &[(&str, &str)]) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        rs
    }

    #[test]
    fn a_new_replica_set_gets_revision_counts_and_copied_annotations() {
        let d = BTreeMap::from([
            ("kubernetes.io/change-cause".to_string(), "v2".to_string()),
            (REVISION.to_string(), "7".to_string()),
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{}".to_string(),
            ),
        ]);
        let mut rs = ReplicaSet::default();
        assert!(set_new_rs_annotations(Some(&d), &mut rs, 3, false, (4, 5)));
        assert_eq!(
            rs.metadata.annotations.unwrap(),
            BTreeMap::from([
                ("kubernetes.io/change-cause".to_string(), "v2".to_string()),
                (REVISION.to_string(), "3".to_string()),
                (DESIRED_REPLICAS.to_string(), "4".to_string()),
                (MAX_REPLICAS.to_string(), "5".to_string()),
            ])
        );
    }

    #[test]
    fn a_rolled_back_to_replica_set_records_its_old_revisions() {
        let mut rs = rs_with(&[(REVISION, "2"), (REVISION_HISTORY, "1")]);
        assert!(set_new_rs_annotations(None, &mut rs, 5, true, (1, 1)));
        assert_eq!(get(&rs, REVISION), Some("5"));
        assert_eq!(get(&rs, REVISION_HISTORY), Some("1,2"));
        assert_eq!(get(&rs, DESIRED_REPLICAS), None);
        // Already at the revision: nothing changes.
        assert!(!set_new_rs_annotations(None, &mut rs, 5, true, (1, 1)));
        // A higher revision is never lowered.
        assert!(!set_new_rs_annotations(None, &mut rs, 4, true, (1, 1)));
        assert_eq!(get(&rs, REVISION), Some("5"));
    }

    #[test]
    fn revision_history_drops_the_oldest_past_the_limit() {
        let long: Vec<String> = (0..400).map(|i| format!("{i:04}")).collect();
        let mut a = BTreeMap::from([(REVISION_HISTORY.to_string(), long.join(","))]);
        append_history(&mut a, "9999");
        let h = &a[REVISION_HISTORY];
        assert!(h.len() <= MAX_REVISION_HISTORY_CHARS, "{}", h.len());
        assert!(h.ends_with(",9999"));
        assert!(!h.starts_with("0000,"));
    }

    #[test]
    fn revision_reads_absent_as_zero_and_garbage_as_none() {
        assert_eq!(revision(&ReplicaSet::default()), Some(0));
        assert_eq!(revision(&rs_with(&[(REVISION, "12")])), Some(12));
        assert_eq!(revision(&rs_with(&[(REVISION, "x")])), None);
    }
}
