//! The strategies the driver runs, and how one is chosen. A strategy is a
//! pass over the pool: from one [`Pass`]'s facts it gives the actions and
//! what it found ([`Outcome`]); the driver owns the operation's states,
//! cancel, resume and rollback, the maintenance gate before the start,
//! requeue and holds. A new strategy is a module with a [`Strategy`] and
//! an arm in [`select`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use sluice_model::node_pool::{BlueGreenInfo, NodePool, UpgradeStrategy};
use sluice_model::operation::{BlueGreenProgress, Metric, Operation, OperationStatus};
use sluice_nodepools::reconcile::ZoneHold;

use crate::blue_green::BlueGreen;
use crate::in_place::InPlacePass;
use crate::inputs::Inputs;
use crate::observe::Direction;
use crate::short_lived::ShortLived;
use crate::status::ZoneLine;
use crate::surge::{Settings, Surge};
use crate::target::Sides;
use crate::{Action, UpgradeError};

/// One pass's fixed facts, as the driver worked them out.
pub(crate) struct Pass<'a> {
    pub inputs: &'a Inputs<'a>,
    pub op_name: &'a str,
    pub pool_name: &'a str,
    pub sides: &'a Sides,
    pub direction: Direction,
    /// `spec.action` is `CANCEL`.
    pub cancelled: bool,
    /// The maintenance gate lets disruptions start now (always, for a
    /// change that is not gated).
    pub gate_open: bool,
    /// The last pass left the operation `CANCELLED` and it is asked on now.
    pub resumed: bool,
    /// The status the last pass wrote.
    pub previous: &'a OperationStatus,
    pub now: Timestamp,
}

/// What a strategy's pass found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub actions: Vec<Action>,
    pub zones: Vec<ZoneLine>,
    /// The zone being worked on, when the strategy goes zone by zone.
    pub current: Option<String>,
    pub done: bool,
    /// Nodes mid-upgrade that a cancel lets finish (`CANCELLING`).
    pub in_flight: bool,
    /// A cancel pauses the upgrade now (blue-green's phase 5 runs on).
    pub cancel_honoured: bool,
    /// The message while cancelled, instead of the driver's.
    pub paused_message: Option<String>,
    pub total: usize,
    pub upgraded: usize,
    pub headline: String,
    /// Appended to the message while running.
    pub note: Option<String>,
    pub warnings: Vec<String>,
    pub wake_at: Option<Timestamp>,
    pub busy: BTreeSet<String>,
    /// The zones whose size the strategy holds while it runs.
    pub held_zones: BTreeMap<String, ZoneHold>,
    /// Hold them while cancelled too (blue-green keeps both sides).
    pub hold_while_paused: bool,
    /// Extra metrics of the operation's progress.
    pub metrics: Vec<Metric>,
    pub blue_green: Option<BlueGreenProgress>,
    pub blue_green_info: Option<BlueGreenInfo>,
}

/// One way of moving a pool's nodes to a new version and config.
pub(crate) trait Strategy {
    /// The progress's name (`surge-upgrade`, `blue-green-rollback`, …).
    fn stage_name(&self, direction: Direction) -> &'static str;
    /// Whether the nodes show that this operation started (a status lost
    /// to a restart does not hide a start).
    fn started(&self, pass: &Pass<'_>) -> bool;
    /// Whether a closed maintenance gate pauses the upgrade once started
    /// (surge: yes, M3; blue-green runs to its end, B7).
    fn gated_after_start(&self) -> bool {
        true
    }
    fn run(&self, pass: &Pass<'_>) -> Outcome;
}

/// The strategy of `op` on `pool`: in place for a label/taint change
/// (U7); `SHORT_LIVED` for a flex-start or queued-provisioning pool,
/// whatever the operation recorded (A5: GKE picks it by itself); else the
/// operation's `upgradeSettings.strategy`.
pub(crate) fn select(
    op_name: &str,
    op: &Operation,
    pool: &NodePool,
    recreates: bool,
) -> Result<Box<dyn Strategy>, UpgradeError> {
    if !recreates {
        return Ok(Box::new(InPlacePass));
    }
    if pool.spec.short_lived() {
        return Ok(Box::new(ShortLived));
    }
    let u = op.spec.upgrade_settings.clone().unwrap_or_default();
    match u.strategy() {
        UpgradeStrategy::Surge => Ok(Box::new(Surge {
            settings: Settings::of(op_name, &u)?,
        })),
        UpgradeStrategy::BlueGreen => {
            let bg = u.blue_green_settings.clone().unwrap_or_default();
            Ok(Box::new(BlueGreen::new(&bg)))
        }
        UpgradeStrategy::ShortLived => Ok(Box::new(ShortLived)),
    }
}
