//! A cluster run by `sluice-controller`, out of network namespaces: the
//! controller (embedded store, every loop on) in a control namespace on the
//! lab bridge, one node pool whose nodes the `netns` provider makes (a
//! namespace each, running a real `sluice-agent --kubeconfig` that
//! registers itself), and a client namespace.
//!
//! ```text
//!   client ns (eth0 198.18.0.2, fd00:18::2) ─┐
//!   control ns (eth0 198.18.0.3, fd00:18::3) ┼─ fabric ns: bridge br0
//!   load-balancer ns (eth0 198.18.0.4, …) ───┤   (once started)
//!   node namespaces (nic0 198.18.0.1x, ...) ─┘   (made by the provider)
//! ```
//!
//! With [`KubeCluster::start_load_balancer`], `sluice-lb` runs in its own
//! namespace and the client routes the VIP ranges through it: one-armed,
//! it hands each VIP frame to a node at L2 (the destination IP unchanged)
//! and the node answers the client directly.
//!
//! kubectl runs inside the control namespace with the admin kubeconfig.
//! Everything goes when the guard drops, also on failure: the controller
//! is stopped (it stops its agents), then every namespace with the
//! cluster's prefix is removed, then the directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::cluster::{controller_bin, Engine, Family};
use crate::netns::{remove_namespaces_with_prefix, spawn_in, stop_child, Netns};

static CLUSTERS: AtomicU32 = AtomicU32::new(0);

/// The API server's address inside the control namespace.
pub const API_V4: &str = "198.18.0.3";
const API_V6: &str = "fd00:18::3";
/// The load balancer's addresses on the bridge.
pub const LB_V4: &str = "198.18.0.4";
const LB_V6: &str = "fd00:18::4";
/// Where `sluice-lb` serves `/metrics`.
pub const LB_METRICS_PORT: u16 = 10260;
const API_PORT: u16 = 6443;

/// The kubectl the project's setup installs (`$SLUICE_KUBECTL` overrides).
pub fn kubectl_bin() -> PathBuf {
    std::env::var_os("SLUICE_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/sluice/kubectl-venv/bin/kubectl"))
}

/// What to start.
#[derive(Debug, Clone)]
pub struct KubeClusterSpec {
    /// Zones of the pool; `per_zone` nodes in each.
    pub zones: Vec<String>,
    pub per_zone: usize,
    pub engine: Engine,
    /// `--node-monitor-grace-period` in seconds: how long a silent node
    /// stays `Ready` (the lab shortens it to show a dead node in time).
    pub monitor_grace_s: u64,
    /// `--pod-gc-quarantine` in seconds: how long a Node must be gone
    /// before its pods are deleted (the lab shortens upstream's 40 s so a
    /// node killed outright has its pods replaced within seconds).
    pub pod_gc_quarantine_s: u64,
    /// The agent binary (`None`: next to the test executable).
    pub agent: Option<PathBuf>,
    /// The controller binary (`None`: next to the test executable).
    pub controller: Option<PathBuf>,
}

impl KubeClusterSpec {
    pub fn new(zones: &[&str], per_zone: usize) -> Self {
        KubeClusterSpec {
            zones: zones.iter().map(|z| z.to_string()).collect(),
            per_zone,
            engine: Engine::Emulated,
            monitor_grace_s: 40,
            pod_gc_quarantine_s: 40,
            agent: None,
            controller: None,
        }
    }
}

/// One Node as `kubectl get nodes -o json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub zone: String,
    pub ready: String,
    pub unschedulable: bool,
    pub ipv4: Option<String>,
}

/// One Pod as `kubectl get pods -o json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub node: String,
    pub phase: String,
    pub ready: bool,
    pub ips: Vec<String>,
    pub deleting: bool,
}

pub struct KubeCluster {
    pub dir: PathBuf,
    /// Namespaces the provider and the agents make start with this.
    prefix: String,
    controller: Option<Child>,
    /// How the controller was started, to start it again.
    controller_argv: Vec<String>,
    ctl: Option<Netns>,
    client: Option<Netns>,
    fabric: Option<Netns>,
    /// The test's tag, naming the namespaces made after `start`.
    tag: String,
    /// `sluice-lb` and its namespace, once started.
    lb: Option<Child>,
    lb_ns: Option<Netns>,
}

