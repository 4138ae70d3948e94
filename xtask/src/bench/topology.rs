//! The bench's topologies: the baselines' namespaces wired as the agent
//! wires a pod, and the Sluice test-bed cluster with its state file.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::{self};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sluice_tests::{
    Cluster, ClusterSpec, EndpointSpec, Engine, Netns, Offloads, Policy, ServiceSpec,
};

use super::*;

// --- topology for the baselines ---------------------------------------------

/// client — fabric bridge — node — pod, as the test bed and the agent build
/// them, with the links' `offloads` (see [`Offloads`]; the pod link as the
/// kernel engine leaves it: the kernel's defaults, or off with the rest).
pub(super) struct Topo {
    // Drop order: pod, node, client, fabric.
    pub(super) pod: Netns,
    pub(super) node: Netns,
    pub(super) client: Netns,
    pub(super) _fabric: Netns,
}

impl Topo {
    pub(super) fn build(offloads: Offloads) -> Result<Topo> {
        let fabric = Netns::new("bn-f")?;
        let client = Netns::new("bn-c")?;
        let node = Netns::new("bn-n1")?;
        let pod = Netns::new("bn-p10")?;
        fabric.bridge("br0")?;
        client.veth_with("eth0", &fabric, "c0", offloads)?;
        fabric.enslave("c0", "br0")?;
        client.addr_add("eth0", &format!("{CLIENT_IP}/24"))?;
        node.veth_with("nic0", &fabric, "n1", offloads)?;
        fabric.enslave("n1", "br0")?;
        node.addr_add("nic0", &format!("{NODE_IP}/24"))?;
        node.sysctl("net.ipv4.ip_forward", "1")?;
        // The pod link as the agent makes it: /32 on the pod, the gateway
        // address on the node end, a /32 route to the pod.
        match offloads {
            Offloads::Off => node.veth_to("slpbench", &pod, "eth0")?,
            Offloads::On => {
                node.ip(&[
                    "link",
                    "add",
                    "slpbench",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    pod.name(),
                ])?;
                node.link_up("slpbench")?;
                pod.link_up("eth0")?;
            }
        }
        pod.addr_add("eth0", &format!("{POD_IP}/32"))?;
        pod.ip(&["route", "replace", POD_GW, "dev", "eth0", "scope", "link"])?;
        pod.ip(&["route", "replace", "default", "via", POD_GW, "dev", "eth0"])?;
        node.addr_add("slpbench", &format!("{POD_GW}/32"))?;
        node.ip(&[
            "route",
            "replace",
            &format!("{POD_IP}/32"),
            "dev",
            "slpbench",
        ])?;
        client.route_via(POD_CIDR, NODE_IP)?;
        client.route_via(VIP_RANGE, NODE_IP)?;
        Ok(Topo {
            pod,
            node,
            client,
            _fabric: fabric,
        })
    }
}

pub(super) fn run_baseline(
    config: Config,
    plan: &Plan,
    offloads: Offloads,
    sustained: bool,
) -> Result<ConfigResult> {
    let topo = Topo::build(offloads)?;
    let mut r = ConfigResult::new(config);
    let (ip_dst, lat_dst, local_dst): (Ipv4Addr, SocketAddr, Option<SocketAddr>) = match config {
        Config::Routing => (
            POD_IP.parse()?,
            SocketAddr::new(POD_IP.parse()?, CONNECT_TARGET),
            None,
        ),
        _ => (
            VIP.parse()?,
            SocketAddr::new(VIP.parse()?, CONNECT_PORT),
            Some(SocketAddr::new(LOCAL_VIP.parse()?, CONNECT_PORT)),
        ),
    };
    let apply = |n: usize| apply_baseline(config, &topo.node, n);
    let first = plan.counts.first().copied().unwrap_or(1);
    let t_apply = apply(first)?;
    measure(
        &mut r,
        plan,
        &topo.client,
        &topo.pod,
        Dsts {
            iperf: ip_dst,
            connect: lat_dst,
            local: local_dst,
        },
        t_apply,
        apply,
        None,
        sustained,
    )?;
    Ok(r)
}

/// A baseline's rules for `n` Services in `node` (none for the ceiling);
/// seconds it took.
pub(super) fn apply_baseline(config: Config, node: &Netns, n: usize) -> Result<f64> {
    match config {
        Config::Routing => Ok(0.0),
        Config::Iptables => apply_iptables(node, n),
        Config::Nftables => apply_nftables(node, n),
        _ => bail!("not a baseline"),
    }
}

// --- Sluice -----------------------------------------------------------------

