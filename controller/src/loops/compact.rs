//! What the loops keep of a Pod. The pod cache is the controller's largest
//! (one entry per pod in the cluster), and most of a real pod is what only
//! its node reads: commands, environment, probes, volumes, the
//! `last-applied-configuration` kubectl writes, container states. The
//! loops read:
//!
//! - metadata: name, namespace, uid, labels, ownerReferences,
//!   deletionTimestamp, resourceVersion, creationTimestamp, and four
//!   annotations (`controller.kubernetes.io/pod-deletion-cost`, the
//!   ReplicaSet's choice of which pod goes first; the cluster
//!   autoscaler's `safe-to-evict` and `safe-to-evict-local-volumes`, and
//!   `kubernetes.io/config.mirror`, its drain rules);
//! - spec: everything the scheduler weighs (node name, selectors,
//!   affinity, tolerations, spread, priority, overhead), and of each
//!   container its name, resources, ports (named `targetPort`s, host
//!   ports) and restart policy (sidecars);
//! - status: phase, conditions, addresses, start time, and of each
//!   container status its name, readiness and restart count.
//!
//! Everything else is dropped before the object is cached. A loop that
//! starts reading another field must keep it here too: the unit tests
//! below name what is kept.

use sluice_model::k8s::Pod;
use sluice_model::k8s_openapi::api::core::v1::{Container, ContainerStatus};

/// The annotations a loop reads.
const KEPT_ANNOTATIONS: [&str; 4] = [
    "controller.kubernetes.io/pod-deletion-cost",
    sluice_model::policy::eviction::SAFE_TO_EVICT,
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes",
    "kubernetes.io/config.mirror",
];

/// Drop from `pod` what no loop reads.
pub fn trim_pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| KEPT_ANNOTATIONS.contains(&k.as_str()));
        if a.is_empty() {
            meta.annotations = None;
        }
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.iter_mut().for_each(trim_container);
        spec.init_containers
            .iter_mut()
            .flatten()
            .for_each(trim_container);
        spec.ephemeral_containers = None;
        spec.volumes = None;
        spec.image_pull_secrets = None;
        spec.security_context = None;
        spec.dns_config = None;
        spec.host_aliases = None;
        spec.readiness_gates = None;
    }
    if let Some(status) = pod.status.as_mut() {
        for list in [
            status.container_statuses.as_mut(),
            status.init_container_statuses.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            list.iter_mut().for_each(trim_status);
        }
        status.ephemeral_container_statuses = None;
        status.message = None;
    }
}

fn trim_container(c: &mut Container) {
    *c = Container {
        name: std::mem::take(&mut c.name),
        resources: c.resources.take(),
        ports: c.ports.take(),
        restart_policy: c.restart_policy.take(),
        ..Container::default()
    };
}

fn trim_status(s: &mut ContainerStatus) {
    *s = ContainerStatus {
        name: std::mem::take(&mut s.name),
        ready: s.ready,
        restart_count: s.restart_count,
        started: s.started,
        ..ContainerStatus::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "a"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"a\": 1}",
                    "controller.kubernetes.io/pod-deletion-cost": "5"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "r", "controller": true}]},
            "spec": {
                "nodeName": "n1",
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z",
                    "whenUnsatisfiable": "DoNotSchedule"}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always",
                    "command": ["x"]}],
                "containers": [{"name": "c", "image": "img", "command": ["serve"],
                    "env": [{"name": "A", "value": "1"}],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "resources": {"requests": {"cpu": "100m"}},
                    "readinessProbe": {"tcpSocket": {"port": 8080}}}]},
            "status": {"phase": "Running", "podIP": "198.19.1.10",
                "podIPs": [{"ip": "198.19.1.10"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "img", "imageID": "id", "ready": true,
                    "restartCount": 3, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn what_the_loops_read_is_kept() {
        let mut p = pod();
        trim_pod(&mut p);
        let m = &p.metadata;
        assert_eq!(m.uid.as_deref(), Some("u"));
        assert_eq!(m.labels.as_ref().map(|l| l.len()), Some(1));
        assert!(m.owner_references.is_some());
        let a = m.annotations.as_ref().expect("the deletion cost");
        assert_eq!(a.len(), 1);
        assert_eq!(
            a.get("controller.kubernetes.io/pod-deletion-cost")
                .map(String::as_str),
            Some("5")
        );
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert!(spec.node_selector.is_some() && spec.tolerations.is_some());
        assert!(spec.topology_spread_constraints.is_some());
        let c = &spec.containers[0];
        assert_eq!(c.name, "c");
        assert!(c.resources.is_some() && c.ports.is_some());
        let side = &spec.init_containers.as_ref().expect("init")[0];
        assert_eq!(side.restart_policy.as_deref(), Some("Always"));
        let st = p.status.as_ref().expect("status");
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert!(st.pod_ips.is_some() && st.conditions.is_some());
        let cs = &st.container_statuses.as_ref().expect("statuses")[0];
        assert_eq!(
            (cs.name.as_str(), cs.ready, cs.restart_count),
            ("c", true, 3)
        );
    }

    #[test]
    fn what_only_the_node_reads_is_dropped() {
        let mut p = pod();
        let before = serde_json::to_vec(&p).expect("json").len();
        trim_pod(&mut p);
        let spec = p.spec.as_ref().expect("spec");
        let c = &spec.containers[0];
        assert!(c.image.is_none() && c.command.is_none() && c.env.is_none());
        assert!(c.readiness_probe.is_none());
        assert!(spec.volumes.is_none());
        let cs = &p
            .status
            .as_ref()
            .expect("status")
            .container_statuses
            .as_ref()
            .expect("s")[0];
        assert!(cs.state.is_none() && cs.image.is_empty());
        let after = serde_json::to_vec(&p).expect("json").len();
        assert!(after < before, "{after} < {before}");
    }
}
