//! Scale-down (C4–C7, C9): which under-used nodes go.
//!
//! Each node of an autoscaled pool is checked in upstream's order (being
//! removed, the `scale-down-disabled` annotation, being upgraded, the
//! upgrade's rules, the pool's minimum, utilisation); the candidates are
//! simulated, empty ones first, on a copy of the scheduler's view: each
//! pod judged by the drain rules, the others placed by the scheduler with
//! the candidate cordoned and tainted, placements kept for the next
//! candidate. A node found removable loop after loop for the profile's
//! unneeded time goes, within the limits: never below a minimum, never the
//! last node of the cluster, ten at a time of which one with pods, and not
//! within the delays after a scale-up or a failed removal.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Taint;
use serde::Serialize;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Pod;
use sluice_scheduler::{pod_key, schedule, Cluster, Decision};

use crate::blockers::{self, BlockingPod, Drain, Rules};
use crate::budgets::Budgets;
use crate::error::InputError;
use crate::events::{self, Event};
use crate::options::MAX_SOFT_TAINTS_PER_LOOP;
use crate::snapshot::{Index, Snapshot, DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT};
use crate::state::{Deletion, State};
use crate::utilization::{self, Utilization};

/// Why a node stays (upstream's UnremovableReason names, and Sluice's own
/// for upgrades and the last node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason")]
pub enum Unremovable {
    ScaleDownDisabledAnnotation,
    NotAutoscaled,
    /// Being upgraded (U7).
    Upgrading,
    /// The pool's upgrade publishes that this side may not shrink now.
    UpgradeForbidsScaleDown,
    CurrentlyBeingDeleted,
    NotUnderutilized,
    NodeGroupMinSizeReached,
    NoPlaceToMovePods {
        pod: String,
        why: String,
    },
    BlockedByPod(BlockingPod),
    NotUnneededLongEnough,
    NotUnreadyLongEnough,
    AtomicScaleDownFailed,
    /// It is the cluster's last node (C7).
    LastNodeInCluster,
    /// Scale-down waits after a scale-up or a failed removal.
    ScaleDownInCooldown,
    /// Removable, waiting for a removal slot (ten at once, one with pods).
    WaitingForRemovalSlot,
    UnexpectedError {
        message: String,
    },
}

impl Unremovable {
    /// GKE's visibility id, where it has one.
    pub fn message_id(&self) -> Option<&'static str> {
        Some(match self {
            Unremovable::ScaleDownDisabledAnnotation => {
                "no.scale.down.node.scale.down.disabled.annotation"
            }
            Unremovable::NodeGroupMinSizeReached => {
                "no.scale.down.node.node.group.min.size.reached"
            }
            Unremovable::NoPlaceToMovePods { .. } => "no.scale.down.node.no.place.to.move.pods",
            Unremovable::BlockedByPod(b) => b.reason.message_id(),
            Unremovable::UnexpectedError { .. } => "no.scale.down.node.unexpected.error",
            _ => return None,
        })
    }
}

/// What is decided about one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutcome {
    pub pool: Option<String>,
    pub utilization: Option<Utilization>,
    pub threshold: f64,
    /// Since when it has been removable.
    pub unneeded_since: Option<Timestamp>,
    /// How much longer it must stay removable before it goes.
    pub unneeded_left: Option<SignedDuration>,
    /// `None`: being removed now.
    pub kept: Option<Unremovable>,
}

/// A node to remove.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removal {
    pub node: String,
    pub pool: String,
    pub zone: String,
    /// No pod needs a new place: no drain.
    pub empty: bool,
    /// Pods to evict (`namespace/name`), grace capped at 10 minutes.
    pub evict: Vec<String>,
    pub utilization: Utilization,
}

/// A taint to put on or take off a node.
#[derive(Debug, Clone, PartialEq)]
pub enum TaintChange {
    /// With `cordon`, also set `spec.unschedulable`.
    Add {
        node: String,
        taint: Taint,
        cordon: bool,
    },
    /// With `uncordon`, also clear `spec.unschedulable`.
    Remove {
        node: String,
        key: String,
        uncordon: bool,
    },
}

