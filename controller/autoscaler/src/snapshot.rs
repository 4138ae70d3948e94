//! The input: what the loop read from its caches, borrowed, plus the
//! autoscaler's own inputs the model does not carry yet; and the index the
//! decisions share (each node's pool, zone and pods; each pool's zones,
//! sizes, limits and upgrade rules), built once per decision.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sluice_model::cluster::AutoscalingProfile;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Pod, PodDisruptionBudget};
use sluice_model::node_pool::{LocationPolicy, NodePool, ScalingRules};
use sluice_model::operation::BlueGreenPhase;
use sluice_model::quantity;

use crate::error::InputError;
use crate::limits::Limits;
use crate::pool_config::{PoolExtras, Reservation};

/// The label naming a node's pool (GKE's; the pool reconciler sets it).
pub const POOL_LABEL: &str = "cloud.google.com/gke-nodepool";
/// The label naming a node's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The label naming a node's host.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Node annotation the upgrade loop sets on a node it is upgrading; such a
/// node is never a scale-down candidate (U7).
pub const UPGRADING_ANNOTATION: &str = "sluice.dev/upgrading";
/// Node annotation that keeps a node from scale-down (`"true"`).
pub const SCALE_DOWN_DISABLED_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// The taint of a node the autoscaler is removing.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// The soft taint of a node found unneeded.
pub const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";

/// Everything one decision reads.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub nodes: &'a [Node],
    pub pods: &'a [Pod],
    pub pools: &'a [NodePool],
    pub pdbs: &'a [PodDisruptionBudget],
    /// The Cluster's `spec.autoscaling.autoscalingProfile`.
    pub profile: Option<AutoscalingProfile>,
    /// Per pool name; a pool absent here has the defaults.
    pub extras: &'a BTreeMap<String, PoolExtras>,
    pub reservations: &'a [Reservation],
    /// Pod CIDR blocks left for new nodes (`None`: not limited). A node
    /// without one cannot join, so scale-up is capped by it.
    pub pod_cidrs_left: Option<u64>,
    pub options: &'a crate::options::Options,
}

/// Which side of a blue-green upgrade a node is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Blue,
    Green,
}

/// A blue-green upgrade as the pool's status publishes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Upgrade {
    pub phase: Option<BlueGreenPhase>,
    pub blue: Option<ScalingRules>,
    pub green: Option<ScalingRules>,
    /// Green is every other node: the ones named and those added since.
    pub blue_nodes: BTreeSet<String>,
}

/// Published rules that are missing are read as "leave the side alone".
const LEAVE_ALONE: ScalingRules = ScalingRules {
    scale_up: false,
    scale_down: false,
    respect_minimum: true,
};
const AS_USUAL: ScalingRules = ScalingRules {
    scale_up: true,
    scale_down: true,
    respect_minimum: true,
};

impl Upgrade {
    pub fn active(&self) -> bool {
        self.phase.is_some()
    }

    /// The side a node is on; nodes named on neither side during an
    /// upgrade are new ones, made from the pool's current (green) config.
    pub fn side_of(&self, node: &str) -> Option<Side> {
        if !self.active() {
            return None;
        }
        Some(if self.blue_nodes.contains(node) {
            Side::Blue
        } else {
            Side::Green
        })
    }

    pub fn rules(&self, side: Option<Side>) -> ScalingRules {
        match side {
            None => AS_USUAL,
            Some(Side::Blue) => self.blue.unwrap_or(LEAVE_ALONE),
            Some(Side::Green) => self.green.unwrap_or(LEAVE_ALONE),
        }
    }

    /// Whether the pool may gain nodes: new nodes join green, except during
    /// a rollback, when the pool is going back to blue (B6).
    pub fn may_grow(&self) -> bool {
        match self.phase {
            None => true,
            Some(BlueGreenPhase::RollbackStarted) => self.rules(Some(Side::Blue)).scale_up,
            Some(_) => self.rules(Some(Side::Green)).scale_up,
        }
    }
}

/// One pool as the decisions see it.
#[derive(Debug, Clone)]
pub(crate) struct PoolView<'a> {
    pub name: String,
    pub pool: &'a NodePool,
    /// Autoscaling on and its limits readable.
    pub enabled: bool,
    pub limits: Limits,
    /// `locations`, then zones that only hold nodes.
    pub zones: Vec<String>,
    /// The per-zone sizes (targets) now.
    pub sizes: Vec<i32>,
    /// Registered nodes per zone (indices into the snapshot's nodes).
    pub registered: Vec<Vec<usize>>,
    pub extras: PoolExtras,
    pub policy: LocationPolicy,
    /// The capacity of one node: milli-cpu, bytes.
    pub capacity: Option<(i128, i128)>,
    pub upgrade: Upgrade,
    /// Hosts of a multi-host TPU slice: the pool's zones are 0 or this.
    pub atomic: Option<u32>,
}

