//! Scale-up (C1–C3, C6–C8, C10, C11): which pools grow, in which zones and
//! by how much, for the pods the scheduler could not place.
//!
//! Upstream's order: expendable pods (priority below −10) are left out;
//! pods that fit on existing nodes or on nodes already asked for are left
//! to the scheduler; the rest are grouped; each pool zone that may grow is
//! tried with a template node (the group's first pod checked by the
//! scheduler's filters) and packed; the expanders choose; `BALANCED` pools
//! spread the chosen count over their zones. Rounds repeat with the pods
//! left over, so pods needing different pools are all asked for at once.

use std::collections::BTreeMap;

use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Pod};
use sluice_model::node_pool::LocationPolicy;
use sluice_scheduler::resources::pod_demand;
use sluice_scheduler::{filter_node, pod_key, queue_order, schedule, Cluster, Decision};

use crate::backoff::Backoff;
use crate::balance;
use crate::binpack::{self, Estimate};
use crate::equivalence::{self, Group};
use crate::error::InputError;
use crate::events::{self, Event, ScaleUpInfo};
use crate::expander::{self, Context, ExpansionOption};
use crate::options::{Options, EXPENDABLE_PRIORITY_CUTOFF};
use crate::price::default_node_price;
use crate::snapshot::{priority, Index, PoolView, Snapshot};
use crate::template::{daemon_set_copy, daemon_set_exemplars, template_node};

/// Upstream's skipped-group reasons, as the NotTriggerScaleUp message
/// counts them.
pub const REASON_NOT_READY: &str = "not ready for scale-up";
pub const REASON_BACKOFF: &str = "in backoff after failed scale-up";
pub const REASON_MAX_SIZE: &str = "max node group size reached";
pub const REASON_ATOMIC_OVER_LIMIT: &str = "atomic scale-up exceeds cluster node count limit";
pub const REASON_MAX_TOTAL: &str = "max total nodes in cluster reached";
/// Sluice's own: the pool's upgrade publishes that it may not grow now.
pub const REASON_UPGRADE: &str = "scale-up forbidden by the node pool's upgrade";
/// The GKE error id when no pod CIDR is left for a new node (C11).
pub const IP_SPACE_EXHAUSTED: &str = "IP_SPACE_EXHAUSTED";

/// Upstream's ScaleUpResult.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleUpResult {
    Successful,
    Error,
    NoOptionsAvailable,
    NotNeeded,
    LimitedByMaxNodesTotal,
}

/// A zone's new size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increase {
    pub pool: String,
    pub zone: String,
    pub from: i32,
    pub to: i32,
    pub max: i32,
}

impl Increase {
    pub(crate) fn info(&self) -> ScaleUpInfo {
        ScaleUpInfo {
            group: group_id(&self.pool, &self.zone),
            from: self.from,
            to: self.to,
            max: self.max,
        }
    }
}

/// What became of one pending pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodVerdict {
    /// New nodes were asked for with it in mind.
    Triggered(Vec<ScaleUpInfo>),
    /// Nothing grows for it; `reasons` is the NotTriggerScaleUp text.
    NotTriggered { reasons: String },
    /// It fits on a node that exists or is being created.
    FitsExisting,
    /// Its priority is below the cutoff.
    Expendable,
    /// Its spec cannot be read; skipped.
    Unreadable(String),
}

/// A pod's verdict and, per pool zone, the answer there (`"fits"` or why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOutcome {
    pub verdict: PodVerdict,
    pub per_group: BTreeMap<String, String>,
}

/// The scale-up part of a decision.
#[derive(Debug, Clone)]
pub(crate) struct ScaleUp {
    pub result: ScaleUpResult,
    pub increases: Vec<Increase>,
    pub pods: BTreeMap<String, PodOutcome>,
    pub events: Vec<Event>,
    /// Pools that failed now: (pool, error code, message).
    pub failures: Vec<(String, String, String)>,
    pub errors: Vec<InputError>,
}

pub(crate) fn group_id(pool: &str, zone: &str) -> String {
    if zone.is_empty() {
        pool.to_owned()
    } else {
        format!("{pool}/{zone}")
    }
}

/// A pool zone the estimate may use.
struct NodeGroup {
    pool: usize,
    zone: usize,
    id: String,
}

fn template_name(kind: &str, pool: &PoolView<'_>, zone: usize, n: usize) -> String {
    let z = &pool.zones[zone];
    format!(
        "{kind}-{}-{}-{n}",
        pool.name,
        if z.is_empty() { "zone" } else { z }
    )
}

