//! Service allocations end to end, with the real kubectl on both stores:
//! cluster IPs and node ports handed out from the server's ranges, asked-for
//! values honoured or refused as kube-apiserver words it, released when a
//! Service is really gone or changes type, unique across restarts, many
//! concurrent creates and two controllers on one etcd.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::net::IpAddr;

use common::{ok, text, write, Backend, Server};
use serde_json::Value;

const RANGES: &str = "--service-cluster-ip-range=198.18.4.0/24,fd00:198:18::/120";
const PORTS: &str = "--service-node-port-range=30000-30199";

fn server(tag: &str, backend: Backend, extra: &[&str]) -> Server {
    Server::start_on(&format!("{tag}-{backend:?}"), backend, extra)
}

fn get(s: &Server, name: &str) -> Value {
    let out = ok(s, "admin", &["get", "service", name, "-o", "json"]);
    serde_json::from_str(&out).expect("service json")
}

fn apply(s: &Server, file: &str, yaml: &str) -> std::process::Output {
    let f = write(s, file, yaml);
    s.kubectl("admin", &["apply", "-f", &f])
}

fn svc_yaml(name: &str, spec: &str) -> String {
    format!("apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec: {spec}\n")
}

fn ip_in(v: &Value, cidr_prefix: &str) -> IpAddr {
    let ip = v.as_str().unwrap_or_default();
    assert!(ip.starts_with(cidr_prefix), "{ip} not in {cidr_prefix}*");
    ip.parse().expect("an address")
}

fn node_port(v: &Value, i: usize) -> i64 {
    v["spec"]["ports"][i]["nodePort"].as_i64().unwrap_or(0)
}

fn each_type_gets_its_allocations(backend: Backend) {
    let s = server("svc-types", backend, &[RANGES, PORTS]);
    let manifests = [
        svc_yaml("plain", "{selector: {app: a}, ports: [{port: 80}]}"),
        svc_yaml("np", "{type: NodePort, selector: {app: a}, ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}, {name: web, port: 80}]}"),
        svc_yaml("lb", "{type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: a}, ports: [{port: 443}]}"),
        svc_yaml("headless", "{clusterIP: None, selector: {app: a}, ports: [{port: 80}]}"),
        svc_yaml("ext", "{type: ExternalName, externalName: db.example.test}"),
        svc_yaml("dual", "{ipFamilyPolicy: PreferDualStack, selector: {app: a}, ports: [{port: 80}]}"),
    ]
    .join("---\n");
    let o = apply(&s, "all.yaml", &manifests);
    assert!(o.status.success(), "{}\n{}", text(&o), s.log());

    let plain = get(&s, "plain");
    ip_in(&plain["spec"]["clusterIP"], "198.18.4.");
    assert_eq!(plain["spec"]["clusterIPs"][0], plain["spec"]["clusterIP"]);
    assert_eq!(plain["spec"]["ipFamilies"], serde_json::json!(["IPv4"]));
    assert_eq!(plain["spec"]["ipFamilyPolicy"], "SingleStack");

    let np = get(&s, "np");
    ip_in(&np["spec"]["clusterIP"], "198.18.4.");
    let (udp, tcp, web) = (node_port(&np, 0), node_port(&np, 1), node_port(&np, 2));
    assert_eq!(udp, tcp, "port 53 shares its node port on UDP and TCP");
    assert_ne!(udp, web);
    for p in [udp, web] {
        assert!((30000..=30199).contains(&p), "{p}");
    }

    let lb = get(&s, "lb");
    let hc = lb["spec"]["healthCheckNodePort"]
        .as_i64()
        .expect("health check port");
    assert!(
        (30000..=30199).contains(&hc) && hc != node_port(&lb, 0),
        "{hc}"
    );
    assert!(![udp, web].contains(&hc) && ![udp, web].contains(&node_port(&lb, 0)));

    let headless = get(&s, "headless");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["clusterIPs"], serde_json::json!(["None"]));
    let ext = get(&s, "ext");
    assert!(ext["spec"].get("clusterIP").is_none(), "{ext}");

    let dual = get(&s, "dual");
    ip_in(&dual["spec"]["clusterIPs"][0], "198.18.4.");
    ip_in(&dual["spec"]["clusterIPs"][1], "fd00:198:18::");
    assert_eq!(
        dual["spec"]["ipFamilies"],
        serde_json::json!(["IPv4", "IPv6"])
    );

    // The same manifests again: nothing moves (values the client left
    // out are kept, as kube-apiserver's patchAllocatedValues keeps them).
    let o = apply(&s, "all.yaml", &manifests);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(get(&s, "np")["spec"], np["spec"]);
    assert_eq!(get(&s, "lb")["spec"], lb["spec"]);
    // A replace without the allocated values keeps them too.
    let f = write(
        &s,
        "plain2.yaml",
        &svc_yaml("plain", "{selector: {app: b}, ports: [{port: 80}]}"),
    );
    ok(&s, "admin", &["replace", "-f", &f]);
    assert_eq!(
        get(&s, "plain")["spec"]["clusterIP"],
        plain["spec"]["clusterIP"]
    );
}

