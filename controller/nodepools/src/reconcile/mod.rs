//! The node pool reconciler's decisions, pure: the pool, its instances,
//! the cluster's Nodes, a [`Config`] and `now` in; the actions to run
//! through the provider, the pool's status and when to look again out.
//!
//! Rules (GKE's managed instance groups and Cluster API's MachineSets
//! where they agree):
//! - each zone of `locations` holds its target (`initialNodeCount`,
//!   bounded by enabled autoscaling limits), made up when short and cut
//!   down when over;
//! - an instance the provider reports `Failed`, one whose Node has not
//!   registered within the node startup timeout (Cluster API's 600 s), and
//!   one whose registered Node was deleted are deleted and replaced in the
//!   same plan (deletions come first);
//! - instances of zones no longer in `locations` are deleted (drained);
//!   a pool being deleted deletes all of its instances;
//! - surplus instances go in this order, per zone: not registered, then
//!   registered but not Ready, then the newest;
//! - while autoscaling is enabled, a zone the cluster autoscaler sized
//!   (`status.autoscaler.targetSizes`) holds that size within the limits,
//!   as a managed instance group holds the target size the autoscaler
//!   sets; the nodes it names (`status.autoscaler.nodesToRemove`) are
//!   deleted, and in such a zone a registered Ready node is never surplus:
//!   only the autoscaler picks which running node goes, having drained
//!   it, so a lowered size never takes the newest node in its place;
//! - new nodes get `spec.version` (else the cluster's) and names from
//!   [`crate::naming`]; at most `max_parallel_creations` instances are
//!   being created at once;
//! - after a failed creation (quota above all) creations wait out a
//!   backoff kept in `status.createBackoff` (30 s doubling to 5 min),
//!   reported in the `QuotaExceeded` condition; deletions go on.
//!
//! Nothing here drains a Node before its instance is deleted; surge and
//! blue-green upgrades, which drain, decide their own deletions.
//!
//! While an upgrade works on a zone it owns that zone's size
//! ([`Config::held_zones`], filled from `sluice-upgrades`' plan): up to
//! [`ZoneHold::extra`] instances over the target are its surge nodes, not
//! surplus, and a shortfall is left for it to make up with nodes of the new
//! version (a replacement made here would have the old one). Failed and
//! timed-out instances are still deleted here.

mod backoff;
mod observe;
mod status;
mod target;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::node_pool::{NodePool, NodePoolStatus};

use crate::instance::{CreateNode, Instance, InstanceState, NodeSpec};
use crate::{naming, PlanError, ProviderError};
pub use backoff::record;
pub use observe::is_ready as is_node_ready;
use observe::{Fate, Lens, Seen};
pub use status::{QUOTA_EXCEEDED, READY};
pub use target::{pool_targets, zone_targets};

/// When creations may be tried again after the failure `status` records
/// (`None`: no failure recorded).
pub fn create_retry_at(status: &NodePoolStatus, config: &Config) -> Option<Timestamp> {
    status
        .create_backoff
        .as_ref()
        .map(|b| backoff::retry_at(b, config))
}

/// The reconciler's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// An instance whose Node has not registered this long after its
    /// creation is replaced (Cluster API's `nodeStartupTimeout`, 600 s).
    pub node_startup_timeout: SignedDuration,
    /// At most this many instances of a pool `Creating` at once.
    pub max_parallel_creations: usize,
    /// The wait after the first failed creation round; it doubles with
    /// each further one, up to `create_backoff_max`.
    pub create_backoff_initial: SignedDuration,
    pub create_backoff_max: SignedDuration,
    /// How soon to look again while the pool is changing: instances are
    /// polled, not watched (the cluster autoscaler's 10 s scan).
    pub poll_interval: SignedDuration,
    /// The cluster's zones, for a pool without `locations`.
    pub cluster_locations: Vec<String>,
    /// The cluster's version, for a pool without `version`.
    pub cluster_version: String,
    /// Zones whose size an upgrade owns now, by zone name; empty: none.
    pub held_zones: BTreeMap<String, ZoneHold>,
}