impl PoolView<'_> {
    pub fn zone_index(&self, zone: &str) -> Option<usize> {
        self.zones.iter().position(|z| z == zone)
    }

    /// The most a zone may hold: the limits, or the slice's hosts.
    pub fn zone_headroom(&self, z: usize) -> i32 {
        let limit = self.limits.zone_headroom(&self.sizes, z);
        match self.atomic {
            Some(hosts) => {
                let hosts = i32::try_from(hosts).unwrap_or(i32::MAX);
                if self.sizes.get(z).copied().unwrap_or(0) == 0 && limit >= hosts {
                    hosts
                } else {
                    0
                }
            }
            None => limit,
        }
    }

    pub fn spot(&self) -> bool {
        self.pool.spec.config.spot
    }
}

/// One node, read once.
#[derive(Debug, Clone)]
pub(crate) struct NodeFacts<'a> {
    pub node: &'a Node,
    pub name: &'a str,
    pub pool: Option<usize>,
    pub zone: Option<usize>,
    pub ready: bool,
    pub upgrading: bool,
    pub to_be_deleted: bool,
    pub deletion_candidate: bool,
    pub scale_down_disabled: bool,
    /// Pods bound to the node (indices into the snapshot's pods).
    pub pods: Vec<usize>,
}

/// The shared index.
#[derive(Debug, Clone)]
pub(crate) struct Index<'a> {
    pub nodes: Vec<NodeFacts<'a>>,
    pub node_by_name: HashMap<&'a str, usize>,
    pub pools: Vec<PoolView<'a>>,
    pub pool_by_name: HashMap<String, usize>,
    /// Pods the scheduler gave up on: `PodScheduled=False`, `Unschedulable`.
    pub pending: Vec<usize>,
    pub errors: Vec<InputError>,
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

fn annotation<'n>(meta: &'n sluice_model::k8s::ObjectMeta, key: &str) -> Option<&'n str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

pub(crate) fn label<'n>(meta: &'n sluice_model::k8s::ObjectMeta, key: &str) -> Option<&'n str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `PodScheduled=False` with reason `Unschedulable`, and still wanted by
/// the scheduler.
pub fn is_unschedulable(pod: &Pod) -> bool {
    sluice_scheduler::wants_scheduling(pod)
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
}

/// A pod's `spec.priority` (unset: 0, as the scheduler reads it).
pub(crate) fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// A pod's `spec.nodeName`.
pub(crate) fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn read_upgrade(pool: &NodePool) -> Upgrade {
    let info = pool
        .status
        .as_ref()
        .and_then(|s| s.update_info.as_ref())
        .and_then(|u| u.blue_green_info.as_ref());
    match info {
        Some(i) if i.phase.is_some() => Upgrade {
            phase: i.phase,
            blue: i.blue_autoscaling,
            green: i.green_autoscaling,
            blue_nodes: i.blue_nodes.iter().cloned().collect(),
        },
        _ => Upgrade::default(),
    }
}

fn pool_view<'a>(
    pool: &'a NodePool,
    extras: PoolExtras,
    errors: &mut Vec<InputError>,
) -> PoolView<'a> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let object = format!("nodepool {name}");
    let autoscaling = pool.spec.autoscaling.clone().unwrap_or_default();
    let mut enabled = autoscaling.enabled;
    let limits = match Limits::of(&autoscaling) {
        Ok(l) => l,
        Err((field, message)) => {
            if enabled {
                errors.push(InputError::new(&object, field, message));
            }
            enabled = false;
            Limits::PerZone { min: 0, max: 0 }
        }
    };
    let cap = &pool.spec.config.capacity;
    let capacity = match (quantity::milli(&cap.cpu), quantity::units(&cap.memory)) {
        (Ok(c), Ok(m)) => Some((c, m)),
        (Err(e), _) => {
            errors.push(InputError::new(
                &object,
                "spec.config.capacity.cpu",
                e.to_string(),
            ));
            None
        }
        (_, Err(e)) => {
            errors.push(InputError::new(
                &object,
                "spec.config.capacity.memory",
                e.to_string(),
            ));
            None
        }
    };
    let atomic = match extras.tpu.as_ref().map(|t| t.hosts()) {
        Some(Ok(h)) if h > 1 => Some(h),
        Some(Err(e)) => {
            errors.push(InputError::new(&object, "tpuTopology", e.to_string()));
            enabled = false;
            None
        }
        _ => None,
    };
    let policy = autoscaling
        .location_policy
        .unwrap_or(if pool.spec.config.spot {
            LocationPolicy::Any
        } else {
            LocationPolicy::Balanced
        });
    PoolView {
        name,
        pool,
        enabled,
        limits,
        zones: pool.spec.locations.clone(),
        sizes: Vec::new(),
        registered: Vec::new(),
        extras,
        policy,
        capacity,
        upgrade: read_upgrade(pool),
        atomic,
    }
}

