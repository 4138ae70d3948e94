//! The rules a `NodePool` satisfies on its own.

use std::collections::BTreeSet;

use super::{ErrorKind, Errors, FieldErrors, Path, SEVEN_DAYS};
use crate::duration::Duration;
use crate::node_pool::{
    AutoscalerStatus, BlueGreenSettings, NodeConfig, NodePool, NodePoolAutoscaling, NodePoolSpec,
    ReservationAffinity, ReservationType, UpgradeSettings, UpgradeStrategy, DWS_MAX_RUN_DURATION,
    RESERVATION_NAME_KEY,
};

/// The most nodes a cluster holds (spec C11, GKE's limit).
pub const MAX_CLUSTER_NODES: i64 = 15_000;

pub fn validate_node_pool(pool: &NodePool) -> Result<(), FieldErrors> {
    let mut errors = Errors::default();
    let spec = &pool.spec;
    let path = Path::root("spec");

    let mut zones = BTreeSet::new();
    for (i, zone) in spec.locations.iter().enumerate() {
        let at = path.field("locations").index(i);
        if zone.is_empty() {
            errors.push(&at, ErrorKind::Required, "a zone name may not be empty");
        } else if !zones.insert(zone) {
            errors.push(
                &at,
                ErrorKind::Duplicate,
                format!("zone {zone:?} is listed twice"),
            );
        }
    }
    if let Some(e) = spec.version.as_deref().and_then(super::version_error) {
        errors.invalid(&path.field("version"), e);
    }
    errors.non_negative(&path.field("initialNodeCount"), spec.initial_node_count);
    // spec: C11 — a cluster holds at most 15 000 nodes: a count past it is
    // a mistake, and one near i32::MAX would overflow every sum of counts.
    let zone_count = spec.locations.len().max(1) as i64;
    if let Some(n) = spec.initial_node_count.filter(|n| *n >= 0) {
        let total = i64::from(n) * zone_count;
        if total > MAX_CLUSTER_NODES {
            errors.invalid(
                &path.field("initialNodeCount"),
                format!(
                    "{n} nodes in each of {zone_count} zone(s) is {total}; a cluster holds at most {MAX_CLUSTER_NODES}"
                ),
            );
        }
    }
    config(&mut errors, &path.field("config"), &spec.config);
    let autoscaling_on = spec.autoscaling.as_ref().is_some_and(|a| a.enabled);
    if let Some(a) = &spec.autoscaling {
        autoscaling(&mut errors, &path.field("autoscaling"), a);
    }
    if let Some(u) = &spec.upgrade_settings {
        let at = path.field("upgradeSettings");
        if spec.short_lived() {
            short_lived_settings(&mut errors, &at, u);
        } else {
            upgrade_settings(&mut errors, &at, u, autoscaling_on);
        }
    }
    // A5: a queued-provisioning node is a Dynamic Workload Scheduler node
    // as a flex-start one is (`config` checks the flex-start case).
    if spec.short_lived() && !spec.config.flex_start {
        max_run_within_dws(
            &mut errors,
            &path.field("config").field("maxRunDuration"),
            spec.config.max_run_duration,
        );
    }
    tpu(&mut errors, &path, spec);
    if let Some(a) = pool.status.as_ref().and_then(|s| s.autoscaler.as_ref()) {
        autoscaler_status(&mut errors, &Path::root("status").field("autoscaler"), a);
    }
    errors.into_result()
}

