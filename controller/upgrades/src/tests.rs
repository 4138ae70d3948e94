//! Unit tests of the pieces the world tests (`tests/`) do not reach on
//! their own: quota read off the pool, the gate's words, a rollback's
//! release of nodes the forward upgrade had started.

use sluice_model::policy::balancers::OutOfBalancers;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Quantity;
use sluice_model::node_pool::{
    CreateBackoff, NodeConfig, NodePool, NodePoolCondition, NodePoolSpec, NodePoolStatus,
};
use sluice_model::operation::{
    Operation, OperationAction, OperationSpec, OperationState, OperationStatus, OperationType,
};
use sluice_model::policy::eviction::EvictionReason;
use sluice_nodepools::node_object::node_object;
use sluice_nodepools::reconcile::{self, QUOTA_EXCEEDED};
use sluice_nodepools::{Instance, InstanceState, NodeSpec};

use crate::drain::drain_annotations;
use crate::{plan, Action, Gate, Inputs, Quota, UPGRADING_ANNOTATION};

fn now() -> Timestamp {
    "2026-11-23T02:00:00Z".parse().unwrap()
}

fn pool() -> NodePool {
    let mut config = NodeConfig::default();
    config.capacity.cpu = Quantity("4".into());
    config.capacity.memory = Quantity("16Gi".into());
    NodePool::new(
        "p",
        NodePoolSpec {
            locations: vec!["a".into()],
            initial_node_count: Some(2),
            config,
            version: Some("1.33.2".into()),
            ..Default::default()
        },
    )
}

fn op(action: Option<OperationAction>, state: OperationState) -> Operation {
    let mut spec = OperationSpec::new(
        OperationType::UpgradeNodes,
        "/apis/sluice.dev/v1/nodepools/p",
    );
    spec.node_version = Some("1.34.1".into());
    spec.action = action;
    let mut o = Operation::new("op", spec);
    o.status = Some(OperationStatus {
        status: Some(state),
        start_time: Some(Time(now() - SignedDuration::from_secs(600))),
        ..Default::default()
    });
    o
}

fn instance(name: &str, version: &str) -> Instance {
    Instance {
        name: name.into(),
        pool: "p".into(),
        zone: "a".into(),
        version: version.into(),
        state: InstanceState::Running,
        created_at: now() - SignedDuration::from_secs(3600),
    }
}

#[test]
fn quota_is_read_off_the_pool_status_until_its_retry_time() {
    // spec: U4 — a refused creation holds surge nodes back until the retry.
    let config = reconcile::Config::default();
    let mut p = pool();
    assert_eq!(Quota::of_pool(&p, &config, now()), Quota::Available);
    let failed_at = now() - SignedDuration::from_secs(10);
    p.status = Some(NodePoolStatus {
        conditions: vec![NodePoolCondition {
            type_: QUOTA_EXCEEDED.into(),
            status: "True".into(),
            last_transition_time: Time(failed_at),
            reason: "QuotaExhausted".into(),
            message: "quota exhausted: CPUS (limit 8)".into(),
        }],
        create_backoff: Some(CreateBackoff {
            failures: 1,
            last_failure_time: Time(failed_at),
            quota_exceeded: true,
            message: "quota exhausted: CPUS (limit 8)".into(),
        }),
        ..Default::default()
    });
    let q = Quota::of_pool(&p, &config, now());
    let retry = failed_at + SignedDuration::from_secs(30);
    assert_eq!(
        q,
        Quota::Exhausted {
            message: "quota exhausted: CPUS (limit 8)".into(),
            retry_at: Some(retry)
        }
    );
    assert!(!q.allows(now()));
    assert!(q.allows(retry));
    assert_eq!(Quota::of_pool(&p, &config, retry), Quota::Available);
}

#[test]
fn a_closed_gate_says_why_and_when_it_opens() {
    // spec: M3 — "paused: window closed, next at …".
    let next: Timestamp = "2026-11-28T01:00:00Z".parse().unwrap();
    let g = Gate::Closed {
        reason: "maintenance window closed".into(),
        next: Some(next),
    };
    assert!(!g.is_open());
    assert_eq!(
        g.why_closed().as_deref(),
        Some("maintenance window closed, next at 2026-11-28T01:00:00Z")
    );
    assert_eq!(g.changes_at(), Some(next));
    assert_eq!(Gate::OPEN.why_closed(), None);
}

