//! Flex-start and queued-provisioning pools (A5): GKE's fields, their
//! bounds, and the SHORT_LIVED strategy they force.

use super::node_pool::{FULL, MINIMAL};
use super::{breaks, edited, round_trip};
use crate::duration::Duration;
use crate::kind::SluiceKind;
use crate::node_pool::*;
use crate::validation::ErrorKind;

/// A flex-start pool with queued provisioning, as GKE spells both.
const FLEX: &str = r#"
apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-gpu}
spec:
  config:
    capacity: {cpu: "8", memory: 32Gi}
    flexStart: true
    maxRunDuration: 3600s
  queuedProvisioning: {enabled: true}
"#;

const WHY: &str = "flex-start and queued-provisioning node pools are upgraded with SHORT_LIVED";

fn flex(p: &mut NodePool) {
    p.spec.config.flex_start = true;
}

fn queued(p: &mut NodePool) {
    p.spec.queued_provisioning = Some(QueuedProvisioning { enabled: true });
}

#[test]
fn flex_start_fields_round_trip_in_gke_spelling() {
    // spec: A5
    let pool: NodePool = round_trip(FLEX);
    assert!(pool.spec.config.flex_start);
    assert_eq!(
        pool.spec.config.max_run_duration,
        Some(Duration::from_secs(3600))
    );
    assert_eq!(
        pool.spec.queued_provisioning,
        Some(QueuedProvisioning { enabled: true })
    );
    assert!(pool.spec.short_lived());
    let json = serde_json::to_value(&pool.spec).expect("json");
    assert_eq!(json["config"]["maxRunDuration"], "3600s");
    assert_eq!(json["config"]["flexStart"], true);
    assert_eq!(json["queuedProvisioning"]["enabled"], true);
}

#[test]
fn a_short_lived_pool_is_upgraded_short_lived_whatever_is_stored() {
    // spec: A5 — GKE sets the strategy itself.
    let plain: NodePool = edited(MINIMAL, |_: &mut NodePool| {});
    assert!(!plain.spec.short_lived());
    assert_eq!(plain.spec.upgrade_strategy(), UpgradeStrategy::Surge);
    assert_eq!(plain.spec.operation_upgrade_settings(), None);
    assert_eq!(plain.spec.max_run_duration(), None);
    let blue_green: NodePool = edited(FULL, |_: &mut NodePool| {});
    assert_eq!(
        blue_green.spec.upgrade_strategy(),
        UpgradeStrategy::BlueGreen
    );
    assert_eq!(
        blue_green.spec.operation_upgrade_settings(),
        blue_green.spec.upgrade_settings
    );

    for make in [flex as fn(&mut NodePool), queued] {
        let mut p: NodePool = edited(MINIMAL, make);
        assert!(p.spec.short_lived());
        assert_eq!(p.spec.upgrade_strategy(), UpgradeStrategy::ShortLived);
        // Even over stored settings a user could not write at admission.
        p.spec.upgrade_settings = Some(UpgradeSettings {
            strategy: Some(UpgradeStrategy::Surge),
            max_surge: Some(3),
            ..Default::default()
        });
        assert_eq!(p.spec.upgrade_strategy(), UpgradeStrategy::ShortLived);
        let snapshot = p.spec.operation_upgrade_settings().expect("settings");
        assert_eq!(snapshot.strategy, Some(UpgradeStrategy::ShortLived));
        assert_eq!(
            (snapshot.max_surge, snapshot.blue_green_settings),
            (None, None),
            "SHORT_LIVED takes no settings"
        );
        // All switched within 7 days: a node runs at most that long.
        assert_eq!(p.spec.max_run_duration(), Some(DWS_MAX_RUN_DURATION));
    }
    let p: NodePool = edited(FLEX, |_: &mut NodePool| {});
    assert_eq!(p.spec.max_run_duration(), Some(Duration::from_secs(3600)));
    // Disabled queued provisioning is not short-lived.
    let p: NodePool = edited(MINIMAL, |p: &mut NodePool| {
        p.spec.queued_provisioning = Some(QueuedProvisioning { enabled: false })
    });
    assert!(!p.spec.short_lived());
}