/// How an upgrade holds a zone's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZoneHold {
    /// Instances over the zone's target that are not surplus (a surge
    /// upgrade's `maxSurge`).
    pub extra: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_startup_timeout: SignedDuration::from_secs(600),
            max_parallel_creations: 100,
            create_backoff_initial: SignedDuration::from_secs(30),
            create_backoff_max: SignedDuration::from_secs(300),
            poll_interval: SignedDuration::from_secs(10),
            cluster_locations: Vec::new(),
            cluster_version: String::new(),
            held_zones: BTreeMap::new(),
        }
    }
}

/// One call to make on the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Create(CreateNode),
    Delete { name: String, reason: DeleteReason },
}

/// Why an instance is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteReason {
    /// The cluster autoscaler drained it and named it for removal.
    ScaledDown,
    /// The provider reports it failed, with its reason.
    Failed(String),
    /// Its Node did not register within the node startup timeout.
    StartupTimeout,
    /// Its Node registered and was then deleted.
    NodeDeleted,
    /// Its zone is no longer in the pool's `locations`.
    ZoneRemoved,
    /// Its zone holds more than its target.
    Surplus,
    /// The pool is being deleted.
    PoolDeleted,
    /// An upgrade replaced it (its drain is over); names the operation.
    Upgraded(String),
}

impl fmt::Display for DeleteReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeleteReason::Failed(why) => write!(f, "failed: {why}"),
            DeleteReason::ScaledDown => f.write_str("the cluster autoscaler removed it"),
            DeleteReason::StartupTimeout => f.write_str("its Node did not register in time"),
            DeleteReason::NodeDeleted => f.write_str("its Node was deleted"),
            DeleteReason::ZoneRemoved => f.write_str("its zone left the pool's locations"),
            DeleteReason::Surplus => f.write_str("its zone holds more than its target"),
            DeleteReason::PoolDeleted => f.write_str("the pool is being deleted"),
            DeleteReason::Upgraded(op) => write!(f, "replaced by upgrade {op}"),
        }
    }
}

/// What running one action gave, for [`record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub action: Action,
    pub result: Result<(), ProviderError>,
}

/// What one pass decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Deletions (by name), then creations (zone by zone, in `locations`
    /// order).
    pub actions: Vec<Action>,
    /// The pool's status as the inputs show it; run the actions, then
    /// pass it to [`record`] with their outcomes.
    pub status: NodePoolStatus,
    /// Look again after this long (an instance's startup deadline, the end
    /// of a backoff, or the poll interval while anything changes); `None`
    /// when the pool is settled.
    pub requeue_after: Option<SignedDuration>,
}

