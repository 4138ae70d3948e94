//! One test (or a few) per spec rule, on hand-made clusters.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use common::{members, zones};
use sluice_subsetting::health_check::{health_check, HealthCheckError, HealthCheckOverrides};
use sluice_subsetting::instance_groups::instance_groups;
use sluice_subsetting::lb_kind::{
    kind_after_creation, kind_at_creation, CannotDisableSubsetting, InternalBackend, LbKind,
    RequestedKind, Subsetting,
};
use sluice_subsetting::share::zone_quotas;
use sluice_subsetting::{
    compute, InputError, Node, ServiceKey, SubsetService, SubsetState, TrafficPolicy, Warning,
};

fn key(name: &str) -> ServiceKey {
    ServiceKey::new("default", name)
}

fn cluster_services(n: usize) -> Vec<SubsetService> {
    (0..n)
        .map(|i| SubsetService::cluster(key(&format!("svc-{i}"))))
        .collect()
}

/// Why a `Cluster` health check with these overrides is refused.
fn cluster_override_error(o: HealthCheckOverrides) -> HealthCheckError {
    health_check(TrafficPolicy::Cluster, None, &o).unwrap_err()
}

fn per_zone(subset: &sluice_subsetting::Subset) -> Vec<usize> {
    subset.zones.values().map(Vec::len).collect()
}

// spec: N1
#[test]
fn one_neg_per_zone_per_service_and_a_node_in_many() {
    let nodes = zones(&[10, 10, 10]);
    let out = compute(&nodes, &cluster_services(50), &BTreeMap::new()).unwrap();
    assert_eq!(out.subsets.len(), 50);
    for subset in out.subsets.values() {
        let zones: Vec<&str> = subset.zones.keys().map(String::as_str).collect();
        assert_eq!(zones, ["zone-0", "zone-1", "zone-2"]);
    }
    // 50 Services × 24 members over 30 nodes: some node is in several NEGs.
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for subset in out.subsets.values() {
        for m in subset.members() {
            *times.entry(m).or_default() += 1;
        }
    }
    assert!(times.values().any(|&t| t > 1));
}

// spec: N2 (1–25 nodes: every node, serving pod or not)
#[test]
fn cluster_with_25_nodes_or_fewer_uses_every_node() {
    for counts in [&[1][..], &[9, 8, 8], &[20, 5], &[1, 1, 1, 1, 21]] {
        let nodes = zones(counts);
        let out = compute(&nodes, &cluster_services(3), &BTreeMap::new()).unwrap();
        for subset in out.subsets.values() {
            assert_eq!(subset.len(), nodes.len(), "{counts:?}");
        }
        assert!(out.warnings.is_empty());
    }
}

// spec: N2 (more than 25: up to 25, 24 when the zone count divides 24),
// 300 nodes in 3 uneven zones
#[test]
fn cluster_300_nodes_in_uneven_zones_gets_8_per_zone() {
    let nodes = zones(&[200, 70, 30]);
    let out = compute(&nodes, &cluster_services(20), &BTreeMap::new()).unwrap();
    let mut distinct = BTreeSet::new();
    for subset in out.subsets.values() {
        assert_eq!(per_zone(subset), [8, 8, 8]);
        distinct.insert(members(subset));
    }
    // The salt gives each Service its own nodes.
    assert_eq!(distinct.len(), 20);
}

// spec: N2 (the share rule: smallest zone first, unused share rolls over;
// 24 only when the zone count divides 24)
#[test]
fn zone_shares_roll_over_and_24_only_divides() {
    let check = |counts: &[usize], want: &[usize]| {
        let out = compute(&zones(counts), &cluster_services(1), &BTreeMap::new()).unwrap();
        let subset = out.subsets.values().next().unwrap();
        assert_eq!(per_zone(subset), want, "{counts:?}");
    };
    check(&[3, 100], &[3, 21]); // 2 zones: 24, the small zone's 9 roll over
    check(&[100, 100], &[12, 12]);
    check(&[50, 50, 50, 50], &[6, 6, 6, 6]); // 4 divides 24
    check(&[50, 50, 50, 50, 50], &[5, 5, 5, 5, 5]); // 5 does not: 25
    check(&[2, 50, 50, 50, 50], &[2, 5, 6, 6, 6]); // 25: 2, then 23/4=5, 18/3 ...
    assert_eq!(
        zone_quotas(&[("a", 200), ("b", 70), ("c", 30)], 250),
        [("a", 150), ("b", 70), ("c", 30)]
    );
    assert_eq!(
        zone_quotas(&[("a", 200), ("b", 70), ("c", 30)], 24),
        [("a", 8), ("b", 8), ("c", 8)]
    );
}

