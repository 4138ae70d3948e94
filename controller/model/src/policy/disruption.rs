//! PodDisruptionBudgets as kube-apiserver's Eviction subresource applies
//! them (spec E6), decided without I/O over the `k8s-openapi` types:
//!
//! - which budgets guard a pod: those of its namespace whose selector
//!   matches its labels (a `policy/v1` null selector matches nothing, an
//!   empty one every pod; a selector that does not parse matches nothing, as
//!   kube-apiserver skips it);
//! - a budget's status: `expected` the matching pods, `currentHealthy` those
//!   Ready, not being deleted and not already in `disruptedPods`,
//!   `desiredHealthy` from `minAvailable` (a percentage of `expected` rounded
//!   up) or `expected − maxUnavailable` (a percentage rounded up),
//!   `disruptionsAllowed = max(0, currentHealthy − desiredHealthy)`;
//! - the verdict on one eviction: pods terminal, pending or already being
//!   deleted skip the budget; an unhealthy pod goes without spending under
//!   `AlwaysAllow`, or under `IfHealthyBudget` when the budget is met; else
//!   one disruption is spent, or the eviction is refused (429).
//!
//! The agent applies the same rules over its state file
//! (`agent/src/pods/disruption.rs` keeps only its bookkeeping: which pods
//! it knows, which evictions it has allowed).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The message of kube-apiserver's 429, which `kubectl drain` prints.
pub const REFUSED_MESSAGE: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// The message of kube-apiserver's 500 when several budgets guard a pod.
pub const SEVERAL_BUDGETS_MESSAGE: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// How long an eviction recorded in `disruptedPods` keeps its pod out of
/// the healthy count while the pod is not yet being deleted (Kubernetes'
/// disruption controller: `DeletionTimeout`, 2 minutes). After that the
/// eviction is taken to have failed and the pod counts again.
pub const DISRUPTION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

/// A `matchExpressions` entry or a budget field that cannot be read, naming
/// the field as a state file or a request spells it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("spec.selector.matchExpressions[{index}].key: missing")]
    MissingKey { index: usize },
    #[error("spec.selector.matchExpressions[{index}].operator: {operator:?} is not In, NotIn, Exists or DoesNotExist")]
    UnknownOperator { index: usize, operator: String },
    #[error("spec.selector.matchExpressions[{index}].values: required for {operator}")]
    ValuesRequired { index: usize, operator: String },
    #[error("spec.selector.matchExpressions[{index}].values: must be empty for {operator}")]
    ValuesForbidden { index: usize, operator: String },
    #[error("{field}: {value:?} is neither a whole number nor a percentage like \"50%\"")]
    NotIntOrPercent { field: &'static str, value: String },
    #[error("{field}: {value:?} is more than 100%")]
    OverHundredPercent { field: &'static str, value: String },
    #[error("{field}: must be >= 0, got {value}")]
    Negative { field: &'static str, value: i64 },
    #[error("spec.minAvailable: set together with spec.maxUnavailable; set one of them")]
    BothSet,
    #[error("spec.unhealthyPodEvictionPolicy: {value:?} is not IfHealthyBudget or AlwaysAllow")]
    UnknownUnhealthyPolicy { value: String },
}

impl PolicyError {
    /// The field path alone (`spec.minAvailable`), for callers that report
    /// the field and the message apart.
    pub fn field(&self) -> String {
        self.split().0
    }

    /// The message without the field.
    pub fn message(&self) -> String {
        self.split().1
    }

    fn split(&self) -> (String, String) {
        // Every message above is `field: message`, and no field path holds
        // ": ".
        let text = self.to_string();
        match text.split_once(": ") {
            Some((f, m)) => (f.to_string(), m.to_string()),
            None => (String::new(), text),
        }
    }
}

/// One `matchExpressions` operator, with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorOp {
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
}

/// A label selector read and checked once, so matching it against many
/// pods cannot fail.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<(String, SelectorOp)>,
}

