//! The upgrade scenes, shared by `cargo xtask lab` and the CI tests
//! `controller_upgrade` and `controller_blue_green`: a node pool of a
//! cluster run by `sluice-controller` (the `netns` provider) upgraded with
//! the `sluice` CLI while clients loop over a `Cluster` and a `Local`
//! LoadBalancer Service through `sluice-lb`.
//!
//! Surge ([`Scene::run`], `surge.rs`):
//! 1. a surge upgrade to a new node version, the controller killed with
//!    SIGKILL halfway and started again (it picks the operation up from
//!    the API);
//! 2. a second upgrade cancelled halfway (the pool runs two versions, no
//!    node left cordoned or marked), then resumed to the end;
//! 3. a third rolled back after its first node (every node back on the
//!    pool's version).
//!
//! Blue-green ([`Scene::run_blue_green`], `blue_green.rs`): an upgrade
//! through every phase with short soaks, one rolled back in the drain
//! phase, one completed early during its soak.
//!
//! Autoscaled blue-green ([`Scene::run_autoscaled_blue_green`],
//! `autoscaled.rs`): the pool autoscaled, green grown from zero while blue
//! waits cordoned, then drains.
//!
//! Every phase counts the requests served and failed per Service and the
//! time per node upgraded. Checks are recorded, printed as they happen,
//! never hidden; the caller fails on any. Waits are bounded; nothing is
//! timed against a limit.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use crate::kube_cluster::{
    internal_lb_service, lingering_deployment, pdb, KubeCluster, SUBSETTING_ON,
};
use crate::{tcp_request, Engine, Family, TcpOutcome, Traffic};

mod autoscaled;
mod blue_green;
mod surge;

/// The annotations an upgrade leaves on a node while it works on it.
const UPGRADING: &str = "sluice.dev/upgrading";
const DRAIN: &str = "sluice.dev/drain";

/// The Services the clients loop over: (name, VIP number, policy).
pub const SERVICES: [(&str, u8, &str); 2] = [("web", 1, "Cluster"), ("web-local", 2, "Local")];

/// What the scene needs to know about the cluster it runs on.
pub struct Scene {
    /// The `sluice` CLI.
    pub sluice: PathBuf,
    /// The node pool upgraded, and how many nodes it has.
    pub pool: String,
    pub nodes: usize,
    /// The three versions the upgrades go to, in order.
    pub versions: [String; 3],
    /// The longest any one wait may take.
    pub wait: Duration,
}

/// One phase's figures.
#[derive(Debug, Clone)]
pub struct Figures {
    pub phase: String,
    pub nodes_upgraded: usize,
    pub seconds: f64,
    /// Per Service: (served, failed).
    pub requests: BTreeMap<String, (u64, u64)>,
    /// The `Local` Services whose losses the operation said it would
    /// cause (U5: its parallel drains take their serving pods away
    /// together): printed, not counted against the run.
    pub warned: BTreeSet<String>,
}

impl Figures {
    pub fn per_node(&self) -> Option<f64> {
        (self.nodes_upgraded > 0).then(|| self.seconds / self.nodes_upgraded as f64)
    }
}

/// The checks made and the figures measured.
#[derive(Debug, Default)]
pub struct Report {
    pub checks: Vec<(bool, String)>,
    pub figures: Vec<Figures>,
}

impl Report {
    fn check(&mut self, ok: bool, what: String) {
        println!("  {:<4} {what}", if ok { "ok" } else { "FAIL" });
        self.checks.push((ok, what));
    }