/// Upstream's ScaleDownResult.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleDownResult {
    NoCandidates,
    NoNodeDeleted,
    NodeDeleteStarted,
    InCooldown,
}

pub(crate) struct ScaleDown {
    pub result: ScaleDownResult,
    pub removals: Vec<Removal>,
    pub nodes: BTreeMap<String, NodeOutcome>,
    pub taints: Vec<TaintChange>,
    pub events: Vec<Event>,
    pub errors: Vec<InputError>,
}

struct Candidate {
    node: usize,
    util: Utilization,
    empty: bool,
    was_unneeded: bool,
}

/// A copy of `node` that takes no new pod, standing in for the candidate so
/// spread domains keep counting it.
fn ghost(node: &sluice_model::k8s::Node) -> sluice_model::k8s::Node {
    let mut n = node.clone();
    let spec = n.spec.get_or_insert_with(Default::default);
    spec.unschedulable = Some(true);
    spec.taints.get_or_insert_with(Vec::new).push(Taint {
        key: TO_BE_DELETED_TAINT.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    });
    n
}

/// Places `moving` elsewhere; on failure puts everything back. The pods are
/// already detached from `node`, which stands as a ghost.
fn relocate(cluster: &mut Cluster, moving: &[&Pod], node: &str) -> Result<(), (String, String)> {
    for p in moving {
        match schedule(cluster, p) {
            Decision::Bind { node: to } if to != node => {}
            other => {
                for q in moving {
                    let _ = cluster.assume(q, node);
                }
                let why = match other {
                    Decision::Unschedulable { message, .. } => message,
                    // Only a pod tolerating the removal taint lands back
                    // on the node; it would have to move again.
                    Decision::Bind { .. } => "it fits nowhere but on this node".into(),
                };
                return Err((pod_key(p), why));
            }
        }
    }
    Ok(())
}

