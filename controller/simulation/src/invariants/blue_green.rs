//! A blue-green upgrade's rules at every step (B1–B7): blue is the nodes
//! on the pool's version at the start, green those on the operation's.
//! - per zone, blue and green together at most twice the target (B1);
//! - blue never grows, and loses nodes only in phase 5 (B1–B5);
//! - green never shrinks before the pool soaks, unless rolled back (B1,
//!   B4, B6);
//! - once running, the upgrade is never paused by the maintenance gate
//!   (B7): a window closing mid-way changes nothing.

use std::collections::BTreeMap;

use sluice_model::operation::{BlueGreenPhase, OperationState};
use sluice_nodepools::{Instance, InstanceState};

use super::Seen;
use crate::harness::Scenario;

#[derive(Debug, Clone)]
pub struct BlueGreen {
    old: String,
    new: String,
    targets: BTreeMap<String, usize>,
    /// Blue and green as the last step left them (`None`: not seen yet).
    last: Option<(usize, usize)>,
    /// The upgrade was seen running.
    started: bool,
}

impl BlueGreen {
    pub fn new(s: &Scenario, targets: BTreeMap<String, usize>) -> Self {
        BlueGreen {
            old: s.pool.spec.version.clone().unwrap_or_default(),
            new: s.operation.spec.node_version.clone().unwrap_or_default(),
            targets,
            last: None,
            started: false,
        }
    }

    fn on(&self, version: &str, instances: &[Instance], zone: Option<&str>) -> usize {
        instances
            .iter()
            .filter(|i| matches!(i.state, InstanceState::Creating | InstanceState::Running))
            .filter(|i| i.version == version && zone.is_none_or(|z| i.zone == z))
            .count()
    }

    /// What this step broke.
    pub fn step(&mut self, seen: &Seen<'_>) -> Vec<String> {
        let mut broken = Vec::new();
        let instances = seen.instances;
        for (zone, target) in &self.targets {
            let both = self.on(&self.old, instances, Some(zone))
                + self.on(&self.new, instances, Some(zone));
            if both > 2 * target {
                broken.push(format!(
                    "{zone}: {both} blue and green nodes, over 2 × {target}"
                ));
            }
        }
        let phase = seen.phase();
        let state = seen.state();
        let (blue, green) = (
            self.on(&self.old, instances, None),
            self.on(&self.new, instances, None),
        );
        if let Some((was_blue, was_green)) = self.last {
            if blue > was_blue {
                broken.push(format!("blue grew from {was_blue} to {blue}"));
            }
            if blue < was_blue && phase != Some(BlueGreenPhase::DeletingBluePool) {
                broken.push(format!(
                    "blue lost {} node(s) in phase {phase:?}",
                    was_blue - blue
                ));
            }
            let soaking = matches!(
                phase,
                Some(BlueGreenPhase::NodePoolSoaking | BlueGreenPhase::DeletingBluePool)
            );
            let back = matches!(
                state,
                Some(OperationState::RollingBack | OperationState::RolledBack)
            );
            if green < was_green && !soaking && !back {
                broken.push(format!(
                    "green shrank from {was_green} to {green} in phase {phase:?}"
                ));
            }
        }
        self.last = Some((blue, green));
        // B7: only the start waits for the window.
        self.started |= state == Some(OperationState::Running);
        let message = seen
            .operation
            .status
            .as_ref()
            .and_then(|s| s.status_message.as_deref())
            .unwrap_or_default();
        let paused = state == Some(OperationState::Pending) || message.contains("paused");
        if self.started && !seen.gate_open && paused {
            broken.push(format!("paused by the closed window: {message}"));
        }
        broken
    }
}
