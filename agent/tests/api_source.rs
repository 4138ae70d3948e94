//! The agent against a real `sluice-controller` (init, serve on loopback),
//! through its node kubeconfig (`system:node:node-a`): the registration
//! creates the Node with its labels, capacity and `Ready`, the Lease's
//! renewTime moves, and what an admin writes (a Service, its
//! EndpointSlice, pods) reaches the sync loop's engine through
//! `KubeSource`. No root and no namespaces: the engine and the pods'
//! processes are the loop tests' fakes. Every wait is bounded; nothing is
//! timed.
//!
//! The controller binary: `$SLUICE_CONTROLLER_BIN`, else next to this test
//! (`cargo build -p sluice-controller`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_agent::register::{self, machine::Machine, RegisterConfig};
use sluice_agent::state::api::{client_from_kubeconfig, KubeSource};
use sluice_agent::state::source::{StateSource, Update};
use sluice_agent::state::DesiredState;
use sluice_model::k8s::{EndpointSlice, Lease, Node, Pod, Service};

mod common;
use common::runner_loop::{Loop, TempDir};

/// The node the loop tests' runner runs as.
const NODE: &str = "node-a";

fn controller_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_CONTROLLER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("sluice-controller"))
        .find(|c| c.is_file())
        .unwrap_or_else(|| {
            panic!(
                "sluice-controller not found next to {} (nor SLUICE_CONTROLLER_BIN set): \
                 run `cargo build -p sluice-controller` first",
                exe.display()
            )
        })
}

/// `init` and `serve` on a free loopback port; stopped and its directory
/// removed when dropped, also on failure.
struct Controller {
    dir: PathBuf,
    child: Child,
}

