//! The blue-green strategy (B1–B7): a second set of nodes ("green") on the
//! new version and config, in every zone at once, the old set ("blue")
//! kept until green has soaked.
//!
//! 1. `CREATING_GREEN_POOL`: green is made to each zone's target, once
//!    the provider has room for all of it (B1);
//! 2. `CORDONING_BLUE_POOL`: every blue node is cordoned, not drained (B2);
//! 3. `DRAINING_BLUE_POOL`: blue is drained in batches, each followed by
//!    its soak; budgets are honoured and nothing is forced (B3);
//! 4. `NODE_POOL_SOAKING`: blue is kept, drained, for the soak, which
//!    `COMPLETE` ends at once (B4);
//! 5. `DELETING_BLUE_POOL`: blue's pods are deleted, budgets ignored,
//!    grace at most 60 min, then its nodes; not cancellable (B5).
//!
//! Which node is blue or green (its version and config fingerprint),
//! cordoned by us ([`crate::CORDONED_BY_ANNOTATION`]) or in which drain
//! (its reason and start time) is read off the nodes; the phase, the batch
//! count and the ends of the soaks are kept in the operation's
//! `status.blueGreen`. Every zone is held whole while the upgrade runs or
//! is paused, so the pool reconciler cuts neither side. Only the start
//! waits for the maintenance gate (B7).
//!
//! `CANCEL` pauses in the phase (B6); `RESUME` goes on, the next batch at
//! once if the last one had drained; `ROLLBACK` lifts blue's drains and
//! cordons, then drains green (budgets honoured for `respectPdb`, else its
//! pods deleted) and deletes it.

mod autoscaled;
pub mod batches;
mod forward;
mod report;
mod rollback;

use std::collections::HashSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::{AutoscaledRolloutPolicy, BlueGreenSettings};
use sluice_model::operation::{BlueGreenPhase, BlueGreenProgress};
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::{pool_targets, zone_targets};
use sluice_nodepools::{naming, CreateNode};

use crate::drain::{self, PodOnNode};
use crate::observe::{observe, Direction, Member};
use crate::strategy::{Outcome, Pass, Strategy};
use crate::target::Side;
use crate::{Action, CORDONED_BY_ANNOTATION};

/// Metric names of a blue-green operation's progress.
pub const PHASE: &str = "phase";
pub const BATCHES_TOTAL: &str = "batches_total";
pub const BATCHES_DRAINED: &str = "batches_drained";
pub const SOAK_LEFT_SECONDS: &str = "soak_left_seconds";

pub(crate) struct BlueGreen {
    settings: BlueGreenSettings,
}

impl BlueGreen {
    /// Standard blue-green, or autoscaled (A1–A4) when the settings carry
    /// an `autoscaledRolloutPolicy`.
    pub fn new(settings: &BlueGreenSettings) -> Self {
        BlueGreen {
            settings: settings.clone(),
        }
    }

    fn autoscaled(&self) -> bool {
        self.settings.autoscaled_rollout_policy.is_some()
    }
}

impl Strategy for BlueGreen {
    fn stage_name(&self, direction: Direction) -> &'static str {
        match (direction, self.autoscaled()) {
            (Direction::Forward, false) => "blue-green-upgrade",
            (Direction::Forward, true) => "autoscaled-blue-green-upgrade",
            (Direction::Rollback, _) => "blue-green-rollback",
        }
    }

    fn started(&self, pass: &Pass<'_>) -> bool {
        pass.previous.blue_green.is_some()
            || pass
                .inputs
                .nodes
                .iter()
                .any(|n| cordoned_by(n) == Some(pass.op_name))
            || !Sides::of(pass, self.autoscaled()).green.is_empty()
    }

    fn gated_after_start(&self) -> bool {
        false
    }

    fn run(&self, pass: &Pass<'_>) -> Outcome {
        let sides = Sides::of(pass, self.autoscaled());
        let mut run = Run {
            pass,
            settings: &self.settings,
            autoscaled: self.settings.autoscaled_rollout_policy.as_ref(),
            sides: &sides,
            bg: pass.previous.blue_green.clone().unwrap_or_default(),
            out: Outcome {
                cancel_honoured: true,
                hold_while_paused: true,
                ..Outcome::default()
            },
            taken: taken_names(pass),
            blocking: Vec::new(),
        };
        match pass.direction {
            Direction::Forward => run.forward(),
            Direction::Rollback => run.rollback(),
        }
        run.finish()
    }
}

fn cordoned_by(n: &k8s_openapi::api::core::v1::Node) -> Option<&str> {
    n.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CORDONED_BY_ANNOTATION))
        .map(String::as_str)
}

/// Names a new node may not take: every instance's and Node's, and those
/// the pool's last status lists (see the surge pass).
fn taken_names(pass: &Pass<'_>) -> HashSet<String> {
    let inputs = pass.inputs;
    let mut taken: HashSet<String> = inputs.instances.iter().map(|i| i.name.clone()).collect();
    taken.extend(inputs.nodes.iter().filter_map(|n| n.metadata.name.clone()));
    if let Some(status) = &inputs.pool.status {
        taken.extend(status.nodes.iter().cloned());
    }
    taken
}