/// Adds `count` copies of the pool zone's template to `cluster` (with their
/// DaemonSet pods), as nodes that are coming.
fn add_upcoming(
    cluster: &mut Cluster,
    pool: &PoolView<'_>,
    zone: usize,
    first: usize,
    count: usize,
    daemon_sets: &[&Pod],
) {
    for n in first..first + count {
        let name = template_name("upcoming", pool, zone, n);
        let Some(node) = template_node(pool, &pool.zones[zone], &name) else {
            return;
        };
        if cluster.upsert_node(&node).is_err() {
            return;
        }
        for ds in daemon_sets {
            let copy = daemon_set_copy(ds, &name);
            if filter_node(cluster, &copy, &name).is_ok() {
                let _ = cluster.assume(&copy, &name);
            }
        }
    }
}

/// Why a pool zone may not grow now, if it may not.
fn skip_reason(
    pool: &PoolView<'_>,
    zone: usize,
    backoff: &BTreeMap<String, Backoff>,
    now: Timestamp,
    cluster_room: usize,
) -> Option<&'static str> {
    if pool.capacity.is_none() {
        return Some(REASON_NOT_READY);
    }
    if backoff.get(&pool.name).is_some_and(|b| b.active(now)) {
        return Some(REASON_BACKOFF);
    }
    if !pool.upgrade.may_grow() {
        return Some(REASON_UPGRADE);
    }
    if let Some(hosts) = pool.atomic {
        if pool.sizes.get(zone).copied().unwrap_or(0) > 0 {
            return Some(REASON_MAX_SIZE);
        }
        if usize::try_from(hosts).unwrap_or(usize::MAX) > cluster_room {
            return Some(REASON_ATOMIC_OVER_LIMIT);
        }
    }
    if pool.zone_headroom(zone) == 0 {
        return Some(REASON_MAX_SIZE);
    }
    None
}

/// `count reason` parts, sorted as text, joined as upstream joins them.
fn reasons_text(counts: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    parts.join(", ")
}

/// Unused reservations the pool zone may consume.
fn reserved(snap: &Snapshot<'_>, pool: &PoolView<'_>, zone: &str) -> u32 {
    let Some((cpu, mem)) = pool.capacity else {
        return 0;
    };
    snap.reservations
        .iter()
        .filter(|r| r.zone == zone && r.cpu_milli == cpu && r.memory_bytes == mem)
        .filter(|r| pool.extras.reservation_affinity.admits(r))
        .map(|r| r.unused())
        .sum()
}

