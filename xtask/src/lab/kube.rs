//! `cargo xtask lab`: a cluster run by `sluice-controller`. The controller
//! (embedded store) runs in a control namespace; a node pool of four nodes
//! in two zones comes from the `netns` provider, each node a namespace
//! running a real `sluice-agent` that registers itself; the demo is applied
//! with the real kubectl, with L4 subsetting on. `sluice-lb` runs in a
//! namespace of its own between the client and the nodes (configured from
//! the API's load-balancer objects) and the client reaches every VIP only
//! through it. Then: the groups (`kubectl get l4lb,hc,neg,ig`), the traffic
//! table, the spread over the nodes, a drain and a node killed outright,
//! each under traffic; then the pool's surge upgrades under traffic (one
//! with the controller killed -9, one cancelled and resumed, one rolled
//! back). Every line that can be checked is, and the lab fails
//! if one fails.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sluice_tests::kube_cluster::{
    internal_lb_service, lb_service, lingering_deployment, pdb, KubeCluster, KubeClusterSpec,
    PodView, SUBSETTING_ON,
};
use sluice_tests::{
    http_get, tcp_request, upgrade_scene, Engine, Family, TcpConn, TcpOutcome, Traffic,
};

use super::lb;

use crate::signals::interrupted;

/// Requests per VIP, family and entry node.
const REQUESTS: usize = 6;
/// Every wait is bounded.
pub(super) const WAIT: Duration = Duration::from_secs(60);

/// The demo: a Deployment of 4 who-am-I pods spread over the zones and one
/// of a single pod, internal LoadBalancer Services (`Cluster` and `Local`
/// over the 4, `Local` over the single one), an external one with no
/// endpoints, and a PDB. The pods keep serving 8 s after SIGTERM (a
/// `preStop` sleep's effect), longer than a `Local` health check takes to
/// turn a node away (2 × 3 s), and tolerate an unreachable node for 5 s
/// (the default is 300 s) so that the killed node's pods move within the
/// lab's minutes.
fn demo_manifest(whoami: &Path) -> String {
    let deployment = |name: &str, replicas: usize| lingering_deployment(name, replicas, whoami, 5);
    [
        deployment("web", 4),
        deployment("solo", 1),
        // The Cluster one names the container's port, the others its number.
        internal_lb_service("web", "web", "Cluster", "http"),
        internal_lb_service("web-local", "web", "Local", "8080"),
        internal_lb_service("solo", "solo", "Local", "8080"),
        lb_service("empty", "nothing", "Cluster", "8080"),
        pdb("web", "web", 3),
    ]
    .join("---\n")
}

/// The Services and their VIP numbers (198.18.100.n, fd00:18:100::n).
const SERVICES: [(&str, u8); 4] = [("web", 1), ("web-local", 2), ("solo", 3), ("empty", 4)];

/// `web`'s health check, overridden on its HealthCheck object: quicker
/// than GKE's 8 s × 3 for the lab's minutes.
const WEB_CHECK_INTERVAL_S: u64 = 4;
const WEB_UNHEALTHY_THRESHOLD: u64 = 2;

pub struct Bins {
    pub agent: PathBuf,
    pub controller: PathBuf,
    pub lb: PathBuf,
    pub whoami: PathBuf,
    /// The `sluice` CLI the upgrade scene drives.
    pub sluice: PathBuf,
}

/// Counts checks; a failed one is printed and counted, never hidden.
#[derive(Default)]
pub(super) struct Checks {
    failed: usize,
}

impl Checks {
    pub(super) fn check(&mut self, ok: bool, what: &str) {
        println!("  {:<4} {what}", if ok { "ok" } else { "FAIL" });
        if !ok {
            self.failed += 1;
        }
    }
}

