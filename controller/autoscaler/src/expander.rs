//! Choosing between the pools that could take the pending pods, as
//! upstream's expanders: `least-waste` (the default), `price`, `priority`,
//! `most-pods`, `least-nodes`, `random`. A chain applies them in order and
//! stops as soon as one option is left; whatever is still tied at the end
//! is settled by `random`. Pools with matching unused reservations come
//! before any expander (C8).

use std::collections::BTreeMap;
use std::str::FromStr;

use regex::Regex;

use crate::error::ConfigError;
use crate::price;

/// One way to grow: a pool's zone, how many nodes, and what they would hold.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpansionOption {
    pub pool: String,
    pub zone: String,
    pub node_count: usize,
    /// Pending pods the new nodes would take.
    pub pod_count: usize,
    pub pods_cpu_milli: i128,
    pub pods_memory: i128,
    /// One node's capacity.
    pub node_cpu_milli: i128,
    pub node_memory: i128,
    /// One node's price per hour.
    pub node_price: f64,
    /// Unused matching reservations in the zone.
    pub reserved: u32,
}

impl ExpansionOption {
    /// The node group's id, as the priority expander's patterns see it.
    pub fn id(&self) -> String {
        if self.zone.is_empty() {
            self.pool.clone()
        } else {
            format!("{}/{}", self.pool, self.zone)
        }
    }
}

/// One expander.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expander {
    Random,
    MostPods,
    LeastWaste,
    LeastNodes,
    Price,
    Priority,
}

impl Expander {
    pub fn name(self) -> &'static str {
        match self {
            Expander::Random => "random",
            Expander::MostPods => "most-pods",
            Expander::LeastWaste => "least-waste",
            Expander::LeastNodes => "least-nodes",
            Expander::Price => "price",
            Expander::Priority => "priority",
        }
    }
}

impl FromStr for Expander {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Ok(match s {
            "random" => Expander::Random,
            "most-pods" => Expander::MostPods,
            "least-waste" => Expander::LeastWaste,
            "least-nodes" => Expander::LeastNodes,
            "price" => Expander::Price,
            "priority" => Expander::Priority,
            other => return Err(ConfigError::UnknownExpander(other.to_owned())),
        })
    }
}

/// Upstream's `--expander` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpanderChain(Vec<Expander>);

impl Default for ExpanderChain {
    fn default() -> Self {
        ExpanderChain(vec![Expander::LeastWaste])
    }
}

impl ExpanderChain {
    /// `priority,least-waste`: each name once; nothing after `random`,
    /// which always leaves one option.
    pub fn parse(list: &str) -> Result<Self, ConfigError> {
        let mut out: Vec<Expander> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let e: Expander = name.parse()?;
            if out.contains(&e) {
                return Err(ConfigError::DuplicateExpander(name.to_owned()));
            }
            if out.last() == Some(&Expander::Random) {
                return Err(ConfigError::AfterStrategy(name.to_owned()));
            }
            out.push(e);
        }
        if out.is_empty() {
            return Err(ConfigError::NoExpander);
        }
        Ok(ExpanderChain(out))
    }

    pub fn expanders(&self) -> &[Expander] {
        &self.0
    }
}

/// The priority expander's configuration: upstream's ConfigMap
/// `cluster-autoscaler-priority-expander`, key `priorities`, a YAML map of
/// integer priorities to lists of regular expressions over node group ids
/// (`pool/zone` here). The highest priority with a match wins.
#[derive(Debug, Clone)]
pub struct PriorityConfig {
    tiers: Vec<(i64, Vec<Regex>)>,
}

impl PriorityConfig {
    /// Reads the `priorities` value.
    pub fn parse(yaml: &str) -> Result<Self, ConfigError> {
        let raw: BTreeMap<i64, Vec<String>> =
            serde_yaml::from_str(yaml).map_err(|e| ConfigError::Priorities(e.to_string()))?;
        let mut tiers = Vec::new();
        for (priority, patterns) in raw.into_iter().rev() {
            let mut compiled = Vec::new();
            for p in patterns {
                let r = Regex::new(&p).map_err(|e| ConfigError::PriorityRegex {
                    priority,
                    regex: p.clone(),
                    message: e.to_string(),
                })?;
                compiled.push(r);
            }
            tiers.push((priority, compiled));
        }
        Ok(PriorityConfig { tiers })
    }

    /// The highest priority whose patterns match `id` anywhere in it.
    pub fn priority_of(&self, id: &str) -> Option<i64> {
        self.tiers
            .iter()
            .find(|(_, rs)| rs.iter().any(|r| r.is_match(id)))
            .map(|(p, _)| *p)
    }
}