pub(crate) fn run(
    idx: &Index<'_>,
    snap: &Snapshot<'_>,
    cluster: &mut Cluster,
    state: &mut State,
    now: Timestamp,
    scaled_up_now: bool,
) -> ScaleDown {
    let pods = snap.pods;
    let opts = snap.options;
    let thresholds = crate::profile::thresholds(snap.profile);
    let mut out = ScaleDown {
        result: ScaleDownResult::NoCandidates,
        removals: Vec::new(),
        nodes: BTreeMap::new(),
        taints: Vec::new(),
        events: Vec::new(),
        errors: Vec::new(),
    };
    let (mut budgets, budget_errors) = Budgets::build(snap.pdbs, pods);
    out.errors.extend(budget_errors);
    // Removals in flight: done when the node is gone.
    state
        .deleting
        .retain(|name, _| idx.node_by_name.contains_key(name.as_str()));
    let in_flight = state.deleting.len();
    let in_flight_drains = state.deleting.values().filter(|d| !d.empty).count();
    let cooldown = scaled_up_now
        || state
            .last_scale_up
            .is_some_and(|t| now < t + opts.scale_down_delay_after_add)
        || state
            .last_scale_down_failure
            .is_some_and(|t| now < t + opts.scale_down_delay_after_failure);
    let unneeded_time = opts.unneeded_time.unwrap_or(thresholds.unneeded_time);
    let unready_time = opts.unneeded_time.unwrap_or(thresholds.unready_time);
    let keep = |out: &mut ScaleDown,
                n: usize,
                pool: Option<String>,
                util: Option<Utilization>,
                why: Unremovable| {
        out.nodes.insert(
            idx.nodes[n].name.to_owned(),
            NodeOutcome {
                pool,
                utilization: util,
                threshold: thresholds.utilization,
                unneeded_since: None,
                unneeded_left: None,
                kept: Some(why),
            },
        );
    };
    let mut candidates = Vec::new();
    for (n, facts) in idx.nodes.iter().enumerate() {
        let pool_name = facts.pool.map(|p| idx.pools[p].name.clone());
        if state.deleting.contains_key(facts.name) {
            keep(
                &mut out,
                n,
                pool_name,
                None,
                Unremovable::CurrentlyBeingDeleted,
            );
            continue;
        }
        if facts.to_be_deleted {
            // Left by a removal that failed, or by a run before this
            // process started: give the node back. Any other holder of
            // the taint put it there on purpose; the node stays out.
            if state.released.remove(facts.name) || !state.cleaned_up {
                out.taints.push(TaintChange::Remove {
                    node: facts.name.to_owned(),
                    key: TO_BE_DELETED_TAINT.into(),
                    uncordon: true,
                });
            }
            keep(
                &mut out,
                n,
                pool_name,
                None,
                Unremovable::CurrentlyBeingDeleted,
            );
            continue;
        }
        if facts.scale_down_disabled {
            keep(
                &mut out,
                n,
                pool_name,
                None,
                Unremovable::ScaleDownDisabledAnnotation,
            );
            continue;
        }
        let (Some(p), Some(z)) = (facts.pool, facts.zone) else {
            keep(&mut out, n, pool_name, None, Unremovable::NotAutoscaled);
            continue;
        };
        let pool = &idx.pools[p];
        if !pool.enabled {
            keep(&mut out, n, pool_name, None, Unremovable::NotAutoscaled);
            continue;
        }
        if facts.upgrading {
            keep(&mut out, n, pool_name, None, Unremovable::Upgrading);
            continue;
        }
        let rules = pool.upgrade.rules(pool.upgrade.side_of(facts.name));
        if !rules.scale_down {
            keep(
                &mut out,
                n,
                pool_name,
                None,
                Unremovable::UpgradeForbidsScaleDown,
            );
            continue;
        }
        if rules.respect_minimum && !pool.limits.may_remove(&pool.sizes, z) {
            keep(
                &mut out,
                n,
                pool_name,
                None,
                Unremovable::NodeGroupMinSizeReached,
            );
            continue;
        }
        let node_pods: Vec<&Pod> = facts.pods.iter().map(|&i| &pods[i]).collect();
        let util = match utilization::of(facts.node, node_pods.iter().copied()) {
            Ok(u) => u,
            Err(e) => {
                let message = e.to_string();
                out.errors.push(e);
                keep(
                    &mut out,
                    n,
                    pool_name,
                    None,
                    Unremovable::UnexpectedError { message },
                );
                continue;
            }
        };
        if util.max() > thresholds.utilization {
            keep(
                &mut out,
                n,
                pool_name,
                Some(util),
                Unremovable::NotUnderutilized,
            );
            continue;
        }
        let rules = Rules {
            kind: pool.extras.kind,
            spot: pool.spot(),
            now,
            local_storage_blocks: opts.local_storage_blocks,
            budgets: &budgets,
        };
        let empty = node_pods
            .iter()
            .all(|p| blockers::judge(p, &rules) == Drain::Stays);
        candidates.push(Candidate {
            node: n,
            util,
            empty,
            was_unneeded: state.unneeded_since.contains_key(facts.name),
        });
    }
    // Empty nodes first, then those found unneeded before, emptiest first.
    candidates.sort_by(|a, b| {
        (!a.empty, !a.was_unneeded)
            .cmp(&(!b.empty, !b.was_unneeded))
            .then(a.util.max().total_cmp(&b.util.max()))
            .then(idx.nodes[a.node].name.cmp(idx.nodes[b.node].name))
    });
    let mut removable: Vec<(usize, Utilization, bool, Vec<String>)> = Vec::new();
    for c in &candidates {
        let facts = &idx.nodes[c.node];
        let pool = facts.pool.map(|p| &idx.pools[p]);
        let pool_name = pool.map(|p| p.name.clone());
        let Some(pool) = pool else { continue };
        let rules = Rules {
            kind: pool.extras.kind,
            spot: pool.spot(),
            now,
            local_storage_blocks: opts.local_storage_blocks,
            budgets: &budgets,
        };
        let mut moving: Vec<&Pod> = Vec::new();
        let mut blocked = None;
        for &i in &facts.pods {
            match blockers::judge(&pods[i], &rules) {
                Drain::Stays => {}
                Drain::Moves => moving.push(&pods[i]),
                Drain::Blocks(b) => {
                    blocked = Some(b);
                    break;
                }
            }
        }
        if let Some(b) = blocked {
            keep(
                &mut out,
                c.node,
                pool_name,
                Some(c.util),
                Unremovable::BlockedByPod(b),
            );
            continue;
        }
        if let Err(name) = budgets.allows(moving.iter().copied()) {
            let pod = moving.first().map(|p| pod_key(p)).unwrap_or_default();
            let b = BlockingPod {
                pod,
                reason: blockers::BlockingReason::NotEnoughPdb,
                budget: Some(name),
                until: None,
            };
            keep(
                &mut out,
                c.node,
                pool_name,
                Some(c.util),
                Unremovable::BlockedByPod(b),
            );
            continue;
        }
        for p in &moving {
            let ns = p.metadata.namespace.as_deref().unwrap_or("default");
            cluster.remove_pod(ns, p.metadata.name.as_deref().unwrap_or_default());
        }
        if cluster.upsert_node(&ghost(facts.node)).is_err() {
            continue;
        }
        match relocate(cluster, &moving, facts.name) {
            Ok(()) => {
                budgets.spend(moving.iter().copied());
                let evict = moving.iter().map(|p| pod_key(p)).collect();
                removable.push((c.node, c.util, c.empty, evict));
            }
            Err((pod, why)) => {
                let _ = cluster.upsert_node(facts.node);
                keep(
                    &mut out,
                    c.node,
                    pool_name,
                    Some(c.util),
                    Unremovable::NoPlaceToMovePods { pod, why },
                );
            }
        }
    }
    // Unneeded since: kept only while found removable loop after loop.
    let previous = std::mem::take(&mut state.unneeded_since);
    for (n, _, _, _) in &removable {
        let name = idx.nodes[*n].name;
        let since = previous.get(name).copied().unwrap_or(now);
        state.unneeded_since.insert(name.to_owned(), since);
    }
    if !removable.is_empty() {
        out.result = ScaleDownResult::NoNodeDeleted;
    }
    let mut sizes: Vec<Vec<i32>> = idx.pools.iter().map(|p| p.sizes.clone()).collect();
    let mut left_in_cluster = idx.node_count().saturating_sub(in_flight);
    let (mut started, mut drains) = (in_flight, in_flight_drains);
    let mut chosen: HashSet<usize> = HashSet::new();
    let mut verdicts: Vec<(
        usize,
        Utilization,
        Option<Unremovable>,
        Timestamp,
        SignedDuration,
    )> = Vec::new();
    // Multi-host TPU slices go whole or not at all (C10).
    let atomic_ok = |p: usize, z: usize| {
        let reg = &idx.pools[p].registered[z];
        reg.iter()
            .all(|n| removable.iter().any(|(r, _, _, _)| r == n))
    };
    for (n, util, empty, _) in &removable {
        let facts = &idx.nodes[*n];
        let (Some(p), Some(z)) = (facts.pool, facts.zone) else {
            continue;
        };
        let pool = &idx.pools[p];
        let since = state.unneeded_since.get(facts.name).copied().unwrap_or(now);
        let wait = if facts.ready {
            unneeded_time
        } else {
            unready_time
        };
        let left = (since + wait).duration_since(now);
        let rules = pool.upgrade.rules(pool.upgrade.side_of(facts.name));
        let atomic = pool.atomic.is_some();
        let why = if left > SignedDuration::ZERO {
            Some(if facts.ready {
                Unremovable::NotUnneededLongEnough
            } else {
                Unremovable::NotUnreadyLongEnough
            })
        } else if cooldown {
            Some(Unremovable::ScaleDownInCooldown)
        } else if atomic && !atomic_ok(p, z) {
            Some(Unremovable::AtomicScaleDownFailed)
        } else if !atomic && rules.respect_minimum && !pool.limits.may_remove(&sizes[p], z) {
            Some(Unremovable::NodeGroupMinSizeReached)
        } else if left_in_cluster <= 1 {
            Some(Unremovable::LastNodeInCluster)
        } else if !atomic
            && (started >= opts.max_scale_down_parallelism
                || (!*empty && drains >= opts.max_drain_parallelism))
        {
            Some(Unremovable::WaitingForRemovalSlot)
        } else {
            None
        };
        if why.is_none() {
            sizes[p][z] -= 1;
            left_in_cluster -= 1;
            started += 1;
            if !*empty {
                drains += 1;
            }
            chosen.insert(*n);
        }
        verdicts.push((*n, *util, why, since, left.max(SignedDuration::ZERO)));
    }
    // An atomic slice that lost a node to a later check keeps them all.
    for v in &mut verdicts {
        let facts = &idx.nodes[v.0];
        if let (Some(p), Some(z)) = (facts.pool, facts.zone) {
            if idx.pools[p].atomic.is_some()
                && v.2.is_none()
                && !idx.pools[p].registered[z]
                    .iter()
                    .all(|m| chosen.contains(m))
            {
                v.2 = Some(Unremovable::AtomicScaleDownFailed);
                chosen.remove(&v.0);
            }
        }
    }
    for (n, util, why, since, left) in verdicts {
        let facts = &idx.nodes[n];
        let pool = facts.pool.map(|p| &idx.pools[p]);
        out.nodes.insert(
            facts.name.to_owned(),
            NodeOutcome {
                pool: pool.map(|p| p.name.clone()),
                utilization: Some(util),
                threshold: thresholds.utilization,
                unneeded_since: Some(since),
                unneeded_left: Some(left),
                kept: why.clone(),
            },
        );
        if why.is_some() {
            continue;
        }
        let Some(pool) = pool else { continue };
        let Some((_, _, empty, evict)) = removable.iter().find(|r| r.0 == n) else {
            continue;
        };
        let zone = facts
            .zone
            .map(|z| pool.zones[z].clone())
            .unwrap_or_default();
        out.removals.push(Removal {
            node: facts.name.to_owned(),
            pool: pool.name.clone(),
            zone,
            empty: *empty,
            evict: evict.clone(),
            utilization: util,
        });
        out.taints.push(TaintChange::Add {
            node: facts.name.to_owned(),
            taint: Taint {
                key: TO_BE_DELETED_TAINT.into(),
                value: Some(now.as_second().to_string()),
                effect: "NoSchedule".into(),
                time_added: None,
            },
            cordon: true,
        });
        out.events.push(events::node_marked(facts.name));
        out.events.push(if *empty {
            events::removing_empty(facts.name)
        } else {
            events::removing_node(facts.name, util.cpu, util.memory, evict)
        });
        state.deleting.insert(
            facts.name.to_owned(),
            Deletion {
                pool: pool.name.clone(),
                started_at: now,
                empty: *empty,
            },
        );
        state.unneeded_since.remove(facts.name);
    }
    if !out.removals.is_empty() {
        out.result = ScaleDownResult::NodeDeleteStarted;
    } else if cooldown {
        out.result = ScaleDownResult::InCooldown;
    }
    soft_taints(idx, state, &chosen, &mut out, now);
    out
}

