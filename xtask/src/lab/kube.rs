//! `cargo xtask lab`: a cluster run by `sluice-controller`. The controller
//! (embedded store) runs in a control namespace; a node pool of four nodes
//! in two zones comes from the `netns` provider, each node a namespace
//! running a real `sluice-agent` that registers itself; the demo is applied
//! with the real kubectl. Then: the traffic table, `kubectl get
//! nodes,pods -o wide`, a drain under traffic, a node killed outright.
//! Every line that can be checked is, and the lab fails if one fails.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sluice_tests::kube_cluster::{lb_service, KubeCluster, KubeClusterSpec, PodView};
use sluice_tests::{tcp_request, Engine, Family, TcpOutcome, Traffic};

use crate::signals::interrupted;

/// Requests per VIP, family and entry node.
const REQUESTS: usize = 6;
/// Every wait is bounded.
const WAIT: Duration = Duration::from_secs(60);

/// The demo: a Deployment of 4 who-am-I pods spread over the zones, a
/// `Cluster` and a `Local` LoadBalancer Service, one with no endpoints, and
/// a PDB. The pods tolerate an unreachable node for 5 s (the default is
/// 300 s) so that the killed node's pods move within the lab's minutes.
fn demo_manifest(whoami: &Path) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}}}
      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: web}}}}}}
      tolerations:
      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}}
      - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}}
      containers:
      - name: whoami
        command: [{whoami}, --tcp, "8080"]
        ports: [{{containerPort: 8080, name: http}}]
        resources: {{requests: {{cpu: 100m, memory: 32Mi}}}}
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1, failureThreshold: 1}}
---
{}---
{}---
{}---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web}}
spec:
  minAvailable: 3
  selector: {{matchLabels: {{app: web}}}}
"#,
        // The Cluster one names the container's port, the others its number.
        lb_service("web", "web", "Cluster", "http"),
        lb_service("web-local", "web", "Local", "8080"),
        lb_service("empty", "nothing", "Cluster", "8080"),
        whoami = whoami.display()
    )
}

/// The Services and their VIP numbers (198.18.100.n, fd00:18:100::n).
const SERVICES: [(&str, u8); 3] = [("web", 1), ("web-local", 2), ("empty", 3)];

pub struct Bins {
    pub agent: PathBuf,
    pub controller: PathBuf,
    pub whoami: PathBuf,
}

