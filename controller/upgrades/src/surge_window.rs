//! The surge window over the zone being upgraded (U1–U4): a count-based
//! rolling update, like Cluster API's MachineDeployment, in which a node's
//! upgrade starts when it is marked.
//!
//! With target `T`, `maxSurge` `S` and `maxUnavailable` `U`:
//! - the zone holds between `T − U` and `T + S` counted instances: a
//!   drained node is deleted only if that leaves at least `T − U`, and
//!   nodes are created only up to `T + S`;
//! - at most `S + U` of the nodes being replaced are marked at once, and
//!   serving nodes are drained only while at least `T − U` others serve
//!   (so with `U = 0` a node is drained once its surge node is Ready);
//! - a node is marked when a surge node can be made for it (room below
//!   `T + S` and quota, U4) or when it can be drained at once (`U`), and
//!   only while new upgrades may start (gate open, not cancelled); marked
//!   nodes always finish (U6, M3);
//! - the zone wants `T` minus the unmarked nodes to replace (and nodes
//!   left alone) of the new side: one per marked or already deleted node.

use std::collections::HashSet;

use k8s_openapi::jiff::Timestamp;
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::{naming, CreateNode};

use crate::drain::DrainProgress;
use crate::inputs::Inputs;
use crate::observe::{Mark, Member};
use crate::target::Side;
use crate::Action;

/// What the zone's pass needs besides its members.
pub(crate) struct Window<'a> {
    pub pool: &'a str,
    pub zone: &'a str,
    pub target: usize,
    pub max_surge: usize,
    pub max_unavailable: usize,
    /// New node upgrades may start (gate open, not cancelled).
    pub may_start: bool,
    /// `Some(why)` when quota holds creations back.
    pub quota_blocked: Option<String>,
    pub fresh: &'a Side,
    /// The pods left on nodes, and whether the load balancers let a
    /// drained node go.
    pub inputs: &'a Inputs<'a>,
    pub now: Timestamp,
}

/// What the zone's pass decided.
#[derive(Debug, Default)]
pub(crate) struct Step {
    pub actions: Vec<Action>,
    pub blocking: Vec<String>,
    /// When something here changes by itself (a drain's deadline).
    pub wake_at: Option<Timestamp>,
    /// Nodes being drained for the upgrade after this pass.
    pub draining: Vec<String>,
}

