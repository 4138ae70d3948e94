//! One pass over a node upgrade operation: its state from the spec (the
//! user's action) and the status (where it got to), the nodes from what
//! the provider and the API hold, and the steps that follow.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::UpgradeStrategy;
use sluice_model::operation::{OperationAction, OperationState, OperationStatus, OperationType};
use sluice_nodepools::reconcile::{zone_targets, ZoneHold};

use crate::in_place;
use crate::inputs::{Inputs, Quota};
use crate::observe::{observe, Direction, Mark, Member};
use crate::status::{self, Summary, ZoneLine};
use crate::target::Sides;
use crate::zone::{self, Window};
use crate::{Action, UpgradeError};

/// What one pass decides.
#[derive(Debug, Clone, PartialEq)]
pub struct UpgradePlan {
    /// Node patches, provider calls and the pool write, in order: run the
    /// deletions before the creations.
    pub actions: Vec<Action>,
    /// The operation's status to write after the actions.
    pub status: OperationStatus,
    /// Look again after this long; `None`: only when something is written
    /// (the operation is final, or cancelled with nothing in flight).
    pub requeue_after: Option<SignedDuration>,
    /// Zones whose size the upgrade holds now: give them to the pool
    /// reconciler (`reconcile::Config::held_zones`), so that it neither
    /// cuts the surge nodes as surplus nor refills with the old version.
    pub held_zones: BTreeMap<String, ZoneHold>,
    /// Nodes the autoscaler must leave alone (U7): those marked as being
    /// upgraded and the new nodes of the zone being upgraded.
    pub busy_nodes: BTreeSet<String>,
}

/// The surge settings the operation runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub max_surge: usize,
    pub max_unavailable: usize,
}

/// The operation's `upgradeSettings`, defaults filled (U1, U2), checked.
pub fn settings(inputs: &Inputs<'_>) -> Result<Settings, UpgradeError> {
    let op = op_name(inputs)?;
    let u = inputs
        .operation
        .spec
        .upgrade_settings
        .clone()
        .unwrap_or_default();
    if u.strategy() != UpgradeStrategy::Surge {
        return Err(UpgradeError::NotSurge {
            op,
            found: format!("{:?}", u.strategy()),
        });
    }
    let count = |field: &'static str, value: i32| {
        usize::try_from(value).map_err(|_| UpgradeError::Negative {
            op: op.clone(),
            field,
            value,
        })
    };
    let max_surge = count("maxSurge", u.max_surge())?;
    let max_unavailable = count("maxUnavailable", u.max_unavailable())?;
    if max_surge == 0 && max_unavailable == 0 {
        return Err(UpgradeError::NothingAtOnce { op });
    }
    Ok(Settings {
        max_surge,
        max_unavailable,
    })
}

fn op_name(inputs: &Inputs<'_>) -> Result<String, UpgradeError> {
    inputs
        .operation
        .metadata
        .name
        .clone()
        .ok_or(UpgradeError::MissingName)
}

