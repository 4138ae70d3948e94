use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServicePort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::Endpoint;
use sluice_model::k8s::{
    jiff::Timestamp, EndpointSlice, IntOrString, Node, ObjectMeta, Pod, Service, Time,
};

use super::*;
use crate::LifecycleError;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn service(ports: Vec<ServicePort>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("svc-uid".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(labels(&[("app", "web")])),
            ports: Some(ports),
            ip_families: Some(vec!["IPv4".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn port(name: &str, port: i32, target: IntOrString) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some("TCP".into()),
        target_port: Some(target),
        ..Default::default()
    }
}

fn web() -> Service {
    service(vec![port("http", 80, IntOrString::Int(8080))])
}

fn pod(name: &str, ips: &[&str], ready: bool, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("{name}-uid")),
            labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ips: Some(ips.iter().map(|ip| PodIP { ip: ip.to_string() }).collect()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn node(name: &str, zone: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(&[(desired::ZONE_LABEL, zone)])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What the API server would hold after the plan: creates named in order.
fn apply(existing: &[EndpointSlice], plan: &SlicePlan, next: &mut u32) -> Vec<EndpointSlice> {
    let mut out: Vec<EndpointSlice> = existing
        .iter()
        .filter(|s| !plan.delete.contains(s.metadata.name.as_ref().unwrap()))
        .map(|s| {
            plan.update
                .iter()
                .find(|u| u.metadata.name == s.metadata.name)
                .unwrap_or(s)
                .clone()
        })
        .collect();
    for c in &plan.create {
        let mut c = c.clone();
        *next += 1;
        c.metadata.name = Some(format!(
            "{}{next}",
            c.metadata.generate_name.clone().unwrap()
        ));
        out.push(c);
    }
    out
}

fn settle(svc: &Service, pods: &[Pod], nodes: &[Node]) -> Vec<EndpointSlice> {
    let plan = reconcile(svc, pods, nodes, &[]).unwrap();
    apply(&[], &plan, &mut 0)
}

fn eps(slice: &EndpointSlice) -> &[Endpoint] {
    slice.endpoints.as_deref().unwrap()
}

#[test]
fn selected_pods_are_published_with_their_node_zone_and_owner() {
    let svc = web();
    let pods = [
        pod("a", &["10.0.0.1"], true, "n1"),
        pod("b", &["10.0.0.2"], true, "n2"),
    ];
    let nodes = [node("n1", "z1"), node("n2", "z2")];
    let plan = reconcile(&svc, &pods, &nodes, &[]).unwrap();
    assert!(plan.update.is_empty() && plan.delete.is_empty(), "{plan:?}");
    let [slice] = plan.create.as_slice() else {
        panic!("{plan:?}")
    };
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(slice.metadata.namespace.as_deref(), Some("default"));
    let l = slice.metadata.labels.as_ref().unwrap();
    assert_eq!(l[SERVICE_NAME_LABEL], "web");
    assert_eq!(l[MANAGED_BY_LABEL], "endpointslice-controller.k8s.io");
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Service", "svc-uid")
    );
    assert_eq!(owner.controller, Some(true));
    let p = &slice.ports.as_ref().unwrap()[0];
    assert_eq!(
        (p.name.as_deref(), p.port, p.protocol.as_deref()),
        (Some("http"), Some(8080), Some("TCP"))
    );
    let e = eps(slice);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].addresses, ["10.0.0.1"]);
    assert_eq!(e[0].node_name.as_deref(), Some("n1"));
    assert_eq!(e[0].zone.as_deref(), Some("z1"));
    assert_eq!(e[1].zone.as_deref(), Some("z2"));
    let r = e[0].target_ref.as_ref().unwrap();
    assert_eq!(
        (
            r.kind.as_deref(),
            r.name.as_deref(),
            r.namespace.as_deref(),
            r.uid.as_deref()
        ),
        (Some("Pod"), Some("a"), Some("default"), Some("a-uid"))
    );
    // Published once, nothing more to write.
    let published = apply(&[], &plan, &mut 0);
    assert_eq!(
        reconcile(&svc, &pods, &nodes, &published).unwrap(),
        SlicePlan::default()
    );
}

#[test]
fn services_without_selector_or_external_name_get_nothing() {
    let pods = [pod("a", &["10.0.0.1"], true, "n1")];
    let mut svc = web();
    svc.spec.as_mut().unwrap().selector = None;
    assert!(reconcile(&svc, &pods, &[], &[]).unwrap().is_empty());
    let mut svc = web();
    svc.spec.as_mut().unwrap().type_ = Some("ExternalName".into());
    assert!(reconcile(&svc, &pods, &[], &[]).unwrap().is_empty());
}

#[test]
fn only_live_selected_pods_with_an_address_are_endpoints() {
    let mut other_ns = pod("other-ns", &["10.0.0.2"], true, "n1");
    other_ns.metadata.namespace = Some("kube-system".into());
    let mut unselected = pod("unselected", &["10.0.0.3"], true, "n1");
    unselected.metadata.labels = Some(labels(&[("app", "db")]));
    let no_ip = pod("no-ip", &[], true, "n1");
    let mut done = pod("done", &["10.0.0.4"], false, "n1");
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let mut failed = pod("failed", &["10.0.0.5"], false, "n1");
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let pods = [
        pod("a", &["10.0.0.1"], true, "n1"),
        other_ns,
        unselected,
        no_ip,
        done,
        failed,
    ];
    let slices = settle(&web(), &pods, &[]);
    assert_eq!(slices.len(), 1);
    let names: Vec<_> = eps(&slices[0])
        .iter()
        .map(|e| e.target_ref.as_ref().unwrap().name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a"]);
}

fn conditions(e: &Endpoint) -> (bool, bool, bool) {
    let c = e.conditions.as_ref().unwrap();
    (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
}

#[test]
fn conditions_follow_readiness_and_deletion() {
    let mut terminating_ready = pod("c", &["10.0.0.3"], true, "n1");
    terminating_ready.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let mut terminating_unready = pod("d", &["10.0.0.4"], false, "n1");
    terminating_unready.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let pods = [
        pod("a", &["10.0.0.1"], true, "n1"),
        pod("b", &["10.0.0.2"], false, "n1"),
        terminating_ready,
        terminating_unready,
    ];
    let slices = settle(&web(), &pods, &[]);
    let got: Vec<_> = eps(&slices[0]).iter().map(conditions).collect();
    // (ready, serving, terminating): terminating pods stay, serving as
    // they report, never ready.
    assert_eq!(
        got,
        [
            (true, true, false),
            (false, false, false),
            (false, true, true),
            (false, false, true)
        ]
    );
    // publishNotReadyAddresses: ready whatever the pod says.
    let mut svc = web();
    svc.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
    let slices = settle(&svc, &pods, &[]);
    let got: Vec<_> = eps(&slices[0]).iter().map(conditions).collect();
    assert_eq!(
        got,
        [
            (true, true, false),
            (true, false, false),
            (true, true, true),
            (true, false, true)
        ]
    );
}

#[test]
fn dual_stack_services_get_one_slice_per_family() {
    let mut svc = web();
    svc.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into(), "IPv4".into()]);
    let pods = [
        pod("a", &["10.0.0.1", "fd00::1"], true, "n1"),
        pod("v4-only", &["10.0.0.2"], true, "n1"),
    ];
    let slices = settle(&svc, &pods, &[]);
    let by_type: Vec<(&str, Vec<&str>)> = slices
        .iter()
        .map(|s| {
            let addrs = eps(s).iter().map(|e| e.addresses[0].as_str()).collect();
            (s.address_type.as_str(), addrs)
        })
        .collect();
    assert_eq!(
        by_type,
        [
            ("IPv6", vec!["fd00::1"]),
            ("IPv4", vec!["10.0.0.1", "10.0.0.2"])
        ]
    );
    // A family the Service drops loses its slice.
    let mut single = svc.clone();
    single.spec.as_mut().unwrap().ip_families = Some(vec!["IPv4".into()]);
    let plan = reconcile(&single, &pods, &[], &slices).unwrap();
    assert_eq!(plan.delete, [slices[0].metadata.name.clone().unwrap()]);
    assert!(plan.create.is_empty() && plan.update.is_empty(), "{plan:?}");
}

#[test]
fn named_target_ports_resolve_per_pod_and_split_slices() {
    let svc = service(vec![port("http", 80, IntOrString::String("http".into()))]);
    let mut other_port = pod("b", &["10.0.0.2"], true, "n1");
    other_port.spec.as_mut().unwrap().containers[0]
        .ports
        .as_mut()
        .unwrap()[0]
        .container_port = 9090;
    let mut no_port = pod("c", &["10.0.0.3"], true, "n1");
    no_port.spec.as_mut().unwrap().containers[0].ports = None;
    let pods = [pod("a", &["10.0.0.1"], true, "n1"), other_port, no_port];
    let slices = settle(&svc, &pods, &[]);
    let mut got: Vec<(Vec<Option<i32>>, Vec<&str>)> = slices
        .iter()
        .map(|s| {
            let ports = s.ports.as_ref().unwrap().iter().map(|p| p.port).collect();
            let addrs = eps(s).iter().map(|e| e.addresses[0].as_str()).collect();
            (ports, addrs)
        })
        .collect();
    got.sort();
    // The pod that does not declare the port is published without it.
    assert_eq!(
        got,
        [
            (vec![], vec!["10.0.0.3"]),
            (vec![Some(8080)], vec!["10.0.0.1"]),
            (vec![Some(9090)], vec!["10.0.0.2"]),
        ]
    );
}

fn many(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            pod(
                &format!("p{i:03}"),
                &[&format!("10.0.{}.{}", i / 200, i % 200 + 1)],
                true,
                "n1",
            )
        })
        .collect()
}

