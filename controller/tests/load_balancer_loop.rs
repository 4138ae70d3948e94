//! The L4 load-balancer loop end to end (issue 11), on 300 simulated
//! nodes in three uneven zones (150/100/50), driven with kubectl as a user
//! drives a cluster: LoadBalancer Services get their `L4LoadBalancer`,
//! `HealthCheck`, per-zone NEGs or the shared instance groups as the
//! subsetting rules say, kept stable as nodes are excluded, and removed
//! with their Service.

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{ok, text, wait_for, wait_until, write, Backend, Server};
use kube::api::{Api, ListParams};
use sluice_model::k8s::{Event, Node};
use sluice_model::load_balancer::{
    Backends, HealthCheck, InstanceGroup, L4LoadBalancer, LoadBalancerType, NetworkEndpointGroup,
    ANNOTATION_IGNORED,
};

const POOLS: &str = "apiVersion: sluice.dev/v1
kind: Cluster
metadata: {name: default}
spec: {}
---
apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-a}
spec: {locations: [zone-a], initialNodeCount: 150, config: {capacity: {cpu: '2', memory: 4Gi}}}
---
apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-b}
spec: {locations: [zone-b], initialNodeCount: 100, config: {capacity: {cpu: '2', memory: 4Gi}}}
---
apiVersion: sluice.dev/v1
kind: NodePool
metadata: {name: pool-c}
spec: {locations: [zone-c], initialNodeCount: 50, config: {capacity: {cpu: '2', memory: 4Gi}}}
";

/// An internal LoadBalancer Service (`policy`: its externalTrafficPolicy;
/// without a selector, so its EndpointSlices are the test's). One port:
/// a second on the same port and protocol is refused by the API, as by
/// kube-apiserver (the loop's own tests cover such a Service's
/// frontends).
fn internal_service(name: &str, policy: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: default
  annotations: {{networking.gke.io/load-balancer-type: Internal}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: {policy}
  ports: [{{name: http, port: 80, protocol: TCP}}]
"
    )
}

const LONG: Duration = Duration::from_secs(60);

struct Cluster {
    s: Server,
    rt: tokio::runtime::Runtime,
    client: kube::Client,
}

impl Cluster {
    fn lb(&self, name: &str) -> Option<L4LoadBalancer> {
        let api: Api<L4LoadBalancer> = Api::namespaced(self.client.clone(), "default");
        self.rt.block_on(api.get_opt(name)).ok().flatten()
    }

    fn hc(&self, name: &str) -> Option<HealthCheck> {
        let api: Api<HealthCheck> = Api::namespaced(self.client.clone(), "default");
        self.rt.block_on(api.get_opt(name)).ok().flatten()
    }

    /// The Service's NEGs by zone: resourceVersion and members.
    fn negs(&self, service: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
        let api: Api<NetworkEndpointGroup> = Api::namespaced(self.client.clone(), "default");
        let list = self
            .rt
            .block_on(api.list(&ListParams::default()))
            .expect("NEGs");
        list.items
            .into_iter()
            .filter(|n| n.spec.service == service)
            .map(|n| {
                (
                    n.spec.zone.clone(),
                    (
                        n.metadata.resource_version.clone().unwrap_or_default(),
                        n.spec
                            .endpoints
                            .iter()
                            .map(|e| e.instance.clone())
                            .collect(),
                    ),
                )
            })
            .collect()
    }

    fn groups(&self) -> BTreeMap<String, InstanceGroup> {
        let api: Api<InstanceGroup> = Api::all(self.client.clone());
        let list = self
            .rt
            .block_on(api.list(&ListParams::default()))
            .expect("groups");
        list.items
            .into_iter()
            .map(|g| (g.spec.zone.clone(), g))
            .collect()
    }

    fn nodes(&self) -> Vec<Node> {
        let api: Api<Node> = Api::all(self.client.clone());
        self.rt
            .block_on(api.list(&ListParams::default()))
            .map(|l| l.items)
            .unwrap_or_default()
    }

    fn warning_events(&self, service: &str, reason: &str) -> Vec<String> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let list = self
            .rt
            .block_on(api.list(&ListParams::default()))
            .expect("events");
        list.items
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(service)
                    && e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
            })
            .filter_map(|e| e.message)
            .collect()
    }
}