impl Controller {
    fn start(tag: &str) -> Controller {
        let dir =
            std::env::temp_dir().join(format!("sluice-agent-api-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let bin = controller_bin();
        let out = Command::new(&bin)
            .args(["init", "--server", &format!("https://127.0.0.1:{port}")])
            .args(["--nodes", &format!("{NODE},node-b"), "--dir"])
            .arg(&dir)
            .output()
            .expect("run init");
        assert!(out.status.success(), "init: {out:?}");
        let log = std::fs::File::create(dir.join("serve.log")).expect("log");
        let child = Command::new(&bin)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--dir"])
            .arg(&dir)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--service-cluster-ip-range", "198.18.0.0/16"])
            .stderr(log)
            .spawn()
            .expect("run serve");
        Controller { dir, child }
    }

    fn kubeconfig(&self, who: &str) -> PathBuf {
        match who {
            "admin" => self.dir.join("admin.kubeconfig"),
            node => self.dir.join("nodes").join(format!("{node}.kubeconfig")),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Poll `f` until it gives a value; panic naming `what` after `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const LIMIT: Duration = Duration::from_secs(30);

/// A client for `who`, once the server answers.
fn client(rt: &tokio::runtime::Runtime, c: &Controller, who: &str) -> kube::Client {
    let path = c.kubeconfig(who);
    let client = rt
        .block_on(client_from_kubeconfig(&path))
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for(LIMIT, "the server answers", || {
        rt.block_on(client.apiserver_version()).ok()
    });
    client
}

fn facts(name: &str) -> register::node::NodeFacts {
    let cfg = RegisterConfig {
        name: name.into(),
        node_ips: vec![
            "198.18.0.11".parse().expect("ip"),
            "fd00:18::11".parse().expect("ip"),
        ],
        cpu: Some(3),
        max_pods: 110,
        zone: Some("zone-a".into()),
        pool: Some("blue".into()),
        version: Some("v1.37.0-sluice".into()),
        lease_duration_s: 40,
        ..RegisterConfig::default()
    };
    register::facts(&cfg, Machine::read(), Vec::new())
}

fn create<K>(rt: &tokio::runtime::Runtime, api: &Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).expect("fixture");
    rt.block_on(api.create(&PostParams::default(), &obj))
        .unwrap_or_else(|e| panic!("create: {e}"))
}

#[test]
fn the_node_registers_its_lease_renews_and_a_service_reaches_the_engine() {
    let c = Controller::start("register");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let admin = client(&rt, &c, "admin");
    let node_client = client(&rt, &c, NODE);
    let registering = register::spawn(rt.handle(), node_client.clone(), facts(NODE), 40);

    // The Node, as the node identity wrote it.
    let nodes: Api<Node> = Api::all(admin.clone());
    let node = wait_for(LIMIT, "the Node registered and Ready", || {
        let n = rt.block_on(nodes.get_opt(NODE)).ok().flatten()?;
        let ready = n
            .status
            .as_ref()?
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(n)
    });
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("zone-a")
    );
    assert_eq!(
        labels
            .get("cloud.google.com/gke-nodepool")
            .map(String::as_str),
        Some("blue")
    );
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some(NODE)
    );
    let status = node.status.clone().unwrap_or_default();
    let cap = status.capacity.clone().unwrap_or_default();
    assert_eq!(cap.get("cpu").map(|q| q.0.as_str()), Some("3"));
    assert_eq!(cap.get("pods").map(|q| q.0.as_str()), Some("110"));
    assert!(cap.contains_key("memory"), "{cap:?}");
    let info = status.node_info.clone().unwrap_or_default();
    assert_eq!(info.kubelet_version, "v1.37.0-sluice");
    let internal: Vec<&str> = status
        .addresses
        .iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address.as_str())
        .collect();
    assert_eq!(internal, vec!["198.18.0.11", "fd00:18::11"]);

    // The Lease, renewed: its renewTime moves on.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-node-lease");
    let renew_time = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
    let first = wait_for(LIMIT, "the Lease created", || {
        let l = rt.block_on(leases.get_opt(NODE)).ok().flatten()?;
        renew_time(&l)
    });
    let lease = wait_for(LIMIT, "the Lease renewed", || {
        let l = rt.block_on(leases.get_opt(NODE)).ok().flatten()?;
        (renew_time(&l)? != first).then_some(l)
    });
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some(NODE));
    assert_eq!(spec.lease_duration_seconds, Some(40));

    // An admin's Service and EndpointSlice reach the sync loop's engine.
    let source = KubeSource::spawn(rt.handle(), node_client, NODE);
    let mut lp = Loop::start_with(TempDir::new("api-source"), Box::new(source));
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    create(
        &rt,
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }),
    );
    let ingress = json!({"status": {"loadBalancer": {"ingress": [{"ip": "198.18.100.1"}]}}});
    rt.block_on(services.patch_status("web", &PatchParams::default(), &Patch::Merge(&ingress)))
        .unwrap_or_else(|e| panic!("the Service's VIP: {e}\n{}", c.log()));
    let slices: Api<EndpointSlice> = Api::namespaced(admin.clone(), "default");
    create(
        &rt,
        &slices,
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["198.19.1.5"], "nodeName": NODE, "conditions": {"ready": true}},
                {"addresses": ["198.19.2.5"], "nodeName": "node-b",
                 "conditions": {"ready": false, "serving": true, "terminating": true}},
            ],
        }),
    );
    wait_for(LIMIT, "the Service's frontend in the engine", || {
        lp.tick();
        (lp.engine.frontend(80) == Some((1, 1))).then_some(())
    });
    let status = lp.status();
    assert_eq!(status["synced"], json!(true), "{status}");

    // A change flows the same way: the slice's second endpoint gone.
    let patch = json!({"endpoints": [
        {"addresses": ["198.19.1.5"], "nodeName": NODE, "conditions": {"ready": true}},
    ]});
    rt.block_on(slices.patch("web-1", &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap_or_else(|e| panic!("patch the slice: {e}"));
    wait_for(
        LIMIT,
        "the terminating endpoint gone from the engine",
        || {
            lp.tick();
            (lp.engine.frontend(80) == Some((1, 0))).then_some(())
        },
    );
    registering.abort();
}

/// Poll `source` until its newest state satisfies `f`.
fn state_where(
    source: &mut KubeSource,
    what: &str,
    mut f: impl FnMut(&DesiredState) -> bool,
) -> DesiredState {
    let mut last: Option<DesiredState> = None;
    wait_for(LIMIT, what, || {
        match source.poll() {
            Update::State(s) => last = Some(s),
            Update::Rejected(e) => panic!("rejected: {e}"),
            Update::Unchanged => {}
        }
        last.clone().filter(|s| f(s))
    })
}

#[test]
fn only_the_pods_bound_to_this_node_reach_its_state() {
    let c = Controller::start("pods");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let admin = client(&rt, &c, "admin");
    let mut source = KubeSource::spawn(rt.handle(), client(&rt, &c, NODE), NODE);
    // Until the initial lists are taken an update is awaited; then, with
    // nothing written, none once the last build is taken.
    assert!(source.busy_since().is_some());
    let first = state_where(&mut source, "the initial lists", |_| true);
    assert!(first.pods.is_empty(), "{:?}", first.pods);
    wait_for(LIMIT, "nothing awaited once the lists are taken", || {
        let _ = source.poll();
        source.busy_since().is_none().then_some(())
    });

    let pods: Api<Pod> = Api::namespaced(admin, "default");
    for (name, node) in [("here", NODE), ("there", "node-b"), ("nowhere", "")] {
        let mut spec = json!({"containers": [{"name": "c", "image": "web",
                                              "command": ["/bin/web"]}]});
        if !node.is_empty() {
            spec["nodeName"] = json!(node);
        }
        create(
            &rt,
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
        );
    }
    let s = state_where(&mut source, "the bound pod", |s| {
        s.pods.contains_key("default/here")
    });
    assert_eq!(s.pods.keys().collect::<Vec<_>>(), vec!["default/here"]);
    let here = &s.pods["default/here"];
    assert_eq!(here.node, NODE);
    assert_eq!(here.run.containers[0].argv, vec!["/bin/web"]);
}

#[test]
fn the_agent_refuses_both_sources_and_neither() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sluice-agent"))
            .args(args)
            .env_remove("SLUICE_STATE")
            .env_remove("SLUICE_KUBECONFIG")
            .output()
            .expect("run the agent")
    };
    let dir = TempDir::new("api-flags");
    let p = |n: &str| -> String { Path::new(&dir.0).join(n).display().to_string() };
    let both = run(&[
        "--node-name=n",
        "--state",
        &p("s.yaml"),
        "--kubeconfig",
        &p("k"),
    ]);
    let err = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--state") && err.contains("--kubeconfig"),
        "{err}"
    );
    assert!(err.contains("cannot be used with"), "{err}");
    let neither = run(&["--node-name=n"]);
    let err = String::from_utf8_lossy(&neither.stderr);
    assert_eq!(neither.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--state") && err.contains("--kubeconfig"),
        "{err}"
    );
}

/// The pod as the API holds it, once `f` accepts it; the loop ticks
/// meanwhile.
fn pod_where(
    rt: &tokio::runtime::Runtime,
    lp: &mut Loop,
    pods: &Api<Pod>,
    name: &str,
    what: &str,
    mut f: impl FnMut(&Pod) -> bool,
) -> Pod {
    wait_for(LIMIT, what, || {
        lp.tick();
        let p = rt.block_on(pods.get_opt(name)).ok().flatten()?;
        f(&p).then_some(p)
    })
}

fn pod_condition(p: &Pod, type_: &str) -> Option<String> {
    let s = p.status.as_ref()?;
    let c = s.conditions.iter().flatten().find(|c| c.type_ == type_)?;
    Some(c.status.clone())
}

#[test]
fn a_pod_gets_an_address_its_status_is_written_back_and_its_graceful_deletion_finishes() {
    use sluice_agent::state::api::KubeStatusSink;
    let c = Controller::start("status");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let admin = client(&rt, &c, "admin");
    let node_client = client(&rt, &c, NODE);
    let registering = register::spawn(rt.handle(), node_client.clone(), facts(NODE), 40);
    let nodes: Api<Node> = Api::all(admin.clone());
    wait_for(LIMIT, "the Node registered", || {
        rt.block_on(nodes.get_opt(NODE)).ok().flatten()
    });
    // What kube-controller-manager's IPAM would have given the node.
    let cidr = json!({"spec": {"podCIDRs": ["198.19.1.0/24"]}});
    rt.block_on(nodes.patch(NODE, &PatchParams::default(), &Patch::Merge(&cidr)))
        .unwrap_or_else(|e| panic!("the Node's pod CIDR: {e}\n{}", c.log()));

    let source = KubeSource::spawn(rt.handle(), node_client.clone(), NODE);
    let mut lp = Loop::start_with(TempDir::new("api-status"), Box::new(source));
    if let Some(r) = lp.runner.as_mut() {
        r.set_status_sink(Box::new(KubeStatusSink::spawn(rt.handle(), node_client)));
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    create(
        &rt,
        &pods,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web", "namespace": "default"},
               "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": "main", "image": "web", "command": ["/bin/web"]}]}}),
    );
    // Started at once with an address the agent chose, and that address
    // written back with the phase and readiness (no probe: ready once
    // running).
    let p = pod_where(
        &rt,
        &mut lp,
        &pods,
        "web",
        "Running and Ready in the API",
        |p| {
            let s = p.status.clone().unwrap_or_default();
            s.phase.as_deref() == Some("Running")
                && pod_condition(p, "Ready").as_deref() == Some("True")
        },
    );
    let s = p.status.clone().unwrap_or_default();
    assert_eq!(s.pod_ip.as_deref(), Some("198.19.1.2"), "{s:?}");
    assert_eq!(s.host_ip.as_deref(), Some("198.18.0.11"), "{s:?}");
    let cs = s.container_statuses.clone().unwrap_or_default();
    assert_eq!(cs.len(), 1);
    assert!(cs[0].ready && cs[0].state.as_ref().is_some_and(|st| st.running.is_some()));
    assert_eq!(lp.pods.w().spawned, vec!["default/web".to_string()]);
    // The address came back in the status: the pod runs on, not restarted.
    for _ in 0..10 {
        lp.tick();
    }
    assert_eq!(lp.pods.w().spawned.len(), 1);

    // A graceful delete: the API keeps the pod (deletionTimestamp) until
    // the agent has stopped it and deletes it with grace 0.
    rt.block_on(pods.delete("web", &kube::api::DeleteParams::default()))
        .unwrap_or_else(|e| panic!("delete: {e}"));
    wait_for(LIMIT, "the pod stopped and its object gone", || {
        lp.tick();
        let gone = rt.block_on(pods.get_opt("web")).ok()?.is_none();
        gone.then_some(())
    });
    assert_eq!(
        lp.pods.signals("default/web"),
        vec![sluice_agent::pods::runtime::Sig::Term]
    );
    registering.abort();
}