/// Unneeded nodes get the soft taint so the scheduler prefers others;
/// nodes needed again lose it. A few writes per loop, as upstream.
fn soft_taints(
    idx: &Index<'_>,
    state: &State,
    chosen: &HashSet<usize>,
    out: &mut ScaleDown,
    now: Timestamp,
) {
    let mut budget = MAX_SOFT_TAINTS_PER_LOOP;
    for (n, facts) in idx.nodes.iter().enumerate() {
        if budget == 0 {
            break;
        }
        let unneeded = state.unneeded_since.contains_key(facts.name) && !chosen.contains(&n);
        if unneeded && !facts.deletion_candidate {
            out.taints.push(TaintChange::Add {
                node: facts.name.to_owned(),
                taint: Taint {
                    key: DELETION_CANDIDATE_TAINT.into(),
                    value: Some(now.as_second().to_string()),
                    effect: "PreferNoSchedule".into(),
                    time_added: None,
                },
                cordon: false,
            });
            budget -= 1;
        } else if !unneeded && facts.deletion_candidate && !chosen.contains(&n) {
            out.taints.push(TaintChange::Remove {
                node: facts.name.to_owned(),
                key: DELETION_CANDIDATE_TAINT.into(),
                uncordon: false,
            });
            budget -= 1;
        }
    }
}
