//! The netns node provider end to end (root): a fabric namespace with a
//! bridge, the controller in a control namespace on it (198.18.0.2,
//! fd00:18::2) serving with `--node-provider netns:<file>`, and a NodePool
//! of one node in each of two zones. Its nodes are namespaces running the
//! real agent: they register, become Ready with their zone, pool and
//! version; one killed outright (agent SIGKILLed, namespace deleted) is
//! replaced; a zone dropped from the pool loses its namespace; and the
//! controller's SIGTERM removes the rest. Everything goes when the guard
//! drops, also on failure (logs are printed first).
//!
//! Needs root, `ip`, the agent binary (`cargo build -p sluice-agent`, or
//! `SLUICE_AGENT_BIN`) and kubectl (`SLUICE_KUBECTL`, default
//! /opt/sluice/kubectl-venv/bin/kubectl).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_model::k8s::jiff::{SignedDuration, Timestamp};
use sluice_tests::kube_cluster::kubectl_bin;
use sluice_tests::netns::{remove_namespaces_with_prefix, spawn_in, stop_child};
use sluice_tests::{agent_bin, Netns};

/// Every wait is bounded by this; nothing is timed.
const LIMIT: Duration = Duration::from_secs(120);

/// The lab; torn down in order when dropped: the controller (which
/// removes its nodes), then whatever it left, the namespaces, the files.
struct Lab {
    serve: Option<Child>,
    control: Netns,
    _fabric: Netns,
    dir: PathBuf,
    /// The provider's `namePrefix`.
    prefix: String,
    pool: String,
}

impl Lab {
    fn state_dir(&self) -> PathBuf {
        self.dir.join("nodes")
    }

    fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        let kc = self.dir.join("admin.kubeconfig").display().to_string();
        let cache = self.dir.join("kubectl-cache").display().to_string();
        let bin = kubectl_bin().display().to_string();
        let mut full = vec![bin.as_str(), "--kubeconfig", &kc, "--cache-dir", &cache];
        full.extend_from_slice(&["--request-timeout", "10s"]);
        full.extend_from_slice(args);
        self.control.exec(&full)
    }

    fn ok(&self, args: &[&str]) -> String {
        self.kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e:#}\n{}", self.logs()))
    }

    /// The pool's Nodes.
    fn nodes(&self) -> Vec<Value> {
        let label = format!("cloud.google.com/gke-nodepool={}", self.pool);
        self.kubectl(&["get", "nodes", "-l", &label, "-o", "json"])
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The namespaces the provider made that exist now.
    fn namespaces(&self) -> BTreeSet<String> {
        std::fs::read_dir("/run/netns")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(&self.prefix))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn logs(&self) -> String {
        let mut out = format!(
            "----- serve -----\n{}",
            std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
        );
        if let Ok(d) = std::fs::read_dir(self.state_dir()) {
            for e in d.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let tail: String = text
                        .lines()
                        .rev()
                        .take(40)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n");
                    out.push_str(&format!("\n----- {} -----\n{tail}", p.display()));
                }
            }
        }
        out
    }

    fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                start.elapsed() < LIMIT,
                "timed out after {LIMIT:?}: {what}\n{}",
                self.logs()
            );
            thread::sleep(Duration::from_millis(500));
        }
    }

    /// `serve` in the control namespace with the provider, until ready
    /// (its log appended to serve.log).
    fn spawn_serve(&mut self) {
        let ctl = env!("CARGO_BIN_EXE_sluice-controller");
        let d = |f: &str| self.dir.join(f).display().to_string();
        let provider = format!("netns:{}", d("lab.yaml"));
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.log"))
            .map_or_else(|_| Stdio::null(), Stdio::from);
        let serve = spawn_in(
            self.control.name(),
            &[
                ctl,
                "serve",
                "--bind",
                "198.18.0.2:6443",
                "--dir",
                &d(""),
                "--data-dir",
                &d("data"),
                "--node-provider",
                &provider,
            ],
            Stdio::null(),
            log,
        )
        .expect("serve");
        self.serve = Some(serve);
        self.wait_for("the server ready", || {
            self.kubectl(&["get", "--raw", "/readyz"]).ok()
        });
    }

    /// The pid of `node`'s agent, from the provider's record.
    fn agent_pid(&self, node: &str) -> i32 {
        let path = self.state_dir().join(format!("{node}.json"));
        let text = std::fs::read_to_string(&path).expect("the node's record");
        let v: Value = serde_json::from_str(&text).expect("a JSON record");
        v["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .expect("a pid")
    }

    /// When `node` was made and when its run ends, from its record.
    fn run_window(&self, node: &str) -> (Timestamp, Timestamp) {
        let path = self.state_dir().join(format!("{node}.json"));
        let text = std::fs::read_to_string(&path).expect("the node's record");
        let v: Value = serde_json::from_str(&text).expect("a JSON record");
        let at = |key: &str| -> Timestamp {
            v[key]
                .as_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("{key} in {v}"))
        };
        (at("createdAt"), at("runEndsAt"))
    }

    /// SIGTERM to the controller, and time for it to remove its nodes.
    fn stop_serve(&mut self) {
        if let Some(mut s) = self.serve.take() {
            stop_child(&mut s, LIMIT);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.stop_serve();
        // What a controller that failed to clean up left: node and pod
        // namespaces (with their agents), wire namespaces of its agents.
        remove_namespaces_with_prefix(&self.prefix);
        remove_namespaces_with_prefix(&format!("sluice-w-{}-", self.pool));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A lab whose names carry `tag` (tests run in parallel in one process),
/// with the provider's quota at `max_nodes`.
fn start(tag: &str, max_nodes: u32) -> Lab {
    let pid = std::process::id();
    let fabric = Netns::new(&format!("{tag}f")).expect("fabric namespace");
    let control = Netns::new(&format!("{tag}c")).expect("control namespace");
    let dir = std::env::temp_dir().join(format!("sluice-netns-provider-{tag}-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut lab = Lab {
        serve: None,
        control,
        _fabric: fabric,
        dir,
        prefix: format!("s{tag}{pid}-"),
        pool: format!("{tag}{pid}"),
    };
    lab._fabric.bridge("br0").expect("bridge");
    lab.control
        .veth_to("eth0", &lab._fabric, "ctl0")
        .expect("control uplink");
    lab._fabric.enslave("ctl0", "br0").expect("enslave");
    lab.control
        .addr_add("eth0", "198.18.0.2/24")
        .expect("address");
    lab.control
        .addr_add("eth0", "fd00:18::2/64")
        .expect("address");

    let ctl = env!("CARGO_BIN_EXE_sluice-controller");
    let out = Command::new(ctl)
        .args(["init", "--server", "https://198.18.0.2:6443", "--dir"])
        .arg(&lab.dir)
        .output()
        .expect("run init");
    assert!(out.status.success(), "init: {out:?}");

    let agent = agent_bin().expect("the agent binary (cargo build -p sluice-agent)");
    let config = format!(
        "fabric: {{namespace: {fabric}, bridge: br0}}
addresses: {{ipv4: 198.18.0.0/24, ipv6: 'fd00:18::/64', firstHost: 20}}
agent:
  binary: {agent}
  args: [--datapath, emulated]
server: https://198.18.0.2:6443
stateDir: {state}
namePrefix: {prefix}
maxNodes: {max_nodes}
",
        fabric = lab._fabric.name(),
        agent = agent.display(),
        state = lab.state_dir().display(),
        prefix = lab.prefix,
    );
    let cfg = lab.dir.join("lab.yaml");
    std::fs::write(&cfg, config).expect("write the provider's config");

    lab.spawn_serve();
    lab
}

/// Deletes a namespace the test made, also on failure.
struct NamespaceGuard(String);

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        remove_namespaces_with_prefix(&self.0);
    }
}

/// Apply the lab's pool, `spec` its lines under `spec:`.
fn apply_pool(lab: &Lab, spec: &str) {
    let pool = format!(
        "apiVersion: sluice.dev/v1\nkind: NodePool\nmetadata: {{name: {}}}\nspec:\n{spec}",
        lab.pool
    );
    let manifest = lab.dir.join("pool.yaml");
    std::fs::write(&manifest, pool).expect("write the pool");
    lab.ok(&["apply", "-f", &manifest.display().to_string()]);
}

fn is_ready(n: &Value) -> bool {
    n["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn name(n: &Value) -> String {
    n["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn zone(n: &Value) -> String {
    n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn netns_nodes_register_are_replaced_and_are_removed() {
    let mut lab = start("np", 6);
    apply_pool(
        &lab,
        "  locations: [zone-a, zone-b]
  initialNodeCount: 1
  version: 1.33.2
  config:
    capacity: {cpu: '2', memory: 4Gi}
    labels: {team: web}
    taints: [{key: dedicated, value: lab, effect: PREFER_NO_SCHEDULE}]
",
    );

    // Both nodes register and become Ready, one per zone, with the pool's
    // labels and version and their lab addresses.
    let first = lab.wait_for("2 Ready nodes", || {
        let ns = lab.nodes();
        (ns.len() == 2 && ns.iter().all(is_ready)).then_some(ns)
    });
    let zones: BTreeSet<String> = first.iter().map(zone).collect();
    assert_eq!(
        zones,
        BTreeSet::from(["zone-a", "zone-b"].map(String::from))
    );
    for n in &first {
        assert_eq!(n["status"]["nodeInfo"]["kubeletVersion"], "v1.33.2", "{n}");
        assert_eq!(n["status"]["capacity"]["cpu"], "2", "the pool's capacity");
        // The rest of the pool's config, as GKE puts it on its nodes.
        assert_eq!(n["status"]["capacity"]["memory"], "4194304Ki", "{n}");
        assert_eq!(n["metadata"]["labels"]["team"], "web", "{n}");
        let taints = n["spec"]["taints"].as_array().cloned().unwrap_or_default();
        assert!(
            taints.iter().any(|t| t["key"] == "dedicated"
                && t["value"] == "lab"
                && t["effect"] == "PreferNoSchedule"),
            "{n}"
        );
        let ips: Vec<&str> = n["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str())
            .collect();
        assert!(ips.iter().any(|ip| ip.starts_with("198.18.0.")), "{ips:?}");
        assert!(ips.iter().any(|ip| ip.starts_with("fd00:18::")), "{ips:?}");
    }
    let names: BTreeSet<String> = first.iter().map(name).collect();
    let want: BTreeSet<String> = names.iter().map(|n| format!("{}{n}", lab.prefix)).collect();
    assert!(
        lab.namespaces().is_superset(&want),
        "{:?}",
        lab.namespaces()
    );
    // Each node's token is in tokens.csv while it lives.
    let tokens = std::fs::read_to_string(lab.dir.join("tokens.csv")).expect("tokens.csv");
    for n in &names {
        assert!(tokens.contains(&format!("system:node:{n},")), "{tokens}");
    }

    // A node killed outright: agent SIGKILLed, namespace deleted.
    let victim = first
        .iter()
        .find(|n| zone(n) == "zone-a")
        .map(name)
        .expect("a zone-a node");
    let pid = lab.agent_pid(&victim);
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    let ns = format!("{}{victim}", lab.prefix);
    remove_namespaces_with_prefix(&ns);
    let replacement = lab.wait_for("a new Ready zone-a node", || {
        lab.nodes()
            .into_iter()
            .find(|n| zone(n) == "zone-a" && is_ready(n) && !names.contains(&name(n)))
    });
    let replacement = name(&replacement);
    lab.wait_for("the killed node's token revoked", || {
        let t = std::fs::read_to_string(lab.dir.join("tokens.csv")).ok()?;
        (!t.contains(&format!("system:node:{victim},"))).then_some(())
    });

    // zone-b leaves the pool: its node's namespace goes.
    let zone_b = first
        .iter()
        .find(|n| zone(n) == "zone-b")
        .map(name)
        .expect("a zone-b node");
    // With it go the wire namespaces of its agents that no longer run,
    // recorded or not (one killed before its record was written left its
    // own behind); one whose agent runs (another lab's node of the same
    // name) stays.
    let dead = {
        let mut c = Command::new("true").spawn().expect("spawn true");
        let _ = c.wait();
        c.id()
    };
    let stale_wire = format!("sluice-w-{zone_b}-{dead}-0");
    let live_wire = format!("sluice-w-{zone_b}-{}-0", std::process::id());
    let _live_guard = NamespaceGuard(live_wire.clone());
    for ns in [&stale_wire, &live_wire] {
        let ok = Command::new("ip").args(["netns", "add", ns]).status();
        assert!(ok.is_ok_and(|s| s.success()), "ip netns add {ns}");
    }
    lab.ok(&[
        "patch",
        "nodepool",
        &lab.pool,
        "--type=merge",
        "-p",
        r#"{"spec":{"locations":["zone-a"]}}"#,
    ]);
    let gone = format!("{}{zone_b}", lab.prefix);
    lab.wait_for("the zone-b node's namespace removed", || {
        (!lab.namespaces().contains(&gone)).then_some(())
    });
    lab.wait_for("the dead agent's wire namespace removed", || {
        (!std::path::Path::new("/run/netns")
            .join(&stale_wire)
            .exists())
        .then_some(())
    });
    assert!(
        std::path::Path::new("/run/netns").join(&live_wire).exists(),
        "a running agent's wire namespace was removed"
    );
    drop(_live_guard);
    assert!(
        lab.namespaces()
            .contains(&format!("{}{replacement}", lab.prefix)),
        "{:?}",
        lab.namespaces()
    );

    // The controller stops: its remaining node goes with it.
    lab.stop_serve();
    if std::env::var_os("SLUICE_TEST_VERBOSE").is_some() {
        eprintln!("{}", lab.logs());
    }
    assert_eq!(lab.namespaces(), BTreeSet::new(), "namespaces left");
    let wires: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("sluice-w-{}-", lab.pool)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(wires, Vec::<String>::new(), "wire namespaces left");
    assert!(
        !lab.state_dir().exists(),
        "the state directory is left: {:?}",
        std::fs::read_dir(lab.state_dir())
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    let tokens = std::fs::read_to_string(lab.dir.join("tokens.csv")).expect("tokens.csv");
    assert!(!tokens.contains("system:node:"), "{tokens}");
}

#[test]
fn the_quota_holds_creations_back_and_a_deleted_pool_takes_its_nodes() {
    let mut lab = start("nq", 1);
    apply_pool(
        &lab,
        "  locations: [zone-a, zone-b]
  initialNodeCount: 1
  config: {capacity: {cpu: '1', memory: 1Gi}}
",
    );

    // One node fits the quota; the pool says why the second is missing.
    let quota = lab.wait_for("QuotaExceeded on the pool", || {
        let p: Value = serde_json::from_str(
            &lab.kubectl(&["get", "nodepool", &lab.pool, "-o", "json"])
                .ok()?,
        )
        .ok()?;
        p["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "QuotaExceeded" && c["status"] == "True")
            .cloned()
    });
    assert!(
        quota["message"]
            .as_str()
            .is_some_and(|m| m.contains("netns nodes")),
        "{quota}"
    );
    lab.wait_for("one Ready node", || {
        let ns = lab.nodes();
        (ns.len() == 1 && ns.iter().all(is_ready)).then_some(())
    });
    assert_eq!(lab.namespaces().len(), 1, "{:?}", lab.namespaces());

    // The pool deleted outright: its node goes with it.
    lab.ok(&["delete", "nodepool", &lab.pool]);
    lab.wait_for("the deleted pool's namespace removed", || {
        lab.namespaces().is_empty().then_some(())
    });
    let tokens = std::fs::read_to_string(lab.dir.join("tokens.csv")).expect("tokens.csv");
    assert!(!tokens.contains("system:node:"), "{tokens}");
    lab.stop_serve();
    assert!(!lab.state_dir().exists(), "the state directory is left");
}

/// The lab's pool with one node in zone-a (`extra`: more of its spec, one
/// line), applied; the node's name once it is Ready.
fn one_node_pool(lab: &Lab, extra: &str) -> String {
    apply_pool(
        lab,
        &format!(
            "  locations: [zone-a]
  initialNodeCount: 1
  config: {{capacity: {{cpu: '1', memory: 1Gi}}}}
  {extra}
"
        ),
    );
    lab.wait_for("one Ready node", || {
        let ns = lab.nodes();
        (ns.len() == 1 && ns.iter().all(is_ready)).then(|| name(&ns[0]))
    })
}

#[test]
fn a_controller_killed_outright_adopts_its_running_nodes_when_restarted() {
    let mut lab = start("na", 4);
    let first = one_node_pool(&lab, "");
    let pid = lab.agent_pid(&first);

    // SIGKILL: the controller cannot clean up; its agent keeps running.
    if let Some(mut s) = lab.serve.take() {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(
        lab.namespaces().contains(&format!("{}{first}", lab.prefix)),
        "{:?}",
        lab.namespaces()
    );
    lab.spawn_serve();

    // The restarted controller adopted the node: a second one is added
    // next to it, not two new ones.
    lab.ok(&[
        "patch",
        "nodepool",
        &lab.pool,
        "--type=merge",
        "-p",
        r#"{"spec":{"initialNodeCount":2}}"#,
    ]);
    let both = lab.wait_for("2 Ready nodes", || {
        let ns = lab.nodes();
        (ns.len() == 2 && ns.iter().all(is_ready)).then_some(ns)
    });
    assert!(both.iter().any(|n| name(n) == first), "{both:?}");
    assert_eq!(lab.agent_pid(&first), pid, "the same agent");
    assert_eq!(lab.namespaces().len(), 2, "{:?}", lab.namespaces());

    // And it removes the adopted node as it stops, with its own.
    lab.stop_serve();
    assert_eq!(lab.namespaces(), BTreeSet::new(), "namespaces left");
    assert!(!lab.state_dir().exists(), "the state directory is left");
    let tokens = std::fs::read_to_string(lab.dir.join("tokens.csv")).expect("tokens.csv");
    assert!(!tokens.contains("system:node:"), "{tokens}");
}

// spec: U1, U2 — a controller killed mid-upgrade resumes from the API's
// state: the surge node its last run made is the upgrade's, kept and used,
// not deleted as a zone's surplus by a pool loop that had not yet seen the
// Operation (the upgrade scene caught one deleted while it served, with no
// drain: requests to it timed out).
#[test]
fn a_surge_node_outlives_the_controllers_restart_mid_upgrade() {
    let mut lab = start("nu", 4);
    let old = one_node_pool(&lab, "version: '1.33.2'");

    // A pod no budget lets go holds the old node's drain, so the upgrade
    // stays in the middle: surge node up, old node cordoned.
    let hold = format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: hold, namespace: default, labels: {{app: hold}}}}
spec:
  nodeName: {old}
  terminationGracePeriodSeconds: 1
  containers:
  - {{name: c, image: sleep, command: [/bin/sleep, '3600']}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: hold, namespace: default}}
spec: {{minAvailable: 1, selector: {{matchLabels: {{app: hold}}}}}}
---
apiVersion: sluice.dev/v1
kind: Operation
metadata: {{name: up-{pool}}}
spec:
  operationType: UPGRADE_NODES
  targetLink: /apis/sluice.dev/v1/nodepools/{pool}
  nodeVersion: '1.33.5'
  upgradeSettings: {{maxSurge: 1, maxUnavailable: 0}}
",
        pool = lab.pool
    );
    let manifest = lab.dir.join("hold.yaml");
    std::fs::write(&manifest, hold).expect("write the manifests");
    lab.ok(&["apply", "-f", &manifest.display().to_string()]);
    let op = format!("up-{}", lab.pool);
    let surge = lab.wait_for("the surge node Ready, the old one cordoned", || {
        let ns = lab.nodes();
        let cordoned = ns
            .iter()
            .any(|n| name(n) == old && n["spec"]["unschedulable"] == true);
        let surge = ns.iter().find(|n| name(n) != old && is_ready(n))?;
        (ns.len() == 2 && cordoned).then(|| name(surge))
    });
    let pid = lab.agent_pid(&surge);

    // kill -9 and start again, with the drain still held.
    if let Some(mut s) = lab.serve.take() {
        let _ = s.kill();
        let _ = s.wait();
    }
    lab.spawn_serve();
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        assert!(
            lab.namespaces().contains(&format!("{}{surge}", lab.prefix)),
            "the surge node {surge} was removed after the restart: {:?}\n{}",
            lab.namespaces(),
            lab.logs()
        );
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(lab.agent_pid(&surge), pid, "the same agent");
    let status = lab.ok(&["get", "operation", &op, "-o", "jsonpath={.status.status}"]);
    assert_eq!(status, "RUNNING", "the upgrade goes on");

    // The budget lifted: the old node drains and goes, the surge node
    // stays as the pool's one node, and the upgrade is done.
    lab.ok(&["delete", "pdb", "hold", "-n", "default"]);
    lab.wait_for("the upgrade done", || {
        let s = lab
            .kubectl(&["get", "operation", &op, "-o", "jsonpath={.status.status}"])
            .ok()?;
        (s == "DONE").then_some(())
    });
    let left = lab.wait_for("the old node gone", || {
        let ns = lab.nodes();
        (ns.len() == 1).then(|| name(&ns[0]))
    });
    assert_eq!(left, surge, "the surge node is the pool's node");
    assert_eq!(lab.agent_pid(&surge), pid, "never recreated");
}

// spec: A5 — a flex-start node is ended by the provider at the end of its
// run (maxRunDuration from its creation: agent stopped, namespace
// removed), not before, and replaced; the end is in its record, so a
// controller killed outright and restarted still ends an adopted node then.
#[test]
fn a_node_ends_with_its_run_and_is_replaced_even_across_a_restart() {
    let mut lab = start("nr", 4);
    apply_pool(
        &lab,
        "  locations: [zone-a]
  initialNodeCount: 1
  config: {capacity: {cpu: '1', memory: 1Gi}, flexStart: true, maxRunDuration: 40s}
",
    );
    let ready_other_than = |lab: &Lab, old: &str| {
        lab.wait_for(&format!("a Ready node other than {old:?}"), || {
            let ns = lab.nodes();
            ns.iter().find(|n| name(n) != old && is_ready(n)).map(name)
        })
    };
    let first = ready_other_than(&lab, "");
    let (made, ends) = lab.run_window(&first);
    assert_eq!(ends.duration_since(made), SignedDuration::from_secs(40));
    let prefix = lab.prefix.clone();
    let ns = |node: &str| format!("{prefix}{node}");

    // Not before its end.
    while Timestamp::now() < ends - SignedDuration::from_secs(2) {
        assert!(
            lab.namespaces().contains(&ns(&first)),
            "{first} went before its run's end {ends}\n{}",
            lab.logs()
        );
        thread::sleep(Duration::from_millis(500));
    }
    // At it: a second's check, then the agent's 10 s grace at most.
    lab.wait_for("the first node's namespace removed", || {
        (!lab.namespaces().contains(&ns(&first))).then_some(())
    });
    let late = Timestamp::now().duration_since(ends);
    assert!(
        late < SignedDuration::from_secs(20),
        "removed {late} after its end"
    );
    let second = ready_other_than(&lab, &first);

    // Killed outright and restarted: the adopted node still ends at its end.
    let (_, ends) = lab.run_window(&second);
    if let Some(mut s) = lab.serve.take() {
        let _ = s.kill();
        let _ = s.wait();
    }
    lab.spawn_serve();
    assert!(
        Timestamp::now() < ends,
        "the restart outlasted the node's run; nothing was shown"
    );
    assert!(lab.namespaces().contains(&ns(&second)), "adopted");
    lab.wait_for("the adopted node's namespace removed", || {
        (!lab.namespaces().contains(&ns(&second))).then_some(())
    });
    assert!(
        Timestamp::now() >= ends - SignedDuration::from_secs(1),
        "the adopted node went before its run's end {ends}"
    );
    lab.stop_serve();
    assert_eq!(lab.namespaces(), BTreeSet::new(), "namespaces left");
}
