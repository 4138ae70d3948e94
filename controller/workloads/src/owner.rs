//! Controller references and the claim rules upstream's
//! `ControllerRefManager` applies to pods (ReplicaSet) and to ReplicaSets
//! (Deployment): keep what is ours and matches, adopt matching orphans,
//! release what is ours and no longer matches, leave the rest alone.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sluice_model::policy::disruption::Selector;

/// The owner reference with `controller: true`, if any.
pub(crate) fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The reference an `apps/v1` owner puts on what it controls: controller
/// and blocking its owner's foreground deletion.
pub(crate) fn controller_ref(kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What an owner does with one object of its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Controlled by the owner and matching its selector.
    Owned,
    /// An orphan that matches: take it.
    Adopt,
    /// Controlled by the owner but no longer matching: let it go.
    Release,
    /// Another controller's, or an orphan that does not match or cannot be
    /// adopted.
    Ignore,
}

/// Upstream's `ClaimObject`. An owner being deleted neither adopts nor
/// releases (its dependents go with it); an object being deleted is not
/// adopted.
pub(crate) fn claim(owner: &ObjectMeta, selector: &Selector, obj: &ObjectMeta) -> Claim {
    let empty = Default::default();
    let labels = obj.labels.as_ref().unwrap_or(&empty);
    let owner_deleting = owner.deletion_timestamp.is_some();
    match controller_of(obj) {
        Some(r) if Some(&r.uid) == owner.uid.as_ref() => {
            if selector.matches(labels) {
                Claim::Owned
            } else if owner_deleting {
                Claim::Ignore
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None => {
            if owner_deleting
                || obj.deletion_timestamp.is_some()
                || obj.namespace != owner.namespace
                || !selector.matches(labels)
            {
                Claim::Ignore
            } else {
                Claim::Adopt
            }
        }
    }
}

/// `obj`'s owner references with `reference` added (adoption).
pub(crate) fn with_owner(obj: &ObjectMeta, reference: OwnerReference) -> Vec<OwnerReference> {
    let mut refs = obj.owner_references.clone().unwrap_or_default();
    refs.push(reference);
    refs
}

/// `obj`'s owner references without the one to `owner_uid` (release).
pub(crate) fn without_owner(obj: &ObjectMeta, owner_uid: &str) -> Vec<OwnerReference> {
    obj.owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != owner_uid)
        .cloned()
        .collect()
}

/// `namespace/name` for messages.
pub(crate) fn display_name(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
    use std::collections::BTreeMap;

    fn meta(name: &str, uid: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn app_selector() -> Selector {
        Selector::parse(&LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "a".into())])),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn claims_follow_controller_ref_and_selector() {
        let owner = meta("rs", "u-rs", &[]);
        let sel = app_selector();
        let mut mine = meta("p1", "u1", &[("app", "a")]);
        mine.owner_references = Some(vec![controller_ref("ReplicaSet", &owner)]);
        assert_eq!(claim(&owner, &sel, &mine), Claim::Owned);

        let mut relabelled = mine.clone();
        relabelled.labels = Some(BTreeMap::new());
        assert_eq!(claim(&owner, &sel, &relabelled), Claim::Release);

        let orphan = meta("p2", "u2", &[("app", "a")]);
        assert_eq!(claim(&owner, &sel, &orphan), Claim::Adopt);
        let stranger = meta("p3", "u3", &[("app", "b")]);
        assert_eq!(claim(&owner, &sel, &stranger), Claim::Ignore);

        let mut other = orphan.clone();
        other.owner_references = Some(vec![controller_ref("ReplicaSet", &meta("x", "u-x", &[]))]);
        assert_eq!(claim(&owner, &sel, &other), Claim::Ignore);

        let mut elsewhere = orphan.clone();
        elsewhere.namespace = Some("other".into());
        assert_eq!(claim(&owner, &sel, &elsewhere), Claim::Ignore);
    }

    #[test]
    fn a_deleted_owner_neither_adopts_nor_releases() {
        let mut owner = meta("rs", "u-rs", &[]);
        owner.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        let sel = app_selector();
        let orphan = meta("p2", "u2", &[("app", "a")]);
        assert_eq!(claim(&owner, &sel, &orphan), Claim::Ignore);
        let mut relabelled = meta("p1", "u1", &[]);
        relabelled.owner_references = Some(vec![controller_ref("ReplicaSet", &owner)]);
        assert_eq!(claim(&owner, &sel, &relabelled), Claim::Ignore);
    }

    #[test]
    fn release_keeps_other_references() {
        let owner = meta("rs", "u-rs", &[]);
        let mut pod = meta("p", "u", &[]);
        let keep = OwnerReference {
            uid: "u-keep".into(),
            ..Default::default()
        };
        pod.owner_references = Some(vec![keep.clone(), controller_ref("ReplicaSet", &owner)]);
        assert_eq!(without_owner(&pod, "u-rs"), vec![keep]);
    }
}
