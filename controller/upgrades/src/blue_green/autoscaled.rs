//! Autoscaled blue-green (A1–A4): green starts empty and the cluster
//! autoscaler grows it as pods leave blue, which waits cordoned.
//!
//! 1. `CREATING_GREEN_POOL`: nothing is made up front (A1);
//! 2. `CORDONING_BLUE_POOL`: every blue node cordoned, the time on the
//!    node ([`crate::CORDONED_AT_ANNOTATION`]);
//! 3. `WAITING_TO_DRAIN_BLUE_POOL`: `waitForDrainDuration` from the
//!    cordon; meanwhile the autoscaler may remove under-used blue nodes,
//!    down to zero, and grows green (the rules in
//!    [`crate::scaling_rules`]);
//! 4. `DRAINING_BLUE_POOL`: blue's remaining nodes drained, up to
//!    [`DRAIN_PARALLELISM`] at once, budgets honoured for 1 h and grace
//!    for 24 h; each deleted once its drain is over (A2). A pod marked
//!    `safe-to-evict: "false"` keeps its node until 7 days after the
//!    cordon (A3). There is no soak;
//! 5. `DELETING_BLUE_POOL`: blue is gone: the upgrade is done.
//!
//! Sizes: each zone keeps the size the autoscaler chose
//! (`status.autoscaler.targetSizes`, else the reconciler's target), blue
//! and green together. Green is made up to that size less blue, so a blue
//! node the autoscaler removes lowers the size, and one this pass drains
//! away is replaced on green. The zones are held while the upgrade runs,
//! so the nodes the autoscaler drained and named for removal are deleted
//! here rather than by the pool reconciler.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::AutoscaledRolloutPolicy;
use sluice_model::operation::BlueGreenPhase;
use sluice_model::policy::eviction::EvictionReason;

use super::batches::signed;
use super::{later, Next, Run};
use crate::drain::{self, DrainProgress};
use crate::Action;

/// A2: at most this many blue nodes drain at once.
pub const DRAIN_PARALLELISM: usize = 20;

const REASON: EvictionReason = EvictionReason::AutoscaledBlueGreen;