// spec: N2 (kept stable as nodes come and go)
#[test]
fn cluster_subset_is_stable_under_churn() {
    let mut nodes = zones(&[200, 70, 30]);
    let services = cluster_services(5);
    let first = compute(&nodes, &services, &BTreeMap::new()).unwrap();
    // A recompute with the last subsets changes nothing.
    assert_eq!(compute(&nodes, &services, &first.subsets).unwrap(), first);
    // New nodes that would rank first do not displace anyone.
    nodes.extend((0..50).map(|i| Node::new(format!("new-{i}"), "zone-0")));
    let grown = compute(&nodes, &services, &first.subsets).unwrap();
    assert_eq!(grown.subsets, first.subsets);
    // A member leaving is replaced by one node of its zone; nothing else moves.
    let svc = &services[0].key;
    let gone = first.subsets[svc].zones["zone-1"][0].clone();
    nodes.retain(|n| n.name != gone);
    let shrunk = compute(&nodes, &services, &grown.subsets).unwrap();
    let (before, after) = (members(&first.subsets[svc]), members(&shrunk.subsets[svc]));
    let removed: Vec<_> = before.difference(&after).collect();
    let added: Vec<_> = after.difference(&before).collect();
    assert_eq!(removed, [&gone]);
    assert_eq!(added.len(), 1);
    assert!(
        added[0].starts_with("n-1-"),
        "replacement {added:?} is in zone-1"
    );
}

// spec: N3
#[test]
fn local_uses_only_serving_nodes() {
    let nodes = zones(&[200, 70, 30]);
    let serving: Vec<String> = nodes.iter().step_by(7).map(|n| n.name.clone()).collect();
    let svc = SubsetService::local(key("local"), serving.clone());
    let out = compute(&nodes, &[svc], &BTreeMap::new()).unwrap();
    let got = members(&out.subsets[&key("local")]);
    assert_eq!(got, serving.into_iter().collect::<BTreeSet<_>>());
    assert!(out.warnings.is_empty());
}

// spec: N3 (at most 250; 300 serving nodes in 200/70/30)
#[test]
fn local_caps_at_250_with_a_warning() {
    let nodes = zones(&[200, 70, 30]);
    let svc = SubsetService::local(key("big"), nodes.iter().map(|n| n.name.clone()));
    let out = compute(&nodes, &[svc], &BTreeMap::new()).unwrap();
    assert_eq!(per_zone(&out.subsets[&key("big")]), [150, 70, 30]);
    assert_eq!(
        out.warnings,
        [Warning::LocalOverLimit {
            service: key("big"),
            serving_nodes: 300,
            limit: 250
        }]
    );
}

// spec: N1–N3 (left out: autoscaler taint, exclusion label, deletion;
// readiness is not an input, so a not-Ready node stays)
#[test]
fn excluded_nodes_never_appear() {
    let mut nodes = zones(&[10, 10, 10]);
    nodes[0].to_be_deleted = true;
    nodes[11].exclude_label = true;
    nodes[22].deleting = true;
    let excluded = [
        nodes[0].name.clone(),
        nodes[11].name.clone(),
        nodes[22].name.clone(),
    ];
    let mut services = cluster_services(30);
    services.push(SubsetService::local(
        key("local"),
        nodes.iter().map(|n| n.name.clone()),
    ));
    let out = compute(&nodes, &services, &BTreeMap::new()).unwrap();
    for subset in out.subsets.values() {
        assert!(subset.members().all(|m| !excluded.iter().any(|e| e == m)));
    }
    assert_eq!(out.subsets[&key("local")].len(), 27);
    let groups = instance_groups(&nodes);
    assert!(groups
        .zones
        .values()
        .flatten()
        .all(|m| !excluded.contains(m)));
}