impl KubeCluster {
    /// The namespaces, the credentials, the controller, and the pool's nodes
    /// `Ready`. `tag` is a short word naming the test.
    pub fn start(tag: &str, spec: &KubeClusterSpec) -> Result<KubeCluster> {
        let agent = match &spec.agent {
            Some(a) => a.clone(),
            None => crate::cluster::agent_bin()?,
        };
        let ctl_bin = match &spec.controller {
            Some(c) => c.clone(),
            None => controller_bin()?,
        };
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let dir = std::env::temp_dir()
            .join("sluice-tests")
            .join(format!("kc-{tag}-{pid}-{n}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let fabric = Netns::new(&format!("{tag}-f"))?;
        let mut c = KubeCluster {
            dir,
            prefix: format!("sl-{tag}n-{pid}-{n}-"),
            controller: None,
            controller_argv: Vec::new(),
            ctl: None,
            client: None,
            fabric: None,
            tag: tag.to_string(),
            lb: None,
            lb_ns: None,
        };
        fabric.bridge("br0")?;
        let client = Netns::new(&format!("{tag}-c"))?;
        client.veth_to("eth0", &fabric, "c0")?;
        fabric.enslave("c0", "br0")?;
        for f in Family::BOTH {
            client.addr_add("eth0", &format!("{}/{}", f.client_ip(), plen(f)))?;
        }
        let ctl = Netns::new(&format!("{tag}-k"))?;
        ctl.veth_to("eth0", &fabric, "k0")?;
        fabric.enslave("k0", "br0")?;
        ctl.addr_add("eth0", &format!("{API_V4}/24"))?;
        ctl.addr_add("eth0", &format!("{API_V6}/64"))?;
        let fabric_name = fabric.name().to_string();
        c.fabric = Some(fabric);
        c.client = Some(client);
        c.ctl = Some(ctl);

        let server = format!("https://{API_V4}:{API_PORT}");
        let out = Command::new(&ctl_bin)
            .args(["init", "--server", &server, "--san", API_V4, "--dir"])
            .arg(&c.dir)
            .output()
            .context("running sluice-controller init")?;
        if !out.status.success() {
            bail!("init: {}", String::from_utf8_lossy(&out.stderr));
        }
        let provider = c.dir.join("netns-provider.yaml");
        fs::write(
            &provider,
            provider_config(&c, &fabric_name, &agent, &server, spec),
        )?;
        let d = |f: &str| c.dir.join(f).display().to_string();
        let owned: Vec<String> = vec![
            ctl_bin.display().to_string(),
            "serve".into(),
            "--bind".into(),
            format!("{API_V4}:{API_PORT}"),
            "--dir".into(),
            d(""),
            "--data-dir".into(),
            d("data"),
            "--service-cluster-ip-range".into(),
            "198.18.64.0/20,fd00:18:64::/112".into(),
            "--cluster-cidr".into(),
            "198.19.0.0/16,fd00:19::/48".into(),
            "--node-cidr-mask-size".into(),
            "24,64".into(),
            "--node-monitor-grace-period".into(),
            spec.monitor_grace_s.to_string(),
            "--pod-gc-quarantine".into(),
            spec.pod_gc_quarantine_s.to_string(),
            "--controllers=true".into(),
            "--node-provider".into(),
            format!("netns:{}", provider.display()),
        ];
        c.controller_argv = owned;
        c.spawn_controller()?;
        c.apply(&pool_manifest(spec))?;
        let want = spec.zones.len() * spec.per_zone;
        c.wait_for(
            &format!("{want} nodes Ready"),
            Duration::from_secs(60),
            || {
                let nodes = c.nodes().ok()?;
                (nodes.iter().filter(|n| n.ready == "True").count() >= want).then_some(())
            },
        )?;
        Ok(c)
    }

    /// Start the controller (its log appended to `controller.log`) and
    /// wait until its API answers.
    fn spawn_controller(&mut self) -> Result<()> {
        let argv: Vec<&str> = self.controller_argv.iter().map(String::as_str).collect();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("controller.log"))?;
        let ns = self.ctl()?.name().to_string();
        self.controller = Some(spawn_in(&ns, &argv, Stdio::null(), Stdio::from(log))?);
        self.wait_for("the API server ready", Duration::from_secs(30), || {
            self.kubectl(&["get", "--raw", "/readyz"]).ok()
        })?;
        Ok(())
    }

    /// Kill the controller outright (SIGKILL: it cleans nothing up, its
    /// nodes' agents keep running) and start it again on the same store
    /// and credentials, as a supervisor restarts a crashed one. Returns
    /// once the restarted API answers.
    pub fn crash_and_restart_controller(&mut self) -> Result<()> {
        if let Some(mut c) = self.controller.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn_controller()
    }

    fn ctl(&self) -> Result<&Netns> {
        self.ctl
            .as_ref()
            .ok_or_else(|| anyhow!("no control namespace"))
    }

    /// The control namespace (the API server's).
    pub fn control_namespace(&self) -> &str {
        self.ctl.as_ref().map_or("", |c| c.name())
    }

    /// The client's namespace.
    pub fn client(&self) -> &str {
        self.client.as_ref().map_or("", |c| c.name())
    }

    /// The prefix of every namespace the pool's nodes and their pods use.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// kubectl as the admin, inside the control namespace; its stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let kc = self.dir.join("admin.kubeconfig").display().to_string();
        let cache = self.dir.join("kubectl-cache").display().to_string();
        let bin = kubectl_bin().display().to_string();
        let mut full = vec![
            bin.as_str(),
            "--kubeconfig",
            &kc,
            "--cache-dir",
            &cache,
            "--request-timeout",
            "20s",
        ];
        full.extend_from_slice(args);
        self.ctl()?.exec(&full)
    }

