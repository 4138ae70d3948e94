//! One scheduling cycle per pod, as kube-scheduler runs it: read the pod,
//! filter nodes from a rotating start until enough feasible ones are
//! found, score those, take the best, and assume the pod there.

use std::borrow::Cow;
use std::collections::BTreeMap;

use sluice_model::k8s::Pod;

use crate::cluster::{Cluster, NodeState};
use crate::fit_error::{fit_error_message, unreadable_pod_message, NO_NODES_MESSAGE};
use crate::host_ports::{self, REASON_PORTS};
use crate::inter_pod::{self, InterPodState};
use crate::pod_affinity_score;
use crate::pod_info::{pod_key, PodInfo};
use crate::score::{
    balanced, least_allocated, normalize, normalize_spread, tie_break, tie_break_seed,
    MAX_NODE_SCORE,
};
use crate::taints::{
    intolerable_preferred, tolerates_unschedulable, TaintVerdicts, REASON_UNTOLERATED,
};
use crate::topology_spread::{self, SpreadState};

/// The scheduler name a pod must carry (or leave empty) to be ours.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// NodeUnschedulable's reason: the node is cordoned.
pub const REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// NodeAffinity's reason: `nodeSelector` or required terms unmet.
pub const REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// NodeResourcesFit's reason when `status.allocatable.pods` is reached.
pub const REASON_TOO_MANY_PODS: &str = "Too many pods";
/// Not an upstream reason: upstream nodes always have a readable
/// allocatable, Sluice's may not.
pub const REASON_BROKEN_NODE: &str = "node(s) had an unreadable status.allocatable";

/// Below this many nodes every node is looked at (`minFeasibleNodesToFind`).
const MIN_FEASIBLE_NODES: usize = 100;
/// The adaptive share never goes below this (`minFeasibleNodesPercentageToFind`).
const MIN_FEASIBLE_PERCENT: usize = 5;

/// What became of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Bind the pod to `node`; the cluster view already counts it there.
    Bind { node: String },
    /// No node takes the pod. `message` is kube-scheduler's FitError text
    /// (without the preemption clause: Sluice does not preempt);
    /// `reasons` counts, per reason, the nodes that gave it.
    Unschedulable {
        message: String,
        reasons: BTreeMap<String, usize>,
    },
}

/// Whether the default scheduler should place this pod: no node yet, not
/// being deleted, not finished, `schedulerName` empty or
/// `default-scheduler`, and no `schedulingGates` left (a gated pod waits,
/// as upstream's SchedulingGates plugin keeps it out of the queue).
pub fn wants_scheduling(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let unbound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let ours = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n.is_empty() || n == DEFAULT_SCHEDULER_NAME);
    let gated = spec
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    unbound
        && ours
        && !gated
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The indices of `pods` in kube-scheduler's queue order (PrioritySort):
/// higher `spec.priority` first, then older `creationTimestamp` (pods
/// without one last), then `namespace/name`.
pub fn queue_order(pods: &[Pod]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pods.len()).collect();
    let keys: Vec<_> = pods
        .iter()
        .map(|p| {
            let priority = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (
                std::cmp::Reverse(priority),
                created.is_none(),
                created,
                pod_key(p),
            )
        })
        .collect();
    idx.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    idx
}

/// Schedules the pods that [`wants_scheduling`] accepts, one after the
/// other in [`queue_order`], each decision seeing the ones before it.
/// Returns `(namespace/name, decision)` in that order.
pub fn schedule_all(cluster: &mut Cluster, pods: &[Pod]) -> Vec<(String, Decision)> {
    queue_order(pods)
        .into_iter()
        .map(|i| &pods[i])
        .filter(|p| wants_scheduling(p))
        .map(|p| (pod_key(p), schedule(cluster, p)))
        .collect()
}

/// Decides where `pod` goes. On [`Decision::Bind`] the pod is assumed on
/// its node in `cluster`; if the binding then fails, the caller forgets
/// it with [`Cluster::remove_pod`]. A pod whose spec cannot be read stays
/// unschedulable, its message naming the field.
pub fn schedule(cluster: &mut Cluster, pod: &Pod) -> Decision {
    let nodes = cluster.node_count();
    let info = match PodInfo::parse(pod) {
        Ok(info) => info,
        Err(e) => {
            return Decision::Unschedulable {
                message: unreadable_pod_message(nodes, &e.to_string()),
                reasons: BTreeMap::new(),
            }
        }
    };
    if nodes == 0 {
        return Decision::Unschedulable {
            message: NO_NODES_MESSAGE.to_owned(),
            reasons: BTreeMap::new(),
        };
    }
    cluster.ensure_order();
    topology_spread::prepare(cluster, &info);
    inter_pod::prepare(cluster, &info);
    pod_affinity_score::prepare(cluster, &info);
    let (chosen, processed) = decide(cluster, &info);
    let len = cluster.order().len().max(1);
    cluster.next_start = (cluster.next_start + processed) % len;
    match chosen {
        Ok(node) => {
            // The pod parsed above, so assuming it cannot fail.
            let _ = cluster.assume(pod, &node);
            Decision::Bind { node }
        }
        Err(reasons) => Decision::Unschedulable {
            message: fit_error_message(nodes, &reasons),
            reasons,
        },
    }
}

