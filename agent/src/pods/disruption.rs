//! PodDisruptionBudgets as the Eviction API applies them (E6, U1), without
//! I/O: which budget guards a pod, how many disruptions it allows now, and the
//! bookkeeping that keeps two evictions of one pass from spending the same
//! allowance. The arithmetic (selectors, `desiredHealthy`, the verdict) is
//! the model crate's `sluice_model::policy::disruption`, which the
//! controller's Eviction API applies too; this module holds what the agent
//! knows (its pods and budgets) and the evictions it has allowed.
//!
//! Kubernetes semantics, with the agent's knowledge standing in for the API
//! server's:
//!
//! - A budget guards the pods of its namespace its selector matches (a
//!   `policy/v1` null selector matches nothing, an empty one everything).
//!   A pod guarded by two budgets cannot be evicted (the API answers 500).
//! - `expected` is the number of matching pods the agent knows of. Kubernetes
//!   takes it from the owning controller's scale for `maxUnavailable` and
//!   percentages; the agent has no controllers, so the pods in the state
//!   stand in for the replicas.
//! - `desiredHealthy` is `minAvailable` (a percentage of `expected`, rounded
//!   up), or `expected − maxUnavailable` (a percentage rounded up);
//!   `disruptionsAllowed = currentHealthy − desiredHealthy`, at least 0, and
//!   0 when nothing is expected.
//! - An eviction of a healthy pod is allowed when `disruptionsAllowed ≥ 1`;
//!   the pod is then recorded as disrupted and no longer counts as healthy,
//!   as the API server's `disruptedPods` map does, until it leaves the state.
//! - A pod that is not healthy: `AlwaysAllow` evicts it at once;
//!   `IfHealthyBudget` (the default) evicts it without spending when the
//!   budget is met (`currentHealthy ≥ desiredHealthy > 0`), else it needs an
//!   allowance like a healthy pod.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::eviction::{EvictionReason, PdbGate};
use sluice_model::policy::disruption::{decide, Verdict};
pub use sluice_model::policy::disruption::{
    Budget, BudgetStatus, IntOrPercent, Selector, SelectorOp, UnhealthyPodEvictionPolicy,
};

/// A validated `policy/v1` PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbSpec {
    /// `namespace/name`.
    pub key: String,
    pub namespace: String,
    /// `None`: no `spec.selector`, which selects no pod in `policy/v1`.
    pub selector: Option<Selector>,
    pub budget: Budget,
    pub unhealthy_policy: UnhealthyPodEvictionPolicy,
}

impl PdbSpec {
    pub fn guards(&self, pod: &PodHealth) -> bool {
        self.namespace == pod.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

/// What the budgets need to know of a pod anywhere in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHealth {
    /// `namespace/name`.
    pub key: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// Ready and not being deleted.
    pub healthy: bool,
}

/// The status of `pdb` over `pods`; pods in `disrupted` (evictions already
/// allowed) do not count as healthy.
pub fn budget_status<'a>(
    pdb: &PdbSpec,
    pods: impl IntoIterator<Item = &'a PodHealth>,
    disrupted: &BTreeSet<String>,
) -> BudgetStatus {
    let (mut expected, mut current_healthy) = (0u32, 0u32);
    for p in pods.into_iter().filter(|p| pdb.guards(p)) {
        expected = expected.saturating_add(1);
        if p.healthy && !disrupted.contains(&p.key) {
            current_healthy = current_healthy.saturating_add(1);
        }
    }
    BudgetStatus::of(pdb.budget, expected, current_healthy)
}

/// The answer to one eviction request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdbVerdict {
    /// No budget guards the pod (or the pod is unknown).
    Unguarded,
    /// Allowed; one disruption of `pdb` spent.
    Allowed { pdb: String },
    /// An unhealthy pod, allowed without spending.
    AllowedUnhealthy { pdb: String },
    /// The budget has no disruption to give.
    Refused { pdb: String, status: BudgetStatus },
    /// More than one budget guards the pod; Kubernetes refuses those.
    SeveralBudgets(Vec<String>),
}

impl PdbVerdict {
    pub fn allowed(&self) -> bool {
        matches!(
            self,
            PdbVerdict::Unguarded
                | PdbVerdict::Allowed { .. }
                | PdbVerdict::AllowedUnhealthy { .. }
        )
    }
}

/// The budgets and pods of the cluster as the agent knows them, plus the
/// evictions already allowed.
#[derive(Debug, Default, Clone)]
pub struct DisruptionBudgets {
    pdbs: Vec<PdbSpec>,
    pods: BTreeMap<String, PodHealth>,
    disrupted: BTreeSet<String>,
}

impl DisruptionBudgets {
    /// Replace the view. A disrupted pod stays disrupted until it leaves the
    /// state: its eviction is under way even if the file still calls it
    /// ready.
    pub fn set_view(&mut self, pdbs: Vec<PdbSpec>, pods: Vec<PodHealth>) {
        self.pdbs = pdbs;
        self.pods = pods.into_iter().map(|p| (p.key.clone(), p)).collect();
        let pods = &self.pods;
        self.disrupted.retain(|k| pods.contains_key(k));
    }