#[test]
fn slices_hold_at_most_a_hundred_endpoints() {
    let slices = settle(&web(), &many(250), &[]);
    let sizes: Vec<usize> = slices.iter().map(|s| eps(s).len()).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let small = Config {
        max_endpoints_per_slice: 2,
    };
    let plan = reconcile_with(&small, &web(), &many(5), &[], &[]).unwrap();
    let sizes: Vec<usize> = plan.create.iter().map(|s| eps(s).len()).collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[test]
fn a_change_rewrites_only_the_slice_that_holds_it() {
    let svc = web();
    let mut pods = many(150);
    let slices = settle(&svc, &pods, &[]);
    // p120 lives in the second slice; it turns unready.
    pods[120] = pod("p120", &["10.0.0.121"], false, "n1");
    let plan = reconcile(&svc, &pods, &[], &slices).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].metadata.name, slices[1].metadata.name);
    assert_eq!(eps(&plan.update[0]).len(), 50);
    // A pod gone: its slice rewritten without it.
    pods.remove(10);
    let plan = reconcile(&svc, &pods, &[], &slices).unwrap();
    let names: Vec<_> = plan
        .update
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            slices[0].metadata.name.clone(),
            slices[1].metadata.name.clone()
        ]
    );
    assert_eq!(eps(&plan.update[0]).len(), 99);
}