/// Decide one pass for `pool`. `instances`: what the provider lists for
/// it (others' are ignored); `nodes`: the cluster's Nodes (only their
/// names and `Ready` conditions are read). Both must be complete lists,
/// not a cache still filling: an instance whose Node is missing is
/// replaced once its startup timeout has passed.
pub fn plan<N: std::borrow::Borrow<Node>>(
    pool: &NodePool,
    instances: &[Instance],
    nodes: &[N],
    config: &Config,
    now: Timestamp,
) -> Result<Plan, PlanError> {
    let pool_name = pool
        .metadata
        .name
        .as_deref()
        .ok_or(PlanError::MissingName)?;
    // Labelled with its config's fingerprint, so that an upgrade of the
    // config alone tells these nodes from the ones it makes.
    let spec = NodeSpec::of_pool(pool)?.labelled();
    let previous = pool.status.clone().unwrap_or_default();
    let deleting = pool.metadata.deletion_timestamp.is_some();
    let (targets, autoscaled) = if deleting {
        Default::default()
    } else {
        target::pool_targets(pool, &config.cluster_locations)
    };
    let instances: Vec<Instance> = instances
        .iter()
        .filter(|i| i.pool == pool_name)
        .cloned()
        .collect();
    let lens = Lens {
        zones: targets.iter().map(|(z, _)| z.as_str()).collect(),
        was_node: previous.nodes.iter().map(String::as_str).collect(),
        deleting_pool: deleting,
        config,
        now,
    };
    let mut seen = lens.observe(&instances, nodes);
    mark_scaled_down(&mut seen, pool, &config.held_zones);
    mark_surplus(&mut seen, &targets, &config.held_zones, &autoscaled);

    let mut actions = deletions(&seen);

    let retry_at = previous
        .create_backoff
        .as_ref()
        .map(|b| backoff::retry_at(b, config));
    let backing_off = retry_at.is_some_and(|t| now < t);
    let deficits = deficits(&seen, &targets, &config.held_zones);
    let short = deficits.iter().any(|(_, d)| *d > 0);
    if !backing_off {
        let creating = seen
            .iter()
            .filter(|s| {
                matches!(s.fate, Fate::Counted { .. })
                    && s.instance.state == InstanceState::Creating
            })
            .count();
        let budget = config.max_parallel_creations.saturating_sub(creating);
        let mut taken: HashSet<String> = instances.iter().map(|i| i.name.clone()).collect();
        taken.extend(
            nodes
                .iter()
                .filter_map(|n| n.borrow().metadata.name.clone()),
        );
        // A name the last status listed as a Node is not handed out again
        // yet: the next pass would read the new instance's missing Node
        // as that Node deleted, and replace it.
        taken.extend(previous.nodes.iter().cloned());
        let version = pool
            .spec
            .version
            .clone()
            .unwrap_or_else(|| config.cluster_version.clone());
        for (zone, count) in spread(&deficits, budget) {
            for name in naming::fresh_names(pool_name, zone, naming::salt(now), count, &mut taken) {
                actions.push(Action::Create(CreateNode {
                    pool: pool_name.to_owned(),
                    zone: zone.to_owned(),
                    name,
                    version: version.clone(),
                    config: spec.clone(),
                }));
            }
        }
    }

    let status = status::build(&previous, &targets, &seen, deleting, config, now);
    let settled = status.status == Some(sluice_model::node_pool::NodePoolPhase::Running)
        && actions.is_empty();
    let backoff_until = retry_at.filter(|_| backing_off && short);
    let run_ends = run_ends(pool, &seen, config, now);
    let requeue_after = requeue_after(&seen, backoff_until, run_ends, settled, config, now);
    Ok(Plan {
        actions,
        status,
        requeue_after,
    })
}

