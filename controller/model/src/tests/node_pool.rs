use super::{assert_unknown_field, breaks, edited, round_trip, strict};
use crate::decode::DecodeErrorKind;
use crate::duration::Duration;
use crate::k8s::Quantity;
use crate::kind::SluiceKind;
use crate::node_pool::*;
use crate::validation::ErrorKind;

/// Every field set once.
pub(super) const FULL: &str = r#"
apiVersion: sluice.dev/v1
kind: NodePool
metadata:
  name: pool-a
  labels:
    team: infra
spec:
  locations: [zone-a, zone-b]
  initialNodeCount: 3
  config:
    capacity:
      cpu: "4"
      memory: 16Gi
    labels:
      cloud.google.com/gke-nodepool: pool-a
    taints:
      - key: dedicated
        value: batch
        effect: NO_SCHEDULE
    spot: true
    pricePerHour: 0.05
    reservationAffinity:
      consumeReservationType: SPECIFIC_RESERVATION
      key: compute.googleapis.com/reservation-name
      values: [res-a]
  version: 1.33.2
  autoscaling:
    enabled: true
    minNodeCount: 1
    maxNodeCount: 5
    locationPolicy: ANY
  upgradeSettings:
    maxSurge: 2
    maxUnavailable: 1
    strategy: BLUE_GREEN
    blueGreenSettings:
      standardRolloutPolicy:
        batchPercentage: 0.25
        batchSoakDuration: 120s
      nodePoolSoakDuration: 3600s
  management:
    autoUpgrade: true
    autoRepair: true
  placementPolicy:
    type: COMPACT
status:
  status: RUNNING
  statusMessage: all nodes ready
  version: 1.33.2
  nodes: [pool-a-zone-a-1, pool-a-zone-b-1]
  zones:
    - {zone: zone-a, targetNodeCount: 3, nodeCount: 3, readyNodeCount: 1}
  instances:
    - {name: pool-a-a-bcdf, zone: zone-a, state: RUNNING, version: 1.33.2, ready: true}
    - {name: pool-a-a-ghjk, zone: zone-a, state: FAILED, message: disk full}
  conditions:
    - type: QuotaExceeded
      status: "True"
      lastTransitionTime: "2026-11-23T01:00:00Z"
      reason: QuotaExhausted
      message: "instances: limit 10"
  createBackoff:
    failures: 2
    lastFailureTime: "2026-11-23T01:00:00Z"
    quotaExceeded: true
    message: "instances: limit 10"
  autoscaler:
    targetSizes: {zone-a: 3, zone-b: 2}
    nodesToRemove:
      - {name: pool-a-zone-b-1, zone: zone-b}
    memory: {unneededSince: {pool-a-zone-b-1: "2026-11-23T01:00:00Z"}}
"#;

/// Just what is required.
pub(super) const MINIMAL: &str = r#"
apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-b}
spec:
  config:
    capacity: {cpu: "2", memory: 4Gi}
"#;

#[test]
fn full_example_round_trips() {
    let pool: NodePool = round_trip(FULL);
    let bg = pool
        .spec
        .upgrade_settings
        .as_ref()
        .and_then(|u| u.blue_green_settings.as_ref());
    assert_eq!(
        bg.map(|b| b.node_pool_soak_duration()),
        Some(Duration::from_secs(3600))
    );
    assert_eq!(pool.spec.config.taints[0].effect.kubernetes(), "NoSchedule");
    let status = pool.status.unwrap_or_default();
    assert_eq!(status.status, Some(NodePoolPhase::Running));
    assert_eq!(status.instances[1].state, InstanceState::Failed);
    assert_eq!(status.create_backoff.map(|b| b.failures), Some(2));
    let a = status.autoscaler.unwrap_or_default();
    assert_eq!(a.target_sizes.get("zone-b"), Some(&2));
    assert_eq!(a.nodes_to_remove[0].name, "pool-a-zone-b-1");
    assert!(a.memory.is_some_and(|m| m.get("unneededSince").is_some()));
    let r = pool.spec.config.reservation_affinity.unwrap_or_default();
    assert_eq!(
        r.consume_reservation_type,
        ReservationType::SpecificReservation
    );
}

