//! The expanders, each on a constructed case, chains and ties; and the
//! price and reservation preferences end to end.

use serde_json::json;

use super::*;
use crate::expander::{
    best, filter, Context, Expander, ExpanderChain, ExpansionOption, PriorityConfig,
};
use crate::price::default_node_price;
use crate::ConfigError;

fn opt(
    pool: &str,
    nodes: usize,
    pods: usize,
    cpu_used: i128,
    node_cpu: i128,
    price: f64,
) -> ExpansionOption {
    ExpansionOption {
        pool: pool.into(),
        zone: "z".into(),
        node_count: nodes,
        pod_count: pods,
        pods_cpu_milli: cpu_used,
        pods_memory: 1 << 30,
        node_cpu_milli: node_cpu,
        node_memory: 4 << 30,
        node_price: price,
        reserved: 0,
    }
}

fn ctx(p: Option<&PriorityConfig>) -> Context<'_> {
    Context {
        cluster_nodes: 10,
        priorities: p,
        seed: 7,
    }
}

fn names(v: &[&ExpansionOption]) -> Vec<String> {
    v.iter().map(|o| o.pool.clone()).collect()
}

#[test]
fn each_expander_picks_on_its_own_measure() {
    // spec: C8 — upstream's expanders.
    let a = opt("a", 2, 4, 3000, 2000, 1.0); // 3 of 4 cpu used
    let b = opt("b", 1, 2, 1000, 4000, 0.1); // 1 of 4 cpu used
    let c = opt("c", 3, 6, 5500, 2000, 1.0); // 5.5 of 6 cpu used
    let all = [&a, &b, &c];
    let cx = ctx(None);
    assert_eq!(names(&filter(Expander::LeastWaste, &all, &cx)), ["c"]);
    assert_eq!(names(&filter(Expander::MostPods, &all, &cx)), ["c"]);
    assert_eq!(names(&filter(Expander::LeastNodes, &all, &cx)), ["b"]);
    assert_eq!(names(&filter(Expander::Price, &all, &cx)), ["b"]);
    assert_eq!(filter(Expander::Random, &all, &cx).len(), 1);
}

#[test]
fn least_waste_adds_the_idle_cpu_and_memory_shares() {
    // spec: C8 — waste is idle cpu share plus idle memory share.
    let mut a = opt("a", 1, 1, 2000, 4000, 1.0); // cpu 0.5 idle, mem 0.75 idle
    let mut b = opt("b", 1, 1, 3000, 4000, 1.0); // cpu 0.25 idle
    b.pods_memory = 1 << 29; // mem 0.875 idle: sum 1.125 < 1.25
    let cx = ctx(None);
    assert_eq!(names(&filter(Expander::LeastWaste, &[&a, &b], &cx)), ["b"]);
    a.pods_memory = 2 << 30; // a: 0.5 + 0.5 = 1.0
    assert_eq!(names(&filter(Expander::LeastWaste, &[&a, &b], &cx)), ["a"]);
}

#[test]
fn ties_are_kept_by_filters_and_settled_deterministically() {
    // spec: C8 — exact ties pass on; the end of the chain picks one,
    // always the same for the same inputs.
    let a = opt("a", 1, 1, 2000, 4000, 1.0);
    let b = opt("b", 1, 1, 2000, 4000, 1.0);
    let cx = ctx(None);
    assert_eq!(
        names(&filter(Expander::LeastWaste, &[&a, &b], &cx)),
        ["a", "b"]
    );
    let opts = [a, b];
    let chain = ExpanderChain::default();
    let first = best(&chain, &opts, &cx).unwrap().pool.clone();
    for _ in 0..5 {
        assert_eq!(best(&chain, &opts, &cx).unwrap().pool, first);
    }
    // Another seed may pick the other; over many seeds both are picked.
    let picks: std::collections::BTreeSet<String> = (0..64u64)
        .map(|s| {
            best(&chain, &opts, &Context { seed: s, ..cx })
                .unwrap()
                .pool
                .clone()
        })
        .collect();
    assert_eq!(picks.len(), 2);
}

#[test]
fn priority_expander_reads_upstreams_configuration() {
    // spec: C8 — integer priorities to regexes over node-group ids,
    // unanchored; highest wins; unmatched groups are dropped; no match at
    // all passes every option.
    let cfg = PriorityConfig::parse("10:\n  - ^spot-.*\n50:\n  - big\n").unwrap();
    let s = opt("spot-a", 1, 1, 1, 1000, 1.0);
    let b = opt("pool-big-2", 1, 1, 1, 1000, 1.0);
    let o = opt("other", 1, 1, 1, 1000, 1.0);
    let cx = ctx(Some(&cfg));
    assert_eq!(
        names(&filter(Expander::Priority, &[&s, &b, &o], &cx)),
        ["pool-big-2"]
    );
    assert_eq!(
        names(&filter(Expander::Priority, &[&s, &o], &cx)),
        ["spot-a"]
    );
    assert_eq!(names(&filter(Expander::Priority, &[&o], &cx)), ["other"]);
    assert!(matches!(
        PriorityConfig::parse("x: [a]"),
        Err(ConfigError::Priorities(_))
    ));
    assert!(matches!(
        PriorityConfig::parse("10:\n  - '('\n"),
        Err(ConfigError::PriorityRegex { priority: 10, .. })
    ));
}

