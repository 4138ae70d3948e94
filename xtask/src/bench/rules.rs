//! kube-proxy-style rules for the iptables and nftables baselines, at
//! the bench's Service counts.

use std::fmt::Write as _;
use std::fs;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sluice_tests::Netns;

use super::*;

// --- kube-proxy-style rules -------------------------------------------------

/// A kube-proxy-looking chain suffix for Service port `i`.
pub(super) fn chain_id(i: usize, salt: u64) -> String {
    // splitmix64: stable, well spread, like kube-proxy's hashed names.
    let mut z = (i as u64)
        .wrapping_add(salt)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..16)
        .map(|k| alphabet[((z >> (k * 4)) & 31) as usize] as char)
        .collect()
}

/// One Service port as kube-proxy sees it.
pub(super) struct SvcPort {
    pub(super) name: String,
    pub(super) cluster_ip: Ipv4Addr,
    pub(super) vip: Ipv4Addr,
    pub(super) proto: &'static str,
    pub(super) port: u16,
    pub(super) target: u16,
    pub(super) id: usize,
    /// `externalTrafficPolicy: Local`: no masquerade for outside clients.
    pub(super) local: bool,
}

/// `n - 1` generated Service ports first, then the measured Service's
/// ports last: the traffic walks past every other rule (the worst case of a
/// linear chain; with a map lookup position does not matter).
pub(super) fn service_ports(n: usize) -> Vec<SvcPort> {
    let mut v = Vec::with_capacity(n + 2);
    for i in 1..n {
        v.push(SvcPort {
            name: format!("default/filler-{i}:http"),
            cluster_ip: dummy_cluster_ip(i),
            vip: dummy_vip(i),
            proto: "tcp",
            port: CONNECT_PORT,
            target: CONNECT_TARGET,
            id: i,
            local: false,
        });
    }
    let cip: Ipv4Addr = CLUSTER_IP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
    let vip: Ipv4Addr = VIP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED);
    for (k, (pname, proto, port, target)) in [
        ("iperf", "tcp", IPERF_PORT, IPERF_PORT),
        ("iperf-udp", "udp", IPERF_PORT, IPERF_PORT),
        ("connect", "tcp", CONNECT_PORT, CONNECT_TARGET),
    ]
    .into_iter()
    .enumerate()
    {
        v.push(SvcPort {
            name: format!("default/bench:{pname}"),
            cluster_ip: cip,
            vip,
            proto,
            port,
            target,
            id: 1_000_000 + k,
            local: false,
        });
    }
    v.push(SvcPort {
        name: "default/bench-local:connect".into(),
        cluster_ip: LOCAL_CLUSTER_IP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
        vip: LOCAL_VIP.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
        proto: "tcp",
        port: CONNECT_PORT,
        target: CONNECT_TARGET,
        id: 2_000_000,
        local: true,
    });
    v
}

/// The `nat` and `filter` tables kube-proxy (iptables mode) writes for
/// these Service ports, each with one endpoint (the pod), Cluster policy.
pub(super) fn iptables_rules(n: usize) -> String {
    let ports = service_ports(n);
    let mut s = String::with_capacity(n * 1200);
    s.push_str("*filter\n:KUBE-FORWARD - [0:0]\n");
    s.push_str("-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n");
    s.push_str("-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n");
    s.push_str("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -m mark --mark 0x4000/0x4000 -j ACCEPT\n");
    s.push_str("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n");
    s.push_str("COMMIT\n*nat\n");
    s.push_str(
        ":KUBE-SERVICES - [0:0]\n:KUBE-POSTROUTING - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-NODEPORTS - [0:0]\n",
    );
    for p in &ports {
        let id = chain_id(p.id, 0);
        let _ = writeln!(
            s,
            ":KUBE-SVC-{id} - [0:0]\n:KUBE-EXT-{id} - [0:0]\n:KUBE-SEP-{} - [0:0]",
            chain_id(p.id, 1)
        );
        if p.local {
            let _ = writeln!(s, ":KUBE-SVL-{id} - [0:0]");
        }
    }
    s.push_str(
        "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n",
    );
    s.push_str("-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n");
    s.push_str("-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n");
    s.push_str("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n");
    s.push_str("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n");
    s.push_str("-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\n");
    s.push_str("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n");
    for p in &ports {
        let id = chain_id(p.id, 0);
        let sep = chain_id(p.id, 1);
        let (name, proto, port, target) = (&p.name, p.proto, p.port, p.target);
        let (cip, vip) = (p.cluster_ip, p.vip);
        let _ = write!(
            s,
            "-A KUBE-SERVICES -d {cip}/32 -p {proto} -m comment --comment \"{name} cluster IP\" -m {proto} --dport {port} -j KUBE-SVC-{id}\n\
-A KUBE-SERVICES -d {vip}/32 -p {proto} -m comment --comment \"{name} loadbalancer IP\" -m {proto} --dport {port} -j KUBE-EXT-{id}\n\
-A KUBE-SVC-{id} ! -s {POD_CIDR} -d {cip}/32 -p {proto} -m comment --comment \"{name} cluster IP\" -m {proto} --dport {port} -j KUBE-MARK-MASQ\n\
-A KUBE-SVC-{id} -m comment --comment \"{name} -> {POD_IP}:{target}\" -j KUBE-SEP-{sep}\n\
-A KUBE-SEP-{sep} -s {POD_IP}/32 -m comment --comment \"{name}\" -j KUBE-MARK-MASQ\n\
-A KUBE-SEP-{sep} -p {proto} -m comment --comment \"{name}\" -m {proto} -j DNAT --to-destination {POD_IP}:{target}\n"
        );
        if p.local {
            // externalTrafficPolicy: Local: pods and the node itself go
            // through the Service (the node masqueraded), outside clients
            // straight to the node's own endpoints with their address kept.
            let _ = write!(
                s,
                "-A KUBE-EXT-{id} -s {POD_CIDR} -m comment --comment \"pod traffic for {name} external destinations\" -j KUBE-SVC-{id}\n\
-A KUBE-EXT-{id} -m comment --comment \"masquerade LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ\n\
-A KUBE-EXT-{id} -m comment --comment \"route LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j KUBE-SVC-{id}\n\
-A KUBE-EXT-{id} -j KUBE-SVL-{id}\n\
-A KUBE-SVL-{id} -m comment --comment \"{name} -> {POD_IP}:{target}\" -j KUBE-SEP-{sep}\n"
            );
        } else {
            let _ = write!(
                s,
                "-A KUBE-EXT-{id} -m comment --comment \"masquerade traffic for {name} external destinations\" -j KUBE-MARK-MASQ\n\
-A KUBE-EXT-{id} -j KUBE-SVC-{id}\n"
            );
        }
    }
    s.push_str("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n");
    s.push_str("COMMIT\n");
    s
}

