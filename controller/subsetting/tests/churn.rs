//! Property tests over random node churn: the incremental state equals a
//! full recompute after every event, and every subset keeps the rules.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{candidates, members, quotas, reference, zones};
use proptest::prelude::*;
use sluice_subsetting::share::{subset_limit, zone_quotas};
use sluice_subsetting::{
    compute, Node, Outcome, ServiceKey, Subset, SubsetService, SubsetState, TrafficPolicy,
};

/// A node from generated facts: `flags` 0–2 set one exclusion, others none.
fn node(name: String, zone: u8, flags: u8) -> Node {
    let mut node = Node::new(name, format!("zone-{zone}"));
    node.to_be_deleted = flags == 0;
    node.exclude_label = flags == 1;
    node.deleting = flags == 2;
    node
}

#[derive(Debug, Clone)]
enum Event {
    Add {
        zone: u8,
        flags: u8,
    },
    Remove(usize),
    Update {
        at: usize,
        zone: u8,
        flags: u8,
    },
    /// Toggles whether node `at` serves Local Service `svc`.
    Serve {
        svc: usize,
        at: usize,
    },
    /// Switches Service `c0` between `Cluster` and `Local` (serving where
    /// `l0` serves).
    Flip,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0..5u8, 0..20u8).prop_map(|(zone, flags)| Event::Add { zone, flags }),
        any::<usize>().prop_map(Event::Remove),
        (any::<usize>(), 0..5u8, 0..20u8).prop_map(|(at, zone, flags)| Event::Update {
            at,
            zone,
            flags
        }),
        (0..2usize, any::<usize>()).prop_map(|(svc, at)| Event::Serve { svc, at }),
        Just(Event::Flip),
    ]
}

/// Generated nodes: zone, exclusion flags, serving for Local Service 0 and 1.
fn cluster() -> impl Strategy<Value = Vec<(u8, u8, bool, bool)>> {
    prop::collection::vec((0..4u8, 0..20u8, any::<bool>(), any::<bool>()), 0..90)
}

fn services(nodes: &[Node], facts: &[(u8, u8, bool, bool)]) -> Vec<SubsetService> {
    let mut services: Vec<SubsetService> = (0..3)
        .map(|i| SubsetService::cluster(ServiceKey::new("ns", format!("c{i}"))))
        .collect();
    for l in 0..2 {
        let serving = nodes
            .iter()
            .zip(facts)
            .filter(|(_, f)| if l == 0 { f.2 } else { f.3 })
            .map(|(n, _)| n.name.clone());
        services.push(SubsetService::local(
            ServiceKey::new("ns", format!("l{l}")),
            serving,
        ));
    }
    services
}

fn nonempty(subset: &Subset) -> BTreeMap<String, Vec<String>> {
    subset
        .zones
        .iter()
        .filter(|(_, m)| !m.is_empty())
        .map(|(z, m)| (z.clone(), m.clone()))
        .collect()
}

fn zone_of<'a>(nodes: &'a [Node], name: &str) -> Option<&'a str> {
    nodes
        .iter()
        .find(|n| n.name == name)
        .map(|n| n.zone.as_str())
}