/// Decide one pass of the upgrade `inputs.operation` describes.
pub fn plan(inputs: &Inputs<'_>, now: Timestamp) -> Result<UpgradePlan, UpgradeError> {
    let op = inputs.operation;
    let op_name = op_name(inputs)?;
    let pool_name = inputs
        .pool
        .metadata
        .name
        .clone()
        .ok_or(UpgradeError::MissingPoolName)?;
    if !matches!(
        op.spec.operation_type,
        OperationType::UpgradeNodes | OperationType::AutoUpgradeNodes
    ) {
        return Err(UpgradeError::NotAnUpgrade {
            op: op_name,
            found: op.spec.operation_type,
        });
    }
    match op.spec.node_pool() {
        None => {
            return Err(UpgradeError::NoPool {
                op: op_name,
                link: op.spec.target_link.clone(),
            })
        }
        Some(linked) if linked != pool_name => {
            return Err(UpgradeError::WrongPool {
                op: op_name,
                linked: linked.to_owned(),
                given: pool_name,
            })
        }
        Some(_) => {}
    }
    let settings = settings(inputs)?;
    let previous = op.status.clone().unwrap_or_default();
    let prev_state = previous.status;
    let action = op.spec.action;
    let rollback_asked = action == Some(OperationAction::Rollback);
    if let Some(s) = prev_state.filter(|s| s.is_final()) {
        if rollback_asked && s == OperationState::Done {
            return Err(UpgradeError::RollbackAfterCompletion {
                op: op_name,
                pool: pool_name,
            });
        }
        return Ok(settled(previous));
    }
    let sides = Sides::resolve(&op_name, op, inputs.pool, inputs.config)?;
    // The pool is written only once every node is upgraded: a pool already
    // at the target means the upgrade completed (its status may not have
    // been written before a restart).
    if sides.from == sides.to && rollback_asked && prev_state != Some(OperationState::RollingBack) {
        return Err(UpgradeError::RollbackAfterCompletion {
            op: op_name,
            pool: pool_name,
        });
    }
    let direction = if rollback_asked || prev_state == Some(OperationState::RollingBack) {
        Direction::Rollback
    } else {
        Direction::Forward
    };
    let cancelled = action == Some(OperationAction::Cancel);
    let recreates = sides.recreates();
    let automatic = op.spec.operation_type == OperationType::AutoUpgradeNodes;
    // M1, M8: automatic upgrades and manual changes that recreate nodes
    // wait for the maintenance gate; label/taint changes do not.
    let gated = automatic || recreates;
    let gate_open = !gated || inputs.gate.is_open();
    let gate_note = if gated {
        inputs.gate.why_closed()
    } else {
        None
    };
    // A status lost to a restart does not hide a start: a node carrying
    // our mark says the upgrade is under way.
    let any_marked = inputs.nodes.iter().any(|n| {
        n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::UPGRADING_ANNOTATION))
            == Some(&op_name)
    });
    let not_started = matches!(prev_state, None | Some(OperationState::Pending)) && !any_marked;

    if not_started && (cancelled || !gate_open) {
        let (state, message) = if cancelled {
            (
                OperationState::Cancelled,
                "cancelled before it started; resume to start it".to_owned(),
            )
        } else {
            (
                OperationState::Pending,
                format!(
                    "waiting to start: {}",
                    gate_note.clone().unwrap_or_default()
                ),
            )
        };
        let status = status::build(
            &previous,
            Summary {
                state,
                message,
                stage_name: stage_name(recreates, direction),
                zones: Vec::new(),
                current: None,
                warnings: Vec::new(),
            },
            now,
        );
        let wake = if cancelled {
            None
        } else {
            earliest([inputs.gate.changes_at(), poll(inputs, now)])
        };
        return Ok(UpgradePlan {
            actions: Vec::new(),
            status,
            requeue_after: wake.map(|t| t.duration_since(now)),
            held_zones: BTreeMap::new(),
            busy_nodes: BTreeSet::new(),
        });
    }

    let pass = Pass {
        inputs,
        op_name: &op_name,
        pool_name: &pool_name,
        sides: &sides,
        direction,
        settings,
        may_start: gate_open && !cancelled,
        now,
    };
    let mut out = if recreates {
        pass.surge(previous.start_time.as_ref().map(|t| t.0))
    } else {
        pass.in_place()
    };
    let done = out.done;
    let in_flight = out.in_flight;
    let state = match (done, direction, cancelled) {
        (true, Direction::Forward, _) => OperationState::Done,
        (true, Direction::Rollback, _) => OperationState::RolledBack,
        (false, _, true) if in_flight => OperationState::Cancelling,
        (false, _, true) => OperationState::Cancelled,
        (false, Direction::Forward, false) => OperationState::Running,
        (false, Direction::Rollback, false) => OperationState::RollingBack,
    };
    if state == OperationState::Done {
        out.actions.push(Action::SetPoolTarget {
            version: op.spec.node_version.clone(),
            config: op.spec.config.clone(),
        });
    }
    let mut message = match state {
        OperationState::Done => format!("all {} node(s) upgraded", out.upgraded),
        OperationState::RolledBack => {
            "rolled back: the upgraded nodes are back on the pool's version and config".to_owned()
        }
        OperationState::Cancelling => {
            "cancel asked: the nodes whose upgrade started are finishing".to_owned()
        }
        OperationState::Cancelled => format!(
            "cancelled: {} of {} node(s) upgraded; resume or roll back",
            out.upgraded, out.total
        ),
        _ => out.headline.clone(),
    };
    if !done && !cancelled {
        if let Some(why) = gate_note.as_ref() {
            message.push_str(&format!("; paused: {why}"));
        }
        if direction == Direction::Rollback && action != Some(OperationAction::Rollback) {
            message.push_str(
                "; a rollback runs to its end (spec.action other than ROLLBACK is ignored)",
            );
        }
    }
    let live = matches!(
        state,
        OperationState::Running | OperationState::RollingBack | OperationState::Cancelling
    );
    let held_zones = match (&out.current, live && recreates) {
        (Some(zone), true) => BTreeMap::from([(
            zone.clone(),
            ZoneHold {
                extra: settings.max_surge,
            },
        )]),
        _ => BTreeMap::new(),
    };
    let wake = if live {
        earliest([
            out.wake_at,
            inputs.gate.changes_at().filter(|_| gated),
            quota_retry(inputs.quota),
            poll(inputs, now),
        ])
    } else {
        None
    };
    let status = status::build(
        &previous,
        Summary {
            state,
            message,
            stage_name: stage_name(recreates, direction),
            zones: out.zones,
            current: out.current.filter(|_| live),
            warnings: out.warnings,
        },
        now,
    );
    Ok(UpgradePlan {
        actions: out.actions,
        status,
        requeue_after: wake.map(|t| t.duration_since(now).max(SignedDuration::ZERO)),
        held_zones,
        busy_nodes: if live { out.busy } else { BTreeSet::new() },
    })
}

