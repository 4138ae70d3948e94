//! PodTopologySpread: `DoNotSchedule` constraints filter, `ScheduleAnyway`
//! ones score.
//!
//! Matching pods are counted per domain (the values of `topologyKey`) over
//! the nodes that carry every key of the constraints and pass the pod's
//! inclusion policies: `nodeAffinityPolicy: Honor` (the default: nodes the
//! pod's nodeSelector / required affinity accept) and `nodeTaintsPolicy:
//! Honor` (not the default: nodes whose taints it tolerates). A node may
//! take the pod while `count(its domain) + self − min(count over domains)`
//! stays within `maxSkew`, the minimum being 0 while fewer than
//! `minDomains` domains exist.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::cluster::{Cluster, NodeState};
use crate::error::InputError;
use crate::pod_info::PodInfo;
use crate::pod_terms::{add_label_keys, compile_selector, Namespaces, PodMatcher};
use crate::taints::untolerated;

/// Upstream's reason when a node breaks a constraint.
pub const REASON_SKEW: &str = "node(s) didn't match pod topology spread constraints";
/// Upstream's reason when a node lacks a constraint's topology key.
pub const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// One `topologySpreadConstraints` entry, checked.
#[derive(Debug, Clone)]
pub(crate) struct SpreadConstraint {
    pub max_skew: u32,
    pub topology_key: String,
    /// `whenUnsatisfiable: DoNotSchedule`.
    pub hard: bool,
    pub matcher: PodMatcher,
    pub min_domains: u32,
    pub honor_affinity: bool,
    pub honor_taints: bool,
    /// Whether the pod itself matches the selector (it adds one to the
    /// domain it lands in).
    pub self_match: bool,
}

/// The pod's constraints; `labels` are its own, for `matchLabelKeys`.
pub(crate) fn parse_constraints(
    pod: &Pod,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    object: &str,
) -> Result<Vec<SpreadConstraint>, InputError> {
    let list = pod
        .spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref());
    let mut out = Vec::new();
    for (i, c) in list.into_iter().flatten().enumerate() {
        let field = |f: &str| format!("spec.topologySpreadConstraints[{i}].{f}");
        let err = |f: &str, why: String| Err(InputError::new(object, field(f), why));
        let max_skew = match u32::try_from(c.max_skew) {
            Ok(n) if n >= 1 => n,
            _ => {
                return err(
                    "maxSkew",
                    format!("{} is not a positive integer", c.max_skew),
                )
            }
        };
        if c.topology_key.is_empty() {
            return err("topologyKey", "required".into());
        }
        let hard = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => true,
            "ScheduleAnyway" => false,
            other => {
                return err(
                    "whenUnsatisfiable",
                    format!("{other:?} is not DoNotSchedule or ScheduleAnyway"),
                )
            }
        };
        let min_domains = match c.min_domains {
            None => 1,
            Some(n) if n >= 1 && hard => u32::try_from(n).unwrap_or(1),
            Some(n) if n >= 1 => return err("minDomains", "only with DoNotSchedule".into()),
            Some(n) => return err("minDomains", format!("{n} is not a positive integer")),
        };
        let policy = |f: &str, v: Option<&String>, default: bool| match v.map(String::as_str) {
            None => Ok(default),
            Some("Honor") => Ok(true),
            Some("Ignore") => Ok(false),
            Some(other) => Err(InputError::new(
                object,
                field(f),
                format!("{other:?} is not Honor or Ignore"),
            )),
        };
        let honor_affinity = policy("nodeAffinityPolicy", c.node_affinity_policy.as_ref(), true)?;
        let honor_taints = policy("nodeTaintsPolicy", c.node_taints_policy.as_ref(), false)?;
        let mut selector = match c.label_selector.as_ref() {
            Some(s) => Some(compile_selector(s, object, &field("labelSelector"))?),
            None => None,
        };
        if let Some(sel) = selector.as_mut() {
            add_label_keys(sel, c.match_label_keys.as_ref(), labels, false);
        }
        let matcher = PodMatcher {
            namespaces: Namespaces::Only([namespace.to_owned()].into()),
            selector,
        };
        out.push(SpreadConstraint {
            self_match: matcher.matches(namespace, labels),
            max_skew,
            topology_key: c.topology_key.clone(),
            hard,
            matcher,
            min_domains,
            honor_affinity,
            honor_taints,
        });
    }
    Ok(out)
}

/// Counts of one constraint over its domains.
#[derive(Debug)]
struct Tally<'c> {
    domain_of_slot: &'c [Option<u32>],
    counts: Vec<u32>,
    domains: u32,
    min: u32,
    max_skew: u32,
    self_match: u32,
}