#[test]
fn minimal_example_has_gke_defaults() {
    let pool: NodePool = round_trip(MINIMAL);
    let u = pool.spec.upgrade_settings.unwrap_or_default();
    // spec: U1, U2 — maxSurge 1, maxUnavailable 0, strategy SURGE.
    assert_eq!(
        (u.max_surge(), u.max_unavailable(), u.strategy()),
        (1, 0, UpgradeStrategy::Surge)
    );
    // spec: B4 — nodePoolSoakDuration defaults to 3600 s.
    assert_eq!(
        BlueGreenSettings::default().node_pool_soak_duration(),
        Duration::from_secs(3600)
    );
}

#[test]
fn new_fills_type_meta() {
    let pool = NodePool::new("p", NodePoolSpec::default());
    assert_eq!(pool.type_meta(), ("sluice.dev/v1", "NodePool"));
    assert_eq!(pool.metadata.name.as_deref(), Some("p"));
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    let typo = FULL.replace("maxSurge: 2", "maxSurges: 2");
    assert_unknown_field::<NodePool>(&typo, "spec.upgradeSettings.maxSurges");
    let in_list = FULL.replace(
        "effect: NO_SCHEDULE",
        "effect: NO_SCHEDULE\n        colour: red",
    );
    assert_unknown_field::<NodePool>(&in_list, "spec.config.taints[0].colour");
    // Inside the upstream ObjectMeta too.
    let in_meta = FULL.replace("  name: pool-a", "  name: pool-a\n  nmae: x");
    assert_unknown_field::<NodePool>(&in_meta, "metadata.nmae");
}

#[test]
fn type_errors_name_the_field() {
    let err = strict::<NodePool>(&FULL.replace("initialNodeCount: 3", "initialNodeCount: three"))
        .expect_err("a string count");
    assert_eq!(
        (err.field.as_str(), err.kind),
        ("spec.initialNodeCount", DecodeErrorKind::Malformed)
    );
    let err = strict::<NodePool>(&FULL.replace("strategy: BLUE_GREEN", "strategy: ROLLING"))
        .expect_err("unknown strategy");
    assert_eq!(err.field, "spec.upgradeSettings.strategy");
    let err = strict::<NodePool>(&FULL.replace("batchSoakDuration: 120s", "batchSoakDuration: 2m"))
        .expect_err("not a GKE duration");
    assert_eq!(
        err.field,
        "spec.upgradeSettings.blueGreenSettings.standardRolloutPolicy.batchSoakDuration"
    );
    assert!(err.message.contains("\"3600s\""), "{err}");
    let err =
        strict::<NodePool>(&FULL.replace("kind: NodePool", "kind: Cluster")).expect_err("kind");
    assert_eq!(
        (err.field.as_str(), err.kind),
        ("kind", DecodeErrorKind::WrongKind)
    );
    let err =
        strict::<NodePool>(&FULL.replace("sluice.dev/v1", "sluice.dev/v2")).expect_err("version");
    assert_eq!(err.field, "apiVersion");
}

fn upgrade(pool: &mut NodePool) -> &mut UpgradeSettings {
    pool.spec
        .upgrade_settings
        .get_or_insert_with(Default::default)
}

fn blue_green(pool: &mut NodePool) -> &mut BlueGreenSettings {
    let u = upgrade(pool);
    u.blue_green_settings.get_or_insert_with(Default::default)
}

fn standard(pool: &mut NodePool) -> &mut StandardRolloutPolicy {
    let bg = blue_green(pool);
    bg.standard_rollout_policy
        .get_or_insert_with(Default::default)
}

fn autoscaling(pool: &mut NodePool) -> &mut NodePoolAutoscaling {
    pool.spec.autoscaling.get_or_insert_with(Default::default)
}