pub fn run(bins: Bins, engine: Engine, keep: bool) -> Result<()> {
    let started = Instant::now();
    let mut spec = KubeClusterSpec::new(&["lab-a", "lab-b"], 2);
    spec.engine = engine;
    spec.monitor_grace_s = 6;
    // A node killed outright has its Node deleted by the pool at once;
    // its pods then wait out the pod GC's quarantine (40 s upstream).
    spec.pod_gc_quarantine_s = 5;
    spec.agent = Some(bins.agent.clone());
    spec.controller = Some(bins.controller.clone());
    println!(
        "==> starting sluice-controller and a node pool of 4 nodes in 2 zones ({} datapath)",
        engine.as_str()
    );
    let mut cluster = KubeCluster::start("lab", &spec)?;
    let result = demo(&mut cluster, &bins, engine);
    match &result {
        Err(e) => {
            println!("==> the demo stopped: {e:#}");
            println!("{}", cluster.logs());
        }
        Ok(failed) if *failed > 0 => {
            println!("==> {failed} checks failed; the logs' last lines:");
            println!("{}", cluster.logs());
        }
        Ok(_) => {}
    }
    if keep && !interrupted() {
        println!("==> the lab keeps running; Ctrl-C tears it down. Try:");
        println!(
            "  ip netns exec <control namespace> {} --kubeconfig {}/admin.kubeconfig get nodes,pods -o wide",
            sluice_tests::kube_cluster::kubectl_bin().display(),
            cluster.dir.display()
        );
        while !interrupted() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    println!("==> tearing down");
    let prefix = cluster.prefix().to_string();
    drop(cluster);
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    if left.is_empty() {
        println!("    done: controller and agents stopped, namespaces deleted");
    } else {
        println!("    FAIL: namespaces left: {left:?}");
    }
    println!(
        "==> {:.0} s from start to teardown",
        started.elapsed().as_secs_f64()
    );
    let failed = result?;
    if failed > 0 || !left.is_empty() {
        bail!("{failed} demo checks failed");
    }
    Ok(())
}

fn demo(c: &mut KubeCluster, bins: &Bins, engine: Engine) -> Result<usize> {
    let mut checks = Checks::default();
    let nodes = c.nodes()?;
    for n in &nodes {
        println!(
            "  node {:<28} zone {:<6} {}  Ready={}",
            n.name,
            n.zone,
            n.ipv4.clone().unwrap_or_default(),
            n.ready
        );
    }
    println!("==> kubectl apply: Cluster default with L4 subsetting on");
    print_indented(&c.apply(SUBSETTING_ON)?);
    println!("==> kubectl apply: Deployments web (4 replicas) and solo (1), internal Services web (Cluster), web-local and solo (Local), external empty, PDB web");
    print_indented(&c.apply(&demo_manifest(&bins.whoami))?);
    for (svc, vip) in SERVICES {
        c.set_vips(svc, vip)?;
    }
    let pods = c.wait_for("4 web pods and the solo pod Ready", WAIT, || {
        let p = c.pods("app=web").ok()?;
        let solo = c.pods("app=solo").ok()?;
        let ready = |p: &[PodView]| p.iter().filter(|p| p.ready && !p.deleting).count();
        (ready(&p) == 4 && ready(&solo) == 1).then_some(p)
    })?;
    let outside = addresses_outside_pod_cidrs(c, &pods)?;
    checks.check(
        outside.is_empty(),
        &format!(
            "4 web pods Running and Ready, each with an address per family from its node's podCIDRs{}",
            if outside.is_empty() { String::new() } else { format!(": {outside:?}") }
        ),
    );
    let by_zone = pods_by_zone(c, &pods)?;
    checks.check(
        by_zone.values().all(|n| *n == 2),
        &format!("spread over the zones: {by_zone:?}"),
    );
    let patch = format!(
        r#"{{"spec":{{"checkIntervalSec":{WEB_CHECK_INTERVAL_S},"unhealthyThreshold":{WEB_UNHEALTHY_THRESHOLD}}}}}"#
    );
    println!("==> kubectl patch healthcheck web -p '{patch}' (the override on the Sluice object)");
    c.kubectl(&["patch", "healthcheck", "web", "--type=merge", "-p", &patch])?;

    println!(
        "==> starting sluice-lb ({} engine) between the client and the nodes; the client routes the VIPs through it",
        lb_engine_word(engine)
    );
    c.start_load_balancer(engine, Some(&bins.lb))?;
    lb::groups(c, &nodes, &mut checks)?;
    wait_endpoints(c, "web", 4)?;
    lb::wait_healthy(c, "web", 4)?;
    lb::first_answers(c, &[("web", 1), ("web-local", 2), ("solo", 3)])?;
    traffic_table(c, &mut checks)?;
    lb::spread(c, &mut checks)?;

    println!("==> kubectl get nodes,pods -o wide");
    print_indented(&c.kubectl(&["get", "nodes,pods", "-o", "wide"])?);

    if interrupted() {
        bail!("interrupted");
    }
    drain(c, &mut checks)?;
    if interrupted() {
        bail!("interrupted");
    }
    kill_node(c, &mut checks)?;
    if interrupted() {
        bail!("interrupted");
    }
    upgrades(c, bins, &mut checks)?;
    Ok(checks.failed)
}

/// The upgrade scenes (`sluice_tests::upgrade_scene`, which CI runs
/// too), under traffic through web (Cluster) and web-local (Local): three
/// surge upgrades of the pool with the `sluice` CLI (the controller killed
/// -9 in the first, the second cancelled and resumed, the third rolled
/// back), then three blue-green ones (every phase, a rollback while
/// draining, an early complete-upgrade), then an autoscaled blue-green one
/// (green grown from zero through the wait).
fn upgrades(c: &mut KubeCluster, bins: &Bins, checks: &mut Checks) -> Result<()> {
    let surge = upgrade_scene::Scene {
        sluice: bins.sluice.clone(),
        pool: "pool".into(),
        nodes: 4,
        versions: ["1.37.1".into(), "1.37.2".into(), "1.37.3".into()],
        wait: Duration::from_secs(120),
    };
    let report = surge.run(c)?;
    figures(&report, checks);
    let blue_green = upgrade_scene::Scene {
        versions: ["1.37.4".into(), "1.37.5".into(), "1.37.6".into()],
        ..surge
    };
    let report = blue_green.run_blue_green(c)?;
    figures(&report, checks);
    let autoscaled = upgrade_scene::Scene {
        versions: ["1.37.7".into(), "1.37.8".into(), "1.37.9".into()],
        ..blue_green
    };
    let report = autoscaled.run_autoscaled_blue_green(c)?;
    figures(&report, checks);
    println!("==> kubectl get nodepool,operations");
    print_indented(&c.kubectl(&["get", "nodepool,operations"])?);
    Ok(())
}

/// A scene's failed checks counted, its figures printed as a table.
fn figures(report: &upgrade_scene::Report, checks: &mut Checks) {
    checks.failed += report.failed().len();
    println!("==> the upgrades' figures");
    println!(
        "  {:<40} {:>6} {:>8} {:>10}  REQUESTS SERVED / FAILED",
        "PHASE", "NODES", "SECONDS", "PER NODE"
    );
    for f in &report.figures {
        let requests: Vec<String> = f
            .requests
            .iter()
            .map(|(s, (ok, failed))| format!("{s} {ok}/{failed}"))
            .collect();
        println!(
            "  {:<40} {:>6} {:>8.1} {:>10}  {}",
            f.phase,
            f.nodes_upgraded,
            f.seconds,
            f.per_node()
                .map_or("-".to_string(), |s| format!("{s:.1} s")),
            requests.join(", ")
        );
    }
}

fn lb_engine_word(engine: Engine) -> &'static str {
    match engine {
        Engine::Emulated => "emulated",
        Engine::Kernel => "kernel",
        Engine::Auto => "auto",
    }
}