/// What the expanders need besides the options.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Nodes in the cluster, for the price expander's preferred node size.
    pub cluster_nodes: usize,
    pub priorities: Option<&'a PriorityConfig>,
    /// The random expander's seed for this decision.
    pub seed: u64,
}

/// The options that come out best under `f` (lower is better), ties kept.
fn lowest<'o>(
    opts: &[&'o ExpansionOption],
    f: impl Fn(&ExpansionOption) -> f64,
) -> Vec<&'o ExpansionOption> {
    let scores: Vec<f64> = opts.iter().map(|o| f(o)).collect();
    let best = scores.iter().copied().fold(f64::INFINITY, f64::min);
    opts.iter()
        .zip(&scores)
        .filter(|(_, s)| **s == best)
        .map(|(o, _)| *o)
        .collect()
}

/// least-waste: the smallest sum of the idle cpu and idle memory shares
/// of the new nodes' capacity.
fn waste(o: &ExpansionOption) -> f64 {
    let n = o.node_count as f64;
    let idle = |cap: i128, used: i128| {
        let total = cap as f64 * n;
        if total > 0.0 {
            (total - used as f64) / total
        } else {
            0.0
        }
    };
    idle(o.node_cpu_milli, o.pods_cpu_milli) + idle(o.node_memory, o.pods_memory)
}

/// price: the new nodes' price over the pods' worth, penalised for a node
/// size far from the one preferred for the cluster's size.
fn price_score(o: &ExpansionOption, cluster_nodes: usize) -> f64 {
    let stab = price::stabilisation_price();
    let n = o.node_count as f64;
    let pods = price::pod_price(o.pods_cpu_milli, o.pods_memory);
    let sub = (n * o.node_price + stab) / (pods + stab);
    let pref = price::preferred_node_cores(cluster_nodes);
    let cores = (o.node_cpu_milli as f64 / 1000.0).max(f64::MIN_POSITIVE);
    let unfitness = (pref / cores).max(cores / pref);
    let suppressed = (unfitness - 1.0) * (1.0 - ((n - 1.0) / 15.0).tanh()) + 1.0;
    suppressed * sub
}

/// A deterministic pick among `opts`.
fn random_pick<'o>(opts: &[&'o ExpansionOption], seed: u64) -> Option<&'o ExpansionOption> {
    // FNV-1a over the seed and the ids, so the same inputs pick the same.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for o in opts {
        for b in o.id().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let len = u64::try_from(opts.len()).ok().filter(|l| *l > 0)?;
    opts.get(usize::try_from(h % len).ok()?).copied()
}

/// Applies one expander.
pub fn filter<'o>(
    e: Expander,
    opts: &[&'o ExpansionOption],
    ctx: &Context<'_>,
) -> Vec<&'o ExpansionOption> {
    match e {
        Expander::Random => random_pick(opts, ctx.seed).into_iter().collect(),
        Expander::MostPods => lowest(opts, |o| -(o.pod_count as f64)),
        Expander::LeastNodes => {
            let nonzero: Vec<&ExpansionOption> =
                opts.iter().copied().filter(|o| o.node_count > 0).collect();
            lowest(&nonzero, |o| o.node_count as f64)
        }
        Expander::LeastWaste => lowest(opts, waste),
        Expander::Price => lowest(opts, |o| price_score(o, ctx.cluster_nodes)),
        Expander::Priority => {
            let Some(cfg) = ctx.priorities else {
                return opts.to_vec();
            };
            let ranked: Vec<(i64, &ExpansionOption)> = opts
                .iter()
                .filter_map(|o| cfg.priority_of(&o.id()).map(|p| (p, *o)))
                .collect();
            let Some(best) = ranked.iter().map(|(p, _)| *p).max() else {
                // Nothing matches: every option passes, as upstream.
                return opts.to_vec();
            };
            ranked
                .into_iter()
                .filter(|(p, _)| *p == best)
                .map(|(_, o)| o)
                .collect()
        }
    }
}

/// The best option: reservations first, then the chain, then random.
pub fn best<'o>(
    chain: &ExpanderChain,
    opts: &'o [ExpansionOption],
    ctx: &Context<'_>,
) -> Option<&'o ExpansionOption> {
    let mut left: Vec<&ExpansionOption> = opts.iter().collect();
    if left.iter().any(|o| o.reserved > 0) {
        left.retain(|o| o.reserved > 0);
    }
    for e in chain.expanders() {
        if left.len() <= 1 {
            break;
        }
        let next = filter(*e, &left, ctx);
        if !next.is_empty() {
            left = next;
        }
    }
    match left.as_slice() {
        [] => None,
        [one] => Some(*one),
        _ => random_pick(&left, ctx.seed),
    }
}
