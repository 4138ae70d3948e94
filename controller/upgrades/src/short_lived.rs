//! `SHORT_LIVED` (A5): the upgrade of flex-start and queued-provisioning
//! pools, whose nodes end by themselves when their run is over. Nothing is
//! drained up front: the old nodes run until they end (or are preempted),
//! and every node made meanwhile is on the new version and config, so the
//! pool moves over as its nodes turn over. A node still old
//! [`DEADLINE`] after the start is drained then (`NodeUpgrade`: budgets for
//! an hour, grace at most an hour) and deleted, as a surge node would be.
//!
//! Each zone keeps its size (`pool_targets`: the autoscaler's target, else
//! the reconciler's), old and new together; the zones are held so the
//! reconciler neither refills a zone with the old version nor cuts the new
//! nodes, and this pass makes the new nodes a zone is short of.

use std::collections::HashSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::operation::OperationState;
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::{pool_targets, ZoneHold};
use sluice_nodepools::{naming, CreateNode};

use crate::drain;
use crate::observe::{observe, Direction, Member};
use crate::status::ZoneLine;
use crate::strategy::{Outcome, Pass, Strategy};
use crate::Action;

/// A5: every node is on the new version and config within 7 days.
pub const DEADLINE: SignedDuration = SignedDuration::from_hours(7 * 24);

const REASON: EvictionReason = EvictionReason::NodeUpgrade;

pub(crate) struct ShortLived;

impl Strategy for ShortLived {
    fn stage_name(&self, direction: Direction) -> &'static str {
        match direction {
            Direction::Forward => "short-lived-upgrade",
            Direction::Rollback => "short-lived-rollback",
        }
    }

    fn started(&self, pass: &Pass<'_>) -> bool {
        members(pass).iter().any(|m| m.fresh)
    }

    /// The old nodes end by themselves; the deadline's drains are the
    /// only disruption and keep the 7-day promise past any window.
    fn gated_after_start(&self) -> bool {
        false
    }

    fn run(&self, pass: &Pass<'_>) -> Outcome {
        let members = members(pass);
        let mut out = Outcome {
            cancel_honoured: true,
            ..Outcome::default()
        };
        let start = pass
            .previous
            .start_time
            .as_ref()
            .map(|t| t.0)
            .or_else(|| {
                members
                    .iter()
                    .filter(|m| m.fresh)
                    .map(|m| m.instance.created_at)
                    .min()
            })
            .unwrap_or(pass.now);
        let deadline = start.checked_add(DEADLINE).unwrap_or(Timestamp::MAX);
        let (fresh_side, _) = pass.direction.sides(pass.sides);
        let mut taken: HashSet<String> = pass
            .inputs
            .instances
            .iter()
            .map(|i| i.name.clone())
            .collect();
        taken.extend(
            pass.inputs
                .nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone()),
        );
        let targets = pool_targets(pass.inputs.pool, &pass.inputs.config.cluster_locations).0;
        let mut wake = (pass.now < deadline).then_some(deadline);
        for (zone, target) in &targets {
            let here: Vec<&Member<'_>> = members
                .iter()
                .filter(|m| m.instance.zone == *zone)
                .collect();
            let new = here.iter().filter(|m| m.fresh).count();
            let old: Vec<&&Member<'_>> = here.iter().filter(|m| !m.fresh).collect();
            out.held_zones
                .insert(zone.clone(), ZoneHold { extra: here.len() });
            let mut line = ZoneLine {
                zone: zone.clone(),
                state: OperationState::Running,
                total: (*target).max(here.len()),
                upgraded: new,
                blocking: Vec::new(),
            };
            // The zone's size, on the new side: what ended is made anew.
            if !pass.cancelled {
                for _ in here.len()..*target {
                    if !pass.inputs.quota.allows(pass.now) {
                        line.blocking.push("new nodes wait for quota".to_owned());
                        break;
                    }
                    let salt = naming::salt(pass.now);
                    let Some(name) =
                        naming::fresh_names(pass.pool_name, zone, salt, 1, &mut taken).pop()
                    else {
                        break;
                    };
                    out.busy.insert(name.clone());
                    out.actions.push(Action::CreateNode(CreateNode {
                        pool: pass.pool_name.to_owned(),
                        zone: zone.clone(),
                        name,
                        version: fresh_side.version.clone(),
                        config: fresh_side.create_spec(),
                    }));
                }
            }
            for m in &old {
                let name = m.name().to_owned();
                let started = m
                    .drain
                    .as_ref()
                    .filter(|d| d.reason == Some(REASON))
                    .and_then(|d| d.started);
                match started {
                    None if pass.now >= deadline && !pass.cancelled => {
                        if m.registered {
                            out.actions.push(Action::Drain {
                                node: name.clone(),
                                reason: REASON,
                                started: pass.now,
                            });
                        } else {
                            out.actions
                                .push(Action::DeleteInstance { name: name.clone() });
                        }
                        out.busy.insert(name);
                    }
                    None => {}
                    Some(started) => {
                        match pass.inputs.drain_progress(&name, REASON, started, pass.now) {
                            drain::DrainProgress::Waiting { deadline, .. } => {
                                wake = crate::driver::earliest([wake, deadline]);
                                out.busy.insert(name);
                                out.in_flight = true;
                            }
                            _ => out.actions.push(Action::DeleteInstance { name }),
                        }
                    }
                }
            }
            if !old.is_empty() {
                line.blocking.push(if pass.now < deadline {
                    format!(
                        "{} old node(s) run until they end; any left are drained from {deadline}",
                        old.len()
                    )
                } else {
                    format!("{} old node(s) past the 7-day deadline, drained", old.len())
                });
            } else {
                line.state = OperationState::Done;
            }
            out.total += line.total;
            out.upgraded += new;
            out.zones.push(line);
        }
        let old: usize = members.iter().filter(|m| !m.fresh).count();
        out.done = old == 0 && out.actions.is_empty();
        out.wake_at = wake;
        out.headline = format!(
            "{} of {} node(s) on the new version and config; {old} old node(s) left",
            out.upgraded, out.total
        );
        out
    }
}

/// The pool's counted members, the new side being the direction's.
fn members<'a>(pass: &Pass<'a>) -> Vec<Member<'a>> {
    observe(
        pass.pool_name,
        pass.op_name,
        pass.inputs.instances,
        pass.inputs.nodes,
        pass.sides,
        pass.direction,
        pass.previous.start_time.as_ref().map(|t| t.0),
    )
    .into_iter()
    .filter(|m| m.counted)
    .collect()
}