fn sizes(negs: &BTreeMap<String, (String, BTreeSet<String>)>) -> Vec<usize> {
    negs.values().map(|(_, m)| m.len()).collect()
}

fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn zone_of(n: &Node) -> String {
    n.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("topology.kubernetes.io/zone"))
        .cloned()
        .unwrap_or_default()
}

fn name_of(n: &Node) -> String {
    n.metadata.name.clone().unwrap_or_default()
}

// spec: N1
// spec: N2
// spec: N3
// spec: N4
// spec: N5
// spec: P7
fn load_balancers_on_300_nodes(backend: Backend) {
    let s = Server::start_on(
        &format!("l4loop-{backend:?}").to_lowercase(),
        backend,
        &["--controllers=true", "--node-provider", "sim:0"],
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt.block_on(common::kube_client(&s));
    let c = Cluster { s, rt, client };
    let s = &c.s;
    let f = write(s, "pools.yaml", POOLS);
    ok(s, "admin", &["apply", "-f", &f]);
    let nodes = wait_for(
        Duration::from_secs(120),
        "300 nodes with InternalIPs",
        || {
            let n = c.nodes();
            let addressed = n
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.addresses.as_ref())
                        .is_some_and(|a| a.iter().any(|a| a.type_ == "InternalIP"))
                })
                .count();
            (n.len() == 300 && addressed == 300).then_some(n)
        },
    );

    // N4, N5: subsetting off, an internal LB gets the instance groups,
    // every node of each zone.
    let f = write(s, "old.yaml", &internal_service("old", "Cluster"));
    ok(s, "admin", &["apply", "-f", &f]);
    let old = wait_for(LONG, "old's LB", || {
        c.lb("old")
            .filter(|l| l.status.as_ref().and_then(|s| s.members) == Some(300))
    });
    assert_eq!(old.spec.type_, LoadBalancerType::Internal);
    assert_eq!(old.spec.backends, Backends::InstanceGroups);
    assert_eq!(old.spec.instance_groups, ["zone-a", "zone-b", "zone-c"]);
    let groups = wait_for(LONG, "three instance groups", || {
        let g = c.groups();
        (g.len() == 3).then_some(g)
    });
    let counts: Vec<usize> = groups.values().map(|g| g.spec.instances.len()).collect();
    assert_eq!(counts, [150, 100, 50]);

    // N5: turned on; the LB made before keeps its groups, one made after
    // gets NEGs; turning off is refused.
    let on = r#"{"spec":{"networkConfig":{"enableL4ilbSubsetting":true}}}"#;
    ok(
        s,
        "admin",
        &["patch", "cluster", "default", "--type=merge", "-p", on],
    );
    let off = r#"{"spec":{"networkConfig":{"enableL4ilbSubsetting":false}}}"#;
    let o = s.kubectl(
        "admin",
        &["patch", "cluster", "default", "--type=merge", "-p", off],
    );
    assert!(
        !o.status.success() && text(&o).contains("enableL4ilbSubsetting"),
        "{}",
        text(&o)
    );
    let f = write(s, "web.yaml", &internal_service("web", "Cluster"));
    ok(s, "admin", &["apply", "-f", &f]);
    let negs = wait_for(LONG, "web's NEGs", || {
        let n = c.negs("web");
        (n.len() == 3 && sizes(&n).iter().sum::<usize>() == 24).then_some(n)
    });
    // N1, N2: one NEG per zone; 24 (3 divides 24), 8 a zone.
    assert_eq!(sizes(&negs), [8, 8, 8]);
    let web = wait_for(LONG, "web's LB", || c.lb("web"));
    assert_eq!(web.spec.backends, Backends::NetworkEndpointGroups);
    assert_eq!(
        web.spec.network_endpoint_groups,
        ["web.zone-a", "web.zone-b", "web.zone-c"]
    );
    let old = c.lb("old").expect("old's LB");
    assert_eq!(old.spec.backends, Backends::InstanceGroups, "not converted");
    let check = c.hc("web").and_then(|h| h.status).expect("web's check");
    assert_eq!((check.port, check.check_interval_sec), (10256, 8));
    // An ingress IP: frontends, the duplicate port once.
    ok(
        s,
        "admin",
        &[
            "patch",
            "svc",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"198.19.0.10"}]}}}"#,
        ],
    );
    let web = wait_for(LONG, "web's frontends", || {
        c.lb("web").filter(|l| !l.spec.frontends.is_empty())
    });
    assert_eq!(web.spec.frontends.len(), 1);
    let table = ok(s, "admin", &["get", "l4lb,neg,ig"]);
    assert!(
        table.contains("198.19.0.10:80/TCP") && table.contains("3/24"),
        "{table}"
    );

    // P7: the annotation removed later is reported, not acted on.
    ok(
        s,
        "admin",
        &[
            "annotate",
            "svc",
            "web",
            "networking.gke.io/load-balancer-type-",
        ],
    );
    let web = wait_for(LONG, "AnnotationIgnored", || {
        c.lb("web").filter(|l| {
            l.status
                .as_ref()
                .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == ANNOTATION_IGNORED))
        })
    });
    assert_eq!(web.spec.type_, LoadBalancerType::Internal);
    let said = &web.status.as_ref().expect("status").conditions[0].message;
    assert!(said.contains("not converted"), "{said}");
    let now = c.negs("web");
    assert_eq!(now, negs, "the NEGs are untouched");

    // N3: Local uses only the nodes with a serving endpoint.
    let f = write(s, "local.yaml", &internal_service("local", "Local"));
    ok(s, "admin", &["apply", "-f", &f]);
    let serving: Vec<String> = nodes.iter().step_by(97).map(name_of).take(3).collect();
    let endpoint = |node: &str, ready: bool, terminating: bool, i: usize| {
        format!(
            "  - {{addresses: [198.18.200.{i}], nodeName: {node}, conditions: {{ready: {ready}, terminating: {terminating}}}}}\n"
        )
    };
    let mut slice = String::from(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: local-1, namespace: default, labels: {kubernetes.io/service-name: local}}\naddressType: IPv4\nports: [{port: 80}]\nendpoints:\n",
    );
    for (i, n) in serving.iter().enumerate() {
        slice.push_str(&endpoint(n, true, false, i + 1));
    }
    slice.push_str(&endpoint(&name_of(&nodes[1]), false, true, 10));
    slice.push_str(&endpoint(&name_of(&nodes[2]), false, false, 11));
    let f = write(s, "slice.yaml", &slice);
    ok(s, "admin", &["apply", "-f", &f]);
    let local = wait_for(LONG, "local's NEGs hold the serving nodes", || {
        let members: BTreeSet<String> =
            c.negs("local").into_values().flat_map(|(_, m)| m).collect();
        (members.len() == 3).then_some(members)
    });
    assert_eq!(local, serving.iter().cloned().collect());
    let check = c.hc("local").and_then(|h| h.status).expect("local's check");
    assert_eq!(check.check_interval_sec, 3);
    assert!(
        check.port >= 30000,
        "the Service's healthCheckNodePort: {check:?}"
    );

    // Stability and exclusions: a non-member of zone-b labelled out
    // changes no NEG; a member of zone-a tainted for deletion changes one
    // endpoint of one NEG.
    let members: BTreeSet<String> = negs.values().flat_map(|(_, m)| m.clone()).collect();
    let outsider = nodes
        .iter()
        .find(|n| zone_of(n) == "zone-b" && !members.contains(&name_of(n)))
        .map(name_of)
        .expect("an outsider");
    let member = negs["zone-a"].1.iter().next().cloned().expect("a member");
    ok(
        s,
        "admin",
        &[
            "label",
            "node",
            &outsider,
            "node.kubernetes.io/exclude-from-external-load-balancers=true",
        ],
    );
    ok(
        s,
        "admin",
        &[
            "taint",
            "node",
            &member,
            "ToBeDeletedByClusterAutoscaler=1:NoSchedule",
        ],
    );
    let after = wait_for(LONG, "the tainted member replaced", || {
        let n = c.negs("web");
        (!n["zone-a"].1.contains(&member) && n["zone-a"].1.len() == 8).then_some(n)
    });
    assert_eq!(negs["zone-a"].1.difference(&after["zone-a"].1).count(), 1);
    assert_eq!(after["zone-a"].1.difference(&negs["zone-a"].1).count(), 1);
    for zone in ["zone-b", "zone-c"] {
        assert_eq!(after[zone], negs[zone], "{zone} was not written");
    }
    // The shared groups leave both out.
    let groups = wait_for(LONG, "the groups without the excluded", || {
        let g = c.groups();
        let counts: Vec<usize> = g.values().map(|g| g.spec.instances.len()).collect();
        (counts == [149, 99, 50]).then_some(g)
    });
    assert!(groups["zone-b"]
        .spec
        .instances
        .iter()
        .all(|i| i.name != outsider));

    // N4: a zone above 250 nodes: the group's status and an Event on
    // every Service that uses the groups.
    ok(
        s,
        "admin",
        &[
            "patch",
            "nodepool",
            "pool-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"initialNodeCount":260}}"#,
        ],
    );
    wait_until(
        Duration::from_secs(120),
        "zone-a's 259 eligible nodes",
        || c.lb("old").and_then(|l| l.status).map(|s| s.warnings),
        |w| w.iter().flatten().any(|w| w.contains("259 nodes")),
        || {
            let in_a = c.nodes().into_iter().filter(|n| zone_of(n) == "zone-a");
            let (all, ready) =
                in_a.fold((0, 0), |(a, r), n| (a + 1, r + usize::from(is_ready(&n))));
            let pool = ok(s, "admin", &["get", "nodepool", "pool-a", "-o", "yaml"]);
            format!("zone-a: {all} Nodes, {ready} Ready\n{pool}\n{}", s.log())
        },
    );
    // One Event for the zone, however many nodes joined it one by one.
    let warned = wait_for(LONG, "old warned of zone-a", || {
        let e = c.warning_events("old", "TooManyBackends");
        (!e.is_empty()).then_some(e)
    });
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("zone zone-a") && warned[0].contains("more than 250"),
        "{warned:?}"
    );
    // The groups are their own key in the loop: their status may land
    // after the Service's, so wait for it rather than read it once.
    let warnings = wait_for(LONG, "zone-a's group warned", || {
        let g = c.groups();
        let w = g["zone-a"].status.as_ref().map(|s| s.warnings.clone())?;
        (!w.is_empty()).then_some(w)
    });
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let old = c.lb("old").expect("old");
    assert_eq!(old.status.as_ref().expect("status").warnings.len(), 1);
    // The NEGs of web did not move for the new nodes (quotas unchanged).
    assert_eq!(c.negs("web"), after);

    // N3: more than 250 nodes with a serving pod: 250 of them, and a
    // warning in the status and as an Event.
    let f = write(s, "wide.yaml", &internal_service("wide", "Local"));
    ok(s, "admin", &["apply", "-f", &f]);
    let mut slice = String::from(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: wide-1, namespace: default, labels: {kubernetes.io/service-name: wide}}\naddressType: IPv4\nports: [{port: 80}]\nendpoints:\n",
    );
    for (i, n) in nodes.iter().take(270).enumerate() {
        slice.push_str(&format!(
            "  - {{addresses: [198.18.{}.{}], nodeName: {}, conditions: {{ready: true}}}}\n",
            201 + i / 250,
            i % 250 + 1,
            name_of(n)
        ));
    }
    let f = write(s, "wide-slice.yaml", &slice);
    ok(s, "admin", &["apply", "-f", &f]);
    let warned = wait_for(LONG, "wide warned of its serving nodes", || {
        let e = c.warning_events("wide", "TooManyBackends");
        (!e.is_empty()).then_some(e)
    });
    assert!(warned[0].contains("at most 250"), "{warned:?}");
    let total: usize = c.negs("wide").values().map(|(_, m)| m.len()).sum();
    assert_eq!(total, 250);

    // objects go; no LB uses instance groups any more: they go too.
    ok(s, "admin", &["delete", "svc", "local"]);
    ok(s, "admin", &["delete", "svc", "wide"]);
    ok(
        s,
        "admin",
        &[
            "patch",
            "svc",
            "old",
            "--type=merge",
            "-p",
            r#"{"spec":{"type":"ClusterIP"}}"#,
        ],
    );
    wait_for(LONG, "objects removed", || {
        (c.lb("local").is_none()
            && c.hc("local").is_none()
            && c.negs("local").is_empty()
            && c.negs("wide").is_empty()
            && c.lb("old").is_none()
            && c.hc("old").is_none()
            && c.groups().is_empty())
        .then_some(())
    });
    assert!(c.lb("web").is_some());
}

on_both_stores!(load_balancers_on_300_nodes);