/// The pool's members split into blue (the pool's side) and green (the
/// operation's), and each zone's target: green's (the pool's size per zone)
/// for a standard upgrade; blue and green together for an autoscaled one,
/// whose zones keep the size the autoscaler chose.
struct Sides<'a> {
    blue: Vec<Member<'a>>,
    green: Vec<Member<'a>>,
    targets: Vec<(String, usize)>,
}

impl<'a> Sides<'a> {
    fn of(pass: &Pass<'a>, autoscaled: bool) -> Self {
        let inputs = pass.inputs;
        let members = observe(
            pass.pool_name,
            pass.op_name,
            inputs.instances,
            inputs.nodes,
            pass.sides,
            // Blue and green keep their names whichever way the nodes go.
            Direction::Forward,
            pass.previous.start_time.as_ref().map(|t| t.0),
        );
        let (from, to) = (&pass.sides.from, &pass.sides.to);
        // A machine still booting has no Node to tell its config: its
        // version tells its side when the versions differ (also when the
        // status that dates the start was lost); else one made since the
        // start is the side being made now: green going forward, blue
        // restored by a rollback.
        let is_green = |m: &Member<'_>| {
            if m.registered {
                return m.fresh;
            }
            let v = &m.instance.version;
            if from.version != to.version && (*v == from.version || *v == to.version) {
                return *v == to.version;
            }
            m.fresh == (pass.direction == Direction::Forward)
        };
        let (green, blue) = members
            .into_iter()
            .filter(|m| m.counted)
            .partition(|m| is_green(m));
        let locations = &inputs.config.cluster_locations;
        let targets = if autoscaled {
            pool_targets(inputs.pool, locations).0
        } else {
            zone_targets(&inputs.pool.spec, locations)
        };
        Sides {
            blue,
            green,
            targets,
        }
    }

    fn in_zone<'s>(
        members: &'s [Member<'a>],
        zone: &'s str,
    ) -> impl Iterator<Item = &'s Member<'a>> {
        members.iter().filter(move |m| m.instance.zone == zone)
    }

    /// Green nodes that serve: registered and Ready.
    fn green_ready(&self, zone: &str) -> usize {
        Self::in_zone(&self.green, zone)
            .filter(|m| m.registered && m.ready)
            .count()
    }
}

/// One pass's working state.
struct Run<'p, 'a> {
    pass: &'p Pass<'a>,
    settings: &'p BlueGreenSettings,
    /// Set for an autoscaled upgrade (A1–A4).
    autoscaled: Option<&'p AutoscaledRolloutPolicy>,
    sides: &'p Sides<'a>,
    bg: BlueGreenProgress,
    out: Outcome,
    taken: HashSet<String>,
    /// What holds the upgrade now, a reason a line, for the status.
    blocking: Vec<String>,
}

/// What a phase's step says next.
enum Next {
    /// Go on to this phase in the same pass.
    Enter(BlueGreenPhase),
    /// Wait here; look again by this time (`None`: when something changes).
    Wait(Option<Timestamp>),
}

impl<'p, 'a> Run<'p, 'a> {
    fn now(&self) -> Timestamp {
        self.pass.now
    }

    fn pods(&self, node: &str) -> &[PodOnNode] {
        self.pass.inputs.pods_on(node)
    }

    fn blocking(&mut self, line: String) {
        self.blocking.push(line);
    }

    /// Each of `members` drained for `reason`, then deleted once its drain
    /// is over (an instance that never registered at once); when the next
    /// drain's caps run out.
    fn drain_then_delete(
        &mut self,
        members: &[Member<'_>],
        reason: EvictionReason,
    ) -> Option<Timestamp> {
        let mut wake: Option<Timestamp> = None;
        for m in members {
            let name = m.name().to_owned();
            if !m.registered {
                self.out.actions.push(Action::DeleteInstance { name });
                continue;
            }
            let mark = m.drain.as_ref().filter(|d| d.reason == Some(reason));
            let Some(started) = mark.and_then(|d| d.started) else {
                self.out.actions.push(Action::Drain {
                    node: name,
                    reason,
                    started: self.pass.now,
                });
                continue;
            };
            match self
                .pass
                .inputs
                .drain_progress(&name, reason, started, self.pass.now)
            {
                drain::DrainProgress::Waiting { deadline, .. } => {
                    wake = earlier(wake, deadline);
                    self.out.busy.insert(name);
                }
                _ => self.out.actions.push(Action::DeleteInstance { name }),
            }
        }
        wake
    }

    fn green_whole(&self) -> bool {
        self.sides.targets.iter().all(|(z, t)| {
            Sides::in_zone(&self.sides.green, z)
                .filter(|m| m.registered)
                .count()
                >= *t
        })
    }
}

fn later(now: Timestamp, d: SignedDuration) -> Timestamp {
    now.checked_add(d).unwrap_or(Timestamp::MAX)
}

fn earlier(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A new node of `side` in `zone`.
fn create(
    pool: &str,
    zone: &str,
    side: &Side,
    now: Timestamp,
    taken: &mut HashSet<String>,
) -> CreateNode {
    let salt = naming::salt(now);
    let name = naming::fresh_names(pool, zone, salt, 1, taken)
        .pop()
        .unwrap_or_else(|| naming::node_name(pool, zone, salt, u32::MAX));
    taken.insert(name.clone());
    CreateNode {
        pool: pool.to_owned(),
        zone: zone.to_owned(),
        name,
        version: side.version.clone(),
        config: side.create_spec(),
    }
}