    pub fn failed(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|(ok, _)| !ok)
            .map(|(_, w)| w.as_str())
            .collect()
    }

    /// For the CI tests: the figures printed and every check holds
    /// (losses the operation foretold, U5, are printed). Panics otherwise.
    pub fn assert_all(&self) {
        self.print_traffic();
        let failed = self.failed();
        assert!(failed.is_empty(), "failed checks: {failed:#?}");
    }

    /// The figures printed; panics if no request was served at all.
    /// (served, lost), losses the operation foretold (U5) not counted.
    fn print_traffic(&self) -> (u64, u64) {
        for f in &self.figures {
            println!("{}: {:.1} s, requests {:?}", f.phase, f.seconds, f.requests);
        }
        let (served, lost) = self
            .figures
            .iter()
            .flat_map(|f| {
                f.requests.iter().map(|(svc, (ok, failed))| {
                    (*ok, if f.warned.contains(svc) { 0 } else { *failed })
                })
            })
            .fold((0, 0), |(s, l), (ok, failed)| (s + ok, l + failed));
        assert!(served > 0, "no traffic measured");
        (served, lost)
    }

    /// For the CI tests: the figures printed; every check but the
    /// traffic's holds, and at most one request in `one_in` failed (each
    /// loss printed; losses the operation foretold, U5, not counted).
    /// Panics otherwise.
    pub fn assert_with_traffic_allowance(&self, one_in: u64) {
        let (served, lost) = self.print_traffic();
        let (traffic, other): (Vec<&str>, Vec<&str>) = self
            .failed()
            .into_iter()
            .partition(|c| c.contains("requests served"));
        assert!(other.is_empty(), "failed checks: {other:#?}");
        for t in &traffic {
            println!("lost: {t}");
        }
        assert!(
            lost * one_in <= served,
            "{lost} of {served} requests failed: {traffic:#?}"
        );
    }
}

/// An operation as `kubectl get operation -o json` shows it.
#[derive(Debug, Clone, Default)]
struct OpView {
    state: String,
    upgraded: usize,
    total: usize,
    message: String,
    /// A blue-green upgrade's phase (`status.blueGreen.phase`).
    phase: String,
    /// Its drained batches.
    batches_drained: u64,
    /// What the status says holds it, every stage's lines.
    blocking: Vec<String>,
    /// `status.warnings` (U5's, among others).
    warnings: Vec<String>,
}

impl OpView {
    fn is_final(&self) -> bool {
        matches!(
            self.state.as_str(),
            "DONE" | "CANCELLED" | "ROLLED_BACK" | "FAILED"
        )
    }
}

/// A node of the pool as the scene checks it.
#[derive(Debug, Clone)]
struct NodeState {
    name: String,
    version: String,
    ready: bool,
    cordoned: bool,
    marked: bool,
    draining: bool,
}

/// The clients: one loop of new connections per Service (IPv4).
struct Loops(Vec<(String, Traffic)>);

impl Loops {
    fn start(c: &KubeCluster) -> Loops {
        Loops(
            SERVICES
                .iter()
                .map(|(svc, n, _)| {
                    let vip = SocketAddr::new(Family::V4.vip(*n), 80);
                    (svc.to_string(), Traffic::start(c.client(), vip))
                })
                .collect(),
        )
    }

    /// Per Service: (served, failed, the first errors).
    fn finish(self) -> BTreeMap<String, (u64, u64, Vec<String>)> {
        self.0
            .into_iter()
            .map(|(svc, t)| {
                let (ok, failed, errors) = t.finish();
                (svc, (ok, failed, errors))
            })
            .collect()
    }
}

/// The demo the scene runs against, for a cluster that has none yet:
/// subsetting on, a Deployment `web` of 4 pods (each serving 8 s past its
/// SIGTERM), the Services of [`SERVICES`] over it with their VIPs, a PDB
/// keeping 3 of the 4; `sluice-lb` started; every node healthy at the
/// load balancer and a first answer through each VIP.
pub fn prepare(
    c: &mut KubeCluster,
    engine: Engine,
    whoami: &Path,
    lb: Option<&Path>,
) -> Result<()> {
    c.apply(SUBSETTING_ON)?;
    let manifest = [
        lingering_deployment("web", 4, whoami, 5),
        internal_lb_service("web", "web", "Cluster", "http"),
        internal_lb_service("web-local", "web", "Local", "8080"),
        pdb("web", "web", 3),
    ]
    .join("---\n");
    c.apply(&manifest)?;
    for (svc, n, _) in SERVICES {
        c.set_vips(svc, n)?;
    }
    // A quicker check for the Cluster Service than GKE's 8 s × 3, set on
    // the Sluice object as a user would.
    c.kubectl(&[
        "patch",
        "healthcheck",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"checkIntervalSec":2,"unhealthyThreshold":2}}"#,
    ])?;
    c.start_load_balancer(engine, lb)?;
    Ok(())
}