#[test]
fn surge_settings() {
    // spec: U1 — maxSurge is a count of nodes.
    breaks(
        FULL,
        |p: &mut NodePool| upgrade(p).max_surge = Some(-1),
        "spec.upgradeSettings.maxSurge",
        ErrorKind::Invalid,
        "0 or more",
    );
    // spec: U2 — so is maxUnavailable.
    breaks(
        FULL,
        |p: &mut NodePool| upgrade(p).max_unavailable = Some(-2),
        "spec.upgradeSettings.maxUnavailable",
        ErrorKind::Invalid,
        "got -2",
    );
    // spec: U1, U2 — a surge upgrade with neither would never progress;
    // maxSurge 0 alone is enough, since maxUnavailable defaults to 0.
    breaks(
        MINIMAL,
        |p: &mut NodePool| upgrade(p).max_surge = Some(0),
        "spec.upgradeSettings.maxSurge",
        ErrorKind::Invalid,
        "both be 0",
    );
    // spec: U5 — the (0, 1) and (0, 20) profiles are fine.
    let p = edited(MINIMAL, |p: &mut NodePool| {
        upgrade(p).max_surge = Some(0);
        upgrade(p).max_unavailable = Some(20);
    });
    assert_eq!(p.validate(), Ok(()));
    // Blue-green does not use them: both 0 is fine there.
    let p = edited(FULL, |p: &mut NodePool| {
        upgrade(p).max_surge = Some(0);
        upgrade(p).max_unavailable = Some(0);
    });
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn blue_green_batches() {
    let at = "spec.upgradeSettings.blueGreenSettings.standardRolloutPolicy";
    // spec: B3 — batchPercentage is a fraction within 0–1.
    for bad in [1.5, -0.1, f64::NAN] {
        breaks(
            FULL,
            |p: &mut NodePool| standard(p).batch_percentage = Some(bad),
            &format!("{at}.batchPercentage"),
            ErrorKind::Invalid,
            "from 0 to 1",
        );
    }
    // spec: B3 — 0 is allowed (it skips to the soak phase), so is 1.
    for ok in [0.0, 1.0] {
        let p = edited(FULL, |p: &mut NodePool| {
            standard(p).batch_percentage = Some(ok)
        });
        assert_eq!(p.validate(), Ok(()));
    }
    // spec: B3 — batchNodeCount ≥ 0.
    breaks(
        FULL,
        |p: &mut NodePool| {
            standard(p).batch_percentage = None;
            standard(p).batch_node_count = Some(-1);
        },
        &format!("{at}.batchNodeCount"),
        ErrorKind::Invalid,
        "0 or more",
    );
    // spec: B3 — one of the two, not both.
    breaks(
        FULL,
        |p: &mut NodePool| standard(p).batch_node_count = Some(2),
        &format!("{at}.batchNodeCount"),
        ErrorKind::Forbidden,
        "not both",
    );
}

#[test]
fn blue_green_soaks() {
    let bg = "spec.upgradeSettings.blueGreenSettings";
    // spec: B4 — soaks within 0–7 days; 7 days exactly is allowed.
    let p = edited(FULL, |p: &mut NodePool| {
        standard(p).batch_soak_duration = Some(Duration::from_secs(604_800))
    });
    assert_eq!(p.validate(), Ok(()));
    breaks(
        FULL,
        |p: &mut NodePool| standard(p).batch_soak_duration = Some(Duration::from_secs(604_801)),
        &format!("{bg}.standardRolloutPolicy.batchSoakDuration"),
        ErrorKind::Invalid,
        "at most 604800s",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            let bg = blue_green(p);
            bg.node_pool_soak_duration = Some(Duration::from_secs(-1));
        },
        &format!("{bg}.nodePoolSoakDuration"),
        ErrorKind::Invalid,
        "negative",
    );
}