pub(super) fn print_indented(text: &str) {
    for l in text.lines() {
        println!("    {l}");
    }
}

/// The pods' addresses not inside their node's `spec.podCIDRs`, and pods
/// without one address per family.
fn addresses_outside_pod_cidrs(c: &KubeCluster, pods: &[PodView]) -> Result<Vec<String>> {
    let nodes = c.get_json(&["nodes"])?;
    let cidrs: BTreeMap<String, Vec<String>> = nodes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let list = n["spec"]["podCIDRs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            (name, list)
        })
        .collect();
    let mut bad = Vec::new();
    for p in pods {
        let own = cidrs.get(&p.node).cloned().unwrap_or_default();
        let families = p.ips.iter().filter(|i| i.contains('.')).count() == 1
            && p.ips.iter().filter(|i| i.contains(':')).count() == 1;
        if !families {
            bad.push(format!("{}: {:?}", p.name, p.ips));
        }
        for ip in &p.ips {
            if !own.iter().any(|c| in_cidr(ip, c)) {
                bad.push(format!("{} {ip} not in {own:?}", p.name));
            }
        }
    }
    Ok(bad)
}

/// Whether address `ip` lies in `cidr` (both as text; unreadable: no).
fn in_cidr(ip: &str, cidr: &str) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(ip), Ok(net), Ok(len)) = (
        ip.parse::<IpAddr>(),
        net.parse::<IpAddr>(),
        len.parse::<u32>(),
    ) else {
        return false;
    };
    if ip.is_ipv4() != net.is_ipv4() {
        return false;
    }
    // Both as 128 bits, an IPv4 address in the top 32.
    let bits = |a: IpAddr| -> u128 {
        match a {
            IpAddr::V4(v) => u128::from(u32::from(v)) << 96,
            IpAddr::V6(v) => u128::from(v),
        }
    };
    let max = if net.is_ipv4() { 32 } else { 128 };
    if len > max {
        return false;
    }
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    bits(ip) & mask == bits(net) & mask
}

