//! The columns `kubectl get` shows for each kind served, and each row's
//! cells, as kube-apiserver prints them. Kinds without columns of their
//! own get Name and Age, as custom resources without printer columns do.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sluice_model::k8s::jiff::Timestamp;

use super::{age, pod};

mod config;
mod load_balancers;

/// One cell of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Str(String),
    Int(i64),
}

impl Cell {
    pub fn name(obj: &Value) -> Cell {
        Cell::Str(str_at(obj, "/metadata/name").unwrap_or_default().into())
    }

    pub fn age(obj: &Value, now: Timestamp) -> Cell {
        Cell::Str(age::since(str_at(obj, "/metadata/creationTimestamp"), now))
    }

    pub fn to_json(&self) -> Value {
        match self {
            Cell::Str(s) => json!(s),
            Cell::Int(i) => json!(i),
        }
    }
}

/// One column: its header, its type for clients, and its priority (1:
/// only with `-o wide`).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub priority: u8,
    pub description: &'static str,
}

const fn col(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        priority: 0,
        description,
    }
}

const fn int(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "integer",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        priority: 1,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col(
    "Age",
    "CreationTimestamp: when this object was created, as an age.",
);

impl Column {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "name": self.name,
            "type": self.kind,
            "format": "",
            "description": self.description,
            "priority": self.priority,
        });
        if self.name == "Name" {
            v["format"] = json!("name");
        }
        v
    }
}

pub fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn int_at(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `<none>` where a value is missing or empty, as kubectl prints it.
pub fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

fn joined<'a>(items: impl Iterator<Item = &'a str>) -> Option<String> {
    let v: Vec<&str> = items.filter(|s| !s.is_empty()).collect();
    (!v.is_empty()).then(|| v.join(","))
}

fn strings<'a>(v: &'a Value, ptr: &str) -> impl Iterator<Item = &'a str> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `k=v,k2=v2` of a label map, `<none>` when empty.
fn label_map(v: &Value, ptr: &str) -> String {
    let pairs = v
        .pointer(ptr)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    or_none(Some(&pairs))
}

/// A label selector (`matchLabels` and `matchExpressions`) as text, as
/// kubectl's columns print it (`<none>` when it selects on nothing).
fn selector(v: &Value, ptr: &str) -> String {
    or_none(Some(&crate::selector::to_string(v.pointer(ptr))))
}

fn template_cells(v: &Value) -> [Cell; 3] {
    let names = joined(strings_of(v, "/spec/template/spec/containers", "name"));
    let images = joined(strings_of(v, "/spec/template/spec/containers", "image"));
    [
        Cell::Str(names.unwrap_or_default()),
        Cell::Str(images.unwrap_or_default()),
        Cell::Str(selector(v, "/spec/selector")),
    ]
}

/// The `field` of each object in the array at `ptr`.
fn strings_of<'a>(v: &'a Value, ptr: &str, field: &'a str) -> impl Iterator<Item = &'a str> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |o| o.get(field).and_then(Value::as_str))
}

fn int_or_string(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".into(),
    }
}

fn node_cells(n: &Value, now: Timestamp) -> Vec<Cell> {
    let mut status: Vec<String> = Vec::new();
    for c in n
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if c.get("type").and_then(Value::as_str) == Some("Ready") {
            status.push(match c.get("status").and_then(Value::as_str) {
                Some("True") => "Ready".into(),
                _ => "NotReady".into(),
            });
        }
    }
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles = BTreeSet::new();
    for (k, v) in n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            roles.insert(role.to_string());
        } else if k == "kubernetes.io/role" {
            roles.insert(v.as_str().unwrap_or_default().to_string());
        }
    }
    roles.remove("");
    let address = |kind: &str| {
        n.pointer("/status/addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
            .and_then(|a| a.get("address").and_then(Value::as_str))
    };
    let info = |f: &str| {
        str_at(n, &format!("/status/nodeInfo/{f}"))
            .filter(|s| !s.is_empty())
            .unwrap_or("<unknown>")
            .to_string()
    };
    vec![
        Cell::name(n),
        Cell::Str(status.join(",")),
        Cell::Str(or_none(Some(
            &roles.into_iter().collect::<Vec<_>>().join(","),
        ))),
        Cell::age(n, now),
        Cell::Str(
            str_at(n, "/status/nodeInfo/kubeletVersion")
                .unwrap_or_default()
                .into(),
        ),
        Cell::Str(or_none(address("InternalIP"))),
        Cell::Str(or_none(address("ExternalIP"))),
        Cell::Str(info("osImage")),
        Cell::Str(info("kernelVersion")),
        Cell::Str(info("containerRuntimeVersion")),
    ]
}