pub(super) fn sluice_spec() -> ClusterSpec {
    ClusterSpec::new(1)
        .pod("bench", 1)
        .service(
            ServiceSpec::lb("bench", 1)
                .tcp("iperf", IPERF_PORT, IPERF_PORT)
                .udp("iperf-udp", IPERF_PORT, IPERF_PORT)
                .tcp("connect", CONNECT_PORT, CONNECT_TARGET)
                .endpoint(EndpointSpec::ready("bench")),
        )
        // LOCAL_VIP: Family::V4.vip(2).
        .service(
            ServiceSpec::lb("bench-local", 2)
                .policy(Policy::Local)
                .tcp("connect", CONNECT_PORT, CONNECT_TARGET)
                .endpoint(EndpointSpec::ready("bench")),
        )
}

pub(super) fn run_sluice(
    engine: Engine,
    config: Config,
    plan: &Plan,
    agent: Option<&Path>,
    offloads: Offloads,
    sustained: bool,
) -> Result<ConfigResult> {
    let cluster = start_sluice(engine, agent, offloads)?;
    let pod = cluster
        .pod("bench")
        .ok_or_else(|| anyhow!("no pod namespace"))?;
    let client = cluster.client();
    let base_yaml = cluster.manifests(1)?;
    let state = cluster.dir().join("node-1.yaml");
    let mut r = ConfigResult::new(config);
    let vip: Ipv4Addr = VIP.parse()?;
    let first = plan.counts.first().copied().unwrap_or(1);
    let t_apply = apply_sluice(&cluster, &state, &base_yaml, first)?;
    measure(
        &mut r,
        plan,
        client,
        pod,
        Dsts {
            iperf: vip,
            connect: SocketAddr::new(vip.into(), CONNECT_PORT),
            local: Some(SocketAddr::new(
                LOCAL_VIP.parse::<Ipv4Addr>()?.into(),
                CONNECT_PORT,
            )),
        },
        t_apply,
        |n| apply_sluice(&cluster, &state, &base_yaml, n),
        Some(SLUICE_CT_COOLDOWN),
        sustained,
    )?;
    drop(cluster);
    Ok(r)
}

/// The bench's one-node Sluice bed running `engine`, checked to run that
/// datapath, its pod link's offloads as the baselines'.
pub(super) fn start_sluice(
    engine: Engine,
    agent: Option<&Path>,
    offloads: Offloads,
) -> Result<Cluster> {
    let agent = agent.ok_or_else(|| anyhow!("no agent binary"))?;
    if engine == Engine::Kernel {
        // The object the agent loads (found next to target/release).
        build_ebpf()?;
    }
    let spec = sluice_spec().offloads(offloads);
    let cluster = match Cluster::start_with("bn", engine, spec, Some(agent.to_path_buf())) {
        Ok(c) => c,
        Err(e) => bail!("{}", agent_failure(&e)),
    };
    if let Some(dp) = cluster.agent_status(1).and_then(|s| s.datapath) {
        println!("    agent datapath: {dp}");
        if dp != engine.as_str() {
            bail!("the agent runs the {dp} datapath, not {}", engine.as_str());
        }
    }
    if offloads == Offloads::Off {
        // The kernel engine leaves a pod's link at the kernel's defaults:
        // off here as on the baselines' pod link.
        cluster
            .pod("bench")
            .ok_or_else(|| anyhow!("no pod namespace"))?
            .disable_offloads("eth0")?;
    }
    Ok(cluster)
}

/// `cargo xtask build-ebpf --release` (this same binary), its output kept
/// in a file; on failure, the compiler's reason in one line.
pub(crate) fn build_ebpf() -> Result<()> {
    println!("    cargo xtask build-ebpf --release");
    let exe = std::env::current_exe().context("current_exe")?;
    let dir = std::env::temp_dir().join("sluice-bench");
    fs::create_dir_all(&dir)?;
    let log = dir.join(format!("{}-build-ebpf.log", std::process::id()));
    let out = fs::File::create(&log)?;
    let status = Command::new(exe)
        .args(["build-ebpf", "--release"])
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .status()
        .context("running xtask build-ebpf")?;
    let text = fs::read_to_string(&log).unwrap_or_default();
    let _ = fs::remove_file(&log);
    if status.success() {
        return Ok(());
    }
    let why = if text.contains("BPF stack limit is exceeded") {
        "LLVM: the BPF stack limit (512 B) is exceeded in sluice_datapath::process".to_string()
    } else {
        text.lines()
            .map(|l| strip_ansi(l).trim().to_string())
            .rfind(|l| l.starts_with("error") || l.starts_with("Error"))
            .unwrap_or_else(|| format!("exit {status}"))
    };
    bail!("the eBPF object does not build ({why})")
}

