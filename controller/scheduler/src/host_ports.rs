//! NodePorts: a pod asking for a `hostPort` fits only where no bound pod
//! holds the same port and protocol on an overlapping address (`0.0.0.0`,
//! the default, overlaps every address).

use std::collections::BTreeMap;

use sluice_model::k8s::Pod;

/// Upstream's reason.
pub const REASON_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";

const ANY_IP: &str = "0.0.0.0";

/// One host port a pod holds: address, protocol, port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

/// The host ports of the pod's containers and sidecars (init containers
/// with `restartPolicy: Always`, which keep running).
pub(crate) fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&n| n > 0)?;
            Some(HostPort {
                ip: p
                    .host_ip
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| ANY_IP.into()),
                protocol: p
                    .protocol
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// Whether any of `wanted` clashes with the ports in use (port → how many
/// pods hold it).
pub(crate) fn conflicts(used: &BTreeMap<HostPort, u32>, wanted: &[HostPort]) -> bool {
    wanted.iter().any(|w| {
        used.iter().any(|(u, n)| {
            *n > 0
                && u.port == w.port
                && u.protocol == w.protocol
                && (w.ip == ANY_IP || u.ip == ANY_IP || u.ip == w.ip)
        })
    })
}

/// Adds (`delta` 1) or removes (−1) a pod's ports from a node's.
pub(crate) fn adjust(used: &mut BTreeMap<HostPort, u32>, ports: &[HostPort], delta: i32) {
    for p in ports {
        let n = used.entry(p.clone()).or_default();
        *n = n.saturating_add_signed(delta);
        if *n == 0 {
            used.remove(p);
        }
    }
}