// spec: N4
#[test]
fn instance_groups_hold_every_node_and_warn_above_250() {
    let nodes = zones(&[260, 70, 30]);
    let groups = instance_groups(&nodes);
    let sizes: Vec<usize> = groups.zones.values().map(Vec::len).collect();
    assert_eq!(sizes, [260, 70, 30]);
    assert_eq!(
        groups.warnings,
        [Warning::InstanceGroupOverLimit {
            zone: "zone-0".into(),
            nodes: 260,
            limit: 250
        }]
    );
    assert!(groups.warnings[0].to_string().contains("uneven or lost"));
    assert!(instance_groups(&zones(&[250])).warnings.is_empty());
}

// spec: N5
#[test]
fn subsetting_turns_on_never_off_and_only_new_internal_lbs_use_negs() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let on = Subsetting::default().set(true, t0).unwrap();
    assert_eq!(
        on.set(false, t0 + Duration::from_secs(1)),
        Err(CannotDisableSubsetting)
    );
    assert_eq!(on.set(true, t0 + Duration::from_secs(5)).unwrap(), on);
    assert_eq!(
        Subsetting::default().set(false, t0).unwrap(),
        Subsetting::default()
    );
    let internal: BTreeMap<String, String> = [(
        "networking.gke.io/load-balancer-type".to_string(),
        "Internal".to_string(),
    )]
    .into();
    let before = t0 - Duration::from_secs(1);
    assert_eq!(
        kind_at_creation(&internal, &on, before),
        LbKind::Internal(InternalBackend::InstanceGroups)
    );
    assert_eq!(
        kind_at_creation(&internal, &on, t0),
        LbKind::Internal(InternalBackend::Negs)
    );
    assert_eq!(
        kind_at_creation(&internal, &Subsetting::default(), t0),
        LbKind::Internal(InternalBackend::InstanceGroups)
    );
}

// spec: P7
#[test]
fn lb_kind_is_decided_at_creation_and_kept() {
    let ann = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let off = Subsetting::default();
    let t = SystemTime::UNIX_EPOCH;
    let legacy = ann(&[("cloud.google.com/load-balancer-type", "Internal")]);
    let rbs = ann(&[("cloud.google.com/l4-rbs", "enabled")]);
    assert_eq!(
        kind_at_creation(&legacy, &off, t),
        LbKind::Internal(InternalBackend::InstanceGroups)
    );
    assert_eq!(
        kind_at_creation(&rbs, &off, t),
        LbKind::ExternalBackendService
    );
    assert_eq!(
        kind_at_creation(&ann(&[]), &off, t),
        LbKind::ExternalTargetPool
    );
    // Removing l4-rbs later does not convert the LB; the status says so.
    let later = kind_after_creation(LbKind::ExternalBackendService, &ann(&[]));
    assert_eq!(later.kind, LbKind::ExternalBackendService);
    assert_eq!(
        later.annotation_disagrees,
        Some(RequestedKind::ExternalTargetPool)
    );
    // Adding it later does not convert a target pool either.
    let later = kind_after_creation(LbKind::ExternalTargetPool, &rbs);
    assert_eq!(later.kind, LbKind::ExternalTargetPool);
    assert_eq!(
        later.annotation_disagrees,
        Some(RequestedKind::ExternalBackendService)
    );
    // An internal LB whose annotation was removed stays internal.
    let kind = LbKind::Internal(InternalBackend::Negs);
    assert_eq!(kind_after_creation(kind, &ann(&[])).kind, kind);
    assert_eq!(
        kind_after_creation(kind, &legacy).annotation_disagrees,
        None
    );
}

