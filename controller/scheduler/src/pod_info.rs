//! A pending pod read once into what the filters and scores ask of it.

use std::collections::BTreeMap;

use sluice_model::k8s::Pod;

use crate::error::InputError;
use crate::host_ports::{host_ports, HostPort};
use crate::node_affinity::{PreferredNodeAffinity, RequiredNodeAffinity};
use crate::pod_terms::{preferred_terms, required_terms, PodTerm, TermKind};
use crate::resources::{pod_demand, Demand};
use crate::taints::{parse_tolerations, Toleration};
use crate::topology_spread::{parse_constraints, SpreadConstraint};

/// `namespace/name`, the key decisions are reported under.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The compiled pod.
#[derive(Debug, Clone)]
pub(crate) struct PodInfo {
    pub key: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub demand: Demand,
    pub ports: Vec<HostPort>,
    pub required: RequiredNodeAffinity,
    pub preferred: PreferredNodeAffinity,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<PodTerm>,
    pub anti_affinity: Vec<PodTerm>,
    pub preferred_affinity: Vec<(i64, PodTerm)>,
    pub preferred_anti: Vec<(i64, PodTerm)>,
}

impl PodInfo {
    /// Reads every field the scheduler uses; the first unreadable one is
    /// the error.
    pub(crate) fn parse(pod: &Pod) -> Result<Self, InputError> {
        let key = pod_key(pod);
        let object = format!("pod {key}");
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        Ok(PodInfo {
            demand: pod_demand(pod, &object)?,
            ports: host_ports(pod),
            required: RequiredNodeAffinity::parse(pod, &object)?,
            preferred: PreferredNodeAffinity::parse(pod, &object)?,
            tolerations: parse_tolerations(pod, &object)?,
            spread: parse_constraints(pod, &namespace, &labels, &object)?,
            affinity: required_terms(pod, TermKind::Affinity, &object)?,
            anti_affinity: required_terms(pod, TermKind::AntiAffinity, &object)?,
            preferred_affinity: preferred_terms(pod, TermKind::Affinity, &object)?,
            preferred_anti: preferred_terms(pod, TermKind::AntiAffinity, &object)?,
            key,
            namespace,
            labels,
        })
    }
}
