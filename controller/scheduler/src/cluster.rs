//! The scheduler's view of the cluster, kept up to date incrementally the
//! way kube-scheduler's cache is: nodes with their allocatable, labels and
//! taints; bound pods with their requests, summed per node; and the
//! per-selector counters topology spread and inter-pod affinity read.
//!
//! A pod bound to a node the view does not know yet is kept aside and
//! counted once the node arrives, so watch events may come in any order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sluice_model::k8s::{Node, Pod};

use crate::counters::CounterSet;
use crate::error::InputError;
use crate::host_ports::{self, host_ports, HostPort};
use crate::pod_info::pod_key;
use crate::pod_terms::{required_terms, PodMatcher, TermKind};
use crate::resources::{node_allocatable, pod_demand, Demand, Resources};
use crate::taints::{TaintSet, TaintSets};

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// One node as the filters see it.
#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Shared with every node that has the same taints.
    pub taints: TaintSet,
    pub unschedulable: bool,
    pub allocatable: Resources,
    pub max_pods: i128,
    /// An allocatable that does not parse: the node takes no pod.
    pub broken: Option<InputError>,
    /// The sum of the bound pods' requests.
    pub requested: Demand,
    /// Host ports in use, with how many pods hold each.
    pub ports: BTreeMap<HostPort, u32>,
    pub pods: BTreeSet<String>,
}

/// A bound pod, as far as the scheduler cares.
#[derive(Debug, Clone)]
struct BoundPod {
    namespace: String,
    labels: BTreeMap<String, String>,
    node: String,
    slot: Option<usize>,
    demand: Demand,
    ports: Vec<HostPort>,
    /// Being deleted: still holds its resources, no longer counts for
    /// topology spread (as upstream).
    terminating: bool,
    /// Keys of its required anti-affinity terms in `Cluster::anti_terms`.
    anti_terms: Vec<String>,
}

/// The values of one topology label, numbered, per node slot.
#[derive(Debug, Clone, Default)]
pub(crate) struct Domains {
    pub of_slot: Vec<Option<u32>>,
    pub len: usize,
}

/// The snapshot [`crate::schedule`] decides against.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: Vec<Option<NodeState>>,
    free: Vec<usize>,
    by_name: HashMap<String, usize>,
    pods: HashMap<String, BoundPod>,
    /// Pod keys by label key and value, so a new counter reads only the
    /// pods that carry its selector's pinned label.
    by_label: HashMap<String, HashMap<String, BTreeSet<String>>>,
    /// Pods bound to nodes not (yet) in the view, by node name.
    orphans: BTreeMap<String, BTreeSet<String>>,
    order: Vec<usize>,
    order_stale: bool,
    pub(crate) next_start: usize,
    domains: HashMap<String, Domains>,
    /// Non-terminating pods per selector, for topology spread.
    pub(crate) spread_counts: CounterSet,
    /// Every pod per selector (or conjunction), for inter-pod affinity.
    pub(crate) match_counts: CounterSet,
    /// Bound pods' own required anti-affinity terms, counted per owner.
    pub(crate) anti_terms: CounterSet,
    percentage: u32,
    taint_sets: TaintSets,
}

