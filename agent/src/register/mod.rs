//! Registering the agent's node with the API server (`--kubeconfig`), as
//! the kubelet does: create or update its own Node (labels, addresses,
//! capacity, nodeInfo, `Ready=True` with a heartbeat), then renew its
//! Lease in `kube-node-lease` every 10 s. Only its own Node and Lease: a
//! node identity may write nothing else (NodeRestriction).
//!
//! - `node.rs`: the Node and its status (pure).
//! - `lease.rs`: the Lease, created or renewed (pure).
//! - `machine.rs`: what the machine says about itself.
//! - here: the facts from the flags, and the loop that writes.

pub mod flags;
pub mod lease;
pub mod machine;
pub mod node;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use sluice_model::k8s::{jiff::Timestamp, Lease, Node};
use tracing::{info, warn};

use lease::{renew, renew_every, LeasePlan, LEASE_DURATION_S, LEASE_NAMESPACE};
use machine::Machine;
use node::{label_patch, new_node, node_status, NodeFacts};

/// How often the Node's status is written when nothing failed: its
/// heartbeat. The Lease says the node is alive in between, as with the
/// kubelet (which reports every 5 minutes when nothing changed).
pub const STATUS_EVERY: Duration = Duration::from_secs(60);

/// The field manager of the agent's writes.
const MANAGER: &str = "sluice-agent";

/// What the flags say about the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegisterConfig {
    pub name: String,
    /// `--node-ip`; empty: the uplink's addresses.
    pub node_ips: Vec<IpAddr>,
    /// `--cpu`; `None`: the machine's.
    pub cpu: Option<u32>,
    /// `--memory` in bytes; `None`: the machine's.
    pub memory: Option<u64>,
    /// `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    pub max_pods: u32,
    pub zone: Option<String>,
    pub pool: Option<String>,
    /// `--node-version`; `None`: the agent's version.
    pub version: Option<String>,
    /// `--node-lease-duration-seconds`.
    pub lease_duration_s: u32,
}

/// The node's facts: the flags first, the machine for the rest.
pub fn facts(cfg: &RegisterConfig, m: Machine, uplink_addrs: Vec<IpAddr>) -> NodeFacts {
    NodeFacts {
        name: cfg.name.clone(),
        addrs: if cfg.node_ips.is_empty() {
            uplink_addrs
        } else {
            cfg.node_ips.clone()
        },
        cpu: cfg.cpu.unwrap_or(m.cpus),
        memory: cfg.memory.unwrap_or(m.memory),
        extra_labels: cfg.labels.clone(),
        taints: cfg.taints.clone(),
        max_pods: cfg.max_pods,
        zone: cfg.zone.clone(),
        pool: cfg.pool.clone(),
        version: cfg
            .version
            .clone()
            .unwrap_or_else(|| format!("v{}", env!("CARGO_PKG_VERSION"))),
        os_image: m.os_image,
        kernel_version: m.kernel_version,
        architecture: m.architecture,
        machine_id: m.machine_id,
        boot_id: m.boot_id,
    }
}

/// Register the node and keep its Lease on `rt` until the task is aborted.
/// Failures are logged and retried at the next renewal.
pub fn spawn(
    rt: &tokio::runtime::Handle,
    client: Client,
    facts: NodeFacts,
    lease_duration_s: u32,
) -> tokio::task::JoinHandle<()> {
    rt.spawn(run(client, facts, lease_duration_s))
}

async fn run(client: Client, facts: NodeFacts, lease_duration_s: u32) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let mut uid: Option<String> = None;
    // The lease as last written: renewed without a read while it lasts.
    let mut lease: Option<Lease> = None;
    let mut status_due = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(renew_every(lease_duration_s));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if tokio::time::Instant::now() >= status_due {
            match sync_node(&nodes, &facts).await {
                Ok(u) => {
                    if uid.is_none() {
                        info!(node = %facts.name, "registered the Node");
                    }
                    uid = u;
                    status_due = tokio::time::Instant::now() + STATUS_EVERY;
                }
                Err(e) => {
                    warn!(node = %facts.name, error = %e, "writing the Node failed; retrying")
                }
            }
        }
        let held = Held {
            node: &facts.name,
            node_uid: uid.as_deref(),
            duration_s: lease_duration_s,
        };
        match renew_lease(&leases, lease.take(), held).await {
            Ok(l) => lease = Some(l),
            Err(e) => warn!(node = %facts.name, error = %e, "renewing the Lease failed; retrying"),
        }
    }
}

