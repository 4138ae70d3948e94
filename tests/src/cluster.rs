//! A cluster out of network namespaces, driven by real agents.
//!
//! ```text
//!   client ns (eth0 198.18.0.2, fd00:18::2)
//!        │ veth c0
//!   fabric ns: bridge br0 ──── n1 ── node-1 ns (nic0 198.18.0.11, fd00:18::11) ── pods 198.19.1.0/24
//!                        └──── n2 ── node-2 ns (nic0 198.18.0.12, fd00:18::12) ── pods 198.19.2.0/24
//! ```
//!
//! The client routes the VIP ranges (198.18.100.0/24, fd00:18:100::/64) via
//! one node. Pod namespaces are created empty; the agent wires them (the
//! `sluice.dev/netns` annotation). Every pod runs a who-am-I server bound to
//! its addresses. Each node runs `sluice-agent` with a state file generated
//! from the [`ClusterSpec`]; [`Cluster::update`] rewrites the files and waits
//! for every agent to apply them.

use std::collections::BTreeMap;
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::netns::{
    remove_namespaces_with_prefix, spawn_in, stop_child, Netns, Offloads, TERM_GRACE,
};
use crate::whoami::WhoAmI;

/// Where the agents' kernel engines pin maps and links: one directory per
/// node namespace below it.
pub const BPF_PIN_ROOT: &str = "/sys/fs/bpf/sluice";

/// How long an agent gets to apply a state file.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// A restarted agent reads, parses and applies its whole file again before
/// it reports a generation: `restart.rs`'s mid-change test, with 2 000
/// Services in the file, had not reported after `APPLY_TIMEOUT` (20 s) in
/// a debug build under CI's load (three test lanes and the fuzz build): it
/// was 16 s into reading the file when it started the pod (3 s on an idle
/// machine). A liveness bound, not a measurement.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// The datapath engine the agents run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Emulated,
    Kernel,
    Auto,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Emulated => "emulated",
            Engine::Kernel => "kernel",
            Engine::Auto => "auto",
        }
    }
}

/// An address family, with the lab's address plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

fn parse_ip(s: String) -> IpAddr {
    // The plan below only formats valid literals; keep a defined fallback.
    s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
}

