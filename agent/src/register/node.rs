//! The agent's own Node as it registers it (pure): what it creates, which
//! labels it keeps set on an existing Node, and the status it reports,
//! keeping whatever else other writers put there.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use serde_json::{json, Value};
use sluice_model::k8s::{jiff::Timestamp, Node, ObjectMeta, Quantity, Time};

/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// GKE's node pool label.
pub const POOL_LABEL: &str = "cloud.google.com/gke-nodepool";
/// `kubernetes.io/hostname`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// What the agent says about its node: from flags and the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    /// InternalIP addresses, at most one per family (the first wins).
    pub addrs: Vec<IpAddr>,
    /// Whole CPUs.
    pub cpu: u32,
    /// Bytes of memory.
    pub memory: u64,
    /// `--node-labels`: set as the agent's own labels (below them: the
    /// hostname, zone and pool labels win).
    pub extra_labels: BTreeMap<String, String>,
    /// `--register-with-taints`: put on the Node when the agent creates it
    /// and only then, as the kubelet does, so a taint removed later (by a
    /// user, or an upgrade applying a pool's new taints) stays removed.
    pub taints: Vec<k8s_openapi::api::core::v1::Taint>,
    /// The `pods` capacity.
    pub max_pods: u32,
    pub zone: Option<String>,
    pub pool: Option<String>,
    /// `kubeletVersion` and `kubeProxyVersion`.
    pub version: String,
    pub os_image: String,
    pub kernel_version: String,
    /// Kubernetes' spelling (`amd64`, `arm64`).
    pub architecture: String,
    pub machine_id: String,
    pub boot_id: String,
}

impl NodeFacts {
    /// The labels the agent owns on its Node.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = self.extra_labels.clone();
        l.insert(HOSTNAME_LABEL.to_string(), self.name.clone());
        l.insert("kubernetes.io/os".to_string(), "linux".to_string());
        l.insert("kubernetes.io/arch".to_string(), self.architecture.clone());
        if let Some(z) = &self.zone {
            l.insert(ZONE_LABEL.to_string(), z.clone());
        }
        if let Some(p) = &self.pool {
            l.insert(POOL_LABEL.to_string(), p.clone());
        }
        l
    }

    fn addresses(&self) -> Vec<NodeAddress> {
        let mut out: Vec<NodeAddress> = Vec::new();
        let mut families = Vec::new();
        for a in &self.addrs {
            if families.contains(&a.is_ipv4()) {
                continue;
            }
            families.push(a.is_ipv4());
            out.push(NodeAddress {
                type_: "InternalIP".into(),
                address: a.to_string(),
            });
        }
        out.push(NodeAddress {
            type_: "Hostname".into(),
            address: self.name.clone(),
        });
        out
    }

    fn capacity(&self) -> BTreeMap<String, Quantity> {
        let mut c = BTreeMap::new();
        c.insert("cpu".to_string(), Quantity(self.cpu.to_string()));
        // In Ki, as the kubelet reports it.
        c.insert(
            "memory".to_string(),
            Quantity(format!("{}Ki", self.memory / 1024)),
        );
        c.insert("pods".to_string(), Quantity(self.max_pods.to_string()));
        c
    }

    fn node_info(&self) -> NodeSystemInfo {
        NodeSystemInfo {
            architecture: self.architecture.clone(),
            boot_id: self.boot_id.clone(),
            container_runtime_version: format!("sluice://{}", env!("CARGO_PKG_VERSION")),
            kernel_version: self.kernel_version.clone(),
            kube_proxy_version: self.version.clone(),
            kubelet_version: self.version.clone(),
            machine_id: self.machine_id.clone(),
            operating_system: "linux".into(),
            os_image: self.os_image.clone(),
            system_uuid: self.machine_id.clone(),
            ..NodeSystemInfo::default()
        }
    }
}

/// The Node to create when there is none.
pub fn new_node(facts: &NodeFacts, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(facts.name.clone()),
            labels: Some(facts.labels()),
            ..ObjectMeta::default()
        },
        spec: (!facts.taints.is_empty()).then(|| k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(facts.taints.clone()),
            ..Default::default()
        }),
        status: Some(node_status(None, facts, now)),
    }
}

/// A merge patch setting the labels the agent owns where the Node's differ
/// (`None`: nothing to change). Labels others set are left alone.
pub fn label_patch(existing: &Node, facts: &NodeFacts) -> Option<Value> {
    let have = existing.metadata.labels.clone().unwrap_or_default();
    let changed: BTreeMap<String, String> = facts
        .labels()
        .into_iter()
        .filter(|(k, v)| have.get(k) != Some(v))
        .collect();
    (!changed.is_empty()).then(|| json!({"metadata": {"labels": changed}}))
}

