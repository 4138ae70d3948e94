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

pub mod batches;

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::{BlueGreenInfo, BlueGreenSettings};
use sluice_model::operation::{BlueGreenPhase, BlueGreenProgress, OperationAction};
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::{zone_targets, ZoneHold};
use sluice_nodepools::{naming, CreateNode};

use crate::drain::{self, PodOnNode};
use crate::inputs::{local_warnings, Quota};
use crate::observe::{observe, Direction, Member};
use crate::status::{metric, text_metric, ZoneLine};
use crate::strategy::{Outcome, Pass, Strategy};
use crate::target::Side;
use crate::{scaling_rules, Action, CORDONED_BY_ANNOTATION};

use sluice_model::operation::OperationState;

/// Metric names of a blue-green operation's progress.
pub const PHASE: &str = "phase";
pub const BATCHES_TOTAL: &str = "batches_total";
pub const BATCHES_DRAINED: &str = "batches_drained";
pub const SOAK_LEFT_SECONDS: &str = "soak_left_seconds";

pub(crate) struct BlueGreen {
    settings: BlueGreenSettings,
}

impl BlueGreen {
    pub fn new(settings: &BlueGreenSettings) -> Self {
        BlueGreen {
            settings: settings.clone(),
        }
    }
}

impl Strategy for BlueGreen {
    fn stage_name(&self, direction: Direction) -> &'static str {
        match direction {
            Direction::Forward => "blue-green-upgrade",
            Direction::Rollback => "blue-green-rollback",
        }
    }

    fn started(&self, pass: &Pass<'_>) -> bool {
        pass.previous.blue_green.is_some()
            || pass
                .inputs
                .nodes
                .iter()
                .any(|n| cordoned_by(n) == Some(pass.op_name))
            || !Sides::of(pass).green.is_empty()
    }

    fn gated_after_start(&self) -> bool {
        false
    }

    fn run(&self, pass: &Pass<'_>) -> Outcome {
        let sides = Sides::of(pass);
        let mut run = Run {
            pass,
            settings: &self.settings,
            sides: &sides,
            bg: pass.previous.blue_green.clone().unwrap_or_default(),
            out: Outcome {
                cancel_honoured: true,
                hold_while_paused: true,
                ..Outcome::default()
            },
            taken: taken_names(pass),
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
/// operation's), and each zone's target.
struct Sides<'a> {
    blue: Vec<Member<'a>>,
    green: Vec<Member<'a>>,
    targets: Vec<(String, usize)>,
}

impl<'a> Sides<'a> {
    fn of(pass: &Pass<'a>) -> Self {
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
        Sides {
            blue,
            green,
            targets: zone_targets(&inputs.pool.spec, &inputs.config.cluster_locations),
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
    sides: &'p Sides<'a>,
    bg: BlueGreenProgress,
    out: Outcome,
    taken: HashSet<String>,
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
        self.pass
            .inputs
            .pods
            .get(node)
            .map_or(&[][..], Vec::as_slice)
    }

    fn blocking(&mut self, line: String) {
        self.out.note = Some(match self.out.note.take() {
            Some(n) => format!("{n}; {line}"),
            None => line,
        });
    }

    fn forward(&mut self) {
        let mut phase = self.bg.phase.unwrap_or(BlueGreenPhase::CreatingGreenPool);
        if phase == BlueGreenPhase::RollbackStarted {
            // A rollback runs to its end; the driver never sends one back.
            return self.rollback();
        }
        if phase == BlueGreenPhase::UpdateStarted {
            phase = BlueGreenPhase::CreatingGreenPool;
        }
        // Phase 5 shows on the nodes before its status is written: a pass
        // cut short after its first deletion marks must not go back.
        let deletion_started = self
            .sides
            .blue
            .iter()
            .filter_map(|m| m.drain.as_ref())
            .filter(|d| d.reason == Some(EvictionReason::BluePoolDeletion))
            .filter_map(|d| d.started)
            .min();
        if let Some(t) = deletion_started {
            phase = BlueGreenPhase::DeletingBluePool;
            if self.bg.blue_pool_deletion_start_time.is_none() {
                self.bg.blue_pool_deletion_start_time = Some(Time(t));
            }
            // The soak ended when the deletion started (the pass that
            // entered both may have been the one cut short).
            if self.bg.soak_end_time.is_none() {
                self.bg.soak_end_time = Some(Time(t));
            }
        }
        let deleting = phase == BlueGreenPhase::DeletingBluePool;
        if self.pass.cancelled && !deleting {
            self.bg.phase = Some(phase);
            self.out.paused_message = Some(format!(
                "cancelled in phase {}: the pool is kept as it is; resume, or roll back",
                phase.as_str()
            ));
            self.out.headline = self.headline(phase);
            return;
        }
        if self.pass.cancelled {
            self.out.cancel_honoured = false;
            self.out.note =
                Some("CANCEL is ignored: phase DELETING_BLUE_POOL cannot be cancelled".to_owned());
        }
        if self.pass.resumed {
            // B6: a batch that had drained is followed by the next at once.
            self.bg.batch_soak_end_time = None;
        }
        // Green is kept whole in every phase: a green node lost is remade.
        if phase != BlueGreenPhase::CreatingGreenPool {
            self.top_up_green(false);
        }
        for _ in 0..8 {
            self.bg.phase = Some(phase);
            let next = match phase {
                BlueGreenPhase::CreatingGreenPool => self.create_green(),
                BlueGreenPhase::CordoningBluePool => self.cordon_blue(),
                BlueGreenPhase::DrainingBluePool => self.drain_blue(),
                BlueGreenPhase::NodePoolSoaking => self.soak(),
                BlueGreenPhase::DeletingBluePool => self.delete_blue(),
                BlueGreenPhase::UpdateStarted
                | BlueGreenPhase::WaitingToDrainBluePool
                | BlueGreenPhase::RollbackStarted => Next::Enter(BlueGreenPhase::CreatingGreenPool),
            };
            match next {
                Next::Enter(p) => phase = p,
                Next::Wait(t) => {
                    self.out.wake_at = t;
                    break;
                }
            }
        }
        self.out.headline = self.headline(phase);
    }

    /// Green nodes owed per zone (target minus the green counted), made
    /// when quota allows; with `check_room`, only if the provider has room
    /// for all of them at once (B1). Returns whether any is still owed.
    fn top_up_green(&mut self, check_room: bool) -> bool {
        let owed: Vec<(String, usize)> = self
            .sides
            .targets
            .iter()
            .map(|(z, t)| {
                let have = Sides::in_zone(&self.sides.green, z).count();
                (z.clone(), t.saturating_sub(have))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let needed: usize = owed.iter().map(|(_, n)| n).sum();
        if needed == 0 {
            return false;
        }
        let inputs = self.pass.inputs;
        if !inputs.quota.allows(self.now()) {
            if let Quota::Exhausted { message, retry_at } = inputs.quota {
                let when = retry_at.map_or(String::new(), |t| format!("; next attempt at {t}"));
                self.blocking(format!(
                    "creating green nodes waits for quota: {message}{when}"
                ));
            }
            return true;
        }
        if check_room {
            if let Some(room) = inputs.capacity.filter(|room| *room < needed) {
                self.blocking(format!(
                    "waiting for quota: the green pool needs {needed} more node(s) and the \
                     provider has room for {room}; no green node is made until all fit"
                ));
                return true;
            }
        }
        let fresh = &self.pass.sides.to;
        for (zone, n) in owed {
            for _ in 0..n {
                let node = create(
                    self.pass.pool_name,
                    &zone,
                    fresh,
                    self.now(),
                    &mut self.taken,
                );
                self.out.busy.insert(node.name.clone());
                self.out.actions.push(Action::CreateNode(node));
            }
        }
        true
    }

    /// B1: all of green, then every green node Ready.
    fn create_green(&mut self) -> Next {
        if self.top_up_green(true) {
            return Next::Wait(None);
        }
        let short: Vec<String> = self
            .sides
            .targets
            .iter()
            .filter(|(z, t)| self.sides.green_ready(z) < *t)
            .map(|(z, t)| {
                format!(
                    "zone {z}: {} of {t} green node(s) Ready",
                    self.sides.green_ready(z)
                )
            })
            .collect();
        if short.is_empty() {
            Next::Enter(BlueGreenPhase::CordoningBluePool)
        } else {
            Next::Wait(None)
        }
    }

    /// B2: every blue node cordoned, none drained.
    fn cordon_blue(&mut self) -> Next {
        let mut waiting = false;
        for m in self
            .sides
            .blue
            .iter()
            .filter(|m| m.registered && !m.cordoned)
        {
            waiting = true;
            self.out.actions.push(Action::Cordon {
                node: m.name().to_owned(),
                at: self.pass.now,
            });
        }
        if waiting {
            Next::Wait(None)
        } else {
            Next::Enter(BlueGreenPhase::DrainingBluePool)
        }
    }

    fn batch_marks(sides: &'p Sides<'a>) -> (Vec<&'p Member<'a>>, Vec<&'p Member<'a>>) {
        sides.blue.iter().partition(|m| {
            m.drain
                .as_ref()
                .is_some_and(|d| d.reason == Some(EvictionReason::BlueGreenDrain))
        })
    }

    /// B3: batches of blue drained, each followed by its soak.
    fn drain_blue(&mut self) -> Next {
        let blue_total = self.sides.blue.len();
        let size = match self.bg.batch_size {
            Some(s) => usize::try_from(s).unwrap_or(usize::MAX),
            None => {
                let s =
                    batches::batch_size(self.settings.standard_rollout_policy.as_ref(), blue_total);
                let n = batches::batch_count(s, blue_total);
                self.bg.batch_size = Some(u32::try_from(s).unwrap_or(u32::MAX));
                self.bg.batches = Some(u32::try_from(n).unwrap_or(u32::MAX));
                s
            }
        };
        if size == 0 {
            return self.enter_soak();
        }
        let sides = self.sides;
        let pass = self.pass;
        let pods_of = |node: &str| pass.inputs.pods.get(node).map_or(&[][..], Vec::as_slice);
        let (marked, unmarked) = Self::batch_marks(sides);
        let starts: BTreeSet<Timestamp> = marked
            .iter()
            .filter_map(|m| m.drain.as_ref().and_then(|d| d.started))
            .collect();
        let drained = usize::try_from(self.bg.batches_drained).unwrap_or(usize::MAX);
        // Each batch is marked in one pass, with one start time: more start
        // times than batches drained means the latest batch is draining.
        let mut unmarked = unmarked;
        if let Some(latest) = starts.last().copied().filter(|_| starts.len() > drained) {
            let mut in_batch: Vec<&Member<'a>> = marked
                .iter()
                .copied()
                .filter(|m| m.drain.as_ref().and_then(|d| d.started) == Some(latest))
                .collect();
            // A batch whose marking pass was cut short is made whole with
            // its own start time, not taken for a batch of its own.
            if in_batch.len() < size && !unmarked.is_empty() {
                Self::in_batch_order(sides, &mut unmarked);
                let short = size - in_batch.len();
                let more: Vec<&Member<'a>> = unmarked.drain(..short.min(unmarked.len())).collect();
                for m in &more {
                    self.out.actions.push(Action::Drain {
                        node: m.name().to_owned(),
                        reason: EvictionReason::BlueGreenDrain,
                        started: latest,
                    });
                }
                in_batch.extend(more);
            }
            let pods: Vec<&PodOnNode> = in_batch.iter().flat_map(|m| pods_of(m.name())).collect();
            match drain::batch_over(latest, &pods, self.pass.now) {
                Err(deadline) => {
                    let left = pods.iter().filter(|p| p.held_by.is_none()).count();
                    let held: Vec<String> = pods
                        .iter()
                        .filter_map(|p| {
                            p.held_by
                                .as_ref()
                                .map(|why| format!("pod {}: {why}", p.name))
                        })
                        .collect();
                    self.blocking(format!(
                        "batch {} of {}: {} node(s) draining, {left} pod(s) left",
                        starts.len(),
                        self.bg.batches.unwrap_or(0),
                        in_batch.len()
                    ));
                    for h in held {
                        self.blocking(h);
                    }
                    for m in &in_batch {
                        self.out.busy.insert(m.name().to_owned());
                    }
                    return Next::Wait(deadline);
                }
                Ok(()) => {
                    let k = starts.len();
                    self.bg.batches_drained = u32::try_from(k).unwrap_or(u32::MAX);
                    let soak = batches::batch_soak(self.settings, k);
                    self.bg.batch_soak_end_time = Some(Time(later(self.pass.now, soak)));
                }
            }
        }
        // Every batch is followed by its soak, the last one too (B3).
        if let Some(end) = self.bg.batch_soak_end_time.as_ref().map(|t| t.0) {
            if self.pass.now < end {
                let next = if unmarked.is_empty() {
                    "the pool's soak"
                } else {
                    "the next batch"
                };
                self.blocking(format!(
                    "batch {} of {} drained; {next} starts at {end}",
                    self.bg.batches_drained,
                    self.bg.batches.unwrap_or(0)
                ));
                return Next::Wait(Some(end));
            }
        }
        if unmarked.is_empty() {
            return self.enter_soak();
        }
        let mut next: Vec<&Member<'a>> = unmarked;
        Self::in_batch_order(sides, &mut next);
        let now = self.pass.now;
        let chosen: Vec<String> = next
            .iter()
            .take(size)
            .map(|m| m.name().to_owned())
            .collect();
        // U5: a batch drained at once takes a Local Service's pods away
        // together.
        self.out
            .warnings
            .extend(local_warnings(self.pass.inputs, &chosen));
        for node in chosen {
            self.out.busy.insert(node.clone());
            self.out.actions.push(Action::Drain {
                node,
                reason: EvictionReason::BlueGreenDrain,
                started: now,
            });
        }
        self.bg.batch_soak_end_time = None;
        Next::Wait(None)
    }

    /// Blue's nodes in the order batches take them: zone by zone in
    /// `locations` order, then by name.
    fn in_batch_order(sides: &Sides<'_>, members: &mut [&Member<'_>]) {
        let zone_order = |m: &Member<'_>| {
            sides
                .targets
                .iter()
                .position(|(z, _)| *z == m.instance.zone)
                .unwrap_or(usize::MAX)
        };
        members.sort_by(|a, b| (zone_order(a), a.name()).cmp(&(zone_order(b), b.name())));
    }

    fn enter_soak(&mut self) -> Next {
        // The soaks the drained batches waited count against the cap.
        let batches = usize::try_from(self.bg.batches_drained).unwrap_or(usize::MAX);
        let soak = batches::pool_soak(self.settings, batches);
        self.bg.batch_soak_end_time = None;
        self.bg.soak_end_time = Some(Time(later(self.pass.now, soak)));
        Next::Enter(BlueGreenPhase::NodePoolSoaking)
    }

    /// B4: blue kept, drained, until the soak ends or `COMPLETE`.
    fn soak(&mut self) -> Next {
        let complete = self.pass.inputs.operation.spec.action == Some(OperationAction::Complete);
        let end = match self.bg.soak_end_time.as_ref().map(|t| t.0) {
            Some(end) => end,
            None => return self.enter_soak(),
        };
        if complete || self.pass.now >= end {
            self.bg.blue_pool_deletion_start_time = Some(Time(self.pass.now));
            return Next::Enter(BlueGreenPhase::DeletingBluePool);
        }
        Next::Wait(Some(end))
    }

    /// B5: blue's pods deleted (budgets ignored, grace at most 60 min),
    /// then its nodes.
    fn delete_blue(&mut self) -> Next {
        if self.bg.blue_pool_deletion_start_time.is_none() {
            self.bg.blue_pool_deletion_start_time = Some(Time(self.pass.now));
        }
        let sides = self.sides;
        let wake = self.drain_then_delete(&sides.blue, EvictionReason::BluePoolDeletion);
        if self.sides.blue.is_empty() && self.green_whole() {
            self.out.done = true;
        }
        Next::Wait(wake)
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
            match drain::progress(reason, started, self.pods(&name), self.pass.now) {
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

    /// B6: blue's drains and cordons lifted, then green drained and deleted.
    fn rollback(&mut self) {
        self.bg.phase = Some(BlueGreenPhase::RollbackStarted);
        let op = self.pass.op_name;
        let mut blue_pending = false;
        for m in &self.sides.blue {
            let name = m.name().to_owned();
            let ours = m.drain.as_ref().is_some_and(|d| {
                matches!(
                    d.reason,
                    Some(EvictionReason::BlueGreenDrain | EvictionReason::BluePoolDeletion)
                )
            });
            if ours {
                blue_pending = true;
                self.out
                    .actions
                    .push(Action::ReleaseDrain { node: name.clone() });
            }
            let node = self
                .pass
                .inputs
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name.as_str()));
            if node.and_then(cordoned_by) == Some(op) {
                blue_pending = true;
                self.out.actions.push(Action::Uncordon { node: name });
            }
        }
        let respect = self.pass.inputs.operation.spec.respect_pdb == Some(true);
        let reason = if respect {
            EvictionReason::NodeUpgrade
        } else {
            EvictionReason::BluePoolDeletion
        };
        if blue_pending {
            self.out.headline =
                "phase ROLLBACK_STARTED: blue is uncordoned before green is drained".to_owned();
            self.out.wake_at = None;
            return;
        }
        // Blue is made whole again before green goes: nodes it lost (a
        // failed machine, or a deletion that started before the rollback
        // was asked) are remade on the pool's version and config, so no
        // zone falls below its target.
        let mut short: Vec<String> = Vec::new();
        let from = &self.pass.sides.from;
        for (zone, target) in &self.sides.targets {
            let have = Sides::in_zone(&self.sides.blue, zone).count();
            let serving = Sides::in_zone(&self.sides.blue, zone)
                .filter(|m| m.registered && m.ready && !m.cordoned)
                .count();
            if serving < *target {
                short.push(format!(
                    "zone {zone}: {serving} of {target} blue node(s) serve"
                ));
            }
            if have < *target && self.pass.inputs.quota.allows(self.pass.now) {
                for _ in have..*target {
                    let node = create(
                        self.pass.pool_name,
                        zone,
                        from,
                        self.pass.now,
                        &mut self.taken,
                    );
                    self.out.actions.push(Action::CreateNode(node));
                }
            }
        }
        if !short.is_empty() {
            for line in short {
                self.blocking(format!("green is kept until blue serves again: {line}"));
            }
            self.out.headline =
                "phase ROLLBACK_STARTED: blue is made whole before green is drained".to_owned();
            return;
        }
        let sides = self.sides;
        let wake = self.drain_then_delete(&sides.green, reason);
        self.out.done = self.sides.green.is_empty();
        self.out.wake_at = wake;
        self.out.headline = format!(
            "phase ROLLBACK_STARTED: blue serves again; {} green node(s) left to drain and delete",
            self.sides.green.len()
        );
    }

    fn headline(&self, phase: BlueGreenPhase) -> String {
        let p = phase.as_str();
        let green_ready: usize = self
            .sides
            .targets
            .iter()
            .map(|(z, _)| self.sides.green_ready(z))
            .sum();
        let target: usize = self.sides.targets.iter().map(|(_, t)| t).sum();
        let blue = self.sides.blue.len();
        match phase {
            BlueGreenPhase::CreatingGreenPool | BlueGreenPhase::UpdateStarted => {
                format!("phase {p}: {green_ready} of {target} green node(s) Ready")
            }
            BlueGreenPhase::CordoningBluePool => {
                let c = self.sides.blue.iter().filter(|m| m.cordoned).count();
                format!("phase {p}: {c} of {blue} blue node(s) cordoned")
            }
            BlueGreenPhase::DrainingBluePool => format!(
                "phase {p}: {} of {} batch(es) drained",
                self.bg.batches_drained,
                self.bg.batches.unwrap_or(0)
            ),
            BlueGreenPhase::NodePoolSoaking => match &self.bg.soak_end_time {
                Some(end) => format!(
                    "phase {p}: blue is kept until {}; complete-upgrade ends the soak now",
                    end.0
                ),
                None => format!("phase {p}"),
            },
            BlueGreenPhase::DeletingBluePool => {
                format!("phase {p}: {blue} blue node(s) left to delete")
            }
            BlueGreenPhase::WaitingToDrainBluePool | BlueGreenPhase::RollbackStarted => {
                format!("phase {p}")
            }
        }
    }

    fn finish(mut self) -> Outcome {
        let pass = self.pass;
        let phase = self.bg.phase;
        // Every zone held whole: neither side is the reconciler's to cut
        // or refill while the upgrade runs or is paused.
        for (zone, _) in &self.sides.targets {
            let here = Sides::in_zone(&self.sides.blue, zone).count()
                + Sides::in_zone(&self.sides.green, zone).count();
            self.out
                .held_zones
                .insert(zone.clone(), ZoneHold { extra: here });
        }
        for (zone, target) in &self.sides.targets {
            let ready = self.sides.green_ready(zone).min(*target);
            self.out.zones.push(ZoneLine {
                zone: zone.clone(),
                state: if ready >= *target {
                    OperationState::Done
                } else {
                    OperationState::Running
                },
                total: *target,
                upgraded: ready,
                blocking: Vec::new(),
            });
            self.out.total += target;
            self.out.upgraded += ready;
        }
        if let (Some(note), Some(first)) = (self.out.note.clone(), self.out.zones.first_mut()) {
            first.blocking = note.split("; ").map(str::to_owned).collect();
        }
        self.out.note = None;
        let soak_left = self
            .bg
            .soak_end_time
            .as_ref()
            .filter(|_| phase == Some(BlueGreenPhase::NodePoolSoaking))
            .map(|t| t.0.duration_since(pass.now).as_secs().max(0));
        self.out.metrics = [
            phase.map(|p| text_metric(PHASE, p.as_str())),
            self.bg.batches.map(|n| metric(BATCHES_TOTAL, n as usize)),
            self.bg
                .batches
                .map(|_| metric(BATCHES_DRAINED, self.bg.batches_drained as usize)),
            soak_left.map(|s| metric(SOAK_LEFT_SECONDS, usize::try_from(s).unwrap_or(0))),
        ]
        .into_iter()
        .flatten()
        .collect();
        let (blue_rules, green_rules) = scaling_rules::blue_green(phase, false);
        self.out.blue_green_info = Some(BlueGreenInfo {
            phase,
            operation: Some(pass.op_name.to_owned()),
            blue_nodes: self
                .sides
                .blue
                .iter()
                .map(|m| m.name().to_owned())
                .collect(),
            green_nodes: self
                .sides
                .green
                .iter()
                .map(|m| m.name().to_owned())
                .collect(),
            blue_pool_deletion_start_time: self
                .bg
                .blue_pool_deletion_start_time
                .as_ref()
                .map(|t| t.0.to_string()),
            green_pool_version: Some(pass.sides.to.version.clone()),
            blue_autoscaling: Some(blue_rules),
            green_autoscaling: Some(green_rules),
        });
        self.out.blue_green = Some(self.bg);
        self.out
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