/// C10: a TPU topology names a whole number of nodes.
fn tpu(errors: &mut Errors, path: &Path, spec: &NodePoolSpec) {
    let chips_per_node = spec.config.capacity.tpu;
    let at_chips = path.field("config").field("capacity").field("tpu");
    if let Some(c) = chips_per_node.filter(|c| *c <= 0) {
        errors.invalid(&at_chips, format!("must be positive, got {c}"));
    }
    let Some(policy) = &spec.placement_policy else {
        return;
    };
    let at = path.field("placementPolicy").field("tpuTopology");
    match policy.tpu_chips() {
        None => {}
        Some(Err(why)) => errors.invalid(&at, why),
        Some(Ok(chips)) => match chips_per_node {
            None => errors.push(
                &at_chips,
                ErrorKind::Required,
                "a TPU slice pool (placementPolicy.tpuTopology) names its chips per node",
            ),
            Some(per) if per > 0 => {
                let per = per as u64;
                if !chips.is_multiple_of(per) {
                    errors.invalid(
                        &at,
                        format!(
                            "{chips} chips do not divide into nodes of {per} (config.capacity.tpu)"
                        ),
                    );
                } else if chips / per > MAX_CLUSTER_NODES as u64 {
                    errors.invalid(
                        &at,
                        format!(
                            "{} nodes is more than a cluster holds ({MAX_CLUSTER_NODES})",
                            chips / per
                        ),
                    );
                }
            }
            Some(_) => {}
        },
    }
}

/// What the autoscaler writes is checked as a user's spec would be: a
/// size the pool reconciler would act on must be a count a cluster holds.
fn autoscaler_status(errors: &mut Errors, path: &Path, a: &AutoscalerStatus) {
    for (zone, size) in &a.target_sizes {
        let at = path.field("targetSizes").key(zone);
        errors.non_negative(&at, Some(*size));
        if i64::from(*size) > MAX_CLUSTER_NODES {
            errors.invalid(
                &at,
                format!("{size} is more than a cluster holds ({MAX_CLUSTER_NODES} nodes)"),
            );
        }
    }
    for (i, n) in a.nodes_to_remove.iter().enumerate() {
        if n.name.is_empty() {
            errors.push(
                &path.field("nodesToRemove").index(i).field("name"),
                ErrorKind::Required,
                "a node to remove is named",
            );
        }
    }
}

/// GKE's rules for `reservationAffinity`: only a specific reservation
/// names reservations, by the one key GKE accepts.
fn reservation_affinity(errors: &mut Errors, path: &Path, r: &ReservationAffinity) {
    match r.consume_reservation_type {
        ReservationType::SpecificReservation => {
            if r.key.as_deref() != Some(RESERVATION_NAME_KEY) {
                errors.invalid(
                    &path.field("key"),
                    format!("SPECIFIC_RESERVATION needs key {RESERVATION_NAME_KEY:?}"),
                );
            }
            if r.values.is_empty() {
                errors.push(
                    &path.field("values"),
                    ErrorKind::Required,
                    "SPECIFIC_RESERVATION names at least one reservation",
                );
            }
            for (i, v) in r.values.iter().enumerate() {
                if v.is_empty() {
                    errors.push(
                        &path.field("values").index(i),
                        ErrorKind::Required,
                        "a reservation name may not be empty",
                    );
                }
            }
        }
        ReservationType::AnyReservation | ReservationType::NoReservation => {
            for (name, set) in [("key", r.key.is_some()), ("values", !r.values.is_empty())] {
                if set {
                    errors.push(
                        &path.field(name),
                        ErrorKind::Forbidden,
                        "only with consumeReservationType SPECIFIC_RESERVATION",
                    );
                }
            }
        }
    }
}

pub(super) fn config(errors: &mut Errors, path: &Path, config: &NodeConfig) {
    let capacity = path.field("capacity");
    errors.positive_quantity(&capacity.field("cpu"), &config.capacity.cpu);
    errors.positive_quantity(&capacity.field("memory"), &config.capacity.memory);
    for (key, value) in &config.labels {
        let at = path.field("labels").key(key);
        errors.label_key(&at, key);
        errors.label_value(&at, value);
    }
    if let Some(p) = config.price_per_hour {
        if !p.is_finite() || p < 0.0 {
            errors.invalid(
                &path.field("pricePerHour"),
                format!("must be a non-negative number of dollars, got {p}"),
            );
        }
    }
    if let Some(r) = &config.reservation_affinity {
        reservation_affinity(errors, &path.field("reservationAffinity"), r);
    }
    // GKE's maxRunDuration ("the maximum duration for the nodes to exist")
    // is not limited to flex-start pools; only there is it capped.
    let at = path.field("maxRunDuration");
    match config.max_run_duration {
        Some(d) if d <= Duration::ZERO => {
            errors.invalid(&at, format!("must be more than 0s, got {d}"))
        }
        d if config.flex_start => max_run_within_dws(errors, &at, d),
        _ => {}
    }
    let mut seen = BTreeSet::new();
    for (i, taint) in config.taints.iter().enumerate() {
        let at = path.field("taints").index(i);
        errors.label_key(&at.field("key"), &taint.key);
        errors.label_value(&at.field("value"), &taint.value);
        // Kubernetes allows one taint per key and effect.
        if !seen.insert((&taint.key, taint.effect)) {
            errors.push(
                &at,
                ErrorKind::Duplicate,
                format!(
                    "taint {:?} with effect {:?} is listed twice",
                    taint.key, taint.effect
                ),
            );
        }
    }
}

