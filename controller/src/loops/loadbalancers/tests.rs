//! The loop's decisions without I/O: a small store the plans are applied
//! to, so each test runs decisions as the loop would, one after another.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::json;
use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{Node, Service};
use sluice_model::load_balancer::{
    Backends, HealthCheck, InstanceGroup, L4LoadBalancer, LoadBalancerType, NetworkEndpointGroup,
    Protocol, ANNOTATION_IGNORED,
};
use sluice_subsetting::lb_kind::Subsetting;

use super::inputs::{frontends, NodeFacts};
use super::plan::{plan, plan_groups, Existing, Inputs, Plan, TOO_MANY_BACKENDS};

const INTERNAL: &str = "networking.gke.io/load-balancer-type";

fn node(name: &str, zone: &str, i: usize) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        zone: Some(zone.into()),
        ipv4: Some(format!("198.18.{}.{}", i / 250, i % 250 + 1)),
        ipv6: None,
        to_be_deleted: false,
        exclude_label: false,
        deleting: false,
        draining: false,
    }
}

/// `sizes` nodes per zone, zones `zone-a`, `zone-b`, ...
fn cluster(sizes: &[usize]) -> Vec<NodeFacts> {
    let mut out = Vec::new();
    for (z, &n) in sizes.iter().enumerate() {
        let zone = format!("zone-{}", (b'a' + z as u8) as char);
        for i in 0..n {
            let idx = out.len();
            out.push(node(&format!("{zone}-n{i}"), &zone, idx));
        }
    }
    out
}

fn service(internal: bool, policy: &str, ports: serde_json::Value) -> Service {
    let annotations = if internal {
        json!({INTERNAL: "Internal"})
    } else {
        json!({})
    };
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                 "healthCheckNodePort": 31000, "ports": ports},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.19.0.10"}]}},
    }))
    .expect("service")
}

fn tcp80() -> serde_json::Value {
    json!([{"port": 80, "protocol": "TCP"}])
}