impl Cluster {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view of these nodes and bound pods (pods without `spec.nodeName`
    /// are skipped). Unreadable fields are returned; the objects stay in
    /// the view as [`Cluster::upsert_node`] and [`Cluster::add_pod`] say.
    /// Takes references, so a caller holding shared objects (an informer's
    /// `Arc`s) builds the view without copying them.
    pub fn from_objects<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> (Self, Vec<InputError>) {
        let mut c = Cluster::new();
        let mut errors = Vec::new();
        for n in nodes {
            errors.extend(c.upsert_node(n).err());
        }
        for p in pods {
            errors.extend(c.add_pod(p).err());
        }
        (c, errors)
    }

    /// `percentageOfNodesToScore`: 0 (the default) is kube-scheduler's
    /// adaptive share (50% less 1% per 125 nodes, at least 5%, at least 100
    /// nodes); 100 looks at every node.
    pub fn set_percentage_of_nodes_to_score(&mut self, percent: u32) {
        self.percentage = percent.min(100);
    }

    pub(crate) fn percentage(&self) -> u32 {
        self.percentage
    }

    /// How many nodes the view holds.
    pub fn node_count(&self) -> usize {
        self.by_name.len()
    }

    /// Adds a node or replaces what the view knows of it (labels, taints,
    /// cordon, allocatable), keeping its pods. A node whose allocatable
    /// does not parse is kept but takes no pod; the error names the field.
    pub fn upsert_node(&mut self, node: &Node) -> Result<(), InputError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let object = format!("node {name}");
        let (allocatable, max_pods, broken) = match node_allocatable(node, &object) {
            Ok((r, p)) => (r, p, None),
            Err(e) => (Resources::default(), 0, Some(e)),
        };
        let spec = node.spec.as_ref();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let taints = self
            .taint_sets
            .intern(spec.and_then(|s| s.taints.as_deref()).unwrap_or_default());
        let unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        if let Some(&slot) = self.by_name.get(&name) {
            if let Some(n) = self.nodes[slot].as_mut() {
                // Status updates come often and rarely touch labels: the
                // search order and the domains depend on labels alone.
                if n.labels != labels {
                    self.order_stale = true;
                    self.domains.clear();
                }
                n.labels = labels;
                let old = std::mem::replace(&mut n.taints, taints);
                self.taint_sets.release(&old);
                n.unschedulable = unschedulable;
                n.allocatable = allocatable;
                n.max_pods = max_pods;
                n.broken = broken.clone();
            }
        } else {
            self.order_stale = true;
            self.domains.clear();
            let state = NodeState {
                name: name.clone(),
                labels,
                taints,
                unschedulable,
                allocatable,
                max_pods,
                broken: broken.clone(),
                requested: Demand::default(),
                ports: BTreeMap::new(),
                pods: BTreeSet::new(),
            };
            let slot = match self.free.pop() {
                Some(s) => {
                    self.nodes[s] = Some(state);
                    s
                }
                None => {
                    self.nodes.push(Some(state));
                    let slots = self.nodes.len();
                    self.spread_counts.grow(slots);
                    self.match_counts.grow(slots);
                    self.anti_terms.grow(slots);
                    slots - 1
                }
            };
            self.by_name.insert(name.clone(), slot);
            for key in self.orphans.remove(&name).unwrap_or_default() {
                self.attach(&key, slot);
            }
        }
        broken.map_or(Ok(()), Err)
    }

    /// Drops a node; its pods are kept aside until it comes back or they
    /// are removed. Whether the node was known.
    pub fn remove_node(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else {
            return false;
        };
        let keys: Vec<String> = self.nodes[slot]
            .as_ref()
            .map(|n| n.pods.iter().cloned().collect())
            .unwrap_or_default();
        for key in keys {
            self.detach(&key);
            self.orphans.entry(name.to_owned()).or_default().insert(key);
        }
        if let Some(gone) = self.nodes[slot].take() {
            self.taint_sets.release(&gone.taints);
        }
        self.free.push(slot);
        self.order_stale = true;
        self.domains.clear();
        true
    }

    /// Records a pod bound to `spec.nodeName`, or updates it. Terminal
    /// pods (`Succeeded`, `Failed`) free their node and are dropped; pods
    /// without a node are ignored. A request that does not parse counts as
    /// zero (the pod still takes a pod slot) and is returned as the error.
    pub fn add_pod(&mut self, pod: &Pod) -> Result<(), InputError> {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        match node {
            Some(node) if !node.is_empty() => self.assume(pod, &node),
            _ => Ok(()),
        }
    }