/// Runs the default profile's filters for `pod` on the node named `node`
/// alone, without scoring or assuming anything: `Ok` if the node takes the
/// pod, else the reasons that node gives, worded as in the FitError.
/// Callers asking "would this pod fit there?" (the cluster autoscaler's
/// template and removal simulations) get the scheduler's own answer this
/// way rather than a second fit implementation. A node the view does not
/// hold, or a pod that cannot be read, is an `Err` naming why.
pub fn filter_node(cluster: &mut Cluster, pod: &Pod, node: &str) -> Result<(), Vec<String>> {
    let info = PodInfo::parse(pod).map_err(|e| vec![e.to_string()])?;
    let Some(slot) = cluster.slot_of(node) else {
        return Err(vec![format!("node {node} not found")]);
    };
    topology_spread::prepare(cluster, &info);
    inter_pod::prepare(cluster, &info);
    let spread = topology_spread::prefilter(cluster, &info);
    let inter = inter_pod::prefilter(cluster, &info);
    let mut taints = TaintVerdicts::new(&info.tolerations);
    let Some(state) = cluster.node(slot) else {
        return Err(vec![format!("node {node} not found")]);
    };
    filter(state, slot, &info, &spread, &inter, &mut taints).map_err(|why| match why {
        Why::One(r) => vec![r.to_owned()],
        Why::Many(rs) => rs.into_iter().map(Cow::into_owned).collect(),
    })
}

/// How many feasible nodes to find before scoring
/// (`numFeasibleNodesToFind`).
pub(crate) fn feasible_to_find(percent: u32, nodes: usize) -> usize {
    if nodes < MIN_FEASIBLE_NODES || percent >= 100 {
        return nodes;
    }
    let percent = match percent as usize {
        0 => 50usize
            .saturating_sub(nodes / 125)
            .max(MIN_FEASIBLE_PERCENT),
        p => p,
    };
    (nodes * percent / 100).max(MIN_FEASIBLE_NODES)
}

type Reasons = Vec<Cow<'static, str>>;

/// Why a node fails a pod: most often one fixed reason, kept without an
/// allocation (a backlog meeting thousands of cordoned or full nodes
/// decides each pod against all of them).
enum Why {
    One(&'static str),
    Many(Reasons),
}

/// Nodes per failure reason, for the FitError message.
#[derive(Default)]
struct Tally {
    fixed: Vec<(&'static str, usize)>,
    other: BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, why: Why) {
        match why {
            Why::One(r) => self.add_fixed(r),
            Why::Many(rs) => {
                for r in rs {
                    match r {
                        Cow::Borrowed(r) => self.add_fixed(r),
                        Cow::Owned(r) => *self.other.entry(r).or_insert(0) += 1,
                    }
                }
            }
        }
    }

    fn add_fixed(&mut self, r: &'static str) {
        match self.fixed.iter_mut().find(|(k, _)| *k == r) {
            Some((_, n)) => *n += 1,
            None => self.fixed.push((r, 1)),
        }
    }