fn service_cells(s: &Value, now: Timestamp) -> Vec<Cell> {
    let kind = str_at(s, "/spec/type").unwrap_or("ClusterIP");
    let cluster_ip = strings(s, "/spec/clusterIPs")
        .next()
        .or_else(|| str_at(s, "/spec/clusterIP"));
    let external_ips = joined(strings(s, "/spec/externalIPs"));
    let external = match kind {
        "LoadBalancer" => {
            let mut lb: Vec<&str> = s
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                })
                .collect();
            lb.extend(strings(s, "/spec/externalIPs"));
            // The server's table is the wide one (kube-apiserver's too):
            // kubectl shows every address, unshortened.
            if lb.is_empty() {
                "<pending>".to_string()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => or_none(str_at(s, "/spec/externalName")),
        _ => or_none(external_ips.as_deref()),
    };
    let ports: Vec<String> = s
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) if np > 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    vec![
        Cell::name(s),
        Cell::Str(kind.into()),
        Cell::Str(or_none(cluster_ip)),
        Cell::Str(external),
        Cell::Str(or_none(Some(&ports.join(",")))),
        Cell::age(s, now),
        Cell::Str(label_map(s, "/spec/selector")),
    ]
}

/// At most three endpoint addresses, then how many more.
fn slice_cells(e: &Value, now: Timestamp) -> Vec<Cell> {
    let ports: Vec<String> = e
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("port").and_then(Value::as_i64))
        .map(|p| p.to_string())
        .collect();
    let addrs: Vec<&str> = e
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|ep| strings(ep, "/addresses"))
        .collect();
    let endpoints = match addrs.len() {
        0 => "<unset>".to_string(),
        n if n <= 3 => addrs.join(","),
        n => format!("{} + {} more...", addrs[..3].join(","), n - 3),
    };
    vec![
        Cell::name(e),
        Cell::Str(str_at(e, "/addressType").unwrap_or_default().into()),
        Cell::Str(if ports.is_empty() {
            "<unset>".into()
        } else {
            ports.join(",")
        }),
        Cell::Str(endpoints),
        Cell::age(e, now),
    ]
}

/// Makes one object's cells, in column order.
pub type Cells = fn(&Value, Timestamp) -> Vec<Cell>;

