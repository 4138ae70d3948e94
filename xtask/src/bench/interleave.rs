//! `cargo xtask bench --interleave ROUNDS`: a configuration's throughput
//! against the ceiling, measured in alternation.
//!
//! The whole-path runs measure one configuration after the other, minutes
//! apart, and on a shared host the ceiling itself moves by 10-25 % between
//! such runs (docs/benchmarks.md). Here the ceiling's bed and one
//! configuration's bed are up at the same time; each round measures both,
//! one right after the other (the order alternating), and the figure that
//! counts is the median of the rounds' own ratios: a drift of the host
//! moves both halves of a round alike.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;

use anyhow::{anyhow, bail, Result};
use sluice_tests::{Cluster, Engine, Netns, Offloads};

use super::*;

/// The most rounds one run takes: each is six iperf3 runs per
/// configuration.
const MAX_ROUNDS: u32 = 50;

/// What is measured, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    Tcp1,
    TcpN,
    Udp,
}

const METRICS: [Metric; 3] = [Metric::Tcp1, Metric::TcpN, Metric::Udp];

impl Metric {
    fn label(self, streams: u32) -> String {
        match self {
            Metric::Tcp1 => "TCP 1 stream".into(),
            Metric::TcpN => format!("TCP {streams} streams"),
            Metric::Udp => "UDP 64 B".into(),
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Metric::Udp => "kpps",
            _ => "Gbit/s",
        }
    }

    fn measure(self, client: &Netns, dst: Ipv4Addr, streams: u32, secs: u64) -> Result<f64> {
        match self {
            Metric::Tcp1 => iperf_tcp(client.name(), dst, 1, secs),
            Metric::TcpN => iperf_tcp(client.name(), dst, streams, secs),
            Metric::Udp => iperf_udp(client.name(), dst, secs).map(|pps| pps / 1e3),
        }
    }
}

/// The rounds of one metric: (ceiling, configuration) per round.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Pairs(pub(super) Vec<(f64, f64)>);

/// What the rounds of one metric say.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Summary {
    pub(super) ceiling: f64,
    pub(super) config: f64,
    /// Median of the rounds' ratios (configuration / ceiling).
    pub(super) ratio: f64,
    pub(super) ratio_min: f64,
    pub(super) ratio_max: f64,
    pub(super) rounds: usize,
}

pub(super) fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

impl Pairs {
    /// `None` without a round whose ceiling measured above zero: no ratio
    /// can be formed.
    pub(super) fn summary(&self) -> Option<Summary> {
        let usable: Vec<(f64, f64)> = self
            .0
            .iter()
            .copied()
            .filter(|(c, x)| *c > 0.0 && c.is_finite() && x.is_finite())
            .collect();
        let ratios: Vec<f64> = usable.iter().map(|(c, x)| x / c).collect();
        let ceilings: Vec<f64> = usable.iter().map(|(c, _)| *c).collect();
        let configs: Vec<f64> = usable.iter().map(|(_, x)| *x).collect();
        Some(Summary {
            ceiling: median(&ceilings)?,
            config: median(&configs)?,
            ratio: median(&ratios)?,
            ratio_min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratio_max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            rounds: usable.len(),
        })
    }
}

/// A bed with its iperf3 server, and where the client sends.
enum Bed {
    // Both boxed: the two differ in size by hundreds of bytes.
    Baseline(Box<Topo>),
    Sluice(Box<Cluster>),
}

struct Up {
    bed: Bed,
    dst: Ipv4Addr,
}

impl Up {
    fn client(&self) -> &Netns {
        match &self.bed {
            Bed::Baseline(t) => &t.client,
            Bed::Sluice(c) => c.client(),
        }
    }

    fn pod(&self) -> Result<&Netns> {
        match &self.bed {
            Bed::Baseline(t) => Ok(&t.pod),
            Bed::Sluice(c) => c.pod("bench").ok_or_else(|| anyhow!("no pod namespace")),
        }
    }
}

fn bring_up(config: Config, offloads: Offloads, agent: Option<&Path>) -> Result<Up> {
    let up = match config {
        Config::Routing | Config::Iptables | Config::Nftables => {
            let topo = Topo::build(offloads)?;
            apply_baseline(config, &topo.node, 1)?;
            let dst = if config == Config::Routing {
                POD_IP
            } else {
                VIP
            };
            Up {
                bed: Bed::Baseline(Box::new(topo)),
                dst: dst.parse()?,
            }
        }
        Config::Kernel | Config::Emulated => {
            let engine = if config == Config::Kernel {
                Engine::Kernel
            } else {
                Engine::Emulated
            };
            Up {
                bed: Bed::Sluice(Box::new(start_sluice(engine, agent, offloads)?)),
                dst: VIP.parse()?,
            }
        }
    };
    up.pod()?.spawn(
        &["iperf3", "-s", "-p", &IPERF_PORT.to_string()],
        Stdio::null(),
        Stdio::null(),
    )?;
    wait_reachable(
        up.client().name(),
        SocketAddr::new(up.dst.into(), IPERF_PORT),
    )?;
    Ok(up)
}