#[test]
fn a_chain_stops_at_one_option_and_refuses_bad_lists() {
    // spec: C8 — `priority,least-waste`: priority ties two, least-waste
    // settles them.
    let cfg = PriorityConfig::parse("5:\n  - .*\n").unwrap();
    let a = opt("a", 1, 1, 1000, 4000, 1.0);
    let b = opt("b", 1, 1, 3000, 4000, 1.0);
    let chain = ExpanderChain::parse("priority,least-waste").unwrap();
    let opts = [a, b];
    assert_eq!(best(&chain, &opts, &ctx(Some(&cfg))).unwrap().pool, "b");
    let chain = ExpanderChain::parse("least-nodes, price").unwrap();
    assert_eq!(chain.expanders(), &[Expander::LeastNodes, Expander::Price]);
    assert_eq!(
        ExpanderChain::parse("price,price"),
        Err(ConfigError::DuplicateExpander("price".into()))
    );
    assert_eq!(
        ExpanderChain::parse("random,price"),
        Err(ConfigError::AfterStrategy("price".into()))
    );
    assert_eq!(
        ExpanderChain::parse("grpc"),
        Err(ConfigError::UnknownExpander("grpc".into()))
    );
    assert_eq!(ExpanderChain::parse(""), Err(ConfigError::NoExpander));
}

#[test]
fn reservations_come_before_any_expander() {
    // spec: C8 — a pool with an unused matching reservation wins even if
    // it wastes more.
    let a = opt("a", 1, 1, 1000, 4000, 1.0);
    let mut b = opt("b", 1, 1, 3900, 4000, 1.0);
    let chain = ExpanderChain::default();
    let cx = ctx(None);
    assert_eq!(
        best(&chain, &[a.clone(), b.clone()], &cx).unwrap().pool,
        "b"
    );
    let mut a2 = a;
    a2.reserved = 1;
    b.reserved = 0;
    assert_eq!(best(&chain, &[a2, b], &cx).unwrap().pool, "a");
}

#[test]
fn the_price_expander_prefers_spot_end_to_end() {
    // spec: C8 — the cheapest pool that fits, the spot discount counted
    // by the default price from capacity.
    assert!(
        default_node_price(4000, 16 << 30, true) < default_node_price(4000, 16 << 30, false) / 3.0
    );
    let mut w = World::default();
    w.options.expander = ExpanderChain::parse("price").unwrap();
    w.pools.push(pool("ondemand", &["a"], "4", "16Gi", 0, 5));
    w.pools.push(set(
        pool("spot", &["a"], "4", "16Gi", 0, 5),
        &["spec", "config", "spot"],
        json!(true),
    ));
    w.pods.push(pending("w", "w", "1", "1Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("spot/a", 1)]));
    // A price of its own overrides the default.
    w.extras.insert(
        "spot".into(),
        PoolExtras {
            price_per_hour: Some(100.0),
            ..Default::default()
        },
    );
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("ondemand/a", 1)]));
}

#[test]
fn matching_reservations_steer_the_scale_up_end_to_end() {
    // spec: C8 — reservations: same zone and shape, affinity admitting it.
    let mut w = World::default();
    w.options.expander = ExpanderChain::parse("least-waste").unwrap();
    w.pools.push(pool("small", &["a"], "2", "8Gi", 0, 5));
    w.pools.push(pool("big", &["a"], "8", "32Gi", 0, 5));
    w.pods.push(pending("w", "w", "2", "8Gi"));
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("small/a", 1)]));
    w.reservations.push(Reservation {
        name: "r1".into(),
        zone: "a".into(),
        cpu_milli: 8000,
        memory_bytes: 32 << 30,
        count: 2,
        in_use: 1,
        specific_only: false,
    });
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("big/a", 1)]));
    // NO_RESERVATION ignores it; a used-up one counts for nothing.
    w.extras.insert(
        "big".into(),
        PoolExtras {
            reservation_affinity: crate::ReservationAffinity::None,
            ..Default::default()
        },
    );
    let d = w.decide(&State::default(), t0());
    assert_eq!(World::targets(&d), sizes(&[("small/a", 1)]));
}