impl Selector {
    /// Check every expression: a known operator, a key, values for `In`
    /// and `NotIn` and none for `Exists` and `DoesNotExist`.
    pub fn parse(sel: &LabelSelector) -> Result<Self, PolicyError> {
        let mut match_expressions = Vec::new();
        for (index, r) in sel.match_expressions.iter().flatten().enumerate() {
            if r.key.is_empty() {
                return Err(PolicyError::MissingKey { index });
            }
            let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
            let operator = r.operator.clone();
            let op = match r.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(PolicyError::ValuesRequired { index, operator })
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(PolicyError::ValuesForbidden { index, operator })
                }
                "In" => SelectorOp::In(values),
                "NotIn" => SelectorOp::NotIn(values),
                "Exists" => SelectorOp::Exists,
                "DoesNotExist" => SelectorOp::DoesNotExist,
                _ => return Err(PolicyError::UnknownOperator { index, operator }),
            };
            match_expressions.push((r.key.clone(), op));
        }
        Ok(Selector {
            match_labels: sel.match_labels.clone().unwrap_or_default(),
            match_expressions,
        })
    }

    /// Every `matchLabels` pair and every expression hold (an empty
    /// selector matches everything).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .all(|(k, op)| match (op, labels.get(k)) {
                    (SelectorOp::In(vs), Some(v)) => vs.contains(v),
                    (SelectorOp::In(_), None) => false,
                    (SelectorOp::NotIn(vs), Some(v)) => !vs.contains(v),
                    (SelectorOp::NotIn(_), None) => true,
                    (SelectorOp::Exists, v) => v.is_some(),
                    (SelectorOp::DoesNotExist, v) => v.is_none(),
                })
    }
}

/// Whether `labels` satisfy `sel`: every `matchLabels` pair and every
/// expression (an empty selector matches everything).
pub fn selector_matches(
    sel: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, PolicyError> {
    Selector::parse(sel).map(|s| s.matches(labels))
}

/// Whether a budget in `pdb_namespace` with `spec` guards the pod.
pub fn guards(pdb_namespace: &str, spec: &PodDisruptionBudgetSpec, pod: &PodFacts) -> bool {
    pdb_namespace == pod.namespace
        && spec
            .selector
            .as_ref()
            .is_some_and(|s| selector_matches(s, &pod.labels).unwrap_or(false))
}

/// A count or a percentage of the expected pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    /// A non-negative count or a whole percentage 0–100 (`"25%"`), as the
    /// API server accepts for a budget's `minAvailable` / `maxUnavailable`.
    pub fn parse(field: &'static str, v: &IntOrString) -> Result<Self, PolicyError> {
        let parsed = Self::parse_uncapped(field, v)?;
        if let (IntOrPercent::Percent(p), IntOrString::String(s)) = (parsed, v) {
            if p > 100 {
                return Err(PolicyError::OverHundredPercent {
                    field,
                    value: s.clone(),
                });
            }
        }
        Ok(parsed)
    }

    /// A non-negative count or a whole percentage of any size (`"200%"`),
    /// as the API server accepts for a Deployment's `maxSurge`.
    pub fn parse_uncapped(field: &'static str, v: &IntOrString) -> Result<Self, PolicyError> {
        match v {
            IntOrString::Int(n) => {
                u32::try_from(*n)
                    .map(IntOrPercent::Int)
                    .map_err(|_| PolicyError::Negative {
                        field,
                        value: i64::from(*n),
                    })
            }
            IntOrString::String(s) => {
                let p = s
                    .strip_suffix('%')
                    // u32's parser takes a leading '+'; a percentage does not.
                    .filter(|d| !d.starts_with('+'))
                    .and_then(|d| d.parse::<u32>().ok())
                    .ok_or_else(|| PolicyError::NotIntOrPercent {
                        field,
                        value: s.clone(),
                    })?;
                Ok(IntOrPercent::Percent(p))
            }
        }
    }

    /// Kubernetes' `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
    pub fn scaled_up(self, total: u32) -> u32 {
        self.scaled(total, true)
    }

    /// Kubernetes' `GetScaledValueFromIntOrPercent(v, total, roundUp=false)`
    /// (a Deployment's `maxUnavailable`).
    pub fn scaled_down(self, total: u32) -> u32 {
        self.scaled(total, false)
    }

    fn scaled(self, total: u32, round_up: bool) -> u32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                let product = u64::from(p) * u64::from(total);
                let v = if round_up {
                    product.div_ceil(100)
                } else {
                    product / 100
                };
                u32::try_from(v).unwrap_or(u32::MAX)
            }
        }
    }
}

