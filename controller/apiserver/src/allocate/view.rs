//! The fields of a Service that allocation reads and writes, read out of
//! the stored JSON and written back into it, every other field left as it
//! was. Pure.

use serde_json::{json, Map, Value};

/// One `spec.ports[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortView {
    pub name: String,
    pub port: i64,
    pub protocol: String,
    /// 0: none.
    pub node_port: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceView {
    pub name: String,
    pub kind: String,
    /// "" when unset.
    pub cluster_ip: String,
    pub cluster_ips: Vec<String>,
    pub families: Vec<String>,
    pub policy: Option<String>,
    pub has_selector: bool,
    pub ports: Vec<PortView>,
    /// 0: none.
    pub health_check: i64,
    pub external_traffic_policy: String,
    /// `allocateLoadBalancerNodePorts`, true unless `false`.
    pub allocate_lb_node_ports: bool,
}

fn s(m: &Map<String, Value>, k: &str) -> String {
    m.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn strings(m: &Map<String, Value>, k: &str) -> Vec<String> {
    m.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

impl ServiceView {
    pub fn read(svc: &Value) -> ServiceView {
        let empty = Map::new();
        let spec = svc.get("spec").and_then(Value::as_object).unwrap_or(&empty);
        let ports = spec
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|p| PortView {
                        name: p
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        port: p.get("port").and_then(Value::as_i64).unwrap_or_default(),
                        protocol: p
                            .get("protocol")
                            .and_then(Value::as_str)
                            .unwrap_or("TCP")
                            .into(),
                        node_port: p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let kind = Some(s(spec, "type"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "ClusterIP".into());
        ServiceView {
            name: svc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into(),
            kind,
            cluster_ip: s(spec, "clusterIP"),
            cluster_ips: strings(spec, "clusterIPs"),
            families: strings(spec, "ipFamilies"),
            policy: Some(s(spec, "ipFamilyPolicy")).filter(|p| !p.is_empty()),
            has_selector: spec
                .get("selector")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty()),
            ports,
            health_check: spec
                .get("healthCheckNodePort")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            external_traffic_policy: s(spec, "externalTrafficPolicy"),
            allocate_lb_node_ports: spec
                .get("allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool)
                != Some(false),
        }
    }

    /// Write the allocation fields back into `svc` (an object), leaving
    /// every other field as it is; an empty value is left out.
    pub fn write(&self, svc: &mut Value) {
        let Some(obj) = svc.as_object_mut() else {
            return;
        };
        let Some(spec) = obj
            .entry("spec")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        else {
            return;
        };
        let mut put = |k: &str, v: Option<Value>| match v {
            Some(v) => {
                spec.insert(k.into(), v);
            }
            None => {
                spec.remove(k);
            }
        };
        put(
            "clusterIP",
            Some(json!(self.cluster_ip)).filter(|_| !self.cluster_ip.is_empty()),
        );
        put(
            "clusterIPs",
            Some(json!(self.cluster_ips)).filter(|_| !self.cluster_ips.is_empty()),
        );
        put(
            "ipFamilies",
            Some(json!(self.families)).filter(|_| !self.families.is_empty()),
        );
        put("ipFamilyPolicy", self.policy.as_ref().map(|p| json!(p)));
        put(
            "healthCheckNodePort",
            Some(json!(self.health_check)).filter(|_| self.health_check != 0),
        );
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for (p, view) in ports.iter_mut().zip(&self.ports) {
                if let Some(p) = p.as_object_mut() {
                    if view.node_port == 0 {
                        p.remove("nodePort");
                    } else {
                        p.insert("nodePort".into(), json!(view.node_port));
                    }
                }
            }
        }
    }

    pub fn is_external_name(&self) -> bool {
        self.kind == "ExternalName"
    }

    /// Headless: `clusterIP: None`.
    pub fn is_headless(&self) -> bool {
        self.cluster_ips.first().map(String::as_str) == Some("None") || self.cluster_ip == "None"
    }

    /// NodePort and LoadBalancer Services have node ports.
    pub fn needs_node_ports(&self) -> bool {
        self.kind == "NodePort" || self.kind == "LoadBalancer"
    }

    /// Whether node ports are chosen for ports that ask for none.
    pub fn allocates_node_ports(&self) -> bool {
        self.kind == "NodePort" || (self.kind == "LoadBalancer" && self.allocate_lb_node_ports)
    }

    /// LoadBalancer with `externalTrafficPolicy: Local`.
    pub fn needs_health_check(&self) -> bool {
        self.kind == "LoadBalancer" && self.external_traffic_policy == "Local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_and_write_touch_only_the_allocation_fields() {
        let mut svc = json!({"metadata": {"name": "web"}, "spec": {
            "type": "NodePort", "selector": {"app": "web"}, "sessionAffinity": "None",
            "clusterIP": "", "ports": [{"port": 80, "targetPort": 8080}, {"port": 81, "nodePort": 30081}]}});
        let mut v = ServiceView::read(&svc);
        assert_eq!(v.name, "web");
        assert!(v.has_selector && v.needs_node_ports() && !v.needs_health_check());
        assert_eq!(v.ports[1].node_port, 30081);
        assert_eq!(v.ports[0].protocol, "TCP");
        v.cluster_ip = "198.18.0.9".into();
        v.cluster_ips = vec!["198.18.0.9".into()];
        v.ports[0].node_port = 30080;
        v.ports[1].node_port = 0;
        v.write(&mut svc);
        assert_eq!(
            svc["spec"],
            json!({"type": "NodePort", "selector": {"app": "web"}, "sessionAffinity": "None",
                "clusterIP": "198.18.0.9", "clusterIPs": ["198.18.0.9"],
                "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}, {"port": 81}]})
        );
    }
}
