//! InterPodAffinity's score, for the incoming pod's preferred terms: each
//! `podAffinity` term adds its weight once per matching pod in the node's
//! domain, each `podAntiAffinity` term takes it away; the totals are
//! scaled so the best node gets 100 and the worst 0.
//!
//! Upstream also scores the other way round (bound pods' preferred terms,
//! and their required affinity terms, that match the incoming pod); that
//! half is left out.

use crate::cluster::Cluster;
use crate::pod_info::PodInfo;
use crate::score::MAX_NODE_SCORE;

/// One term: its weight (negative for anti-affinity), the domain of each
/// node slot, and the matching pods per domain.
#[derive(Debug)]
struct Weighted<'c> {
    weight: i64,
    of_slot: &'c [Option<u32>],
    per_domain: Vec<i64>,
}

/// The pod's preferred terms, counted once per pod.
#[derive(Debug, Default)]
pub(crate) struct PreferredState<'c> {
    terms: Vec<Weighted<'c>>,
}

/// Readies counters and domains for the pod's preferred terms.
pub(crate) fn prepare(cluster: &mut Cluster, pod: &PodInfo) {
    for (_, t) in pod.preferred_affinity.iter().chain(&pod.preferred_anti) {
        cluster.ensure_domains(&t.topology_key);
        cluster.ensure_counter(false, std::slice::from_ref(&t.matcher));
    }
}

/// Sums matching pods per domain for each term (after [`prepare`]).
pub(crate) fn prescore<'c>(cluster: &'c Cluster, pod: &PodInfo) -> PreferredState<'c> {
    let signed = pod
        .preferred_affinity
        .iter()
        .map(|(w, t)| (*w, t))
        .chain(pod.preferred_anti.iter().map(|(w, t)| (-*w, t)));
    let mut terms = Vec::new();
    for (weight, t) in signed {
        let (Some(domains), Some(counter)) = (
            cluster.domains(&t.topology_key),
            cluster.match_counts.get(&t.matcher.key()),
        ) else {
            continue;
        };
        let mut per_domain = vec![0i64; domains.len];
        for (slot, n) in counter.counts.iter().enumerate() {
            if let Some(Some(d)) = domains.of_slot.get(slot) {
                per_domain[*d as usize] += i64::from(*n);
            }
        }
        terms.push(Weighted {
            weight,
            of_slot: &domains.of_slot,
            per_domain,
        });
    }
    PreferredState { terms }
}

impl PreferredState<'_> {
    /// Whether the pod has preferred terms to score.
    pub(crate) fn scores(&self) -> bool {
        !self.terms.is_empty()
    }

    /// The raw score of a node: the weights of the matching pods in its
    /// domains, affinity adding and anti-affinity taking away.
    pub(crate) fn raw_score(&self, slot: usize) -> i64 {
        self.terms
            .iter()
            .filter_map(|t| {
                let d = t.of_slot.get(slot).copied().flatten()?;
                Some(t.weight * t.per_domain[d as usize])
            })
            .sum()
    }
}

/// Upstream's normalisation: `100 × (s − min) / (max − min)`, all 0 when
/// every node scores the same.
pub(crate) fn normalize(raw: &[i64]) -> Vec<i64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    let min = raw.iter().copied().min().unwrap_or(0);
    raw.iter()
        .map(|s| {
            if max == min {
                0
            } else {
                MAX_NODE_SCORE * (s - min) / (max - min)
            }
        })
        .collect()
}