/// The bed both CI scene tests run on: a cluster of 2 nodes in each of
/// `zones` under `engine`, the demo of [`prepare`], and the scene over its
/// pool of 4 upgraded to 1.37.1, .2, .3.
pub fn bed(tag: &str, zones: &[&str], engine: Engine) -> (KubeCluster, Scene) {
    let mut spec = crate::kube_cluster::KubeClusterSpec::new(zones, 2);
    spec.engine = engine;
    spec.monitor_grace_s = 6;
    let mut c = KubeCluster::start(tag, &spec).expect("the cluster");
    let whoami = crate::whoami_bin().expect("sluice-whoami (cargo build -p sluice-tests --bins)");
    prepare(&mut c, engine, &whoami, None).expect("the Services and the load balancer");
    let scene = Scene {
        sluice: crate::sluice_cli_bin().expect("sluice (cargo build -p sluice-cli)"),
        pool: "pool".into(),
        nodes: 4,
        versions: ["1.37.1".into(), "1.37.2".into(), "1.37.3".into()],
        wait: Duration::from_secs(120),
    };
    (c, scene)
}

impl Scene {
    /// Until the pool has its nodes, all Ready, 4 web pods Ready, every
    /// node healthy for `web` at the load balancer and each VIP answering.
    fn settle(&self, c: &KubeCluster) -> Result<()> {
        c.wait_for(
            &format!("{} Ready nodes and 4 Ready web pods", self.nodes),
            self.wait,
            || {
                let nodes = self.node_states(c).ok()?;
                let pods = c.pods("app=web").ok()?;
                let ready = pods.iter().filter(|p| p.ready && !p.deleting).count();
                (nodes.len() == self.nodes && nodes.iter().all(|n| n.ready) && ready == 4)
                    .then_some(())
            },
        )?;
        c.wait_for(
            &format!("{} nodes healthy for web at the load balancer", self.nodes),
            self.wait,
            || {
                let h = c.lb_per_node("sluice_lb_backend_healthy", "web");
                let nodes = self.node_states(c).ok()?;
                nodes
                    .iter()
                    .all(|n| h.get(&n.name) == Some(&1.0))
                    .then_some(())
            },
        )?;
        for (svc, n, _) in SERVICES {
            let vip = SocketAddr::new(Family::V4.vip(n), 80);
            c.wait_for(&format!("an answer from {svc}"), self.wait, || {
                matches!(tcp_request(c.client(), vip), Ok(TcpOutcome::Reply { .. })).then_some(())
            })?;
        }
        Ok(())
    }

    /// `sluice ARGS` as the admin, inside the control namespace.
    fn sluice(&self, c: &KubeCluster, args: &[&str]) -> Result<String> {
        c.run_with_kubeconfig(&self.sluice, args)
    }

    /// `sluice node-pools upgrade POOL --version V --async`: the
    /// operation's name.
    fn start_upgrade(&self, c: &KubeCluster, version: &str) -> Result<String> {
        self.start_with(c, version, &["--max-surge", "1", "--max-unavailable", "0"])
    }

    /// `sluice node-pools upgrade POOL --version V FLAGS --async`.
    fn start_with(&self, c: &KubeCluster, version: &str, flags: &[&str]) -> Result<String> {
        let mut args = vec!["node-pools", "upgrade", &self.pool, "--version", version];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--async", "--format", "json"]);
        let out = self.sluice(c, &args)?;
        let op: Value = serde_json::from_str(out.trim())
            .with_context(|| format!("sluice node-pools upgrade printed {out:?}"))?;
        op["metadata"]["name"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("no operation name in {op}"))
    }