/// The agent's own words for why it did not start, in one line.
pub(super) fn agent_failure(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    // The log tail may end in a backtrace (RUST_BACKTRACE): skip frames.
    let lines: Vec<String> = text
        .lines()
        .map(|l| strip_ansi(l).trim().to_string())
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !l.starts_with("Stack backtrace")
                && l.split_once(':')
                    .is_none_or(|(n, _)| n.parse::<u32>().is_err())
        })
        .collect();
    let pick = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Error:"))
        .map(|l| l.trim_start_matches("Error:").trim().to_string())
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| {
                    let l = l.to_ascii_lowercase();
                    l.contains("error") || l.contains("not available") || l.contains("failed")
                })
                .cloned()
        })
        .unwrap_or_else(|| lines.first().cloned().unwrap_or_default());
    truncate(&pick, 200)
}

pub(super) fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for ch in s.chars() {
        if esc {
            if ch.is_ascii_alphabetic() {
                esc = false;
            }
        } else if ch == '\u{1b}' {
            esc = true;
        } else {
            out.push(ch);
        }
    }
    out
}

/// Rewrite node-1's state file with `n - 1` generated Services on top of the
/// measured one and wait until the agent applied it; seconds it took.
pub(super) fn apply_sluice(cluster: &Cluster, state: &Path, base: &str, n: usize) -> Result<f64> {
    let mut yaml = String::with_capacity(base.len() + n * 900);
    yaml.push_str(base);
    for i in 1..n {
        let vip = dummy_vip(i);
        // Line by line: a `\` continuation would eat the YAML indentation.
        let doc = [
            "---".to_string(),
            "apiVersion: v1".into(),
            "kind: Service".into(),
            "metadata:".into(),
            format!("  name: filler-{i}"),
            "  namespace: default".into(),
            "spec:".into(),
            "  type: LoadBalancer".into(),
            "  externalTrafficPolicy: Cluster".into(),
            "  ipFamilies: [IPv4]".into(),
            "  ipFamilyPolicy: SingleStack".into(),
            "  ports:".into(),
            "  - name: http".into(),
            format!("    port: {CONNECT_PORT}"),
            format!("    targetPort: {CONNECT_TARGET}"),
            "    protocol: TCP".into(),
            "status:".into(),
            "  loadBalancer:".into(),
            "    ingress:".into(),
            format!("    - ip: {vip}"),
            "---".into(),
            "apiVersion: discovery.k8s.io/v1".into(),
            "kind: EndpointSlice".into(),
            "metadata:".into(),
            format!("  name: filler-{i}-v4"),
            "  namespace: default".into(),
            "  labels:".into(),
            format!("    kubernetes.io/service-name: filler-{i}"),
            "addressType: IPv4".into(),
            "ports:".into(),
            "- name: http".into(),
            format!("  port: {CONNECT_TARGET}"),
            "  protocol: TCP".into(),
            "endpoints:".into(),
            format!("- addresses: [\"{POD_IP}\"]"),
            "  conditions: {ready: true, serving: true, terminating: false}".into(),
            "  nodeName: node-1".into(),
            "  targetRef: {kind: Pod, name: bench, namespace: default}".into(),
        ];
        for l in doc {
            yaml.push_str(&l);
            yaml.push('\n');
        }
    }
    let before = cluster.agent_status(1);
    let prev = before.as_ref().map(|s| s.generation).unwrap_or(0);
    let prev_err = before.and_then(|s| s.error);
    let t = Instant::now();
    let tmp = state.with_extension("bench.tmp");
    fs::write(&tmp, &yaml).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, state).with_context(|| format!("renaming to {}", state.display()))?;
    if n == 1 && yaml == base && prev >= 1 {
        // Unchanged file: nothing to wait for.
        return Ok(0.0);
    }
    let deadline = t + Duration::from_secs(120);
    loop {
        check_interrupted()?;
        if let Some(s) = cluster.agent_status(1) {
            if s.generation > prev {
                return Ok(t.elapsed().as_secs_f64());
            }
            if let Some(e) = s.error.filter(|e| Some(e) != prev_err.as_ref()) {
                bail!("agent rejected {n} Services: {e}");
            }
        }
        if Instant::now() > deadline {
            bail!("agent did not apply {n} Services within 120 s");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// VIP of generated Service `i` (1-based): 198.18.128.0/17.
pub(super) fn dummy_vip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 128, 0)) + i as u32)
}

/// ClusterIP of generated Service `i`: 198.19.128.0/17.
pub(super) fn dummy_cluster_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 128, 0)) + i as u32)
}