/// What a budget asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    MinAvailable(IntOrPercent),
    MaxUnavailable(IntOrPercent),
}

impl Budget {
    /// From `spec.minAvailable` / `spec.maxUnavailable`. A spec with
    /// neither asks for nothing (kube-apiserver's validation would refuse
    /// it; the disruption controller then computes zero desired pods).
    pub fn of(spec: &PodDisruptionBudgetSpec) -> Result<Self, PolicyError> {
        match (&spec.min_available, &spec.max_unavailable) {
            (Some(_), Some(_)) => Err(PolicyError::BothSet),
            (Some(m), None) => Ok(Budget::MinAvailable(IntOrPercent::parse(
                "spec.minAvailable",
                m,
            )?)),
            (None, Some(m)) => Ok(Budget::MaxUnavailable(IntOrPercent::parse(
                "spec.maxUnavailable",
                m,
            )?)),
            (None, None) => Ok(Budget::MinAvailable(IntOrPercent::Int(0))),
        }
    }

    pub fn desired_healthy(self, expected: u32) -> u32 {
        match self {
            Budget::MinAvailable(v) => v.scaled_up(expected),
            Budget::MaxUnavailable(v) => expected.saturating_sub(v.scaled_up(expected)),
        }
    }
}

/// `spec.unhealthyPodEvictionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnhealthyPodEvictionPolicy {
    #[default]
    IfHealthyBudget,
    AlwaysAllow,
}

impl UnhealthyPodEvictionPolicy {
    /// Unset or unknown is the default, `IfHealthyBudget`: a stored budget
    /// is applied as it is, never refused at eviction time.
    pub fn of(spec: &PodDisruptionBudgetSpec) -> Self {
        Self::parse(spec).unwrap_or_default()
    }

    /// Unset is `IfHealthyBudget`; a value that is neither is an error, for
    /// a budget being accepted.
    pub fn parse(spec: &PodDisruptionBudgetSpec) -> Result<Self, PolicyError> {
        match spec.unhealthy_pod_eviction_policy.as_deref() {
            None | Some("IfHealthyBudget") => Ok(UnhealthyPodEvictionPolicy::IfHealthyBudget),
            Some("AlwaysAllow") => Ok(UnhealthyPodEvictionPolicy::AlwaysAllow),
            Some(o) => Err(PolicyError::UnknownUnhealthyPolicy {
                value: o.to_string(),
            }),
        }
    }
}

/// What the budget rules need to know of one pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodFacts {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.phase`; Kubernetes defaults an absent one to `Pending`.
    pub phase: String,
}

impl PodFacts {
    pub fn of(meta: &ObjectMeta, status: Option<&PodStatus>) -> Self {
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        PodFacts {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            ready,
            deleting: meta.deletion_timestamp.is_some(),
            phase: status
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
        }
    }

    /// Counts towards `currentHealthy`.
    pub fn healthy(&self) -> bool {
        self.ready && !self.deleting
    }

    /// kube-apiserver's `canIgnorePDB`: a terminal or pending pod, or one
    /// already being deleted, is no disruption to guard against.
    pub fn can_ignore_budget(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed" | "Pending") || self.deleting
    }
}