// spec: health checks GKE makes (Cluster and Local defaults)
#[test]
fn health_check_defaults() {
    let none = HealthCheckOverrides::default();
    let c = health_check(TrafficPolicy::Cluster, None, &none).unwrap();
    assert_eq!((c.port, c.path.as_str()), (10256, "/healthz"));
    assert_eq!(
        (
            c.interval_seconds,
            c.timeout_seconds,
            c.healthy_threshold,
            c.unhealthy_threshold
        ),
        (8, 1, 1, 3)
    );
    let l = health_check(TrafficPolicy::Local, Some(31_000), &none).unwrap();
    assert_eq!((l.port, l.path.as_str()), (31_000, "/healthz"));
    assert_eq!(
        (
            l.interval_seconds,
            l.timeout_seconds,
            l.healthy_threshold,
            l.unhealthy_threshold
        ),
        (3, 1, 1, 2)
    );
}

// spec: health checks (overrides validated, errors naming the field)
#[test]
fn health_check_overrides_are_validated() {
    let over = HealthCheckOverrides {
        port: Some(8080),
        path: Some("/ready".into()),
        interval_seconds: Some(10),
        timeout_seconds: Some(5),
        healthy_threshold: Some(2),
        unhealthy_threshold: Some(4),
    };
    let c = health_check(TrafficPolicy::Local, None, &over).unwrap();
    assert_eq!(
        (
            c.port,
            c.interval_seconds,
            c.timeout_seconds,
            c.healthy_threshold,
            c.unhealthy_threshold
        ),
        (8080, 10, 5, 2, 4)
    );
    let e = cluster_override_error(HealthCheckOverrides {
        timeout_seconds: Some(9),
        ..Default::default()
    });
    assert_eq!(
        e,
        HealthCheckError::TimeoutOverInterval {
            timeout: 9,
            interval: 8
        }
    );
    assert!(e.to_string().contains("timeoutSeconds"));
    let e = cluster_override_error(HealthCheckOverrides {
        healthy_threshold: Some(0),
        ..Default::default()
    });
    assert!(
        e.to_string().starts_with("healthCheck.healthyThreshold"),
        "{e}"
    );
    let e = cluster_override_error(HealthCheckOverrides {
        unhealthy_threshold: Some(-1),
        ..Default::default()
    });
    assert!(
        e.to_string().starts_with("healthCheck.unhealthyThreshold"),
        "{e}"
    );
    for port in [0, 65_536, -5] {
        assert_eq!(
            cluster_override_error(HealthCheckOverrides {
                port: Some(port),
                ..Default::default()
            }),
            HealthCheckError::Port { value: port }
        );
    }
    let e = cluster_override_error(HealthCheckOverrides {
        path: Some("healthz".into()),
        ..Default::default()
    });
    assert!(e.to_string().starts_with("healthCheck.path"), "{e}");
    let e = health_check(TrafficPolicy::Local, None, &HealthCheckOverrides::default()).unwrap_err();
    assert!(e.to_string().starts_with("spec.healthCheckNodePort"), "{e}");
}

// Input refused, naming the field.
#[test]
fn bad_input_is_refused() {
    let none = BTreeMap::new();
    let e = compute(&[Node::new("a", "")], &[], &none).unwrap_err();
    assert_eq!(e, InputError::MissingZone { node: "a".into() });
    assert!(e.to_string().contains("topology.kubernetes.io/zone"));
    let e = compute(&[Node::new("a", "z"), Node::new("a", "z")], &[], &none).unwrap_err();
    assert_eq!(e, InputError::DuplicateNode { node: "a".into() });
    let twice = [cluster_services(1), cluster_services(1)].concat();
    let e = compute(&[], &twice, &none).unwrap_err();
    assert_eq!(
        e,
        InputError::DuplicateService {
            service: "default/svc-0".into()
        }
    );
    let e = compute(
        &[],
        &[SubsetService::cluster(ServiceKey::new("", "x"))],
        &none,
    )
    .unwrap_err();
    assert_eq!(e, InputError::EmptyServiceField { field: "namespace" });
    let mut state = SubsetState::new(&[], &[], &none).unwrap();
    assert_eq!(
        state.remove_node("x"),
        Err(InputError::UnknownNode { node: "x".into() })
    );
}

