//! What a pass tells: the headline, the zones' lines, the metrics, the
//! pool's `updateInfo`, the zones held.

use sluice_model::node_pool::BlueGreenInfo;
use sluice_model::operation::{BlueGreenPhase, OperationState};
use sluice_nodepools::reconcile::ZoneHold;

use super::{Run, Sides, BATCHES_DRAINED, BATCHES_TOTAL, PHASE, SOAK_LEFT_SECONDS};
use crate::scaling_rules;
use crate::status::{metric, text_metric, ZoneLine};
use crate::strategy::Outcome;

impl Run<'_, '_> {
    pub(super) fn headline(&self, phase: BlueGreenPhase) -> String {
        if self.autoscaled.is_some() {
            return self.autoscaled_headline(phase);
        }
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

    pub(super) fn finish(mut self) -> Outcome {
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
        if let Some(first) = self.out.zones.first_mut() {
            first.blocking = std::mem::take(&mut self.blocking);
        }
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
        let (blue_rules, green_rules) = scaling_rules::blue_green(phase, self.autoscaled.is_some());
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
