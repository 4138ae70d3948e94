//! Subset decisions at scale: a full recompute of 5 000 Services over
//! 15 000 nodes in 3 zones, and single node events on the resulting state.
//! Plain `std::time` measurements, printed with a ratio to a baseline
//! measured in the same run; nothing is asserted about time.
//!
//! `cargo bench -p sluice-subsetting --bench subsets`
//! (SLUICE_BENCH_SERVICES / SLUICE_BENCH_NODES / SLUICE_BENCH_EVENTS scale it)

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_subsetting::rank::{node_hash, rank, service_salt};
use sluice_subsetting::{compute, Node, ServiceKey, SubsetService, SubsetState};

const ZONES: usize = 3;
/// One Service in ten is `Local`, served from this many nodes.
const LOCAL_EVERY: usize = 10;
const LOCAL_SERVING: usize = 100;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node_name(i: usize) -> String {
    format!(
        "gke-pool-{}-{:08x}",
        i % 7,
        (i as u64).wrapping_mul(0x9e37_79b9)
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let services_n = env("SLUICE_BENCH_SERVICES", 5_000);
    let nodes_n = env("SLUICE_BENCH_NODES", 15_000);
    let events = env("SLUICE_BENCH_EVENTS", 200);

    let nodes: Vec<Node> = (0..nodes_n)
        .map(|i| Node::new(node_name(i), format!("zone-{}", i % ZONES)))
        .collect();
    let services: Vec<SubsetService> = (0..services_n)
        .map(|i| {
            let key = ServiceKey::new(format!("ns-{}", i % 50), format!("svc-{i}"));
            if i % LOCAL_EVERY == 0 {
                let serving = (0..LOCAL_SERVING).map(|j| node_name((i * 37 + j * 131) % nodes_n));
                SubsetService::local(key, serving)
            } else {
                SubsetService::cluster(key)
            }
        })
        .collect();
    println!(
        "{services_n} Services ({} Local with {LOCAL_SERVING} serving nodes), {nodes_n} nodes in {ZONES} zones",
        services_n.div_ceil(LOCAL_EVERY)
    );

    // Baseline for the full recompute: one rank per (Service, node) pair,
    // node hashes computed once: the least any hash-ordered choice costs.
    let t = Instant::now();
    let hashes: Vec<u64> = nodes.iter().map(|n| node_hash(&n.name)).collect();
    let mut acc = 0u64;
    for s in &services {
        let salt = service_salt(&s.key.namespace, &s.key.name);
        for &h in &hashes {
            acc = acc.wrapping_add(rank(h, salt));
        }
    }
    black_box(acc);
    let baseline_pairs = t.elapsed();

    let none = BTreeMap::new();
    let t = Instant::now();
    let state = SubsetState::new(&nodes, &services, &none).expect("bench input is valid");
    let full_state = t.elapsed();
    let t = Instant::now();
    let first = state.outcome();
    let materialize = t.elapsed();
    let t = Instant::now();
    let again = compute(&nodes, &services, &first.subsets).expect("bench input is valid");
    let full_with_previous = t.elapsed();
    assert_eq!(
        again, first,
        "a recompute from the last subsets changes nothing"
    );

    println!();
    println!("| full recompute | ms | ratio to the pair-hash baseline |");
    println!("|---|---:|---:|");
    let row = |what: &str, d: Duration| {
        println!(
            "| {what} | {:.1} | {:.2} |",
            ms(d),
            d.as_secs_f64() / baseline_pairs.as_secs_f64()
        )
    };
    row("baseline: rank every (Service, node) pair", baseline_pairs);
    row("`SubsetState::new`, no previous subsets", full_state);
    row("its `outcome()` (names per zone, sorted)", materialize);
    row(
        "`compute` from the previous subsets (both)",
        full_with_previous,
    );

    // Baseline for one event: sorting the nodes' names once, what a
    // controller that re-sorted its node list per event would pay.
    let mut sorts = Vec::new();
    for _ in 0..20 {
        let mut names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let t = Instant::now();
        names.sort_unstable();
        sorts.push(t.elapsed());
        black_box(&names);
    }
    let baseline_sort = median(sorts);

    let mut state = state;
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    let mut readds = Vec::new();
    let mut changed_by_remove = 0usize;
    for e in 0..events {
        // A new node: it ranks wherever it ranks, and joins no full subset.
        let extra = Node::new(format!("extra-{e}"), format!("zone-{}", e % ZONES));
        let t = Instant::now();
        let changed = state.add_node(&extra).expect("new name");
        adds.push(t.elapsed());
        black_box(changed);

        // A member of some Service leaves; every Service holding it gets
        // one replacement. Then it comes back (a node add again).
        let svc = &services[(e * 7919 + 1) % services.len()].key;
        let Some(member) = state
            .subset(svc)
            .and_then(|s| s.members().next().map(str::to_string))
        else {
            continue;
        };
        let Some(node) = nodes.iter().find(|n| n.name == member).cloned() else {
            continue;
        };
        let t = Instant::now();
        let changed = state.remove_node(&member).expect("a member exists");
        removes.push(t.elapsed());
        changed_by_remove += changed.len();
        let t = Instant::now();
        black_box(state.add_node(&node).expect("removed just before"));
        readds.push(t.elapsed());
    }
    let removed_n = removes.len().max(1);
    println!();
    println!("| one node event ({events} each) | median µs | max µs | ratio of the median to sorting the node names |");
    println!("|---|---:|---:|---:|");
    println!(
        "| baseline: sort {nodes_n} node names | {:.1} | | 1.00 |",
        us(baseline_sort)
    );
    let row = |what: &str, v: &Vec<Duration>| {
        let max = v.iter().max().copied().unwrap_or_default();
        let m = median(v.clone());
        println!(
            "| {what} | {:.1} | {:.1} | {:.3} |",
            us(m),
            us(max),
            m.as_secs_f64() / baseline_sort.as_secs_f64()
        );
    };
    row("add a node (joins no full subset)", &adds);
    row("remove a member", &removes);
    row("add the removed node back", &readds);
    println!();
    println!(
        "a removed member was in {:.1} Services' subsets on average",
        changed_by_remove as f64 / removed_n as f64
    );
}
