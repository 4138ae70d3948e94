//! The node's Lease in `kube-node-lease` (pure): what the agent writes to
//! say it is alive, as the kubelet does, so the node lifecycle controller
//! reads a renewal every quarter of the lease ([`renew_every`]) rather
//! than a Node status write.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use sluice_model::k8s::{jiff::Timestamp, Lease, MicroTime, ObjectMeta, OwnerReference};

/// Where node leases live.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's default `leaseDurationSeconds`.
pub const LEASE_DURATION_S: i32 = 40;

/// The kubelet's renew interval: a quarter of the duration (10 s for 40).
pub fn renew_every(duration_s: u32) -> Duration {
    Duration::from_millis(u64::from(duration_s) * 250)
}

/// What to write for the lease.
#[derive(Debug, Clone, PartialEq)]
pub enum LeasePlan {
    /// There is none: create this one.
    Create(Lease),
    /// Replace the one read with this (its resourceVersion kept, so a
    /// concurrent writer makes it a conflict, not a lost write).
    Update(Lease),
}

/// The lease of node `node` renewed at `now`, from the one last read
/// (`None`: there is none). `node_uid` makes the Node its owner, so the
/// lease goes when the Node is deleted.
pub fn renew(
    existing: Option<&Lease>,
    node: &str,
    node_uid: Option<&str>,
    now: Timestamp,
    duration_s: i32,
) -> LeasePlan {
    let spec = |old: Option<&LeaseSpec>| LeaseSpec {
        holder_identity: Some(node.to_string()),
        lease_duration_seconds: Some(duration_s),
        renew_time: Some(MicroTime(now)),
        ..old.cloned().unwrap_or_default()
    };
    match existing {
        Some(l) => {
            let mut l = l.clone();
            l.spec = Some(spec(l.spec.as_ref()));
            if l.metadata
                .owner_references
                .as_ref()
                .is_none_or(Vec::is_empty)
            {
                l.metadata.owner_references = owner(node, node_uid);
            }
            LeasePlan::Update(l)
        }
        None => LeasePlan::Create(Lease {
            metadata: ObjectMeta {
                name: Some(node.to_string()),
                namespace: Some(LEASE_NAMESPACE.to_string()),
                owner_references: owner(node, node_uid),
                ..ObjectMeta::default()
            },
            spec: Some(spec(None)),
        }),
    }
}

fn owner(node: &str, uid: Option<&str>) -> Option<Vec<OwnerReference>> {
    uid.map(|uid| {
        vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.to_string(),
            uid: uid.to_string(),
            ..OwnerReference::default()
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("fixture time")
    }

    #[test]
    fn a_missing_lease_is_created_held_by_the_node_for_40_s() {
        let LeasePlan::Create(l) = renew(
            None,
            "node-1",
            Some("u-1"),
            at("2026-11-23T10:00:00Z"),
            LEASE_DURATION_S,
        ) else {
            panic!("expected a create");
        };
        assert_eq!(l.metadata.name.as_deref(), Some("node-1"));
        assert_eq!(l.metadata.namespace.as_deref(), Some(LEASE_NAMESPACE));
        let spec = l.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("node-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(MicroTime(at("2026-11-23T10:00:00Z"))));
        let owners = l.metadata.owner_references.expect("owner");
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].uid.as_str()),
            ("Node", "u-1")
        );
    }

    #[test]
    fn a_renewal_moves_only_the_renew_time_and_keeps_the_version() {
        let LeasePlan::Create(mut l) = renew(
            None,
            "node-1",
            None,
            at("2026-11-23T10:00:00Z"),
            LEASE_DURATION_S,
        ) else {
            panic!("expected a create");
        };
        l.metadata.resource_version = Some("42".into());
        if let Some(s) = l.spec.as_mut() {
            s.lease_transitions = Some(3);
        }
        let LeasePlan::Update(u) = renew(
            Some(&l),
            "node-1",
            Some("u-1"),
            at("2026-11-23T10:00:10Z"),
            LEASE_DURATION_S,
        ) else {
            panic!("expected an update");
        };
        assert_eq!(u.metadata.resource_version.as_deref(), Some("42"));
        let spec = u.spec.expect("spec");
        assert_eq!(spec.renew_time, Some(MicroTime(at("2026-11-23T10:00:10Z"))));
        assert_eq!(spec.lease_transitions, Some(3));
        // The owner, unknown at creation, is added once known.
        assert_eq!(u.metadata.owner_references.map(|o| o.len()), Some(1));
    }
}
