use serde_json::json;
use sluice_model::node_pool::NodePool;
use sluice_model::operation::{Operation, OperationAction, OperationType};

use super::*;

fn pool(v: serde_json::Value) -> NodePool {
    serde_json::from_value(v).unwrap()
}

fn pool_a() -> NodePool {
    pool(json!({
        "apiVersion": "sluice.dev/v1", "kind": "NodePool",
        "metadata": {"name": "pool-a"},
        "spec": {"version": "1.33.2", "config": {"capacity": {"cpu": "2", "memory": "4Gi"}}}
    }))
}

fn op(name: &str, created: &str, pool: &str, state: Option<&str>) -> Operation {
    let mut v = json!({
        "apiVersion": "sluice.dev/v1", "kind": "Operation",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"operationType": "UPGRADE_NODES",
                 "targetLink": format!("/apis/sluice.dev/v1/nodepools/{pool}"),
                 "nodeVersion": "1.33.5"}
    });
    if let Some(s) = state {
        v["status"] = json!({"status": s});
    }
    serde_json::from_value(v).unwrap()
}

/// Pool-a's upgrade `operation-<n>-0001`, created `n` minutes after 08:00.
fn up(n: u32, state: Option<&str>) -> Operation {
    op(
        &format!("operation-{n}-0001"),
        &format!("2026-11-27T08:{n:02}:00Z"),
        "pool-a",
        state,
    )
}

#[test]
fn operation_names_are_gcloud_shaped() {
    assert_eq!(
        operation_name(1_764_000_000_123, 0xa),
        "operation-1764000000123-000a"
    );
    assert_eq!(operation_name(5, 0xbeef), "operation-5-beef");
}

/// spec: U1 — the operation names the pool and the new version; with no
/// flags and no pool settings, the API's defaults apply (absent).
#[test]
fn a_version_upgrade_names_pool_and_version() {
    let s = upgrade_spec(&pool_a(), Change::Version("1.33.5".into()), None, None).unwrap();
    assert_eq!(s.operation_type, OperationType::UpgradeNodes);
    assert_eq!(s.node_pool(), Some("pool-a"));
    assert_eq!(s.node_version.as_deref(), Some("1.33.5"));
    assert_eq!(s.config, None);
    assert_eq!(s.upgrade_settings, None);
}

/// spec: U3 — the flags go over the pool's own settings, field by field.
#[test]
fn flags_override_the_pools_settings() {
    let mut p = pool_a();
    p.spec.upgrade_settings = Some(UpgradeSettings {
        max_surge: Some(3),
        max_unavailable: Some(2),
        ..UpgradeSettings::default()
    });
    let s = upgrade_spec(&p, Change::Version("1.33.5".into()), Some(1), None).unwrap();
    let u = s.upgrade_settings.unwrap();
    assert_eq!((u.max_surge, u.max_unavailable), (Some(1), Some(2)));
    let s = upgrade_spec(&p, Change::Version("1.33.5".into()), None, None).unwrap();
    assert_eq!(s.upgrade_settings, p.spec.upgrade_settings);
}

#[test]
fn the_same_version_or_config_is_nothing_to_upgrade() {
    let e = upgrade_spec(&pool_a(), Change::Version("1.33.2".into()), None, None).unwrap_err();
    assert!(e.to_string().starts_with("nothing to upgrade"), "{e}");
    let same = pool_a().spec.config;
    let e = upgrade_spec(&pool_a(), Change::Config(same), None, None).unwrap_err();
    assert!(e.to_string().starts_with("nothing to upgrade"), "{e}");
}