#[test]
fn a_rollback_lifts_the_drain_and_mark_of_a_node_the_upgrade_had_started() {
    // spec: U6 — rollback restores; a node not yet replaced is uncordoned.
    let p = pool();
    let spec = NodeSpec::of_pool(&p).unwrap();
    let old = instance("p-a-old", "1.33.2");
    let other = instance("p-a-two", "1.33.2");
    let mut started = node_object(&old, &spec);
    let mut annotations = drain_annotations(EvictionReason::NodeUpgrade, now());
    annotations.insert(UPGRADING_ANNOTATION.into(), "op".into());
    started.metadata.annotations = Some(annotations);
    let nodes = vec![started, node_object(&other, &spec)];
    let instances = vec![old, other];
    let o = op(Some(OperationAction::Rollback), OperationState::Running);
    let config = reconcile::Config::default();
    let pods = BTreeMap::new();
    let inputs = Inputs {
        operation: &o,
        pool: &p,
        instances: &instances,
        nodes: &nodes,
        pods: &pods,
        quota: &Quota::Available,
        capacity: None,
        local_services: &[],
        gate: &Gate::OPEN,
        balancers: &OutOfBalancers::untracked(),
        config: &config,
    };
    let plan = plan(&inputs, now()).unwrap();
    assert_eq!(
        plan.actions,
        [
            Action::ReleaseDrain {
                node: "p-a-old".into()
            },
            Action::Unmark {
                node: "p-a-old".into()
            }
        ]
    );
    assert_eq!(plan.status.status, Some(OperationState::RollingBack));
    // Nothing was upgraded: once released, the rollback is over.
    let mut released = nodes.clone();
    released[0].metadata.annotations = None;
    let mut o2 = o.clone();
    o2.status = Some(plan.status);
    let inputs = Inputs {
        operation: &o2,
        nodes: &released,
        ..inputs
    };
    let plan = crate::plan(&inputs, now()).unwrap();
    assert_eq!(plan.actions, []);
    assert_eq!(plan.status.status, Some(OperationState::RolledBack));
    assert!(plan.status.end_time.is_some());
    assert_eq!(plan.requeue_after, None);
    assert!(plan.held_zones.is_empty());
}

#[test]
fn a_final_operation_plans_nothing_more() {
    let p = pool();
    let o = op(None, OperationState::Done);
    let config = reconcile::Config::default();
    let pods = BTreeMap::new();
    let instances = [instance("p-a-new", "1.34.1")];
    let inputs = Inputs {
        operation: &o,
        pool: &p,
        instances: &instances,
        nodes: &[],
        pods: &pods,
        quota: &Quota::Available,
        capacity: None,
        local_services: &[],
        gate: &Gate::OPEN,
        balancers: &OutOfBalancers::untracked(),
        config: &config,
    };
    let plan = plan(&inputs, now()).unwrap();
    assert_eq!(plan.actions, []);
    assert_eq!(plan.status, o.status.unwrap());
}

#[test]
fn a_drained_node_is_deleted_only_once_the_load_balancers_let_it_go() {
    // spec: U1 — the old node goes once drained, and not while a load
    // balancer may still send it connections.
    let p = pool();
    let spec = NodeSpec::of_pool(&p).unwrap();
    let old = instance("p-a-old", "1.33.2");
    let two = instance("p-a-two", "1.33.2");
    let new = instance("p-a-new", "1.34.1");
    let started = now() - SignedDuration::from_secs(60);
    let mut drained = node_object(&old, &spec);
    let mut annotations = drain_annotations(EvictionReason::NodeUpgrade, started);
    annotations.insert(UPGRADING_ANNOTATION.into(), "op".into());
    drained.metadata.annotations = Some(annotations);
    let nodes = vec![drained, node_object(&two, &spec), node_object(&new, &spec)];
    let instances = vec![old, two, new];
    let o = op(None, OperationState::Running);
    let config = reconcile::Config::default();
    let pods = BTreeMap::new();
    let names = ["p-a-old", "p-a-two", "p-a-new"];
    let mut balancers = OutOfBalancers::default();
    let behind = names.map(String::from).into();
    balancers.observe(&behind, names, started);
    let inputs = Inputs {
        operation: &o,
        pool: &p,
        instances: &instances,
        nodes: &nodes,
        pods: &pods,
        quota: &Quota::Available,
        capacity: None,
        local_services: &[],
        gate: &Gate::OPEN,
        balancers: &balancers,
        config: &config,
    };
    let deletes = |plan: &crate::UpgradePlan| {
        plan.actions.iter().any(|a| {
            matches!(a, Action::DeleteInstance { name } | Action::Recreate { old: name, .. }
                if name == "p-a-old")
        })
    };
    let held = plan(&inputs, now()).unwrap();
    assert!(!deletes(&held), "{:?}", held.actions);
    let status = format!("{:?}", held.status);
    assert!(
        status.contains(
            "node p-a-old: drained; waits for the load balancers to stop sending it connections"
        ),
        "{status}"
    );
    // Looked at again before the patience ends (the poll comes sooner).
    let patience = started + SignedDuration::from_secs(120);
    assert!(
        held.requeue_after
            .is_some_and(|d| d <= SignedDuration::from_secs(60)),
        "{:?}",
        held.requeue_after
    );
    // Out of every balancer for 10 s: it goes.
    let mut released = balancers.clone();
    let behind = ["p-a-two", "p-a-new"].map(String::from).into();
    released.observe(&behind, names, now() - SignedDuration::from_secs(10));
    let plan_released = plan(
        &Inputs {
            balancers: &released,
            ..inputs
        },
        now(),
    )
    .unwrap();
    assert!(deletes(&plan_released), "{:?}", plan_released.actions);
    // Still behind one, past the patience: it goes too.
    let late = plan(&inputs, patience).unwrap();
    assert!(deletes(&late), "{:?}", late.actions);
}