fn settled(status: OperationStatus) -> UpgradePlan {
    UpgradePlan {
        actions: Vec::new(),
        status,
        requeue_after: None,
        held_zones: BTreeMap::new(),
        busy_nodes: BTreeSet::new(),
    }
}

fn stage_name(recreates: bool, direction: Direction) -> &'static str {
    match (recreates, direction) {
        (false, _) => "in-place",
        (true, Direction::Forward) => "surge-upgrade",
        (true, Direction::Rollback) => "surge-rollback",
    }
}

fn poll(inputs: &Inputs<'_>, now: Timestamp) -> Option<Timestamp> {
    now.checked_add(inputs.config.poll_interval).ok()
}

fn quota_retry(q: &Quota) -> Option<Timestamp> {
    match q {
        Quota::Available => None,
        Quota::Exhausted { retry_at, .. } => *retry_at,
    }
}

fn earliest<const N: usize>(times: [Option<Timestamp>; N]) -> Option<Timestamp> {
    times.into_iter().flatten().min()
}

/// One pass's fixed facts.
struct Pass<'a> {
    inputs: &'a Inputs<'a>,
    op_name: &'a str,
    pool_name: &'a str,
    sides: &'a Sides,
    direction: Direction,
    settings: Settings,
    may_start: bool,
    now: Timestamp,
}

/// What the recreate or in-place pass found.
#[derive(Debug, Default)]
struct Outcome {
    actions: Vec<Action>,
    zones: Vec<ZoneLine>,
    current: Option<String>,
    done: bool,
    /// Nodes mid-upgrade (marked by us).
    in_flight: bool,
    total: usize,
    upgraded: usize,
    headline: String,
    warnings: Vec<String>,
    wake_at: Option<Timestamp>,
    busy: BTreeSet<String>,
}