fn pods_by_zone(c: &KubeCluster, pods: &[PodView]) -> Result<BTreeMap<String, usize>> {
    let zones: BTreeMap<String, String> =
        c.nodes()?.into_iter().map(|n| (n.name, n.zone)).collect();
    let mut out = BTreeMap::new();
    for p in pods.iter().filter(|p| !p.deleting) {
        let z = zones.get(&p.node).cloned().unwrap_or_default();
        *out.entry(z).or_insert(0) += 1;
    }
    Ok(out)
}

/// Wait until the Service's EndpointSlices hold `n` ready endpoints.
fn wait_endpoints(c: &KubeCluster, svc: &str, n: usize) -> Result<()> {
    c.wait_for(&format!("{n} ready endpoints of {svc}"), WAIT, || {
        let list = c
            .get_json(&[
                "endpointslices",
                "-l",
                &format!("kubernetes.io/service-name={svc}"),
            ])
            .ok()?;
        let ready = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["addressType"] == "IPv4")
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["conditions"]["ready"] == true)
            .count();
        (ready == n).then_some(())
    })
}

fn vip(f: Family, n: u8) -> SocketAddr {
    SocketAddr::new(f.vip(n), 80)
}

fn traffic_table(c: &KubeCluster, checks: &mut Checks) -> Result<()> {
    let pods: Vec<PodView> = [c.pods("app=web")?, c.pods("app=solo")?].concat();
    let node_of: BTreeMap<String, String> = pods
        .iter()
        .map(|p| (p.name.clone(), p.node.clone()))
        .collect();
    // The node addresses a pod may see for a Cluster Service: the node the
    // load balancer chose SNATs to its own.
    let mut node_ips: BTreeMap<IpAddr, String> = BTreeMap::new();
    for n in c.nodes()? {
        if let Ok((v4, v6)) = c.node_addrs(&n.name) {
            node_ips.insert(v4.parse()?, n.name.clone());
            node_ips.insert(v6.parse()?, n.name.clone());
        }
    }
    println!("==> {REQUESTS} TCP requests per VIP and family, through the load balancer");
    println!(
        "  {:<10} {:<5} {:<26} {:<22} {:<26} CHECK",
        "SERVICE", "FAM", "ANSWERED BY", "POD SAW SOURCE", "CLIENT SAW REPLY FROM"
    );
    let mut rows: BTreeMap<(String, String, String, String, String, bool), usize> = BTreeMap::new();
    for (svc, n) in SERVICES {
        let local = svc == "web-local" || svc == "solo";
        for f in Family::BOTH {
            let dst = vip(f, n);
            for _ in 0..REQUESTS {
                let out = tcp_request(c.client(), dst)?;
                let (answered, saw, from, ok) = match (&out, svc) {
                    (TcpOutcome::Refused, "empty") => {
                        ("(reset: no endpoints)".into(), "-".into(), "-".into(), true)
                    }
                    (TcpOutcome::Reply { reply, peer }, _) => {
                        let node = node_of.get(&reply.pod).cloned().unwrap_or_default();
                        let src = reply.peer.ip();
                        // Local keeps the client's address (P4); Cluster
                        // SNATs at the node the load balancer chose (P3).
                        let src_ok = if local {
                            src == f.client_ip()
                        } else {
                            node_ips.contains_key(&src)
                        };
                        let saw = match node_ips.get(&src) {
                            Some(n) => format!("{src} ({})", short_node(n)),
                            None => src.to_string(),
                        };
                        let ok = svc != "empty" && src_ok && *peer == dst;
                        (
                            format!("{} ({})", reply.pod, short_node(&node)),
                            saw,
                            peer.to_string(),
                            ok,
                        )
                    }
                    (other, _) => (format!("{other:?}"), "-".into(), "-".into(), false),
                };
                *rows
                    .entry((
                        svc.to_string(),
                        f.name().to_string(),
                        answered,
                        saw,
                        from,
                        ok,
                    ))
                    .or_default() += 1;
            }
        }
    }
    for ((svc, fam, answered, saw, from, ok), count) in &rows {
        println!(
            "  {svc:<10} {fam:<5} {:<26} {saw:<22} {from:<26} {} ×{count}",
            answered,
            if *ok { "ok" } else { "FAIL" }
        );
        if !ok {
            checks.failed += count;
        }
    }
    println!(
        "  Cluster: the pod sees the address of the node the load balancer chose (SNAT); Local: the client's;"
    );
    println!(
        "  every reply comes from the VIP, straight from the node (direct server return); `empty` answers with a reset."
    );
    Ok(())
}

