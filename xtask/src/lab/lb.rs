//! The lab's look at the load balancer: the groups the controller keeps
//! for each Service (`kubectl get l4lb,hc,neg,ig`) and what `sluice-lb`
//! counts per backend node.

use std::collections::{BTreeMap, BTreeSet};

use std::net::SocketAddr;

use anyhow::Result;
use sluice_tests::kube_cluster::{KubeCluster, NodeView};
use sluice_tests::{tcp_request, Family, TcpOutcome};

/// Connections per family for the spread.
const SPREAD_REQUESTS: usize = 20;

use super::kube::{print_indented, Checks, WAIT};

/// `sluice_lb_backend_healthy` of Service `svc`, by node.
pub(super) fn healthy(c: &KubeCluster, svc: &str) -> BTreeMap<String, f64> {
    c.lb_per_node("sluice_lb_backend_healthy", svc)
}

fn packets(c: &KubeCluster, svc: &str) -> BTreeMap<String, f64> {
    c.lb_per_node("sluice_lb_backend_packets_total", svc)
}

/// The Sluice objects of every LoadBalancer Service, and their members
/// checked against the rules. spec: N1 (a NEG per zone per internal
/// Service), N2 (4 nodes ≤ 25: every node backs a `Cluster` one), N3
/// (`Local`: only nodes with a serving pod), N4 (the external one: the
/// per-zone instance groups with every node).
pub(super) fn groups(c: &KubeCluster, nodes: &[NodeView], checks: &mut Checks) -> Result<()> {
    let all: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let zones: BTreeSet<String> = nodes.iter().map(|n| n.zone.clone()).collect();
    let members = |svc: &str| -> Option<(usize, BTreeSet<String>)> {
        let negs = c.negs(svc).ok()?;
        let m = negs.values().flatten().cloned().collect();
        Some((negs.len(), m))
    };
    let solo_node = c
        .pods("app=solo")?
        .into_iter()
        .find(|p| p.ready && !p.deleting)
        .map(|p| p.node);
    let settled = c.wait_for("the load balancers' groups", WAIT, || {
        let (web_zones, web) = members("web")?;
        let (_, solo) = members("solo")?;
        let igs = c.instance_groups().ok()?;
        let ig_members: BTreeSet<String> = igs.values().flatten().cloned().collect();
        let done = web_zones == zones.len() && web == all && solo.len() == 1 && ig_members == all;
        done.then_some(())
    });
    println!("==> kubectl get l4lb,hc,neg,ig");
    print_indented(&c.kubectl(&["get", "l4lb,hc,neg,ig"])?);
    let (web_zones, web) = members("web").unwrap_or_default();
    checks.check(
        settled.is_ok() || (web_zones == zones.len() && web == all),
        &format!(
            "web (internal, Cluster): a NEG in each of the {} zones, every node in one ({} members)",
            zones.len(),
            web.len()
        ),
    );
    let (_, solo) = members("solo").unwrap_or_default();
    checks.check(
        solo_node
            .as_ref()
            .is_some_and(|n| solo == BTreeSet::from([n.clone()])),
        &format!(
            "solo (internal, Local): its NEGs hold only its pod's node {solo_node:?}: {solo:?}"
        ),
    );
    let igs = c.instance_groups().unwrap_or_default();
    let ig_members: BTreeSet<String> = igs.values().flatten().cloned().collect();
    checks.check(
        ig_members == all,
        &format!(
            "empty (external): the shared instance groups, one per zone ({}), hold every node",
            igs.len()
        ),
    );
    Ok(())
}

/// Until the load balancer counts `n` healthy backends of `svc` and has
/// every backend's MAC (a backend without one is not in its engine yet).
pub(super) fn wait_healthy(c: &KubeCluster, svc: &str, n: usize) -> Result<()> {
    c.wait_for(&format!("{n} healthy backends of {svc}"), WAIT, || {
        let h = healthy(c, svc);
        let resolved = c
            .lb_metrics()
            .ok()?
            .lines()
            .any(|l| l == "sluice_lb_backends_unresolved 0");
        (resolved && h.values().filter(|v| **v == 1.0).count() == n).then_some(())
    })
}

/// The first answer through each VIP and family, and how long it took:
/// the first connection also resolves the neighbours on the way (client
/// to load balancer, nodes to the client).
pub(super) fn first_answers(c: &KubeCluster, vips: &[(&str, u8)]) -> Result<()> {
    let t = std::time::Instant::now();
    for (svc, n) in vips {
        for f in Family::BOTH {
            let vip = SocketAddr::new(f.vip(*n), 80);
            c.wait_for(&format!("a first answer from {svc} ({vip})"), WAIT, || {
                matches!(tcp_request(c.client(), vip), Ok(TcpOutcome::Reply { .. })).then_some(())
            })?;
        }
    }
    println!(
        "==> a first answer through every VIP and family after {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What the load balancer delivered to each node after the traffic table.
/// spec: H2 (every node passes the `Cluster` check, so every node gets new
/// connections), H3 (only the serving node passes `solo`'s).
pub(super) fn spread(c: &KubeCluster, checks: &mut Checks) -> Result<()> {
    // 20 more connections per family: with 52 in all, a node left without
    // one by chance has odds of about 1 in 10^6.
    let mut failed = 0;
    for f in Family::BOTH {
        for _ in 0..SPREAD_REQUESTS {
            if !matches!(
                tcp_request(c.client(), SocketAddr::new(f.vip(1), 80))?,
                TcpOutcome::Reply { .. }
            ) {
                failed += 1;
            }
        }
    }
    checks.check(
        failed == 0,
        &format!(
            "{} more new connections through the web VIP, {failed} failed",
            2 * SPREAD_REQUESTS
        ),
    );
    let web = packets(c, "web");
    println!("==> frames the load balancer delivered per node (sluice_lb_backend_packets_total)");
    for (svc, counts) in [("web", &web), ("solo", &packets(c, "solo"))] {
        let line: Vec<String> = counts
            .iter()
            .map(|(n, p)| format!("{}={p:.0}", short(n)))
            .collect();
        println!("    {svc:<6} {}", line.join(" "));
    }
    checks.check(
        web.len() == 4 && web.values().all(|p| *p > 0.0),
        "web's new connections spread over all 4 nodes (Maglev on the 5-tuple)",
    );
    let solo = packets(c, "solo");
    let serving: Vec<&String> = solo
        .iter()
        .filter(|(_, p)| **p > 0.0)
        .map(|(n, _)| n)
        .collect();
    checks.check(
        serving.len() == 1,
        &format!("solo's traffic went only to its pod's node: {serving:?}"),
    );
    Ok(())
}

fn short(n: &str) -> &str {
    n.rsplit('-').next().unwrap_or(n)
}
