//! The surge strategy (U1–U6): one zone at a time, in `locations` order (a
//! zone with a node mid-upgrade first), each through the surge window of
//! [`crate::surge_window`]; the zone being upgraded is held with
//! `maxSurge` as its allowance.

use std::collections::HashSet;

use sluice_model::node_pool::UpgradeSettings;
use sluice_model::operation::OperationState;
use sluice_nodepools::reconcile::{zone_targets, ZoneHold};

use crate::inputs::{local_warnings, Quota};
use crate::observe::{observe, Direction, Mark, Member};
use crate::status::ZoneLine;
use crate::strategy::{Outcome, Pass, Strategy};
use crate::surge_window::{self, Window};
use crate::{Action, UpgradeError};

/// The surge settings the operation runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub max_surge: usize,
    pub max_unavailable: usize,
}

impl Settings {
    /// `u`'s surge settings, defaults filled (U1, U2), checked.
    pub fn of(op: &str, u: &UpgradeSettings) -> Result<Settings, UpgradeError> {
        let count = |field: &'static str, value: i32| {
            usize::try_from(value).map_err(|_| UpgradeError::Negative {
                op: op.to_owned(),
                field,
                value,
            })
        };
        let max_surge = count("maxSurge", u.max_surge())?;
        let max_unavailable = count("maxUnavailable", u.max_unavailable())?;
        if max_surge == 0 && max_unavailable == 0 {
            return Err(UpgradeError::NothingAtOnce { op: op.to_owned() });
        }
        Ok(Settings {
            max_surge,
            max_unavailable,
        })
    }
}

pub(crate) struct Surge {
    pub settings: Settings,
}

impl Strategy for Surge {
    fn stage_name(&self, direction: Direction) -> &'static str {
        match direction {
            Direction::Forward => "surge-upgrade",
            Direction::Rollback => "surge-rollback",
        }
    }

    fn started(&self, pass: &Pass<'_>) -> bool {
        pass.inputs.nodes.iter().any(|n| {
            n.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::UPGRADING_ANNOTATION))
                .map(String::as_str)
                == Some(pass.op_name)
        })
    }

    fn run(&self, pass: &Pass<'_>) -> Outcome {
        let started = pass.previous.start_time.as_ref().map(|t| t.0);
        let may_start = pass.gate_open && !pass.cancelled;
        let inputs = pass.inputs;
        let members = observe(
            pass.pool_name,
            pass.op_name,
            inputs.instances,
            inputs.nodes,
            pass.sides,
            pass.direction,
            started,
        );
        let mut out = Outcome {
            cancel_honoured: true,
            ..Outcome::default()
        };
        // Marks this direction does not carry on (a rollback's on nodes
        // the forward upgrade had started): released, drain lifted.
        for m in members
            .iter()
            .filter(|m| m.mark == Mark::Ours && !m.candidate)
        {
            if m.upgrade_drain().is_some() {
                out.actions.push(Action::ReleaseDrain {
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
                    .find(|(z, t)| !surge_window::is_done(&in_zone(z), *t))
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
            q if q.allows(pass.now) => None,
            Quota::Exhausted { message, retry_at } => Some(match retry_at {
                Some(t) => format!("{message}; next attempt at {t}"),
                None => message.clone(),
            }),
            Quota::Available => None,
        };
        let mut all_done = true;
        for (zone, target) in &targets {
            let zone_members = in_zone(zone);
            let done = surge_window::is_done(&zone_members, *target);
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
                pool: pass.pool_name,
                zone,
                target: *target,
                max_surge: self.settings.max_surge,
                max_unavailable: self.settings.max_unavailable,
                may_start,
                quota_blocked: quota_blocked.clone(),
                fresh: pass.direction.sides(pass.sides).0,
                inputs,
                now: pass.now,
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
                Action::CreateNode(c) | Action::Recreate { new: c, .. } => Some(c.name.clone()),
                _ => None,
            }));
            line.state = OperationState::Running;
            line.blocking = step.blocking;
            if !may_start {
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
        if let Some(zone) = &current {
            out.held_zones.insert(
                zone.clone(),
                ZoneHold {
                    extra: self.settings.max_surge,
                },
            );
        }
        out.current = current;
        out.done = all_done && out.actions.is_empty();
        // Mid-upgrade: a node marked by us still there (being deleted
        // included), or marks being set or lifted now.
        out.in_flight = members.iter().any(|m| m.mark == Mark::Ours)
            || out.actions.iter().any(|a| {
                matches!(
                    a,
                    Action::MarkUpgrading { .. }
                        | Action::Unmark { .. }
                        | Action::ReleaseDrain { .. }
                )
            });
        out
    }
}
