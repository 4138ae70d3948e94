use serde_json::json;

use super::*;

#[test]
fn insufficient_resources_and_pod_count_are_counted_per_node() {
    let mut c = cluster(
        vec![
            node("a", "1", "1Gi", 110),
            node("b", "1", "8Gi", 110),
            node("c", "8", "8Gi", 1),
        ],
        vec![pod("x").on("c")],
    );
    let (msg, reasons) = refused(&mut c, pod("p").req("2", "2Gi"));
    assert_eq!(
        msg,
        "0/3 nodes are available: 1 Insufficient memory, 1 Too many pods, 2 Insufficient cpu."
    );
    assert_eq!(reasons.get("Insufficient cpu"), Some(&2));
    assert_eq!(reasons.get("Insufficient memory"), Some(&1));
    assert_eq!(reasons.get("Too many pods"), Some(&1));
}

#[test]
fn requests_already_bound_count_against_the_node() {
    let mut c = cluster(
        vec![node("a", "1", "1Gi", 110)],
        vec![pod("x").req("600m", "0").on("a")],
    );
    let (msg, _) = refused(&mut c, pod("p").req("500m", "0"));
    assert_eq!(msg, "0/1 nodes are available: 1 Insufficient cpu.");
    assert_eq!(bound(&mut c, pod("q").req("400m", "0")), "a");
}

#[test]
fn a_pod_without_requests_still_takes_a_pod_slot() {
    let mut c = cluster(vec![node("a", "1", "1Gi", 1)], vec![]);
    assert_eq!(bound(&mut c, pod("p")), "a");
    let (msg, _) = refused(&mut c, pod("q"));
    assert_eq!(msg, "0/1 nodes are available: 1 Too many pods.");
}

#[test]
fn reasons_are_sorted_as_upstream_sorts_them() {
    let mut nodes: Vec<NodeB> = (0..3)
        .map(|i| node(&format!("n{i}"), "1", "1Gi", 10))
        .collect();
    nodes.push(node("c0", "8", "8Gi", 10).cordon());
    nodes.push(node("c1", "8", "8Gi", 10).cordon());
    let mut c = cluster(nodes, vec![]);
    let (msg, _) = refused(&mut c, pod("p").req("2", "0"));
    assert_eq!(
        msg,
        "0/5 nodes are available: 2 node(s) were unschedulable, 3 Insufficient cpu."
    );
}