#[test]
fn autoscaled_blue_green() {
    let at = "spec.upgradeSettings.blueGreenSettings.autoscaledRolloutPolicy";
    let autoscaled = |wait: Option<Duration>| {
        move |p: &mut NodePool| {
            let bg = blue_green(p);
            bg.standard_rollout_policy = None;
            bg.autoscaled_rollout_policy = Some(AutoscaledRolloutPolicy {
                wait_for_drain_duration: wait,
            });
        }
    };
    let p = edited(FULL, autoscaled(Some(Duration::from_secs(3 * 86_400))));
    assert_eq!(p.validate(), Ok(()));
    // spec: A1 — the wait is 0–7 days.
    breaks(
        FULL,
        autoscaled(Some(Duration::from_secs(8 * 86_400))),
        &format!("{at}.waitForDrainDuration"),
        ErrorKind::Invalid,
        "7 days",
    );
    // spec: A4 — it needs the autoscaler on the pool.
    breaks(
        FULL,
        |p: &mut NodePool| {
            autoscaled(None)(p);
            autoscaling(p).enabled = false;
        },
        at,
        ErrorKind::Forbidden,
        "spec.autoscaling.enabled",
    );
    // One rollout policy, not both (GKE's oneof).
    breaks(
        FULL,
        |p: &mut NodePool| {
            let bg = blue_green(p);
            bg.autoscaled_rollout_policy = Some(AutoscaledRolloutPolicy::default());
        },
        at,
        ErrorKind::Forbidden,
        "not both",
    );
}

#[test]
fn short_lived_takes_no_settings() {
    // spec: A5
    let p = edited(FULL, |p: &mut NodePool| {
        upgrade(p).strategy = Some(UpgradeStrategy::ShortLived)
    });
    let errors = p.validate().expect_err("settings with SHORT_LIVED");
    for field in ["maxSurge", "maxUnavailable", "blueGreenSettings"] {
        let e = errors
            .at(&format!("spec.upgradeSettings.{field}"))
            .expect(field);
        assert_eq!(e.kind, ErrorKind::Forbidden);
    }
    let p = edited(MINIMAL, |p: &mut NodePool| {
        upgrade(p).strategy = Some(UpgradeStrategy::ShortLived)
    });
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn node_counts_past_a_cluster_are_refused() {
    // spec: C11 — at most 15 000 nodes: a pool asking for more is refused
    // at admission, naming the field (a count near i32::MAX used to
    // overflow the pools loop's sums).
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.initial_node_count = Some(2_000_000_000),
        "spec.initialNodeCount",
        ErrorKind::Invalid,
        "a cluster holds at most 15000",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            p.spec.locations = vec!["z-a".into(), "z-b".into()];
            p.spec.initial_node_count = Some(7_501);
        },
        "spec.initialNodeCount",
        ErrorKind::Invalid,
        "7501 nodes in each of 2 zone(s) is 15002",
    );
    let ok = edited(FULL, |p: &mut NodePool| {
        p.spec.locations = vec!["z-a".into(), "z-b".into()];
        p.spec.initial_node_count = Some(7_500);
    });
    assert_eq!(ok.validate(), Ok(()));
    breaks(
        FULL,
        |p: &mut NodePool| autoscaling(p).max_node_count = Some(i32::MAX),
        "spec.autoscaling.maxNodeCount",
        ErrorKind::Invalid,
        "more than a cluster holds",
    );
}

