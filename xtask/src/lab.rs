//! `cargo xtask lab`: a cluster run by `sluice-controller` out of network
//! namespaces (`kube.rs`), real traffic through LoadBalancer VIPs, a drain
//! and a dead node, a readable account of what happened, and a clean
//! teardown (also on error and Ctrl-C: everything lives behind the test
//! bed's guards). `--standalone` runs the agents on state files instead,
//! with no controller: the health-check and bad-state demos live there.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use sluice_tests::{
    tcp_request, Cluster, ClusterSpec, EndpointSpec, Engine, Family, Policy, ServiceSpec,
    TcpOutcome,
};

mod bad_state;
mod health;
mod kube;
mod lb;

/// Requests per VIP, family and entry node.
const REQUESTS: usize = 10;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datapath {
    Emulated,
    Kernel,
    Auto,
}

#[derive(clap::Args, Debug, Clone)]
pub struct LabOpts {
    /// Datapath engine the agents run.
    #[arg(long, value_enum, default_value_t = Datapath::Emulated)]
    pub datapath: Datapath,
    /// Leave the lab running after the demo, until Ctrl-C.
    #[arg(long)]
    pub keep: bool,
    /// Two agents on state files, no controller (the health-check and
    /// bad-state demos).
    #[arg(long)]
    pub standalone: bool,
}

use crate::signals::{install as install_signal_handlers, interrupted};

pub fn run(opts: LabOpts) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the lab creates network namespaces: run it as root");
    }
    install_signal_handlers()?;
    let engine = match opts.datapath {
        Datapath::Emulated => Engine::Emulated,
        Datapath::Kernel => Engine::Kernel,
        Datapath::Auto => Engine::Auto,
    };
    let agent = crate::bench::build_agent(false)?;
    if interrupted() {
        bail!("interrupted");
    }
    if !opts.standalone {
        let bins = kube::Bins {
            agent,
            controller: crate::bench::build_bin("sluice-controller", "sluice-controller", false)?,
            lb: crate::bench::build_bin("sluice-lb", "sluice-lb", false)?,
            whoami: crate::bench::build_bin("sluice-tests", "sluice-whoami", false)?,
            sluice: crate::bench::build_bin("sluice-cli", "sluice", false)?,
        };
        crate::kubectl::install()?;
        if interrupted() {
            bail!("interrupted");
        }
        return kube::run(bins, engine, opts.keep);
    }

    let spec = ClusterSpec::new(2)
        .pod("web-1", 1)
        .pod("web-2", 2)
        .service(
            ServiceSpec::lb("web", 1)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::ready("web-1"))
                .endpoint(EndpointSpec::ready("web-2")),
        )
        .service(
            ServiceSpec::lb(health::LOCAL_SERVICE, 2)
                .policy(Policy::Local)
                .health_check_node_port(health::LOCAL_HC_PORT)
                .tcp("http", 80, 8080)
                .endpoint(EndpointSpec::ready("web-1"))
                .endpoint(EndpointSpec::ready("web-2")),
        )
        .service(ServiceSpec::lb("empty", 3).tcp("http", 80, 8080));

    println!("==> starting a 2-node lab ({} datapath)", engine.as_str());
    let mut cluster = Cluster::start_with("lab", engine, spec, Some(agent))?;
    print_topology(&cluster);

    let result = demo(&mut cluster)
        .and_then(|f| Ok(f + health::demo(&mut cluster)?))
        .and_then(|f| Ok(f + bad_state::demo(&mut cluster)?));

    if opts.keep && !interrupted() {
        print_hints(&cluster);
        while !interrupted() {
            std::thread::sleep(Duration::from_millis(200));
        }
        println!();
    }
    println!("==> tearing down");
    drop(cluster);
    println!("    done: agents stopped, namespaces deleted");
    let failures = result?;
    if failures > 0 {
        bail!("{failures} demo checks failed");
    }
    Ok(())
}