fn short_node(n: &str) -> String {
    n.rsplit('-').next().unwrap_or(n).to_string()
}

/// The node of the single `solo` pod (ready, not being deleted).
fn solo_node(c: &KubeCluster) -> Option<String> {
    let pods = c.pods("app=solo").ok()?;
    let live: Vec<&PodView> = pods.iter().filter(|p| p.ready && !p.deleting).collect();
    (live.len() == 1).then(|| live[0].node.clone())
}

/// Drain the node of `solo`'s pod (a `Local` Service's only serving node)
/// with clients looping over the `web` and `solo` VIPs and a connection to
/// `solo` held open: endpoints turn terminating, the node's `Local` check
/// fails, the load balancer stops sending it new connections after its
/// threshold, and until then the node answers from the terminating pod.
fn drain(c: &KubeCluster, checks: &mut Checks) -> Result<()> {
    let victim = solo_node(c).ok_or_else(|| anyhow!("no ready solo pod"))?;
    println!(
        "==> kubectl drain {victim} (solo's node) with clients looping over the web and solo VIPs and a connection to solo held open"
    );
    let mut held = match TcpConn::connect(c.client(), vip(Family::V4, 3))? {
        Ok(conn) => conn,
        Err(o) => bail!("could not open the held connection: {o:?}"),
    };
    // The node's own `Local` check for solo, as the load balancer probes it.
    let hc_port: u16 = c
        .kubectl(&[
            "get",
            "service",
            "solo",
            "-o",
            "jsonpath={.spec.healthCheckNodePort}",
        ])?
        .trim()
        .parse()
        .context("solo's healthCheckNodePort")?;
    let (victim_v4, _) = c.node_addrs(&victim)?;
    let hc_addr = SocketAddr::new(victim_v4.parse()?, hc_port);
    let web = Traffic::start(c.client(), vip(Family::V4, 1));
    let solo = Traffic::start(c.client(), vip(Family::V4, 3));
    let t = Instant::now();
    let mut check_failed_after = None;
    let (out, unhealthy_after, held_ok, held_failed) = std::thread::scope(|s| {
        let drainer = s.spawn(|| {
            c.kubectl(&[
                "drain",
                &victim,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=90s",
            ])
        });
        let (mut unhealthy_after, mut held_ok, mut held_failed) = (None, 0, 0);
        // The held connection talks until the load balancer has turned
        // the node away (a second more), then is closed by the client:
        // an established connection finishing its work. Bounded.
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let unhealthy = lb::healthy(c, "solo").get(&victim).copied() == Some(0.0);
            if unhealthy && unhealthy_after.is_none() {
                unhealthy_after = Some(t.elapsed());
            }
            if check_failed_after.is_none()
                && http_get(c.client(), hc_addr, "/healthz").is_ok_and(|a| a.status != 200)
            {
                check_failed_after = Some(t.elapsed());
            }
            let done_talking =
                unhealthy_after.is_some_and(|u| t.elapsed() > u + Duration::from_secs(1));
            if !done_talking {
                match held.request() {
                    Ok(_) => held_ok += 1,
                    Err(_) => held_failed += 1,
                }
            }
            if done_talking && drainer.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let out = drainer
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the drain thread panicked")));
        (out, unhealthy_after, held_ok, held_failed)
    });
    drop(held);
    let drained = out.is_ok();
    if let Ok(o) = &out {
        print_indented(o);
    }
    let moved = c.wait_for("solo Ready on another node", WAIT, || {
        solo_node(c).filter(|n| *n != victim)
    });
    let settled = c.wait_for("4 web pods Ready off the drained node", WAIT, || {
        let p = c.pods("app=web").ok()?;
        let live: Vec<&PodView> = p.iter().filter(|p| !p.deleting).collect();
        (live.len() == 4 && live.iter().all(|p| p.ready && p.node != victim)).then_some(())
    });
    let _ = wait_endpoints(c, "web", 4);
    let (web_ok, web_failed, web_errors) = web.finish();
    let (solo_ok, solo_failed, solo_errors) = solo.finish();
    checks.check(
        drained,
        &format!(
            "kubectl drain finished in {:.1} s{}",
            t.elapsed().as_secs_f64(),
            out.err().map(|e| format!(": {e:#}")).unwrap_or_default()
        ),
    );
    checks.check(
        moved.is_ok() && settled.is_ok(),
        &format!(
            "solo and the drained node's web pods replaced on other nodes{}",
            moved
                .map(|n| format!(" (solo now on {n})"))
                .unwrap_or_default()
        ),
    );
    let secs = |d: Option<Duration>| {
        d.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64()))
    };
    checks.check(
        check_failed_after.is_some(),
        &format!(
            "{victim}'s Local health check for solo failed (its only pod terminating) {} after the drain began",
            secs(check_failed_after)
        ),
    );
    checks.check(
        unhealthy_after.is_some(),
        &format!(
            "the load balancer stopped sending {victim} new solo connections {} after the drain began (out of solo's NEG once its pod terminated, established flows draining 30 s; else after 2 failed checks every 3 s)",
            secs(unhealthy_after)
        ),
    );
    checks.check(
        held_ok > 0 && held_failed == 0,
        &format!("the connection held open answered {held_ok} requests until the client closed it, {held_failed} failed"),
    );
    for (name, ok, failed, errors) in [
        ("web (Cluster)", web_ok, web_failed, web_errors),
        ("solo (Local)", solo_ok, solo_failed, solo_errors),
    ] {
        checks.check(
            failed == 0 && ok > 0,
            &format!(
                "the {name} VIP answered {ok} new connections during the drain, {failed} failed {}",
                errors.first().cloned().unwrap_or_default()
            ),
        );
    }
    let nodes = c.nodes()?;
    checks.check(
        nodes.iter().any(|n| n.name == victim && n.unschedulable),
        &format!("{victim} cordoned (spec.unschedulable)"),
    );
    c.kubectl(&["uncordon", &victim])?;
    Ok(())
}