// spec: N2/N3 incremental events report the Services whose subsets changed.
#[test]
fn events_report_changed_services() {
    let nodes = zones(&[20, 20, 20]);
    let services = cluster_services(10);
    let mut state = SubsetState::new(&nodes, &services, &BTreeMap::new()).unwrap();
    let out = state.outcome();
    assert!(state
        .add_node(&Node::new("extra", "zone-1"))
        .unwrap()
        .is_empty());
    let member = out.subsets[&key("svc-3")].zones["zone-2"][0].clone();
    let changed = state.remove_node(&member).unwrap();
    let holders: Vec<ServiceKey> = out
        .subsets
        .iter()
        .filter(|(_, s)| s.members().any(|m| m == member))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(changed, holders);
    let mut tainted = Node::new("extra", "zone-1");
    tainted.to_be_deleted = true;
    assert!(state.update_node(&tainted).unwrap().is_empty());
}

// spec: N2 (zones of equal size are visited by name, whatever order the
// nodes come in: the share must not depend on the order zones were seen)
#[test]
fn equal_zones_are_visited_by_name() {
    // 7 zones of 10: 25 / 7 = 3 for the first three visited, then 4.
    let mut nodes = zones(&[10; 7]);
    nodes.reverse();
    let mut state = SubsetState::new(&nodes[..10], &cluster_services(1), &BTreeMap::new()).unwrap();
    for node in &nodes[10..] {
        state.add_node(node).unwrap();
    }
    let full = compute(&nodes, &cluster_services(1), &BTreeMap::new()).unwrap();
    assert_eq!(
        per_zone(&full.subsets[&key("svc-0")]),
        [3, 3, 3, 4, 4, 4, 4]
    );
    assert_eq!(
        per_zone(&state.outcome().subsets[&key("svc-0")]),
        [3, 3, 3, 4, 4, 4, 4]
    );
}

// A Service that stops being an internal LB with NEGs leaves the state;
// one that is added later gets its subset at once.
#[test]
fn services_come_and_go() {
    let nodes = zones(&[20, 20, 20]);
    let mut state = SubsetState::new(&nodes, &cluster_services(2), &BTreeMap::new()).unwrap();
    state.remove_service(&key("svc-0")).unwrap();
    assert!(state.subset(&key("svc-0")).is_none());
    assert_eq!(
        state.remove_service(&key("svc-0")),
        Err(InputError::UnknownService {
            service: "default/svc-0".into()
        })
    );
    assert!(state
        .upsert_service(&SubsetService::cluster(key("svc-9")))
        .unwrap());
    let full = compute(
        &nodes,
        &[
            SubsetService::cluster(key("svc-1")),
            SubsetService::cluster(key("svc-9")),
        ],
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(state.outcome(), full);
}

// spec: health checks (GCE's own bounds: intervals and timeouts up to
// 300 s, thresholds up to 10; a Local Service's own port must be valid)
#[test]
fn health_check_bounds() {
    let e = cluster_override_error(HealthCheckOverrides {
        interval_seconds: Some(301),
        ..Default::default()
    });
    assert_eq!(
        e,
        HealthCheckError::TooLarge {
            field: "intervalSeconds",
            value: 301,
            max: 300
        }
    );
    let e = cluster_override_error(HealthCheckOverrides {
        healthy_threshold: Some(11),
        ..Default::default()
    });
    assert!(
        e.to_string()
            .starts_with("healthCheck.healthyThreshold: must be at most 10"),
        "{e}"
    );
    let none = HealthCheckOverrides::default();
    for port in [0, 70_000] {
        let e = health_check(TrafficPolicy::Local, Some(port), &none).unwrap_err();
        assert_eq!(e, HealthCheckError::NodePort { value: Some(port) });
    }
    // Cluster ignores healthCheckNodePort.
    assert_eq!(
        health_check(TrafficPolicy::Cluster, Some(0), &none)
            .unwrap()
            .port,
        10256
    );
}
