//! How many flows move when the backend set changes, and what a frame costs
//! on the host (`cargo bench -p sluice-lb --bench lb_flows`).
//!
//! Flows moved, over 100 000 TCP flows of one Service, through
//! `sluice_datapath::lb::process_lb` and the tables both engines write:
//!
//! - one backend of ten leaves, flows established (a SYN each, then data):
//!   the flow table keeps every flow of the nine others where it was, and
//!   only the leaver's flows (about 1/10) are chosen again;
//! - the same for new connections only (Maglev alone, no flow entry);
//! - the baseline, measured in the same run: one backend joins nine, new
//!   connections (Maglev's share for the newcomer, about 1/10). The
//!   summary prints each fraction and its ratio to the baseline: near 1
//!   means the leave costs what the unavoidable join costs.
//!
//! Then criterion's ns per frame for an established flow and a new flow,
//! IPv4 TCP. No timing is asserted anywhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, Criterion, Throughput};
use sluice_datapath::host::{FramePacket, TestClock};
use sluice_datapath::lb::host::{HostLbMaps, LbBackendSpec, LbServiceSpec, LbTables};
use sluice_datapath::lb::maps::{FrontendKey, LbConfig, PROTO_TCP};
use sluice_datapath::lb::{process_lb, LbEvent, LbVerdict};
use sluice_datapath::maps::v4_mapped;

const FLOWS: u32 = 100_000;
const LB_MAC: [u8; 6] = [0x02, 0x1b, 0, 0, 0, 1];
const VIP: [u8; 4] = [198, 51, 100, 10];

fn service(ids: impl IntoIterator<Item = u32>) -> Vec<LbServiceSpec> {
    vec![LbServiceSpec {
        id: LbTables::service_id("default/web"),
        frontends: vec![FrontendKey {
            addr: v4_mapped(VIP),
            port: 80,
            proto: PROTO_TCP,
            _pad: 0,
        }],
        backends: ids
            .into_iter()
            .map(|i| LbBackendSpec {
                id: i,
                addr: v4_mapped([192, 0, 2, i as u8]),
                mac: [2, 0x4e, 0, 0, 0, i as u8],
                healthy: true,
            })
            .collect(),
    }]
}

/// Flow `j`: client 203.0.x.y, port from `j`.
fn frame(j: u32, syn: bool) -> Vec<u8> {
    let client = [203, 0, (j >> 14) as u8, (j >> 6) as u8];
    let b = etherparse::PacketBuilder::ethernet2([2, 0xc1, 0, 0, 0, 1], LB_MAC)
        .ipv4(client, VIP, 64)
        .tcp(
            1024 + (j & 0x3f) as u16 * 512 + (j % 509) as u16,
            80,
            1,
            64240,
        );
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut out = Vec::new();
    b.write(&mut out, if syn { &[] } else { &[0u8; 64] })
        .unwrap();
    out
}

struct Lb {
    maps: HostLbMaps,
    clock: TestClock,
}

impl Lb {
    fn new(specs: &[LbServiceSpec]) -> Lb {
        let mut maps = HostLbMaps::with_capacity(4 * FLOWS as usize);
        maps.set_config(LbConfig {
            mac: LB_MAC,
            _pad: [0; 2],
            ifindex: 1,
        });
        maps.replace_tables(Arc::new(LbTables::build(specs).unwrap()));
        Lb {
            maps,
            clock: TestClock::default(),
        }
    }

    fn apply(&mut self, specs: &[LbServiceSpec]) {
        self.maps
            .replace_tables(Arc::new(LbTables::build(specs).unwrap()));
    }

    /// The backend flow `j` goes to.
    fn send(&mut self, j: u32, syn: bool) -> u32 {
        let mut f = frame(j, syn);
        let len = f.len();
        let o = process_lb(
            &mut FramePacket::new(&mut f, len),
            &mut self.maps,
            &self.clock,
        );
        assert_eq!(o.verdict, LbVerdict::Tx, "{o:?}");
        o.backend
    }
}

