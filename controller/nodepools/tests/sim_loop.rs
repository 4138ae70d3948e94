//! The controller's loop over the public API, on the simulator: list,
//! plan, execute, record, sleep until `requeue_after`, on a manual clock.

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use sluice_model::k8s::Quantity;
use sluice_model::node_pool::{NodePool, NodePoolPhase, NodePoolSpec};
use sluice_nodepools::reconcile::{self, Config, QUOTA_EXCEEDED, READY};
use sluice_nodepools::sim::{Clock, ManualClock, SimProvider};
use sluice_nodepools::{execute, InstanceState, NodeProvider};

struct Loop {
    clock: Arc<ManualClock>,
    sim: Arc<SimProvider>,
    pool: NodePool,
    config: Config,
}

impl Loop {
    fn new(zones: &[&str], per_zone: i32) -> Loop {
        let clock = Arc::new(ManualClock::new("2026-11-23T12:00:00Z".parse().unwrap()));
        let sim = Arc::new(SimProvider::new(clock.clone()));
        sim.set_boot_delay(SignedDuration::from_secs(20));
        let mut spec = NodePoolSpec {
            locations: zones.iter().map(|z| z.to_string()).collect(),
            initial_node_count: Some(per_zone),
            version: Some("1.33.2".into()),
            ..Default::default()
        };
        spec.config.capacity.cpu = Quantity("2".into());
        spec.config.capacity.memory = Quantity("4Gi".into());
        Loop {
            clock,
            sim,
            pool: NodePool::new("p", spec),
            config: Config::default(),
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// One pass; then the clock moves to the next requeue (10 s if none).
    async fn pass(&mut self) {
        let wait = self.step().await;
        self.clock.advance(wait);
    }

    /// One pass without moving the clock; how long until the next.
    async fn step(&mut self) -> SignedDuration {
        let instances = self.sim.list("p").await.unwrap();
        let nodes = self.sim.nodes("p");
        let plan =
            reconcile::plan(&self.pool, &instances, &nodes, &self.config, self.now()).unwrap();
        let provider: Arc<dyn NodeProvider> = self.sim.clone();
        let outcomes = execute::run(provider, plan.actions.clone()).await;
        assert_eq!(outcomes.len(), plan.actions.len());
        let status = reconcile::record(&plan.status, &outcomes, &self.config, self.now());
        self.pool.status = Some(status);
        plan.requeue_after.unwrap_or(SignedDuration::from_secs(10))
    }

    async fn passes(&mut self, n: usize) {
        for _ in 0..n {
            self.pass().await;
        }
    }

    fn phase(&self) -> Option<NodePoolPhase> {
        self.pool.status.as_ref().and_then(|s| s.status)
    }

    fn condition(&self, type_: &str) -> String {
        let status = self.pool.status.as_ref().unwrap();
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        c.status.clone()
    }
}

#[tokio::test]
async fn a_pool_comes_up_and_replaces_a_failed_node() {
    let mut l = Loop::new(&["zone-a", "zone-b"], 2);
    l.pass().await;
    assert_eq!(l.phase(), Some(NodePoolPhase::Provisioning));
    l.passes(5).await;
    assert_eq!(l.phase(), Some(NodePoolPhase::Running));
    assert_eq!(l.condition(READY), "True");
    assert_eq!(l.sim.len(), 4);

    let victim = l.sim.list("p").await.unwrap()[0].name.clone();
    l.sim.mark_failed(&victim, "host died").unwrap();
    l.passes(5).await;
    let now: Vec<_> = l.sim.list("p").await.unwrap();
    assert_eq!(now.len(), 4);
    assert!(now
        .iter()
        .all(|i| i.name != victim && i.state == InstanceState::Running));
    assert_eq!(l.phase(), Some(NodePoolPhase::Running));
}

// spec: C3 — on quota exhaustion wait and retry.
#[tokio::test]
async fn quota_exhaustion_is_reported_and_retried_after_the_backoff() {
    let mut l = Loop::new(&["zone-a"], 3);
    l.sim.set_quota(Some(2));
    l.passes(5).await;
    assert_eq!(l.sim.len(), 2);
    assert_eq!(l.condition(QUOTA_EXCEEDED), "True");
    assert_eq!(l.phase(), Some(NodePoolPhase::RunningWithError));
    let failures = l
        .pool
        .status
        .as_ref()
        .unwrap()
        .create_backoff
        .as_ref()
        .unwrap()
        .failures;
    assert!(
        (1..5).contains(&failures),
        "backed off, not retried each pass: {failures}"
    );

    l.sim.set_quota(None);
    l.passes(40).await;
    assert_eq!(l.sim.len(), 3);
    assert_eq!(l.condition(QUOTA_EXCEEDED), "False");
    assert_eq!(l.phase(), Some(NodePoolPhase::Running));
}

#[tokio::test]
async fn a_deleted_pool_empties() {
    let mut l = Loop::new(&["zone-a"], 3);
    l.passes(5).await;
    assert_eq!(l.sim.len(), 3);
    l.pool.metadata.deletion_timestamp = Some(sluice_model::k8s::Time(l.now()));
    l.pass().await;
    assert!(l.sim.is_empty());
    assert_eq!(l.phase(), Some(NodePoolPhase::Stopping));
}

// spec: A5 — a flex-start pool's nodes end at the end of their run and
// are replaced; the pool wakes for it though nothing else changes.
#[tokio::test]
async fn flex_start_nodes_end_with_their_run_and_are_replaced() {
    let mut l = Loop::new(&["zone-a"], 2);
    l.pool.spec.config.flex_start = true;
    l.pool.spec.config.max_run_duration = Some(sluice_model::duration::Duration::from_secs(3600));
    let start = l.now();
    let hour = SignedDuration::from_secs(3600);
    // (when, the instances listed then, whether the pool was Running)
    let mut seen = Vec::new();
    while l.now() < start + hour * 3 + SignedDuration::from_secs(60) {
        let wait = l.step().await;
        let listed = l.sim.list("p").await.unwrap();
        seen.push((l.now(), listed, l.phase() == Some(NodePoolPhase::Running)));
        l.clock.advance(wait);
    }
    assert!(
        seen.len() < 40,
        "woken by run ends, not polled: {}",
        seen.len()
    );
    let mut made = std::collections::BTreeMap::new();
    for (_, listed, _) in &seen {
        for i in listed {
            made.entry(i.name.clone()).or_insert(i.created_at);
        }
    }
    // Four generations of two: made at 0, 1 h, 2 h and 3 h (each within
    // the pass at the hour), none ending early.
    assert_eq!(made.len(), 8, "{made:?}");
    for (name, created) in &made {
        let offset = created.duration_since(start).as_secs();
        assert!(offset % 3600 < 60, "{name} made at +{offset}s");
        for (when, listed, _) in &seen {
            let listed_now = listed.iter().any(|i| &i.name == name);
            let within = *when >= *created && *when < *created + hour;
            assert_eq!(listed_now, within, "{name} at {when}");
        }
    }
    // Running again within a minute of each end.
    for h in 0..4 {
        assert!(
            seen.iter().any(|(when, listed, running)| {
                let offset = when.duration_since(start).as_secs() - h * 3600;
                (0..60).contains(&offset) && *running && listed.len() == 2
            }),
            "hour {h}"
        );
    }
}