    /// Another client of the API (the `sluice` CLI), as the admin inside
    /// the control namespace: `bin --kubeconfig <admin> ARGS`; its stdout.
    pub fn run_with_kubeconfig(&self, bin: &Path, args: &[&str]) -> Result<String> {
        let kc = self.dir.join("admin.kubeconfig").display().to_string();
        let bin = bin.display().to_string();
        let mut full = vec![bin.as_str(), "--kubeconfig", &kc];
        full.extend_from_slice(args);
        self.ctl()?.exec(&full)
    }

    /// `kubectl apply -f` of a manifest.
    pub fn apply(&self, yaml: &str) -> Result<String> {
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("apply-{n}.yaml"));
        fs::write(&path, yaml)?;
        self.kubectl(&["apply", "-f", &path.display().to_string()])
    }

    /// `kubectl get <args> -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Result<Value> {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        let out = self.kubectl(&a)?;
        serde_json::from_str(&out).context("kubectl's JSON")
    }

    pub fn nodes(&self) -> Result<Vec<NodeView>> {
        let list = self.get_json(&["nodes"])?;
        Ok(items(&list).iter().map(node_view).collect())
    }

    /// The pods of namespace `default` with label selector `selector`.
    pub fn pods(&self, selector: &str) -> Result<Vec<PodView>> {
        let list = self.get_json(&["pods", "-l", selector])?;
        Ok(items(&list).iter().map(pod_view).collect())
    }

    /// Give a LoadBalancer Service its VIPs (`status.loadBalancer`), as the
    /// load balancer in front of the nodes will once there is one.
    pub fn set_vips(&self, service: &str, vip: u8) -> Result<()> {
        let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": [
            {"ip": Family::V4.vip(vip).to_string()},
            {"ip": Family::V6.vip(vip).to_string()},
        ]}}})
        .to_string();
        self.kubectl(&[
            "patch",
            "service",
            service,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ])?;
        Ok(())
    }

    /// Node `node`'s InternalIPs: (IPv4, IPv6).
    pub fn node_addrs(&self, node: &str) -> Result<(String, String)> {
        let n = self.get_json(&["node", node])?;
        let addrs: Vec<String> = n["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str().map(str::to_owned))
            .collect();
        let v4 = addrs.iter().find(|a| a.contains('.')).cloned();
        let v6 = addrs.iter().find(|a| a.contains(':')).cloned();
        match (v4, v6) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => bail!("node {node} has no InternalIP per family: {addrs:?}"),
        }
    }

    /// Route the client's VIP ranges via this node address (per family).
    pub fn route_vips_via(&self, v4: &str, v6: &str) -> Result<()> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| anyhow!("no client namespace"))?;
        client.route_via(Family::V4.vip_range(), v4)?;
        client.route_via(Family::V6.vip_range(), v6)?;
        Ok(())
    }

    /// Start `sluice-lb` on `engine` in a namespace of its own on the
    /// bridge, reading its configuration from the API as the
    /// `system:sluice:load-balancer` identity, and route the client's VIP
    /// ranges through it: from now on the client reaches a VIP only
    /// through the load balancer. `lb` is the binary (`None`: next to the
    /// test executable).
    pub fn start_load_balancer(&mut self, engine: Engine, lb: Option<&Path>) -> Result<()> {
        let bin = match lb {
            Some(b) => b.to_path_buf(),
            None => crate::cluster::lb_bin()?,
        };
        let fabric = self
            .fabric
            .as_ref()
            .ok_or_else(|| anyhow!("no fabric namespace"))?;
        let ns = Netns::new(&format!("{}-l", self.tag))?;
        ns.veth_to("eth0", fabric, "l0")?;
        fabric.enslave("l0", "br0")?;
        ns.addr_add("eth0", &format!("{LB_V4}/24"))?;
        ns.addr_add("eth0", &format!("{LB_V6}/64"))?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("load-balancer.log"))?;
        let kubeconfig = self.dir.join("load-balancer.kubeconfig");
        let kubeconfig = kubeconfig.display().to_string();
        let bin = bin.display().to_string();
        let metrics = format!("{LB_V4}:{LB_METRICS_PORT}");
        let argv = [
            bin.as_str(),
            "--interface",
            "eth0",
            "--kubeconfig",
            &kubeconfig,
            "--engine",
            lb_engine(engine),
            "--metrics-bind-address",
            &metrics,
        ];
        let child = spawn_in(ns.name(), &argv, Stdio::null(), Stdio::from(log))?;
        self.lb = Some(child);
        self.lb_ns = Some(ns);
        self.wait_for(
            "the load balancer's /metrics",
            Duration::from_secs(30),
            || self.lb_metrics().ok(),
        )?;
        self.route_vips_via(LB_V4, LB_V6)
    }

    /// The load balancer's namespace (empty before it is started).
    pub fn load_balancer_namespace(&self) -> &str {
        self.lb_ns.as_ref().map_or("", |n| n.name())
    }

    /// The load balancer's `/metrics`, read from its own namespace.
    pub fn lb_metrics(&self) -> Result<String> {
        let ns = self
            .lb_ns
            .as_ref()
            .ok_or_else(|| anyhow!("no load balancer started"))?;
        let addr = std::net::SocketAddr::new(LB_V4.parse().context("LB_V4")?, LB_METRICS_PORT);
        let answer = crate::http_probe::http_get(ns.name(), addr, "/metrics")?;
        if answer.status != 200 {
            bail!("/metrics answered {}", answer.status);
        }
        Ok(answer.body)
    }

    /// A per-backend gauge or counter of the load balancer,
    /// `sluice_lb_<…>{service="<namespace>/<svc>",node="<node>"} <value>`,
    /// by node (empty when the load balancer does not answer).
    pub fn lb_per_node(&self, metric: &str, svc: &str) -> BTreeMap<String, f64> {
        let text = self.lb_metrics().unwrap_or_default();
        per_node(&text, metric, &format!("default/{svc}"))
    }

    /// The members of each NetworkEndpointGroup of Service `svc` (namespace
    /// `default`), by zone.
    pub fn negs(&self, svc: &str) -> Result<BTreeMap<String, BTreeSet<String>>> {
        let list = self.get_json(&["networkendpointgroups"])?;
        let mut out = BTreeMap::new();
        for neg in items(&list) {
            if neg["spec"]["service"] != svc {
                continue;
            }
            let zone = neg["spec"]["zone"]
                .as_str()
                .ok_or_else(|| anyhow!("a NEG of {svc} without spec.zone"))?
                .to_string();
            let members = neg["spec"]["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["instance"].as_str().map(str::to_owned))
                .collect();
            out.insert(zone, members);
        }
        Ok(out)
    }

    /// The instances of each InstanceGroup, by zone.
    pub fn instance_groups(&self) -> Result<BTreeMap<String, BTreeSet<String>>> {
        let list = self.get_json(&["instancegroups"])?;
        let mut out = BTreeMap::new();
        for ig in items(&list) {
            let zone = ig["spec"]["zone"]
                .as_str()
                .ok_or_else(|| anyhow!("an InstanceGroup without spec.zone"))?
                .to_string();
            let members = ig["spec"]["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["name"].as_str().map(str::to_owned))
                .collect();
            out.insert(zone, members);
        }
        Ok(out)
    }

    /// The namespace the provider made for node `node` (`<prefix><node>`;
    /// its pods' are `<prefix><node>-p-<hex>`).
    pub fn node_namespace(&self, node: &str) -> Option<String> {
        let name = format!("{}{node}", self.prefix);
        Path::new("/run/netns").join(&name).exists().then_some(name)
    }

    /// The status file node `node`'s agent writes (`--status-file`).
    pub fn agent_status(&self, node: &str) -> Result<Value> {
        let path = self
            .dir
            .join("nodes-netns")
            .join(format!("{node}.status.json"));
        let text = fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))
    }

    /// Kill a node outright: every process in its namespace and its pods'
    /// with SIGKILL, then the namespaces themselves.
    pub fn kill_node(&self, node: &str) -> Result<()> {
        let ns = self
            .node_namespace(node)
            .ok_or_else(|| anyhow!("no namespace for node {node}"))?;
        remove_namespaces_with_prefix(&ns);
        Ok(())
    }

    /// Wait up to `limit` for `f` to give a value, polling.
    pub fn wait_for<T>(
        &self,
        what: &str,
        limit: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> Result<T> {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return Ok(v);
            }
            if start.elapsed() > limit {
                bail!("timed out after {limit:?} waiting for {what}");
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// The controller's log (and the agents'), for a failure's report.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return out;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        let nodes = self.dir.join("nodes-netns");
        if let Ok(more) = fs::read_dir(&nodes) {
            files.extend(
                more.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "log")),
            );
        }
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            out.push_str(&format!("----- {} -----\n", f.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl KubeCluster {
    /// With `$SLUICE_TEST_KEEP_LOGS=DIR`, every log of the cluster (the
    /// controller's, the load balancer's, each node's) copied whole to
    /// `DIR/<the cluster's directory name>/` before it is removed: the
    /// tails printed on failure rarely reach back to the moment that
    /// matters.
    fn keep_logs(&self) {
        let Some(keep) = std::env::var_os("SLUICE_TEST_KEEP_LOGS") else {
            return;
        };
        let Some(name) = self.dir.file_name() else {
            return;
        };
        let to = PathBuf::from(keep).join(name);
        if fs::create_dir_all(&to).is_err() {
            return;
        }
        for dir in [self.dir.clone(), self.dir.join("nodes-netns")] {
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let _ = fs::copy(&p, to.join(e.file_name()));
                }
            }
        }
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.keep_logs();
        if let Some(mut lb) = self.lb.take() {
            stop_child(&mut lb, Duration::from_secs(10));
        }
        drop(self.lb_ns.take());
        // The controller stops its agents on SIGTERM, and they their pods.
        // A test's pods need no graceful end, and the who-am-I pods serve
        // on for seconds after SIGTERM: they are killed while the agents
        // wait for them, so the teardown does not wait out their linger.
        if let Some(mut c) = self.controller.take() {
            let prefix = self.prefix.clone();
            crate::netns::stop_child_while(&mut c, Duration::from_secs(15), || {
                crate::netns::kill_pods_with_prefix(&prefix)
            });
        }
        // Whatever it could not (or a SIGKILLed agent's pods) goes here.
        remove_namespaces_with_prefix(&self.prefix);
        // What killed agents leave outside the cluster's namespaces: their
        // emulated engines' private namespaces (owned by dead processes
        // now) and their kernel engines' pins and records, which an agent
        // keeps across its own restarts and a killed node never removes.
        crate::netns::sweep_stale();
        crate::netns::remove_engine_state(|dir| dir.starts_with(&self.prefix));
        drop(self.ctl.take());
        drop(self.client.take());
        drop(self.fabric.take());
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A PodDisruptionBudget `name` keeping `min_available` of the pods
/// labelled `app: <app>`.
pub fn pdb(name: &str, app: &str, min_available: u32) -> String {
    format!(
        "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}}}
spec:
  minAvailable: {min_available}
  selector: {{matchLabels: {{app: {app}}}}}
"
    )
}

/// A dual-stack LoadBalancer Service manifest: port 80 to `target` of the
/// pods with label `app: <app>` (an app no pod has: no endpoints), with
/// `externalTrafficPolicy` `policy` (`Cluster` or `Local`). External: no
/// load-balancer type annotation (P7).
pub fn lb_service(name: &str, app: &str, policy: &str, target: &str) -> String {
    service_manifest(name, "{}", app, policy, target)
}

/// [`lb_service`] for an internal load balancer
/// (`networking.gke.io/load-balancer-type: Internal`, P7).
pub fn internal_lb_service(name: &str, app: &str, policy: &str, target: &str) -> String {
    service_manifest(
        name,
        "{networking.gke.io/load-balancer-type: Internal}",
        app,
        policy,
        target,
    )
}

fn service_manifest(
    name: &str,
    annotations: &str,
    app: &str,
    policy: &str,
    target: &str,
) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, annotations: {annotations}}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: {policy}
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  selector: {{app: {app}}}
  ports: [{{name: http, port: 80, targetPort: {target}}}]
"
    )
}