/// Fraction of flows whose backend changed between `before` and `after`,
/// and how many of those moved between backends other than `changed` (the
/// one that left or joined): the churn the change did not call for.
fn moved(before: &[u32], after: &[u32], changed: u32) -> (f64, usize) {
    let moved: Vec<(u32, u32)> = before
        .iter()
        .zip(after)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (*a, *b))
        .collect();
    let others = moved
        .iter()
        .filter(|(a, b)| *a != changed && *b != changed)
        .count();
    (moved.len() as f64 / before.len() as f64, others)
}

/// Backends chosen for every flow's SYN on fresh maps (Maglev alone).
fn new_connections(specs: &[LbServiceSpec]) -> Vec<u32> {
    let mut lb = Lb::new(specs);
    (0..FLOWS).map(|j| lb.send(j, true)).collect()
}

fn flows_moved() {
    let ten = service(1..=10);
    let nine_left = service((1..=10).filter(|&i| i != 4));
    let nine = service(1..=9);

    // Established flows, one leaves.
    let mut lb = Lb::new(&ten);
    let before: Vec<u32> = (0..FLOWS).map(|j| lb.send(j, true)).collect();
    lb.apply(&nine_left);
    let after: Vec<u32> = (0..FLOWS).map(|j| lb.send(j, false)).collect();
    let (established, est_others) = moved(&before, &after, 4);

    // New connections only, one leaves.
    let (maglev_leave, maglev_others) =
        moved(&new_connections(&ten), &new_connections(&nine_left), 4);

    // Baseline: one joins nine, new connections.
    let (join, join_others) = moved(&new_connections(&nine), &new_connections(&ten), 10);
    let to_newcomer = {
        let a = new_connections(&ten);
        a.iter().filter(|&&b| b == 10).count() as f64 / f64::from(FLOWS)
    };

    let mut share: BTreeMap<u32, u32> = BTreeMap::new();
    for b in &before {
        *share.entry(*b).or_default() += 1;
    }
    let leaver_share = f64::from(share[&4]) / f64::from(FLOWS);

    println!("\nflows moved, {FLOWS} TCP flows of one Service (ratio to the baseline)");
    println!(
        "{:<58} {:>9} {:>7} {:>16}",
        "change", "moved", "ratio", "between others"
    );
    println!(
        "{:<58} {:>9.4} {:>7} {:>16}",
        "baseline: 1 joins 9, new connections", join, "1.00", join_others
    );
    println!(
        "{:<58} {:>9.4} {:>7.2} {:>16}",
        "1 of 10 leaves, established flows (flow table)",
        established,
        established / join,
        est_others
    );
    println!(
        "{:<58} {:>9.4} {:>7.2} {:>16}",
        "1 of 10 leaves, new connections (Maglev alone)",
        maglev_leave,
        maglev_leave / join,
        maglev_others
    );
    println!(
        "(the leaver had {leaver_share:.4} of the flows; the newcomer gets {to_newcomer:.4} of new connections; ideal 0.1000)"
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    let specs = service(1..=10);
    let mut lb = Lb::new(&specs);
    let established: Vec<Vec<u8>> = (0..1024).map(|j| frame(j, false)).collect();
    for j in 0..1024 {
        lb.send(j, true);
    }
    let mut g = c.benchmark_group("lb_process");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    let mut buf = [0u8; 256];
    g.bench_function("established", |b| {
        b.iter(|| {
            let tpl = &established[i % established.len()];
            i += 1;
            buf[..tpl.len()].copy_from_slice(tpl);
            let o = process_lb(
                &mut FramePacket::new(&mut buf, tpl.len()),
                &mut lb.maps,
                &lb.clock,
            );
            black_box(o.event == LbEvent::Established)
        })
    });
    let syn = frame(0, true);
    let mut n = 0u32;
    g.bench_function("new_flow", |b| {
        b.iter(|| {
            buf[..syn.len()].copy_from_slice(&syn);
            // A fresh client address and port each time.
            n = n.wrapping_add(1);
            buf[28..30].copy_from_slice(&((n >> 16) as u16 | 0x0100).to_be_bytes());
            buf[34..36].copy_from_slice(&(n as u16).to_be_bytes());
            let o = process_lb(
                &mut FramePacket::new(&mut buf, syn.len()),
                &mut lb.maps,
                &lb.clock,
            );
            black_box(o.event)
        })
    });
    g.finish();
    c.final_summary();
    if !quick {
        flows_moved();
    }
}
