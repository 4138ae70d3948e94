use serde_json::json;

use super::*;
use crate::schedule::feasible_to_find;
use crate::{queue_order, schedule_all, wants_scheduling};

#[test]
fn a_batch_sees_its_own_earlier_decisions() {
    let mut c = cluster(
        vec![node("a", "1", "4Gi", 10), node("b", "1", "4Gi", 10)],
        vec![],
    );
    let pods: Vec<_> = (0..3)
        .map(|i| pod(&format!("p{i}")).req("600m", "0").build())
        .collect();
    let out = schedule_all(&mut c, &pods);
    let nodes: Vec<_> = out
        .iter()
        .filter_map(|(_, d)| match d {
            Decision::Bind { node } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes.len(), 2);
    assert_ne!(nodes[0], nodes[1]);
    assert_eq!(out[2].0, "default/p2");
    assert!(matches!(&out[2].1, Decision::Unschedulable { message, .. }
        if message == "0/2 nodes are available: 2 Insufficient cpu."));
}

#[test]
fn queue_order_is_priority_then_age_then_name() {
    let at = |p: PodB, t: &str| {
        let mut p = p;
        p.0["metadata"]["creationTimestamp"] = json!(t);
        p
    };
    let pods: Vec<_> = [
        at(pod("old"), "2026-01-01T00:00:00Z"),
        at(pod("new"), "2026-01-02T00:00:00Z"),
        at(pod("urgent"), "2026-01-03T00:00:00Z").spec("priority", json!(1000)),
        pod("undated"),
        at(pod("b-same"), "2026-01-02T00:00:00Z"),
    ]
    .into_iter()
    .map(PodB::build)
    .collect();
    let names: Vec<_> = queue_order(&pods)
        .into_iter()
        .map(|i| pods[i].metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["urgent", "old", "b-same", "new", "undated"]);
}

#[test]
fn only_pending_pods_of_the_default_scheduler_are_taken() {
    assert!(wants_scheduling(&pod("p").build()));
    assert!(wants_scheduling(
        &pod("p")
            .spec("schedulerName", json!("default-scheduler"))
            .build()
    ));
    assert!(!wants_scheduling(
        &pod("p").spec("schedulerName", json!("other")).build()
    ));
    assert!(!wants_scheduling(&pod("p").on("a").build()));
    let gated = pod("p").spec("schedulingGates", json!([{"name": "example.com/quota"}]));
    assert!(!wants_scheduling(&gated.build()));
    assert!(wants_scheduling(
        &pod("p").spec("schedulingGates", json!([])).build()
    ));
    let mut gone = pod("p");
    gone.0["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(!wants_scheduling(&gone.build()));
    let mut c = cluster(vec![node("a", "1", "1Gi", 10)], vec![]);
    let out = schedule_all(&mut c, &[pod("bound").on("a").build(), pod("p").build()]);
    assert_eq!(out.len(), 1);
}

#[test]
fn feasible_nodes_to_find_follow_upstream() {
    assert_eq!(feasible_to_find(0, 50), 50);
    assert_eq!(feasible_to_find(0, 99), 99);
    assert_eq!(feasible_to_find(0, 100), 100);
    assert_eq!(feasible_to_find(0, 1000), 420);
    assert_eq!(feasible_to_find(0, 5000), 500);
    assert_eq!(feasible_to_find(0, 6000), 300);
    assert_eq!(feasible_to_find(0, 1500), 570);
    assert_eq!(feasible_to_find(100, 5000), 5000);
    assert_eq!(feasible_to_find(1, 5000), 100);
}

fn many(n: usize) -> Cluster {
    let nodes = (0..n)
        .map(|i| node(&format!("n{i:03}"), "4", "16Gi", 110).zone(["a", "b", "c"][i % 3]))
        .collect();
    cluster(nodes, vec![])
}

#[test]
fn the_search_stops_at_enough_feasible_nodes_and_rotates() {
    let mut c = many(1000);
    bound(&mut c, pod("p0").req("1", "1Gi"));
    assert_eq!(c.next_start, 420);
    bound(&mut c, pod("p1").req("1", "1Gi"));
    assert_eq!(c.next_start, 840);
    bound(&mut c, pod("p2").req("1", "1Gi"));
    assert_eq!(c.next_start, 260);
    // Every node looked at when asked to score all of them.
    c.set_percentage_of_nodes_to_score(100);
    bound(&mut c, pod("p3").req("1", "1Gi"));
    assert_eq!(c.next_start, 260);
}

#[test]
fn the_search_visits_zones_in_turn() {
    let mut c = many(9);
    c.ensure_order();
    let zones: Vec<_> = c
        .order()
        .iter()
        .filter_map(|&s| c.node(s))
        .map(|n| n.labels["topology.kubernetes.io/zone"].clone())
        .collect();
    assert_eq!(zones, ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
}

#[test]
fn decisions_are_deterministic_and_ties_spread() {
    let run = || {
        let mut c = many(30);
        (0..30)
            .map(|i| bound(&mut c, pod(&format!("p{i}")).req("100m", "128Mi")))
            .collect::<Vec<_>>()
    };
    let first = run();
    assert_eq!(first, run());
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert_eq!(distinct.len(), 30, "equal nodes fill evenly: {first:?}");
}

#[test]
fn least_allocated_prefers_the_emptier_node() {
    let mut c = cluster(
        vec![node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)],
        vec![pod("x").req("2", "4Gi").on("a")],
    );
    assert_eq!(bound(&mut c, pod("p").req("500m", "512Mi")), "b");
}

#[test]
fn balanced_allocation_breaks_even_free_shares() {
    // Both nodes keep the same average free share after the pod, but b
    // ends with cpu and memory used alike.
    let mut c = cluster(
        vec![node("a", "4", "4Gi", 110), node("b", "4", "4Gi", 110)],
        vec![
            pod("x").req("2", "0").on("a"),
            pod("y").req("1", "1Gi").on("b"),
        ],
    );
    assert_eq!(bound(&mut c, pod("p").req("100m", "100Mi")), "b");
}

#[test]
fn preferred_node_affinity_scores() {
    let mut c = cluster(
        vec![
            node("a", "4", "4Gi", 110),
            node("b", "4", "4Gi", 110).label("fast", "yes"),
        ],
        vec![pod("x").req("1", "1Gi").on("b")],
    );
    let p = pod("p").spec(
        "affinity",
        json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [{"key": "fast", "operator": "Exists"}]}}]}}),
    );
    assert_eq!(bound(&mut c, p), "b");
}

#[test]
fn no_nodes_at_all() {
    let mut c = Cluster::new();
    let (msg, reasons) = refused(&mut c, pod("p"));
    assert_eq!(msg, "no nodes available to schedule pods");
    assert!(reasons.is_empty());
}