#[test]
fn autoscaling_limits() {
    // spec: C1 — min ≤ max, per zone and in total.
    breaks(
        FULL,
        |p: &mut NodePool| autoscaling(p).min_node_count = Some(6),
        "spec.autoscaling.minNodeCount",
        ErrorKind::Invalid,
        "more than maxNodeCount (5)",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            let a = autoscaling(p);
            (a.min_node_count, a.max_node_count) = (None, None);
            (a.total_min_node_count, a.total_max_node_count) = (Some(9), Some(3));
        },
        "spec.autoscaling.totalMinNodeCount",
        ErrorKind::Invalid,
        "more than totalMaxNodeCount (3)",
    );
    // spec: C1 — per-zone and total limits are not mixed.
    breaks(
        FULL,
        |p: &mut NodePool| autoscaling(p).total_max_node_count = Some(10),
        "spec.autoscaling.totalMaxNodeCount",
        ErrorKind::Forbidden,
        "may not be mixed",
    );
    // spec: C1 — counts are not negative.
    breaks(
        FULL,
        |p: &mut NodePool| autoscaling(p).min_node_count = Some(-1),
        "spec.autoscaling.minNodeCount",
        ErrorKind::Invalid,
        "0 or more",
    );
    // spec: C1 — an enabled autoscaler has an upper limit of at least 1
    // (C6: it never scales above max).
    breaks(
        FULL,
        |p: &mut NodePool| autoscaling(p).max_node_count = None,
        "spec.autoscaling.maxNodeCount",
        ErrorKind::Required,
        "needs maxNodeCount",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            let a = autoscaling(p);
            (a.min_node_count, a.max_node_count) = (Some(0), Some(0));
        },
        "spec.autoscaling.maxNodeCount",
        ErrorKind::Invalid,
        "at least 1",
    );
    // spec: C7 — a pool may scale from and to 0 (min 0) as long as max ≥ 1.
    let p = edited(FULL, |p: &mut NodePool| {
        autoscaling(p).min_node_count = Some(0)
    });
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn pool_shape() {
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.initial_node_count = Some(-3),
        "spec.initialNodeCount",
        ErrorKind::Invalid,
        "0 or more",
    );
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.locations.push("zone-a".into()),
        "spec.locations[2]",
        ErrorKind::Duplicate,
        "twice",
    );
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.config.capacity.memory = Quantity("0".into()),
        "spec.config.capacity.memory",
        ErrorKind::Invalid,
        "more than 0",
    );
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.config.capacity.cpu = Quantity("four".into()),
        "spec.config.capacity.cpu",
        ErrorKind::Invalid,
        "not a quantity",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            p.spec.config.labels.insert("bad key!".into(), "x".into());
        },
        "spec.config.labels[bad key!]",
        ErrorKind::Invalid,
        "not a valid label key",
    );
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.config.taints[0].value = "no spaces".into(),
        "spec.config.taints[0].value",
        ErrorKind::Invalid,
        "label value",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            let again = p.spec.config.taints[0].clone();
            p.spec.config.taints.push(again);
        },
        "spec.config.taints[1]",
        ErrorKind::Duplicate,
        "twice",
    );
}

#[test]
fn blue_green_settings_need_the_blue_green_strategy() {
    // spec: B3 — a rollout policy on a SURGE pool would be ignored: refused.
    let pool = |strategy: &str| -> crate::node_pool::NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "sluice.dev/v1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"locations": ["a"], "initialNodeCount": 1,
                     "config": {"capacity": {"cpu": "2", "memory": "4Gi"}},
                     "upgradeSettings": {"strategy": strategy, "blueGreenSettings": {
                         "standardRolloutPolicy": {"batchNodeCount": 1}}}}
        }))
        .unwrap()
    };
    let e = crate::validation::validate_node_pool(&pool("SURGE"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("spec.upgradeSettings.blueGreenSettings")
            && e.contains("only with strategy BLUE_GREEN"),
        "{e}"
    );
    assert!(crate::validation::validate_node_pool(&pool("BLUE_GREEN")).is_ok());
}

