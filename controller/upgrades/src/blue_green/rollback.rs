//! B6's rollback: blue's drains and cordons lifted, blue made whole,
//! then green drained and deleted.

use sluice_model::operation::BlueGreenPhase;
use sluice_model::policy::eviction::EvictionReason;

use super::{cordoned_by, create, Run, Sides};
use crate::Action;

impl Run<'_, '_> {
    /// B6: blue's drains and cordons lifted, then green drained and deleted.
    pub(super) fn rollback(&mut self) {
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
}