/// Create the Node if missing, set the labels the agent owns, write its
/// status; the Node's uid.
async fn sync_node(nodes: &Api<Node>, facts: &NodeFacts) -> kube::Result<Option<String>> {
    let existing = match nodes.get_opt(&facts.name).await? {
        Some(n) => n,
        // kube-apiserver takes a Node's status on create; a server that
        // drops it gets it from the status write below.
        None => {
            nodes
                .create(&PostParams::default(), &new_node(facts, Timestamp::now()))
                .await?
        }
    };
    let existing = match label_patch(&existing, facts) {
        Some(p) => {
            let pp = PatchParams {
                field_manager: Some(MANAGER.into()),
                ..PatchParams::default()
            };
            nodes.patch(&facts.name, &pp, &Patch::Merge(&p)).await?
        }
        None => existing,
    };
    let mut written = existing.clone();
    written.status = Some(node_status(
        existing.status.as_ref(),
        facts,
        Timestamp::now(),
    ));
    // At the version read: a concurrent status writer makes this a
    // conflict, retried with a fresh read, rather than a lost write.
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    let done = nodes.replace_status(&facts.name, &pp, &written).await?;
    Ok(done.metadata.uid)
}

/// Renew from the lease last written, else from a fresh read.
/// Whose lease, and for how long.
struct Held<'a> {
    node: &'a str,
    node_uid: Option<&'a str>,
    duration_s: u32,
}

async fn renew_lease(leases: &Api<Lease>, last: Option<Lease>, h: Held<'_>) -> kube::Result<Lease> {
    let node = h.node;
    let current = match last {
        Some(l) => Some(l),
        None => leases.get_opt(node).await?,
    };
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    let duration = i32::try_from(h.duration_s).unwrap_or(LEASE_DURATION_S);
    match renew(
        current.as_ref(),
        node,
        h.node_uid,
        Timestamp::now(),
        duration,
    ) {
        LeasePlan::Create(l) => leases.create(&pp, &l).await,
        LeasePlan::Update(l) => leases.replace(node, &pp, &l).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            cpus: 8,
            memory: 1 << 30,
            kernel_version: "6.12.0".into(),
            os_image: "Debian".into(),
            architecture: "amd64".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("fixture address")
    }

    #[test]
    fn flags_win_over_the_machine() {
        let cfg = RegisterConfig {
            name: "node-1".into(),
            node_ips: vec![ip("198.18.0.11")],
            cpu: Some(2),
            max_pods: 110,
            version: Some("v1.37.1".into()),
            ..RegisterConfig::default()
        };
        let f = facts(&cfg, machine(), vec![ip("198.18.0.99")]);
        assert_eq!(f.addrs, vec![ip("198.18.0.11")]);
        assert_eq!(f.cpu, 2);
        assert_eq!(f.version, "v1.37.1");
        assert_eq!(f.memory, 1 << 30);
        let with_memory = RegisterConfig {
            memory: Some(8 << 30),
            labels: [("team".to_string(), "web".to_string())].into(),
            ..cfg
        };
        let f = facts(&with_memory, machine(), vec![]);
        assert_eq!(f.memory, 8 << 30);
        assert_eq!(f.extra_labels["team"], "web");
    }

    #[test]
    fn without_flags_the_machine_and_the_uplink_answer() {
        let cfg = RegisterConfig {
            name: "node-1".into(),
            max_pods: 110,
            ..RegisterConfig::default()
        };
        let f = facts(&cfg, machine(), vec![ip("198.18.0.99"), ip("fd00:18::99")]);
        assert_eq!(f.addrs, vec![ip("198.18.0.99"), ip("fd00:18::99")]);
        assert_eq!(f.cpu, 8);
        assert_eq!(f.version, format!("v{}", env!("CARGO_PKG_VERSION")));
    }
}