#[test]
fn price_and_reservation_affinity() {
    // spec: C8 — a price is a non-negative number of dollars.
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.config.price_per_hour = Some(-0.5),
        "spec.config.pricePerHour",
        ErrorKind::Invalid,
        "non-negative",
    );
    breaks(
        FULL,
        |p: &mut NodePool| p.spec.config.price_per_hour = Some(f64::NAN),
        "spec.config.pricePerHour",
        ErrorKind::Invalid,
        "non-negative",
    );
    // spec: C8 — GKE's reservation affinity: a specific reservation is
    // named by GKE's key, the others name none.
    fn affinity(p: &mut NodePool) -> &mut ReservationAffinity {
        p.spec
            .config
            .reservation_affinity
            .get_or_insert_with(Default::default)
    }
    breaks(
        FULL,
        |p: &mut NodePool| affinity(p).values.clear(),
        "spec.config.reservationAffinity.values",
        ErrorKind::Required,
        "at least one reservation",
    );
    breaks(
        FULL,
        |p: &mut NodePool| affinity(p).key = Some("name".into()),
        "spec.config.reservationAffinity.key",
        ErrorKind::Invalid,
        "compute.googleapis.com/reservation-name",
    );
    breaks(
        FULL,
        |p: &mut NodePool| {
            let a = affinity(p);
            a.consume_reservation_type = ReservationType::AnyReservation;
            a.values.clear();
        },
        "spec.config.reservationAffinity.key",
        ErrorKind::Forbidden,
        "SPECIFIC_RESERVATION",
    );
    let none = edited(FULL, |p: &mut NodePool| {
        p.spec.config.reservation_affinity = Some(ReservationAffinity {
            consume_reservation_type: ReservationType::NoReservation,
            ..Default::default()
        })
    });
    assert_eq!(none.validate(), Ok(()));
}

fn tpu_pool(p: &mut NodePool, topology: &str, chips: Option<i32>) {
    p.spec.placement_policy = Some(PlacementPolicy {
        type_: None,
        tpu_topology: Some(topology.into()),
    });
    p.spec.config.capacity.tpu = chips;
}

#[test]
fn tpu_topology_divides_into_nodes() {
    // spec: C10 — 16x16 of 4-chip hosts is 64 nodes.
    let ok = edited(FULL, |p: &mut NodePool| tpu_pool(p, "16x16", Some(4)));
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(
        ok.spec.placement_policy.and_then(|p| p.tpu_chips()),
        Some(Ok(256))
    );
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "3x3", Some(4)),
        "spec.placementPolicy.tpuTopology",
        ErrorKind::Invalid,
        "do not divide into nodes of 4",
    );
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "2x2x2x2", Some(4)),
        "spec.placementPolicy.tpuTopology",
        ErrorKind::Invalid,
        "AxB or AxBxC",
    );
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "2x0", Some(4)),
        "spec.placementPolicy.tpuTopology",
        ErrorKind::Invalid,
        "AxB or AxBxC",
    );
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "2x2", None),
        "spec.config.capacity.tpu",
        ErrorKind::Required,
        "chips per node",
    );
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "2x2", Some(0)),
        "spec.config.capacity.tpu",
        ErrorKind::Invalid,
        "must be positive",
    );
    // spec: C11 — a slice never needs more nodes than a cluster holds.
    breaks(
        FULL,
        |p: &mut NodePool| tpu_pool(p, "1000x1000", Some(4)),
        "spec.placementPolicy.tpuTopology",
        ErrorKind::Invalid,
        "more than a cluster holds",
    );
}

#[test]
fn autoscaler_sizes_are_counts_a_cluster_holds() {
    fn status(p: &mut NodePool) -> &mut AutoscalerStatus {
        p.status
            .get_or_insert_with(Default::default)
            .autoscaler
            .get_or_insert_with(Default::default)
    }
    // spec: C1 — a target size is not negative.
    breaks(
        FULL,
        |p: &mut NodePool| {
            status(p).target_sizes.insert("zone-a".into(), -1);
        },
        "status.autoscaler.targetSizes[zone-a]",
        ErrorKind::Invalid,
        "0 or more",
    );
    // spec: C11 — nor past 15 000 nodes.
    breaks(
        FULL,
        |p: &mut NodePool| {
            status(p).target_sizes.insert("zone-a".into(), 15_001);
        },
        "status.autoscaler.targetSizes[zone-a]",
        ErrorKind::Invalid,
        "more than a cluster holds",
    );
    breaks(
        FULL,
        |p: &mut NodePool| status(p).nodes_to_remove[0].name.clear(),
        "status.autoscaler.nodesToRemove[0].name",
        ErrorKind::Required,
        "named",
    );
}