/// spec: U7 — a config change (labels) is carried whole.
#[test]
fn a_config_file_is_decoded_strictly() {
    let c = config_from_yaml("capacity: {cpu: '2', memory: 4Gi}\nlabels: {tier: web}\n").unwrap();
    assert_eq!(c.labels.get("tier").map(String::as_str), Some("web"));
    let s = upgrade_spec(&pool_a(), Change::Config(c.clone()), None, None).unwrap();
    assert_eq!(s.config, Some(c));
    assert!(config_from_yaml("  \n").unwrap_err().starts_with("empty"));
    let e = config_from_yaml("capacity: {cpu: '2', memory: 4Gi}\ncolour: red\n").unwrap_err();
    assert!(e.contains("colour"), "{e}");
    let e = config_from_yaml("capacity: {cpu: '2', memory: 4Gi, gpus: 1}\n").unwrap_err();
    assert!(e.contains("capacity.gpus"), "{e}");
    assert!(config_from_yaml(": : [").is_err());
    let e = config_from_yaml("labels: {a: b}\n").unwrap_err();
    assert!(e.contains("capacity"), "{e}");
}

#[test]
fn timeouts_parse_with_units() {
    assert_eq!(parse_timeout("90").unwrap().as_secs(), 90);
    assert_eq!(parse_timeout("90s").unwrap().as_secs(), 90);
    assert_eq!(parse_timeout("5m").unwrap().as_secs(), 300);
    assert_eq!(parse_timeout("2h").unwrap().as_secs(), 7200);
    for bad in ["", "m", "-1s", "5d", "1.5m", "99999999999999999999h"] {
        assert!(parse_timeout(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_pools_upgrades_come_newest_first() {
    let ops = vec![
        up(1, Some("DONE")),
        op("operation-3-0001", "2026-11-27T08:03:00Z", "pool-b", None),
        up(2, Some("RUNNING")),
    ];
    let names: Vec<_> = upgrades_of(&ops, "pool-a")
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["operation-2-0001", "operation-1-0001"]);
    let mut all = ops.clone();
    newest_first(&mut all);
    assert_eq!(all[0].metadata.name.as_deref(), Some("operation-3-0001"));
}

/// spec: U6 — rollback goes to a live or cancelled upgrade; a completed
/// one is still sent, for the API to refuse; a rolled-back one is not.
#[test]
fn rollback_picks_the_latest_live_or_cancelled_upgrade() {
    let at = |s: Option<&str>| {
        let ops = vec![up(1, Some("DONE")), up(2, s)];
        action_target(&ops, "pool-a", OperationAction::Rollback)
    };
    for s in [
        None,
        Some("RUNNING"),
        Some("CANCELLING"),
        Some("CANCELLED"),
        Some("DONE"),
    ] {
        assert_eq!(at(s).as_deref(), Ok("operation-2-0001"), "{s:?}");
    }
    for s in ["ROLLED_BACK", "FAILED"] {
        let e = at(Some(s)).unwrap_err().to_string();
        assert!(e.contains(s) && e.contains("nothing to roll back"), "{e}");
    }
    let e = action_target(&[], "pool-a", OperationAction::Rollback).unwrap_err();
    assert!(e.to_string().contains("has no upgrade operation"), "{e}");
}

/// spec: U6 — only a cancelled (or cancelling) upgrade resumes.
#[test]
fn resume_needs_a_cancelled_upgrade() {
    let one = |s: &str| vec![up(1, Some(s))];
    for s in ["CANCELLED", "CANCELLING"] {
        assert!(action_target(&one(s), "pool-a", OperationAction::Resume).is_ok());
    }
    for s in ["RUNNING", "DONE", "ROLLING_BACK"] {
        let e = action_target(&one(s), "pool-a", OperationAction::Resume).unwrap_err();
        assert!(
            e.to_string().contains("only a cancelled upgrade resumes"),
            "{e}"
        );
    }
}

/// spec: U6 — a final operation is not cancelled.
#[test]
fn final_operations_are_not_cancellable() {
    let o = |s| up(1, s);
    assert!(cancellable(&o(None)).is_ok());
    assert!(cancellable(&o(Some("RUNNING"))).is_ok());
    for s in ["DONE", "FAILED", "ROLLED_BACK"] {
        let e = cancellable(&o(Some(s))).unwrap_err().to_string();
        assert!(e.contains(s) && e.contains("nothing to cancel"), "{e}");
    }
}

/// spec: B3 — gcloud's --standard-rollout-policy keys, one batch size.
#[test]
fn the_standard_rollout_policy_reads_gcloud_keys() {
    let p = parse_standard_rollout_policy("batch-node-count=3,batch-soak-duration=60s").unwrap();
    assert_eq!(p.batch_node_count, Some(3));
    assert_eq!(p.batch_soak_duration, Some(Duration::from_secs(60)));
    let p = parse_standard_rollout_policy(" batch-percent=0.25 ").unwrap();
    assert_eq!(p.batch_percentage, Some(0.25));
    // An empty value means the defaults.
    assert_eq!(
        parse_standard_rollout_policy("").unwrap(),
        StandardRolloutPolicy::default()
    );
    for (bad, says) in [
        (
            "batch-node-count=3,batch-percent=0.5",
            "give one of the two",
        ),
        ("batch-percent=1.5", "from 0 to 1"),
        ("batch-node-count=-1", "0 or more"),
        ("batch-node-count=x", "not a whole number"),
        ("batch-soak-duration=60", "not a duration"),
        ("batch-soak-duration=-5s", "negative"),
        ("batch-size=3", "unknown key \"batch-size\""),
        ("batch-node-count", "expected KEY=VALUE"),
        ("batch-node-count=1,batch-node-count=2", "given twice"),
    ] {
        let e = parse_standard_rollout_policy(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// spec: B1, B3, B4 — update lays the flags over the pool's settings;
/// switching to surge drops the blue-green settings.
#[test]
fn update_sets_the_strategy_and_its_settings() {
    let flags = StrategyFlags {
        blue_green: true,
        standard: Some(parse_standard_rollout_policy("batch-node-count=2").unwrap()),
        node_pool_soak: Some(Duration::from_secs(600)),
        ..Default::default()
    };
    let u = updated_settings(None, &flags).unwrap();
    assert_eq!(u.strategy, Some(UpgradeStrategy::BlueGreen));
    let bg = u.blue_green_settings.clone().unwrap();
    assert_eq!(bg.node_pool_soak_duration, Some(Duration::from_secs(600)));
    assert_eq!(
        bg.standard_rollout_policy.unwrap().batch_node_count,
        Some(2)
    );
    let back = StrategyFlags {
        surge: true,
        max_surge: Some(2),
        ..Default::default()
    };
    let s = updated_settings(Some(&u), &back).unwrap();
    assert_eq!(s.strategy, Some(UpgradeStrategy::Surge));
    assert_eq!(s.blue_green_settings, None);
    assert_eq!(s.max_surge, Some(2));
    let e = updated_settings(Some(&u), &StrategyFlags::default()).unwrap_err();
    assert!(e.contains("nothing to update"), "{e}");
}

/// spec: B4 — complete-upgrade goes to the pool's live upgrade.
#[test]
fn complete_goes_to_the_live_upgrade() {
    let ops = [up(1, Some("DONE")), up(2, Some("RUNNING"))];
    assert_eq!(
        action_target(&ops, "pool-a", OperationAction::Complete).unwrap(),
        "operation-2-0001"
    );
    let ops = [up(1, Some("DONE"))];
    let e = action_target(&ops, "pool-a", OperationAction::Complete).unwrap_err();
    assert!(e.to_string().contains("nothing to complete"), "{e}");
}

/// spec: A1 — gcloud's --autoscaled-rollout-policy key; empty is the
/// defaults (a 3-day wait).
#[test]
fn the_autoscaled_rollout_policy_reads_gcloud_keys() {
    let p = parse_autoscaled_rollout_policy("wait-for-drain-duration=7200s").unwrap();
    assert_eq!(p.wait_for_drain_duration, Some(Duration::from_secs(7200)));
    for empty in ["", " ", ","] {
        let p = parse_autoscaled_rollout_policy(empty).unwrap();
        assert_eq!(p, AutoscaledRolloutPolicy::default(), "{empty:?}");
        assert_eq!(p.wait_for_drain_duration(), Duration::from_secs(3 * 86_400));
    }
    for (bad, says) in [
        (
            "wait-for-drain-duration=2h",
            "wait-for-drain-duration: \"2h\" is not a duration",
        ),
        (
            "wait-for-drain-duration=-1s",
            "wait-for-drain-duration: must not be negative",
        ),
        (
            "batch-node-count=1",
            "unknown key \"batch-node-count\": expected wait-for-drain-duration",
        ),
        ("wait-for-drain-duration", "expected KEY=VALUE"),
        (
            "wait-for-drain-duration=1s,wait-for-drain-duration=2s",
            "given twice",
        ),
    ] {
        let e = parse_autoscaled_rollout_policy(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// spec: A1, B3 — the rollout policies are GKE's oneof: setting one
/// clears the other; the soak is kept.
#[test]
fn a_rollout_policy_replaces_the_other() {
    let standard = StrategyFlags {
        blue_green: true,
        standard: Some(parse_standard_rollout_policy("batch-node-count=2").unwrap()),
        node_pool_soak: Some(Duration::from_secs(600)),
        ..Default::default()
    };
    let u = updated_settings(None, &standard).unwrap();
    let autoscaled = StrategyFlags {
        autoscaled: Some(parse_autoscaled_rollout_policy("").unwrap()),
        ..Default::default()
    };
    let a = updated_settings(Some(&u), &autoscaled).unwrap();
    assert_eq!(a.strategy, Some(UpgradeStrategy::BlueGreen));
    let bg = a.blue_green_settings.clone().unwrap();
    assert_eq!(bg.standard_rollout_policy, None);
    assert_eq!(
        bg.autoscaled_rollout_policy,
        Some(AutoscaledRolloutPolicy::default())
    );
    assert_eq!(bg.node_pool_soak_duration, Some(Duration::from_secs(600)));
    let back = updated_settings(Some(&a), &standard).unwrap();
    let bg = back.blue_green_settings.unwrap();
    assert_eq!(bg.autoscaled_rollout_policy, None);
    assert!(bg.standard_rollout_policy.is_some());
}

/// spec: A5 — an upgrade of a flex-start or queued-provisioning pool
/// records SHORT_LIVED alone, whatever the pool stores, and takes no
/// surge flags.
#[test]
fn a_short_lived_pools_upgrade_is_short_lived() {
    let mut p = pool_a();
    p.spec.config.flex_start = true;
    let s = upgrade_spec(&p, Change::Version("1.33.5".into()), None, None).unwrap();
    assert_eq!(
        s.upgrade_settings,
        Some(UpgradeSettings {
            strategy: Some(UpgradeStrategy::ShortLived),
            ..Default::default()
        })
    );
    let mut q = pool_a();
    q.spec.queued_provisioning =
        Some(sluice_model::node_pool::QueuedProvisioning { enabled: true });
    q.spec.upgrade_settings = Some(UpgradeSettings {
        strategy: Some(UpgradeStrategy::BlueGreen),
        ..Default::default()
    });
    let s = upgrade_spec(&q, Change::Version("1.33.5".into()), None, None).unwrap();
    assert_eq!(
        s.upgrade_settings.and_then(|u| u.strategy),
        Some(UpgradeStrategy::ShortLived)
    );
    let e = upgrade_spec(&q, Change::Version("1.33.5".into()), Some(2), None).unwrap_err();
    assert!(
        e.to_string()
            .contains("SHORT_LIVED, which takes no settings"),
        "{e}"
    );
}
