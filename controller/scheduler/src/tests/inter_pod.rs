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

fn preferred(name: &str, kind: &str, app: &str, key: &str, weight: i32) -> PodB {
    pod(name).label("app", "web").spec(
        "affinity",
        json!({kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": weight,
            "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}}]}}),
    )
}

#[test]
fn preferred_pod_affinity_draws_and_anti_affinity_repels() {
    // n1 holds a cache pod and is fuller; the emptier n2/n3 win on
    // resources alone.
    let pods = || vec![pod("cache").label("app", "cache").req("2", "2Gi").on("n1")];
    let mut c = cluster(three(), pods());
    assert_ne!(bound(&mut c, pod("plain").req("100m", "0")), "n1");
    let mut c = cluster(three(), pods());
    let near = preferred("near", "podAffinity", "cache", HOST, 100);
    assert_eq!(bound(&mut c, near), "n1");
    // Anti-affinity by zone: n1 and n2 share zone a with the cache pod;
    // n3 is fuller than n2, so only the preference sends the pod there.
    let mut filled = pods();
    filled.push(pod("filler").req("1", "1Gi").on("n3"));
    let mut c = cluster(three(), filled.clone());
    assert_eq!(bound(&mut c, pod("plain").req("100m", "0")), "n2");
    let mut c = cluster(three(), filled);
    let far = preferred(
        "far",
        "podAntiAffinity",
        "cache",
        "topology.kubernetes.io/zone",
        100,
    );
    assert_eq!(bound(&mut c, far), "n3");
    let bad = preferred("bad", "podAffinity", "cache", HOST, 0);
    let (msg, _) = refused(&mut c, bad);
    assert!(
        msg.contains(
            "preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0 is not in 1..100"
        ),
        "{msg}"
    );
}