/// Serving nodes and unready ones first go last / first: a node already
/// unavailable costs no availability to take down.
fn order(members: &mut [&Member<'_>]) {
    members.sort_by(|a, b| (a.available(), a.name()).cmp(&(b.available(), b.name())));
}

impl Window<'_> {
    pub fn step(&self, members: &[Member<'_>], taken: &mut HashSet<String>) -> Step {
        let mut step = Step::default();
        let counted: Vec<&Member<'_>> = members.iter().filter(|m| m.counted).collect();
        let mut total = counted.len();
        let mut fresh = counted.iter().filter(|m| m.fresh).count();
        let mut marked: Vec<&Member<'_>> = counted
            .iter()
            .copied()
            .filter(|m| m.candidate && m.mark == Mark::Ours)
            .collect();
        order(&mut marked);
        let mut unmarked: Vec<&Member<'_>> = counted
            .iter()
            .copied()
            .filter(|m| m.candidate && m.registered && m.mark == Mark::None && m.drain.is_none())
            .collect();
        order(&mut unmarked);
        // Nodes neither made nor being replaced here: left alone, they
        // keep their place.
        let kept = total - fresh - marked.len() - unmarked.len();
        for m in counted.iter().filter(|m| m.candidate) {
            match (&m.mark, &m.drain) {
                (Mark::Other(op), _) => step.blocking.push(format!(
                    "node {}: being upgraded by operation {op}",
                    m.name()
                )),
                (Mark::None, Some(d)) => step.blocking.push(format!(
                    "node {}: being drained by someone else ({})",
                    m.name(),
                    d.reason.map_or("unknown reason", |r| r.as_str())
                )),
                _ => {}
            }
        }
        let floor = self.target.saturating_sub(self.max_unavailable);
        let ceiling = self.target.saturating_add(self.max_surge);
        let mut available = counted.iter().filter(|m| m.available()).count();
        let wanted = |unmarked_left: usize| self.target.saturating_sub(unmarked_left + kept);

        // Drains under way: the node goes once its drain is over.
        let mut in_flight = 0usize;
        let mut undrained: Vec<&Member<'_>> = Vec::new();
        for m in &marked {
            let Some(mark) = m.upgrade_drain() else {
                undrained.push(m);
                continue;
            };
            let started = match mark.started {
                Some(t) => t,
                None => {
                    step.actions.push(Action::Drain {
                        node: m.name().to_owned(),
                        reason: EvictionReason::NodeUpgrade,
                        started: self.now,
                    });
                    self.now
                }
            };
            let pods = self.inputs.pods_on(m.name());
            let progress = self.inputs.drain_progress(
                m.name(),
                EvictionReason::NodeUpgrade,
                started,
                self.now,
            );
            if let DrainProgress::Waiting { left, deadline } = &progress {
                in_flight += 1;
                step.draining.push(m.name().to_owned());
                step.blocking.push(if *left == 0 {
                    format!(
                        "node {}: drained; waits for the load balancers to stop sending it connections",
                        m.name()
                    )
                } else {
                    let by = deadline.map_or(String::new(), |d| format!(", forced at {d}"));
                    format!("node {}: draining, {left} pod(s) left{by}", m.name())
                });
                step.blocking.extend(pods.iter().filter_map(|p| {
                    p.held_by
                        .as_ref()
                        .map(|why| format!("pod {} on node {}: {why}", p.name, m.name()))
                }));
                step.wake_at = min(step.wake_at, *deadline);
                continue;
            }
            let after = total - 1;
            if after < floor {
                in_flight += 1;
                step.draining.push(m.name().to_owned());
                step.blocking.push(format!(
                    "node {}: drained; waits for its upgraded node before it is deleted \
                     (maxUnavailable {})",
                    m.name(),
                    self.max_unavailable
                ));
                continue;
            }
            if after < self.target && fresh < wanted(unmarked.len()) {
                let new = self.create(taken);
                step.actions.push(Action::Recreate {
                    old: m.name().to_owned(),
                    new,
                });
                fresh += 1;
            } else {
                step.actions.push(Action::DeleteInstance {
                    name: m.name().to_owned(),
                });
                total = after;
            }
        }
        in_flight += undrained.len();

        // Start node upgrades.
        let parallel = self.max_surge.saturating_add(self.max_unavailable);
        let quota_ok = self.quota_blocked.is_none();
        let owed = wanted(unmarked.len()).saturating_sub(fresh);
        let mut creatable = if quota_ok {
            owed.min(ceiling.saturating_sub(total))
        } else {
            0
        };
        let mut spare = available.saturating_sub(floor);
        let mut newly: Vec<&Member<'_>> = Vec::new();
        if self.may_start {
            while in_flight < parallel {
                let Some(next) = unmarked.first().copied() else {
                    break;
                };
                // A surge node can be made for it; or it can be drained at
                // once: already out of service, or one serving node to spare.
                let surge = quota_ok && total + creatable < ceiling;
                let spared = !surge && next.available() && spare > 0;
                if surge {
                    creatable += 1;
                } else if spared {
                    spare -= 1;
                } else if next.available() {
                    let why = match &self.quota_blocked {
                        Some(q) if self.max_surge > 0 => format!(
                            "no capacity for a surge node ({q}): the next node's upgrade waits for it"
                        ),
                        _ => "waiting for upgraded nodes to be Ready before the next node starts"
                            .to_owned(),
                    };
                    step.blocking.push(why);
                    break;
                }
                unmarked.remove(0);
                step.actions.push(Action::MarkUpgrading {
                    node: next.name().to_owned(),
                });
                newly.push(next);
                in_flight += 1;
            }
        }

        // Creations: one per marked or already deleted node, within T + S.
        let owed = wanted(unmarked.len()).saturating_sub(fresh);
        let room = ceiling.saturating_sub(total);
        let count = if quota_ok { owed.min(room) } else { 0 };
        if owed > 0 && !quota_ok {
            if let Some(q) = &self.quota_blocked {
                step.blocking
                    .push(format!("creating upgraded nodes waits for quota: {q}"));
            }
        }
        for _ in 0..count {
            let new = self.create(taken);
            step.actions.push(Action::CreateNode(new));
        }

        // Drains: unavailable nodes at no cost, serving ones while T − U
        // others serve.
        let mut to_drain: Vec<&Member<'_>> = undrained.into_iter().chain(newly).collect();
        order(&mut to_drain);
        let mut waiting = 0usize;
        for m in to_drain {
            let serving = m.available();
            if serving && available.saturating_sub(1) < floor {
                waiting += 1;
                continue;
            }
            if serving {
                available -= 1;
            }
            step.actions.push(Action::Drain {
                node: m.name().to_owned(),
                reason: EvictionReason::NodeUpgrade,
                started: self.now,
            });
            step.draining.push(m.name().to_owned());
        }
        if waiting > 0 {
            step.blocking.push(format!(
                "{waiting} node(s) wait for upgraded nodes to be Ready before they are drained"
            ));
        }
        step
    }

    fn create(&self, taken: &mut HashSet<String>) -> CreateNode {
        let salt = naming::salt(self.now);
        let name = naming::fresh_names(self.pool, self.zone, salt, 1, taken)
            .pop()
            .unwrap_or_else(|| naming::node_name(self.pool, self.zone, salt, u32::MAX));
        CreateNode {
            pool: self.pool.to_owned(),
            zone: self.zone.to_owned(),
            name,
            version: self.fresh.version.clone(),
            config: self.fresh.create_spec(),
        }
    }
}

fn min(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The zone has nothing left to replace and no node marked by us, and
/// every instance has registered: until its Node shows its config label,
/// a new instance's config is a guess (a surge node made before a
/// rollback looks like one of the rollback's own). And the zone is whole
/// again: a node recreated whose new instance was refused (quota) is still
/// owed, or the upgrade would end one node short.
pub(crate) fn is_done(members: &[Member<'_>], target: usize) -> bool {
    members
        .iter()
        .all(|m| !(m.counted && (m.candidate || !m.registered)) && m.mark != Mark::Ours)
        && members.iter().filter(|m| m.counted).count() >= target
}