/// Counts checks; a failed one is printed and counted, never hidden.
#[derive(Default)]
struct Checks {
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
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
    spec.agent = Some(bins.agent.clone());
    spec.controller = Some(bins.controller.clone());
    println!(
        "==> starting sluice-controller and a node pool of 4 nodes in 2 zones ({} datapath)",
        engine.as_str()
    );
    let cluster = KubeCluster::start("lab", &spec)?;
    let result = demo(&cluster, &bins);
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

fn demo(c: &KubeCluster, bins: &Bins) -> Result<usize> {
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
    println!("==> kubectl apply: Deployment web (4 replicas), Services web (Cluster), web-local (Local), empty, PDB web");
    print_indented(&c.apply(&demo_manifest(&bins.whoami))?);
    for (svc, vip) in SERVICES {
        c.set_vips(svc, vip)?;
    }
    let pods = c.wait_for("4 web pods Ready", WAIT, || {
        let p = c.pods("app=web").ok()?;
        (p.iter().filter(|p| p.ready && !p.deleting).count() == 4).then_some(p)
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

    // The client enters through the first node, as until the load
    // balancer issue it routes the VIPs through one node it picks.
    let entry = nodes.first().ok_or_else(|| anyhow!("no nodes"))?.clone();
    let (v4, v6) = c.node_addrs(&entry.name)?;
    c.route_vips_via(&v4, &v6)?;
    wait_endpoints(c, "web", 4)?;
    traffic_table(c, &entry.name, &v4, &v6, &mut checks)?;

    println!("==> kubectl get nodes,pods -o wide");
    print_indented(&c.kubectl(&["get", "nodes,pods", "-o", "wide"])?);

    if interrupted() {
        bail!("interrupted");
    }
    drain(c, &entry.name, &mut checks)?;
    if interrupted() {
        bail!("interrupted");
    }
    kill_node(c, &entry.name, &mut checks)?;
    Ok(checks.failed)
}

fn print_indented(text: &str) {
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

fn traffic_table(
    c: &KubeCluster,
    entry: &str,
    v4: &str,
    v6: &str,
    checks: &mut Checks,
) -> Result<()> {
    let pods = c.pods("app=web")?;
    let node_of: BTreeMap<String, String> = pods
        .iter()
        .map(|p| (p.name.clone(), p.node.clone()))
        .collect();
    let local_here = pods.iter().any(|p| p.node == entry && p.ready);
    println!("==> {REQUESTS} TCP requests per VIP and family, entering at {entry}");
    println!(
        "  {:<10} {:<5} {:<26} {:<22} {:<26} CHECK",
        "SERVICE", "FAM", "ANSWERED BY", "POD SAW SOURCE", "CLIENT SAW REPLY FROM"
    );
    let mut rows: BTreeMap<(String, String, String, String, String, bool), usize> = BTreeMap::new();
    for (svc, n) in SERVICES {
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
                        let want_src: IpAddr = if svc == "web-local" {
                            f.client_ip()
                        } else {
                            match f {
                                Family::V4 => v4.parse()?,
                                Family::V6 => v6.parse()?,
                            }
                        };
                        let ok = svc != "empty"
                            && src == want_src
                            && *peer == dst
                            && (svc != "web-local" || node == entry);
                        (
                            format!("{} ({})", reply.pod, short_node(&node)),
                            src.to_string(),
                            peer.to_string(),
                            ok,
                        )
                    }
                    (other, _) => (format!("{other:?}"), "-".into(), "-".into(), false),
                };
                // Local with no local endpoint at the entry: nothing to
                // answer with, which Local means (H2); not a failure.
                let ok = ok || (svc == "web-local" && !local_here);
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
        "  Cluster: the pod sees the entry node's address (SNAT); Local: the client's address;"
    );
    println!(
        "  every reply comes from the VIP (direct server return); `empty` answers with a reset."
    );
    Ok(())
}

fn short_node(n: &str) -> String {
    n.rsplit('-').next().unwrap_or(n).to_string()
}

/// A node other than the entry that runs web pods, and those pods.
fn node_with_web_pods(c: &KubeCluster, entry: &str) -> Result<(String, Vec<String>)> {
    let pods = c.pods("app=web")?;
    let victim = pods
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| p.node.clone())
        .find(|n| n != entry)
        .ok_or_else(|| anyhow!("no web pod off the entry node"))?;
    let names = pods
        .iter()
        .filter(|p| p.node == victim)
        .map(|p| p.name.clone())
        .collect();
    Ok((victim, names))
}

/// Drain a node other than the entry, with a client looping over the
/// `Cluster` VIP the whole time.
fn drain(c: &KubeCluster, entry: &str, checks: &mut Checks) -> Result<()> {
    let (victim, moving) = node_with_web_pods(c, entry)?;
    println!(
        "==> kubectl drain {victim} (pods {moving:?}) with a client looping over the Cluster VIP"
    );
    let traffic = Traffic::start(c.client(), vip(Family::V4, 1));
    let t = Instant::now();
    let out = c.kubectl(&[
        "drain",
        &victim,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
    ]);
    let drained = out.is_ok();
    if let Ok(o) = &out {
        print_indented(o);
    }
    let settled = c.wait_for("4 web pods Ready off the drained node", WAIT, || {
        let p = c.pods("app=web").ok()?;
        let live: Vec<&PodView> = p.iter().filter(|p| !p.deleting).collect();
        (live.len() == 4 && live.iter().all(|p| p.ready && p.node != victim)).then_some(())
    });
    let _ = wait_endpoints(c, "web", 4);
    let (ok, failed, errors) = traffic.finish();
    checks.check(
        drained,
        &format!(
            "kubectl drain finished in {:.1} s{}",
            t.elapsed().as_secs_f64(),
            out.err().map(|e| format!(": {e:#}")).unwrap_or_default()
        ),
    );
    checks.check(
        settled.is_ok(),
        "the drained node's pods replaced on other nodes, 4 Ready",
    );
    let nodes = c.nodes()?;
    checks.check(
        nodes.iter().any(|n| n.name == victim && n.unschedulable),
        &format!("{victim} cordoned (spec.unschedulable)"),
    );
    checks.check(
        failed == 0 && ok > 0,
        &format!(
            "the Cluster VIP answered {ok} requests during the drain, {failed} failed {}",
            errors.first().cloned().unwrap_or_default()
        ),
    );
    c.kubectl(&["uncordon", &victim])?;
    Ok(())
}

/// Kill a node's namespace outright (its agent with SIGKILL): the
/// controller sees the Lease expire, marks the node, evicts its pods after
/// their toleration; the Deployment replaces them, the pool the node.
fn kill_node(c: &KubeCluster, entry: &str, checks: &mut Checks) -> Result<()> {
    let (victim, lost) = node_with_web_pods(c, entry)?;
    println!(
        "==> killing node {victim} outright (namespace deleted, agent SIGKILLed; pods {lost:?})"
    );
    let t = Instant::now();
    c.kill_node(&victim).context("killing the node")?;
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
    println!("==> kubectl get nodes,pods -o wide");
    print_indented(&c.kubectl(&["get", "nodes,pods", "-o", "wide"])?);
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
