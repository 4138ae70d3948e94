use serde_json::json;

use super::*;

#[test]
fn pods_bound_before_their_node_arrives_count_once_it_does() {
    let mut c = Cluster::new();
    c.add_pod(&pod("x").req("700m", "1Gi").on("a").build())
        .expect("pod");
    assert_eq!(c.requested("a"), None);
    c.upsert_node(&node("a", "1", "2Gi", 10).build())
        .expect("node");
    assert_eq!(c.requested("a"), Some((700, 1 << 30, 1)));
    let (msg, _) = refused(&mut c, pod("p").req("500m", "0"));
    assert_eq!(msg, "0/1 nodes are available: 1 Insufficient cpu.");
    // A node that leaves and comes back keeps its pods.
    assert!(c.remove_node("a"));
    assert_eq!(c.node_count(), 0);
    c.upsert_node(&node("a", "1", "2Gi", 10).build())
        .expect("node");
    assert_eq!(c.requested("a"), Some((700, 1 << 30, 1)));
}

#[test]
fn updating_a_node_keeps_its_pods_and_takes_new_labels() {
    let mut c = cluster(
        vec![node("a", "2", "2Gi", 10)],
        vec![pod("x").req("1", "0").on("a")],
    );
    c.upsert_node(&node("a", "4", "2Gi", 10).label("pool", "big").build())
        .expect("node");
    assert_eq!(c.requested("a"), Some((1000, 0, 1)));
    let p = pod("p")
        .req("3", "0")
        .spec("nodeSelector", json!({"pool": "big"}));
    assert_eq!(bound(&mut c, p), "a");
}

#[test]
fn terminal_pods_free_their_node_and_updates_replace() {
    let mut c = cluster(
        vec![node("a", "1", "1Gi", 10)],
        vec![pod("x").req("800m", "0").on("a")],
    );
    let mut done = pod("x").req("800m", "0").on("a");
    done.0["status"] = json!({"phase": "Succeeded"});
    c.add_pod(&done.build()).expect("pod");
    assert_eq!(c.requested("a"), Some((0, 0, 0)));
    c.add_pod(&pod("y").req("100m", "0").on("a").build())
        .expect("pod");
    c.add_pod(&pod("y").req("300m", "0").on("a").build())
        .expect("pod");
    assert_eq!(c.requested("a"), Some((300, 0, 1)));
    assert!(c.remove_pod("default", "y"));
    assert!(!c.remove_pod("default", "y"));
    assert_eq!(c.requested("a"), Some((0, 0, 0)));
}

#[test]
fn a_bound_pod_with_an_unreadable_request_still_takes_a_slot() {
    let mut c = cluster(vec![node("a", "1", "1Gi", 1)], vec![]);
    let e = c
        .add_pod(&pod("x").req("much", "0").on("a").build())
        .expect_err("bad cpu");
    assert_eq!(e.field, "spec.containers[0].resources.requests.cpu");
    assert_eq!(c.requested("a"), Some((0, 0, 1)));
    let (msg, _) = refused(&mut c, pod("p"));
    assert_eq!(msg, "0/1 nodes are available: 1 Too many pods.");
}

#[test]
fn removing_a_node_drops_its_pods_from_spread_counts() {
    let mut c = cluster(two_zones(110), two_web_on("a1"));
    // Warm the counters, then drop the node that holds both pods.
    assert_eq!(bound(&mut c, web("w0")), "b1");
    assert!(c.remove_node("a1"));
    c.upsert_node(&node("a2", "8", "8Gi", 110).zone("a").build())
        .expect("node");
    // Zone a now counts 0 and b 1: a2 takes the next.
    assert_eq!(bound(&mut c, web("w1")), "a2");
}

#[test]
fn a_node_moved_to_another_zone_counts_there() {
    let mut c = cluster(
        vec![
            node("n1", "8", "8Gi", 110).zone("a"),
            node("n2", "8", "8Gi", 110).zone("a"),
            node("n3", "8", "8Gi", 110).zone("b"),
        ],
        two_web_on("n1"),
    );
    assert_eq!(bound(&mut c, web("w0")), "n3");
    // A status-only update changes nothing; a new zone label does.
    c.upsert_node(&node("n2", "8", "8Gi", 110).zone("a").build())
        .expect("node");
    assert_eq!(bound(&mut c, web("w1")), "n3");
    c.upsert_node(&node("n2", "8", "8Gi", 110).zone("c").build())
        .expect("node");
    assert_eq!(bound(&mut c, web("w2")), "n2");
}