impl<'p> Run<'p, '_> {
    /// One autoscaled phase's step.
    pub(super) fn autoscaled_step(
        &mut self,
        policy: &AutoscaledRolloutPolicy,
        phase: BlueGreenPhase,
    ) -> Next {
        match phase {
            BlueGreenPhase::UpdateStarted
            | BlueGreenPhase::CreatingGreenPool
            | BlueGreenPhase::NodePoolSoaking
            | BlueGreenPhase::RollbackStarted => Next::Enter(BlueGreenPhase::CordoningBluePool),
            BlueGreenPhase::CordoningBluePool => {
                self.cordon_blue(BlueGreenPhase::WaitingToDrainBluePool)
            }
            BlueGreenPhase::WaitingToDrainBluePool => self.wait_to_drain(policy),
            BlueGreenPhase::DrainingBluePool | BlueGreenPhase::DeletingBluePool => {
                self.drain_remaining()
            }
        }
    }

    /// A1: the wait, counted from blue's cordon: the time kept in the
    /// status, else the earliest cordon the nodes record, else now.
    fn wait_to_drain(&mut self, policy: &AutoscaledRolloutPolicy) -> Next {
        let end = match self.bg.drain_start_time.as_ref() {
            Some(t) => t.0,
            None => {
                let cordoned = self
                    .sides
                    .blue
                    .iter()
                    .filter_map(|m| m.cordoned_at)
                    .min()
                    .unwrap_or(self.pass.now);
                let end = later(
                    cordoned,
                    signed(policy.wait_for_drain_duration()).max(SignedDuration::ZERO),
                );
                self.bg.drain_start_time = Some(Time(end));
                end
            }
        };
        if self.pass.now >= end {
            return Next::Enter(BlueGreenPhase::DrainingBluePool);
        }
        self.note_limits();
        self.blocking(format!(
            "waiting to drain blue until {end}: {} blue node(s) left; the autoscaler may \
             remove under-used ones meanwhile",
            self.sides.blue.len()
        ));
        Next::Wait(Some(end))
    }

    /// A2, A3: blue's remaining nodes drained, up to 20 at once, each
    /// deleted when its drain is over; done when blue is gone.
    fn drain_remaining(&mut self) -> Next {
        if self.sides.blue.is_empty() {
            self.bg.phase = Some(BlueGreenPhase::DeletingBluePool);
            if self.bg.blue_pool_deletion_start_time.is_none() {
                self.bg.blue_pool_deletion_start_time = Some(Time(self.pass.now));
            }
            // Done once green holds each zone's size: a zone released
            // short would be refilled on the pool's old version.
            self.out.done = self.green_whole();
            return Next::Wait(None);
        }
        let now = self.pass.now;
        let sides = self.sides;
        let named = self.named();
        let mut wake: Option<Timestamp> = None;
        let mut draining = 0usize;
        let mut protected = 0usize;
        let mut unmarked = Vec::new();
        for m in sides.blue.iter().filter(|m| !named.contains(&m.name())) {
            let name = m.name().to_owned();
            if !m.registered {
                self.out.actions.push(Action::DeleteInstance { name });
                continue;
            }
            let started = m
                .drain
                .as_ref()
                .filter(|d| d.reason == Some(REASON))
                .and_then(|d| d.started);
            let Some(started) = started else {
                unmarked.push(name);
                continue;
            };
            let pods = self.pods(&name);
            let cordoned_at = m.cordoned_at.unwrap_or(started);
            if drain::protected_until(pods, cordoned_at).is_some_and(|t| now < t) {
                protected += 1;
            }
            let released = self.pass.inputs.balancers.may_delete(&name, started, now);
            match drain::autoscaled_progress(started, cordoned_at, pods, now)
                .until_released(released)
            {
                DrainProgress::Waiting { deadline, .. } => {
                    draining += 1;
                    wake = super::earlier(wake, deadline);
                    self.out.busy.insert(name);
                }
                _ => self.out.actions.push(Action::DeleteInstance { name }),
            }
        }
        self.note_limits();
        let room = DRAIN_PARALLELISM.saturating_sub(draining);
        unmarked.sort();
        let chosen: Vec<String> = unmarked.into_iter().take(room).collect();
        self.out
            .warnings
            .extend(crate::inputs::local_warnings(self.pass.inputs, &chosen));
        for node in chosen {
            self.out.busy.insert(node.clone());
            self.out.actions.push(Action::Drain {
                node,
                reason: REASON,
                started: now,
            });
        }
        self.blocking(format!(
            "{} blue node(s) left, {draining} draining (at most {DRAIN_PARALLELISM} at once)",
            sides.blue.len()
        ));
        if protected > 0 {
            self.blocking(format!(
                "{protected} node(s) hold pods marked safe-to-evict: \"false\", kept until 7 \
                 days after their cordon"
            ));
        }
        Next::Wait(wake)
    }

    /// A4: a zone at the pool's maximum with blue still in it: green
    /// cannot grow there until blue's nodes go, said in the status.
    fn note_limits(&mut self) {
        let Some(a) = self.pass.inputs.pool.spec.autoscaling.as_ref() else {
            return;
        };
        let as_count = |v: Option<i32>| v.and_then(|v| usize::try_from(v).ok());
        let mut lines = Vec::new();
        if let Some(max) = as_count(a.max_node_count) {
            for (zone, target) in &self.sides.targets {
                let blue = super::Sides::in_zone(&self.sides.blue, zone).count();
                if *target >= max && blue > 0 {
                    lines.push(format!(
                        "green cannot grow in zone {zone}: the zone is at the pool's maximum of {max} node(s), {blue} of them blue; it grows as blue's nodes go"
                    ));
                }
            }
        } else if let Some(max) = as_count(a.total_max_node_count) {
            let total: usize = self.sides.targets.iter().map(|(_, t)| t).sum();
            let blue = self.sides.blue.len();
            if total >= max && blue > 0 {
                lines.push(format!(
                    "green cannot grow: the pool is at its total maximum of {max} node(s), {blue} of them blue; it grows as blue's nodes go"
                ));
            }
        }
        for l in lines {
            self.blocking(l);
        }
    }

    /// The nodes the autoscaler drained and named for removal
    /// (`status.autoscaler.nodesToRemove`).
    fn named(&self) -> Vec<&'p str> {
        let pool = self.pass.inputs.pool;
        pool.status
            .as_ref()
            .and_then(|s| s.autoscaler.as_ref())
            .map(|a| a.nodes_to_remove.iter().map(|n| n.name.as_str()).collect())
            .unwrap_or_default()
    }

    /// Deletes the named nodes that are still the pool's.
    pub(super) fn remove_named(&mut self) {
        let named = self.named();
        let sides = self.sides;
        for m in sides.blue.iter().chain(&sides.green) {
            if named.contains(&m.name()) {
                self.out.actions.push(Action::DeleteInstance {
                    name: m.name().to_owned(),
                });
            }
        }
    }

    /// The headline of an autoscaled upgrade's phase.
    pub(super) fn autoscaled_headline(&self, phase: BlueGreenPhase) -> String {
        let p = phase.as_str();
        let blue = self.sides.blue.len();
        let green = self.sides.green.len();
        match phase {
            BlueGreenPhase::WaitingToDrainBluePool => match &self.bg.drain_start_time {
                Some(t) => format!(
                    "phase {p}: {blue} blue and {green} green node(s); blue is drained from {}",
                    t.0
                ),
                None => format!("phase {p}: {blue} blue and {green} green node(s)"),
            },
            BlueGreenPhase::CordoningBluePool => {
                let c = self.sides.blue.iter().filter(|m| m.cordoned).count();
                format!("phase {p}: {c} of {blue} blue node(s) cordoned")
            }
            _ => format!("phase {p}: {blue} blue and {green} green node(s)"),
        }
    }
}
