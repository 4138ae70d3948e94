//! `cargo xtask bench --load-balancer`: packets through `sluice-lb` against
//! plain kernel forwarding over the same hop, in one run.
//!
//! ```text
//!   client ns (eth0 198.18.0.2) ─┐
//!   lb ns     (eth0 198.18.0.4) ─┼─ fabric ns (br0)
//!   server ns (eth0 198.18.0.11, VIP on lo) ─┘
//! ```
//!
//! The client routes the VIP via 198.18.0.4. In every configuration the
//! frame enters the lb namespace on `eth0` and leaves by the same link
//! towards the server, which owns the VIP and answers the client directly:
//! - `lb-routing`: the lb namespace forwards with the kernel (a route for
//!   the VIP via the server, hairpin out of `eth0`, redirects off): the
//!   ceiling, the same hop without a load balancer's decision;
//! - `lb-kernel`: `sluice-lb --engine kernel` (TC ingress, Maglev, flow
//!   table, redirect back out of `eth0`);
//! - `lb-emulated`: `sluice-lb --engine emulated`.
//!
//! Metrics: iperf3 UDP with 64-byte payloads (received packets per second)
//! and TCP with one stream, each as a ratio to `lb-routing`. Only the
//! forward direction crosses the load balancer (DSR), which is what it
//! costs. Nothing is asserted.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use sluice_tests::Netns;

use super::*;

const LB_IP: &str = "198.18.0.4";
const SERVER_IP: &str = "198.18.0.11";
/// The server's health endpoint (kube-proxy's port).
const HEALTH_PORT: u16 = 10256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LbPath {
    Routing,
    Kernel,
    Emulated,
}

impl LbPath {
    const ALL: [LbPath; 3] = [LbPath::Routing, LbPath::Kernel, LbPath::Emulated];

    fn label(self) -> &'static str {
        match self {
            LbPath::Routing => "kernel forwarding over the same hop (ceiling)",
            LbPath::Kernel => "sluice-lb, kernel engine",
            LbPath::Emulated => "sluice-lb, emulated engine",
        }
    }
}

struct LbResult {
    path: LbPath,
    udp_pps: M<f64>,
    tcp1_gbps: M<f64>,
}

/// client, lb and server on one bridge, offloads off as in the other
/// topologies. Drop order: server, lb, client, fabric.
struct LbTopo {
    server: Netns,
    lb: Netns,
    client: Netns,
    _fabric: Netns,
}

impl LbTopo {
    fn build() -> Result<LbTopo> {
        let fabric = Netns::new("bl-f")?;
        let client = Netns::new("bl-c")?;
        let lb = Netns::new("bl-l")?;
        let server = Netns::new("bl-s")?;
        fabric.bridge("br0")?;
        for (ns, far, ip) in [
            (&client, "c0", CLIENT_IP),
            (&lb, "l0", LB_IP),
            (&server, "s0", SERVER_IP),
        ] {
            ns.veth_to("eth0", &fabric, far)?;
            fabric.enslave(far, "br0")?;
            ns.addr_add("eth0", &format!("{ip}/24"))?;
            ns.disable_offloads("eth0")?;
            fabric.disable_offloads(far)?;
        }
        // The server owns the VIP without answering ARP for it: frames for
        // the VIP reach it only when something addresses its MAC.
        server.addr_add("lo", &format!("{VIP}/32"))?;
        server.sysctl("net.ipv4.conf.all.arp_ignore", "1")?;
        server.sysctl("net.ipv4.conf.all.arp_announce", "2")?;
        server.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
        server.sysctl("net.ipv4.conf.eth0.rp_filter", "0")?;
        client.route_via(VIP_RANGE, LB_IP)?;
        Ok(LbTopo {
            server,
            lb,
            client,
            _fabric: fabric,
        })
    }
}