#[test]
fn a_short_lived_pool_refuses_upgrade_settings() {
    // spec: A5 — no settings: any strategy but SHORT_LIVED, and every
    // setting, is refused naming its field.
    let at = "spec.upgradeSettings";
    breaks(
        MINIMAL,
        |p: &mut NodePool| {
            flex(p);
            p.spec.upgrade_settings = Some(UpgradeSettings {
                strategy: Some(UpgradeStrategy::BlueGreen),
                ..Default::default()
            });
        },
        &format!("{at}.strategy"),
        ErrorKind::Forbidden,
        WHY,
    );
    breaks(
        MINIMAL,
        |p: &mut NodePool| {
            queued(p);
            p.spec.upgrade_settings = Some(UpgradeSettings {
                max_surge: Some(1),
                ..Default::default()
            });
        },
        &format!("{at}.maxSurge"),
        ErrorKind::Forbidden,
        "takes no settings",
    );
    let p: NodePool = edited(FULL, flex);
    let errors = p.validate().expect_err("blue-green settings on flex-start");
    for field in [
        "strategy",
        "maxSurge",
        "maxUnavailable",
        "blueGreenSettings",
    ] {
        let e = errors.at(&format!("{at}.{field}")).expect(field);
        assert_eq!(e.kind, ErrorKind::Forbidden, "{e}");
        assert!(e.message.contains(WHY), "{e}");
    }
    // SHORT_LIVED itself, or nothing, is fine.
    for strategy in [Some(UpgradeStrategy::ShortLived), None] {
        let p: NodePool = edited(MINIMAL, |p: &mut NodePool| {
            flex(p);
            p.spec.upgrade_settings = Some(UpgradeSettings {
                strategy,
                ..Default::default()
            });
        });
        assert_eq!(p.validate(), Ok(()));
    }
}

#[test]
fn max_run_duration_is_positive_and_dws_nodes_run_at_most_seven_days() {
    // spec: A5
    let at = "spec.config.maxRunDuration";
    for bad in [Duration::ZERO, Duration::from_secs(-5)] {
        breaks(
            MINIMAL,
            |p: &mut NodePool| p.spec.config.max_run_duration = Some(bad),
            at,
            ErrorKind::Invalid,
            "more than 0s",
        );
    }
    let eight_days = Duration::from_secs(8 * 24 * 3600);
    for make in [flex as fn(&mut NodePool), queued] {
        breaks(
            MINIMAL,
            |p: &mut NodePool| {
                make(p);
                p.spec.config.max_run_duration = Some(eight_days);
            },
            at,
            ErrorKind::Invalid,
            "run at most 604800s (7 days), got 691200s",
        );
        let p: NodePool = edited(MINIMAL, |p: &mut NodePool| {
            make(p);
            p.spec.config.max_run_duration = Some(DWS_MAX_RUN_DURATION);
        });
        assert_eq!(p.validate(), Ok(()), "exactly 7 days");
    }
    // GKE takes maxRunDuration on any pool; only DWS nodes are capped.
    let p: NodePool = edited(MINIMAL, |p: &mut NodePool| {
        p.spec.config.max_run_duration = Some(eight_days)
    });
    assert_eq!(p.validate(), Ok(()));
    assert_eq!(p.spec.max_run_duration(), Some(eight_days));
}

#[test]
fn the_schema_shows_the_new_fields() {
    // spec: A5 — `kubectl explain nodepool.spec.config.flexStart` reads
    // the published schema.
    let all = crate::openapi::components();
    let config = &all["dev.sluice.v1.NodeConfig"]["properties"];
    assert_eq!(config["flexStart"]["type"], "boolean", "{config}");
    assert_eq!(
        config["maxRunDuration"]["pattern"], "^-?[0-9]+(\\.[0-9]{1,9})?s$",
        "{config}"
    );
    let spec = &all["dev.sluice.v1.NodePoolSpec"]["properties"];
    assert!(spec.get("queuedProvisioning").is_some(), "{spec}");
    let queued = &all["dev.sluice.v1.QueuedProvisioning"]["properties"];
    assert_eq!(queued["enabled"]["type"], "boolean", "{queued}");
}