/// Every rule a subset must keep, given the nodes, the Services and the
/// previous subsets it was computed from.
fn check_rules(
    nodes: &[Node],
    services: &[SubsetService],
    out: &Outcome,
    prev: &BTreeMap<ServiceKey, Subset>,
) -> Result<(), TestCaseError> {
    let eligible_zones: BTreeSet<&str> = nodes
        .iter()
        .filter(|n| n.is_eligible())
        .map(|n| n.zone.as_str())
        .collect();
    for service in services {
        let subset = &out.subsets[&service.key];
        let prev_members = prev.get(&service.key).map(members).unwrap_or_default();
        // spec: N1, one NEG per zone with an eligible node.
        prop_assert_eq!(
            subset
                .zones
                .keys()
                .map(String::as_str)
                .collect::<BTreeSet<_>>(),
            eligible_zones.clone()
        );
        // The selection equals the rule written the plain way.
        prop_assert_eq!(nonempty(subset), reference(nodes, service, &prev_members));
        let by_zone = candidates(nodes, service);
        let total: usize = by_zone.values().map(Vec::len).sum();
        let limit = subset_limit(service.policy, total, by_zone.len());
        // Never over the limit; full when there are enough candidates.
        prop_assert_eq!(subset.len(), total.min(limit));
        let quotas = quotas(nodes, service);
        for (zone, names) in &subset.zones {
            let cands = by_zone.get(zone).cloned().unwrap_or_default();
            // Excluded nodes (and, for Local, nodes without a serving pod)
            // never appear.
            for name in names {
                prop_assert!(
                    cands.contains(name),
                    "{} is not a candidate of {}",
                    name,
                    service.key
                );
            }
            // Spread over zones as the share rule says.
            prop_assert_eq!(names.len(), quotas.get(zone).copied().unwrap_or(0));
            // Min removals: as many previous members stay as the quota allows.
            let still = cands.iter().filter(|c| prev_members.contains(*c)).count();
            let kept = names.iter().filter(|n| prev_members.contains(*n)).count();
            prop_assert_eq!(kept, still.min(names.len()));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Incremental == full recompute after every event, and every outcome
    /// keeps the rules (spec: N1–N3). On top, per event:
    /// - adding a node: where the Service's zone quotas are unchanged,
    ///   nothing changes; where they change (a new zone, a different
    ///   24/25 limit, a small zone growing into its share), members leave
    ///   only zones whose quota shrank, exactly as many as it shrank, and
    ///   join only zones whose quota grew, exactly as many as it grew;
    /// - removing a node in no subset with unchanged quotas changes nothing;
    /// - removing a member with unchanged quotas changes exactly that
    ///   member, replaced by one node of the same zone.
    #[test]
    fn incremental_equals_full_recompute(facts in cluster(), events in prop::collection::vec(event(), 1..25)) {
        let mut nodes: Vec<Node> = facts.iter().enumerate().map(|(i, f)| node(format!("n{i}"), f.0, f.1)).collect();
        let mut services = services(&nodes, &facts);
        let mut state = SubsetState::new(&nodes, &services, &BTreeMap::new()).unwrap();
        check_rules(&nodes, &services, &state.outcome(), &BTreeMap::new())?;
        prop_assert_eq!(state.outcome(), compute(&nodes, &services, &BTreeMap::new()).unwrap());
        for (step, ev) in events.into_iter().enumerate() {
            let before = state.outcome();
            let nodes_before = nodes.clone();
            let mut removed = None;
            let mut added = false;
            match ev {
                Event::Add { zone, flags } => {
                    let n = node(format!("x{step}"), zone, flags);
                    state.add_node(&n).unwrap();
                    nodes.push(n);
                    added = true;
                }
                Event::Remove(at) if !nodes.is_empty() => {
                    let n = nodes.remove(at % nodes.len());
                    state.remove_node(&n.name).unwrap();
                    removed = Some(n.name);
                }
                Event::Update { at, zone, flags } if !nodes.is_empty() => {
                    let at = at % nodes.len();
                    nodes[at] = node(nodes[at].name.clone(), zone, flags);
                    state.update_node(&nodes[at]).unwrap();
                }
                Event::Serve { svc, at } if !nodes.is_empty() => {
                    let name = nodes[at % nodes.len()].name.clone();
                    let serving = &mut services[3 + svc].serving_nodes;
                    if !serving.remove(&name) {
                        serving.insert(name);
                    }
                    state.upsert_service(&services[3 + svc]).unwrap();
                }
                Event::Flip => {
                    services[0].policy = match services[0].policy {
                        TrafficPolicy::Cluster => TrafficPolicy::Local,
                        TrafficPolicy::Local => TrafficPolicy::Cluster,
                    };
                    services[0].serving_nodes = match services[0].policy {
                        TrafficPolicy::Local => services[3].serving_nodes.clone(),
                        TrafficPolicy::Cluster => BTreeSet::new(),
                    };
                    state.upsert_service(&services[0]).unwrap();
                }
                _ => continue,
            }
            let after = state.outcome();
            prop_assert_eq!(&after, &compute(&nodes, &services, &before.subsets).unwrap(), "step {}", step);
            check_rules(&nodes, &services, &after, &before.subsets)?;
            for service in &services {
                let (q0, q1) = (quotas(&nodes_before, service), quotas(&nodes, service));
                let (m0, m1) = (members(&before.subsets[&service.key]), members(&after.subsets[&service.key]));
                if added {
                    for zone in q0.keys().chain(q1.keys()) {
                        let (a, b) = (q0.get(zone).copied().unwrap_or(0), q1.get(zone).copied().unwrap_or(0));
                        let in_zone = |m: &BTreeSet<String>, other: &BTreeSet<String>| {
                            m.difference(other).filter(|n| zone_of(&nodes, n) == Some(zone)).count()
                        };
                        prop_assert_eq!(in_zone(&m0, &m1), a.saturating_sub(b), "left {}", zone);
                        prop_assert_eq!(in_zone(&m1, &m0), b.saturating_sub(a), "joined {}", zone);
                    }
                }
                if let Some(gone) = &removed {
                    if q0 != q1 {
                        continue;
                    }
                    if m0.contains(gone) {
                        let left: Vec<&String> = m0.difference(&m1).collect();
                        let joined: Vec<&String> = m1.difference(&m0).collect();
                        prop_assert_eq!(left, vec![gone]);
                        prop_assert_eq!(joined.len(), 1);
                        prop_assert_eq!(zone_of(&nodes, joined[0]), zone_of(&nodes_before, gone));
                    } else {
                        prop_assert_eq!(&m0, &m1);
                    }
                }
            }
        }
    }

    /// spec: N2. In 3 zones of at least 10 eligible nodes the quotas are
    /// 8/8/8 before and after any single add or remove, so the exact
    /// properties hold unconditionally: an added node (it is in no subset)
    /// changes no subset; a removed non-member changes none; a removed
    /// member is replaced by exactly one node of its own zone.
    #[test]
    fn full_subsets_move_by_one_member(counts in prop::collection::vec(10..40usize, 3), services_n in 1..6usize, add_zone in 0..3usize, pick in any::<usize>()) {
        let mut nodes = zones(&counts);
        let services: Vec<SubsetService> = (0..services_n).map(|i| SubsetService::cluster(ServiceKey::new("ns", format!("s{i}")))).collect();
        let mut state = SubsetState::new(&nodes, &services, &BTreeMap::new()).unwrap();
        let start = state.outcome();
        let extra = Node::new("extra", format!("zone-{add_zone}"));
        prop_assert!(state.add_node(&extra).unwrap().is_empty());
        prop_assert_eq!(state.outcome(), start.clone());
        prop_assert!(state.remove_node("extra").unwrap().is_empty());
        let victim = nodes[pick % nodes.len()].clone();
        let changed = state.remove_node(&victim.name).unwrap();
        nodes.retain(|n| n.name != victim.name);
        let after = state.outcome();
        for service in &services {
            let (m0, m1) = (members(&start.subsets[&service.key]), members(&after.subsets[&service.key]));
            prop_assert_eq!(m1.len(), 24);
            if m0.contains(&victim.name) {
                prop_assert!(changed.contains(&service.key));
                let left: Vec<&String> = m0.difference(&m1).collect();
                let joined: Vec<&String> = m1.difference(&m0).collect();
                prop_assert_eq!(left, vec![&victim.name]);
                prop_assert_eq!(joined.len(), 1);
                prop_assert_eq!(zone_of(&nodes, joined[0]), Some(victim.zone.as_str()));
            } else {
                prop_assert!(!changed.contains(&service.key));
                prop_assert_eq!(m0, m1);
            }
        }
    }

    /// The share rule itself: the quotas add up to the limit or to every
    /// candidate, no zone gets more than it has, and zones that could take
    /// more are within one of each other (an even spread).
    #[test]
    fn zone_quotas_add_up_and_spread_evenly(counts in prop::collection::vec(0..60usize, 1..7), limit in 1..300usize) {
        let named: Vec<(usize, usize)> = counts.iter().copied().enumerate().collect();
        let quotas = zone_quotas(&named, limit);
        let total: usize = counts.iter().sum();
        prop_assert_eq!(quotas.iter().map(|q| q.1).sum::<usize>(), total.min(limit));
        let mut open = Vec::new();
        for (q, &c) in quotas.iter().zip(&counts) {
            prop_assert!(q.1 <= c);
            if q.1 < c {
                open.push(q.1);
            }
        }
        if let (Some(lo), Some(hi)) = (open.iter().min(), open.iter().max()) {
            prop_assert!(hi - lo <= 1, "{:?}", quotas);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// spec: N3. More than 250 serving nodes: 250 members, a warning, and
    /// churn among them still equals a full recompute.
    #[test]
    fn local_over_250_caps_and_stays_equal(counts in prop::collection::vec(20..150usize, 3), drops in prop::collection::vec(any::<usize>(), 1..5)) {
        let mut nodes = zones(&counts);
        let key = ServiceKey::new("ns", "local");
        let service = SubsetService::local(key.clone(), nodes.iter().map(|n| n.name.clone()));
        let mut state = SubsetState::new(&nodes, std::slice::from_ref(&service), &BTreeMap::new()).unwrap();
        for pick in drops {
            let before = state.outcome();
            let out_len = before.subsets[&key].len();
            prop_assert_eq!(out_len, nodes.len().min(250));
            prop_assert_eq!(before.warnings.len(), usize::from(nodes.len() > 250));
            let gone = nodes.remove(pick % nodes.len());
            state.remove_node(&gone.name).unwrap();
            prop_assert_eq!(state.outcome(), compute(&nodes, std::slice::from_ref(&service), &before.subsets).unwrap());
            check_rules(&nodes, std::slice::from_ref(&service), &state.outcome(), &before.subsets)?;
        }
    }
}