impl Family {
    pub const BOTH: [Family; 2] = [Family::V4, Family::V6];

    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
    pub fn client_ip(self) -> IpAddr {
        match self {
            Family::V4 => parse_ip("198.18.0.2".into()),
            Family::V6 => parse_ip("fd00:18::2".into()),
        }
    }
    /// Node `i` (1-based): 198.18.0.1i, fd00:18::1i.
    pub fn node_ip(self, i: usize) -> IpAddr {
        match self {
            Family::V4 => parse_ip(format!("198.18.0.{}", 10 + i)),
            Family::V6 => parse_ip(format!("fd00:18::{}", 10 + i)),
        }
    }
    /// Node `i`'s pod CIDR.
    pub fn pod_cidr(self, i: usize) -> String {
        match self {
            Family::V4 => format!("198.19.{i}.0/24"),
            Family::V6 => format!("fd00:19:{i}::/64"),
        }
    }
    /// The `k`-th (0-based) pod of node `i`: 198.19.i.(10+k), fd00:19:i::(10+k).
    pub fn pod_ip(self, i: usize, k: usize) -> IpAddr {
        match self {
            Family::V4 => parse_ip(format!("198.19.{i}.{}", 10 + k)),
            Family::V6 => parse_ip(format!("fd00:19:{i}::{}", 10 + k)),
        }
    }
    /// VIP number `n`: 198.18.100.n, fd00:18:100::n.
    pub fn vip(self, n: u8) -> IpAddr {
        match self {
            Family::V4 => parse_ip(format!("198.18.100.{n}")),
            Family::V6 => parse_ip(format!("fd00:18:100::{n:x}")),
        }
    }
    pub fn vip_range(self) -> &'static str {
        match self {
            Family::V4 => "198.18.100.0/24",
            Family::V6 => "fd00:18:100::/64",
        }
    }
    fn plen(self) -> u8 {
        match self {
            Family::V4 => 24,
            Family::V6 => 64,
        }
    }
    fn address_type(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Cluster,
    Local,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "TCP",
            Proto::Udp => "UDP",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PodSpec {
    pub name: String,
    /// 1-based node index.
    pub node: usize,
    pub tcp_ports: Vec<u16>,
    pub udp_ports: Vec<u16>,
}

/// A pod the agent runs itself: `command` in a namespace the agent makes,
/// ready while `ready_file` exists (an exec readiness probe every second).
#[derive(Debug, Clone)]
pub struct AgentPodSpec {
    pub name: String,
    /// 1-based node index.
    pub node: usize,
    pub command: Vec<String>,
    pub ready_file: PathBuf,
    pub grace_s: u32,
    /// Further containers (`side-1`, `side-2`, ...), without probes.
    pub sidecars: Vec<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct PortSpec {
    pub name: String,
    pub port: u16,
    pub target: u16,
    pub proto: Proto,
}

#[derive(Debug, Clone)]
pub struct EndpointSpec {
    pub pod: String,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

impl EndpointSpec {
    pub fn ready(pod: &str) -> EndpointSpec {
        EndpointSpec {
            pod: pod.into(),
            ready: true,
            serving: true,
            terminating: false,
        }
    }
    /// Serving but terminating (what a pod in its grace period reports).
    pub fn terminating(pod: &str) -> EndpointSpec {
        EndpointSpec {
            pod: pod.into(),
            ready: false,
            serving: true,
            terminating: true,
        }
    }
    /// Neither ready nor serving (failing readiness).
    pub fn not_ready(pod: &str) -> EndpointSpec {
        EndpointSpec {
            pod: pod.into(),
            ready: false,
            serving: false,
            terminating: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServiceSpec {
    pub name: String,
    pub policy: Policy,
    /// VIP number, see [`Family::vip`].
    pub vip: u8,
    pub ports: Vec<PortSpec>,
    pub endpoints: Vec<EndpointSpec>,
    pub affinity_timeout_s: Option<u32>,
    /// `spec.healthCheckNodePort` (H3).
    pub health_check_node_port: Option<u16>,
}

impl ServiceSpec {
    /// A LoadBalancer Service with VIP number `vip`, policy `Cluster`.
    pub fn lb(name: &str, vip: u8) -> ServiceSpec {
        ServiceSpec {
            name: name.into(),
            policy: Policy::Cluster,
            vip,
            ports: Vec::new(),
            endpoints: Vec::new(),
            affinity_timeout_s: None,
            health_check_node_port: None,
        }
    }
    pub fn health_check_node_port(mut self, port: u16) -> Self {
        self.health_check_node_port = Some(port);
        self
    }
    pub fn policy(mut self, p: Policy) -> Self {
        self.policy = p;
        self
    }
    pub fn tcp(mut self, name: &str, port: u16, target: u16) -> Self {
        self.ports.push(PortSpec {
            name: name.into(),
            port,
            target,
            proto: Proto::Tcp,
        });
        self
    }
    pub fn udp(mut self, name: &str, port: u16, target: u16) -> Self {
        self.ports.push(PortSpec {
            name: name.into(),
            port,
            target,
            proto: Proto::Udp,
        });
        self
    }
    pub fn endpoint(mut self, e: EndpointSpec) -> Self {
        self.endpoints.push(e);
        self
    }
    pub fn affinity(mut self, timeout_s: u32) -> Self {
        self.affinity_timeout_s = Some(timeout_s);
        self
    }
    pub fn endpoint_mut(&mut self, pod: &str) -> Option<&mut EndpointSpec> {
        self.endpoints.iter_mut().find(|e| e.pod == pod)
    }
}

/// What the cluster should look like.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub nodes: usize,
    pub pods: Vec<PodSpec>,
    pub services: Vec<ServiceSpec>,
    /// The node (1-based) the client routes the VIPs through.
    pub client_via: usize,
    /// Taint keys per node (1-based), e.g. `ToBeDeletedByClusterAutoscaler`.
    pub node_taints: BTreeMap<usize, Vec<String>>,
    /// `sluice.dev/drain` per node (1-based): the reason of a drain.
    pub node_drains: BTreeMap<usize, String>,
    /// `sluice.dev/evict` per agent pod name: the reason of its eviction.
    pub pod_evictions: BTreeMap<String, String>,
    pub agent_pods: Vec<AgentPodSpec>,
    /// Flags every agent gets besides the harness's own.
    pub agent_args: Vec<String>,
    /// The client's and the nodes' links to the fabric.
    pub offloads: Offloads,
}

impl ClusterSpec {
    pub fn new(nodes: usize) -> ClusterSpec {
        ClusterSpec {
            nodes,
            pods: Vec::new(),
            services: Vec::new(),
            client_via: 1,
            node_taints: BTreeMap::new(),
            node_drains: BTreeMap::new(),
            pod_evictions: BTreeMap::new(),
            agent_pods: Vec::new(),
            agent_args: Vec::new(),
            offloads: Offloads::Off,
        }
    }
    /// The client's and the nodes' links to the fabric with `offloads`.
    pub fn offloads(mut self, offloads: Offloads) -> Self {
        self.offloads = offloads;
        self
    }
    /// Give every agent `flag` (e.g. `--snat-port-range=61000-61007`).
    pub fn agent_arg(mut self, flag: &str) -> Self {
        self.agent_args.push(flag.into());
        self
    }
    /// A pod the agent on `node` runs: `command` (given the pod's IPs as
    /// `{ip4}` / `{ip6}` placeholders), ready while `ready_file` exists.
    pub fn agent_pod(
        mut self,
        name: &str,
        node: usize,
        command: &[&str],
        ready_file: &Path,
    ) -> Self {
        self.agent_pods.push(AgentPodSpec {
            name: name.into(),
            node,
            command: command.iter().map(|s| s.to_string()).collect(),
            ready_file: ready_file.to_path_buf(),
            grace_s: 5,
            sidecars: Vec::new(),
        });
        self
    }
    /// Add a container running `command` to agent pod `name`.
    pub fn agent_pod_sidecar(mut self, name: &str, command: &[&str]) -> Self {
        for p in self.agent_pods.iter_mut().filter(|p| p.name == name) {
            p.sidecars
                .push(command.iter().map(|s| s.to_string()).collect());
        }
        self
    }
    /// Set the `terminationGracePeriodSeconds` of agent pod `name`.
    pub fn agent_pod_grace(mut self, name: &str, grace_s: u32) -> Self {
        for p in self.agent_pods.iter_mut().filter(|p| p.name == name) {
            p.grace_s = grace_s;
        }
        self
    }
    /// A pod on node `node` serving TCP 8080 and 81 and UDP 5353.
    pub fn pod(mut self, name: &str, node: usize) -> Self {
        self.pods.push(PodSpec {
            name: name.into(),
            node,
            tcp_ports: vec![8080, 81],
            udp_ports: vec![5353],
        });
        self
    }
    pub fn service(mut self, s: ServiceSpec) -> Self {
        self.services.push(s);
        self
    }
    pub fn via(mut self, node: usize) -> Self {
        self.client_via = node;
        self
    }
    pub fn service_mut(&mut self, name: &str) -> Option<&mut ServiceSpec> {
        self.services.iter_mut().find(|s| s.name == name)
    }
}

/// The agent's status file.
#[derive(Debug, Clone, Deserialize)]
pub struct AgentStatus {
    pub generation: u64,
    #[serde(default)]
    pub synced: bool,
    #[serde(default)]
    pub datapath: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// The last drain: `reason`, `cordoned`, `finished`, `totals`, `pods`
    /// (see docs/architecture.md).
    #[serde(default)]
    pub drain: Option<serde_json::Value>,
    /// Pods whose links are plugged.
    #[serde(default)]
    pub pods: usize,
    /// Packet counters by event and by verdict (`verdict_redirect`, ...).
    #[serde(default)]
    pub counters: Vec<(String, u64)>,
}

impl AgentStatus {
    /// The counter `name`, 0 when absent.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0, |(_, v)| *v)
    }
}

struct Agent {
    node: String,
    child: Child,
    /// The command line, to start it again the same way.
    argv: Vec<String>,
    /// The node namespace it runs in.
    netns: String,
    log: PathBuf,
    state: PathBuf,
    status: PathBuf,
    yaml: String,
    /// Where a kernel engine pins its maps and links (unique per node
    /// namespace, so parallel tests never share one).
    pin_dir: PathBuf,
}

/// Start `argv` in namespace `ns`, output appended to `log`.
fn spawn_agent(ns: &str, argv: &[String], log: &Path) -> Result<Child> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let err = out.try_clone()?;
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    spawn_in(ns, &argv, Stdio::from(out), Stdio::from(err))
}

/// Remove a pin directory a killed agent left (its links die with the
/// namespace's interfaces; the pins would stay on the host's bpffs).
fn remove_pins(dir: &Path) {
    if let Ok(d) = fs::read_dir(dir) {
        for e in d.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }
    let _ = fs::remove_dir(dir);
}

impl Agent {
    fn read_status(&self) -> Option<AgentStatus> {
        let text = fs::read_to_string(&self.status).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Wait until the agent reports `generation >= min`.
    fn wait_generation(&mut self, min: u64, timeout: Duration) -> Result<AgentStatus> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                bail!(
                    "agent of {} exited ({st}) before applying generation {min}; log {}:\n{}",
                    self.node,
                    self.log.display(),
                    self.log_tail(60)
                );
            }
            if let Some(s) = self.read_status() {
                if s.generation >= min {
                    return Ok(s);
                }
                last = Some(s);
            }
            if Instant::now() >= deadline {
                bail!(
                    "agent of {} did not reach generation {min} within {timeout:?} (last status {last:?}); log {}:\n{}",
                    self.node,
                    self.log.display(),
                    self.log_tail(60)
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Locate `sluice-agent`: `$SLUICE_AGENT_BIN`, else next to the running
/// executable (`target/<profile>/` or its `deps/` child).
pub fn agent_bin() -> Result<PathBuf> {
    workspace_bin("sluice-agent", "SLUICE_AGENT_BIN")
}

/// Locate `sluice-controller` as [`agent_bin`] does `sluice-agent`
/// (`$SLUICE_CONTROLLER_BIN`).
pub fn controller_bin() -> Result<PathBuf> {
    workspace_bin("sluice-controller", "SLUICE_CONTROLLER_BIN")
}

/// Locate `sluice-lb` as [`agent_bin`] does `sluice-agent`
/// (`$SLUICE_LB_BIN`).
pub fn lb_bin() -> Result<PathBuf> {
    workspace_bin("sluice-lb", "SLUICE_LB_BIN")
}

/// Locate the `sluice` CLI as [`agent_bin`] does `sluice-agent`
/// (`$SLUICE_CLI_BIN`).
pub fn sluice_cli_bin() -> Result<PathBuf> {
    workspace_bin("sluice", "SLUICE_CLI_BIN")
}

/// Locate `sluice-whoami` (this crate's binary, what pods the agents run
/// serve) as [`agent_bin`] does `sluice-agent` (`$SLUICE_WHOAMI_BIN`).
pub fn whoami_bin() -> Result<PathBuf> {
    workspace_bin("sluice-whoami", "SLUICE_WHOAMI_BIN")
}

/// A binary of this workspace: `$<env>`, else next to the running
/// executable.
fn workspace_bin(name: &str, env: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("{env}={} is not a file", p.display());
    }
    let exe = std::env::current_exe().context("current_exe")?;
    let mut dir = exe.parent();
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let cand = d.join(name);
        if cand.is_file() {
            return Ok(cand);
        }
        dir = d.parent();
    }
    bail!(
        "{name} not found next to {} (nor {env} set): run `cargo build -p {name}` first",
        exe.display()
    )
}

static CLUSTERS: AtomicU32 = AtomicU32::new(0);

/// A running cluster. Dropping it stops the agents (SIGTERM, then wait) and
/// the pods' servers, then deletes every namespace.
pub struct Cluster {
    engine: Engine,
    spec: ClusterSpec,
    dir: PathBuf,
    agents: Vec<Agent>,
    servers: Vec<WhoAmI>,
    /// Pod name → (node, index on node, namespace).
    pod_ns: BTreeMap<String, (usize, usize, Netns)>,
    /// Pods the agents run: name → (node, index on node).
    agent_pods: BTreeMap<String, (usize, usize)>,
    /// Index 0 is node 1.
    nodes: Vec<Netns>,
    client: Netns,
    fabric: Netns,
}

impl Cluster {
    /// Build the topology, start pods' servers and agents, wait until every
    /// agent applied its first state. `tag` is a short word naming the test.
    pub fn start(tag: &str, engine: Engine, spec: ClusterSpec) -> Result<Cluster> {
        Self::start_with(tag, engine, spec, None)
    }

    pub fn start_with(
        tag: &str,
        engine: Engine,
        spec: ClusterSpec,
        agent: Option<PathBuf>,
    ) -> Result<Cluster> {
        if spec.nodes == 0 || spec.nodes > 9 {
            bail!("1 to 9 nodes, not {}", spec.nodes);
        }
        if spec.client_via == 0 || spec.client_via > spec.nodes {
            bail!("client_via {} is not a node", spec.client_via);
        }
        let bin = match agent {
            Some(b) => b,
            None => agent_bin()?,
        };
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join("sluice-tests")
            .join(format!("{tag}-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

        let fabric = Netns::new(&format!("{tag}-f"))?;
        let client = Netns::new(&format!("{tag}-c"))?;
        let mut c = Cluster {
            engine,
            spec,
            dir,
            agents: Vec::new(),
            servers: Vec::new(),
            pod_ns: BTreeMap::new(),
            agent_pods: BTreeMap::new(),
            nodes: Vec::new(),
            client,
            fabric,
        };

        // Fabric and client.
        c.fabric.bridge("br0")?;
        let offloads = c.spec.offloads;
        c.client.veth_with("eth0", &c.fabric, "c0", offloads)?;
        c.fabric.enslave("c0", "br0")?;
        for f in Family::BOTH {
            c.client
                .addr_add("eth0", &format!("{}/{}", f.client_ip(), f.plen()))?;
        }

        // Nodes.
        for i in 1..=c.spec.nodes {
            let node = Netns::new(&format!("{tag}-n{i}"))?;
            let port = format!("n{i}");
            node.veth_with("nic0", &c.fabric, &port, offloads)?;
            c.fabric.enslave(&port, "br0")?;
            for f in Family::BOTH {
                node.addr_add("nic0", &format!("{}/{}", f.node_ip(i), f.plen()))?;
            }
            // Nodes are routers, as Kubernetes nodes are.
            node.sysctl("net.ipv4.ip_forward", "1")?;
            node.sysctl("net.ipv6.conf.all.forwarding", "1")?;
            c.nodes.push(node);
        }
        c.route_vips_via(c.spec.client_via)?;

        // Pods: empty namespaces plus a who-am-I server on their addresses.
        let mut per_node = vec![0usize; c.spec.nodes + 1];
        for p in c.spec.pods.clone() {
            if p.node == 0 || p.node > c.spec.nodes {
                bail!("pod {} on node {} which does not exist", p.name, p.node);
            }
            if c.pod_ns.contains_key(&p.name) {
                bail!("pod {} declared twice", p.name);
            }
            let k = per_node[p.node];
            per_node[p.node] += 1;
            let ns = Netns::new(&format!("{tag}-p{}{k}", p.node))?;
            let ips: Vec<IpAddr> = Family::BOTH.iter().map(|f| f.pod_ip(p.node, k)).collect();
            c.servers.push(WhoAmI::start(
                ns.name(),
                &p.name,
                &ips,
                &p.tcp_ports,
                &p.udp_ports,
            )?);
            c.pod_ns.insert(p.name.clone(), (p.node, k, ns));
        }
        // Pods the agents run: only addresses here, the agent does the rest.
        for p in c.spec.agent_pods.clone() {
            if p.node == 0 || p.node > c.spec.nodes {
                bail!("pod {} on node {} which does not exist", p.name, p.node);
            }
            if c.pod_ns.contains_key(&p.name) || c.agent_pods.contains_key(&p.name) {
                bail!("pod {} declared twice", p.name);
            }
            let k = per_node[p.node];
            per_node[p.node] += 1;
            c.agent_pods.insert(p.name.clone(), (p.node, k));
        }

        // Agents.
        for i in 1..=c.spec.nodes {
            let node_name = node_name(i);
            let state = c.dir.join(format!("{node_name}.yaml"));
            let status = c.dir.join(format!("{node_name}.status.json"));
            let log = c.dir.join(format!("{node_name}.log"));
            let yaml = c.manifests(i)?;
            write_atomic(&state, &yaml)?;
            let _ = fs::remove_file(&log);
            let pin_dir = Path::new(BPF_PIN_ROOT).join(c.nodes[i - 1].name());
            let mut argv: Vec<String> = vec![
                bin.display().to_string(),
                "--node-name".into(),
                node_name.clone(),
                "--state".into(),
                state.display().to_string(),
                "--nic".into(),
                "nic0".into(),
                "--datapath".into(),
                engine.as_str().into(),
                "--status-file".into(),
                status.display().to_string(),
                "--pod-log-dir".into(),
                c.dir
                    .join(format!("{node_name}-pods"))
                    .display()
                    .to_string(),
                "--bpf-pin-dir".into(),
                pin_dir.display().to_string(),
                "--pod-netns-prefix".into(),
                c.pod_netns_prefix(),
            ];
            argv.extend(c.spec.agent_args.iter().cloned());
            let netns = c.nodes[i - 1].name().to_string();
            let child = spawn_agent(&netns, &argv, &log)?;
            c.agents.push(Agent {
                node: node_name,
                child,
                argv,
                netns,
                log,
                state,
                status,
                yaml,
                pin_dir,
            });
        }
        // A starting agent loads its programs and sizes its maps first
        // (a kernel agent was 19 s from its health server to its first
        // program under the suite's load with a disk-heavy job beside
        // it): the restart's bound, a liveness bound.
        for a in &mut c.agents {
            a.wait_generation(1, RESTART_TIMEOUT)?;
        }
        Ok(c)
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    pub fn client(&self) -> &Netns {
        &self.client
    }

    /// The client namespace's name, for the who-am-I clients.
    pub fn client_ns(&self) -> &str {
        self.client.name()
    }

    /// Node `i` (1-based).
    /// Namespaces the agents make for their pods are named from this; it
    /// starts with the cluster's own unique name so a stale sweep finds them.
    pub fn pod_netns_prefix(&self) -> String {
        format!("{}-pod", self.fabric.name())
    }

    pub fn node(&self, i: usize) -> Option<&Netns> {
        i.checked_sub(1).and_then(|j| self.nodes.get(j))
    }

    pub fn pod(&self, name: &str) -> Option<&Netns> {
        self.pod_ns.get(name).map(|(_, _, ns)| ns)
    }

    pub fn pod_ip(&self, name: &str, f: Family) -> Option<IpAddr> {
        self.pod_slot(name).map(|(i, k)| f.pod_ip(i, k))
    }

    pub fn pod_node(&self, name: &str) -> Option<usize> {
        self.pod_slot(name).map(|(i, _)| i)
    }

    /// (node, index on node) of any pod, run by the test bed or an agent.
    fn pod_slot(&self, name: &str) -> Option<(usize, usize)> {
        self.pod_ns
            .get(name)
            .map(|(i, k, _)| (*i, *k))
            .or_else(|| self.agent_pods.get(name).copied())
    }

    /// `VIP:port` of Service `svc`.
    pub fn vip(&self, svc: &str, f: Family, port: u16) -> Result<SocketAddr> {
        let s = self
            .spec
            .services
            .iter()
            .find(|s| s.name == svc)
            .ok_or_else(|| anyhow!("no service {svc}"))?;
        Ok(SocketAddr::new(f.vip(s.vip), port))
    }

    /// Directory of the state files, status files and agent logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn agent_log(&self, node: usize) -> String {
        node.checked_sub(1)
            .and_then(|j| self.agents.get(j))
            .map(|a| fs::read_to_string(&a.log).unwrap_or_default())
            .unwrap_or_default()
    }

    pub fn agent_status(&self, node: usize) -> Option<AgentStatus> {
        node.checked_sub(1)
            .and_then(|j| self.agents.get(j))
            .and_then(Agent::read_status)
    }

    /// Stop node `i`'s agent (SIGTERM, then SIGKILL after the grace) and
    /// return whether it exited by itself with success.
    pub fn stop_agent(&mut self, i: usize) -> Result<bool> {
        self.stop_agent_within(i, TERM_GRACE)
    }

    /// Like [`Cluster::stop_agent`], waiting up to `grace` before SIGKILL.
    pub fn stop_agent_within(&mut self, i: usize, grace: Duration) -> Result<bool> {
        let a = i
            .checked_sub(1)
            .and_then(|j| self.agents.get_mut(j))
            .ok_or_else(|| anyhow!("no agent on node {i}"))?;
        if let Some(st) = a.child.try_wait()? {
            bail!("agent of node-{i} had already exited ({st})");
        }
        stop_child(&mut a.child, grace);
        Ok(a.child.try_wait()?.is_some_and(|st| st.success()))
    }

    /// Process id of node `i`'s agent (names of what it makes carry it).
    pub fn agent_pid(&self, i: usize) -> Option<u32> {
        i.checked_sub(1)
            .and_then(|j| self.agents.get(j))
            .map(|a| a.child.id())
    }

    /// Whether node `i`'s agent is still running; its exit status if not.
    pub fn agent_exited(&mut self, i: usize) -> Result<Option<std::process::ExitStatus>> {
        let a = i
            .checked_sub(1)
            .and_then(|j| self.agents.get_mut(j))
            .ok_or_else(|| anyhow!("no agent on node {i}"))?;
        Ok(a.child.try_wait()?)
    }

    /// `kill -9` node `i`'s agent: no shutdown runs, whatever it left in
    /// place stays (the kernel engine's pinned program keeps translating).
    pub fn kill_agent(&mut self, i: usize) -> Result<()> {
        let a = i
            .checked_sub(1)
            .and_then(|j| self.agents.get_mut(j))
            .ok_or_else(|| anyhow!("no agent on node {i}"))?;
        if let Some(st) = a.child.try_wait()? {
            bail!("agent of node-{i} had already exited ({st})");
        }
        a.child.kill().context("SIGKILL to the agent")?;
        a.child.wait().context("reaping the agent")?;
        Ok(())
    }

    /// Start node `i`'s agent again with the same command line and wait
    /// until it applied its state.
    pub fn restart_agent(&mut self, i: usize) -> Result<AgentStatus> {
        let a = i
            .checked_sub(1)
            .and_then(|j| self.agents.get_mut(j))
            .ok_or_else(|| anyhow!("no agent on node {i}"))?;
        if a.child.try_wait()?.is_none() {
            bail!("agent of node-{i} is still running");
        }
        // The old status file would satisfy the wait at once.
        let _ = fs::remove_file(&a.status);
        a.child = spawn_agent(&a.netns, &a.argv, &a.log)?;
        a.wait_generation(1, RESTART_TIMEOUT)
    }

    /// Node `i`'s agent's pin directory (kernel engine).
    pub fn pin_dir(&self, i: usize) -> Option<&Path> {
        i.checked_sub(1)
            .and_then(|j| self.agents.get(j))
            .map(|a| a.pin_dir.as_path())
    }

    /// Route the client's VIP ranges through node `i`.
    pub fn route_vips_via(&mut self, i: usize) -> Result<()> {
        if i == 0 || i > self.spec.nodes {
            bail!("no node {i}");
        }
        for f in Family::BOTH {
            self.client
                .route_via(f.vip_range(), &f.node_ip(i).to_string())?;
        }
        self.spec.client_via = i;
        Ok(())
    }

    /// Change the desired state, rewrite every node's file and wait until
    /// every agent whose file changed has applied it.
    pub fn update(&mut self, f: impl FnOnce(&mut ClusterSpec)) -> Result<()> {
        let before: Vec<String> = self.spec.pods.iter().map(|p| p.name.clone()).collect();
        f(&mut self.spec);
        let after: Vec<String> = self.spec.pods.iter().map(|p| p.name.clone()).collect();
        if before != after {
            bail!("pods cannot be added or removed after start");
        }
        let mut waits = Vec::new();
        for i in 1..=self.spec.nodes {
            let yaml = self.manifests(i)?;
            let a = &mut self.agents[i - 1];
            if a.yaml == yaml {
                continue;
            }
            let prev = a.read_status().map(|s| s.generation).unwrap_or(0);
            write_atomic(&a.state, &yaml)?;
            a.yaml = yaml;
            waits.push((i - 1, prev + 1));
        }
        for (j, min) in waits {
            self.agents[j].wait_generation(min, APPLY_TIMEOUT)?;
        }
        Ok(())
    }

    /// Write node `i`'s file without the Pods in `deleted` (see
    /// [`Cluster::manifests_without`]), atomically, as [`Cluster::update`]
    /// does; wait for the agent to apply it when one runs. `&[]` puts
    /// every pod back.
    pub fn write_without_pods(&mut self, i: usize, deleted: &[&str]) -> Result<()> {
        let yaml = self.manifests_without(i, deleted)?;
        let a = self
            .agents
            .get_mut(i.wrapping_sub(1))
            .with_context(|| format!("no node {i}"))?;
        if a.yaml == yaml {
            return Ok(());
        }
        let prev = a.read_status().map(|s| s.generation).unwrap_or(0);
        write_atomic(&a.state, &yaml)?;
        a.yaml = yaml;
        if a.child.try_wait()?.is_none() {
            a.wait_generation(prev + 1, APPLY_TIMEOUT)?;
        }
        Ok(())
    }

    /// Put `text` in node `i`'s state file as it is (`None`: remove the
    /// file), for tests of what the agent does with files it must refuse.
    /// Written in place, truncate then write, as careless tools do.
    pub fn write_state_raw(&mut self, i: usize, text: Option<&str>) -> Result<()> {
        let a = self
            .agents
            .get_mut(i.wrapping_sub(1))
            .with_context(|| format!("no node {i}"))?;
        match text {
            Some(t) => {
                fs::write(&a.state, t).with_context(|| format!("writing {}", a.state.display()))?
            }
            None => fs::remove_file(&a.state)
                .with_context(|| format!("removing {}", a.state.display()))?,
        }
        // What the file holds now. A later update() whose state equals
        // what the agent runs sees no new generation (the agent only clears
        // its error): restore with this function and wait for that instead.
        a.yaml = text.unwrap_or_default().to_string();
        Ok(())
    }

    /// Wait until node `i`'s agent reports a rejected state whose error
    /// contains `want`.
    pub fn wait_rejected(&self, i: usize, want: &str, timeout: Duration) -> Result<AgentStatus> {
        let a = self
            .agents
            .get(i.wrapping_sub(1))
            .with_context(|| format!("no node {i}"))?;
        let deadline = Instant::now() + timeout;
        let mut last = None;
        while Instant::now() < deadline {
            if let Some(st) = a.read_status() {
                if st.error.as_deref().is_some_and(|e| e.contains(want)) {
                    return Ok(st);
                }
                last = Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("agent {i} did not report {want:?} within {timeout:?}; last status {last:?}")
    }

    /// The state file of node `i`: every Node, this node's Pods, every
    /// Service and its EndpointSlices (one per family).
    pub fn manifests(&self, i: usize) -> Result<String> {
        self.manifests_without(i, &[])
    }

    /// Node `i`'s file as [`Cluster::manifests`] writes it, without the
    /// Pods named in `deleted` (as if deleted from the API; their
    /// namespaces and servers stay, and Services still name them).
    pub fn manifests_without(&self, i: usize, deleted: &[&str]) -> Result<String> {
        let mut docs: Vec<Value> = Vec::new();
        for n in 1..=self.spec.nodes {
            let taints: Vec<Value> = self
                .spec
                .node_taints
                .get(&n)
                .into_iter()
                .flatten()
                .map(|k| json!({"key": k, "effect": "NoSchedule"}))
                .collect();
            let mut annotations = serde_json::Map::new();
            if let Some(reason) = self.spec.node_drains.get(&n) {
                annotations.insert("sluice.dev/drain".into(), json!(reason));
            }
            docs.push(json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_name(n), "annotations": annotations},
                "spec": {
                    "podCIDRs": [Family::V4.pod_cidr(n), Family::V6.pod_cidr(n)],
                    "taints": taints,
                },
                "status": {"addresses": [
                    {"type": "InternalIP", "address": Family::V4.node_ip(n).to_string()},
                    {"type": "InternalIP", "address": Family::V6.node_ip(n).to_string()},
                ]},
            }));
        }
        for (name, (n, k, ns)) in &self.pod_ns {
            if *n != i || deleted.contains(&name.as_str()) {
                continue;
            }
            docs.push(json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "annotations": {"sluice.dev/netns": ns.name()},
                },
                "spec": {"nodeName": node_name(*n)},
                "status": {"podIPs": [
                    {"ip": Family::V4.pod_ip(*n, *k).to_string()},
                    {"ip": Family::V6.pod_ip(*n, *k).to_string()},
                ]},
            }));
        }
        for p in &self.spec.agent_pods {
            let Some(&(n, k)) = self.agent_pods.get(&p.name) else {
                continue;
            };
            if n != i {
                continue;
            }
            let (ip4, ip6) = (
                Family::V4.pod_ip(n, k).to_string(),
                Family::V6.pod_ip(n, k).to_string(),
            );
            let expand = |cmd: &[String]| -> Vec<String> {
                cmd.iter()
                    .map(|a| a.replace("{ip4}", &ip4).replace("{ip6}", &ip6))
                    .collect()
            };
            let command = expand(&p.command);
            let mut containers = vec![json!({
                "name": "main",
                "command": command,
                "readinessProbe": {
                    "exec": {"command": ["test", "-f", p.ready_file.display().to_string()]},
                    "periodSeconds": 1,
                    "failureThreshold": 1,
                    "successThreshold": 1,
                },
            })];
            for (j, side) in p.sidecars.iter().enumerate() {
                containers
                    .push(json!({"name": format!("side-{}", j + 1), "command": expand(side)}));
            }
            let mut annotations = serde_json::Map::new();
            if let Some(reason) = self.spec.pod_evictions.get(&p.name) {
                annotations.insert("sluice.dev/evict".into(), json!(reason));
            }
            docs.push(json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": p.name, "namespace": "default", "annotations": annotations},
                "spec": {
                    "nodeName": node_name(n),
                    "terminationGracePeriodSeconds": p.grace_s,
                    "containers": containers,
                },
                "status": {"podIPs": [{"ip": ip4}, {"ip": ip6}]},
            }));
        }
        for s in &self.spec.services {
            let ports: Vec<Value> = s
                .ports
                .iter()
                .map(|p| {
                    json!({"name": p.name, "port": p.port, "targetPort": p.target, "protocol": p.proto.as_str()})
                })
                .collect();
            let mut spec = json!({
                "type": "LoadBalancer",
                "externalTrafficPolicy": match s.policy { Policy::Cluster => "Cluster", Policy::Local => "Local" },
                "ipFamilies": ["IPv4", "IPv6"],
                "ipFamilyPolicy": "RequireDualStack",
                "ports": ports,
                "sessionAffinity": "None",
            });
            if let Some(p) = s.health_check_node_port {
                spec["healthCheckNodePort"] = json!(p);
            }
            if let Some(t) = s.affinity_timeout_s {
                spec["sessionAffinity"] = json!("ClientIP");
                spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": t}});
            }
            docs.push(json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": s.name, "namespace": "default"},
                "spec": spec,
                "status": {"loadBalancer": {"ingress": [
                    {"ip": Family::V4.vip(s.vip).to_string()},
                    {"ip": Family::V6.vip(s.vip).to_string()},
                ]}},
            }));
            for f in Family::BOTH {
                let mut eps = Vec::new();
                for e in &s.endpoints {
                    let (n, k) = self
                        .pod_slot(&e.pod)
                        .ok_or_else(|| anyhow!("service {}: no pod {}", s.name, e.pod))?;
                    eps.push(json!({
                        "addresses": [f.pod_ip(n, k).to_string()],
                        "conditions": {"ready": e.ready, "serving": e.serving, "terminating": e.terminating},
                        "nodeName": node_name(n),
                        "targetRef": {"kind": "Pod", "name": e.pod, "namespace": "default"},
                    }));
                }
                let ports: Vec<Value> = s
                    .ports
                    .iter()
                    .map(
                        |p| json!({"name": p.name, "port": p.target, "protocol": p.proto.as_str()}),
                    )
                    .collect();
                docs.push(json!({
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": format!("{}-{}", s.name, match f { Family::V4 => "v4", Family::V6 => "v6" }),
                        "namespace": "default",
                        "labels": {"kubernetes.io/service-name": s.name},
                    },
                    "addressType": f.address_type(),
                    "ports": ports,
                    "endpoints": eps,
                }));
            }
        }
        let mut out = String::new();
        for d in docs {
            out.push_str("---\n");
            out.push_str(&serde_yaml::to_string(&d).context("serialising manifests")?);
        }
        Ok(out)
    }

    fn dump_logs(&self) {
        for a in &self.agents {
            eprintln!(
                "----- agent {} ({}) -----\n{}\n----- status: {:?}",
                a.node,
                a.log.display(),
                a.log_tail(200),
                a.read_status()
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failing = thread::panicking();
        if failing {
            self.dump_logs();
        }
        // Agents first, in parallel: each restores its node before the
        // namespaces go.
        let agents = std::mem::take(&mut self.agents);
        let stoppers: Vec<_> = agents
            .into_iter()
            .map(|mut a| {
                thread::spawn(move || {
                    stop_child(&mut a.child, TERM_GRACE);
                    // An agent that had to be killed leaves its pins.
                    remove_pins(&a.pin_dir);
                })
            })
            .collect();
        for s in stoppers {
            let _ = s.join();
        }
        self.servers.clear();
        // Agents remove their pods' namespaces on SIGTERM; one killed harder
        // leaves them, and they are this cluster's to clean.
        remove_namespaces_with_prefix(&format!("{}-", self.pod_netns_prefix()));
        if failing {
            eprintln!("sluice-tests: logs kept in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
        // Fields drop next: pods, nodes, client, fabric.
    }
}

pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_plan() {
        assert_eq!(Family::V4.node_ip(1).to_string(), "198.18.0.11");
        assert_eq!(Family::V6.node_ip(2).to_string(), "fd00:18::12");
        assert_eq!(Family::V4.pod_ip(1, 0).to_string(), "198.19.1.10");
        assert_eq!(Family::V6.pod_ip(1, 0).to_string(), "fd00:19:1::10");
        assert_eq!(Family::V4.vip(1).to_string(), "198.18.100.1");
        assert_eq!(Family::V6.vip(1).to_string(), "fd00:18:100::1");
    }
}
