//! What the upgrade loop works out from its caches before it asks the
//! planner (pure): the pods each of the pool's nodes still holds, the `Local` Services and the nodes behind
//! them, and the zones each pool's running upgrade holds.

use std::collections::{BTreeMap, BTreeSet};

use sluice_model::k8s::jiff::SignedDuration;
use sluice_model::k8s::{EndpointSlice, Pod, PodDisruptionBudget, Service};
use sluice_model::node_pool::UpgradeStrategy;
use sluice_model::operation::{Operation, OperationAction, OperationState, OperationType};
use sluice_model::policy::disruption::{
    budget_status, decide, guards, refusal_cause, Budget, BudgetStatus, PodFacts,
    UnhealthyPodEvictionPolicy, Verdict,
};
use sluice_model::policy::eviction::SAFE_TO_EVICT;
use sluice_nodepools::reconcile::ZoneHold;
use sluice_upgrades::{LocalService, PodOnNode};

use crate::loops::loadbalancers::inputs::serving_nodes;

/// The label EndpointSlices name their Service with.
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: SignedDuration = SignedDuration::from_secs(30);

/// An operation that is a node upgrade still to run or running: the pool
/// it works on, if so. A cancelled surge upgrade with nothing in flight
/// holds nothing until a user asks it to resume or roll back
/// (`spec.action`); a cancelled blue-green one still holds both sides of
/// its pool (B6).
pub fn live_upgrade(op: &Operation) -> Option<&str> {
    let upgrade = matches!(
        op.spec.operation_type,
        OperationType::UpgradeNodes | OperationType::AutoUpgradeNodes
    );
    let state = op.status.as_ref().and_then(|s| s.status);
    let asked_on = matches!(
        op.spec.action,
        Some(OperationAction::Resume | OperationAction::Rollback)
    );
    let live = match state {
        Some(s) if s.is_final() => false,
        Some(OperationState::Cancelled) => asked_on || blue_green(op),
        _ => true,
    };
    (upgrade && live).then(|| op.spec.node_pool()).flatten()
}

/// Per node of `nodes`, the pods a drain of it must still remove: bound
/// to it, not finished, not owned by a DaemonSet (as `kubectl drain
/// --ignore-daemonsets`), terminating ones included (the drain is over
/// when they are gone). A pod on a `draining` node that a budget holds
/// back says which (the Eviction API's own decision over `all` pods), for
/// the operation's blocking reasons.
pub fn pods_by_node<'a>(
    all: &[&'a Pod],
    nodes: &BTreeSet<String>,
    draining: &BTreeSet<String>,
    budgets: &[&'a PodDisruptionBudget],
) -> BTreeMap<String, Vec<PodOnNode>> {
    let mut out: BTreeMap<String, Vec<PodOnNode>> = BTreeMap::new();
    let mut held = Budgets::new(all, budgets);
    for pod in all {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
            continue;
        };
        if !nodes.contains(node) {
            continue;
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let daemon = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
        if daemon {
            continue;
        }
        let grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .map_or(DEFAULT_GRACE, |s| SignedDuration::from_secs(s.max(0)));
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        let held_by = draining.contains(node).then(|| held.refusal(pod)).flatten();
        let safe_to_evict_false = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SAFE_TO_EVICT))
            .is_some_and(|v| v == "false");
        out.entry(node.clone()).or_default().push(PodOnNode {
            name,
            grace,
            held_by,
            safe_to_evict_false,
        });
    }
    out
}

/// The budgets' answers to evictions, each budget's status computed once.
struct Budgets<'a> {
    pods: Vec<PodFacts>,
    budgets: Vec<(&'a PodDisruptionBudget, Option<BudgetStatus>)>,
}