    /// Status of every budget, for reporting.
    pub fn statuses(&self) -> Vec<(String, BudgetStatus)> {
        self.pdbs
            .iter()
            .map(|b| {
                (
                    b.key.clone(),
                    budget_status(b, self.pods.values(), &self.disrupted),
                )
            })
            .collect()
    }

    /// Decide an eviction of `key` and, when it spends a disruption, record
    /// it so the next request sees the smaller allowance.
    pub fn decide(&mut self, key: &str) -> PdbVerdict {
        let Some(pod) = self.pods.get(key) else {
            return PdbVerdict::Unguarded;
        };
        let guarding: Vec<&PdbSpec> = self.pdbs.iter().filter(|b| b.guards(pod)).collect();
        let pdb = match guarding.as_slice() {
            [] => return PdbVerdict::Unguarded,
            [one] => *one,
            many => {
                return PdbVerdict::SeveralBudgets(many.iter().map(|b| b.key.clone()).collect())
            }
        };
        let status = budget_status(pdb, self.pods.values(), &self.disrupted);
        let healthy = pod.healthy && !self.disrupted.contains(key);
        let pdb_key = pdb.key.clone();
        match decide(healthy, &status, pdb.unhealthy_policy) {
            Verdict::AllowUnhealthy => PdbVerdict::AllowedUnhealthy { pdb: pdb_key },
            Verdict::Refused => PdbVerdict::Refused {
                pdb: pdb_key,
                status,
            },
            Verdict::Spend => {
                self.disrupted.insert(key.to_string());
                PdbVerdict::Allowed { pdb: pdb_key }
            }
        }
    }
}

/// [`DisruptionBudgets`] shared between the sync loop (which refreshes the
/// view) and the pod manager (which asks it, as its [`PdbGate`]).
#[derive(Debug, Default, Clone)]
pub struct SharedBudgets(Arc<Mutex<DisruptionBudgets>>);