/// 200 to every request on `port` in `ns` until stopped: the server's
/// health check, as an agent's `/healthz` answers it.
struct HealthServer {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl HealthServer {
    fn start(ns: &str, port: u16) -> Result<HealthServer> {
        let addr = SocketAddr::new(SERVER_IP.parse()?, port);
        let listener = sluice_tests::in_ns(ns, move || TcpListener::bind(addr))??;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            use std::io::{Read, Write};
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut buf = [0u8; 1024];
                        let _ = conn.read(&mut buf);
                        let _ = conn.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        );
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(HealthServer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for HealthServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `sluice-lb --config`'s file: the VIP's iperf3 port on TCP and UDP, one
/// backend, probed every second.
fn lb_config() -> String {
    format!(
        "services:
- name: bench/vip
  frontends:
  - {{ipAddress: {VIP}, port: {IPERF_PORT}, protocol: TCP}}
  - {{ipAddress: {VIP}, port: {IPERF_PORT}, protocol: UDP}}
  healthCheck: {{port: {HEALTH_PORT}, requestPath: /healthz, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 3}}
  backends:
  - {{node: server, ipAddress: {SERVER_IP}}}
"
    )
}

fn run_path(path: LbPath, lb_bin: &Path, plan: &Plan) -> Result<LbResult> {
    let topo = LbTopo::build()?;
    let _health = HealthServer::start(topo.server.name(), HEALTH_PORT)?;
    // Bound to the VIP: a UDP server answers from the address it is bound
    // to, and the client only takes answers from the VIP it sent to.
    topo.server.spawn(
        &["iperf3", "-s", "-B", VIP, "-p", &IPERF_PORT.to_string()],
        Stdio::null(),
        Stdio::null(),
    )?;
    let dir = std::env::temp_dir().join(format!("sluice-bench-lb-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let _dir = DirGuard(dir.clone());
    match path {
        LbPath::Routing => {
            topo.lb.sysctl("net.ipv4.ip_forward", "1")?;
            topo.lb.sysctl("net.ipv4.conf.all.send_redirects", "0")?;
            topo.lb.sysctl("net.ipv4.conf.eth0.send_redirects", "0")?;
            topo.lb.route_via(&format!("{VIP}/32"), SERVER_IP)?;
        }
        LbPath::Kernel | LbPath::Emulated => {
            let config = dir.join("lb.yaml");
            fs::write(&config, lb_config())?;
            let engine = if path == LbPath::Kernel {
                "kernel"
            } else {
                "emulated"
            };
            let log = fs::File::create(dir.join("lb.log"))?;
            let bin = lb_bin.display().to_string();
            let config = config.display().to_string();
            topo.lb.spawn(
                &[
                    &bin,
                    "--interface",
                    "eth0",
                    "--config",
                    &config,
                    "--engine",
                    engine,
                    "--metrics-bind-address",
                    &format!("{LB_IP}:10260"),
                ],
                Stdio::null(),
                Stdio::from(log),
            )?;
        }
    }
    let vip: Ipv4Addr = VIP.parse()?;
    let waited = wait_reachable(topo.client.name(), SocketAddr::new(vip.into(), IPERF_PORT));
    if let Err(e) = waited {
        let log = fs::read_to_string(dir.join("lb.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        return Err(e.context(format!("the load balancer's log ends: {tail:?}")));
    }
    let udp_pps = best_of_2(|| iperf_udp(topo.client.name(), vip, plan.duration));
    println!("    UDP 64 B: {}", fmt_kpps(&udp_pps));
    check_interrupted()?;
    let tcp1_gbps = best_of_2(|| iperf_tcp(topo.client.name(), vip, 1, plan.duration));
    println!("    TCP 1 stream: {}", fmt_gbps(&tcp1_gbps));
    Ok(LbResult {
        path,
        udp_pps,
        tcp1_gbps,
    })
}

struct DirGuard(std::path::PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The load balancer's rows, each against the ceiling measured first.
pub(super) fn run(opts: &BenchOpts) -> Result<()> {
    let plan = Plan {
        duration: opts
            .duration
            .unwrap_or(if opts.quick { 2 } else { 3 })
            .max(1),
        connects: 0,
        streams: 1,
        counts: Vec::new(),
        configs: Vec::new(),
        sustained: std::time::Duration::ZERO,
        // The load balancer's own topology: offloads off (below).
        offloads: vec![sluice_tests::Offloads::Off],
    };
    crate::bench::build_ebpf()?;
    let lb_bin = crate::bench::build_bin("sluice-lb", "sluice-lb", true)?;
    let machine = machine_note();
    let started = Instant::now();
    println!("==> bench (load balancer): {}", machine.one_line);
    let mut results = Vec::new();
    for path in LbPath::ALL {
        check_interrupted()?;
        println!("==> {}", path.label());
        let r = run_path(path, &lb_bin, &plan).unwrap_or_else(|e| {
            println!("    not available: {}", short_err(&e));
            LbResult {
                path,
                udp_pps: M::Err(short_err(&e)),
                tcp1_gbps: M::Err(short_err(&e)),
            }
        });
        results.push(r);
    }
    let table = render_lb(&results);
    println!();
    println!("{table}");
    let elapsed = started.elapsed();
    if !opts.no_write {
        let section = format!(
            "{HEADING}\n\n`cargo xtask bench --load-balancer` ({} s per iperf3 run, best of 2; \
             {}; {:.0} s in all). One-armed: the frame enters the load balancer's namespace \
             and leaves by the same link towards the server, which owns the VIP and answers \
             the client directly (DSR), so only the forward direction is measured. The \
             ceiling is the kernel forwarding the same hop with a route.\n\n{table}\n",
            plan.duration,
            machine.one_line,
            elapsed.as_secs_f64()
        );
        let path = workspace_root().join("docs").join("benchmarks.md");
        replace_section(&path, HEADING, &section)?;
        println!("==> wrote {}", path.display());
    }
    Ok(())
}

const HEADING: &str = "## Load balancer (`cargo xtask bench --load-balancer`)";

fn render_lb(results: &[LbResult]) -> String {
    let base = results.iter().find(|r| r.path == LbPath::Routing);
    let base_udp = base.and_then(|r| r.udp_pps.ok().copied());
    let base_tcp = base.and_then(|r| r.tcp1_gbps.ok().copied());
    let mut out = String::from(
        "| path | UDP 64 B | × ceiling | TCP 1 stream | × ceiling |\n|---|---|---|---|---|\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.path.label(),
            fmt_kpps(&r.udp_pps),
            ratio(r.udp_pps.ok().copied(), base_udp),
            fmt_gbps(&r.tcp1_gbps),
            ratio(r.tcp1_gbps.ok().copied(), base_tcp),
        ));
    }
    out
}
