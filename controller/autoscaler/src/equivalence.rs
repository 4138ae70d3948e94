//! Pending pods in equivalence groups, as upstream forms them: pods of one
//! controller with the same labels and the same spec, once the fields that
//! differ between replicas without changing where they fit are set aside
//! (hostname, containers' env, projected volumes). Only a group's first
//! pod is checked against each template; the group shares the answer.
//! Pods without a controller, and DaemonSet pods, stand alone.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodSpec;
use sluice_model::k8s::Pod;

use crate::template::controller_of;

/// A controller's variants beyond this become groups of one pod each.
pub const MAX_GROUPS_PER_CONTROLLER: usize = 10;

/// One group: indices into the pod list it was built from, the first
/// being the exemplar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub pods: Vec<usize>,
}

impl Group {
    pub fn exemplar(&self) -> usize {
        self.pods[0]
    }
}

/// The spec with the fields replicas may differ in cleared.
fn sanitized(spec: Option<&PodSpec>) -> Option<PodSpec> {
    let mut spec = spec?.clone();
    spec.hostname = None;
    spec.node_name = None;
    let projected: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.projected.is_some())
        .map(|v| v.name.clone())
        .collect();
    if let Some(vs) = spec.volumes.as_mut() {
        vs.retain(|v| v.projected.is_none());
    }
    let clean = |c: &mut k8s_openapi::api::core::v1::Container| {
        c.env = None;
        if let Some(m) = c.volume_mounts.as_mut() {
            m.retain(|m| !projected.contains(&m.name));
        }
    };
    spec.containers.iter_mut().for_each(clean);
    spec.init_containers.iter_mut().flatten().for_each(clean);
    Some(spec)
}

/// Groups `indices` of `pods`, keeping their order: a group comes where its
/// first pod came, and its pods in the order given.
pub fn group(pods: &[Pod], indices: &[usize]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    // Per controller uid: (group number, labels, sanitized spec) of its groups.
    type Variant = (
        usize,
        Option<std::collections::BTreeMap<String, String>>,
        Option<PodSpec>,
    );
    let mut by_controller: HashMap<&str, Vec<Variant>> = HashMap::new();
    for &i in indices {
        let pod = &pods[i];
        let controller = controller_of(pod).filter(|(kind, _)| *kind != "DaemonSet");
        let Some((_, uid)) = controller else {
            groups.push(Group { pods: vec![i] });
            continue;
        };
        let spec = sanitized(pod.spec.as_ref());
        let variants = by_controller.entry(uid).or_default();
        let found = variants
            .iter()
            .find(|(_, labels, s)| *labels == pod.metadata.labels && *s == spec)
            .map(|(g, _, _)| *g);
        match found {
            Some(g) => groups[g].pods.push(i),
            None => {
                if variants.len() < MAX_GROUPS_PER_CONTROLLER {
                    variants.push((groups.len(), pod.metadata.labels.clone(), spec));
                }
                groups.push(Group { pods: vec![i] });
            }
        }
    }
    groups
}