#[test]
fn new_endpoints_fill_existing_slices_before_new_ones() {
    let svc = web();
    let pods = many(150);
    let slices = settle(&svc, &pods[..149], &[]);
    let plan = reconcile(&svc, &pods, &[], &slices).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(plan.update.len(), 1);
    assert_eq!(plan.update[0].metadata.name, slices[1].metadata.name);
    assert_eq!(eps(&plan.update[0]).len(), 50);
    // The unchanged slice closest to full takes them: 30 + 2 before 20 + 2
    // (whatever their names' order).
    let mut a = settle(&svc, &pods[..30], &[]);
    a[0].metadata.name = Some("web-z".into());
    let mut b = settle(&svc, &pods[30..50], &[]);
    b[0].metadata.name = Some("web-b".into());
    let existing = [a[0].clone(), b[0].clone()];
    let plan = reconcile(&svc, &pods[..52], &[], &existing).unwrap();
    assert_eq!(plan.update.len(), 1, "{plan:?}");
    assert_eq!(plan.update[0].metadata.name, a[0].metadata.name);
    assert_eq!(eps(&plan.update[0]).len(), 32);
}

#[test]
fn a_service_without_endpoints_keeps_one_empty_slice() {
    let svc = web();
    let plan = reconcile(&svc, &[], &[], &[]).unwrap();
    let [placeholder] = plan.create.as_slice() else {
        panic!("{plan:?}")
    };
    assert_eq!(placeholder.address_type, "IPv4");
    assert!(eps(placeholder).is_empty());
    let published = apply(&[], &plan, &mut 0);
    assert!(reconcile(&svc, &[], &[], &published).unwrap().is_empty());
    // The last pod gone: its slice is emptied in place, not deleted and
    // created again.
    let pods = [pod("a", &["10.0.0.1"], true, "n1")];
    let slices = settle(&svc, &pods, &[]);
    let plan = reconcile(&svc, &[], &[], &slices).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(plan.update.len(), 1);
    assert!(eps(&plan.update[0]).is_empty() && plan.update[0].ports.as_ref().unwrap().is_empty());
    // A pod again: the placeholder is reused for it.
    let emptied = apply(&slices, &plan, &mut 5);
    let plan = reconcile(&svc, &pods, &[], &emptied).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(eps(&plan.update[0]).len(), 1);
}