fn on_since(secs: u64) -> Subsetting {
    Subsetting {
        enabled_since: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("time")
}

/// What the loop has written for the one Service `shop/web`.
#[derive(Default)]
struct Store {
    lb: Option<L4LoadBalancer>,
    hc: Option<HealthCheck>,
    negs: BTreeMap<String, NetworkEndpointGroup>,
    /// The loop's memory of what it reported.
    reported: BTreeSet<String>,
}

impl Store {
    /// Decide for `svc` over `nodes`, apply the plan, return it.
    fn decide(
        &mut self,
        svc: Option<&Service>,
        nodes: &[NodeFacts],
        serving: &[&str],
        subsetting: Subsetting,
        now: Timestamp,
    ) -> Plan {
        let negs: Vec<&NetworkEndpointGroup> = self.negs.values().collect();
        let p = plan(&Inputs {
            namespace: "shop",
            name: "web",
            service: svc,
            nodes,
            serving: serving.iter().map(|s| s.to_string()).collect(),
            subsetting,
            existing: Existing {
                lb: self.lb.as_ref(),
                hc: self.hc.as_ref(),
                negs: &negs,
            },
            reported: &self.reported,
            now,
        });
        self.reported = p.reported.clone();
        for n in p.create_negs.iter().chain(&p.update_negs) {
            self.negs
                .insert(n.metadata.name.clone().unwrap_or_default(), n.clone());
        }
        for n in &p.delete_negs {
            self.negs.remove(n);
        }
        if let Some(lb) = p.create_lb.clone().or(p.update_lb.clone()) {
            self.lb = Some(lb);
        }
        if let (Some(lb), Some(s)) = (self.lb.as_mut(), &p.lb_status) {
            lb.status = Some(s.clone());
        }
        if let Some(hc) = &p.create_hc {
            self.hc = Some(hc.clone());
        }
        if let (Some(hc), Some(s)) = (self.hc.as_mut(), &p.hc_status) {
            hc.status = Some(s.clone());
        }
        if p.delete_lb {
            self.lb = None;
        }
        if p.delete_hc {
            self.hc = None;
        }
        p
    }

    /// A store with `shop/web` made as an internal `Cluster` LB with
    /// subsetting on, over `nodes`.
    fn internal(nodes: &[NodeFacts]) -> Store {
        let mut s = Store::default();
        s.decide(
            Some(&service(true, "Cluster", tcp80())),
            nodes,
            &[],
            on_since(0),
            at(100),
        );
        s
    }

    fn members(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.negs
            .values()
            .map(|n| {
                (
                    n.spec.zone.clone(),
                    n.spec
                        .endpoints
                        .iter()
                        .map(|e| e.instance.clone())
                        .collect(),
                )
            })
            .collect()
    }

    fn total(&self) -> usize {
        self.members().values().map(BTreeSet::len).sum()
    }

    fn lb(&self) -> &L4LoadBalancer {
        self.lb.as_ref().expect("an LB")
    }
}

// spec: N1
// spec: N2
#[test]
fn internal_cluster_policy_gets_24_nodes_in_one_neg_per_zone() {
    let nodes = cluster(&[150, 100, 50]);
    let svc = service(true, "Cluster", tcp80());
    let mut s = Store::default();
    let p = s.decide(Some(&svc), &nodes, &[], on_since(0), at(100));
    assert_eq!(p.create_negs.len(), 3, "one NEG per zone");
    // Three zones divide 24: 8 each, the smallest zone first.
    let sizes: Vec<usize> = s.members().values().map(BTreeSet::len).collect();
    assert_eq!(sizes, [8, 8, 8]);
    let lb = s.lb();
    assert_eq!(lb.spec.type_, LoadBalancerType::Internal);
    assert_eq!(lb.spec.backends, Backends::NetworkEndpointGroups);
    assert_eq!(
        lb.spec.network_endpoint_groups,
        ["web.zone-a", "web.zone-b", "web.zone-c"]
    );
    assert_eq!(lb.status.as_ref().and_then(|s| s.members), Some(24));
    // Each endpoint carries its node's InternalIP.
    for neg in s.negs.values() {
        for e in &neg.spec.endpoints {
            let n = nodes.iter().find(|n| n.name == e.instance).expect("a node");
            assert_eq!(Some(&e.ip_address), n.ipv4.as_ref());
            assert!(e.instance.starts_with(&neg.spec.zone));
        }
    }
    // Decided again with nothing changed: nothing to write.
    let again = s.decide(Some(&svc), &nodes, &[], on_since(0), at(200));
    assert!(again.is_empty(), "{again:?}");
}

// spec: N2
#[test]
fn a_small_zone_gives_its_unused_share_to_the_others() {
    let nodes = cluster(&[150, 100, 3]);
    let s = Store::internal(&nodes);
    let sizes: Vec<usize> = s.members().values().map(BTreeSet::len).collect();
    // zone-c holds 3 of its 8; the 21 left split 10 (zone-b) and 11.
    assert_eq!(sizes, [11, 10, 3]);
    // Up to 25 nodes in all: every one of them.
    let small = cluster(&[10, 10, 5]);
    let s = Store::internal(&small);
    assert_eq!(s.total(), 25);
}

// spec: N3
#[test]
fn local_policy_uses_only_serving_nodes_and_warns_above_250() {
    let nodes = cluster(&[150, 100, 50]);
    let svc = service(true, "Local", tcp80());
    let serving = ["zone-a-n1", "zone-a-n2", "zone-c-n7"];
    let mut s = Store::default();
    s.decide(Some(&svc), &nodes, &serving, on_since(0), at(100));
    let all: BTreeSet<String> = s.members().into_values().flatten().collect();
    assert_eq!(all, serving.iter().map(|s| s.to_string()).collect());
    // zone-b has no serving node: its NEG is there, empty.
    assert_eq!(s.members()["zone-b"].len(), 0);
    let hc =
        s.hc.as_ref()
            .and_then(|h| h.status.clone())
            .expect("status");
    assert_eq!(
        (hc.port, hc.check_interval_sec, hc.unhealthy_threshold),
        (31000, 3, 2)
    );

    // 300 serving nodes: 250 of them, a warning in the status and as an
    // Event, once.
    let every: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let p = s.decide(Some(&svc), &nodes, &every, on_since(0), at(200));
    assert_eq!(s.total(), 250);
    assert_eq!(p.events.len(), 1, "{:?}", p.events);
    assert_eq!(p.events[0].reason, TOO_MANY_BACKENDS);
    assert!(p.events[0].message.contains("300 nodes"), "{:?}", p.events);
    let warned = &s.lb().status.as_ref().expect("status").warnings;
    assert_eq!(warned.len(), 1);
    let again = s.decide(Some(&svc), &nodes, &every, on_since(0), at(300));
    assert!(again.is_empty(), "no second Event: {again:?}");
}

// spec: N4
#[test]
fn without_subsetting_the_shared_instance_groups_hold_every_eligible_node() {
    let mut nodes = cluster(&[260, 30]);
    nodes[0].exclude_label = true;
    nodes[1].to_be_deleted = true;
    let svc = service(true, "Cluster", tcp80());
    let mut s = Store::default();
    let p = s.decide(Some(&svc), &nodes, &[], Subsetting::default(), at(100));
    assert!(p.create_negs.is_empty());
    let lb = s.lb();
    assert_eq!(lb.spec.backends, Backends::InstanceGroups);
    assert_eq!(lb.spec.instance_groups, ["zone-a", "zone-b"]);
    assert_eq!(lb.status.as_ref().and_then(|s| s.members), Some(288));
    // 258 in zone-a: warned on the Service.
    assert_eq!(p.events.len(), 1);
    assert!(p.events[0].message.contains("258 nodes"), "{:?}", p.events);
    // One more node there: the status says so, no second Event.
    let mut more = nodes.clone();
    more.push(node("zone-a-extra", "zone-a", 400));
    let p = s.decide(Some(&svc), &more, &[], Subsetting::default(), at(200));
    assert!(p.events.is_empty(), "{:?}", p.events);
    let warned = &s.lb().status.as_ref().expect("status").warnings;
    assert!(warned[0].contains("259 nodes"), "{warned:?}");
    // The cache still shows the LB as it was before any warning (the
    // status write not seen yet) while another node joins: what the loop
    // reported is remembered, so still no second Event.
    let seen = s.lb().status.clone();
    if let Some(lb) = s.lb.as_mut() {
        lb.status = None;
    }
    more.push(node("zone-a-extra2", "zone-a", 401));
    let p = s.decide(Some(&svc), &more, &[], Subsetting::default(), at(250));
    assert!(p.events.is_empty(), "{:?}", p.events);
    assert!(p.lb_status.is_some(), "the status is written again");
    assert_ne!(s.lb().status, seen);
    // Once the warning is gone from what the loop decides, it is news
    // again when it comes back.
    let few = cluster(&[100, 30]);
    let p = s.decide(Some(&svc), &few, &[], Subsetting::default(), at(260));
    assert!(p.events.is_empty() && p.reported.is_empty(), "{p:?}");
    let p = s.decide(Some(&svc), &more, &[], Subsetting::default(), at(270));
    assert_eq!(p.events.len(), 1, "{:?}", p.events);

    let groups = plan_groups(&nodes, true, &[]);
    let a = groups
        .create
        .iter()
        .find(|g| g.spec.zone == "zone-a")
        .expect("a");
    assert_eq!(a.spec.instances.len(), 258);
    assert!(!a
        .spec
        .instances
        .iter()
        .any(|i| i.name == nodes[0].name || i.name == nodes[1].name));
    let warned: Vec<&String> = groups
        .status
        .iter()
        .flat_map(|(_, s)| &s.warnings)
        .collect();
    assert_eq!(warned.len(), 1, "only zone-a is over 250");
    // Applied, decided again: nothing; no LB uses groups: they go.
    let stored: Vec<InstanceGroup> = groups
        .create
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.status = groups
                .status
                .iter()
                .find(|(n, _)| Some(n) == g.metadata.name.as_ref())
                .map(|(_, s)| s.clone());
            g
        })
        .collect();
    let refs: Vec<&InstanceGroup> = stored.iter().collect();
    assert!(plan_groups(&nodes, true, &refs).is_empty());
    assert_eq!(plan_groups(&nodes, false, &refs).delete.len(), 2);
}

