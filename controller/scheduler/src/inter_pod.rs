//! Required inter-pod affinity and anti-affinity (InterPodAffinity's
//! filter), in the three checks upstream makes, in its order:
//!
//! 1. the pod's `podAffinity` terms: the node's domain must hold a pod
//!    matching every term; a pod that matches its own terms may start a
//!    group where no matching pod exists yet;
//! 2. the pod's `podAntiAffinity` terms: the node's domain must hold no
//!    pod a term matches;
//! 3. symmetry: no bound pod whose own anti-affinity term matches the
//!    incoming pod may sit in the node's domain for that term's key.
//!
//! A node without a term's topology key fails an affinity term and passes
//! an anti-affinity one, as upstream.

use crate::cluster::{Cluster, Domains};
use crate::pod_info::PodInfo;
use crate::pod_terms::PodMatcher;

/// Upstream's reasons for the three checks, in order.
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// Domains of one topology key that hold a counted pod.
#[derive(Debug)]
struct Marked<'c> {
    domain_of_slot: &'c [Option<u32>],
    hit: Vec<bool>,
}

impl<'c> Marked<'c> {
    fn new(domains: &'c Domains) -> Self {
        Marked {
            domain_of_slot: &domains.of_slot,
            hit: vec![false; domains.len],
        }
    }

    fn mark(&mut self, counts: &[u32]) {
        for (slot, n) in counts.iter().enumerate() {
            if *n > 0 {
                if let Some(Some(d)) = self.domain_of_slot.get(slot) {
                    self.hit[*d as usize] = true;
                }
            }
        }
    }

    /// `None` when the node lacks the key.
    fn hit(&self, slot: usize) -> Option<bool> {
        let d = self.domain_of_slot.get(slot).copied().flatten()?;
        Some(self.hit[d as usize])
    }
}

/// What the three checks need, computed once per pod.
#[derive(Debug, Default)]
pub(crate) struct InterPodState<'c> {
    affinity: Vec<Marked<'c>>,
    /// No pod matches the affinity terms anywhere, and the pod matches
    /// them itself: it may go anywhere that has the keys.
    first_of_group: bool,
    anti: Vec<Marked<'c>>,
    existing: Vec<Marked<'c>>,
}

fn conjunction(pod: &PodInfo) -> Vec<PodMatcher> {
    pod.affinity.iter().map(|t| t.matcher.clone()).collect()
}

/// Readies counters and domains for the pod's terms and for every bound
/// pod's anti-affinity terms.
pub(crate) fn prepare(cluster: &mut Cluster, pod: &PodInfo) {
    if !pod.affinity.is_empty() {
        cluster.ensure_counter(false, &conjunction(pod));
    }
    for t in pod.affinity.iter().chain(&pod.anti_affinity) {
        cluster.ensure_domains(&t.topology_key);
    }
    for t in &pod.anti_affinity {
        cluster.ensure_counter(false, std::slice::from_ref(&t.matcher));
    }
    for key in cluster.anti_term_keys() {
        cluster.ensure_domains(&key);
    }
}

/// Computes the marked domains (after [`prepare`]).
pub(crate) fn prefilter<'c>(cluster: &'c Cluster, pod: &PodInfo) -> InterPodState<'c> {
    let mut state = InterPodState::default();
    if !pod.affinity.is_empty() {
        let key = conjunction(pod)
            .iter()
            .map(PodMatcher::key)
            .collect::<Vec<_>>()
            .join("&");
        let counts = cluster.match_counts.get(&key).map(|c| c.counts.as_slice());
        for t in &pod.affinity {
            if let Some(domains) = cluster.domains(&t.topology_key) {
                let mut m = Marked::new(domains);
                m.mark(counts.unwrap_or(&[]));
                state.affinity.push(m);
            }
        }
        let none_anywhere = state.affinity.iter().all(|m| !m.hit.contains(&true));
        let matches_self = pod
            .affinity
            .iter()
            .all(|t| t.matcher.matches(&pod.namespace, &pod.labels));
        state.first_of_group = none_anywhere && matches_self;
    }
    for t in &pod.anti_affinity {
        let counter = cluster.match_counts.get(&t.matcher.key());
        if let (Some(domains), Some(counter)) = (cluster.domains(&t.topology_key), counter) {
            let mut m = Marked::new(domains);
            m.mark(&counter.counts);
            state.anti.push(m);
        }
    }
    for owner in cluster.anti_terms.matching(&pod.namespace, &pod.labels) {
        if let Some(domains) = cluster.domains(&owner.topology_key) {
            let mut m = Marked::new(domains);
            m.mark(&owner.counts);
            state.existing.push(m);
        }
    }
    state
}

impl InterPodState<'_> {
    /// The filter on one node.
    pub(crate) fn check(&self, slot: usize) -> Result<(), &'static str> {
        if !self.affinity.is_empty() {
            let mut all_hit = true;
            for m in &self.affinity {
                match m.hit(slot) {
                    None => return Err(REASON_AFFINITY),
                    Some(hit) => all_hit &= hit,
                }
            }
            if !all_hit && !self.first_of_group {
                return Err(REASON_AFFINITY);
            }
        }
        if self.anti.iter().any(|m| m.hit(slot) == Some(true)) {
            return Err(REASON_ANTI_AFFINITY);
        }
        if self.existing.iter().any(|m| m.hit(slot) == Some(true)) {
            return Err(REASON_EXISTING_ANTI_AFFINITY);
        }
        Ok(())
    }
}
