//! How many template nodes a set of pending pods needs: first-fit
//! decreasing, as upstream's binpacking estimator, every fit question
//! answered by the scheduler's own filters on the autoscaler's copy of its
//! cluster view. Groups go largest first (cpu and memory shares of the
//! template added); each pod first tries the nodes this estimate already
//! added, then the newest, then a new one; a pod that does not fit a new
//! node ends its group. What the estimate adds to the view is taken out
//! again before it returns.

use sluice_model::k8s::{Node, Pod};
use sluice_scheduler::resources::pod_demand;
use sluice_scheduler::{filter_node, Cluster};

use crate::equivalence::Group;
use crate::template::daemon_set_copy;

/// What an estimate found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    /// New nodes that received a pod.
    pub nodes: usize,
    /// The pods placed (indices into the pod list).
    pub pods: Vec<usize>,
}

/// A group's size against a template's allocatable, for the decreasing
/// order.
fn score(pod: &Pod, allocatable: (i128, i128)) -> f64 {
    let Ok(d) = pod_demand(pod, "") else {
        return 0.0;
    };
    let share = |want: i128, have: i128| {
        if have > 0 {
            want as f64 / have as f64
        } else {
            0.0
        }
    };
    share(d.exact.cpu_milli, allocatable.0) + share(d.exact.memory, allocatable.1)
}

/// Orders groups largest first (stable, so equal groups keep their order).
pub(crate) fn decreasing<'g>(
    pods: &[Pod],
    groups: impl IntoIterator<Item = &'g Group>,
    allocatable: (i128, i128),
) -> Vec<&'g Group> {
    let mut scored: Vec<(f64, &Group)> = groups
        .into_iter()
        .map(|g| (score(&pods[g.exemplar()], allocatable), g))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().map(|(_, g)| g).collect()
}

/// The undo log of one estimate.
struct Added<'v> {
    cluster: &'v mut Cluster,
    nodes: Vec<String>,
    pods: Vec<(String, String)>,
}

impl Added<'_> {
    fn assume(&mut self, pod: &Pod, node: &str) -> bool {
        if self.cluster.assume(pod, node).is_err() {
            return false;
        }
        self.pods.push((
            pod.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pod.metadata.name.clone().unwrap_or_default(),
        ));
        true
    }

    fn fits(&mut self, pod: &Pod, node: &str) -> bool {
        filter_node(self.cluster, pod, node).is_ok()
    }

    /// Adds a template copy with the DaemonSet pods it would run.
    fn add_node(&mut self, node: &Node, daemon_sets: &[&Pod]) -> Option<String> {
        let name = node.metadata.name.clone()?;
        self.cluster.upsert_node(node).ok()?;
        self.nodes.push(name.clone());
        for ds in daemon_sets {
            let copy = daemon_set_copy(ds, &name);
            if self.fits(&copy, &name) {
                self.assume(&copy, &name);
            }
        }
        Some(name)
    }

    fn undo(self) {
        for (ns, name) in &self.pods {
            self.cluster.remove_pod(ns, name);
        }
        for n in &self.nodes {
            self.cluster.remove_node(n);
        }
    }
}

/// Packs `groups` (already in decreasing order) onto copies of a template:
/// `make_node(n)` is the n-th copy. At most `limit` nodes are added.
pub(crate) fn estimate(
    cluster: &mut Cluster,
    pods: &[Pod],
    groups: &[&Group],
    make_node: &dyn Fn(usize) -> Option<Node>,
    daemon_sets: &[&Pod],
    limit: usize,
) -> Estimate {
    let mut log = Added {
        cluster,
        nodes: Vec::new(),
        pods: Vec::new(),
    };
    let mut added: Vec<String> = Vec::new();
    let mut placed = Vec::new();
    for g in groups {
        // Pods of a group are alike: a node that refused one refuses the
        // next, so the search over earlier nodes resumes where it stopped.
        let mut cursor = 0;
        let mut first_phase = true;
        for &pi in &g.pods {
            let pod = &pods[pi];
            if first_phase {
                while cursor < added.len() {
                    if log.fits(pod, &added[cursor]) && log.assume(pod, &added[cursor]) {
                        break;
                    }
                    cursor += 1;
                }
                if cursor < added.len() {
                    placed.push(pi);
                    continue;
                }
                first_phase = false;
            }
            if let Some(last) = added.last().cloned() {
                if log.fits(pod, &last) && log.assume(pod, &last) {
                    placed.push(pi);
                    continue;
                }
            }
            if added.len() >= limit {
                break;
            }
            let Some(node) = make_node(added.len()) else {
                break;
            };
            let Some(name) = log.add_node(&node, daemon_sets) else {
                break;
            };
            if log.fits(pod, &name) && log.assume(pod, &name) {
                added.push(name);
                placed.push(pi);
            } else {
                // Not even a new node takes it: the rest of the group
                // would not fit either. The empty node goes.
                log.cluster.remove_node(&name);
                log.nodes.pop();
                break;
            }
        }
    }
    log.undo();
    Estimate {
        nodes: added.len(),
        pods: placed,
    }
}