// spec: N5
#[test]
fn subsetting_counts_only_for_lbs_made_after_it_was_turned_on() {
    let nodes = cluster(&[30, 30]);
    let svc = service(true, "Cluster", tcp80());
    // Made before subsetting was on: instance groups, and kept after.
    let mut before = Store::default();
    before.decide(Some(&svc), &nodes, &[], on_since(500), at(100));
    assert_eq!(before.lb().spec.backends, Backends::InstanceGroups);
    let p = before.decide(Some(&svc), &nodes, &[], on_since(500), at(600));
    assert!(p.is_empty(), "{p:?}");
    // Made after: NEGs.
    let mut after = Store::default();
    after.decide(Some(&svc), &nodes, &[], on_since(500), at(600));
    assert_eq!(after.lb().spec.backends, Backends::NetworkEndpointGroups);
    // External LBs never use NEGs.
    let mut ext = Store::default();
    ext.decide(
        Some(&service(false, "Cluster", tcp80())),
        &nodes,
        &[],
        on_since(0),
        at(600),
    );
    assert_eq!(ext.lb().spec.type_, LoadBalancerType::ExternalTargetPool);
    assert_eq!(ext.lb().spec.backends, Backends::InstanceGroups);
}

// spec: P7
#[test]
fn a_later_annotation_is_reported_not_acted_on() {
    let nodes = cluster(&[30]);
    let mut s = Store::internal(&nodes);
    let negs = s.negs.clone();
    // The internal annotation removed: the LB stays internal with its NEGs.
    let external = service(false, "Cluster", tcp80());
    let p = s.decide(Some(&external), &nodes, &[], on_since(0), at(200));
    assert_eq!(s.lb().spec.type_, LoadBalancerType::Internal);
    assert_eq!(s.negs, negs);
    let c = &s.lb().status.as_ref().expect("status").conditions;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].type_, ANNOTATION_IGNORED);
    assert!(
        c[0].message.contains("ExternalTargetPool") && c[0].message.contains("not converted"),
        "{}",
        c[0].message
    );
    assert_eq!(p.events.len(), 1);
    // Said once; its time kept while it holds.
    assert!(s
        .decide(Some(&external), &nodes, &[], on_since(0), at(300))
        .is_empty());
    // The annotation back: the condition goes.
    s.decide(
        Some(&service(true, "Cluster", tcp80())),
        &nodes,
        &[],
        on_since(0),
        at(400),
    );
    assert!(s
        .lb()
        .status
        .as_ref()
        .expect("status")
        .conditions
        .is_empty());
}

