//! The agent binary with `--kubeconfig` instead of a state file, end to
//! end: a node namespace (uplink `nic0`, 198.18.0.11, a veth to a second
//! namespace) runs `sluice-controller serve` on its loopback and
//! `sluice-agent --kubeconfig <the node's kubeconfig>` on the emulated
//! engine. The agent registers its Node (labels, capacity, `Ready`, the
//! uplink's address as InternalIP, no `--node-ip` given), renews its Lease,
//! and applies the Service and EndpointSlice an admin writes (its status
//! file counts them, synced). A second test (its own bed, the server
//! allocating pod CIDRs) creates a Pod with kubectl: the agent gives it an
//! address from its node's CIDR, runs it, writes its status (phase,
//! readiness as a file toggles, containers) which the EndpointSlice loop
//! follows, and finishes its graceful deletion (`kubectl delete`, then
//! `kubectl drain`). Everything goes when the
//! guard drops, also on failure (logs are printed first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::kube_cluster::kubectl_bin;
use sluice_tests::netns::remove_namespaces_with_prefix;
use sluice_tests::{agent_bin, controller_bin, Netns};

/// Every wait is bounded by this; nothing is timed.
const LIMIT: Duration = Duration::from_secs(60);

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

/// A bed named after `tag` (tests run side by side, each in its own
/// namespaces and directory), the server started with `serve_args` too.
fn start(tag: &str, serve_args: &[&str]) -> Bed {
    let pid = std::process::id();
    let node = Netns::new(tag).expect("node namespace");
    let fabric = Netns::new(&format!("{tag}f")).expect("fabric namespace");
    let dir = std::env::temp_dir().join(format!("sluice-tests-kubeconfig-{tag}-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bed = Bed {
        node: Some(node),
        _fabric: fabric,
        dir,
        name: format!("node-{tag}-{pid}"),
        pod_prefix: format!("sl-{tag}p-{pid}"),
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
    let (conf, data) = (d(""), d("data"));
    let mut serve = vec![
        ctl.as_str(),
        "serve",
        "--bind",
        "127.0.0.1:6443",
        "--dir",
        &conf,
        "--data-dir",
        &data,
        "--service-cluster-ip-range",
        "198.18.0.0/16",
    ];
    serve.extend_from_slice(serve_args);
    bed.node()
        .spawn(&serve, Stdio::null(), file(&bed.dir.join("serve.log")))
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
    let bed = start("kc", &[]);

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

/// The pod the status test runs: `sluice-whoami` on its own address (the
/// downward API's `status.podIP` through `$(POD_IP)`), ready while the
/// file `ready` exists.
fn whoami_pod(node: &str, ready_file: &Path) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: who, namespace: default, labels: {{app: who}}}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 20
  containers:
  - name: who
    image: sluice-whoami
    command: ["{bin}"]
    args: ["--ip", "$(POD_IP)", "--tcp", "8080"]
    env:
    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
    readinessProbe:
      exec: {{command: ["test", "-e", "{ready}"]}}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Service
metadata: {{name: who, namespace: default}}
spec:
  selector: {{app: who}}
  ports: [{{name: http, port: 80, targetPort: 8080}}]
"#,
        bin = env!("CARGO_BIN_EXE_sluice-whoami"),
        ready = ready_file.display(),
    )
}

fn condition(pod: &Value, type_: &str) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// The Service's endpoint for `ip` in the controller's EndpointSlices:
/// its `ready` condition.
fn endpoint_ready(bed: &Bed, ip: &str) -> Option<bool> {
    let list = bed.get_json(&[
        "endpointslices",
        "-n",
        "default",
        "-l",
        "kubernetes.io/service-name=who",
    ])?;
    list["items"]
        .as_array()?
        .iter()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .find(|e| e["addresses"][0] == ip)
        .and_then(|e| e["conditions"]["ready"].as_bool())
}

