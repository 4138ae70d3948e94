use serde_json::json;

use super::*;

const HOST: &str = "kubernetes.io/hostname";

fn three() -> Vec<NodeB> {
    vec![
        node("n1", "8", "8Gi", 110).zone("a"),
        node("n2", "8", "8Gi", 110).zone("a"),
        node("n3", "8", "8Gi", 110).zone("b"),
    ]
}

fn replica(i: usize) -> PodB {
    pod(&format!("r{i}")).label("app", "db").anti("db", HOST)
}

#[test]
fn hostname_anti_affinity_puts_one_replica_per_node() {
    let mut c = cluster(three(), vec![]);
    let mut nodes: Vec<String> = (0..3).map(|i| bound(&mut c, replica(i))).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    let (msg, _) = refused(&mut c, replica(3));
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    );
}

#[test]
fn zone_anti_affinity_blocks_the_whole_zone() {
    let mut c = cluster(three(), vec![pod("x").label("app", "db").on("n1")]);
    let p = pod("p")
        .label("app", "db")
        .anti("db", "topology.kubernetes.io/zone");
    assert_eq!(bound(&mut c, p), "n3");
}

#[test]
fn existing_pods_anti_affinity_is_honoured() {
    // x on n1 refuses app=web in its zone; the incoming pod has no rules
    // of its own.
    let mut c = cluster(
        three(),
        vec![pod("x")
            .label("app", "db")
            .anti("web", "topology.kubernetes.io/zone")
            .on("n1")],
    );
    let web = || pod("w").label("app", "web");
    assert_eq!(bound(&mut c, web()), "n3");
    c.upsert_node(&node("n3", "8", "8Gi", 0).zone("b").build())
        .expect("node");
    let (msg, _) = refused(&mut c, pod("v").label("app", "web"));
    assert_eq!(
        msg,
        "0/3 nodes are available: 1 Too many pods, 2 node(s) didn't satisfy existing pods anti-affinity rules."
    );
    // Once x is gone, zone a is open again.
    assert!(c.remove_pod("default", "x"));
    assert!(bound(&mut c, web()).starts_with("n"));
}

#[test]
fn anti_affinity_looks_at_the_pods_namespace_unless_told() {
    let mut other = pod("x").label("app", "db").on("n1");
    other.0["metadata"]["namespace"] = json!("other");
    let mut c = cluster(vec![node("n1", "8", "8Gi", 110)], vec![other]);
    assert_eq!(bound(&mut c, replica(0)), "n1");
    let mut p = replica(1);
    p.0["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        [0]["namespaceSelector"] = json!({});
    let (_, reasons) = refused(&mut c, p);
    assert_eq!(
        reasons.get("node(s) didn't match pod anti-affinity rules"),
        Some(&1)
    );
}

#[test]
fn pod_affinity_follows_matching_pods_or_starts_a_group() {
    let with = |name: &str| {
        pod(name).label("app", "cache").spec(
            "affinity",
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "cache"}},
                "topologyKey": "topology.kubernetes.io/zone"}]}}),
        )
    };
    let mut c = cluster(three(), vec![]);
    let first = bound(&mut c, with("c0"));
    for i in 1..4 {
        let n = bound(&mut c, with(&format!("c{i}")));
        let zone = |n: &str| if n == "n3" { "b" } else { "a" };
        assert_eq!(zone(&n), zone(&first));
    }
    // A pod that does not match its own term cannot start a group.
    let mut c = cluster(three(), vec![]);
    let (msg, _) = refused(&mut c, with("lonely").label("app", "other"));
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
    );
}