/// The columns of `kind`, and how its rows are made.
pub fn for_kind(kind: &str) -> (Vec<Column>, Cells) {
    if let Some(found) = load_balancers::for_kind(kind).or_else(|| config::for_kind(kind)) {
        return found;
    }
    match kind {
        "Pod" => (
            vec![
                NAME,
                col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
                col("Status", "The aggregate status of the containers in this pod."),
                col("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
                AGE,
                wide("IP", "IP address allocated to the pod."),
                wide("Node", "NodeName the pod is bound to."),
                wide("Nominated Node", "The node the scheduler nominated for this pod."),
                wide("Readiness Gates", "Readiness gates met of those the pod has."),
            ],
            pod::cells,
        ),
        "Node" => (
            vec![
                NAME,
                col("Status", "The status of the node"),
                col("Roles", "The roles of the node"),
                AGE,
                col("Version", "Kubelet Version reported by the node."),
                wide("Internal-IP", "The node's internal address."),
                wide("External-IP", "The node's external address."),
                wide("OS-Image", "OS Image reported by the node."),
                wide("Kernel-Version", "Kernel Version reported by the node."),
                wide("Container-Runtime", "Container runtime version reported by the node."),
            ],
            node_cells,
        ),
        "Service" => (
            vec![
                NAME,
                col("Type", "The type of the service: ClusterIP, NodePort, LoadBalancer or ExternalName."),
                col("Cluster-IP", "The IP address of the service in the cluster."),
                col("External-IP", "The addresses the service is reachable at from outside."),
                col("Port(s)", "The ports the service exposes."),
                AGE,
                wide("Selector", "The labels of the pods the service routes to."),
            ],
            service_cells,
        ),
        "EndpointSlice" => (
            vec![
                NAME,
                col("AddressType", "The type of address this slice carries."),
                col("Ports", "The ports of the slice's endpoints."),
                col("Endpoints", "The addresses of the slice's endpoints."),
                AGE,
            ],
            slice_cells,
        ),
        "PodDisruptionBudget" => (
            vec![
                NAME,
                col("Min Available", "The minimum number of pods that must be available."),
                col("Max Unavailable", "The maximum number of pods that may be unavailable."),
                int("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time."),
                AGE,
            ],
            |p, now| {
                vec![
                    Cell::name(p),
                    Cell::Str(int_or_string(p, "/spec/minAvailable")),
                    Cell::Str(int_or_string(p, "/spec/maxUnavailable")),
                    Cell::Int(int_at(p, "/status/disruptionsAllowed")),
                    Cell::age(p, now),
                ]
            },
        ),
        "Deployment" => (
            vec![
                NAME,
                col("Ready", "Number of the pod with ready state."),
                int("Up-to-date", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
                int("Available", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
                AGE,
                wide("Containers", "Names of each container in the template."),
                wide("Images", "Images referenced by each container in the template."),
                wide("Selector", "Label selector for pods."),
            ],
            |d, now| {
                let desired = d.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
                let mut c = vec![
                    Cell::name(d),
                    Cell::Str(format!("{}/{desired}", int_at(d, "/status/readyReplicas"))),
                    Cell::Int(int_at(d, "/status/updatedReplicas")),
                    Cell::Int(int_at(d, "/status/availableReplicas")),
                    Cell::age(d, now),
                ];
                c.extend(template_cells(d));
                c
            },
        ),
        "ReplicaSet" => (
            vec![
                NAME,
                int("Desired", "Number of desired pods."),
                int("Current", "The most recently observed number of replicas."),
                int("Ready", "The number of pods targeted by this ReplicaSet with a Ready Condition."),
                AGE,
                wide("Containers", "Names of each container in the template."),
                wide("Images", "Images referenced by each container in the template."),
                wide("Selector", "Label selector for pods."),
            ],
            |r, now| {
                let desired = r.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
                let mut c = vec![
                    Cell::name(r),
                    Cell::Int(desired),
                    Cell::Int(int_at(r, "/status/replicas")),
                    Cell::Int(int_at(r, "/status/readyReplicas")),
                    Cell::age(r, now),
                ];
                c.extend(template_cells(r));
                c
            },
        ),
        "Namespace" => (
            vec![NAME, col("Status", "The status of the namespace"), AGE],
            |n, now| {
                vec![
                    Cell::name(n),
                    Cell::Str(str_at(n, "/status/phase").unwrap_or("Active").into()),
                    Cell::age(n, now),
                ]
            },
        ),
        "Lease" => (
            vec![NAME, col("Holder", "The holder of the lease."), AGE],
            |l, now| {
                vec![
                    Cell::name(l),
                    Cell::Str(str_at(l, "/spec/holderIdentity").unwrap_or_default().into()),
                    Cell::age(l, now),
                ]
            },
        ),
        "Event" => (
            vec![
                col("Last Seen", "Time when this event was last observed."),
                col("Type", "Type of this event (Normal, Warning)."),
                col("Reason", "Short, machine understandable reason for the event."),
                col("Object", "The object this event is about."),
                col("Message", "A human-readable description of the event."),
                wide("Name", "Name must be unique within a namespace."),
            ],
            |e, now| {
                let seen = str_at(e, "/lastTimestamp")
                    .or_else(|| str_at(e, "/eventTime"))
                    .or_else(|| str_at(e, "/metadata/creationTimestamp"));
                let object = format!(
                    "{}/{}",
                    str_at(e, "/involvedObject/kind").unwrap_or_default().to_lowercase(),
                    str_at(e, "/involvedObject/name").unwrap_or_default()
                );
                vec![
                    Cell::Str(age::since(seen, now)),
                    Cell::Str(str_at(e, "/type").unwrap_or_default().into()),
                    Cell::Str(str_at(e, "/reason").unwrap_or_default().into()),
                    Cell::Str(object),
                    Cell::Str(str_at(e, "/message").unwrap_or_default().into()),
                    Cell::name(e),
                ]
            },
        ),
        "NodePool" => (
            vec![
                NAME,
                col("Version", "The Kubernetes version of the pool's nodes."),
                int("Nodes", "The pool's nodes now."),
                col("Status", "The pool's state."),
                col("Upgrade", "The phase of the pool's blue-green upgrade (GKE's BlueGreenInfo phase)."),
                col("Autoscaling", "The node count the autoscaler keeps the pool within, per zone."),
                AGE,
                wide("Locations", "The zones the pool's nodes are in."),
            ],
            |p, now| {
                let autoscaling = match p.pointer("/spec/autoscaling") {
                    Some(a) if a.get("enabled").and_then(Value::as_bool) == Some(true) => format!(
                        "{}-{}",
                        int_at(a, "/minNodeCount"),
                        int_at(a, "/maxNodeCount")
                    ),
                    _ => "off".into(),
                };
                let nodes = p.pointer("/status/nodes").and_then(Value::as_array).map_or(0, Vec::len);
                vec![
                    Cell::name(p),
                    Cell::Str(or_none(str_at(p, "/spec/version"))),
                    Cell::Int(i64::try_from(nodes).unwrap_or(i64::MAX)),
                    Cell::Str(or_none(str_at(p, "/status/status"))),
                    Cell::Str(or_none(str_at(p, "/status/updateInfo/blueGreenInfo/phase"))),
                    Cell::Str(autoscaling),
                    Cell::age(p, now),
                    Cell::Str(or_none(joined(strings(p, "/spec/locations")).as_deref())),
                ]
            },
        ),
        "Cluster" => (
            vec![
                NAME,
                col("Channel", "The release channel the cluster follows."),
                col("Version", "The control plane's version."),
                AGE,
            ],
            |c, now| {
                vec![
                    Cell::name(c),
                    Cell::Str(or_none(str_at(c, "/spec/releaseChannel/channel"))),
                    Cell::Str(or_none(str_at(c, "/status/currentMasterVersion"))),
                    Cell::age(c, now),
                ]
            },
        ),
        "Operation" => (
            vec![
                NAME,
                col("Type", "What the operation does."),
                col("Target", "The object the operation acts on."),
                col("Status", "Where the operation is."),
                AGE,
                wide("Message", "What the operation last said."),
            ],
            |o, now| {
                vec![
                    Cell::name(o),
                    Cell::Str(or_none(str_at(o, "/spec/operationType"))),
                    Cell::Str(or_none(str_at(o, "/spec/targetLink"))),
                    Cell::Str(or_none(str_at(o, "/status/status"))),
                    Cell::age(o, now),
                    Cell::Str(or_none(str_at(o, "/status/statusMessage"))),
                ]
            },
        ),
        _ => (vec![NAME, AGE], |o, now| vec![Cell::name(o), Cell::age(o, now)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-23T12:00:00Z".parse().unwrap()
    }

    pub(super) fn strs(kind: &str, obj: Value) -> Vec<String> {
        let (cols, cells) = for_kind(kind);
        let c = cells(&obj, now());
        assert_eq!(c.len(), cols.len(), "{kind}: one cell per column");
        c.into_iter()
            .map(|c| match c {
                Cell::Str(s) => s,
                Cell::Int(i) => i.to_string(),
            })
            .collect()
    }

    #[test]
    fn every_kind_has_one_cell_per_column_even_for_an_empty_object() {
        for kind in [
            "Pod",
            "Node",
            "Service",
            "EndpointSlice",
            "PodDisruptionBudget",
            "Deployment",
            "ReplicaSet",
            "Namespace",
            "Lease",
            "Event",
            "ConfigMap",
            "Secret",
            "NodePool",
            "Cluster",
            "Operation",
            "L4LoadBalancer",
            "HealthCheck",
            "NetworkEndpointGroup",
            "InstanceGroup",
            "Whatever",
        ] {
            strs(kind, json!({}));
            strs(kind, json!({"metadata": null, "spec": 3, "status": []}));
        }
    }

    #[test]
    fn node_status_reads_ready_and_cordoned() {
        let n = json!({
            "metadata": {"name": "node-a", "creationTimestamp": "2026-11-23T11:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "198.18.0.2"}],
                       "nodeInfo": {"kubeletVersion": "v1.37.0"}},
        });
        let c = strs("Node", n);
        assert_eq!(
            &c[..6],
            [
                "node-a",
                "Ready,SchedulingDisabled",
                "control-plane,edge",
                "60m",
                "v1.37.0",
                "198.18.0.2"
            ]
        );
        assert_eq!(&c[6..], ["<none>", "<unknown>", "<unknown>", "<unknown>"]);
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(strs("Node", not_ready)[1], "NotReady");
        assert_eq!(strs("Node", json!({}))[1], "Unknown");
    }

    #[test]
    fn service_shows_ports_and_a_pending_load_balancer() {
        let s = json!({
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "clusterIP": "198.18.100.1", "selector": {"app": "web"},
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
        });
        let c = strs("Service", s.clone());
        assert_eq!(
            &c[1..5],
            [
                "LoadBalancer",
                "198.18.100.1",
                "<pending>",
                "80:30080/TCP,53/UDP"
            ]
        );
        assert_eq!(c[6], "app=web");
        let mut up = s;
        up["status"] =
            json!({"loadBalancer": {"ingress": [{"ip": "198.19.0.10"}, {"ip": "198.19.0.11"}]}});
        assert_eq!(strs("Service", up)[3], "198.19.0.10,198.19.0.11");
        let plain = json!({"spec": {"ports": []}});
        assert_eq!(
            &strs("Service", plain)[1..5],
            ["ClusterIP", "<none>", "<none>", "<none>"]
        );
    }

    #[test]
    fn endpoint_slices_show_three_addresses_then_a_count() {
        let e = json!({"addressType": "IPv4", "ports": [{"port": 8080}],
            "endpoints": [{"addresses": ["198.18.1.1"]}, {"addresses": ["198.18.1.2"]},
                          {"addresses": ["198.18.1.3"]}, {"addresses": ["198.18.1.4"]}]});
        let c = strs("EndpointSlice", e);
        assert_eq!(
            &c[1..4],
            [
                "IPv4",
                "8080",
                "198.18.1.1,198.18.1.2,198.18.1.3 + 1 more..."
            ]
        );
    }

    #[test]
    fn budgets_and_workloads_show_their_counts() {
        let pdb = json!({"spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 2}});
        assert_eq!(&strs("PodDisruptionBudget", pdb)[1..4], ["50%", "N/A", "2"]);
        let d = json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
                       "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let c = strs("Deployment", d);
        assert_eq!(&c[1..4], ["2/3", "3", "2"]);
        assert_eq!(&c[5..], ["c", "busybox", "app=web,tier in (a,b)"]);
    }
}
