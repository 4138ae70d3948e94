//! Automatic node upgrades: a pool with `management.autoUpgrade: true`
//! follows the control plane's version (`Cluster.status.
//! currentMasterVersion`), as GKE upgrades a pool's nodes to its control
//! plane's, through an `AUTO_UPGRADE_NODES` operation that then waits for
//! the maintenance policy like any automatic upgrade (M1). Pure: the
//! caller creates the operation it returns.
//!
//! The operation's name is fixed by the pool and the target version, so a
//! controller restarted after creating it, or two passes racing, make it
//! once (the second create is a conflict); and an upgrade to that version
//! that was cancelled or failed is not started again by itself: a user
//! resumes it or starts another.

use sluice_model::cluster::Cluster;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::{Operation, OperationSpec, OperationType};

/// `major.minor.patch` of a version as Kubernetes and GKE spell it
/// (`1.35.1`, `v1.35.1`, `1.35.1-gke.1396000`); `None` if it is not one.
pub fn version_key(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let key = (
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    );
    parts.next().is_none().then_some(key)
}

/// The name of the automatic upgrade of `pool` to `version`: lower case,
/// only what an object name may hold.
pub fn operation_name(pool: &str, version: &str) -> String {
    let v: String = version
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '-') => c,
            _ => '-',
        })
        .collect();
    format!("auto-upgrade-{pool}-{v}")
}

/// The automatic upgrade `pool` needs now, if any: auto-upgrade on, the
/// control plane's version known and newer than the pool's, no upgrade of
/// the pool running, and none to that version made before.
pub fn wanted(
    pool: &NodePool,
    cluster: Option<&Cluster>,
    operations: &[&Operation],
) -> Option<Operation> {
    let name = pool.metadata.name.as_deref()?;
    let on = pool
        .spec
        .management
        .as_ref()
        .and_then(|m| m.auto_upgrade)
        .unwrap_or(false);
    if !on || pool.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let target = cluster?
        .status
        .as_ref()?
        .current_master_version
        .as_deref()?;
    let current = pool.spec.version.as_deref()?;
    if version_key(target)? <= version_key(current)? {
        return None;
    }
    let op_name = operation_name(name, target);
    let busy = operations.iter().any(|o| {
        o.spec.node_pool() == Some(name)
            && (o.metadata.name.as_deref() == Some(op_name.as_str())
                || !o
                    .status
                    .as_ref()
                    .and_then(|s| s.status)
                    .is_some_and(|s| s.is_final()))
    });
    if busy {
        return None;
    }
    let mut spec = OperationSpec::new(
        OperationType::AutoUpgradeNodes,
        format!("{}{name}", OperationSpec::NODE_POOL_LINK),
    );
    spec.node_version = Some(target.to_owned());
    // A flex-start or queued-provisioning pool's upgrade records
    // SHORT_LIVED alone (A5), as a manual one does.
    spec.upgrade_settings = pool.spec.operation_upgrade_settings();
    Some(Operation::new(&op_name, spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_model::operation::OperationState;

    fn pool(version: &str, auto: Option<bool>) -> NodePool {
        let mut p: NodePool = serde_json::from_value(json!({"apiVersion": "sluice.dev/v1",
            "kind": "NodePool", "metadata": {"name": "pool-a"},
            "spec": {"version": version, "config": {"capacity": {"cpu": "2", "memory": "4Gi"}},
                "upgradeSettings": {"maxSurge": 2}}}))
        .expect("a pool");
        if let Some(a) = auto {
            p.spec.management = Some(sluice_model::node_pool::NodeManagement {
                auto_upgrade: Some(a),
                auto_repair: None,
            });
        }
        p
    }

    fn cluster(master: &str) -> Cluster {
        serde_json::from_value(json!({"apiVersion": "sluice.dev/v1", "kind": "Cluster",
            "metadata": {"name": "default"}, "spec": {},
            "status": {"currentMasterVersion": master}}))
        .expect("a cluster")
    }

    #[test]
    fn versions_compare_as_numbers_whatever_their_suffix() {
        assert_eq!(version_key("1.35.1-gke.1396000"), Some((1, 35, 1)));
        assert_eq!(version_key("v1.9.10"), Some((1, 9, 10)));
        assert_eq!(version_key("1.34"), Some((1, 34, 0)));
        assert!(version_key("1.10.0") > version_key("1.9.10"));
        for bad in ["", "latest", "1", "1.x.2", "1.2.3.4"] {
            assert_eq!(version_key(bad), None, "{bad}");
        }
    }

    // spec: M1 — an automatic upgrade is an operation of its own kind,
    // made when the control plane is ahead of an auto-upgrading pool.
    #[test]
    fn an_auto_upgrading_pool_follows_the_control_plane() {
        let c = cluster("1.35.1-gke.1396000");
        let op = wanted(&pool("1.34.5", Some(true)), Some(&c), &[]).expect("an upgrade");
        assert_eq!(op.spec.operation_type, OperationType::AutoUpgradeNodes);
        assert_eq!(op.spec.node_version.as_deref(), Some("1.35.1-gke.1396000"));
        assert_eq!(op.spec.node_pool(), Some("pool-a"));
        assert_eq!(
            op.spec.upgrade_settings.as_ref().and_then(|u| u.max_surge),
            Some(2)
        );
        assert_eq!(
            op.metadata.name.as_deref(),
            Some("auto-upgrade-pool-a-1.35.1-gke.1396000")
        );
        // Off, unset, level or ahead, or no control-plane version: nothing.
        assert!(wanted(&pool("1.34.5", Some(false)), Some(&c), &[]).is_none());
        assert!(wanted(&pool("1.34.5", None), Some(&c), &[]).is_none());
        assert!(wanted(&pool("1.35.1", Some(true)), Some(&c), &[]).is_none());
        assert!(wanted(&pool("1.36.0", Some(true)), Some(&c), &[]).is_none());
        assert!(wanted(&pool("1.34.5", Some(true)), None, &[]).is_none());
    }

    // spec: U6 — made once: not beside a running upgrade of the pool, and
    // not again after a cancelled one to the same version.
    #[test]
    fn made_once_and_never_beside_another() {
        let c = cluster("1.35.1");
        let p = pool("1.34.5", Some(true));
        let mut first = wanted(&p, Some(&c), &[]).expect("an upgrade");
        assert!(wanted(&p, Some(&c), &[&first]).is_none(), "it exists");
        first.status.get_or_insert_with(Default::default).status = Some(OperationState::Cancelled);
        assert!(
            wanted(&p, Some(&c), &[&first]).is_none(),
            "cancelled stays so"
        );
        let mut other = first.clone();
        other.metadata.name = Some("manual".into());
        other.status.get_or_insert_with(Default::default).status = Some(OperationState::Running);
        let mut done = first.clone();
        done.metadata.name = Some("older".into());
        done.status.get_or_insert_with(Default::default).status = Some(OperationState::Done);
        assert!(wanted(&p, Some(&c), &[&other]).is_none(), "one at a time");
        assert!(
            wanted(&p, Some(&c), &[&done]).is_some(),
            "a finished one is history"
        );
    }
}