impl Pass<'_> {
    fn surge(&self, started: Option<Timestamp>) -> Outcome {
        let inputs = self.inputs;
        let members = observe(
            self.pool_name,
            self.op_name,
            inputs.instances,
            inputs.nodes,
            self.sides,
            self.direction,
            started,
        );
        let mut out = Outcome::default();
        // Marks this direction does not carry on (a rollback's on nodes
        // the forward upgrade had started): released, drain lifted.
        for m in members
            .iter()
            .filter(|m| m.mark == Mark::Ours && !m.candidate)
        {
            if m.upgrade_drain().is_some() {
                out.actions.push(Action::Uncordon {
                    node: m.name().to_owned(),
                });
            }
            out.actions.push(Action::Unmark {
                node: m.name().to_owned(),
            });
        }
        let targets = zone_targets(&inputs.pool.spec, &inputs.config.cluster_locations);
        let in_zone = |zone: &str| -> Vec<Member<'_>> {
            members
                .iter()
                .filter(|m| m.instance.zone == zone)
                .cloned()
                .collect()
        };
        let busy_zone = targets.iter().find(|(z, _)| {
            in_zone(z)
                .iter()
                .any(|m| m.counted && m.candidate && m.mark == Mark::Ours)
        });
        let current = busy_zone
            .or_else(|| {
                targets
                    .iter()
                    .find(|(z, t)| !zone::is_done(&in_zone(z), *t))
            })
            .map(|(z, _)| z.clone());
        let mut taken: HashSet<String> = inputs.instances.iter().map(|i| i.name.clone()).collect();
        taken.extend(inputs.nodes.iter().filter_map(|n| n.metadata.name.clone()));
        // Names the pool's last status lists as Nodes stay taken: the pool
        // loop would read a new instance's missing Node under such a name
        // as that Node deleted, and replace the instance.
        if let Some(status) = &inputs.pool.status {
            taken.extend(status.nodes.iter().cloned());
        }
        let quota_blocked = match inputs.quota {
            q if q.allows(self.now) => None,
            Quota::Exhausted { message, retry_at } => Some(match retry_at {
                Some(t) => format!("{message}; next attempt at {t}"),
                None => message.clone(),
            }),
            Quota::Available => None,
        };
        let mut all_done = true;
        for (zone, target) in &targets {
            let zone_members = in_zone(zone);
            let done = zone::is_done(&zone_members, *target);
            all_done &= done;
            // Upgraded: on the new side and joined (its Node registered);
            // an instance still booting is not an upgraded node yet.
            let fresh = zone_members
                .iter()
                .filter(|m| m.counted && m.fresh && m.registered)
                .count();
            let mut line = ZoneLine {
                zone: zone.clone(),
                state: if done {
                    OperationState::Done
                } else {
                    OperationState::Pending
                },
                total: *target,
                upgraded: fresh.min(*target),
                blocking: Vec::new(),
            };
            out.total += line.total;
            out.upgraded += line.upgraded;
            if current.as_deref() != Some(zone.as_str()) {
                out.zones.push(line);
                continue;
            }
            let window = Window {
                pool: self.pool_name,
                zone,
                target: *target,
                max_surge: self.settings.max_surge,
                max_unavailable: self.settings.max_unavailable,
                may_start: self.may_start,
                quota_blocked: quota_blocked.clone(),
                fresh: self.direction.sides(self.sides).0,
                pods: inputs.pods,
                now: self.now,
            };
            let step = window.step(&zone_members, &mut taken);
            out.warnings.extend(local_warnings(inputs, &step.draining));
            out.wake_at = step.wake_at;
            out.busy.extend(
                zone_members
                    .iter()
                    .filter(|m| m.fresh || m.mark == Mark::Ours)
                    .map(|m| m.name().to_owned()),
            );
            out.busy.extend(step.actions.iter().filter_map(|a| match a {
                Action::MarkUpgrading { node } => Some(node.clone()),
                Action::CreateSurge(c) | Action::Recreate { new: c, .. } => Some(c.name.clone()),
                _ => None,
            }));
            line.state = OperationState::Running;
            line.blocking = step.blocking;
            if !self.may_start {
                if let Some(why) = inputs.gate.why_closed() {
                    line.blocking.push(format!("paused: {why}"));
                }
            }
            out.headline = format!(
                "zone {zone}: {} of {} node(s) on the new version and config",
                line.upgraded, line.total
            );
            out.actions.extend(step.actions);
            out.zones.push(line);
        }
        out.current = current;
        out.done = all_done && out.actions.is_empty();
        // Mid-upgrade: a node marked by us still there (being deleted
        // included), or marks being set or lifted now.
        out.in_flight = members.iter().any(|m| m.mark == Mark::Ours)
            || out.actions.iter().any(|a| {
                matches!(
                    a,
                    Action::MarkUpgrading { .. } | Action::Unmark { .. } | Action::Uncordon { .. }
                )
            });
        out
    }

    fn in_place(&self) -> Outcome {
        let (fresh, old) = self.direction.sides(self.sides);
        let mut out = Outcome::default();
        let names: HashSet<&str> = self
            .inputs
            .instances
            .iter()
            .filter(|i| i.pool == self.pool_name)
            .map(|i| i.name.as_str())
            .collect();
        let nodes: Vec<_> = self
            .inputs
            .nodes
            .iter()
            .filter(|n| {
                n.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| names.contains(n))
            })
            .collect();
        out.total = nodes.len();
        for node in nodes {
            match in_place::rewrite(node, &old.config, &fresh.config) {
                Some(r) if self.may_start => out.actions.push(Action::ApplyInPlace(r)),
                Some(_) => {}
                None => out.upgraded += 1,
            }
        }
        out.done = out.upgraded == out.total;
        out.headline = format!(
            "{} of {} node(s) have the new labels and taints",
            out.upgraded, out.total
        );
        out
    }
}

/// U5: nodes behind an `externalTrafficPolicy: Local` Service drained in
/// parallel take its serving pods away together.
fn local_warnings(inputs: &Inputs<'_>, draining: &[String]) -> Vec<String> {
    if draining.len() < 2 {
        return Vec::new();
    }
    inputs
        .local_services
        .iter()
        .filter_map(|s| {
            let hit: Vec<&str> = draining
                .iter()
                .filter(|n| s.nodes.contains(*n))
                .map(String::as_str)
                .collect();
            (!hit.is_empty()).then(|| {
                format!(
                    "Service {} has externalTrafficPolicy: Local and nodes drained in parallel \
                     ({}; {} at once): parallel drains do not work with Local traffic — use \
                     maxSurge + maxUnavailable = 1 or externalTrafficPolicy: Cluster",
                    s.name,
                    hit.join(", "),
                    draining.len()
                )
            })
        })
        .collect()
}