/// The status to write over `existing`: addresses, capacity, allocatable
/// and nodeInfo are the agent's; its `Ready` condition is `True` with a
/// heartbeat at `now`, its transition time kept while it stays `True`;
/// other conditions and fields are kept as they are.
pub fn node_status(existing: Option<&NodeStatus>, facts: &NodeFacts, now: Timestamp) -> NodeStatus {
    let mut status = existing.cloned().unwrap_or_default();
    status.addresses = Some(facts.addresses());
    status.capacity = Some(facts.capacity());
    // Nothing reserved for system daemons yet: all of it is allocatable.
    status.allocatable = Some(facts.capacity());
    status.node_info = Some(facts.node_info());
    let mut conditions = status.conditions.take().unwrap_or_default();
    let was_ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.clone());
    conditions.retain(|c| c.type_ != "Ready");
    conditions.push(NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        message: Some("sluice-agent is posting ready status".into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(was_ready.unwrap_or(Time(now))),
    });
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> NodeFacts {
        NodeFacts {
            name: "node-1".into(),
            addrs: vec![
                "198.18.0.11".parse().expect("v4"),
                "198.18.0.12".parse().expect("v4"),
                "fd00:18::11".parse().expect("v6"),
            ],
            cpu: 4,
            memory: 8 * 1024 * 1024 * 1024,
            extra_labels: BTreeMap::new(),
            taints: Vec::new(),
            max_pods: 110,
            zone: Some("zone-a".into()),
            pool: Some("blue".into()),
            version: "v1.37.0-sluice".into(),
            os_image: "Debian GNU/Linux 13 (trixie)".into(),
            kernel_version: "6.12.0".into(),
            architecture: "amd64".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("fixture time")
    }

    fn ready(s: &NodeStatus) -> &NodeCondition {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .expect("a Ready condition")
    }

    #[test]
    fn a_new_node_has_its_labels_addresses_capacity_info_and_ready() {
        let n = new_node(&facts(), at("2026-11-23T10:00:00Z"));
        let labels = n.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[ZONE_LABEL], "zone-a");
        assert_eq!(labels[POOL_LABEL], "blue");
        assert_eq!(labels[HOSTNAME_LABEL], "node-1");
        let status = n.status.expect("status");
        let addrs: Vec<(String, String)> = status
            .addresses
            .iter()
            .flatten()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect();
        // One InternalIP per family, the first given.
        assert_eq!(
            addrs,
            vec![
                ("InternalIP".into(), "198.18.0.11".into()),
                ("InternalIP".into(), "fd00:18::11".into()),
                ("Hostname".into(), "node-1".into()),
            ]
        );
        let cap = status.capacity.clone().unwrap_or_default();
        assert_eq!(cap["cpu"].0, "4");
        assert_eq!(cap["memory"].0, "8388608Ki");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(status.allocatable, status.capacity);
        let info = status.node_info.clone().expect("nodeInfo");
        assert_eq!(info.kubelet_version, "v1.37.0-sluice");
        assert_eq!(info.kube_proxy_version, "v1.37.0-sluice");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.architecture, "amd64");
        let r = ready(&status);
        assert_eq!(r.status, "True");
        assert_eq!(
            r.last_heartbeat_time,
            Some(Time(at("2026-11-23T10:00:00Z")))
        );
    }

    #[test]
    fn pool_labels_and_taints_go_on_the_node_it_creates_and_only_labels_after() {
        let mut f = facts();
        f.extra_labels = [
            ("team".to_string(), "web".to_string()),
            // The agent's own labels win over a flag's.
            (ZONE_LABEL.to_string(), "elsewhere".to_string()),
        ]
        .into();
        f.taints = vec![k8s_openapi::api::core::v1::Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }];
        let n = new_node(&f, at("2026-11-23T10:00:00Z"));
        let labels = n.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[ZONE_LABEL], "zone-a");
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        assert_eq!(taints, f.taints);
        // On an existing Node the labels are set again; taints are not
        // touched (a label patch carries none).
        let mut existing = new_node(&facts(), at("2026-11-23T10:00:00Z"));
        existing.spec = None;
        let p = label_patch(&existing, &f).expect("a patch");
        assert_eq!(p, json!({"metadata": {"labels": {"team": "web"}}}));
    }

    #[test]
    fn a_heartbeat_moves_and_the_transition_time_stays_while_ready() {
        let f = facts();
        let first = node_status(None, &f, at("2026-11-23T10:00:00Z"));
        let second = node_status(Some(&first), &f, at("2026-11-23T10:01:00Z"));
        let r = ready(&second);
        assert_eq!(
            r.last_heartbeat_time,
            Some(Time(at("2026-11-23T10:01:00Z")))
        );
        assert_eq!(
            r.last_transition_time,
            Some(Time(at("2026-11-23T10:00:00Z")))
        );
        assert_eq!(second.conditions.iter().flatten().count(), 1);
    }

    #[test]
    fn other_conditions_are_kept_and_a_not_ready_node_transitions_now() {
        let mut s = node_status(None, &facts(), at("2026-11-23T10:00:00Z"));
        for c in s.conditions.iter_mut().flatten() {
            c.status = "Unknown".into();
        }
        s.conditions
            .get_or_insert_with(Vec::new)
            .push(NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                ..NodeCondition::default()
            });
        let after = node_status(Some(&s), &facts(), at("2026-11-23T10:05:00Z"));
        let types: Vec<&str> = after
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, vec!["NetworkUnavailable", "Ready"]);
        let r = ready(&after);
        assert_eq!(r.status, "True");
        assert_eq!(
            r.last_transition_time,
            Some(Time(at("2026-11-23T10:05:00Z")))
        );
    }

    #[test]
    fn only_changed_owned_labels_are_patched() {
        let f = facts();
        let mut n = new_node(&f, at("2026-11-23T10:00:00Z"));
        assert_eq!(label_patch(&n, &f), None);
        let labels = n.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(ZONE_LABEL.into(), "zone-b".into());
        labels.insert("team".into(), "x".into());
        assert_eq!(
            label_patch(&n, &f),
            Some(json!({"metadata": {"labels": {ZONE_LABEL: "zone-a"}}}))
        );
    }
}
