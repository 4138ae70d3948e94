//! The `kube-system/cluster-autoscaler-status` ConfigMap in upstream's YAML
//! schema (CA ≥ 1.30): cluster-wide and per node group (pool zone) health,
//! scale-up and scale-down, with each entry's `lastTransitionTime` carried
//! over while its value holds.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_model::k8s::jiff::Timestamp;

use crate::snapshot::{go_time, Index};
use crate::state::State;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "cluster-autoscaler-status";
/// The ConfigMap's data key.
pub const DATA_KEY: &str = "status";
/// The annotation holding when it was written.
pub const LAST_UPDATED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/last-updated";
/// A backoff's message is cut to this many characters.
pub const MAX_ERROR_MESSAGE: usize = 500;

/// Upstream's unhealthy test: more than 3 unready nodes and more than 45 %.
const OK_UNREADY: usize = 3;
const MAX_UNREADY_PERCENT: usize = 45;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub time: String,
    pub autoscaler_status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub cluster_wide: ClusterWide,
    pub node_groups: Vec<NodeGroupStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWide {
    pub health: Health,
    pub scale_up: Activity,
    pub scale_down: ScaleDownActivity,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub status: &'static str,
    pub node_counts: NodeCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_provider_target: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i32>,
    pub last_probe_time: String,
    pub last_transition_time: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    pub registered: Registered,
    pub long_unregistered: usize,
    pub unregistered: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub total: usize,
    pub ready: usize,
    pub not_started: usize,
    pub being_deleted: usize,
    pub unready: Unready,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unready {
    pub total: usize,
    pub resource_unready: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// `InProgress`, `Backoff`, `NoActivity`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_info: Option<BackoffInfo>,
    pub last_probe_time: String,
    pub last_transition_time: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackoffInfo {
    pub error_code: String,
    pub error_message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownActivity {
    /// `CandidatesPresent`, `NoCandidates`.
    pub status: &'static str,
    pub candidates: usize,
    pub last_probe_time: String,
    pub last_transition_time: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    pub name: String,
    pub health: Health,
    pub scale_up: Activity,
    pub scale_down: ScaleDownActivity,
}

impl Status {
    /// The `status` value: the YAML document.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }

    /// The ConfigMap's data and annotations.
    pub fn config_map(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        (
            [(DATA_KEY.to_owned(), self.to_yaml())].into(),
            [(LAST_UPDATED_ANNOTATION.to_owned(), self.time.clone())].into(),
        )
    }
}

/// The keys upstream refreshes on every loop whatever happened.
const REFRESHED: [&str; 2] = ["time", "lastProbeTime"];

fn steady(v: &mut serde_yaml::Value) {
    match v {
        serde_yaml::Value::Mapping(m) => {
            for k in REFRESHED {
                m.remove(k);
            }
            for (_, v) in m.iter_mut() {
                steady(v);
            }
        }
        serde_yaml::Value::Sequence(list) => list.iter_mut().for_each(steady),
        _ => {}
    }
}

/// Whether the status `before` (the ConfigMap's `status` value, if any)
/// says something `after` does not, the probe times aside: the loop
/// rewrites the ConfigMap only then, rather than every 10 s for a fresh
/// `lastProbeTime` alone. An unreadable `before` is rewritten.
pub fn changed(before: Option<&str>, after: &Status) -> bool {
    let Some(Ok(mut before)) = before.map(serde_yaml::from_str::<serde_yaml::Value>) else {
        return true;
    };
    let Ok(mut after) = serde_yaml::to_value(after) else {
        return true;
    };
    steady(&mut before);
    steady(&mut after);
    before != after
}

fn truncate(message: &str) -> String {
    if message.chars().count() <= MAX_ERROR_MESSAGE {
        return message.to_owned();
    }
    let cut: String = message.chars().take(MAX_ERROR_MESSAGE).collect();
    format!("{cut}<truncated>")
}

fn healthy(counts: &NodeCounts) -> &'static str {
    let unready = counts.registered.unready.total;
    let total = counts.registered.total.max(1);
    if unready > OK_UNREADY && unready * 100 > total * MAX_UNREADY_PERCENT {
        "Unhealthy"
    } else {
        "Healthy"
    }
}

/// What the status is made from.
pub(crate) struct Inputs<'a> {
    pub idx: &'a Index<'a>,
    /// Per group id: nodes unneeded now.
    pub candidates: BTreeMap<String, usize>,
    /// Per group id: a scale-up is in flight.
    pub in_progress: BTreeMap<String, bool>,
    pub message: Option<String>,
}

pub(crate) fn build(inp: &Inputs<'_>, state: &mut State, now: Timestamp) -> Status {
    let probe = go_time(now);
    let at =
        |state: &mut State, key: String, status: &str| go_time(state.transition(&key, status, now));
    let mut total = NodeCounts::default();
    let mut groups = Vec::new();
    for pool in &inp.idx.pools {
        if !pool.enabled {
            continue;
        }
        let (min, max) = pool.limits.bounds();
        for (z, zone) in pool.zones.iter().enumerate() {
            let id = crate::scale_up::group_id(&pool.name, zone);
            let mut counts = NodeCounts::default();
            for &n in &pool.registered[z] {
                let f = &inp.idx.nodes[n];
                counts.registered.total += 1;
                if f.to_be_deleted || state.deleting.contains_key(f.name) {
                    counts.registered.being_deleted += 1;
                }
                if f.ready {
                    counts.registered.ready += 1;
                } else {
                    counts.registered.unready.total += 1;
                }
            }
            counts.unregistered = usize::try_from(pool.sizes[z])
                .unwrap_or(0)
                .saturating_sub(pool.registered[z].len());
            total.registered.total += counts.registered.total;
            total.registered.ready += counts.registered.ready;
            total.registered.being_deleted += counts.registered.being_deleted;
            total.registered.unready.total += counts.registered.unready.total;
            total.unregistered += counts.unregistered;
            let health = healthy(&counts);
            let backoff = state
                .backoff
                .get(&pool.name)
                .filter(|b| b.active(now))
                .cloned();
            let up = if inp.in_progress.get(&id).copied().unwrap_or(false) {
                "InProgress"
            } else if backoff.is_some() {
                "Backoff"
            } else {
                "NoActivity"
            };
            let candidates = inp.candidates.get(&id).copied().unwrap_or(0);
            let down = if candidates > 0 {
                "CandidatesPresent"
            } else {
                "NoCandidates"
            };
            groups.push(NodeGroupStatus {
                name: id.clone(),
                health: Health {
                    status: health,
                    node_counts: counts,
                    cloud_provider_target: Some(pool.sizes[z]),
                    min_size: Some(min),
                    max_size: Some(max),
                    last_probe_time: probe.clone(),
                    last_transition_time: at(state, format!("{id}.health"), health),
                },
                scale_up: Activity {
                    status: up,
                    backoff_info: backoff.filter(|_| up == "Backoff").map(|b| BackoffInfo {
                        error_code: b.error_code,
                        error_message: truncate(&b.error_message),
                    }),
                    last_probe_time: probe.clone(),
                    last_transition_time: at(state, format!("{id}.scaleUp"), up),
                },
                scale_down: ScaleDownActivity {
                    status: down,
                    candidates,
                    last_probe_time: probe.clone(),
                    last_transition_time: at(state, format!("{id}.scaleDown"), down),
                },
            });
        }
    }
    for f in &inp.idx.nodes {
        if f.pool.is_none() {
            total.registered.total += 1;
            if f.ready {
                total.registered.ready += 1;
            } else {
                total.registered.unready.total += 1;
            }
        }
    }
    let health = healthy(&total);
    let up = if inp.in_progress.values().any(|v| *v) {
        "InProgress"
    } else {
        "NoActivity"
    };
    let candidates: usize = inp.candidates.values().sum();
    let down = if candidates > 0 {
        "CandidatesPresent"
    } else {
        "NoCandidates"
    };
    Status {
        time: probe.clone(),
        autoscaler_status: "Running",
        message: inp.message.clone(),
        cluster_wide: ClusterWide {
            health: Health {
                status: health,
                node_counts: total,
                cloud_provider_target: None,
                min_size: None,
                max_size: None,
                last_probe_time: probe.clone(),
                last_transition_time: at(state, "clusterWide.health".into(), health),
            },
            scale_up: Activity {
                status: up,
                backoff_info: None,
                last_probe_time: probe.clone(),
                last_transition_time: at(state, "clusterWide.scaleUp".into(), up),
            },
            scale_down: ScaleDownActivity {
                status: down,
                candidates,
                last_probe_time: probe.clone(),
                last_transition_time: at(state, "clusterWide.scaleDown".into(), down),
            },
        },
        node_groups: groups,
    }
}
