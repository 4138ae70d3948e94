//! ns per packet through `process` on the host, for an established flow and
//! for a new flow (SYN), with 1, 1 000 and 100 000 services. After the
//! criterion groups a summary prints each case's ratio to the 1-service
//! case: the cost should not grow with the service count.
//!
//! `cargo bench -p sluice-datapath --features host --bench process`

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use sluice_datapath::host::{FramePacket, HostMaps, ServiceSpec, ServiceTables, TestClock};
use sluice_datapath::maps::{v4_mapped, Endpoint, NodeConfig, ServiceKey, PROTO_TCP};
use sluice_datapath::{process, Event, Hook};
use std::time::{Duration, Instant};

const COUNTS: [usize; 3] = [1, 1_000, 100_000];
/// Flows spread over the services, so big tables are not all cache-hot.
const FLOWS: usize = 1024;
const FRAME_ROOM: usize = 128;
/// Simulated time between new flows: 10 ms keeps ~6 000 half-open flows
/// alive, a few percent of one endpoint's SNAT ports.
const NEW_FLOW_SPACING_NS: u64 = 10_000_000;

fn vip(i: usize) -> ([u8; 4], u16) {
    let k = i / 100;
    (
        [198, 19, (k / 250) as u8, (k % 250) as u8 + 1],
        80 + (i % 100) as u16,
    )
}

fn frame(client: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, syn: bool) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(client, dst, 64)
        .tcp(sport, dport, 1, 65535);
    let b = if syn { b.syn() } else { b.ack(1) };
    let mut out = Vec::new();
    b.write(&mut out, if syn { &[] } else { &[0u8; 64] })
        .unwrap();
    out
}

struct Setup {
    maps: HostMaps,
    clock: TestClock,
    established: Vec<Vec<u8>>,
    syns: Vec<Vec<u8>>,
    next: usize,
    counter: u32,
}

impl Setup {
    fn new(n: usize) -> Self {
        let specs: Vec<ServiceSpec> = (0..n)
            .map(|i| {
                let (addr, port) = vip(i);
                let ep = |h: u8| Endpoint {
                    addr: v4_mapped([198, 18, 200 + (i % 50) as u8, h]),
                    port: 8000 + (i % 1000) as u16,
                    flags: 0,
                    _pad: 0,
                };
                ServiceSpec {
                    key: ServiceKey {
                        addr: v4_mapped(addr),
                        port,
                        proto: PROTO_TCP,
                        _pad: 0,
                    },
                    ready: vec![ep(1), ep(2)],
                    ..Default::default()
                }
            })
            .collect();
        let mut maps = HostMaps::new();
        maps.set_node(NodeConfig {
            addr4: v4_mapped([198, 18, 0, 2]),
            addr6: [0; 16],
            snat_port_min: 1024,
            snat_port_max: 65535,
            _pad: 0,
        });
        maps.replace_services(ServiceTables::build(&specs));
        let mut clock = TestClock::new(7);
        let pick = |j: usize| vip(j.wrapping_mul(7919) % n);
        let established: Vec<Vec<u8>> = (0..FLOWS)
            .map(|j| {
                let (a, p) = pick(j);
                frame(
                    [198, 18, 1, (j % 200) as u8 + 1],
                    10_000 + j as u16,
                    a,
                    p,
                    false,
                )
            })
            .collect();
        for f in &established {
            let mut f = f.clone();
            let mut pkt = FramePacket::new(&mut f, usize::MAX);
            let o = process(&mut pkt, &mut maps, &mut clock, Hook::WireIngress);
            assert_eq!(o.event, Event::NewFlow);
        }
        let syns = (0..FLOWS)
            .map(|j| {
                let (a, p) = pick(j);
                frame([198, 18, 2, 1], 1, a, p, true)
            })
            .collect();
        Self {
            maps,
            clock,
            established,
            syns,
            next: 0,
            counter: 0,
        }
    }

    #[inline]
    fn run(&mut self, new_flow: bool) -> Event {
        let j = self.next % FLOWS;
        self.next = self.next.wrapping_add(1);
        let tpl = if new_flow {
            &self.syns[j]
        } else {
            &self.established[j]
        };
        let mut buf = [0u8; FRAME_ROOM];
        buf[..tpl.len()].copy_from_slice(tpl);
        if new_flow {
            // A fresh client address and port each time: always a new flow.
            self.counter = self.counter.wrapping_add(1);
            let c = self.counter;
            buf[26] = 198;
            buf[27] = 18;
            buf[28] = 2 + ((c >> 24) as u8 & 0x7f) % 2;
            buf[29] = (c >> 16) as u8;
            buf[34..36].copy_from_slice(&(c as u16).to_be_bytes());
            // Half-open flows expire after 60 s; without time passing one
            // service's two endpoints would run out of SNAT ports and the
            // bench would measure the exhaustion path instead.
            self.clock.advance_ns(NEW_FLOW_SPACING_NS);
        }
        let mut pkt = FramePacket::new(&mut buf, tpl.len());
        process(&mut pkt, &mut self.maps, &mut self.clock, Hook::WireIngress).event
    }

    /// Best of a few timed batches, in ns per packet, and how many packets
    /// did not take the path measured.
    fn measure(&mut self, new_flow: bool) -> (f64, usize) {
        let batch = 200_000;
        let want = if new_flow {
            Event::NewFlow
        } else {
            Event::Established
        };
        let mut off_path = 0;
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..batch {
                    if black_box(self.run(new_flow)) != want {
                        off_path += 1;
                    }
                }
                t.elapsed().as_nanos() as f64 / batch as f64
            })
            .fold(f64::INFINITY, f64::min);
        (best, off_path)
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    let mut rows = Vec::new();
    for n in COUNTS {
        let mut s = Setup::new(n);
        assert_eq!(s.run(false), Event::Established);
        assert_eq!(s.run(true), Event::NewFlow);
        let mut row = (n, (0.0, 0), (0.0, 0));
        for (name, new_flow) in [("established", false), ("new_flow", true)] {
            let mut g = c.benchmark_group(name);
            g.throughput(Throughput::Elements(1));
            g.bench_function(BenchmarkId::new("services", n), |b| {
                b.iter(|| black_box(s.run(new_flow)))
            });
            g.finish();
            if !quick {
                if new_flow {
                    row.2 = s.measure(true);
                } else {
                    row.1 = s.measure(false);
                }
            }
        }
        if !quick {
            rows.push(row);
        }
    }
    c.final_summary();
    if let Some(&(_, (base_est, _), (base_new, _))) = rows.first() {
        println!("\nsummary (best of 5 x 200k packets, IPv4, TCP, ns/packet; ratio to 1 service)");
        println!(
            "{:>10} {:>12} {:>7} {:>12} {:>7} {:>9}",
            "services", "established", "ratio", "new flow", "ratio", "off-path"
        );
        for (n, (est, e_off), (new, n_off)) in rows {
            println!(
                "{n:>10} {est:>12.1} {:>7.2} {new:>12.1} {:>7.2} {:>9}",
                est / base_est,
                new / base_new,
                e_off + n_off
            );
        }
    }
}
