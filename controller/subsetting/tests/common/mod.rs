//! What the rule and property tests share: node builders and a reference
//! implementation of the subset rules, written the plain way (sort every
//! zone's candidates) to check the crate's one-pass selection against.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use sluice_subsetting::rank::{node_hash, rank, service_salt};
use sluice_subsetting::share::{subset_limit, zone_quotas};
use sluice_subsetting::{Node, Subset, SubsetService, TrafficPolicy};

/// `counts[i]` nodes in zone `zone-{i}`, named `n-{i}-{j}`.
pub fn zones(counts: &[usize]) -> Vec<Node> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(z, &n)| {
            (0..n).map(move |j| Node::new(format!("n-{z}-{j}"), format!("zone-{z}")))
        })
        .collect()
}

/// The nodes that may back `service`, by zone.
pub fn candidates(nodes: &[Node], service: &SubsetService) -> BTreeMap<String, Vec<String>> {
    let mut by_zone: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in nodes.iter().filter(|n| n.is_eligible()) {
        if service.policy == TrafficPolicy::Local && !service.serving_nodes.contains(&node.name) {
            continue;
        }
        by_zone
            .entry(node.zone.clone())
            .or_default()
            .push(node.name.clone());
    }
    by_zone
}

/// The share rule's quota per zone for `service` over `nodes`.
pub fn quotas(nodes: &[Node], service: &SubsetService) -> BTreeMap<String, usize> {
    let by_zone = candidates(nodes, service);
    let total = by_zone.values().map(Vec::len).sum();
    let limit = subset_limit(service.policy, total, by_zone.len());
    let counts: Vec<(&str, usize)> = by_zone.iter().map(|(z, c)| (z.as_str(), c.len())).collect();
    zone_quotas(&counts, limit)
        .into_iter()
        .map(|(z, q)| (z.to_string(), q))
        .collect()
}

/// The subset as the spec states it: per zone, previous members first, then
/// by rank, then by name; the zone's quota of them.
pub fn reference(
    nodes: &[Node],
    service: &SubsetService,
    prev: &BTreeSet<String>,
) -> BTreeMap<String, Vec<String>> {
    let salt = service_salt(&service.key.namespace, &service.key.name);
    let quotas = quotas(nodes, service);
    candidates(nodes, service)
        .into_iter()
        .map(|(zone, mut names)| {
            names.sort_by_key(|n| (!prev.contains(n), rank(node_hash(n), salt), n.clone()));
            names.truncate(quotas[&zone]);
            names.sort();
            (zone, names)
        })
        .collect()
}

/// A subset's members as a set.
pub fn members(subset: &Subset) -> BTreeSet<String> {
    subset.members().map(str::to_string).collect()
}
