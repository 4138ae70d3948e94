//! The operation's life, whatever its strategy: one pass reads the user's
//! action (spec) and where the operation got to (status), decides the
//! direction, whether it may start (the maintenance gate), runs the
//! strategy's pass ([`crate::strategy`]) and turns what the pass found into
//! the operation's state, message, requeue and the zones it holds.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::BlueGreenInfo;
use sluice_model::operation::{OperationAction, OperationState, OperationStatus, OperationType};
use sluice_nodepools::reconcile::ZoneHold;

use crate::inputs::{Inputs, Quota};
use crate::observe::Direction;
use crate::status::{self, Summary};
use crate::strategy::{self, Pass};
use crate::target::Sides;
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
    /// cuts the surge or green nodes as surplus nor refills with the old
    /// version.
    pub held_zones: BTreeMap<String, ZoneHold>,
    /// Nodes the autoscaler must leave alone (U7): those marked as being
    /// upgraded and the new nodes of the zone being upgraded.
    pub busy_nodes: BTreeSet<String>,
    /// A blue-green upgrade's view for the pool's `status.updateInfo`
    /// (`None`: not a blue-green upgrade, or over).
    pub blue_green_info: Option<BlueGreenInfo>,
}

pub(crate) fn op_name(inputs: &Inputs<'_>) -> Result<String, UpgradeError> {
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
    let recreates = sides.recreates();
    let strategy = strategy::select(&op_name, op, inputs.pool, recreates)?;
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
    let pass = Pass {
        inputs,
        op_name: &op_name,
        pool_name: &pool_name,
        sides: &sides,
        direction,
        cancelled,
        gate_open,
        resumed: prev_state == Some(OperationState::Cancelled) && !cancelled,
        previous: &previous,
        now,
    };
    // A status lost to a restart does not hide a start: the strategy reads
    // the nodes for its marks.
    let not_started =
        matches!(prev_state, None | Some(OperationState::Pending)) && !strategy.started(&pass);

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
                stage_name: strategy.stage_name(direction),
                zones: Vec::new(),
                current: None,
                warnings: Vec::new(),
                metrics: Vec::new(),
                blue_green: None,
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
            blue_green_info: None,
        });
    }

    let mut out = strategy.run(&pass);
    let done = out.done;
    let paused = cancelled && out.cancel_honoured;
    let state = match (done, direction, paused) {
        (true, Direction::Forward, _) => OperationState::Done,
        (true, Direction::Rollback, _) => OperationState::RolledBack,
        (false, _, true) if out.in_flight => OperationState::Cancelling,
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
        OperationState::Cancelled => out.paused_message.clone().unwrap_or_else(|| {
            format!(
                "cancelled: {} of {} node(s) upgraded; resume or roll back",
                out.upgraded, out.total
            )
        }),
        _ => out.headline.clone(),
    };
    let gate_pauses = strategy.gated_after_start();
    if !done && !paused {
        if let Some(why) = gate_note.as_ref().filter(|_| gate_pauses) {
            message.push_str(&format!("; paused: {why}"));
        }
        if direction == Direction::Rollback && action != Some(OperationAction::Rollback) {
            message.push_str(
                "; a rollback runs to its end (spec.action other than ROLLBACK is ignored)",
            );
        }
        if let Some(note) = &out.note {
            message.push_str(&format!("; {note}"));
        }
    }
    let live = matches!(
        state,
        OperationState::Running | OperationState::RollingBack | OperationState::Cancelling
    );
    let holding = live || (state == OperationState::Cancelled && out.hold_while_paused);
    let held_zones = if holding && recreates {
        std::mem::take(&mut out.held_zones)
    } else {
        BTreeMap::new()
    };
    let wake = if live {
        earliest([
            out.wake_at,
            inputs.gate.changes_at().filter(|_| gated && gate_pauses),
            quota_retry(inputs.quota),
            poll(inputs, now),
        ])
    } else {
        None
    };
    let blue_green_info = out.blue_green_info.take().filter(|_| !state.is_final());
    let status = status::build(
        &previous,
        Summary {
            state,
            message,
            stage_name: strategy.stage_name(direction),
            zones: out.zones,
            current: out.current.filter(|_| live),
            warnings: out.warnings,
            metrics: out.metrics,
            blue_green: out.blue_green,
        },
        now,
    );
    Ok(UpgradePlan {
        actions: out.actions,
        status,
        requeue_after: wake.map(|t| t.duration_since(now).max(SignedDuration::ZERO)),
        held_zones,
        busy_nodes: if live { out.busy } else { BTreeSet::new() },
        blue_green_info,
    })
}

fn settled(status: OperationStatus) -> UpgradePlan {
    UpgradePlan {
        actions: Vec::new(),
        status,
        requeue_after: None,
        held_zones: BTreeMap::new(),
        busy_nodes: BTreeSet::new(),
        blue_green_info: None,
    }
}

pub(crate) fn poll(inputs: &Inputs<'_>, now: Timestamp) -> Option<Timestamp> {
    now.checked_add(inputs.config.poll_interval).ok()
}

fn quota_retry(q: &Quota) -> Option<Timestamp> {
    match q {
        Quota::Available => None,
        Quota::Exhausted { retry_at, .. } => *retry_at,
    }
}

pub(crate) fn earliest<const N: usize>(times: [Option<Timestamp>; N]) -> Option<Timestamp> {
    times.into_iter().flatten().min()
}