/// L4 ILB subsetting on for the cluster (`Cluster` `default`), to apply
/// before any Service exists: only load balancers made after it use NEGs
/// (N5).
pub const SUBSETTING_ON: &str = "apiVersion: sluice.dev/v1
kind: Cluster
metadata: {name: default}
spec:
  networkConfig: {enableL4ilbSubsetting: true}
";

/// A Deployment of `replicas` who-am-I pods labelled `app: <name>`, port
/// 8080 named `http`, spread over zones then hosts. They keep serving 8 s
/// after SIGTERM (a `preStop` sleep's effect: longer than a `Local` health
/// check takes to turn a node away, 2 failures × 3 s) and tolerate an
/// unreachable or not-ready node for `tolerate_s` (the default is 300 s),
/// so a killed node's pods move within a test's minutes.
pub fn lingering_deployment(name: &str, replicas: usize, whoami: &Path, tolerate_s: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 12
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: {name}}}}}}}
      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: {name}}}}}}}
      tolerations:
      - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: {tolerate_s}}}
      - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: {tolerate_s}}}
      containers:
      - name: whoami
        image: sluice-whoami
        command: [{whoami}, --tcp, "8080", --serve-after-term, "8"]
        ports: [{{containerPort: 8080, name: http}}]
        resources: {{requests: {{cpu: 100m, memory: 32Mi}}}}
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1, failureThreshold: 1}}
"#,
        whoami = whoami.display(),
    )
}

