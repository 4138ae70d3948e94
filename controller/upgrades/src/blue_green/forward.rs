//! The forward phases, one step each: green made, blue cordoned, blue
//! drained in batches, the soak, blue deleted (B1–B5).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use sluice_model::operation::{BlueGreenPhase, OperationAction};
use sluice_model::policy::eviction::EvictionReason;

use super::{batches, create, later, Next, Run, Sides};
use crate::drain::{self, PodOnNode};
use crate::inputs::{local_warnings, Quota};
use crate::observe::Member;
use crate::Action;

impl<'p, 'a> Run<'p, 'a> {
    pub(super) fn forward(&mut self) {
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
        if self.autoscaled.is_some() {
            // The zones are held, so the nodes the autoscaler removed are
            // deleted here, paused or not, as the pool would.
            self.remove_named();
        }
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
        if phase != BlueGreenPhase::CreatingGreenPool || self.autoscaled.is_some() {
            self.top_up_green(false);
        }
        // Each phase is entered at most once a pass, so the five forward
        // phases bound the steps; the bound only guards against a loop.
        for _ in 0..8 {
            self.bg.phase = Some(phase);
            let next = match (self.autoscaled, phase) {
                (Some(policy), phase) => self.autoscaled_step(policy, phase),
                (None, phase) => self.standard_step(phase),
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

    /// One standard phase's step (B1–B5).
    fn standard_step(&mut self, phase: BlueGreenPhase) -> Next {
        match phase {
            BlueGreenPhase::CreatingGreenPool => self.create_green(),
            BlueGreenPhase::CordoningBluePool => self.cordon_blue(BlueGreenPhase::DrainingBluePool),
            BlueGreenPhase::DrainingBluePool => self.drain_blue(),
            BlueGreenPhase::NodePoolSoaking => self.soak(),
            BlueGreenPhase::DeletingBluePool => self.delete_blue(),
            BlueGreenPhase::UpdateStarted
            | BlueGreenPhase::WaitingToDrainBluePool
            | BlueGreenPhase::RollbackStarted => Next::Enter(BlueGreenPhase::CreatingGreenPool),
        }
    }

    /// Green nodes owed per zone (target minus the green counted, and
    /// minus blue for an autoscaled upgrade, whose target is the zone's
    /// whole size), made when quota allows; with `check_room`, only if the
    /// provider has room for all of them at once (B1). Returns whether any
    /// is still owed.
    pub(super) fn top_up_green(&mut self, check_room: bool) -> bool {
        let autoscaled = self.autoscaled.is_some();
        let owed: Vec<(String, usize)> = self
            .sides
            .targets
            .iter()
            .map(|(z, t)| {
                let mut have = Sides::in_zone(&self.sides.green, z).count();
                if autoscaled {
                    have += Sides::in_zone(&self.sides.blue, z).count();
                }
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

    /// B2, A1: every blue node cordoned, none drained; then `then`.
    pub(super) fn cordon_blue(&mut self, then: BlueGreenPhase) -> Next {
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
            Next::Enter(then)
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
        let pods_of = |node: &str| pass.inputs.pods_on(node);
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
}
