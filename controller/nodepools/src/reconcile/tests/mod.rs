//! The reconciler's rules, each proved on small fixtures at a fixed `now`.

mod autoscaled;
mod backoff;
mod converge;
mod hold;
mod replace;
mod size;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Quantity;
use sluice_model::node_pool::{NodePool, NodePoolSpec};

use super::{plan, Action, Config, DeleteReason, Plan};
use crate::instance::{Instance, InstanceState};

fn now() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// Pool `p`, version 1.33.2, `per_zone` nodes in each of `zones`.
fn pool(zones: &[&str], per_zone: i32) -> NodePool {
    let mut spec = NodePoolSpec {
        locations: zones.iter().map(|z| z.to_string()).collect(),
        initial_node_count: Some(per_zone),
        version: Some("1.33.2".into()),
        ..Default::default()
    };
    spec.config.capacity.cpu = Quantity("4".into());
    spec.config.capacity.memory = Quantity("16Gi".into());
    NodePool::new("p", spec)
}

fn inst(name: &str, zone: &str, state: InstanceState, age_secs: i64) -> Instance {
    Instance {
        name: name.into(),
        pool: "p".into(),
        zone: zone.into(),
        version: "1.33.2".into(),
        state,
        created_at: ago(age_secs),
    }
}

fn running(name: &str, zone: &str, age_secs: i64) -> Instance {
    inst(name, zone, InstanceState::Running, age_secs)
}

fn node(name: &str, ready: bool) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.status = Some(NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    n
}

fn ready_nodes(instances: &[Instance]) -> Vec<Node> {
    instances.iter().map(|i| node(&i.name, true)).collect()
}

fn run(pool: &NodePool, instances: &[Instance], nodes: &[Node]) -> Plan {
    plan(pool, instances, nodes, &Config::default(), now()).unwrap()
}

fn deletes(p: &Plan) -> Vec<(&str, &DeleteReason)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { name, reason } => Some((name.as_str(), reason)),
            Action::Create(_) => None,
        })
        .collect()
}

/// The zones of the creations, in order.
fn creates(p: &Plan) -> Vec<&str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Create(c) => Some(c.zone.as_str()),
            Action::Delete { .. } => None,
        })
        .collect()
}

fn condition<'a>(p: &'a Plan, type_: &str) -> (&'a str, &'a str) {
    let c = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (c.status.as_str(), c.reason.as_str())
}