/// `sluice-lb`'s `--engine` for the agents' engine choice.
fn lb_engine(engine: Engine) -> &'static str {
    match engine {
        Engine::Emulated => "emulated",
        Engine::Kernel => "kernel",
        Engine::Auto => "auto",
    }
}

fn plen(f: Family) -> u8 {
    match f {
        Family::V4 => 24,
        Family::V6 => 64,
    }
}

fn provider_config(
    c: &KubeCluster,
    fabric: &str,
    agent: &Path,
    server: &str,
    spec: &KubeClusterSpec,
) -> String {
    // The agents' Leases last as long as the controller waits for them, and
    // are renewed every quarter of that, as kubelets' are (40 s and 10 s).
    format!(
        "fabric: {{namespace: {fabric}, bridge: br0}}
addresses: {{ipv4: 198.18.0.0/24, ipv6: \"fd00:18::/64\", firstHost: 11}}
agent: {{binary: {agent}, args: [--datapath, {engine}, --node-lease-duration-seconds, \"{lease}\"]}}
server: {server}
stateDir: {dir}
namePrefix: {prefix}
",
        prefix = c.prefix,
        agent = agent.display(),
        engine = spec.engine.as_str(),
        lease = spec.monitor_grace_s,
        dir = c.dir.join("nodes-netns").display(),
    )
}

fn pool_manifest(spec: &KubeClusterSpec) -> String {
    format!(
        "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {{name: pool}}
spec:
  locations: [{zones}]
  initialNodeCount: {n}
  config: {{capacity: {{cpu: '4', memory: 8Gi}}}}
",
        zones = spec.zones.join(", "),
        n = spec.per_zone,
    )
}

/// `<metric>{…service="<service>"…,node="<node>"…} <value>` lines of a
/// Prometheus text exposition, by node.
pub fn per_node(text: &str, metric: &str, service: &str) -> BTreeMap<String, f64> {
    let want = format!("service=\"{service}\"");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let Some((labels, value)) = rest.strip_prefix('{').and_then(|r| r.split_once('}')) else {
            continue;
        };
        let mut labels = labels.split(',');
        if !labels.clone().any(|l| l == want) {
            continue;
        }
        let node = labels
            .find_map(|l| l.strip_prefix("node=\""))
            .map(|n| n.trim_end_matches('"').to_string());
        if let (Some(node), Ok(v)) = (node, value.trim().parse::<f64>()) {
            out.insert(node, v);
        }
    }
    out
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}

fn node_view(n: &Value) -> NodeView {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let ready = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| s(&c["status"]))
        .unwrap_or_default();
    let ipv4 = n["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == "InternalIP")
        .map(|a| s(&a["address"]))
        .find(|a| a.contains('.'));
    NodeView {
        name: s(&n["metadata"]["name"]),
        zone: s(&n["metadata"]["labels"]["topology.kubernetes.io/zone"]),
        ready,
        unschedulable: n["spec"]["unschedulable"].as_bool().unwrap_or(false),
        ipv4,
    }
}

fn pod_view(p: &Value) -> PodView {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let ready = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    PodView {
        name: s(&p["metadata"]["name"]),
        node: s(&p["spec"]["nodeName"]),
        phase: s(&p["status"]["phase"]),
        ready,
        ips: p["status"]["podIPs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| s(&i["ip"]))
            .collect(),
        deleting: !p["metadata"]["deletionTimestamp"].is_null(),
    }
}

#[cfg(test)]
mod tests {
    use super::per_node;

    #[test]
    fn per_node_reads_one_service_s_series() {
        let text = "# HELP x\n\
            sluice_lb_backend_healthy{service=\"default/web\",node=\"n1\"} 1\n\
            sluice_lb_backend_healthy{service=\"default/web\",node=\"n2\"} 0\n\
            sluice_lb_backend_healthy{service=\"default/webx\",node=\"n3\"} 1\n\
            sluice_lb_backend_healthy_other{service=\"default/web\",node=\"n4\"} 1\n\
            sluice_lb_backend_packets_total{service=\"default/web\",node=\"n1\"} 7\n";
        let h = per_node(text, "sluice_lb_backend_healthy", "default/web");
        assert_eq!(
            h.into_iter().collect::<Vec<_>>(),
            vec![("n1".to_string(), 1.0), ("n2".to_string(), 0.0)]
        );
    }
}