// spec: N2
#[test]
fn removing_a_node_changes_one_endpoint_at_most() {
    let mut nodes = cluster(&[150, 100, 50]);
    let svc = service(true, "Cluster", tcp80());
    let mut s = Store::default();
    s.decide(Some(&svc), &nodes, &[], on_since(0), at(100));
    let before = s.members();
    let members: BTreeSet<String> = before.values().flatten().cloned().collect();
    // A node that is no member goes: no NEG is written.
    let outsider = nodes
        .iter()
        .position(|n| !members.contains(&n.name))
        .expect("an outsider");
    nodes.remove(outsider);
    let p = s.decide(Some(&svc), &nodes, &[], on_since(0), at(200));
    assert_eq!(p.writes(), 0, "{p:?}");
    // A member is tainted for deletion: exactly one NEG changes, by one
    // endpoint out and one in.
    let member = nodes
        .iter()
        .position(|n| members.contains(&n.name))
        .expect("a member");
    nodes[member].to_be_deleted = true;
    let p = s.decide(Some(&svc), &nodes, &[], on_since(0), at(300));
    assert_eq!(p.update_negs.len(), 1);
    assert_eq!(p.writes(), 1, "the LB's spec and status stay: {p:?}");
    let after = s.members();
    let zone = &p.update_negs[0].spec.zone;
    assert_eq!(before[zone].difference(&after[zone]).count(), 1);
    assert_eq!(after[zone].difference(&before[zone]).count(), 1);
    // A restart: the decision from the stored NEGs alone is the same.
    let mut fresh = Store {
        negs: s.negs.clone(),
        ..Default::default()
    };
    fresh.decide(Some(&svc), &nodes, &[], on_since(0), at(400));
    assert_eq!(fresh.members(), after);
}

// spec: N1
#[test]
fn excluded_nodes_and_nodes_without_an_address_are_no_endpoints() {
    let mut nodes = cluster(&[10, 10]);
    nodes[0].to_be_deleted = true;
    nodes[1].exclude_label = true;
    nodes[2].deleting = true;
    nodes[3].ipv4 = None;
    nodes[4].zone = None;
    nodes[5].draining = true;
    let s = Store::internal(&nodes);
    let all: BTreeSet<String> = s.members().into_values().flatten().collect();
    assert_eq!(all.len(), 14);
    for n in &nodes[..6] {
        assert!(!all.contains(&n.name), "{}", n.name);
    }
}

// spec: N1, N4, U1 — nodes all drained at once (a blue pool with no green
// node yet) stay behind the load balancer rather than leave it with none;
// the first node that is not draining takes their place.
#[test]
fn when_every_node_drains_the_draining_ones_stay_backends() {
    let mut nodes = cluster(&[2, 2]);
    for n in &mut nodes {
        n.draining = true;
    }
    let all: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let s = Store::internal(&nodes);
    let members: BTreeSet<String> = s.members().into_values().flatten().collect();
    assert_eq!(members, all);
    let groups = plan_groups(&nodes, true, &[]);
    let grouped: BTreeSet<String> = groups
        .create
        .iter()
        .flat_map(|g| g.spec.instances.iter().map(|i| i.name.clone()))
        .collect();
    assert_eq!(grouped, all);
    // A green node: only it.
    nodes.push(node("green", "zone-a", 9));
    let s = Store::internal(&nodes);
    let members: BTreeSet<String> = s.members().into_values().flatten().collect();
    assert_eq!(members, BTreeSet::from(["green".to_owned()]));
}