    /// Records `pod` as bound to `node` (kube-scheduler's "assume"), so the
    /// next decisions see its requests before the binding is stored.
    pub fn assume(&mut self, pod: &Pod, node: &str) -> Result<(), InputError> {
        let key = pod_key(pod);
        self.remove_key(&key);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return Ok(());
        }
        let object = format!("pod {key}");
        let mut first_error = None;
        let demand = pod_demand(pod, &object).unwrap_or_else(|e| {
            first_error.get_or_insert(e);
            Demand::default()
        });
        let terms = required_terms(pod, TermKind::AntiAffinity, &object).unwrap_or_else(|e| {
            first_error.get_or_insert(e);
            Vec::new()
        });
        let mut anti_keys = Vec::new();
        for t in terms {
            let k = format!("{}|{}", t.matcher.key(), t.topology_key);
            if !self.anti_terms.contains(&k) {
                let slots = self.nodes.len();
                self.anti_terms
                    .insert(k.clone(), vec![t.matcher], t.topology_key, slots);
            }
            anti_keys.push(k);
        }
        let bound = BoundPod {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            node: node.to_owned(),
            slot: None,
            demand,
            ports: host_ports(pod),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            anti_terms: anti_keys,
        };
        for (k, v) in &bound.labels {
            self.by_label
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .insert(key.clone());
        }
        self.pods.insert(key.clone(), bound);
        match self.by_name.get(node) {
            Some(&slot) => self.attach(&key, slot),
            None => {
                self.orphans.entry(node.to_owned()).or_default().insert(key);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Forgets a pod (deleted, or its binding failed). Whether it was known.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> bool {
        self.remove_key(&format!("{namespace}/{name}"))
    }

    fn remove_key(&mut self, key: &str) -> bool {
        let Some(node) = self.pods.get(key).map(|p| p.node.clone()) else {
            return false;
        };
        self.detach(key);
        if let Some(set) = self.orphans.get_mut(&node) {
            set.remove(key);
            if set.is_empty() {
                self.orphans.remove(&node);
            }
        }
        if let Some(p) = self.pods.remove(key) {
            for (k, v) in &p.labels {
                if let Some(keys) = self.by_label.get_mut(k).and_then(|m| m.get_mut(v)) {
                    keys.remove(key);
                }
            }
        }
        true
    }

    fn attach(&mut self, key: &str, slot: usize) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        p.slot = Some(slot);
        let Some(n) = self.nodes[slot].as_mut() else {
            return;
        };
        n.requested.add(&p.demand);
        host_ports::adjust(&mut n.ports, &p.ports, 1);
        n.pods.insert(key.to_owned());
        Self::count(
            (
                &mut self.spread_counts,
                &mut self.match_counts,
                &mut self.anti_terms,
            ),
            p,
            slot,
            1,
        );
    }

    fn detach(&mut self, key: &str) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        let Some(slot) = p.slot.take() else {
            return;
        };
        if let Some(n) = self.nodes[slot].as_mut() {
            n.requested.sub(&p.demand);
            host_ports::adjust(&mut n.ports, &p.ports, -1);
            n.pods.remove(key);
        }
        Self::count(
            (
                &mut self.spread_counts,
                &mut self.match_counts,
                &mut self.anti_terms,
            ),
            p,
            slot,
            -1,
        );
    }

    fn count(
        (spread, matching, anti): (&mut CounterSet, &mut CounterSet, &mut CounterSet),
        p: &BoundPod,
        slot: usize,
        delta: i32,
    ) {
        if !p.terminating {
            spread.bump_matching(&p.namespace, &p.labels, slot, delta);
        }
        matching.bump_matching(&p.namespace, &p.labels, slot, delta);
        for k in &p.anti_terms {
            anti.bump_key(k, slot, delta);
        }
    }