/// A kube-proxy-nftables-like ruleset: one verdict-map lookup on
/// (daddr, protocol, dport), then per-Service chains.
pub(super) fn nftables_rules(n: usize) -> String {
    let ports = service_ports(n);
    let mut s = String::with_capacity(n * 700);
    s.push_str("flush ruleset\ntable ip kube-proxy {\n");
    s.push_str(
        "  map service-ips {\n    type ipv4_addr . inet_proto . inet_service : verdict\n  }\n",
    );
    s.push_str("  chain mark-for-masquerade {\n    meta mark set meta mark or 0x4000\n  }\n");
    s.push_str("  chain masquerading {\n    meta mark & 0x4000 == 0 return\n    meta mark set meta mark xor 0x4000\n    masquerade fully-random\n  }\n");
    s.push_str(
        "  chain services {\n    ip daddr . meta l4proto . th dport vmap @service-ips\n  }\n",
    );
    s.push_str("  chain nat-prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n    jump services\n  }\n");
    s.push_str("  chain nat-output {\n    type nat hook output priority -100; policy accept;\n    jump services\n  }\n");
    s.push_str("  chain nat-postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    jump masquerading\n  }\n");
    s.push_str("  chain filter-forward {\n    type filter hook forward priority -110; policy accept;\n    ct state invalid drop\n  }\n");
    for p in &ports {
        let id = chain_id(p.id, 0);
        let (proto, port, target, cip) = (p.proto, p.port, p.target, p.cluster_ip);
        let _ = write!(
            s,
            "  chain endpoint-{id} {{\n    ip saddr {POD_IP} jump mark-for-masquerade\n    meta l4proto {proto} dnat to {POD_IP}:{target}\n  }}\n\
  chain service-{id} {{\n    ip daddr {cip} {proto} dport {port} ip saddr != {POD_CIDR} jump mark-for-masquerade\n    numgen random mod 1 vmap {{ 0 : goto endpoint-{id} }}\n  }}\n\
"
        );
        if p.local {
            // As kube-proxy's nftables mode writes Local: masquerade only
            // the node's own traffic, outside clients keep their address.
            let _ = writeln!(
                s,
                "  chain external-{id} {{\n    ip saddr {POD_CIDR} goto service-{id}\n    fib saddr type local jump mark-for-masquerade\n    fib saddr type local goto service-{id}\n    goto endpoint-{id}\n  }}"
            );
        } else {
            let _ = writeln!(
                s,
                "  chain external-{id} {{\n    jump mark-for-masquerade\n    goto service-{id}\n  }}"
            );
        }
    }
    s.push_str("}\n");
    // Map elements in batches (one huge line is slow to parse).
    for chunk in ports.chunks(500) {
        s.push_str("add element ip kube-proxy service-ips {\n");
        for p in chunk {
            let id = chain_id(p.id, 0);
            let _ = writeln!(
                s,
                "  {} . {} . {} : goto service-{id},\n  {} . {} . {} : goto external-{id},",
                p.cluster_ip, p.proto, p.port, p.vip, p.proto, p.port
            );
        }
        s.push_str("}\n");
    }
    s
}

pub(super) fn load_file(node: &Netns, tool: &str, flag: Option<&str>, text: &str) -> Result<f64> {
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}-{}.rules", std::process::id(), unique()));
    fs::write(&path, text)?;
    let p = path.display().to_string();
    let mut args = vec![tool];
    if let Some(f) = flag {
        args.push(f);
    }
    args.push(&p);
    let t = Instant::now();
    let r = run_bounded(node.name(), &args, Duration::from_secs(180));
    let secs = t.elapsed().as_secs_f64();
    let _ = fs::remove_file(&path);
    r.with_context(|| format!("loading {} lines with {tool}", text.lines().count()))?;
    Ok(secs)
}

pub(super) fn apply_iptables(node: &Netns, n: usize) -> Result<f64> {
    load_file(node, "iptables-restore", None, &iptables_rules(n))
}

pub(super) fn apply_nftables(node: &Netns, n: usize) -> Result<f64> {
    load_file(node, "nft", Some("-f"), &nftables_rules(n))
}