/// The counts a pod's constraints need, computed once per pod: `hard` for
/// the filter, `soft` for the score.
#[derive(Debug, Default)]
pub(crate) struct SpreadState<'c> {
    hard: Vec<Tally<'c>>,
    soft: Vec<Tally<'c>>,
}

/// Readies the cluster's counters and domains for the pod's constraints.
pub(crate) fn prepare(cluster: &mut Cluster, pod: &PodInfo) {
    for c in &pod.spread {
        cluster.ensure_domains(&c.topology_key);
        cluster.ensure_counter(true, std::slice::from_ref(&c.matcher));
    }
}

/// Counts matching pods per domain for each constraint (after
/// [`prepare`]).
pub(crate) fn prefilter<'c>(cluster: &'c Cluster, pod: &PodInfo) -> SpreadState<'c> {
    let hard: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| c.hard).collect();
    let soft: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| !c.hard).collect();
    SpreadState {
        hard: tally(cluster, pod, &hard),
        soft: tally(cluster, pod, &soft),
    }
}

fn tally<'c>(cluster: &'c Cluster, pod: &PodInfo, group: &[&SpreadConstraint]) -> Vec<Tally<'c>> {
    let mut out = Vec::with_capacity(group.len());
    let mut sources = Vec::with_capacity(group.len());
    for c in group {
        let (Some(domains), Some(counter)) = (
            cluster.domains(&c.topology_key),
            cluster.spread_counts.get(&c.matcher.key()),
        ) else {
            // prepare() was not called: count nothing rather than panic.
            return Vec::new();
        };
        sources.push(&counter.counts);
        out.push(Tally {
            domain_of_slot: &domains.of_slot,
            counts: vec![0; domains.len],
            domains: 0,
            min: 0,
            max_skew: c.max_skew,
            self_match: u32::from(c.self_match),
        });
    }
    if out.is_empty() {
        return out;
    }
    let mut present: Vec<Vec<bool>> = out.iter().map(|t| vec![false; t.counts.len()]).collect();
    for (slot, node) in cluster.slots().iter().enumerate() {
        let Some(node) = node else { continue };
        if out
            .iter()
            .any(|t| t.domain_of_slot.get(slot).copied().flatten().is_none())
        {
            continue;
        }
        let affinity_ok = pod.required.is_empty() || pod.required.matches(&node.name, &node.labels);
        for (i, c) in group.iter().enumerate() {
            if !included(c, pod, node, affinity_ok) {
                continue;
            }
            if let Some(d) = out[i].domain_of_slot.get(slot).copied().flatten() {
                let d = d as usize;
                out[i].counts[d] += sources[i].get(slot).copied().unwrap_or(0);
                present[i][d] = true;
            }
        }
    }
    for ((t, p), c) in out.iter_mut().zip(&present).zip(group) {
        let seen: Vec<u32> = t
            .counts
            .iter()
            .zip(p)
            .filter(|(_, here)| **here)
            .map(|(n, _)| *n)
            .collect();
        t.domains = u32::try_from(seen.len()).unwrap_or(u32::MAX);
        t.min = if t.domains < c.min_domains {
            0
        } else {
            seen.iter().copied().min().unwrap_or(0)
        };
    }
    out
}

fn included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeState, affinity_ok: bool) -> bool {
    (!c.honor_affinity || affinity_ok)
        && (!c.honor_taints || !untolerated(&pod.tolerations, &node.taints))
}

impl SpreadState<'_> {
    /// The filter on one node.
    pub(crate) fn check(&self, slot: usize) -> Result<(), &'static str> {
        for t in &self.hard {
            let Some(d) = t.domain_of_slot.get(slot).copied().flatten() else {
                return Err(REASON_MISSING_LABEL);
            };
            let here = t.counts[d as usize];
            let skew = i64::from(here) + i64::from(t.self_match) - i64::from(t.min);
            if skew > i64::from(t.max_skew) {
                return Err(REASON_SKEW);
            }
        }
        Ok(())
    }

    /// Whether there are `ScheduleAnyway` constraints to score.
    pub(crate) fn scores(&self) -> bool {
        !self.soft.is_empty()
    }

    /// The raw spread score of a node, lower being better; `None` for a
    /// node lacking a key (upstream ignores it and gives it 0 after
    /// normalising). Each constraint adds `count × ln(domains + 2)`, so
    /// constraints over fewer domains weigh less, plus `maxSkew − 1`.
    pub(crate) fn raw_score(&self, slot: usize) -> Option<i64> {
        let mut score = 0f64;
        for t in &self.soft {
            let d = t.domain_of_slot.get(slot).copied().flatten()?;
            let weight = (f64::from(t.domains) + 2.0).ln();
            score += f64::from(t.counts[d as usize]) * weight + f64::from(t.max_skew - 1);
        }
        // Scores stay far below 2^53; the cast cannot lose anything.
        Some(score.round() as i64)
    }
}