    fn op(&self, c: &KubeCluster, name: &str) -> Result<OpView> {
        let op = c.get_json(&["operations", name])?;
        let status = &op["status"];
        let metric = |m: &str| -> usize {
            status["progress"]["metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["name"] == m)
                .and_then(|x| x["intValue"].as_u64())
                .unwrap_or(0) as usize
        };
        Ok(OpView {
            state: status["status"].as_str().unwrap_or("").to_owned(),
            upgraded: metric("nodes_upgraded"),
            total: metric("nodes_total"),
            message: status["statusMessage"].as_str().unwrap_or("").to_owned(),
            phase: status["blueGreen"]["phase"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            batches_drained: status["blueGreen"]["batchesDrained"].as_u64().unwrap_or(0),
            blocking: status["progress"]["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["blocking"].as_array().cloned().unwrap_or_default())
                .filter_map(|b| b.as_str().map(str::to_owned))
                .collect(),
            warnings: status["warnings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect(),
        })
    }

    fn wait_op(
        &self,
        c: &KubeCluster,
        name: &str,
        what: &str,
        until: impl Fn(&OpView) -> bool,
    ) -> Result<OpView> {
        let mut last: Option<OpView> = None;
        let r = c.wait_for(&format!("operation {name}: {what}"), self.wait, || {
            let o = self.op(c, name).ok()?;
            last = Some(o.clone());
            Some(o).filter(|o| until(o))
        });
        // A timeout says what the operation and the nodes last showed.
        r.map_err(|e| {
            let nodes = self
                .node_states(c)
                .map(|n| format!("{n:?}"))
                .unwrap_or_else(|e| format!("(nodes unreadable: {e})"));
            // An instance that never registered has no Node: the pool's
            // status lists every instance and its state.
            let instances = c
                .get_json(&["nodepool", &self.pool])
                .map(|p| p["status"]["instances"].to_string())
                .unwrap_or_else(|e| format!("(pool unreadable: {e})"));
            anyhow!("{e}; last seen: {last:?}; nodes: {nodes}; instances: {instances}")
        })
    }

    fn node_states(&self, c: &KubeCluster) -> Result<Vec<NodeState>> {
        let list = c.get_json(&["nodes"])?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let ann = |k: &str| !n["metadata"]["annotations"][k].is_null();
                let ready = n["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                NodeState {
                    name: n["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                    version: n["status"]["nodeInfo"]["kubeletVersion"]
                        .as_str()
                        .unwrap_or("")
                        .trim_start_matches('v')
                        .to_owned(),
                    ready,
                    cordoned: n["spec"]["unschedulable"] == true,
                    marked: ann(UPGRADING),
                    draining: ann(DRAIN),
                }
            })
            .collect())
    }

    fn pool_version(&self, c: &KubeCluster) -> String {
        c.get_json(&["nodepool", &self.pool])
            .ok()
            .and_then(|p| p["spec"]["version"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// Nodes by version, and the nodes left cordoned, marked or draining.
    fn versions(&self, c: &KubeCluster) -> Result<(BTreeMap<String, usize>, Vec<String>)> {
        let nodes = self.node_states(c)?;
        let mut by = BTreeMap::new();
        for n in &nodes {
            *by.entry(n.version.clone()).or_insert(0) += 1;
        }
        let left = nodes
            .iter()
            .filter(|n| n.cordoned || n.marked || n.draining)
            .map(|n| n.name.clone())
            .collect();
        Ok((by, left))
    }

    /// Wait until every node of the pool is Ready on `version` (the Nodes
    /// of deleted instances go a moment after the operation ends).
    fn all_on(&self, c: &KubeCluster, version: &str) -> Result<Vec<NodeState>> {
        c.wait_for(
            &format!("{} Ready nodes on {version}", self.nodes),
            self.wait,
            || {
                let n = self.node_states(c).ok()?;
                (n.len() == self.nodes && n.iter().all(|n| n.ready && n.version == version))
                    .then_some(n)
            },
        )
    }

    /// The traffic checks and the phase's figures.
    fn traffic(
        &self,
        report: &mut Report,
        phase: &str,
        loops: Loops,
        took: Duration,
        upgraded: usize,
    ) {
        record_traffic(report, phase, loops, took, upgraded, &BTreeSet::new(), true);
    }

    /// Nothing left cordoned, marked or draining (U6, and the kill -9 rule).
    fn clean(&self, c: &KubeCluster, report: &mut Report, when: &str) -> Result<()> {
        let (_, left) = self.versions(c)?;
        report.check(
            left.is_empty(),
            format!(
                "{when}: no node left cordoned, marked or draining{}",
                listed(&left)
            ),
        );
        Ok(())
    }

    /// A phase's start: the clients looping, the clock, the upgrade to
    /// `version` created, and the operation once it has `upgraded` nodes
    /// upgraded (or ended before).
    fn begin(
        &self,
        c: &KubeCluster,
        version: &str,
        upgraded: usize,
        what: &str,
    ) -> Result<(Loops, Instant, String, OpView)> {
        let loops = Loops::start(c);
        let t = Instant::now();
        let op = self.start_upgrade(c, version)?;
        let seen = self.wait_op(c, &op, what, |o| o.is_final() || o.upgraded >= upgraded)?;
        Ok((loops, t, op, seen))
    }
}

/// Whether the known phases in `seen` come in `order`'s order (a phase
/// `order` does not name is skipped).
fn in_order(seen: &[String], order: &[&str]) -> bool {
    seen.iter()
        .filter_map(|p| order.iter().position(|x| x == p))
        .collect::<Vec<_>>()
        .windows(2)
        .all(|w| w[0] <= w[1])
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(": {}", names.join(", "))
    }
}

/// One phase's traffic checks and figures: per Service, every request
/// served (and, with `need_served`, at least one); a `Local` Service in
/// `warned` (the operation warned, U5, that its parallel drains take that
/// Service's serving pods away together) has its losses printed as
/// foretold, not failed.
fn record_traffic(
    report: &mut Report,
    phase: &str,
    loops: Loops,
    took: Duration,
    upgraded: usize,
    warned: &BTreeSet<String>,
    need_served: bool,
) {
    let counts = loops.finish();
    let mut excused = BTreeSet::new();
    for (svc, _, policy) in SERVICES {
        let (ok, failed, errors) = counts.get(svc).cloned().unwrap_or_default();
        let foretold = failed > 0 && policy == "Local" && warned.contains(svc);
        if foretold {
            excused.insert(svc.to_owned());
        }
        let shown = if errors.is_empty() {
            String::new()
        } else {
            // The first few, and the last: when they fell says which step
            // of the upgrade they belong to.
            let mut shown: Vec<&str> = errors.iter().take(8).map(String::as_str).collect();
            if errors.len() > 8 {
                shown.push("…");
                shown.extend(errors.last().map(String::as_str));
            }
            format!(" ({})", shown.join("; "))
        };
        let why = if foretold {
            ", as the operation warned: its parallel drains take a Local Service's serving pods away together (U5)"
        } else {
            ""
        };
        report.check(
            (ok > 0 || !need_served) && (failed == 0 || foretold),
            format!("{svc} ({policy}): {ok} requests served, {failed} failed during {phase}{shown}{why}"),
        );
    }
    report.figures.push(Figures {
        phase: phase.to_owned(),
        nodes_upgraded: upgraded,
        seconds: took.as_secs_f64(),
        requests: counts
            .into_iter()
            .map(|(s, (ok, failed, _))| (s, (ok, failed)))
            .collect(),
        warned: excused,
    });
}

/// The `Local` Services of [`SERVICES`] that `warnings` (an operation's)
/// say its parallel drains break (U5).
fn warned_local(warnings: &[String]) -> BTreeSet<String> {
    SERVICES
        .iter()
        .filter(|(_, _, policy)| *policy == "Local")
        .filter(|(svc, _, _)| {
            let head = format!("Service default/{svc} has externalTrafficPolicy: Local and nodes drained in parallel");
            warnings.iter().any(|w| w.starts_with(&head))
        })
        .map(|(svc, _, _)| svc.to_string())
        .collect()
}