/// C1: per-zone limits or total limits, each pair ordered.
fn autoscaling(errors: &mut Errors, path: &Path, a: &NodePoolAutoscaling) {
    let fields = [
        ("minNodeCount", a.min_node_count),
        ("maxNodeCount", a.max_node_count),
        ("totalMinNodeCount", a.total_min_node_count),
        ("totalMaxNodeCount", a.total_max_node_count),
    ];
    for (name, value) in fields {
        errors.non_negative(&path.field(name), value);
        if let Some(v) = value.filter(|v| i64::from(*v) > MAX_CLUSTER_NODES) {
            errors.invalid(
                &path.field(name),
                format!("{v} is more than a cluster holds ({MAX_CLUSTER_NODES} nodes)"),
            );
        }
    }
    let per_zone = a.min_node_count.is_some() || a.max_node_count.is_some();
    let total = a.total_min_node_count.is_some() || a.total_max_node_count.is_some();
    if per_zone && total {
        for (name, value) in &fields[2..] {
            if value.is_some() {
                errors.push(
                    &path.field(name),
                    ErrorKind::Forbidden,
                    "per-zone limits (minNodeCount, maxNodeCount) and total limits \
                     (totalMinNodeCount, totalMaxNodeCount) may not be mixed",
                );
            }
        }
    }
    for (min_name, min, max_name, max) in [
        (
            "minNodeCount",
            a.min_node_count,
            "maxNodeCount",
            a.max_node_count,
        ),
        (
            "totalMinNodeCount",
            a.total_min_node_count,
            "totalMaxNodeCount",
            a.total_max_node_count,
        ),
    ] {
        if let (Some(min), Some(max)) = (min, max) {
            if min > max {
                errors.invalid(
                    &path.field(min_name),
                    format!("{min} is more than {max_name} ({max})"),
                );
            }
        }
    }
    if a.enabled {
        match a.max_node_count.or(a.total_max_node_count) {
            None => errors.push(
                &path.field("maxNodeCount"),
                ErrorKind::Required,
                "an enabled autoscaler needs maxNodeCount or totalMaxNodeCount",
            ),
            Some(0) => {
                let name = if a.max_node_count.is_some() {
                    "maxNodeCount"
                } else {
                    "totalMaxNodeCount"
                };
                errors.invalid(
                    &path.field(name),
                    "must be at least 1 when autoscaling is enabled",
                );
            }
            Some(_) => {}
        }
    }
}

/// A5: flex-start and queued-provisioning nodes run at most seven days.
fn max_run_within_dws(errors: &mut Errors, path: &Path, d: Option<Duration>) {
    if let Some(d) = d.filter(|d| *d > DWS_MAX_RUN_DURATION) {
        errors.invalid(
            path,
            format!(
                "flex-start and queued-provisioning nodes run at most {DWS_MAX_RUN_DURATION} \
                 (7 days), got {d}"
            ),
        );
    }
}

/// A5: a short-lived pool is upgraded `SHORT_LIVED` whatever is stored,
/// so any other strategy, and every setting, is refused.
fn short_lived_settings(errors: &mut Errors, path: &Path, u: &UpgradeSettings) {
    const WHY: &str = "flex-start and queued-provisioning node pools are upgraded with \
                       SHORT_LIVED, which takes no settings";
    if u.strategy.is_some_and(|s| s != UpgradeStrategy::ShortLived) {
        errors.push(&path.field("strategy"), ErrorKind::Forbidden, WHY);
    }
    forbid_settings(errors, path, u, WHY);
}

