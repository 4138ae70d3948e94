//! The agent binary with `--kubeconfig` instead of a state file, end to
//! end: a node namespace (uplink `nic0`, 198.18.0.11, a veth to a second
//! namespace) runs `sluice-controller serve` on its loopback and
//! `sluice-agent --kubeconfig <the node's kubeconfig>` on the emulated
//! engine. The agent registers its Node (labels, capacity, `Ready`, the
//! uplink's address as InternalIP, no `--node-ip` given), renews its Lease,
//! and applies the Service and EndpointSlice an admin writes (its status
//! file counts them, synced). Everything goes when the guard drops, also on
//! failure (logs are printed first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::netns::remove_namespaces_with_prefix;
use sluice_tests::{agent_bin, controller_bin, Netns};

/// Every wait is bounded by this; nothing is timed.
const LIMIT: Duration = Duration::from_secs(60);

fn kubectl_bin() -> PathBuf {
    std::env::var_os("SLUICE_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/sluice/kubectl-venv/bin/kubectl"))
}

/// The namespaces, the processes in them and the files; torn down in
/// that order when dropped.
struct Bed {
    node: Option<Netns>,
    _fabric: Netns,
    dir: PathBuf,
    name: String,
    pod_prefix: String,
}

impl Bed {
    fn kubeconfig(&self, who: &str) -> PathBuf {
        match who {
            "admin" => self.dir.join("admin.kubeconfig"),
            node => self.dir.join("nodes").join(format!("{node}.kubeconfig")),
        }
    }

    fn node(&self) -> &Netns {
        self.node
            .as_ref()
            .expect("the node namespace lives as long as the bed")
    }

    /// kubectl as `who` inside the node namespace; its stdout.
    fn kubectl(&self, who: &str, args: &[&str]) -> anyhow::Result<String> {
        let kc = self.kubeconfig(who).display().to_string();
        let cache = self.dir.join("kubectl-cache").display().to_string();
        let bin = kubectl_bin().display().to_string();
        let mut full = vec![bin.as_str(), "--kubeconfig", &kc, "--cache-dir", &cache];
        full.extend_from_slice(&["--request-timeout", "10s"]);
        full.extend_from_slice(args);
        self.node().exec(&full)
    }

    fn get_json(&self, args: &[&str]) -> Option<Value> {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.kubectl("admin", &a).ok()?).ok()
    }

    fn status(&self) -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join("status.json")).ok()?).ok()
    }

    fn logs(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!(
            "----- agent -----\n{}\n----- serve -----\n{}",
            read("agent.log"),
            read("serve.log")
        )
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
            thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("{}", self.logs());
        }
        // SIGTERM to the agent and the server first: the agent puts its
        // uplink back before the namespaces go.
        drop(self.node.take());
        // An agent that had to be killed leaves its wire and pod namespaces.
        remove_namespaces_with_prefix(&format!("sluice-w-{}-", self.name));
        remove_namespaces_with_prefix(&format!("{}-", self.pod_prefix));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn file(path: &Path) -> Stdio {
    std::fs::File::create(path).map_or_else(|_| Stdio::null(), Stdio::from)
}

fn start() -> Bed {
    let pid = std::process::id();
    let node = Netns::new("kc").expect("node namespace");
    let fabric = Netns::new("kcf").expect("fabric namespace");
    let dir = std::env::temp_dir().join(format!("sluice-tests-kubeconfig-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bed = Bed {
        node: Some(node),
        _fabric: fabric,
        dir,
        name: format!("node-kc-{pid}"),
        pod_prefix: format!("sl-kcp-{pid}"),
    };
    bed.node()
        .veth_to("nic0", &bed._fabric, "kc0")
        .expect("uplink");
    bed.node()
        .addr_add("nic0", "198.18.0.11/24")
        .expect("address");

    let ctl = controller_bin().expect("the controller binary");
    let out = Command::new(&ctl)
        .args([
            "init",
            "--server",
            "https://127.0.0.1:6443",
            "--nodes",
            &bed.name,
            "--dir",
        ])
        .arg(&bed.dir)
        .output()
        .expect("run init");
    assert!(out.status.success(), "init: {out:?}");
    let d = |f: &str| bed.dir.join(f).display().to_string();
    let ctl = ctl.display().to_string();
    bed.node()
        .spawn(
            &[
                &ctl,
                "serve",
                "--bind",
                "127.0.0.1:6443",
                "--dir",
                &d(""),
                "--data-dir",
                &d("data"),
                "--service-cluster-ip-range",
                "198.18.0.0/16",
            ],
            Stdio::null(),
            file(&bed.dir.join("serve.log")),
        )
        .expect("serve");
    bed.wait_for("the server ready", || {
        bed.kubectl("admin", &["get", "--raw", "/readyz"]).ok()
    });
    let agent = agent_bin().expect("the agent binary").display().to_string();
    let kc = bed.kubeconfig(&bed.name).display().to_string();
    bed.node()
        .spawn(
            &[
                &agent,
                "--kubeconfig",
                &kc,
                "--node-name",
                &bed.name,
                "--nic",
                "nic0",
                "--datapath",
                "emulated",
                "--zone",
                "zone-a",
                "--pool",
                "blue",
                "--status-file",
                &d("status.json"),
                "--pod-log-dir",
                &d("pods"),
                "--pod-netns-prefix",
                &bed.pod_prefix,
                "--metrics-bind-address",
                "127.0.0.1:10249",
                "--healthz-bind-address",
                "127.0.0.1:10256",
            ],
            Stdio::null(),
            file(&bed.dir.join("agent.log")),
        )
        .expect("agent");
    bed
}

const SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [198.19.9.5]
  conditions: {ready: true}
"#;

#[test]
fn an_agent_with_a_kubeconfig_registers_renews_and_applies_what_the_api_holds() {
    let bed = start();

    let node = bed.wait_for("the Node registered and Ready", || {
        let n = bed.get_json(&["node", &bed.name])?;
        let ready = n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(n)
    });
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "zone-a"
    );
    assert_eq!(
        node["metadata"]["labels"]["cloud.google.com/gke-nodepool"],
        "blue"
    );
    assert_eq!(node["status"]["capacity"]["pods"], "110");
    let internal: Vec<&str> = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == "InternalIP")
        .filter_map(|a| a["address"].as_str())
        .collect();
    assert_eq!(internal, vec!["198.18.0.11"], "the uplink's address");

    let renew = || -> Option<String> {
        let l = bed.get_json(&["lease", "-n", "kube-node-lease", &bed.name])?;
        l["spec"]["renewTime"].as_str().map(str::to_string)
    };
    let first = bed.wait_for("the Lease created", renew);
    bed.wait_for("the Lease renewed", || renew().filter(|t| *t != first));

    let manifest = bed.dir.join("web.yaml");
    std::fs::write(&manifest, SERVICE).expect("write manifest");
    let m = manifest.display().to_string();
    bed.kubectl("admin", &["apply", "-f", &m])
        .unwrap_or_else(|e| panic!("apply: {e:#}\n{}", bed.logs()));
    let ingress = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.18.100.1"}]}}}"#;
    bed.kubectl(
        "admin",
        &[
            "patch",
            "service",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            ingress,
        ],
    )
    .unwrap_or_else(|e| panic!("the Service's VIP: {e:#}\n{}", bed.logs()));
    let status = bed.wait_for("the Service applied", || {
        let s = bed.status()?;
        (s["synced"] == true && s["services"] == 1).then_some(s)
    });
    assert_eq!(status["endpoints"], 1, "{status}");
    assert_eq!(status["datapath"], "emulated", "{status}");
}