/// Kill a node running a web pod outright (its agent with SIGKILL, its
/// namespace deleted) with a client looping over the `web` VIP: the load
/// balancer turns it away after its threshold of failed probes and new
/// connections recover; the controller sees the Lease expire, evicts its
/// pods after their toleration; the Deployment replaces them, the pool the
/// node.
fn kill_node(c: &KubeCluster, checks: &mut Checks) -> Result<()> {
    let pods = c.pods("app=web")?;
    let solo = solo_node(c).unwrap_or_default();
    let victim = pods
        .iter()
        .filter(|p| !p.deleting && p.node != solo)
        .map(|p| p.node.clone())
        .next()
        .ok_or_else(|| anyhow!("no web pod off solo's node"))?;
    let lost: Vec<&str> = pods
        .iter()
        .filter(|p| p.node == victim)
        .map(|p| p.name.as_str())
        .collect();
    println!(
        "==> killing node {victim} outright (namespace deleted, agent SIGKILLed; pods {lost:?}) with a client looping over the web VIP"
    );
    let traffic = Traffic::start(c.client(), vip(Family::V4, 1));
    std::thread::sleep(Duration::from_secs(1));
    let t = Instant::now();
    c.kill_node(&victim).context("killing the node")?;
    let out = c.wait_for(
        &format!("{victim} unhealthy at the load balancer"),
        WAIT,
        || (lb::healthy(c, "web").get(&victim).copied() != Some(1.0)).then(|| t.elapsed()),
    );
    // Bound: the probes in flight when it died, its threshold of failures
    // (each at most the timeout late), one more interval for the phase.
    let interval = Duration::from_secs(WEB_CHECK_INTERVAL_S);
    let bound = interval * (WEB_UNHEALTHY_THRESHOLD as u32 + 1) + Duration::from_secs(2);
    checks.check(
        out.as_ref().is_ok_and(|d| *d <= bound),
        &format!(
            "the load balancer turned {victim} away for web (every {WEB_CHECK_INTERVAL_S} s, unhealthy after {WEB_UNHEALTHY_THRESHOLD}) after {}",
            out.as_ref().map_or("never".to_string(), |d| format!("{:.1} s (bound {:.0} s)", d.as_secs_f64(), bound.as_secs_f64()))
        ),
    );
    // Connections started after that succeed; a few seconds of them.
    std::thread::sleep(Duration::from_secs(4));
    let last = traffic.last_failure();
    let (ok, failed, _) = traffic.finish();
    let recovered = last.map(|l| l.saturating_duration_since(t));
    checks.check(
        ok > 0 && recovered.is_none_or(|r| r <= bound),
        &format!(
            "new connections through the web VIP: {ok} answered, {failed} failed (sent to {victim} or to its pod before it was turned away), the last started {} after the kill",
            recovered.map_or("never".to_string(), |r| format!("{:.1} s", r.as_secs_f64()))
        ),
    );
    let unknown = c.wait_for(&format!("{victim} Ready=Unknown"), WAIT, || {
        let n = c.nodes().ok()?;
        n.iter()
            .find(|n| n.name == victim)
            .is_none_or(|n| n.ready == "Unknown")
            .then_some(())
    });
    checks.check(
        unknown.is_ok(),
        &format!(
            "its Lease expired: Ready=Unknown after {:.1} s",
            t.elapsed().as_secs_f64()
        ),
    );
    let replaced = c.wait_for("4 web pods Ready elsewhere", WAIT, || {
        let p = c.pods("app=web").ok()?;
        let live: Vec<&PodView> = p
            .iter()
            .filter(|p| !p.deleting && p.node != victim)
            .collect();
        (live.iter().filter(|p| p.ready).count() == 4).then_some(())
    });
    checks.check(
        replaced.is_ok(),
        &format!(
            "its pods replaced (evicted by the taint, or collected once its Node is gone): 4 Ready on live nodes after {:.1} s",
            t.elapsed().as_secs_f64()
        ),
    );
    let new_node = c.wait_for("the pool back to 4 Ready nodes", WAIT, || {
        let n = c.nodes().ok()?;
        (n.iter()
            .filter(|n| n.ready == "True" && n.name != victim)
            .count()
            == 4)
            .then_some(())
    });
    checks.check(
        new_node.is_ok(),
        &format!(
            "the node pool replaced the node: 4 Ready after {:.1} s",
            t.elapsed().as_secs_f64()
        ),
    );
    println!("==> kubectl get nodes,pods,neg -o wide");
    print_indented(&c.kubectl(&["get", "nodes,pods,neg", "-o", "wide"])?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::in_cidr;

    #[test]
    fn addresses_in_and_out_of_a_cidr() {
        assert!(in_cidr("198.19.3.2", "198.19.3.0/24"));
        assert!(!in_cidr("198.19.4.2", "198.19.3.0/24"));
        assert!(in_cidr("fd00:19:0:3::2", "fd00:19:0:3::/64"));
        assert!(!in_cidr("fd00:19:0:4::2", "fd00:19:0:3::/64"));
        assert!(!in_cidr("198.19.3.2", "fd00:19:0:3::/64"));
        assert!(!in_cidr("198.19.3.2", "198.19.3.0/33"));
        assert!(!in_cidr("x", "198.19.3.0/24"));
    }
}
