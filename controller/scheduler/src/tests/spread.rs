use std::collections::BTreeMap;

use serde_json::json;

use super::*;

const ZONE: &str = "topology.kubernetes.io/zone";

fn zoned() -> Vec<NodeB> {
    vec![
        node("a1", "8", "8Gi", 110).zone("a"),
        node("a2", "8", "8Gi", 110).zone("a"),
        node("b1", "8", "8Gi", 110).zone("b"),
        node("c1", "8", "8Gi", 110).zone("c"),
    ]
}

fn zone_of(n: &str) -> &str {
    &n[..1]
}

#[test]
fn do_not_schedule_keeps_zones_within_max_skew() {
    let mut c = cluster(zoned(), vec![]);
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..9 {
        let n = bound(&mut c, web(&format!("w{i}")));
        *per_zone.entry(zone_of(&n).to_owned()).or_default() += 1;
        let (lo, hi) = (per_zone.values().min(), per_zone.values().max());
        if per_zone.len() == 3 {
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{per_zone:?}");
        }
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        vec![3, 3, 3]
    );
}

#[test]
fn skew_beyond_max_filters_with_upstream_reason() {
    // Zone a holds two matching pods, b and c none: only b and c may take
    // the next one.
    let mut c = cluster(
        zoned(),
        vec![
            pod("x").label("app", "web").on("a1"),
            pod("y").label("app", "web").on("a2"),
        ],
    );
    let n = bound(&mut c, web("w"));
    assert_ne!(zone_of(&n), "a");
    // Only zone a has room left: the constraint refuses it.
    let mut c = cluster(
        two_zones(1),
        vec![pod("x").label("app", "web").on("a1"), pod("z").on("b1")],
    );
    let (msg, reasons) = refused(&mut c, web("w"));
    assert_eq!(
        msg,
        "0/2 nodes are available: 1 Too many pods, 1 node(s) didn't match pod topology spread constraints."
    );
    assert_eq!(reasons.len(), 2);
}

#[test]
fn nodes_without_the_key_are_not_candidates() {
    let mut c = cluster(vec![node("bare", "8", "8Gi", 110)], vec![]);
    let (msg, _) = refused(&mut c, web("w"));
    assert_eq!(
        msg,
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label)."
    );
    // ScheduleAnyway never filters.
    let p = pod("s")
        .label("app", "web")
        .spread("web", ZONE, 1, "ScheduleAnyway");
    assert_eq!(bound(&mut c, p), "bare");
}

#[test]
fn schedule_anyway_prefers_the_emptier_domain() {
    let mut c = cluster(
        two_zones(110),
        vec![
            pod("x").label("app", "web").req("10m", "0").on("b1"),
            pod("y").label("app", "web").req("10m", "0").on("b1"),
        ],
    );
    let p = pod("s")
        .label("app", "web")
        .spread("web", ZONE, 1, "ScheduleAnyway");
    assert_eq!(bound(&mut c, p), "a1");
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    // Two zones with one matching pod each; minDomains 3 makes the global
    // minimum 0, so with maxSkew 1 neither zone may take another.
    let mut c = cluster(
        two_zones(110),
        vec![
            pod("x").label("app", "web").on("a1"),
            pod("y").label("app", "web").on("b1"),
        ],
    );
    let mut p = web("w");
    p.0["spec"]["topologySpreadConstraints"][0]["minDomains"] = json!(3);
    let (_, reasons) = refused(&mut c, p);
    assert_eq!(
        reasons.get("node(s) didn't match pod topology spread constraints"),
        Some(&2)
    );
    // Without minDomains the minimum is 1 and both zones may take it.
    assert!(bound(&mut c, web("v")).ends_with('1'));
}

#[test]
fn counts_only_nodes_the_pod_may_use_and_only_live_pods() {
    // Zone b's only node is excluded by the nodeSelector (Honor), so its
    // pods do not count: zone a (1 pod) is the minimum and a2 may take one.
    let mut c = cluster(
        vec![
            node("a1", "8", "8Gi", 110).zone("a").label("pool", "x"),
            node("b1", "8", "8Gi", 110).zone("b"),
        ],
        vec![pod("x").label("app", "web").on("a1")],
    );
    let p = web("w").spec("nodeSelector", json!({"pool": "x"}));
    assert_eq!(bound(&mut c, p), "a1");
    // A terminating pod no longer counts.
    let mut c = cluster(
        two_zones(1),
        vec![pod("x").label("app", "web").on("a1"), pod("z").on("b1")],
    );
    assert!(matches!(
        schedule(&mut c, &web("w").build()),
        Decision::Unschedulable { .. }
    ));
    let mut gone = pod("x").label("app", "web").on("a1");
    gone.0["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    c.add_pod(&gone.build()).expect("pod");
    assert_eq!(bound(&mut c, web("w")), "a1");
}

#[test]
fn pods_of_other_namespaces_or_selectors_do_not_count() {
    let mut other = pod("x").label("app", "web").on("a1");
    other.0["metadata"]["namespace"] = json!("other");
    let mut c = cluster(
        two_zones(1),
        vec![
            other,
            pod("y").label("app", "db").on("a1"),
            pod("z").on("b1"),
        ],
    );
    assert_eq!(bound(&mut c, web("w")), "a1");
}

#[test]
fn taints_policy_honor_leaves_tainted_nodes_out_of_the_count() {
    // b1 is tainted and holds two matching pods. Ignored by default, they
    // count: zone b is at 2, zone a at 0, so a1 must take the next pod.
    // With Honor, zone b is not counted and a1 (one pod) is the only
    // domain: skew 1 + 1 − 1 = 1 is allowed.
    let nodes = || {
        vec![
            node("a1", "8", "8Gi", 110).zone("a"),
            node("b1", "8", "8Gi", 110)
                .zone("b")
                .taint("t", "", "NoSchedule"),
        ]
    };
    let pods = || {
        vec![
            pod("x").label("app", "web").on("a1"),
            pod("y").label("app", "web").on("b1"),
            pod("z").label("app", "web").on("b1"),
        ]
    };
    let mut c = cluster(nodes(), pods());
    // Ignore: a at 1, b at 2; min 1; a1 gives skew 1.
    assert_eq!(bound(&mut c, web("w")), "a1");
    // Now a at 2, b at 2: a1 would give skew 1, allowed; with another pod
    // on a1 (a at 3) Ignore refuses, Honor (b not counted) allows.
    c.add_pod(&pod("v").label("app", "web").on("a1").build())
        .expect("pod");
    let (_, reasons) = refused(&mut c, web("u"));
    assert_eq!(
        reasons.get(super::super::topology_spread::REASON_SKEW),
        Some(&1)
    );
    let mut honor = web("u");
    honor.0["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = json!("Honor");
    assert_eq!(bound(&mut c, honor), "a1");
}

#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_value() {
    // Two revisions of one app: only pods of the same revision count.
    let rev = |name: &str, r: &str| {
        let mut p = web(name).label("rev", r);
        p.0["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] = json!(["rev"]);
        p
    };
    let mut c = cluster(
        two_zones(110),
        vec![
            pod("x").label("app", "web").label("rev", "1").on("a1"),
            pod("y").label("app", "web").label("rev", "1").on("a1"),
            pod("big").label("app", "db").req("6", "6Gi").on("b1"),
        ],
    );
    // Revision 1 is at 2 in zone a and 0 in b: it must go to b, though b1
    // is the fuller node.
    assert_eq!(bound(&mut c, rev("r1", "1")), "b1");
    // Revision 2 counts none of them, so the emptier a1 may take it.
    assert_eq!(bound(&mut c, rev("r2", "2")), "a1");
}
