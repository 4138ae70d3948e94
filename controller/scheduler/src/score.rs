//! Node scores, each 0–100 as upstream's plugins give them, and their
//! normalisation over the feasible nodes. [`crate::schedule`] weighs them
//! as kube-scheduler's default profile does: TaintToleration 3,
//! NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2,
//! NodeResourcesFit (least allocated) 1, NodeResourcesBalancedAllocation 1.

use crate::cluster::NodeState;
use crate::resources::Demand;

/// The best score a plugin gives.
pub(crate) const MAX_NODE_SCORE: i64 = 100;

fn least(capacity: i128, requested: i128) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    i64::try_from((capacity - requested) * i128::from(MAX_NODE_SCORE) / capacity).unwrap_or(0)
}

/// NodeResourcesFit's `LeastAllocated`: the free share of cpu and memory
/// after placing the pod, averaged with equal weights. It reads the
/// non-zero requests, so pods that name no request still spread.
pub(crate) fn least_allocated(node: &NodeState, pod: &Demand) -> i64 {
    let cpu = least(
        node.allocatable.cpu_milli,
        node.requested.non_zero_cpu + pod.non_zero_cpu,
    );
    let memory = least(
        node.allocatable.memory,
        node.requested.non_zero_memory + pod.non_zero_memory,
    );
    (cpu + memory) / 2
}

fn fraction(requested: i128, allocatable: i128) -> Option<f64> {
    if allocatable <= 0 {
        return None;
    }
    // Ratios of quantities far below 2^53 bytes; f64 is exact enough.
    Some((requested as f64 / allocatable as f64).min(1.0))
}

/// NodeResourcesBalancedAllocation: 100 × (1 − the spread of the cpu and
/// memory fractions used after placing the pod), on the exact requests,
/// so nodes whose cpu and memory fill up alike score higher.
pub(crate) fn balanced(node: &NodeState, pod: &Demand) -> i64 {
    let cpu = fraction(
        node.requested.exact.cpu_milli + pod.exact.cpu_milli,
        node.allocatable.cpu_milli,
    );
    let memory = fraction(
        node.requested.exact.memory + pod.exact.memory,
        node.allocatable.memory,
    );
    let std = match (cpu, memory) {
        (Some(c), Some(m)) => ((c - m) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Upstream's `DefaultNormalizeScore`: scales scores so the highest is
/// 100; `reverse` turns "more is worse" counts (untolerated
/// `PreferNoSchedule` taints) around. All zeros stay 0, or become 100
/// when reversed.
pub(crate) fn normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for s in scores.iter_mut() {
        *s = if max == 0 {
            if reverse {
                MAX_NODE_SCORE
            } else {
                0
            }
        } else {
            let scaled = MAX_NODE_SCORE * *s / max;
            if reverse {
                MAX_NODE_SCORE - scaled
            } else {
                scaled
            }
        };
    }
}

/// PodTopologySpread's normalisation: the node with the fewest matching
/// pods gets 100, the most 0 (scaled by the highest), nodes without the
/// keys 0.
pub(crate) fn normalize_spread(raw: &[Option<i64>]) -> Vec<i64> {
    let seen = raw.iter().flatten().copied();
    let max = seen.clone().max().unwrap_or(0);
    let min = seen.min().unwrap_or(0);
    raw.iter()
        .map(|r| match r {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}

/// FNV-1a over the pod key and the node name: the tie-break among
/// equally scored nodes. Upstream picks one at random; this picks one that
/// looks random but is the same on every run. [`tie_break_seed`] hashes
/// the pod once; this goes on with the node.
pub(crate) fn tie_break(seed: u64, node: &str) -> u64 {
    fnv(seed, node.as_bytes())
}

/// The hash of the pod's key, to go on with each node's name.
pub(crate) fn tie_break_seed(pod: &str) -> u64 {
    fnv(fnv(0xcbf2_9ce4_8422_2325, pod.as_bytes()), &[0])
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