/// The `Status` message kubectl printed for a refused request.
fn refused(o: &std::process::Output) -> String {
    assert!(!o.status.success(), "accepted: {}", text(o));
    text(o)
}

fn taken_values_are_refused_until_really_released(backend: Backend) {
    let s = server("svc-taken", backend, &[RANGES, PORTS]);
    let held = svc_yaml(
        "held",
        "{type: NodePort, clusterIP: 198.18.4.10, ports: [{port: 80, nodePort: 30080}]}",
    )
    .replace(
        "namespace: default}",
        "namespace: default, finalizers: [example.test/hold]}",
    );
    assert!(apply(&s, "held.yaml", &held).status.success());
    let held = get(&s, "held");
    assert_eq!(held["spec"]["clusterIP"], "198.18.4.10");
    assert_eq!(node_port(&held, 0), 30080);

    let same_ip = svc_yaml("b", "{clusterIP: 198.18.4.10, ports: [{port: 80}]}");
    let msg = refused(&apply(&s, "b.yaml", &same_ip));
    assert!(
        msg.contains("spec.clusterIPs[0]: Invalid value: \"198.18.4.10\": failed to allocate IP 198.18.4.10: provided IP is already allocated"),
        "{msg}"
    );
    // kubectl names the kind from the Status's details, as upstream's.
    assert!(msg.contains("The Service \"b\" is invalid"), "{msg}");
    let same_port = svc_yaml(
        "c",
        "{type: NodePort, ports: [{port: 81, nodePort: 30080}]}",
    );
    let msg = refused(&apply(&s, "c.yaml", &same_port));
    assert!(
        msg.contains(
            "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        ),
        "{msg}"
    );
    let outside = svc_yaml("d", "{clusterIP: 198.18.5.10, ports: [{port: 80}]}");
    let msg = refused(&apply(&s, "d.yaml", &outside));
    assert!(
        msg.contains("The range of valid IPs is 198.18.4.0/24"),
        "{msg}"
    );
    // A refused create leaves nothing behind.
    assert!(!s
        .kubectl("admin", &["get", "service", "c"])
        .status
        .success());

    // Deleted but held by its finalizer: still taken.
    ok(&s, "admin", &["delete", "service", "held", "--wait=false"]);
    assert!(!apply(&s, "b.yaml", &same_ip).status.success());
    let release = r#"{"metadata":{"finalizers":null}}"#;
    let patch = ["patch", "service", "held", "--type=merge", "-p", release];
    ok(&s, "admin", &patch);
    assert!(!s
        .kubectl("admin", &["get", "service", "held"])
        .status
        .success());
    // Gone: both values are free for others.
    let o = apply(&s, "b.yaml", &same_ip);
    assert!(o.status.success(), "{}", text(&o));
    let o = apply(&s, "c.yaml", &same_port);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(node_port(&get(&s, "c"), 0), 30080);
}

fn type_changes_allocate_and_release(backend: Backend) {
    let s = server("svc-transitions", backend, &[RANGES, PORTS]);
    let f = write(
        &s,
        "web.yaml",
        &svc_yaml("web", "{selector: {app: web}, ports: [{port: 80}]}"),
    );
    ok(&s, "admin", &["apply", "-f", &f]);
    let ip = get(&s, "web")["spec"]["clusterIP"].clone();
    let patch = |p: &str| s.kubectl("admin", &["patch", "service", "web", "-p", p]);

    assert!(patch(r#"{"spec":{"type":"NodePort"}}"#).status.success());
    let np = get(&s, "web");
    let port = node_port(&np, 0);
    assert!((30000..=30199).contains(&port), "{np}");
    assert_eq!(np["spec"]["clusterIP"], ip);

    // Back to ClusterIP: the node port is released (another Service can
    // ask for it), the address stays.
    assert!(patch(r#"{"spec":{"type":"ClusterIP"}}"#).status.success());
    let back = get(&s, "web");
    assert_eq!(node_port(&back, 0), 0, "{back}");
    assert_eq!(back["spec"]["clusterIP"], ip);
    let other = svc_yaml(
        "other",
        &format!("{{type: NodePort, ports: [{{port: 80, nodePort: {port}}}]}}"),
    );
    let o = apply(&s, "other.yaml", &other);
    assert!(o.status.success(), "{}", text(&o));

    // The address cannot change (kube-apiserver's words).
    let msg = refused(&patch(
        r#"{"spec":{"clusterIP":"198.18.4.99","clusterIPs":["198.18.4.99"]}}"#,
    ));
    assert!(
        msg.contains(
            "spec.clusterIPs[0]: Invalid value: [\"198.18.4.99\"]: may not change once set"
        ),
        "{msg}"
    );

    // A Local LoadBalancer gets a health-check port; Cluster releases it.
    assert!(
        patch(r#"{"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local"}}"#)
            .status
            .success()
    );
    let lb = get(&s, "web");
    let hc = lb["spec"]["healthCheckNodePort"].as_i64().expect("hc");
    assert!(patch(r#"{"spec":{"externalTrafficPolicy":"Cluster"}}"#)
        .status
        .success());
    assert!(get(&s, "web")["spec"].get("healthCheckNodePort").is_none());
    let hc_user = svc_yaml(
        "hc-user",
        &format!("{{type: NodePort, ports: [{{port: 80, nodePort: {hc}}}]}}"),
    );
    let o = apply(&s, "hc.yaml", &hc_user);
    assert!(o.status.success(), "{}", text(&o));

    // To ExternalName: the address is released and can be asked for.
    assert!(
        patch(r#"{"spec":{"type":"ExternalName","externalName":"web.example.test"}}"#)
            .status
            .success()
    );
    assert!(get(&s, "web")["spec"].get("clusterIP").is_none());
    let reuse = svc_yaml(
        "reuse",
        &format!(
            "{{clusterIP: {}, ports: [{{port: 80}}]}}",
            ip.as_str().unwrap_or_default()
        ),
    );
    let o = apply(&s, "reuse.yaml", &reuse);
    assert!(o.status.success(), "{}", text(&o));
}

fn small_range_fills_up_with_a_clear_error(backend: Backend) {
    let s = server(
        "svc-full",
        backend,
        &["--service-cluster-ip-range=198.18.6.0/29", PORTS],
    );
    let mut ips = BTreeSet::new();
    for i in 0..6 {
        let name = format!("s{i}");
        let f = write(&s, "s.yaml", &svc_yaml(&name, "{ports: [{port: 80}]}"));
        ok(&s, "admin", &["create", "-f", &f]);
        ips.insert(ip_in(&get(&s, &name)["spec"]["clusterIP"], "198.18.6."));
    }
    assert_eq!(ips.len(), 6);
    // Neither the network nor the broadcast address.
    for bad in ["198.18.6.0", "198.18.6.7"] {
        assert!(!ips.contains(&bad.parse::<IpAddr>().expect("ip")));
    }
    let f = write(&s, "s.yaml", &svc_yaml("s6", "{ports: [{port: 80}]}"));
    let o = s.kubectl("admin", &["create", "-f", &f, "-v=6"]);
    let msg = refused(&o);
    assert!(
        msg.contains("failed to allocate a serviceIP: range is full"),
        "{msg}"
    );
    let status = common::server_status(&o).expect("status");
    assert_eq!(status["code"], 500);
    // One deleted: its address is the one left.
    let gone = get(&s, "s3")["spec"]["clusterIP"].clone();
    ok(&s, "admin", &["delete", "service", "s3"]);
    ok(&s, "admin", &["create", "-f", &f]);
    assert_eq!(get(&s, "s6")["spec"]["clusterIP"], gone);
}

fn allocations_stay_unique_across_kill_9(backend: Backend) {
    let mut s = server(
        "svc-restart",
        backend,
        &[
            "--service-cluster-ip-range=198.18.7.0/28",
            "--service-node-port-range=30000-30009",
        ],
    );
    let mut seen = BTreeSet::new();
    for round in 0..2 {
        for i in 0..5 {
            let name = format!("r{round}-{i}");
            let f = write(
                &s,
                "s.yaml",
                &svc_yaml(&name, "{type: NodePort, ports: [{port: 80}]}"),
            );
            ok(&s, "admin", &["create", "-f", &f]);
            let v = get(&s, &name);
            assert!(seen.insert(v["spec"]["clusterIP"].to_string()), "{v}");
            assert!(seen.insert(node_port(&v, 0).to_string()), "{v}");
        }
        s.restart();
    }
    // The node port range (10) is full now; so is nothing else.
    let f = write(
        &s,
        "s.yaml",
        &svc_yaml("one-more", "{type: NodePort, ports: [{port: 80}]}"),
    );
    let msg = refused(&s.kubectl("admin", &["create", "-f", &f]));
    assert!(
        msg.contains("failed to allocate a nodePort: range is full"),
        "{msg}"
    );
}

/// 50 NodePort Services created at once get 50 distinct addresses and
/// node ports; on etcd through two controllers sharing it.
fn concurrent_creates_get_distinct_values(backend: Backend) {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Api, ListParams, PostParams};

    const N: usize = 50;
    let flags = ["--service-cluster-ip-range=198.18.8.0/26", PORTS];
    let (servers, _etcd) = match backend {
        Backend::Embedded => (vec![server("svc-many", backend, &flags)], None),
        Backend::Etcd => {
            let etcd = common::start_etcd();
            let a = Server::start_with_args("svc-many-a", Some(etcd.endpoint()), Some("a"), &flags);
            let b = Server::start_with_args("svc-many-b", Some(etcd.endpoint()), Some("b"), &flags);
            (vec![a, b], Some(etcd))
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let items = rt.block_on(async {
        let mut apis = Vec::new();
        for s in &servers {
            apis.push(Api::<Service>::namespaced(
                common::kube_client(s).await,
                "default",
            ));
        }
        futures::stream::iter(0..N)
            .map(|i| {
                let api = apis[i % apis.len()].clone();
                async move {
                    let svc: Service = serde_json::from_value(serde_json::json!({
                        "metadata": {"name": format!("m{i}")},
                        "spec": {"type": "NodePort", "ports": [{"port": 80}]},
                    }))
                    .expect("service");
                    api.create(&PostParams::default(), &svc).await
                }
            })
            .buffer_unordered(N)
            .try_collect::<Vec<_>>()
            .await
            .expect("every create succeeds");
        apis[0]
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
    });
    assert_eq!(items.len(), N);
    let ips: BTreeSet<String> = items
        .iter()
        .filter_map(|s| s.spec.as_ref()?.cluster_ip.clone())
        .collect();
    let ports: BTreeSet<i32> = items
        .iter()
        .filter_map(|s| s.spec.as_ref()?.ports.as_ref()?.first()?.node_port)
        .collect();
    assert_eq!(ips.len(), N, "{ips:?}");
    assert_eq!(ports.len(), N, "{ports:?}");
}

/// A Service stored without its allocation keys (as before they were
/// kept) gets them when the server starts, and a key no Service holds is
/// freed: written into the store while the server is down.
fn repair_adopts_and_frees_at_startup(backend: Backend) {
    use sluice_store::{EtcdStore, RedbOptions, RedbStore, Store};
    let mut s = server("svc-repair", backend, &[RANGES, PORTS]);
    s.kill9();
    let old = serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "old", "namespace": "default", "uid": "u-old"},
        "spec": {"type": "NodePort", "clusterIP": "198.18.4.20", "clusterIPs": ["198.18.4.20"],
                 "ports": [{"port": 80, "nodePort": 30020}]}});
    let orphan = serde_json::json!({"kind": "Service", "namespace": "default", "name": "gone", "uid": "u-gone"});
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let store: Box<dyn Store> = match s.etcd_endpoint() {
            Some(e) => Box::new(EtcdStore::connect(&[e]).await.expect("etcd")),
            None => Box::new(
                RedbStore::open(s.dir.join("data/store.redb"), RedbOptions::default())
                    .expect("redb"),
            ),
        };
        let put = |k: &str, v: &Value| (k.to_string(), serde_json::to_vec(v).expect("json"));
        for (k, v) in [
            put("/registry/core/services/default/old", &old),
            put("/sluice/allocations/serviceips/198.18.4.21", &orphan),
        ] {
            store.create(&k, v).await.expect("write");
        }
    });
    s.respawn();
    let ip_taken = svc_yaml("a", "{clusterIP: 198.18.4.20, ports: [{port: 80}]}");
    let msg = refused(&apply(&s, "a.yaml", &ip_taken));
    assert!(msg.contains("provided IP is already allocated"), "{msg}");
    let port_taken = svc_yaml(
        "b",
        "{type: NodePort, ports: [{port: 80, nodePort: 30020}]}",
    );
    let msg = refused(&apply(&s, "b.yaml", &port_taken));
    assert!(msg.contains("provided port is already allocated"), "{msg}");
    let orphan_ip = svc_yaml("c", "{clusterIP: 198.18.4.21, ports: [{port: 80}]}");
    let o = apply(&s, "c.yaml", &orphan_ip);
    assert!(o.status.success(), "{}", text(&o));
    // Deleting the adopted Service releases what it held.
    ok(&s, "admin", &["delete", "service", "old"]);
    let o = apply(&s, "a.yaml", &ip_taken);
    assert!(o.status.success(), "{}", text(&o));
}

/// `serve` with a range it cannot use stops at once, naming the flag.
#[test]
fn bad_ranges_stop_serve_naming_the_flag() {
    for (flag, value, words) in [
        (
            "--service-cluster-ip-range",
            "198.18.0.0/33",
            "prefix length",
        ),
        (
            "--service-cluster-ip-range",
            "198.18.0.0/16,198.19.0.0/16",
            "one IPv4 and one IPv6",
        ),
        (
            "--service-node-port-range",
            "32767-30000",
            "ends before it starts",
        ),
    ] {
        let o = std::process::Command::new(common::BIN)
            .args(["serve", "--dir", "/nonexistent/sluice-test", flag, value])
            .output()
            .expect("serve");
        assert!(!o.status.success());
        let err = text(&o);
        assert!(
            err.contains(flag) && err.contains(words),
            "{flag} {value}: {err}"
        );
    }
}

on_both_stores!(
    repair_adopts_and_frees_at_startup,
    concurrent_creates_get_distinct_values,
    each_type_gets_its_allocations,
    taken_values_are_refused_until_really_released,
    type_changes_allocate_and_release,
    small_range_fills_up_with_a_clear_error,
    allocations_stay_unique_across_kill_9
);