/// Runs scale-up over `cluster`, a working copy of the scheduler's view
/// of the registered nodes and bound pods.
pub(crate) fn run(
    idx: &Index<'_>,
    snap: &Snapshot<'_>,
    cluster: &mut Cluster,
    backoff: &BTreeMap<String, Backoff>,
    opts: &Options,
    now: Timestamp,
) -> ScaleUp {
    let pods = snap.pods;
    let mut out = ScaleUp {
        result: ScaleUpResult::NotNeeded,
        increases: Vec::new(),
        pods: BTreeMap::new(),
        events: Vec::new(),
        failures: Vec::new(),
        errors: Vec::new(),
    };
    let verdict = |out: &mut ScaleUp, i: usize, v: PodVerdict, per_group| {
        out.pods.insert(
            pod_key(&pods[i]),
            PodOutcome {
                verdict: v,
                per_group,
            },
        );
    };
    let mut candidates = Vec::new();
    for &i in &idx.pending {
        if priority(&pods[i]) < EXPENDABLE_PRIORITY_CUTOFF {
            verdict(&mut out, i, PodVerdict::Expendable, BTreeMap::new());
        } else if let Err(e) = sluice_scheduler::check_pod(&pods[i]) {
            out.errors.push(e.clone().into());
            verdict(
                &mut out,
                i,
                PodVerdict::Unreadable(e.to_string()),
                BTreeMap::new(),
            );
        } else {
            candidates.push(i);
        }
    }
    let daemon_sets = daemon_set_exemplars(pods);
    // Nodes already asked for take pods first, unless their pool is backed
    // off (its nodes may never come; another pool is then tried).
    let mut upcoming_count = 0;
    for pool in &idx.pools {
        if backoff.get(&pool.name).is_some_and(|b| b.active(now)) {
            continue;
        }
        for z in 0..pool.zones.len() {
            let want = usize::try_from(pool.sizes[z]).unwrap_or(0);
            let missing = want.saturating_sub(pool.registered[z].len());
            let missing = missing.min(opts.max_nodes_per_scale_up);
            add_upcoming(cluster, pool, z, 0, missing, &daemon_sets);
            upcoming_count += missing;
        }
    }
    // Higher priority first, as the scheduler would place them.
    let by_priority: Vec<usize> = {
        let subset: Vec<Pod> = candidates.iter().map(|&i| pods[i].clone()).collect();
        queue_order(&subset)
            .into_iter()
            .map(|k| candidates[k])
            .collect()
    };
    let mut groups = equivalence::group(pods, &by_priority);
    for g in &mut groups {
        let mut left = Vec::new();
        let mut failed = false;
        for &pi in &g.pods {
            if !failed && matches!(schedule(cluster, &pods[pi]), Decision::Bind { .. }) {
                verdict(&mut out, pi, PodVerdict::FitsExisting, BTreeMap::new());
            } else {
                // Alike pods: once one does not fit, the rest do not.
                failed = true;
                left.push(pi);
            }
        }
        g.pods = left;
    }
    groups.retain(|g| !g.pods.is_empty());
    if groups.is_empty() {
        return out;
    }
    let mut pools: Vec<PoolView<'_>> = idx.pools.clone();
    let mut current = idx.node_count() + upcoming_count;
    if current >= opts.max_nodes_total {
        out.result = ScaleUpResult::LimitedByMaxNodesTotal;
        out.events
            .push(events::max_nodes_total_reached(opts.max_nodes_total));
        for g in &groups {
            for &pi in &g.pods {
                let reasons = REASON_MAX_TOTAL.to_owned();
                out.events.push(events::not_triggered_scale_up(
                    &pod_key(&pods[pi]),
                    &reasons,
                ));
                verdict(
                    &mut out,
                    pi,
                    PodVerdict::NotTriggered { reasons },
                    BTreeMap::new(),
                );
            }
        }
        return out;
    }
    let mut cidrs_left = snap
        .pod_cidrs_left
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    // Per group, per pool zone: "fits" or the reasons there.
    let mut answers: Vec<BTreeMap<String, Vec<String>>> = vec![BTreeMap::new(); groups.len()];
    let mut done = vec![false; groups.len()];
    let mut rounds: Vec<Vec<Increase>> = Vec::new();
    let mut placed_by_round: Vec<Vec<usize>> = Vec::new();
    let mut remaining: Vec<Group> = groups.clone();
    let max_rounds = pools.iter().map(|p| p.zones.len()).sum::<usize>().max(1);
    for round in 0..max_rounds {
        let room = opts.max_nodes_total.saturating_sub(current);
        let mut node_groups = Vec::new();
        for (pi, pool) in pools.iter().enumerate() {
            if !pool.enabled {
                continue;
            }
            for z in 0..pool.zones.len() {
                let id = group_id(&pool.name, &pool.zones[z]);
                match skip_reason(pool, z, backoff, now, room) {
                    Some(r) => {
                        for (gi, _) in remaining.iter().enumerate().filter(|(gi, _)| !done[*gi]) {
                            answers[gi].insert(id.clone(), vec![r.to_owned()]);
                        }
                    }
                    None => node_groups.push(NodeGroup {
                        pool: pi,
                        zone: z,
                        id,
                    }),
                }
            }
        }
        // Each group's first pod against each pool zone's template.
        let mut fits: Vec<Vec<usize>> = vec![Vec::new(); node_groups.len()];
        for (ni, ng) in node_groups.iter().enumerate() {
            let pool = &pools[ng.pool];
            let name = template_name("template-node-for", pool, ng.zone, 0);
            let Some(node) = template_node(pool, &pool.zones[ng.zone], &name) else {
                continue;
            };
            if cluster.upsert_node(&node).is_err() {
                continue;
            }
            let mut ds_keys = Vec::new();
            for ds in &daemon_sets {
                let copy = daemon_set_copy(ds, &name);
                if filter_node(cluster, &copy, &name).is_ok()
                    && cluster.assume(&copy, &name).is_ok()
                {
                    ds_keys.push(copy.metadata.name.clone().unwrap_or_default());
                }
            }
            for (gi, g) in remaining.iter().enumerate() {
                if done[gi] {
                    continue;
                }
                let answer = match filter_node(cluster, &pods[g.exemplar()], &name) {
                    Ok(()) => {
                        fits[ni].push(gi);
                        vec!["fits".to_owned()]
                    }
                    Err(reasons) => reasons,
                };
                answers[gi].insert(ng.id.clone(), answer);
            }
            for (ds, key) in daemon_sets.iter().zip(&ds_keys) {
                let ns = ds.metadata.namespace.as_deref().unwrap_or("default");
                cluster.remove_pod(ns, key);
            }
            cluster.remove_node(&name);
        }
        // One option per pool zone that takes at least one group.
        let mut options: Vec<(usize, ExpansionOption, Estimate)> = Vec::new();
        for (ni, ng) in node_groups.iter().enumerate() {
            if fits[ni].is_empty() {
                continue;
            }
            let pool = &pools[ng.pool];
            let Some((cpu, mem)) = pool.capacity else {
                continue;
            };
            let headroom: usize =
                if pool.policy == LocationPolicy::Balanced && pool.atomic.is_none() {
                    (0..pool.zones.len())
                        .filter(|&z| skip_reason(pool, z, backoff, now, room).is_none())
                        .map(|z| usize::try_from(pool.zone_headroom(z)).unwrap_or(0))
                        .sum()
                } else {
                    usize::try_from(pool.zone_headroom(ng.zone)).unwrap_or(0)
                };
            let mut limit = headroom.min(opts.max_nodes_per_scale_up).min(room);
            if let Some(c) = cidrs_left {
                // With no CIDR left the options are still weighed, so the
                // failure names the pool that would have grown.
                limit = limit.min(c.max(1));
            }
            let ordered =
                binpack::decreasing(pods, fits[ni].iter().map(|&gi| &remaining[gi]), (cpu, mem));
            let make = |n: usize| {
                template_node(
                    pool,
                    &pool.zones[ng.zone],
                    &template_name("template-node-for", pool, ng.zone, n),
                )
            };
            let est = binpack::estimate(
                cluster,
                pods,
                &ordered,
                &make as &dyn Fn(usize) -> Option<Node>,
                &daemon_sets,
                limit,
            );
            if est.nodes == 0 || est.pods.is_empty() {
                continue;
            }
            let node_count = match pool.atomic {
                Some(h) => usize::try_from(h).unwrap_or(usize::MAX),
                None => est.nodes,
            };
            let (mut pcpu, mut pmem) = (0i128, 0i128);
            for &p in &est.pods {
                if let Ok(d) = pod_demand(&pods[p], "") {
                    pcpu += d.exact.cpu_milli;
                    pmem += d.exact.memory;
                }
            }
            let option = ExpansionOption {
                pool: pool.name.clone(),
                zone: pool.zones[ng.zone].clone(),
                node_count,
                pod_count: est.pods.len(),
                pods_cpu_milli: pcpu,
                pods_memory: pmem,
                node_cpu_milli: cpu,
                node_memory: mem,
                node_price: pool
                    .extras
                    .price_per_hour
                    .unwrap_or_else(|| default_node_price(cpu, mem, pool.spot())),
                reserved: reserved(snap, pool, &pool.zones[ng.zone]),
            };
            options.push((ni, option, est));
        }
        if options.is_empty() {
            break;
        }
        let opts_only: Vec<ExpansionOption> = options.iter().map(|(_, o, _)| o.clone()).collect();
        let ctx = Context {
            cluster_nodes: idx.node_count(),
            priorities: opts.priorities.as_ref(),
            seed: opts.random_seed ^ now.as_second().unsigned_abs() ^ round as u64,
        };
        let Some(best) = expander::best(&opts.expander, &opts_only, &ctx) else {
            break;
        };
        let Some(pos) = opts_only.iter().position(|o| o == best) else {
            break;
        };
        let (ni, option, est) = &options[pos];
        let ng = &node_groups[*ni];
        let pool_i = ng.pool;
        let mut count = option.node_count.min(room);
        if let Some(c) = cidrs_left {
            if c == 0 {
                let pool = &pools[pool_i];
                let message = format!("{IP_SPACE_EXHAUSTED}: no pod CIDR left for a new node (scale.up.error.ip.space.exhausted)");
                out.events.push(events::failed_to_scale_up_group(
                    &pool.name, &ng.id, &message,
                ));
                out.failures
                    .push((pool.name.clone(), IP_SPACE_EXHAUSTED.into(), message));
                out.result = ScaleUpResult::Error;
                break;
            }
            count = count.min(c);
        }
        if pools[pool_i].atomic.is_some() && count < option.node_count {
            // A slice comes whole or not at all (C10).
            break;
        }
        let pool = &pools[pool_i];
        let split: Vec<(usize, i32)> =
            if pool.policy == LocationPolicy::Balanced && pool.atomic.is_none() {
                // Similar zones: those that may grow and take every group the
                // chosen zone takes.
                let taken: Vec<usize> = fits[*ni].clone();
                let zones: Vec<usize> = node_groups
                    .iter()
                    .enumerate()
                    .filter(|(_, other)| other.pool == pool_i)
                    .filter(|(oi, _)| taken.iter().all(|g| fits[*oi].contains(g)))
                    .map(|(_, other)| other.zone)
                    .collect();
                balance::split(pool, &zones, count)
            } else {
                let n = i32::try_from(count)
                    .unwrap_or(i32::MAX)
                    .min(pool.zone_headroom(ng.zone));
                vec![(ng.zone, n)]
            };
        let mut increases = Vec::new();
        for (z, n) in split {
            let from = pools[pool_i].sizes[z];
            let to = from + n;
            let max = pools[pool_i].limits.zone_max(&pools[pool_i].sizes, z);
            let first = usize::try_from(from)
                .unwrap_or(0)
                .max(pools[pool_i].registered[z].len());
            add_upcoming(
                cluster,
                &pools[pool_i],
                z,
                first,
                usize::try_from(n).unwrap_or(0),
                &daemon_sets,
            );
            pools[pool_i].sizes[z] = to;
            let added = usize::try_from(n).unwrap_or(0);
            current += added;
            if let Some(c) = cidrs_left.as_mut() {
                *c = c.saturating_sub(added);
            }
            increases.push(Increase {
                pool: pools[pool_i].name.clone(),
                zone: pools[pool_i].zones[z].clone(),
                from,
                to,
                max: max.max(to),
            });
        }
        if increases.is_empty() {
            break;
        }
        // The pods the estimate placed are taken care of; their groups'
        // other pods stay for the next round.
        let placed: std::collections::HashSet<usize> = est.pods.iter().copied().collect();
        for (gi, g) in remaining.iter_mut().enumerate() {
            let before = g.pods.len();
            g.pods.retain(|p| !placed.contains(p));
            if g.pods.len() < before && g.pods.is_empty() {
                done[gi] = true;
            }
        }
        placed_by_round.push(est.pods.clone());
        rounds.push(increases);
        if done.iter().all(|d| *d) {
            break;
        }
    }
    for (incs, placed) in rounds.iter().zip(&placed_by_round) {
        let infos: Vec<ScaleUpInfo> = incs.iter().map(Increase::info).collect();
        for inc in incs {
            out.events
                .push(events::scaled_up_group(&inc.pool, &inc.info()));
        }
        for &p in placed {
            let key = pod_key(&pods[p]);
            out.events.push(events::triggered_scale_up(&key, &infos));
            let gi = groups.iter().position(|g| g.pods.contains(&p));
            let per_group = gi.map(|gi| flatten(&answers[gi])).unwrap_or_default();
            out.pods.insert(
                key,
                PodOutcome {
                    verdict: PodVerdict::Triggered(infos.clone()),
                    per_group,
                },
            );
        }
    }
    for (gi, g) in remaining.iter().enumerate() {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for reasons in answers[gi].values() {
            for r in reasons {
                if r != "fits" {
                    *counts.entry(r.clone()).or_insert(0) += 1;
                }
            }
        }
        let reasons = reasons_text(&counts);
        for &p in &g.pods {
            let key = pod_key(&pods[p]);
            if out.pods.contains_key(&key) {
                continue;
            }
            out.events
                .push(events::not_triggered_scale_up(&key, &reasons));
            out.pods.insert(
                key,
                PodOutcome {
                    verdict: PodVerdict::NotTriggered {
                        reasons: reasons.clone(),
                    },
                    per_group: flatten(&answers[gi]),
                },
            );
        }
    }
    out.increases = rounds.into_iter().flatten().collect();
    if out.result != ScaleUpResult::Error {
        out.result = if out.increases.is_empty() {
            ScaleUpResult::NoOptionsAvailable
        } else {
            ScaleUpResult::Successful
        };
    }
    out
}

fn flatten(answers: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, String> {
    answers
        .iter()
        .map(|(k, v)| (k.clone(), v.join(", ")))
        .collect()
}