#[test]
fn foreign_stale_and_duplicate_slices() {
    let svc = web();
    let pods = [pod("a", &["10.0.0.1"], true, "n1")];
    let slices = settle(&svc, &pods, &[]);
    // Another controller's slice for the same Service is not touched.
    let mut foreign = slices[0].clone();
    foreign.metadata.name = Some("web-custom".into());
    foreign
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(MANAGED_BY_LABEL.into(), "someone-else".into());
    let existing = [slices[0].clone(), foreign];
    assert!(reconcile(&svc, &pods, &[], &existing).unwrap().is_empty());
    // A copy of the endpoint in a second slice: that slice goes.
    let mut dup = slices[0].clone();
    dup.metadata.name = Some("web-zz".into());
    let existing = [slices[0].clone(), dup];
    let plan = reconcile(&svc, &pods, &[], &existing).unwrap();
    assert_eq!(plan.delete, ["web-zz"]);
    assert!(plan.create.is_empty() && plan.update.is_empty(), "{plan:?}");
    // A slice owned by an earlier Service of the same name is replaced
    // (its delete and the create become one update only if it is ours).
    let mut stale = slices[0].clone();
    stale.metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".into();
    let plan = reconcile(&svc, &pods, &[], &[stale]).unwrap();
    assert_eq!(plan.delete, [slices[0].metadata.name.clone().unwrap()]);
    assert_eq!(plan.create.len(), 1);
}

#[test]
fn service_label_changes_rewrite_the_slices() {
    let mut svc = web();
    let pods = [pod("a", &["10.0.0.1"], true, "n1")];
    let slices = settle(&svc, &pods, &[]);
    svc.metadata.labels = Some(labels(&[("team", "blue"), (SERVICE_NAME_LABEL, "spoof")]));
    let plan = reconcile(&svc, &pods, &[], &slices).unwrap();
    assert_eq!(plan.update.len(), 1);
    let l = plan.update[0].metadata.labels.as_ref().unwrap();
    assert_eq!(
        (l["team"].as_str(), l[SERVICE_NAME_LABEL].as_str()),
        ("blue", "web")
    );
}

#[test]
fn inputs_that_cannot_be_read_are_named() {
    let mut svc = web();
    svc.spec.as_mut().unwrap().ip_families = Some(vec!["IPv5".into()]);
    let err = reconcile(&svc, &[], &[], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Service default/web: spec.ipFamilies[0]: \"IPv5\" is not IPv4 or IPv6"
    );
    let mut svc = web();
    svc.metadata.uid = None;
    assert_eq!(
        reconcile(&svc, &[], &[], &[]).unwrap_err(),
        LifecycleError::Missing {
            kind: "Service",
            object: "default/web".into(),
            field: "metadata.uid"
        }
    );
}

#[test]
fn a_target_port_change_rewrites_the_slice_in_place() {
    let pods = [pod("a", &["10.0.0.1"], true, "n1")];
    let slices = settle(&web(), &pods, &[]);
    let moved = service(vec![port("http", 80, IntOrString::Int(9090))]);
    let plan = reconcile(&moved, &pods, &[], &slices).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(plan.update[0].metadata.name, slices[0].metadata.name);
    assert_eq!(plan.update[0].ports.as_ref().unwrap()[0].port, Some(9090));
}

#[test]
fn an_ipv6_only_service_without_endpoints_is_stable() {
    let mut svc = web();
    svc.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into()]);
    let published = settle(&svc, &[], &[]);
    assert_eq!(published.len(), 1);
    assert!(reconcile(&svc, &[], &[], &published).unwrap().is_empty());
}

#[test]
fn the_plan_does_not_depend_on_input_order() {
    let svc = web();
    let pods = many(230);
    let nodes = [node("n1", "z1"), node("n2", "z2")];
    let slices = settle(&svc, &pods[..120], &nodes);
    let forward = reconcile(&svc, &pods, &nodes, &slices).unwrap();
    let mut rev_pods = pods.clone();
    rev_pods.reverse();
    let mut rev_slices = slices.clone();
    rev_slices.reverse();
    let nodes_rev = [node("n2", "z2"), node("n1", "z1")];
    let backward = reconcile(&svc, &rev_pods, &nodes_rev, &rev_slices).unwrap();
    assert_eq!(forward, backward);
    assert!(!forward.is_empty());
}

#[test]
fn a_slice_written_anyway_takes_the_new_endpoints() {
    let svc = web();
    let mut pods = many(256);
    let named = |range: std::ops::Range<usize>, name: &str| {
        let mut s = settle(&svc, &pods[range], &[]).remove(0);
        s.metadata.name = Some(name.into());
        s
    };
    // 100, 60 and 90 endpoints.
    let existing = [
        named(0..100, "web-a"),
        named(100..160, "web-b"),
        named(160..250, "web-c"),
    ];
    // A pod of web-b changes and six pods come: web-b is written anyway,
    // so it takes them (web-c, the fullest that fits, is left alone).
    pods[120] = pod("p120", &["10.0.0.121"], false, "n1");
    let plan = reconcile(&svc, &pods, &[], &existing).unwrap();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    let written: Vec<_> = plan
        .update
        .iter()
        .map(|s| s.metadata.name.as_deref())
        .collect();
    assert_eq!(written, [Some("web-b")]);
    assert_eq!(eps(&plan.update[0]).len(), 66);
}