    /// Makes sure a counter for `matchers` exists in the spread set
    /// (`spread`) or the affinity set, counting the bound pods once.
    pub(crate) fn ensure_counter(&mut self, spread: bool, matchers: &[PodMatcher]) -> String {
        let key = matchers
            .iter()
            .map(PodMatcher::key)
            .collect::<Vec<_>>()
            .join("&");
        let set = if spread {
            &mut self.spread_counts
        } else {
            &mut self.match_counts
        };
        if !set.contains(&key) {
            set.insert(
                key.clone(),
                matchers.to_vec(),
                String::new(),
                self.nodes.len(),
            );
            let pinned = matchers.first().and_then(PodMatcher::pin).map(|(k, v)| {
                self.by_label
                    .get(k)
                    .and_then(|m| m.get(v))
                    .into_iter()
                    .flatten()
                    .filter_map(|key| self.pods.get(key))
            });
            let candidates: Box<dyn Iterator<Item = &BoundPod>> = match pinned {
                Some(p) => Box::new(p),
                None => Box::new(self.pods.values()),
            };
            for p in candidates {
                let Some(slot) = p.slot else { continue };
                if spread && p.terminating {
                    continue;
                }
                if matchers.iter().all(|m| m.matches(&p.namespace, &p.labels)) {
                    set.bump_key(&key, slot, 1);
                }
            }
        }
        key
    }

    /// Makes sure the domains of `key` are numbered.
    pub(crate) fn ensure_domains(&mut self, key: &str) {
        if self.domains.contains_key(key) {
            return;
        }
        let mut numbers: HashMap<&str, u32> = HashMap::new();
        let mut of_slot = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let d = n.as_ref().and_then(|n| n.labels.get(key)).map(|v| {
                let next = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
                *numbers.entry(v.as_str()).or_insert(next)
            });
            of_slot.push(d);
        }
        let len = numbers.len();
        self.domains
            .insert(key.to_owned(), Domains { of_slot, len });
    }

    /// The domains of a key [`Cluster::ensure_domains`] numbered.
    pub(crate) fn domains(&self, key: &str) -> Option<&Domains> {
        self.domains.get(key)
    }

    /// The topology keys of every bound pod's anti-affinity terms.
    pub(crate) fn anti_term_keys(&self) -> Vec<String> {
        self.anti_terms.topology_keys().iter().cloned().collect()
    }

    /// Node slots in the order the search walks them: zones taken in turn
    /// (one node of each zone, then the next of each), names in order
    /// within a zone, as kube-scheduler's node tree lists them.
    pub(crate) fn ensure_order(&mut self) {
        if !self.order_stale {
            return;
        }
        let mut zones: BTreeMap<String, Vec<(&str, usize)>> = BTreeMap::new();
        for (slot, n) in self.nodes.iter().enumerate() {
            let Some(n) = n else { continue };
            let label = |k: &str| n.labels.get(k).map(String::as_str).unwrap_or("");
            let zone = format!("{}:\u{0}:{}", label(REGION_LABEL), label(ZONE_LABEL));
            zones.entry(zone).or_default().push((n.name.as_str(), slot));
        }
        let mut lists: Vec<Vec<(&str, usize)>> = zones.into_values().collect();
        for l in &mut lists {
            l.sort_unstable();
        }
        let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
        let mut order = Vec::with_capacity(self.by_name.len());
        for i in 0..longest {
            order.extend(lists.iter().filter_map(|l| l.get(i)).map(|&(_, s)| s));
        }
        self.order = order;
        self.order_stale = false;
        if self.next_start >= self.order.len() {
            self.next_start = 0;
        }
    }

    pub(crate) fn order(&self) -> &[usize] {
        &self.order
    }

    pub(crate) fn slot_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub(crate) fn node(&self, slot: usize) -> Option<&NodeState> {
        self.nodes.get(slot).and_then(Option::as_ref)
    }

    pub(crate) fn slots(&self) -> &[Option<NodeState>] {
        &self.nodes
    }

    /// The summed requests of the pods bound to `node` (for callers and
    /// tests): cpu in milli-cores, memory in bytes, and the pod count.
    pub fn requested(&self, node: &str) -> Option<(i128, i128, usize)> {
        let n = self.node(*self.by_name.get(node)?)?;
        Some((
            n.requested.exact.cpu_milli,
            n.requested.exact.memory,
            n.pods.len(),
        ))
    }
}