impl<'a> Budgets<'a> {
    fn new(pods: &[&Pod], budgets: &[&'a PodDisruptionBudget]) -> Self {
        Budgets {
            pods: pods
                .iter()
                .map(|p| PodFacts::of(&p.metadata, p.status.as_ref()))
                .collect(),
            budgets: budgets.iter().map(|b| (*b, None)).collect(),
        }
    }

    /// Why an eviction of `pod` would be refused now, if it would be: the
    /// first budget guarding it that has no disruption to give.
    fn refusal(&mut self, pod: &Pod) -> Option<String> {
        let facts = PodFacts::of(&pod.metadata, pod.status.as_ref());
        if facts.can_ignore_budget() {
            return None;
        }
        let Budgets { pods, budgets } = self;
        for (pdb, status) in budgets.iter_mut() {
            let (Some(spec), ns) = (pdb.spec.as_ref(), pdb.metadata.namespace.as_deref()) else {
                continue;
            };
            if !guards(ns.unwrap_or("default"), spec, &facts) {
                continue;
            }
            let Ok(budget) = Budget::of(spec) else {
                continue;
            };
            let st = *status.get_or_insert_with(|| {
                let guarded: Vec<PodFacts> = pods
                    .iter()
                    .filter(|p| guards(ns.unwrap_or("default"), spec, p))
                    .cloned()
                    .collect();
                let recorded = pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.clone())
                    .unwrap_or_default();
                budget_status(budget, &guarded, &recorded)
            });
            let policy = UnhealthyPodEvictionPolicy::of(spec);
            if decide(facts.healthy(), &st, policy) == Verdict::Refused {
                let name = format!(
                    "{}/{}",
                    ns.unwrap_or("default"),
                    pdb.metadata.name.as_deref().unwrap_or_default()
                );
                return Some(format!(
                    "PodDisruptionBudget {name} refuses its eviction: {}",
                    refusal_cause(&name, &st)
                ));
            }
        }
        None
    }
}

/// The Services with `externalTrafficPolicy: Local` and the nodes holding
/// their serving endpoints (U5's warning on parallel drains).
pub fn local_services<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    slices: &[&'a EndpointSlice],
) -> Vec<LocalService> {
    services
        .into_iter()
        .filter(|s| {
            s.spec
                .as_ref()
                .and_then(|s| s.external_traffic_policy.as_deref())
                == Some("Local")
        })
        .map(|s| {
            let ns = s.metadata.namespace.as_deref().unwrap_or("default");
            let name = s.metadata.name.as_deref().unwrap_or_default();
            let own = slices.iter().copied().filter(|e| {
                e.metadata.namespace.as_deref().unwrap_or("default") == ns
                    && e.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(SERVICE_NAME))
                        .is_some_and(|n| n == name)
            });
            LocalService {
                name: format!("{ns}/{name}"),
                nodes: serving_nodes(own),
            }
        })
        .filter(|s| !s.nodes.is_empty())
        .collect()
}

/// Whether `op` upgrades blue-green.
fn blue_green(op: &Operation) -> bool {
    op.spec
        .upgrade_settings
        .as_ref()
        .is_some_and(|u| u.strategy() == UpgradeStrategy::BlueGreen)
}

/// Whether `op` keeps both sides in each zone: blue-green (standard or
/// autoscaled) and short-lived upgrades hold a zone's old and new nodes
/// together.
fn holds_both_sides(op: &Operation) -> bool {
    op.spec.upgrade_settings.as_ref().is_some_and(|u| {
        matches!(
            u.strategy(),
            UpgradeStrategy::BlueGreen | UpgradeStrategy::ShortLived
        )
    })
}

/// The zones of `pool` an upgrade holds when its latest plan is not
/// known here (the controller just started): all of them, each with the
/// operation's `maxSurge` (a blue-green upgrade: the zone's target again,
/// room for both sides), so that the pool loop neither cuts surge or green
/// nodes as surplus nor refills a zone with the old version before the
/// upgrade loop has looked.
pub fn all_zones_held(op: &Operation, zones: &[(String, usize)]) -> BTreeMap<String, ZoneHold> {
    if holds_both_sides(op) {
        return zones
            .iter()
            .map(|(zone, target)| (zone.clone(), ZoneHold { extra: *target }))
            .collect();
    }
    let extra = op
        .spec
        .upgrade_settings
        .clone()
        .unwrap_or_default()
        .max_surge();
    let extra = usize::try_from(extra).unwrap_or(0);
    zones
        .iter()
        .map(|(zone, _)| (zone.clone(), ZoneHold { extra }))
        .collect()
}

#[cfg(test)]
mod tests;
