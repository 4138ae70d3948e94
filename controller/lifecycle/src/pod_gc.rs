//! Pods bound to a Node that no longer exists, as upstream's pod garbage
//! collector finds them: nobody will ever stop them or finish their
//! deletion (their node's agent is gone with it), so they are deleted
//! outright (grace 0). A node must have been missing for a quarantine
//! first (upstream's [`QUARANTINE`] unless configured): a Node deleted and
//! registered again at once, or a cache that is behind, keeps its pods.

use std::collections::{BTreeMap, BTreeSet};

use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Pod;

use crate::node_lifecycle::PodRef;

/// Upstream's `quarantineTime`.
pub const QUARANTINE: SignedDuration = SignedDuration::from_secs(40);

/// Since when each missing node has been seen missing, kept by the caller
/// from one pass to the next.
pub type MissingSince = BTreeMap<String, Timestamp>;

/// The pods to delete now: those bound to a node `exists` says is gone and
/// that has been gone for `quarantine`. `missing` is brought up to date:
/// nodes seen missing for the first time are added at `now`, nodes back
/// (or no longer named by any pod) are dropped. Sorted by namespace, name.
pub fn orphaned<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    exists: impl Fn(&str) -> bool,
    missing: &mut MissingSince,
    quarantine: SignedDuration,
    now: Timestamp,
) -> Vec<PodRef> {
    let mut named = BTreeSet::new();
    let mut out = Vec::new();
    for p in pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        if node.is_empty() || exists(node) {
            continue;
        }
        named.insert(node.to_string());
        let since = *missing.entry(node.to_string()).or_insert(now);
        if now.duration_since(since) >= quarantine {
            out.push(PodRef {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                uid: p.metadata.uid.clone(),
                node: node.to_string(),
            });
        }
    }
    missing.retain(|n, _| named.contains(n));
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.spec = Some(Default::default());
        if let (Some(s), Some(n)) = (p.spec.as_mut(), node) {
            s.node_name = Some(n.into());
        }
        p
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("a valid time")
    }

    #[test]
    fn pods_of_a_gone_node_go_after_the_quarantine() {
        let pods = [
            pod("a", Some("gone")),
            pod("b", Some("live")),
            pod("c", None),
        ];
        let exists = |n: &str| n == "live";
        let mut missing = MissingSince::new();
        assert!(orphaned(&pods, exists, &mut missing, QUARANTINE, at(0)).is_empty());
        assert_eq!(missing.get("gone"), Some(&at(0)));
        assert!(orphaned(&pods, exists, &mut missing, QUARANTINE, at(39)).is_empty());
        let out = orphaned(&pods, exists, &mut missing, QUARANTINE, at(40));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "a");
        assert_eq!(out[0].uid.as_deref(), Some("uid-a"));
    }

    #[test]
    fn a_node_back_within_the_quarantine_keeps_its_pods() {
        let pods = [pod("a", Some("flappy"))];
        let mut missing = MissingSince::new();
        orphaned(&pods, |_| false, &mut missing, QUARANTINE, at(0));
        assert!(orphaned(&pods, |_| true, &mut missing, QUARANTINE, at(30)).is_empty());
        assert!(missing.is_empty(), "forgotten once back");
        // Missing again: the quarantine starts over.
        assert!(orphaned(&pods, |_| false, &mut missing, QUARANTINE, at(45)).is_empty());
        assert_eq!(
            orphaned(&pods, |_| false, &mut missing, QUARANTINE, at(85)).len(),
            1
        );
    }

    #[test]
    fn a_shorter_quarantine_collects_sooner() {
        let pods = [pod("a", Some("gone"))];
        let mut missing = MissingSince::new();
        let five = SignedDuration::from_secs(5);
        assert!(orphaned(&pods, |_| false, &mut missing, five, at(0)).is_empty());
        assert!(orphaned(&pods, |_| false, &mut missing, five, at(4)).is_empty());
        assert_eq!(
            orphaned(&pods, |_| false, &mut missing, five, at(5)).len(),
            1
        );
    }
}
