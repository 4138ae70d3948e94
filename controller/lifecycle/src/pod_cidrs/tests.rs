use k8s_openapi::api::core::v1::NodeSpec;
use sluice_model::k8s::{Node, ObjectMeta};

use super::*;

fn node(name: &str, cidrs: &[&str]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidrs: (!cidrs.is_empty()).then(|| cidrs.iter().map(|c| c.to_string()).collect()),
            pod_cidr: cidrs.first().map(|c| c.to_string()),
            ..Default::default()
        }),
        status: None,
    }
}

fn give(a: &mut Allocator, name: &str) -> Vec<String> {
    a.allocate(&node(name, &[])).unwrap().unwrap()
}

#[test]
fn the_lowest_free_block_is_given_and_freed_on_delete() {
    let mut a = Allocator::new(&["10.244.0.0/16"], &[]).unwrap();
    assert_eq!(give(&mut a, "n1"), ["10.244.0.0/24"]);
    assert_eq!(give(&mut a, "n2"), ["10.244.1.0/24"]);
    a.release(&node("n1", &["10.244.0.0/24"]));
    assert_eq!(give(&mut a, "n3"), ["10.244.0.0/24"]);
    assert_eq!(give(&mut a, "n4"), ["10.244.2.0/24"]);
    assert_eq!(a.used(), [("10.244.0.0/16".to_string(), 3)]);
}

#[test]
fn dual_stack_gives_one_block_of_each_family_with_default_masks() {
    let mut a = Allocator::new(&["10.244.0.0/16", "fd00:10:244::/56"], &[]).unwrap();
    assert_eq!(give(&mut a, "n1"), ["10.244.0.0/24", "fd00:10:244::/64"]);
    assert_eq!(give(&mut a, "n2"), ["10.244.1.0/24", "fd00:10:244:1::/64"]);
    let mut a = Allocator::new(&["10.244.0.0/16"], &[Some(26)]).unwrap();
    give(&mut a, "n1");
    assert_eq!(give(&mut a, "n2"), ["10.244.0.64/26"]);
}

#[test]
fn a_node_with_pod_cidrs_keeps_them() {
    let mut a = Allocator::new(&["10.244.0.0/16"], &[]).unwrap();
    assert_eq!(a.allocate(&node("n1", &["10.99.0.0/24"])).unwrap(), None);
    assert_eq!(a.used(), [("10.244.0.0/16".to_string(), 0)]);
}

#[test]
fn the_used_set_is_rebuilt_from_the_nodes() {
    let mut a = Allocator::new(&["10.244.0.0/16"], &[]).unwrap();
    give(&mut a, "stale");
    let nodes = [
        node("n1", &["10.244.0.0/24"]),
        node("n2", &["10.244.2.0/24"]),
        node("outside", &["192.168.0.0/24"]),
        node("broken", &["10.244.1.0/24x"]),
    ];
    let problems = a.rebuild(&nodes);
    assert_eq!(
        problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["Node broken: spec.podCIDRs[0]: \"10.244.1.0/24x\" is not a CIDR"]
    );
    assert_eq!(give(&mut a, "n3"), ["10.244.1.0/24"]);
    assert_eq!(give(&mut a, "n4"), ["10.244.3.0/24"]);
    // A node's wider block (set by hand) holds every block it covers.
    let mut a = Allocator::new(&["10.244.0.0/16"], &[]).unwrap();
    a.rebuild(&[node("wide", &["10.244.0.0/23"])]);
    assert_eq!(give(&mut a, "n1"), ["10.244.2.0/24"]);
}

#[test]
fn exhaustion_names_the_cidr_and_takes_nothing() {
    let mut a = Allocator::new(&["10.0.0.0/23"], &[]).unwrap();
    give(&mut a, "n1");
    give(&mut a, "n2");
    let err = a.allocate(&node("n3", &[])).unwrap_err();
    assert_eq!(
        err,
        LifecycleError::CidrExhausted {
            cidr: "10.0.0.0/23".into(),
            mask: 24
        }
    );
    assert_eq!(
        err.to_string(),
        "no pod CIDR left: every /24 of 10.0.0.0/23 is in use"
    );
    // Dual-stack with the IPv6 side full: the IPv4 block is not taken.
    let mut a = Allocator::new(&["10.0.0.0/16", "fd00::/64"], &[None, Some(64)]).unwrap();
    give(&mut a, "n1");
    assert!(matches!(
        a.allocate(&node("n2", &[])),
        Err(LifecycleError::CidrExhausted { cidr, .. }) if cidr == "fd00::/64"
    ));
    assert_eq!(a.used()[0], ("10.0.0.0/16".to_string(), 1));
}

#[test]
fn bad_configurations_are_refused_naming_the_flag() {
    let err = |cidrs: &[&str], masks: &[Option<u8>]| {
        Allocator::new(cidrs, masks).unwrap_err().to_string()
    };
    assert_eq!(
        err(&[], &[]),
        "--cluster-cidr: 0 CIDRs given; one, or one IPv4 and one IPv6"
    );
    assert_eq!(
        err(&["10.0.0.0/16", "10.1.0.0/16"], &[]),
        "--cluster-cidr: 10.1.0.0/16: two CIDRs of one family; dual-stack takes one IPv4 and one IPv6"
    );
    assert_eq!(
        err(&["10.0.0.0/33"], &[]),
        "--cluster-cidr: \"10.0.0.0/33\" is not a CIDR"
    );
    assert_eq!(
        err(&["10.0.0.1/16"], &[]),
        "--cluster-cidr: 10.0.0.1/16 has host bits set (the network is 10.0.0.0/16)"
    );
    assert_eq!(
        err(&["10.0.0.0/16"], &[Some(8)]),
        "--node-cidr-mask-size: /8 does not fit in 10.0.0.0/16: it must be between /16 and /32"
    );
    assert_eq!(
        err(&["10.0.0.0/7"], &[]),
        "--node-cidr-mask-size: /24 splits 10.0.0.0/7 into more than 2^16 blocks; use a mask of at most /23"
    );
    // At the limit: 2^16 blocks each.
    assert!(Allocator::new(&["10.0.0.0/8", "fd00::/48"], &[]).is_ok());
}
