use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;
use crate::node_object::{POOL_LABEL, ZONE_LABEL};

fn start() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

fn sim() -> (Arc<ManualClock>, SimProvider) {
    let clock = Arc::new(ManualClock::new(start()));
    let provider = SimProvider::new(clock.clone());
    (clock, provider)
}

fn req(name: &str) -> CreateNode {
    CreateNode {
        pool: "p".into(),
        zone: "zone-a".into(),
        name: name.into(),
        version: "1.33.2".into(),
        config: NodeSpec {
            cpu_milli: 2000,
            memory_bytes: 4 << 30,
            labels: [("team".to_string(), "infra".to_string())].into(),
            taints: vec![sluice_model::node_pool::NodeTaint {
                key: "dedicated".into(),
                value: "batch".into(),
                effect: sluice_model::node_pool::TaintEffect::NoSchedule,
            }],
            spot: false,
        },
    }
}

fn states(p: &SimProvider) -> Vec<(String, InstanceState)> {
    p.list_now("p")
        .into_iter()
        .map(|i| (i.name, i.state))
        .collect()
}

#[tokio::test]
async fn instances_boot_after_the_delay() {
    let (clock, p) = sim();
    p.set_boot_delay(SignedDuration::from_secs(30));
    let i = p.create(req("n1")).await.unwrap();
    assert_eq!((i.state, i.created_at), (InstanceState::Creating, start()));
    clock.advance(SignedDuration::from_secs(29));
    assert_eq!(states(&p), [("n1".into(), InstanceState::Creating)]);
    assert!(p.nodes("p").is_empty(), "nothing registers before it boots");
    clock.advance(SignedDuration::from_secs(1));
    assert_eq!(states(&p), [("n1".into(), InstanceState::Running)]);
}

#[tokio::test]
async fn the_quota_refuses_creations_beyond_it() {
    let (_, p) = sim();
    p.set_quota(Some(2));
    p.create(req("n1")).await.unwrap();
    p.create(req("n2")).await.unwrap();
    let err = p.create(req("n3")).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::QuotaExhausted {
            resource: "instances".into(),
            limit: 2
        }
    );
    p.delete("n1").await.unwrap();
    p.create(req("n3")).await.unwrap();
    assert_eq!(p.len(), 2);
}

#[tokio::test]
async fn capacity_is_the_quota_left() {
    // spec: B1 — the room the quota leaves, asked before green is made.
    let (_, p) = sim();
    assert_eq!(p.capacity().await, Ok(None));
    p.set_quota(Some(3));
    p.create(req("n1")).await.unwrap();
    assert_eq!(p.capacity().await, Ok(Some(2)));
    p.set_quota(Some(1));
    assert_eq!(p.capacity().await, Ok(Some(0)));
}

#[tokio::test]
async fn injected_failures_fail_the_next_creations_only() {
    let (_, p) = sim();
    p.fail_next_creations(2);
    assert!(p.create(req("n1")).await.is_err());
    assert!(p.create(req("n1")).await.is_err());
    p.create(req("n1")).await.unwrap();
    p.mark_failed("n1", "kernel panic").unwrap();
    assert_eq!(
        states(&p),
        [("n1".into(), InstanceState::Failed("kernel panic".into()))]
    );
    assert_eq!(
        p.mark_failed("n9", "x"),
        Err(ProviderError::NotFound("n9".into()))
    );
}

#[tokio::test]
async fn names_are_unique_and_deletion_of_the_unknown_is_not_found() {
    let (_, p) = sim();
    p.create(req("n1")).await.unwrap();
    let err = p.create(req("n1")).await.unwrap_err();
    assert!(err.to_string().contains("exists already"), "{err}");
    p.delete("n1").await.unwrap();
    assert_eq!(
        p.delete("n1").await,
        Err(ProviderError::NotFound("n1".into()))
    );
    assert!(p.is_empty() && p.list("p").await.unwrap().is_empty());
}

#[tokio::test]
async fn nodes_carry_the_pool_labels_taints_and_capacity() {
    let (_, p) = sim();
    p.create(req("n1")).await.unwrap();
    let mut other = req("q1");
    other.pool = "q".into();
    p.create(other).await.unwrap();
    let nodes = p.nodes("p");
    assert_eq!(nodes.len(), 1);
    let labels = nodes[0].metadata.labels.clone().unwrap();
    assert_eq!(labels[POOL_LABEL], "p");
    assert_eq!(labels[ZONE_LABEL], "zone-a");
    assert_eq!(labels["team"], "infra");
    let taint = &nodes[0].spec.as_ref().unwrap().taints.as_ref().unwrap()[0];
    assert_eq!(
        (taint.key.as_str(), taint.effect.as_str()),
        ("dedicated", "NoSchedule")
    );
    let status = nodes[0].status.as_ref().unwrap();
    assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "2000m");
    assert!(crate::reconcile::is_node_ready(&nodes[0]));
}

#[tokio::test]
async fn five_thousand_nodes() {
    let (_, p) = sim();
    for i in 0..5000 {
        p.create(req(&format!("n{i}"))).await.unwrap();
    }
    assert_eq!(p.list("p").await.unwrap().len(), 5000);
    assert_eq!(p.nodes("p").len(), 5000);
}

/// `req(name)` with a run limit of `secs`.
fn limited(name: &str, secs: i64) -> CreateNode {
    let mut r = req(name);
    r.config.labels.insert(
        crate::instance::MAX_RUN_DURATION_LABEL.into(),
        format!("{secs}s"),
    );
    r
}

#[tokio::test]
async fn a_node_ends_at_the_end_of_its_run_and_not_before() {
    // spec: A5 — GKE deletes a flex-start VM when its maxRunDuration is
    // over; the sim does so on its clock.
    let (clock, p) = sim();
    p.set_quota(Some(2));
    p.create(limited("n1", 3600)).await.unwrap();
    clock.advance(SignedDuration::from_secs(600));
    p.create(limited("n2", 3600)).await.unwrap();
    p.create(req("n3")).await.unwrap_err();
    assert_eq!(p.next_run_end(), Some(later(start(), 3600)));

    clock.advance(SignedDuration::from_secs(3000) - SignedDuration::from_nanos(1));
    assert_eq!(p.len(), 2, "one nanosecond before the end, both run");
    assert_eq!(p.nodes("p").len(), 2);
    clock.advance(SignedDuration::from_nanos(1));
    let names: Vec<String> = p.list_now("p").into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["n2"], "n1's run is over");
    assert_eq!(p.capacity().await.unwrap(), Some(1), "its quota is free");
    assert_eq!(
        p.delete("n1").await,
        Err(ProviderError::NotFound("n1".into()))
    );
    assert_eq!(p.next_run_end(), Some(later(start(), 4200)));

    // A replacement's run counts from its own creation.
    p.create(limited("n1", 3600)).await.unwrap();
    clock.advance(SignedDuration::from_secs(600));
    assert_eq!(p.len(), 1, "n2 ended, the new n1 runs");
    // Deleted before its end, an instance leaves nothing to end later.
    p.delete("n1").await.unwrap();
    assert_eq!(p.next_run_end(), None);
    // No limit: it runs on.
    p.create(req("n4")).await.unwrap();
    clock.advance(SignedDuration::from_secs(30 * 24 * 3600));
    assert_eq!(p.len(), 1);
}

fn later(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs)).unwrap()
}