#[test]
fn node_selector_and_required_affinity() {
    let nodes = || {
        vec![
            node("a", "1", "1Gi", 10)
                .label("disk", "ssd")
                .label("gen", "3"),
            node("b", "1", "1Gi", 10)
                .label("disk", "hdd")
                .label("gen", "5"),
            node("c", "1", "1Gi", 10),
        ]
    };
    let mut c = cluster(nodes(), vec![]);
    let p = pod("p").spec("nodeSelector", json!({"disk": "hdd"}));
    assert_eq!(bound(&mut c, p), "b");
    let (msg, _) = refused(
        &mut c,
        pod("q").spec("nodeSelector", json!({"disk": "nvme"})),
    );
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    );
    let required = |terms: Value| {
        pod("r").spec(
            "affinity",
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}),
        )
    };
    for (terms, want) in [
        (
            json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}]),
            "b",
        ),
        (
            json!([{"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}]),
            "a",
        ),
        (
            json!([{"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]}]),
            "c",
        ),
        (
            json!([{"matchExpressions": [
            {"key": "disk", "operator": "Exists"},
            {"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]),
            "b",
        ),
        (
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]),
            "c",
        ),
        // Terms are ORed: the first matches nothing.
        (
            json!([{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]},
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]),
            "a",
        ),
    ] {
        let mut c = cluster(nodes(), vec![]);
        assert_eq!(bound(&mut c, required(terms.clone())), want, "{terms}");
    }
    // An empty term matches no node.
    let mut c = cluster(nodes(), vec![]);
    let (_, reasons) = refused(&mut c, required(json!([{}])));
    assert_eq!(
        reasons.get("node(s) didn't match Pod's node affinity/selector"),
        Some(&3)
    );
}

#[test]
fn untolerated_taints_filter_with_upstream_wording() {
    let nodes = || {
        vec![
            node("a", "1", "1Gi", 10).taint("dedicated", "gpu", "NoSchedule"),
            node("b", "1", "1Gi", 10).taint("maint", "", "NoExecute"),
        ]
    };
    let mut c = cluster(nodes(), vec![]);
    let (msg, _) = refused(&mut c, pod("p"));
    assert_eq!(
        msg,
        "0/2 nodes are available: 2 node(s) had untolerated taint(s)."
    );
    let p = pod("p").tolerate(
        json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}),
    );
    assert_eq!(bound(&mut c, p), "a");
    let wrong_value = pod("q").tolerate(json!({"key": "dedicated", "value": "cpu"}));
    assert!(matches!(
        schedule(&mut c, &wrong_value.build()),
        Decision::Unschedulable { .. }
    ));
    // An empty key with Exists tolerates every taint; an empty effect
    // every effect.
    let mut c = cluster(nodes(), vec![]);
    let all = || pod("r").tolerate(json!({"operator": "Exists"}));
    assert!(["a", "b"].contains(&bound(&mut c, all()).as_str()));
    c.upsert_node(
        &node("b", "1", "1Gi", 0)
            .taint("maint", "", "NoExecute")
            .build(),
    )
    .expect("node");
    assert_eq!(bound(&mut c, all()), "a");
    let mut c = cluster(
        vec![node("b", "1", "1Gi", 10).taint("maint", "", "NoExecute")],
        vec![],
    );
    assert_eq!(
        bound(
            &mut c,
            pod("s").tolerate(json!({"key": "maint", "operator": "Exists"}))
        ),
        "b"
    );
}

#[test]
fn prefer_no_schedule_only_lowers_the_score() {
    let mut c = cluster(
        vec![
            node("a", "4", "4Gi", 10).taint("spot", "", "PreferNoSchedule"),
            node("b", "4", "4Gi", 10),
        ],
        vec![],
    );
    for i in 0..3 {
        assert_eq!(bound(&mut c, pod(&format!("p{i}")).req("1", "1Gi")), "b");
    }
    // b is full; a still takes pods.
    assert_eq!(bound(&mut c, pod("p3").req("2", "1Gi")), "a");
    // Tolerating it makes both nodes equal on taints: the emptier wins.
    let t = json!({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"});
    assert_eq!(bound(&mut c, pod("p4").req("100m", "0").tolerate(t)), "a");
}

#[test]
fn cordoned_nodes_take_only_pods_that_tolerate_it() {
    let mut c = cluster(vec![node("a", "1", "1Gi", 10).cordon()], vec![]);
    let (msg, _) = refused(&mut c, pod("p"));
    assert_eq!(
        msg,
        "0/1 nodes are available: 1 node(s) were unschedulable."
    );
    let t = json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"});
    assert_eq!(bound(&mut c, pod("q").tolerate(t)), "a");
}

#[test]
fn unreadable_pods_stay_unschedulable_naming_the_field() {
    let mut c = cluster(vec![node("a", "1", "1Gi", 10)], vec![]);
    let (msg, reasons) = refused(&mut c, pod("p").req("1", "lots"));
    assert_eq!(
        msg,
        "0/1 nodes are available: pod default/p: spec.containers[0].resources.requests.memory: quantity \"lots\": has no digits."
    );
    assert!(reasons.is_empty());
    let bad_selector = pod("q").spread("q", "zone", 1, "DoNotSchedule").spec(
        "topologySpreadConstraints",
        json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}}]),
    );
    let (msg, _) = refused(&mut c, bad_selector);
    assert!(
        msg.contains("spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator: \"Near\""),
        "{msg}"
    );
    let bad_op = pod("r").tolerate(json!({"key": "k", "operator": "Like"}));
    assert!(refused(&mut c, bad_op)
        .0
        .contains("spec.tolerations[0].operator"));
    let bad_gt = pod("s").spec(
        "affinity",
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["four"]}]}]}}}),
    );
    assert!(refused(&mut c, bad_gt)
        .0
        .contains("nodeSelectorTerms[0].matchExpressions[0].values: \"four\" is not an integer"));
}