    fn into_map(self) -> BTreeMap<String, usize> {
        let mut out = self.other;
        for (r, n) in self.fixed {
            *out.entry(r.to_owned()).or_insert(0) += n;
        }
        out
    }
}

/// The chosen node or the failure reasons, and how many nodes were looked
/// at (the next pod's search starts after them).
fn decide(cluster: &Cluster, pod: &PodInfo) -> (Result<String, BTreeMap<String, usize>>, usize) {
    let spread = topology_spread::prefilter(cluster, pod);
    let inter = inter_pod::prefilter(cluster, pod);
    let order = cluster.order();
    let n = order.len();
    let want = feasible_to_find(cluster.percentage(), n);
    let mut feasible = Vec::with_capacity(want.min(n));
    let mut tally = Tally::default();
    let mut taints = TaintVerdicts::new(&pod.tolerations);
    let mut processed = 0;
    for i in 0..n {
        let slot = order[(cluster.next_start + i) % n];
        let Some(node) = cluster.node(slot) else {
            continue;
        };
        processed += 1;
        match filter(node, slot, pod, &spread, &inter, &mut taints) {
            Ok(()) => {
                feasible.push(slot);
                if feasible.len() >= want {
                    break;
                }
            }
            Err(why) => tally.add(why),
        }
    }
    let best = match feasible.as_slice() {
        [] => return (Err(tally.into_map()), processed),
        [only] => *only,
        _ => best_node(cluster, pod, &spread, &feasible),
    };
    let name = cluster
        .node(best)
        .map(|n| n.name.clone())
        .unwrap_or_default();
    (Ok(name), processed)
}

/// The default profile's filters in upstream's order; the first that
/// fails gives the node's reasons.
fn filter(
    node: &NodeState,
    slot: usize,
    pod: &PodInfo,
    spread: &SpreadState,
    inter: &InterPodState,
    taints: &mut TaintVerdicts,
) -> Result<(), Why> {
    if node.broken.is_some() {
        return Err(Why::One(REASON_BROKEN_NODE));
    }
    if node.unschedulable && !tolerates_unschedulable(&pod.tolerations) {
        return Err(Why::One(REASON_UNSCHEDULABLE));
    }
    if taints.untolerated(&node.taints) {
        return Err(Why::One(REASON_UNTOLERATED));
    }
    if !pod.required.matches(&node.name, &node.labels) {
        return Err(Why::One(REASON_NODE_AFFINITY));
    }
    if !pod.ports.is_empty() && host_ports::conflicts(&node.ports, &pod.ports) {
        return Err(Why::One(REASON_PORTS));
    }
    let short = insufficient(node, pod);
    if !short.is_empty() {
        return Err(Why::Many(short));
    }
    spread.check(slot).map_err(Why::One)?;
    inter.check(slot).map_err(Why::One)
}

/// NodeResourcesFit: the pod count, then each requested resource against
/// what the node has left. A pod requesting nothing is checked for the
/// pod count alone.
fn insufficient(node: &NodeState, pod: &PodInfo) -> Reasons {
    let mut out = Reasons::new();
    let pods = i128::try_from(node.pods.len()).unwrap_or(i128::MAX);
    if pods + 1 > node.max_pods {
        out.push(Cow::Borrowed(REASON_TOO_MANY_PODS));
    }
    let want = &pod.demand.exact;
    if want.is_zero() {
        return out;
    }
    let (have, used) = (&node.allocatable, &node.requested.exact);
    let short = |w: i128, a: i128, u: i128| w > 0 && w > a - u;
    if short(want.cpu_milli, have.cpu_milli, used.cpu_milli) {
        out.push(Cow::Borrowed("Insufficient cpu"));
    }
    if short(want.memory, have.memory, used.memory) {
        out.push(Cow::Borrowed("Insufficient memory"));
    }
    if short(
        want.ephemeral_storage,
        have.ephemeral_storage,
        used.ephemeral_storage,
    ) {
        out.push(Cow::Borrowed("Insufficient ephemeral-storage"));
    }
    for (name, w) in &want.scalar {
        let a = have.scalar.get(name).copied().unwrap_or(0);
        let u = used.scalar.get(name).copied().unwrap_or(0);
        if short(*w, a, u) {
            out.push(Cow::Owned(format!("Insufficient {name}")));
        }
    }
    out
}

/// Scores the feasible nodes and takes the highest, ties broken by
/// [`tie_break`].
fn best_node(cluster: &Cluster, pod: &PodInfo, spread: &SpreadState, feasible: &[usize]) -> usize {
    let nodes: Vec<&NodeState> = feasible.iter().filter_map(|&s| cluster.node(s)).collect();
    let mut taints: Vec<i64> = nodes
        .iter()
        .map(|n| intolerable_preferred(&pod.tolerations, &n.taints))
        .collect();
    normalize(&mut taints, true);
    let mut affinity: Vec<i64> = if pod.preferred.is_empty() {
        vec![0; nodes.len()]
    } else {
        nodes
            .iter()
            .map(|n| pod.preferred.score(&n.name, &n.labels))
            .collect()
    };
    normalize(&mut affinity, false);
    let spread_scores = if spread.scores() {
        let raw: Vec<Option<i64>> = feasible.iter().map(|&s| spread.raw_score(s)).collect();
        normalize_spread(&raw)
    } else {
        vec![0; nodes.len()]
    };
    // The tie-break hash is only needed for nodes that reach the best
    // total so far.
    let seed = tie_break_seed(&pod.key);
    let preferred = pod_affinity_score::prescore(cluster, pod);
    let pod_affinity = if preferred.scores() {
        let raw: Vec<i64> = feasible.iter().map(|&s| preferred.raw_score(s)).collect();
        pod_affinity_score::normalize(&raw)
    } else {
        vec![0; nodes.len()]
    };
    let mut best: Option<(i64, u64, usize)> = None;
    for (i, n) in nodes.iter().enumerate() {
        let total = 3 * taints[i]
            + 2 * affinity[i]
            + 2 * spread_scores[i]
            + 2 * pod_affinity[i]
            + least_allocated(n, &pod.demand)
            + balanced(n, &pod.demand);
        debug_assert!(total <= 11 * MAX_NODE_SCORE);
        let better = match &best {
            None => true,
            Some((t, _, _)) if total != *t => total > *t,
            Some((_, h, _)) => tie_break(seed, &n.name) < *h,
        };
        if better {
            best = Some((total, tie_break(seed, &n.name), feasible[i]));
        }
    }
    best.map_or(feasible[0], |b| b.2)
}