/// The deletions, by name.
fn deletions(seen: &[Seen<'_>]) -> Vec<Action> {
    let mut removals: Vec<(&str, &DeleteReason)> = seen
        .iter()
        .filter_map(|s| match &s.fate {
            Fate::Remove(reason) => Some((s.instance.name.as_str(), reason)),
            _ => None,
        })
        .collect();
    removals.sort_by_key(|(name, _)| *name);
    removals
        .into_iter()
        .map(|(name, reason)| Action::Delete {
            name: name.to_owned(),
            reason: reason.clone(),
        })
        .collect()
}

/// When the counted instances' runs end (A5: the provider ends a node
/// at `createdAt` + the pool's `maxRunDuration`), so the pass that sees
/// one gone, and replaces it, comes then: nothing else announces it, and
/// a settled pool is not polled. Read from the pool's limit now, which a
/// node made before a change of it may not have; the wrong guess costs a
/// pass. An instance still listed past its end is looked at again after
/// the poll interval.
fn run_ends(pool: &NodePool, seen: &[Seen<'_>], config: &Config, now: Timestamp) -> Vec<Timestamp> {
    let Some(limit) = pool.spec.max_run_duration() else {
        return Vec::new();
    };
    let limit = SignedDuration::from_nanos(limit.as_nanos());
    seen.iter()
        .filter(|s| matches!(s.fate, Fate::Counted { .. }))
        .map(|s| crate::later(s.instance.created_at, limit))
        .map(|end| {
            if end > now {
                end
            } else {
                crate::later(now, config.poll_interval)
            }
        })
        .collect()
}

/// The soonest of: an unregistered instance's startup deadline, the end
/// of a backoff holding back needed creations, the end of a node's run,
/// and, unless the pool is settled, the poll interval.
fn requeue_after(
    seen: &[Seen<'_>],
    backoff_until: Option<Timestamp>,
    run_ends: Vec<Timestamp>,
    settled: bool,
    config: &Config,
    now: Timestamp,
) -> Option<SignedDuration> {
    let deadlines = seen.iter().filter_map(|s| match s.fate {
        Fate::Counted { deadline } => deadline,
        _ => None,
    });
    let poll = (!settled).then(|| crate::later(now, config.poll_interval));
    deadlines
        .chain(backoff_until)
        .chain(run_ends)
        .chain(poll)
        .min()
        .map(|t| t.duration_since(now))
}

/// The nodes the autoscaler named become `Remove(ScaledDown)` while
/// autoscaling is enabled; not in a zone an upgrade holds (the upgrade
/// decides that zone's nodes until it lets go, and the autoscaler names
/// them again after).
fn mark_scaled_down(seen: &mut [Seen<'_>], pool: &NodePool, held: &BTreeMap<String, ZoneHold>) {
    if !pool.spec.autoscaling.as_ref().is_some_and(|a| a.enabled) {
        return;
    }
    let Some(a) = pool.status.as_ref().and_then(|s| s.autoscaler.as_ref()) else {
        return;
    };
    let named: HashSet<(&str, &str)> = a
        .nodes_to_remove
        .iter()
        .map(|n| (n.name.as_str(), n.zone.as_str()))
        .collect();
    for s in seen.iter_mut() {
        let i = s.instance;
        if matches!(s.fate, Fate::Counted { .. })
            && !held.contains_key(&i.zone)
            && named.contains(&(i.name.as_str(), i.zone.as_str()))
        {
            s.fate = Fate::Remove(DeleteReason::ScaledDown);
        }
    }
}

/// Per zone, the instances over target become `Remove(Surplus)`: not
/// registered first, then not Ready, then the newest (ties by name).
/// A zone an upgrade holds keeps up to its `extra` over the target. In a
/// zone the autoscaler sizes, only instances not registered or not Ready
/// may be surplus (a rolled-back scale-up's); a running node waits to be
/// named.
fn mark_surplus(
    seen: &mut [Seen<'_>],
    targets: &[(String, usize)],
    held: &BTreeMap<String, ZoneHold>,
    autoscaled: &std::collections::BTreeSet<String>,
) {
    for (zone, target) in targets {
        let target = &target.saturating_add(held.get(zone).map_or(0, |h| h.extra));
        let mut counted: Vec<&mut Seen<'_>> = seen
            .iter_mut()
            .filter(|s| s.instance.zone == *zone && matches!(s.fate, Fate::Counted { .. }))
            .collect();
        if counted.len() <= *target {
            continue;
        }
        counted.sort_by(|a, b| {
            let key = |s: &Seen<'_>| (s.registered, s.ready, Reverse(s.instance.created_at));
            key(a)
                .cmp(&key(b))
                .then_with(|| a.instance.name.cmp(&b.instance.name))
        });
        let surplus = counted.len() - target;
        let owned = autoscaled.contains(zone);
        for s in counted.into_iter().take(surplus) {
            if owned && s.registered && s.ready {
                break;
            }
            s.fate = Fate::Remove(DeleteReason::Surplus);
        }
    }
}

/// Per zone (in target order), how many instances are missing; none in a
/// zone an upgrade holds (it makes them up itself).
fn deficits<'z>(
    seen: &[Seen<'_>],
    targets: &'z [(String, usize)],
    held: &BTreeMap<String, ZoneHold>,
) -> Vec<(&'z str, usize)> {
    let mut counted: BTreeMap<&str, usize> = BTreeMap::new();
    for s in seen {
        if let Fate::Counted { .. } = s.fate {
            *counted.entry(s.instance.zone.as_str()).or_default() += 1;
        }
    }
    targets
        .iter()
        .map(|(zone, target)| {
            let have = counted.get(zone.as_str()).copied().unwrap_or(0);
            if held.contains_key(zone) {
                return (zone.as_str(), 0);
            }
            (zone.as_str(), target.saturating_sub(have))
        })
        .collect()
}

/// Share `budget` creations among the zones' deficits one at a time in
/// turn, so a short budget is spread evenly (GKE balances zones).
fn spread<'z>(deficits: &[(&'z str, usize)], budget: usize) -> Vec<(&'z str, usize)> {
    let mut given: Vec<(&str, usize)> = deficits.iter().map(|(z, _)| (*z, 0)).collect();
    let mut left = budget;
    while left > 0 {
        let mut progressed = false;
        for (i, (_, want)) in deficits.iter().enumerate() {
            if left > 0 && given[i].1 < *want {
                given[i].1 += 1;
                left -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    given.retain(|(_, n)| *n > 0);
    given
}