impl<'a> Index<'a> {
    pub fn build(snap: &Snapshot<'a>) -> Index<'a> {
        let mut errors = Vec::new();
        let mut pools: Vec<PoolView<'a>> = snap
            .pools
            .iter()
            .map(|p| {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                let extras = snap.extras.get(name).cloned().unwrap_or_default();
                pool_view(p, extras, &mut errors)
            })
            .collect();
        let pool_by_name: HashMap<String, usize> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        let mut nodes = Vec::with_capacity(snap.nodes.len());
        let mut node_by_name = HashMap::with_capacity(snap.nodes.len());
        for (i, n) in snap.nodes.iter().enumerate() {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let pool = label(&n.metadata, POOL_LABEL).and_then(|p| pool_by_name.get(p).copied());
            let zone = match (pool, label(&n.metadata, ZONE_LABEL)) {
                (Some(p), Some(z)) => {
                    let view = &mut pools[p];
                    Some(view.zone_index(z).unwrap_or_else(|| {
                        view.zones.push(z.to_owned());
                        view.zones.len() - 1
                    }))
                }
                _ => None,
            };
            nodes.push(NodeFacts {
                node: n,
                name,
                pool,
                zone,
                ready: node_ready(n),
                upgrading: annotation(&n.metadata, UPGRADING_ANNOTATION).is_some(),
                to_be_deleted: has_taint(n, TO_BE_DELETED_TAINT),
                deletion_candidate: has_taint(n, DELETION_CANDIDATE_TAINT),
                scale_down_disabled: annotation(&n.metadata, SCALE_DOWN_DISABLED_ANNOTATION)
                    == Some("true"),
                pods: Vec::new(),
            });
            node_by_name.insert(name, i);
        }
        for p in &mut pools {
            if p.zones.is_empty() {
                // A pool without locations still has one zone to grow in.
                p.zones.push(String::new());
            }
            p.registered = vec![Vec::new(); p.zones.len()];
        }
        for (i, n) in nodes.iter().enumerate() {
            if let (Some(p), Some(z)) = (n.pool, n.zone) {
                pools[p].registered[z].push(i);
            }
        }
        for p in &mut pools {
            let status_zones = p
                .pool
                .status
                .as_ref()
                .map(|s| s.zones.as_slice())
                .unwrap_or(&[]);
            p.sizes = p
                .zones
                .iter()
                .zip(&p.registered)
                .map(|(z, reg)| {
                    p.extras
                        .target_sizes
                        .get(z)
                        .copied()
                        .or_else(|| {
                            status_zones
                                .iter()
                                .find(|s| &s.zone == z)
                                .map(|s| s.target_node_count)
                        })
                        .unwrap_or_else(|| i32::try_from(reg.len()).unwrap_or(i32::MAX))
                })
                .collect();
        }
        let mut pending = Vec::new();
        for (i, pod) in snap.pods.iter().enumerate() {
            match node_name(pod) {
                Some(n) => {
                    if let Some(&ni) = node_by_name.get(n) {
                        nodes[ni].pods.push(i);
                    }
                }
                None if is_unschedulable(pod) => pending.push(i),
                None => {}
            }
        }
        Index {
            nodes,
            node_by_name,
            pools,
            pool_by_name,
            pending,
            errors,
        }
    }

    /// Registered nodes in the cluster.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

/// `now` as the status and events print it: Go's
/// `2006-01-02 15:04:05.999999999 -0700 MST` layout, in UTC.
pub fn go_time(now: Timestamp) -> String {
    now.strftime("%Y-%m-%d %H:%M:%S%.f +0000 UTC").to_string()
}