#[test]
fn a_pod_created_with_kubectl_gets_an_address_runs_reports_readiness_and_its_deletion_finishes() {
    let bed = start(
        "kcs",
        &[
            "--cluster-cidr",
            "198.19.0.0/16",
            "--node-cidr-mask-size",
            "24",
        ],
    );
    let cidr = bed.wait_for("the Node's pod CIDR allocated", || {
        let n = bed.get_json(&["node", &bed.name])?;
        n["spec"]["podCIDRs"][0].as_str().map(str::to_string)
    });
    let (net, len) = cidr.split_once('/').expect("a CIDR");
    let net: std::net::Ipv4Addr = net.parse().expect("an IPv4 pod CIDR");
    let len: u32 = len.parse().expect("a prefix length");
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);

    let ready_file = bed.dir.join("ready");
    let manifest = bed.dir.join("who.yaml");
    std::fs::write(&manifest, whoami_pod(&bed.name, &ready_file)).expect("write manifest");
    let m = manifest.display().to_string();
    bed.kubectl("admin", &["create", "-f", &m])
        .unwrap_or_else(|e| panic!("create: {e:#}\n{}", bed.logs()));

    // Assigned by the agent from the node's CIDR, running, not ready (no
    // file yet), and the status says so.
    let pod = bed.wait_for("the pod Running with an address", || {
        let p = bed.get_json(&["pod", "who", "-n", "default"])?;
        (p["status"]["phase"] == "Running" && p["status"]["podIP"].is_string()).then_some(p)
    });
    let ip = pod["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let addr: std::net::Ipv4Addr = ip.parse().expect("an IPv4 pod address");
    assert_eq!(
        u32::from(addr) & mask,
        u32::from(net),
        "{ip} outside {cidr}"
    );
    assert!(
        u32::from(addr) - u32::from(net) >= 2,
        "{ip}: the network address and .1 are never a pod's"
    );
    assert_eq!(pod["status"]["podIPs"][0]["ip"], ip.as_str(), "{pod}");
    assert_eq!(pod["status"]["hostIP"], "198.18.0.11", "{pod}");
    assert_eq!(condition(&pod, "PodScheduled").as_deref(), Some("True"));
    assert_eq!(condition(&pod, "Ready").as_deref(), Some("False"), "{pod}");
    let who = &pod["status"]["containerStatuses"][0];
    assert_eq!(who["name"], "who");
    assert!(who["state"]["running"]["startedAt"].is_string(), "{pod}");
    assert!(pod["status"]["startTime"].is_string(), "{pod}");

    // The downward API gave the server its own address to listen on.
    bed.wait_for("the server listening on the pod's address", || {
        let listing = bed.node().exec(&["ip", "netns", "list"]).ok()?;
        let ns = listing
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .find(|n| n.starts_with(&bed.pod_prefix))?
            .to_string();
        let ss = bed
            .node()
            .exec(&["ip", "netns", "exec", &ns, "ss", "-Htln"])
            .ok()?;
        ss.contains(&format!("{ip}:8080")).then_some(())
    });

    std::fs::write(&ready_file, "").expect("ready file");
    bed.wait_for("Ready=True in the pod's status", || {
        let p = bed.get_json(&["pod", "who", "-n", "default"])?;
        (condition(&p, "Ready").as_deref() == Some("True")
            && condition(&p, "ContainersReady").as_deref() == Some("True")
            && p["status"]["containerStatuses"][0]["ready"] == true)
            .then_some(())
    });
    bed.wait_for("the endpoint ready in the EndpointSlice", || {
        endpoint_ready(&bed, &ip).filter(|r| *r)
    });

    std::fs::remove_file(&ready_file).expect("remove ready file");
    bed.wait_for("Ready=False in the pod's status", || {
        let p = bed.get_json(&["pod", "who", "-n", "default"])?;
        (condition(&p, "Ready").as_deref() == Some("False")).then_some(())
    });
    bed.wait_for("the endpoint not ready in the EndpointSlice", || {
        endpoint_ready(&bed, &ip).filter(|r| !*r)
    });

    // A graceful delete: the server gives it a deletionTimestamp; the agent
    // stops the process and deletes the object with grace 0.
    bed.kubectl(
        "admin",
        &["delete", "pod", "who", "-n", "default", "--wait=false"],
    )
    .unwrap_or_else(|e| panic!("delete: {e:#}\n{}", bed.logs()));
    bed.wait_for("the pod object gone", || {
        let out = bed
            .kubectl("admin", &["get", "pods", "-n", "default", "-o", "name"])
            .ok()?;
        (!out.contains("pod/who")).then_some(())
    });
    bed.wait_for("the pod's namespace removed", || {
        let listing = bed.node().exec(&["ip", "netns", "list"]).ok()?;
        (!listing.contains(&bed.pod_prefix)).then_some(())
    });

    // The same pod again (a new uid), then `kubectl drain`: cordon, the
    // Eviction API (a graceful delete) for every pod of the node, and it
    // returns once they are gone.
    bed.kubectl("admin", &["apply", "-f", &m])
        .unwrap_or_else(|e| panic!("apply: {e:#}\n{}", bed.logs()));
    bed.wait_for("the new pod Running", || {
        let p = bed.get_json(&["pod", "who", "-n", "default"])?;
        (p["status"]["phase"] == "Running").then_some(())
    });
    bed.kubectl(
        "admin",
        &[
            "drain",
            &bed.name,
            "--force",
            "--ignore-daemonsets",
            "--timeout=50s",
        ],
    )
    .unwrap_or_else(|e| panic!("drain: {e:#}\n{}", bed.logs()));
    let out = bed
        .kubectl("admin", &["get", "pods", "-n", "default", "-o", "name"])
        .unwrap_or_else(|e| panic!("get pods: {e:#}"));
    assert!(!out.contains("pod/who"), "drained, yet: {out}");
    let node = bed.get_json(&["node", &bed.name]).expect("the Node");
    assert_eq!(node["spec"]["unschedulable"], true, "cordoned");
}