#[test]
fn a_node_with_unreadable_allocatable_takes_no_pod() {
    let mut bad = node("bad", "1", "1Gi", 10);
    bad.0["status"]["allocatable"]["cpu"] = json!("one");
    let mut c = Cluster::new();
    let e = c.upsert_node(&bad.build()).expect_err("bad cpu");
    assert_eq!(
        e.to_string(),
        "node bad: status.allocatable.cpu: quantity \"one\": has no digits"
    );
    c.upsert_node(&node("good", "1", "1Gi", 10).build())
        .expect("good");
    assert_eq!(bound(&mut c, pod("p")), "good");
    assert_eq!(bound(&mut c, pod("q")), "good");
    assert_eq!(c.node_count(), 2);
}

#[test]
fn extended_resources_and_ephemeral_storage_are_checked() {
    let mut gpu = node("g", "8", "8Gi", 10);
    gpu.0["status"]["allocatable"]["example.com/gpu"] = json!("1");
    gpu.0["status"]["allocatable"]["ephemeral-storage"] = json!("10Gi");
    let mut c = cluster(vec![gpu, node("plain", "8", "8Gi", 10)], vec![]);
    let wants = |name: &str, gpus: &str, disk: &str| {
        let mut p = pod(name);
        p.0["spec"]["containers"][0]["resources"] = json!({"requests": {
            "example.com/gpu": gpus, "ephemeral-storage": disk}});
        p
    };
    assert_eq!(bound(&mut c, wants("p", "1", "1Gi")), "g");
    let (msg, _) = refused(&mut c, wants("q", "1", "20Gi"));
    assert_eq!(
        msg,
        "0/2 nodes are available: 2 Insufficient ephemeral-storage, 2 Insufficient example.com/gpu."
    );
}

#[test]
fn host_ports_clash_on_overlapping_addresses() {
    let with_port = |name: &str, port: i32, ip: Option<&str>, protocol: Option<&str>| {
        let mut p = pod(name);
        let mut spec = json!({"containerPort": 80, "hostPort": port});
        if let Some(ip) = ip {
            spec["hostIP"] = json!(ip);
        }
        if let Some(protocol) = protocol {
            spec["protocol"] = json!(protocol);
        }
        p.0["spec"]["containers"][0]["ports"] = json!([spec]);
        p
    };
    let mut c = cluster(
        vec![node("a", "8", "8Gi", 10)],
        vec![with_port("x", 8080, Some("10.0.0.1"), None).on("a")],
    );
    let (msg, _) = refused(&mut c, with_port("p", 8080, None, None));
    assert_eq!(
        msg,
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    );
    assert!(matches!(
        schedule(
            &mut c,
            &with_port("q", 8080, Some("10.0.0.1"), Some("TCP")).build()
        ),
        Decision::Unschedulable { .. }
    ));
    // Another address, another protocol or another port fit.
    assert_eq!(
        bound(&mut c, with_port("r", 8080, Some("10.0.0.2"), None)),
        "a"
    );
    assert_eq!(bound(&mut c, with_port("s", 8080, None, Some("UDP"))), "a");
    assert_eq!(bound(&mut c, with_port("t", 9090, None, None)), "a");
    // Once x and r are gone, the TCP port is free on every address.
    assert!(c.remove_pod("default", "x"));
    assert!(c.remove_pod("default", "r"));
    assert_eq!(bound(&mut c, with_port("u", 8080, None, None)), "a");
}