/// One metric, `rounds` times, the ceiling and `config` in turn; the order
/// alternates so neither always runs on a host the other just warmed.
fn rounds_of(
    metric: Metric,
    ceiling: &Up,
    config: &Up,
    rounds: u32,
    secs: u64,
    streams: u32,
) -> Result<Pairs> {
    let mut pairs = Pairs::default();
    for round in 0..rounds {
        check_interrupted()?;
        let order: [(&Up, bool); 2] = if round % 2 == 0 {
            [(ceiling, true), (config, false)]
        } else {
            [(config, false), (ceiling, true)]
        };
        let (mut c, mut x) = (None, None);
        for (up, is_ceiling) in order {
            match metric.measure(up.client(), up.dst, streams, secs) {
                Ok(v) if is_ceiling => c = Some(v),
                Ok(v) => x = Some(v),
                Err(e) => println!("      round {}: {}", round + 1, short_err(&e)),
            }
        }
        if let (Some(c), Some(x)) = (c, x) {
            println!(
                "      round {}: ceiling {c:.2}, this {x:.2} {} ({:.2}x)",
                round + 1,
                metric.unit(),
                if c > 0.0 { x / c } else { f64::NAN }
            );
            pairs.0.push((c, x));
        }
    }
    Ok(pairs)
}

/// `--interleave`: every selected configuration but the ceiling, in each
/// offload setting, against a ceiling bed that stays up for the setting.
pub(super) fn run(opts: &BenchOpts, rounds: u32) -> Result<()> {
    if rounds == 0 || rounds > MAX_ROUNDS {
        bail!("--interleave {rounds}: give 1 to {MAX_ROUNDS} rounds");
    }
    let configs: Vec<Config> = selected_configs(opts.only.clone())
        .into_iter()
        .filter(|c| *c != Config::Routing)
        .collect();
    let secs = opts.duration.unwrap_or(3).max(1);
    let streams = opts.streams.max(2);
    check_tools()?;
    let agent = agent_for(&configs)?;
    println!("==> bench: {}", machine_note().one_line);
    println!("    interleaved, {rounds} rounds of {secs} s per metric and configuration");
    let mut rows = Vec::new();
    for offloads in opts.offloads.settings() {
        let ceiling = bring_up(Config::Routing, offloads, None)?;
        for &config in &configs {
            check_interrupted()?;
            println!(
                "==> {} against the ceiling ({})",
                config.label(),
                offloads_word(offloads, false)
            );
            let up = match bring_up(config, offloads, agent.as_deref()) {
                Ok(up) => up,
                Err(e) => {
                    println!("    not available: {}", short_err(&e));
                    continue;
                }
            };
            let mut cells = Vec::new();
            for metric in METRICS {
                println!("    {}:", metric.label(streams));
                let pairs = rounds_of(metric, &ceiling, &up, rounds, secs, streams)?;
                let cell = match pairs.summary() {
                    Some(s) => {
                        println!(
                            "    {}: ceiling {:.2}, this {:.2} {} (medians); ratio {:.2}x, rounds {:.2}-{:.2}x",
                            metric.label(streams),
                            s.ceiling,
                            s.config,
                            metric.unit(),
                            s.ratio,
                            s.ratio_min,
                            s.ratio_max
                        );
                        format!("{:.2} ({:.2}-{:.2})", s.ratio, s.ratio_min, s.ratio_max)
                    }
                    None => "–".into(),
                };
                cells.push(cell);
            }
            rows.push(format!(
                "| {} | {} | {} |",
                config.label(),
                offloads_word(offloads, false),
                cells.join(" | ")
            ));
            drop(up);
        }
        drop(ceiling);
    }
    println!();
    println!(
        "| configuration | offloads | TCP 1 × | TCP {streams} × | UDP 64 B × |\n|---|---|---|---|---|"
    );
    for r in rows {
        println!("{r}");
    }
    println!("(median of {rounds} rounds' ratios, lowest-highest round in brackets)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
    }

    #[test]
    fn the_ratio_is_the_median_of_each_round_s_own_ratio() {
        // The ceiling drifts from 100 to 50; the configuration is always
        // 0.8 of it. Medians of each column would say 0.8 too, by luck;
        // the rounds' ratios say it without depending on the drift.
        let pairs = Pairs(vec![
            (100.0, 80.0),
            (50.0, 40.0),
            (75.0, 60.0),
            (60.0, 48.0),
        ]);
        let s = pairs.summary().expect("a summary");
        assert!((s.ratio - 0.8).abs() < 1e-9, "{s:?}");
        assert!((s.ratio_min - 0.8).abs() < 1e-9 && (s.ratio_max - 0.8).abs() < 1e-9);
        assert_eq!(s.rounds, 4);
        assert!((s.ceiling - 67.5).abs() < 1e-9);
    }

    #[test]
    fn rounds_without_a_ceiling_are_left_out() {
        let pairs = Pairs(vec![(0.0, 5.0), (10.0, 9.0), (f64::NAN, 1.0)]);
        let s = pairs.summary().expect("a summary");
        assert_eq!(s.rounds, 1);
        assert!((s.ratio - 0.9).abs() < 1e-9);
        assert_eq!(Pairs(vec![(0.0, 1.0)]).summary(), None);
    }
}