/// The recorded evictions that still count: of pods that exist, are not
/// yet being deleted and were evicted less than [`DISRUPTION_TIMEOUT`]
/// ago. The others are done (the pod went or is going) or failed.
pub fn live_disruptions(
    recorded: &BTreeMap<String, Time>,
    pods: &[PodFacts],
    now: Timestamp,
) -> BTreeMap<String, Time> {
    recorded
        .iter()
        .filter(|(name, at)| {
            pods.iter().any(|p| &p.name == *name && !p.deleting)
                && now.duration_since(at.0) < DISRUPTION_TIMEOUT
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A budget's status fields, as the disruption controller computes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetStatus {
    pub expected: u32,
    pub current_healthy: u32,
    pub desired_healthy: u32,
    pub disruptions_allowed: u32,
}

impl BudgetStatus {
    /// The disruption controller's arithmetic: `desiredHealthy` from the
    /// budget over `expected` pods, `disruptionsAllowed = max(0,
    /// currentHealthy − desiredHealthy)` (0 when nothing is expected, as
    /// then nothing is healthy either).
    pub fn of(budget: Budget, expected: u32, current_healthy: u32) -> Self {
        let desired_healthy = budget.desired_healthy(expected);
        BudgetStatus {
            expected,
            current_healthy,
            desired_healthy,
            disruptions_allowed: current_healthy.saturating_sub(desired_healthy),
        }
    }
}

/// The status of `budget` over the pods it guards; pods in `disrupted`
/// (evictions already allowed) do not count as healthy.
pub fn budget_status(
    budget: Budget,
    guarded: &[PodFacts],
    disrupted: &BTreeMap<String, Time>,
) -> BudgetStatus {
    let expected = u32::try_from(guarded.len()).unwrap_or(u32::MAX);
    let current_healthy = guarded
        .iter()
        .filter(|p| p.healthy() && !disrupted.contains_key(&p.name))
        .count();
    let current_healthy = u32::try_from(current_healthy).unwrap_or(u32::MAX);
    BudgetStatus::of(budget, expected, current_healthy)
}

/// The answer to one eviction under one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed; one disruption is spent (recorded in the budget's status).
    Spend,
    /// An unhealthy pod, allowed without spending; the deletion must be
    /// made against the pod as read, so that a pod that turned Ready
    /// meanwhile is not taken (kube-apiserver's resourceVersion
    /// precondition).
    AllowUnhealthy,
    /// The budget has no disruption to give: 429.
    Refused,
}

/// Decide the eviction of a pod guarded by a budget with `status` and
/// `policy`; `healthy`: the pod counts towards `currentHealthy` (Ready, not
/// being deleted, not already recorded as disrupted).
pub fn decide(healthy: bool, status: &BudgetStatus, policy: UnhealthyPodEvictionPolicy) -> Verdict {
    if !healthy {
        let free = match policy {
            UnhealthyPodEvictionPolicy::AlwaysAllow => true,
            UnhealthyPodEvictionPolicy::IfHealthyBudget => {
                status.desired_healthy > 0 && status.current_healthy >= status.desired_healthy
            }
        };
        if free {
            return Verdict::AllowUnhealthy;
        }
    }
    if status.disruptions_allowed < 1 {
        Verdict::Refused
    } else {
        Verdict::Spend
    }
}

/// The `details.causes` message of a refusal, as kube-apiserver words it.
pub fn refusal_cause(pdb_name: &str, status: &BudgetStatus) -> String {
    format!(
        "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
        status.desired_healthy, status.current_healthy
    )
}

fn i32_of(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The budget's status after spending one disruption on `pod` at `now`:
/// the counts as computed, one disruption fewer, the pod recorded.
pub fn spent_status(
    computed: &BudgetStatus,
    mut disrupted: BTreeMap<String, Time>,
    pod: &str,
    now: Timestamp,
    generation: Option<i64>,
    conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
) -> PodDisruptionBudgetStatus {
    disrupted.insert(pod.to_string(), Time(now));
    PodDisruptionBudgetStatus {
        conditions,
        current_healthy: Some(i32_of(computed.current_healthy)),
        desired_healthy: Some(i32_of(computed.desired_healthy)),
        disrupted_pods: Some(disrupted),
        disruptions_allowed: Some(i32_of(computed.disruptions_allowed.saturating_sub(1))),
        expected_pods: Some(i32_of(computed.expected)),
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests;