impl SharedBudgets {
    pub fn lock(&self) -> MutexGuard<'_, DisruptionBudgets> {
        // The data stays consistent whatever a panicking holder did: every
        // method leaves it whole.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl PdbGate for SharedBudgets {
    fn allow(&mut self, key: &str, _reason: EvictionReason) -> bool {
        let verdict = self.lock().decide(key);
        if !verdict.allowed() {
            tracing::info!(pod = %key, ?verdict, "eviction refused by PodDisruptionBudget");
        }
        verdict.allowed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(app: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), app.to_string())])
    }

    fn pod(name: &str, app: &str, healthy: bool) -> PodHealth {
        PodHealth {
            key: format!("default/{name}"),
            namespace: "default".into(),
            labels: labels(app),
            healthy,
        }
    }

    fn pdb(name: &str, app: &str, budget: Budget) -> PdbSpec {
        PdbSpec {
            key: format!("default/{name}"),
            namespace: "default".into(),
            selector: Some(Selector {
                match_labels: labels(app),
                match_expressions: Vec::new(),
            }),
            budget,
            unhealthy_policy: UnhealthyPodEvictionPolicy::IfHealthyBudget,
        }
    }

    fn three_web(budget: Budget) -> DisruptionBudgets {
        let mut b = DisruptionBudgets::default();
        b.set_view(
            vec![pdb("web", "web", budget)],
            vec![
                pod("w1", "web", true),
                pod("w2", "web", true),
                pod("w3", "web", true),
                pod("db", "db", true),
            ],
        );
        b
    }

    fn status(b: &DisruptionBudgets) -> BudgetStatus {
        b.statuses()[0].1
    }

    // spec: E6 — desiredHealthy from minAvailable, counts and percentages
    // rounded up; from maxUnavailable, expected minus the rounded-up share.
    #[test]
    fn desired_healthy_per_kind() {
        use IntOrPercent::*;
        let cases = [
            (Budget::MinAvailable(Int(2)), 2, 1),
            (Budget::MinAvailable(Percent(50)), 2, 1), // 1.5 → 2
            (Budget::MinAvailable(Percent(100)), 3, 0),
            (Budget::MaxUnavailable(Int(1)), 2, 1),
            (Budget::MaxUnavailable(Percent(10)), 2, 1), // 0.3 → 1 unavailable
            (Budget::MaxUnavailable(Int(0)), 3, 0),
            (Budget::MaxUnavailable(Int(5)), 0, 3),
        ];
        for (budget, desired, allowed) in cases {
            let s = status(&three_web(budget));
            assert_eq!(s.expected, 3, "{budget:?}");
            assert_eq!(s.current_healthy, 3, "{budget:?}");
            assert_eq!(s.desired_healthy, desired, "{budget:?}");
            assert_eq!(s.disruptions_allowed, allowed, "{budget:?}");
        }
    }

    // spec: E6, U1 — two evictions in one pass do not both spend the one
    // disruption the budget allows; the second is refused (and retried).
    #[test]
    fn one_allowance_is_spent_once() {
        let mut b = three_web(Budget::MinAvailable(IntOrPercent::Int(2)));
        assert_eq!(
            b.decide("default/w1"),
            PdbVerdict::Allowed {
                pdb: "default/web".into()
            }
        );
        let second = b.decide("default/w2");
        assert!(
            matches!(&second, PdbVerdict::Refused { status, .. } if status.current_healthy == 2 && status.disruptions_allowed == 0),
            "{second:?}"
        );
        // A pod no budget guards is not held up.
        assert_eq!(b.decide("default/db"), PdbVerdict::Unguarded);
        // The evicted pod leaves the state and its replacement is ready:
        // the next eviction may go.
        b.set_view(
            vec![pdb(
                "web",
                "web",
                Budget::MinAvailable(IntOrPercent::Int(2)),
            )],
            vec![
                pod("w2", "web", true),
                pod("w3", "web", true),
                pod("w4", "web", true),
            ],
        );
        assert!(b.decide("default/w2").allowed());
    }

    // spec: E6 — a disrupted pod stays counted out while the file still
    // lists it as ready (its eviction is under way).
    #[test]
    fn disrupted_pod_still_in_the_state_is_not_healthy() {
        let budget = Budget::MaxUnavailable(IntOrPercent::Int(1));
        let mut b = three_web(budget);
        assert!(b.decide("default/w1").allowed());
        b.set_view(
            vec![pdb("web", "web", budget)],
            vec![
                pod("w1", "web", true),
                pod("w2", "web", true),
                pod("w3", "web", true),
            ],
        );
        assert!(!b.decide("default/w3").allowed());
    }

    // spec: E6 — unhealthy pods: IfHealthyBudget evicts them for free only
    // while the budget is met; AlwaysAllow always.
    #[test]
    fn unhealthy_pod_policies() {
        let budget = Budget::MinAvailable(IntOrPercent::Int(2));
        let pods = vec![
            pod("w1", "web", true),
            pod("w2", "web", true),
            pod("w3", "web", false),
        ];
        let mut b = DisruptionBudgets::default();
        b.set_view(vec![pdb("web", "web", budget)], pods.clone());
        assert!(matches!(
            b.decide("default/w3"),
            PdbVerdict::AllowedUnhealthy { .. }
        ));
        // Free: the healthy pods' allowance (2 − 2 = 0) is untouched, so a
        // healthy pod is still refused.
        assert!(!b.decide("default/w1").allowed());

        // Budget not met (one healthy of two wanted): IfHealthyBudget refuses.
        let mut short = pods.clone();
        short[1].healthy = false;
        b.set_view(vec![pdb("web", "web", budget)], short.clone());
        assert!(!b.decide("default/w3").allowed());
        let mut always = pdb("web", "web", budget);
        always.unhealthy_policy = UnhealthyPodEvictionPolicy::AlwaysAllow;
        b.set_view(vec![always], short);
        assert!(b.decide("default/w3").allowed());
        assert!(!b.decide("default/w1").allowed());
    }

    #[test]
    fn two_budgets_on_one_pod_refuse() {
        let mut b = DisruptionBudgets::default();
        b.set_view(
            vec![
                pdb("a", "web", Budget::MaxUnavailable(IntOrPercent::Int(3))),
                pdb("b", "web", Budget::MaxUnavailable(IntOrPercent::Int(3))),
            ],
            vec![pod("w1", "web", true)],
        );
        assert_eq!(
            b.decide("default/w1"),
            PdbVerdict::SeveralBudgets(vec!["default/a".into(), "default/b".into()])
        );
    }

    #[test]
    fn selectors_namespaces_and_expressions() {
        let mut p = pod("w1", "web", true);
        p.labels.insert("tier".into(), "front".into());
        let sel = |exprs: Vec<(&str, SelectorOp)>| Selector {
            match_labels: BTreeMap::new(),
            match_expressions: exprs.into_iter().map(|(k, o)| (k.to_string(), o)).collect(),
        };
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert!(sel(vec![]).matches(&p.labels), "empty selects all");
        assert!(sel(vec![("tier", SelectorOp::In(set(&["front", "x"])))]).matches(&p.labels));
        assert!(!sel(vec![("tier", SelectorOp::NotIn(set(&["front"])))]).matches(&p.labels));
        assert!(sel(vec![("zone", SelectorOp::NotIn(set(&["a"])))]).matches(&p.labels));
        assert!(sel(vec![("app", SelectorOp::Exists)]).matches(&p.labels));
        assert!(!sel(vec![("app", SelectorOp::DoesNotExist)]).matches(&p.labels));
        let mut other_ns = pdb("web", "web", Budget::MinAvailable(IntOrPercent::Int(1)));
        other_ns.namespace = "prod".into();
        assert!(!other_ns.guards(&p));
        let mut null = pdb("web", "web", Budget::MinAvailable(IntOrPercent::Int(1)));
        null.selector = None;
        assert!(
            !null.guards(&p),
            "policy/v1: a null selector selects nothing"
        );
    }
}
