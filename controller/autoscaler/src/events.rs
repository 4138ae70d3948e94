//! The Kubernetes events a decision asks for, in upstream's wording: on
//! pods `TriggeredScaleUp` and `NotTriggerScaleUp`, on nodes `ScaleDown`,
//! on pools `ScaledUpGroup`, `FailedToScaleUpGroup` and `ScaleUpTimedOut`,
//! and on the status ConfigMap `ScaleDown`, `ScaleDownEmpty` and
//! `MaxNodesTotalReached`.

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Involved {
    Pod {
        namespace: String,
        name: String,
    },
    Node {
        name: String,
    },
    NodePool {
        name: String,
    },
    /// `kube-system/cluster-autoscaler-status`.
    StatusConfigMap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventType {
    Normal,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub involved: Involved,
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

/// One zone's scale-up, as upstream prints a `ScaleUpInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleUpInfo {
    pub group: String,
    pub from: i32,
    pub to: i32,
    pub max: i32,
}

impl std::fmt::Display for ScaleUpInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{{{} {}->{} (max: {})}}",
            self.group, self.from, self.to, self.max
        )
    }
}

fn pod(key: &str) -> Involved {
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    Involved::Pod {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

pub(crate) fn triggered_scale_up(pod_key: &str, infos: &[ScaleUpInfo]) -> Event {
    let list: Vec<String> = infos.iter().map(ToString::to_string).collect();
    Event {
        involved: pod(pod_key),
        type_: EventType::Normal,
        reason: "TriggeredScaleUp",
        message: format!("pod triggered scale-up: [{}]", list.join(" ")),
    }
}

pub(crate) fn not_triggered_scale_up(pod_key: &str, reasons: &str) -> Event {
    Event {
        involved: pod(pod_key),
        type_: EventType::Normal,
        reason: "NotTriggerScaleUp",
        message: format!("pod didn't trigger scale-up: {reasons}"),
    }
}

pub(crate) fn scaled_up_group(pool: &str, info: &ScaleUpInfo) -> Event {
    Event {
        involved: Involved::NodePool {
            name: pool.to_owned(),
        },
        type_: EventType::Normal,
        reason: "ScaledUpGroup",
        message: format!(
            "Scale-up: setting group {} size to {} instead of {} (max: {})",
            info.group, info.to, info.from, info.max
        ),
    }
}

pub(crate) fn failed_to_scale_up_group(pool: &str, group: &str, error: &str) -> Event {
    Event {
        involved: Involved::NodePool {
            name: pool.to_owned(),
        },
        type_: EventType::Warning,
        reason: "FailedToScaleUpGroup",
        message: format!("Scale-up failed for group {group}: {error}"),
    }
}

pub(crate) fn scale_up_timed_out(pool: &str, group: &str, minutes: i64) -> Event {
    Event {
        involved: Involved::NodePool {
            name: pool.to_owned(),
        },
        type_: EventType::Warning,
        reason: "ScaleUpTimedOut",
        message: format!("Nodes added to group {group} failed to register within {minutes}m0s"),
    }
}

pub(crate) fn max_nodes_total_reached(max: usize) -> Event {
    Event {
        involved: Involved::StatusConfigMap,
        type_: EventType::Warning,
        reason: "MaxNodesTotalReached",
        message: format!("Max total nodes in cluster reached: {max}"),
    }
}

pub(crate) fn node_marked(node: &str) -> Event {
    Event {
        involved: Involved::Node {
            name: node.to_owned(),
        },
        type_: EventType::Normal,
        reason: "ScaleDown",
        message: "marked the node as toBeDeleted/unschedulable".into(),
    }
}

pub(crate) fn removing_empty(node: &str) -> Event {
    Event {
        involved: Involved::StatusConfigMap,
        type_: EventType::Normal,
        reason: "ScaleDownEmpty",
        message: format!("Scale-down: removing empty node {node:?}"),
    }
}

pub(crate) fn removing_node(node: &str, cpu: f64, memory: f64, pods: &[String]) -> Event {
    Event {
        involved: Involved::StatusConfigMap,
        type_: EventType::Normal,
        reason: "ScaleDown",
        message: format!(
            "Scale-down: removing node {node}, utilization: {{{cpu:.2} {memory:.2}}}, pods to reschedule: {}",
            pods.join(",")
        ),
    }
}