fn print_topology(c: &Cluster) {
    println!();
    println!(
        "  client     {:<28} {} / {}",
        c.client_ns(),
        Family::V4.client_ip(),
        Family::V6.client_ip()
    );
    for i in 1..=c.spec().nodes {
        let ns = c.node(i).map(|n| n.name().to_string()).unwrap_or_default();
        let dp = c
            .agent_status(i)
            .and_then(|s| s.datapath)
            .unwrap_or_else(|| "?".into());
        println!(
            "  node-{i}     {ns:<28} {} / {}  (agent datapath: {dp})",
            Family::V4.node_ip(i),
            Family::V6.node_ip(i)
        );
    }
    for p in &c.spec().pods {
        let ns = c
            .pod(&p.name)
            .map(|n| n.name().to_string())
            .unwrap_or_default();
        println!(
            "  {:<10} {ns:<28} {} / {}  on node-{}",
            p.name,
            c.pod_ip(&p.name, Family::V4)
                .map(|i| i.to_string())
                .unwrap_or_default(),
            c.pod_ip(&p.name, Family::V6)
                .map(|i| i.to_string())
                .unwrap_or_default(),
            p.node
        );
    }
    for s in &c.spec().services {
        println!(
            "  service {:<9} {:?}  VIP {} / {}  port 80 -> 8080  endpoints: {}",
            s.name,
            s.policy,
            Family::V4.vip(s.vip),
            Family::V6.vip(s.vip),
            if s.endpoints.is_empty() {
                "none".to_string()
            } else {
                s.endpoints
                    .iter()
                    .map(|e| e.pod.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    println!();
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct RowKey {
    service: String,
    family: &'static str,
    entry: String,
    answered: String,
    pod_saw: String,
    reply_from: String,
    ok: bool,
}

/// Send the traffic, print the table; the number of failed checks.
fn demo(c: &mut Cluster) -> Result<usize> {
    let mut rows: BTreeMap<RowKey, usize> = BTreeMap::new();
    let mut failures = 0;
    let services: Vec<(String, Policy)> = c
        .spec()
        .services
        .iter()
        .filter(|s| !s.endpoints.is_empty())
        .map(|s| (s.name.clone(), s.policy))
        .collect();
    println!(
        "==> {REQUESTS} TCP requests per VIP, family and entry node (the client routes the VIPs via that node)"
    );
    'outer: for entry in 1..=c.spec().nodes {
        c.route_vips_via(entry)?;
        for (svc, policy) in &services {
            for f in Family::BOTH {
                let vip = c.vip(svc, f, 80)?;
                let mut failed_in_a_row = 0;
                for sent in 0..REQUESTS {
                    if interrupted() {
                        break 'outer;
                    }
                    if failed_in_a_row >= 3 {
                        let key = RowKey {
                            service: svc.clone(),
                            family: f.name(),
                            entry: format!("node-{entry}"),
                            answered: "(not sent: 3 failures in a row)".into(),
                            pod_saw: "-".into(),
                            reply_from: "-".into(),
                            ok: false,
                        };
                        *rows.entry(key).or_default() += REQUESTS - sent;
                        break;
                    }
                    let out = tcp_request(c.client_ns(), vip)?;
                    let key = match out {
                        TcpOutcome::Reply { reply, peer } => {
                            let expect_src = match policy {
                                Policy::Cluster => f.node_ip(entry),
                                Policy::Local => f.client_ip(),
                            };
                            let local_ok = match policy {
                                Policy::Cluster => true,
                                Policy::Local => c.pod_node(&reply.pod) == Some(entry),
                            };
                            let ok = reply.peer.ip() == expect_src && peer == vip && local_ok;
                            RowKey {
                                service: svc.clone(),
                                family: f.name(),
                                entry: format!("node-{entry}"),
                                answered: reply.pod.clone(),
                                pod_saw: reply.peer.ip().to_string(),
                                reply_from: peer.to_string(),
                                ok,
                            }
                        }
                        other => RowKey {
                            service: svc.clone(),
                            family: f.name(),
                            entry: format!("node-{entry}"),
                            answered: short(&other),
                            pod_saw: "-".into(),
                            reply_from: "-".into(),
                            ok: false,
                        },
                    };
                    failed_in_a_row = if key.ok { 0 } else { failed_in_a_row + 1 };
                    *rows.entry(key).or_default() += 1;
                }
            }
        }
    }
    let restore = c.route_vips_via(1);

    let header = [
        "SERVICE",
        "FAMILY",
        "ENTRY",
        "ANSWERED BY",
        "POD SAW SOURCE",
        "CLIENT SAW REPLY FROM",
        "N",
        "CHECK",
    ];
    let body: Vec<[String; 8]> = rows
        .iter()
        .map(|(k, n)| {
            [
                k.service.clone(),
                k.family.to_string(),
                k.entry.clone(),
                k.answered.clone(),
                k.pod_saw.clone(),
                k.reply_from.clone(),
                n.to_string(),
                if k.ok { "ok" } else { "FAIL" }.to_string(),
            ]
        })
        .collect();
    print_table(&header, &body);
    for (k, n) in &rows {
        if !k.ok {
            failures += n;
        }
    }
    println!(
        "  Cluster: the pod sees the entry node's IP (SNAT); Local: the pod sees the client's IP;"
    );
    println!("  both: the client sees the VIP as the reply source (direct server return).");
    println!();

    if interrupted() {
        restore?;
        bail!("interrupted");
    }

    println!("==> no endpoints: service `empty`");
    for f in Family::BOTH {
        let vip = c.vip("empty", f, 80)?;
        let t = Instant::now();
        let out = tcp_request(c.client_ns(), vip)?;
        let ms = t.elapsed().as_millis();
        match out {
            TcpOutcome::Refused => {
                println!("  {vip:<24} reset (connection refused) after {ms} ms  ok")
            }
            other => {
                failures += 1;
                println!(
                    "  {vip:<24} expected a reset, got {} after {ms} ms  FAIL",
                    short(&other)
                );
            }
        }
    }
    println!();
    restore?;
    Ok(failures)
}

fn short(o: &TcpOutcome) -> String {
    match o {
        TcpOutcome::Reply { reply, .. } => reply.pod.clone(),
        TcpOutcome::Refused => "(refused: reset)".into(),
        TcpOutcome::TimedOut => "(timed out)".into(),
        TcpOutcome::Failed(e) => format!("({e})"),
    }
}

fn print_table(header: &[&str; 8], body: &[[String; 8]]) {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in body {
        for (i, cell) in r.iter().enumerate() {
            w[i] = w[i].max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        println!("  {}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    line(
        w.iter()
            .map(|n| "-".repeat(*n))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    );
    for r in body {
        line(r.iter().map(String::as_str).collect());
    }
    println!();
}

fn print_hints(c: &Cluster) {
    let client = c.client_ns();
    let n1 = c.node(1).map(|n| n.name().to_string()).unwrap_or_default();
    println!("==> the lab keeps running; Ctrl-C tears it down. Try:");
    println!(
        "  ip netns exec {client} bash -c 'exec 3<>/dev/tcp/{}/80; echo who >&3; head -1 <&3'",
        Family::V4.vip(1)
    );
    println!(
        "  ip netns exec {client} bash -c 'exec 3<>/dev/tcp/{}/80; echo who >&3; head -1 <&3'",
        Family::V6.vip(1)
    );
    println!("  ip netns exec {client} ip route");
    println!("  ip netns exec {n1} ip addr");
    println!("  ip netns exec {n1} ip route");
    println!(
        "  ls {}   # state files, status files, agent logs",
        c.dir().display()
    );
    println!("  tail -f {}/node-1.log", c.dir().display());
    println!("  (the client routes the VIPs via node-1)");
    println!();
}