#[test]
fn a_service_that_stops_being_a_load_balancer_loses_its_objects() {
    let nodes = cluster(&[30]);
    let svc = service(true, "Cluster", tcp80());
    let mut s = Store::default();
    s.decide(Some(&svc), &nodes, &[], on_since(0), at(100));
    let mut plain = svc.clone();
    if let Some(spec) = plain.spec.as_mut() {
        spec.type_ = Some("ClusterIP".into());
    }
    let p = s.decide(Some(&plain), &nodes, &[], on_since(0), at(200));
    assert!(
        p.delete_lb && p.delete_hc && p.delete_negs.len() == 1,
        "{p:?}"
    );
    assert!(s.lb.is_none() && s.hc.is_none() && s.negs.is_empty());
    // Deleted outright: nothing is left to delete.
    assert!(s.decide(None, &nodes, &[], on_since(0), at(300)).is_empty());
}

#[test]
fn frontends_are_ingress_ips_by_ports_each_once() {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [
            {"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "name": "again"},
            {"port": 53, "protocol": "UDP"}, {"port": 9, "protocol": "SCTP"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.19.0.10"}, {"hostname": "lb.test"},
            {"ip": "not-an-ip"}, {"ip": "fd00::10"}]}},
    }))
    .expect("service");
    let f = frontends(&svc);
    let got: Vec<(String, i64, Protocol)> = f
        .iter()
        .map(|f| (f.ip_address.clone(), f.port, f.protocol))
        .collect();
    assert_eq!(
        got,
        [
            ("198.19.0.10".into(), 80, Protocol::Tcp),
            ("198.19.0.10".into(), 53, Protocol::Udp),
            ("fd00::10".into(), 80, Protocol::Tcp),
            ("fd00::10".into(), 53, Protocol::Udp),
        ]
    );
    // No ports, no ingress: no frontends, and the objects are still made.
    let bare = service(true, "Cluster", json!([]));
    let mut bare = bare;
    bare.status = None;
    let mut s = Store::default();
    s.decide(Some(&bare), &cluster(&[3]), &[], on_since(0), at(100));
    assert!(s.lb().spec.frontends.is_empty());
    assert!(s.hc.is_some() && s.negs.len() == 1);
}

#[test]
fn user_overrides_are_applied_to_the_effective_check() {
    let nodes = cluster(&[3]);
    let svc = service(true, "Cluster", tcp80());
    let mut s = Store::default();
    s.decide(Some(&svc), &nodes, &[], on_since(0), at(100));
    let hc = s.hc.as_mut().expect("hc");
    assert_eq!(hc.spec, Default::default(), "made with an empty spec");
    hc.spec.check_interval_sec = Some(5);
    hc.spec.request_path = Some("/ready".into());
    let p = s.decide(Some(&svc), &nodes, &[], on_since(0), at(200));
    assert_eq!(p.writes(), 1, "only the check's status: {p:?}");
    let st =
        s.hc.as_ref()
            .and_then(|h| h.status.clone())
            .expect("status");
    assert_eq!(
        (st.port, st.request_path.as_str(), st.check_interval_sec),
        (10256, "/ready", 5)
    );
}

#[test]
fn node_facts_read_zone_addresses_and_exclusions() {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "deletionTimestamp": "2026-11-27T05:00:00Z",
            "annotations": {"sluice.dev/drain": "NodeUpgrade"},
            "labels": {"topology.kubernetes.io/zone": "zone-a",
                       "node.kubernetes.io/exclude-from-external-load-balancers": ""}},
        "spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "ExternalIP", "address": "198.19.9.9"},
            {"type": "InternalIP", "address": "fd00::5"},
            {"type": "InternalIP", "address": "198.18.0.5"}]},
    }))
    .expect("node");
    let f = NodeFacts::of(&n);
    assert_eq!(f.zone.as_deref(), Some("zone-a"));
    assert_eq!(f.ipv4.as_deref(), Some("198.18.0.5"));
    assert_eq!(f.ipv6.as_deref(), Some("fd00::5"));
    assert!(f.to_be_deleted && f.exclude_label && f.deleting && f.draining);
    assert!(NodeFacts::of(&Node::default()).decision_node().is_none());
}
