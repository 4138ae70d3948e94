//! Each instance of the pool read against its Node and the two sides of
//! the upgrade: is it counted, on the side being made, to be replaced,
//! marked, draining, available?

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::reconcile::is_node_ready;
use sluice_nodepools::{Instance, InstanceState};

use crate::drain::{drain_mark, DrainMark};
use crate::target::{self, Side, Sides};
use crate::UPGRADING_ANNOTATION;

/// Which way the nodes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the pool's side to the operation's.
    Forward,
    /// The nodes on the operation's side back to the pool's (U6).
    Rollback,
}

impl Direction {
    /// The side nodes are made on, and the side nodes are taken from.
    pub fn sides(self, sides: &Sides) -> (&Side, &Side) {
        match self {
            Direction::Forward => (&sides.to, &sides.from),
            Direction::Rollback => (&sides.from, &sides.to),
        }
    }
}

/// Who marked a node as being upgraded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mark {
    None,
    Ours,
    /// Another operation (named).
    Other(String),
}

/// One instance as this pass sees it.
#[derive(Debug, Clone)]
pub(crate) struct Member<'a> {
    pub instance: &'a Instance,
    /// Counts towards its zone: not being deleted, not failed.
    pub counted: bool,
    /// On the side being made.
    pub fresh: bool,
    /// To be replaced by this direction.
    pub candidate: bool,
    pub mark: Mark,
    pub drain: Option<DrainMark>,
    pub ready: bool,
    /// Its Node exists (only a registered node can be marked).
    pub registered: bool,
    /// `spec.unschedulable`, by anyone.
    pub cordoned: bool,
    /// When the controller cordoned it ([`crate::CORDONED_AT_ANNOTATION`]),
    /// which autoscaled blue-green's protection counts from (A3).
    pub cordoned_at: Option<Timestamp>,
}

impl Member<'_> {
    pub fn name(&self) -> &str {
        &self.instance.name
    }

    /// Serving: counted, Ready, schedulable, not draining.
    pub fn available(&self) -> bool {
        self.counted && self.ready && !self.cordoned && self.drain.is_none()
    }

    /// Draining for a node upgrade (ours when marked by us).
    pub fn upgrade_drain(&self) -> Option<&DrainMark> {
        self.drain
            .as_ref()
            .filter(|d| d.reason == Some(EvictionReason::NodeUpgrade))
    }
}

/// Read every instance of `pool_name`.
pub(crate) fn observe<'a>(
    pool_name: &str,
    op_name: &str,
    instances: &'a [Instance],
    nodes: &'a [Node],
    sides: &Sides,
    direction: Direction,
    started: Option<Timestamp>,
) -> Vec<Member<'a>> {
    let by_name: HashMap<&str, &Node> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref().map(|name| (name, n)))
        .collect();
    let (fresh_side, old_side) = direction.sides(sides);
    instances
        .iter()
        .filter(|i| i.pool == pool_name)
        .map(|instance| {
            let node = by_name.get(instance.name.as_str()).copied();
            let made_by_us = started.is_some_and(|t| instance.created_at >= t);
            let seen = target::read(instance, node, sides, fresh_side, made_by_us);
            let fresh = fresh_side.holds(&seen);
            let candidate = !fresh
                && match direction {
                    Direction::Forward => true,
                    // Only the nodes this operation upgraded go back (U6:
                    // nodes whose upgrade did not start are not affected).
                    Direction::Rollback => old_side.holds(&seen),
                };
            let mark = match node
                .and_then(|n| n.metadata.annotations.as_ref())
                .and_then(|a| a.get(UPGRADING_ANNOTATION))
            {
                None => Mark::None,
                Some(v) if v == op_name => Mark::Ours,
                Some(v) => Mark::Other(v.clone()),
            };
            Member {
                instance,
                counted: matches!(
                    instance.state,
                    InstanceState::Creating | InstanceState::Running
                ),
                fresh,
                candidate,
                mark,
                drain: node.and_then(drain_mark),
                ready: node.is_some_and(is_node_ready),
                registered: node.is_some(),
                cordoned: node
                    .and_then(|n| n.spec.as_ref())
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false),
                cordoned_at: node
                    .and_then(|n| n.metadata.annotations.as_ref())
                    .and_then(|a| a.get(crate::CORDONED_AT_ANNOTATION))
                    .and_then(|t| t.parse().ok()),
            }
        })
        .collect()
}