/// Every setting `u` holds, refused with `why`: the strategy in force
/// takes none.
fn forbid_settings(errors: &mut Errors, path: &Path, u: &UpgradeSettings, why: &str) {
    let set = [
        ("maxSurge", u.max_surge.is_some()),
        ("maxUnavailable", u.max_unavailable.is_some()),
        ("blueGreenSettings", u.blue_green_settings.is_some()),
    ];
    for (name, _) in set.iter().filter(|(_, is_set)| *is_set) {
        errors.push(&path.field(name), ErrorKind::Forbidden, why);
    }
}

pub(super) fn upgrade_settings(
    errors: &mut Errors,
    path: &Path,
    u: &UpgradeSettings,
    autoscaling_on: bool,
) {
    errors.non_negative(&path.field("maxSurge"), u.max_surge);
    errors.non_negative(&path.field("maxUnavailable"), u.max_unavailable);
    match u.strategy() {
        UpgradeStrategy::Surge => {
            // Nothing would ever be upgraded (U1, U2; Cluster API refuses it too).
            if u.max_surge() == 0 && u.max_unavailable() == 0 {
                errors.invalid(
                    &path.field("maxSurge"),
                    "maxSurge and maxUnavailable may not both be 0 (maxSurge defaults to 1, \
                     maxUnavailable to 0)",
                );
            }
            // A rollout policy a surge upgrade would silently ignore.
            if u.blue_green_settings.is_some() {
                errors.push(
                    &path.field("blueGreenSettings"),
                    ErrorKind::Forbidden,
                    "only with strategy BLUE_GREEN; the strategy is SURGE (the default): set \
                     strategy: BLUE_GREEN, or leave blueGreenSettings out",
                );
            }
        }
        UpgradeStrategy::BlueGreen => {}
        UpgradeStrategy::ShortLived => {
            // A5: short-lived upgrades take no settings.
            forbid_settings(errors, path, u, "SHORT_LIVED upgrades take no settings");
        }
    }
    if let Some(bg) = &u.blue_green_settings {
        blue_green(errors, &path.field("blueGreenSettings"), bg, autoscaling_on);
    }
}

fn blue_green(errors: &mut Errors, path: &Path, bg: &BlueGreenSettings, autoscaling_on: bool) {
    errors.duration_within(
        &path.field("nodePoolSoakDuration"),
        bg.node_pool_soak_duration,
        SEVEN_DAYS,
    );
    if let Some(standard) = &bg.standard_rollout_policy {
        let at = path.field("standardRolloutPolicy");
        if let Some(p) = standard.batch_percentage {
            if !(0.0..=1.0).contains(&p) {
                errors.invalid(
                    &at.field("batchPercentage"),
                    format!("must be a fraction from 0 to 1 (0.25 is 25 %), got {p}"),
                );
            }
        }
        errors.non_negative(&at.field("batchNodeCount"), standard.batch_node_count);
        if standard.batch_percentage.is_some() && standard.batch_node_count.is_some() {
            errors.push(
                &at.field("batchNodeCount"),
                ErrorKind::Forbidden,
                "set either batchNodeCount or batchPercentage, not both",
            );
        }
        errors.duration_within(
            &at.field("batchSoakDuration"),
            standard.batch_soak_duration,
            SEVEN_DAYS,
        );
    }
    if let Some(autoscaled) = &bg.autoscaled_rollout_policy {
        let at = path.field("autoscaledRolloutPolicy");
        if bg.standard_rollout_policy.is_some() {
            errors.push(
                &at,
                ErrorKind::Forbidden,
                "set either standardRolloutPolicy or autoscaledRolloutPolicy, not both",
            );
        }
        if !autoscaling_on {
            errors.push(
                &at,
                ErrorKind::Forbidden,
                "an autoscaled blue-green upgrade needs spec.autoscaling.enabled",
            );
        }
        errors.duration_within(
            &at.field("waitForDrainDuration"),
            autoscaled.wait_for_drain_duration,
            SEVEN_DAYS,
        );
    }
}
