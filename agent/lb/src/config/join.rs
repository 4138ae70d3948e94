//! The API's objects joined into an [`LbConfig`], pure. An L4LoadBalancer's
//! backends are the endpoints of its NetworkEndpointGroups (same
//! namespace) or the instances of its InstanceGroups (cluster-scoped); its
//! check is its HealthCheck's status, the effective check the controller
//! worked out. An LB that cannot be served (no check yet, an invalid one,
//! a frontend another LB has) is left out with a reason; the rest are
//! served.

use std::collections::{BTreeMap, BTreeSet};

use super::objects::{object_name, BackendsFrom, Fault, Kind, LbSpec, Objects, Read};
use super::{
    check_frontend, check_health, normalise, BackendConfig, LbConfig, RawCheck, ServiceConfig,
};
use crate::desired::Frontend;

/// The configuration the objects give, and why anything was left out.
pub fn join(o: &Objects) -> (LbConfig, Vec<Fault>) {
    let mut faults = Vec::new();
    let checks: BTreeMap<(&str, &str), &Read<_>> = o
        .checks
        .iter()
        .map(|c| ((c.namespace.as_str(), c.name.as_str()), c))
        .collect();
    let negs: BTreeMap<(&str, &str), &Read<_>> = o
        .negs
        .iter()
        .map(|n| ((n.namespace.as_str(), n.name.as_str()), n))
        .collect();
    let groups: BTreeMap<&str, &Read<_>> = o.groups.iter().map(|g| (g.name.as_str(), g)).collect();

    let mut lbs: Vec<&Read<LbSpec>> = o.balancers.iter().collect();
    lbs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut services = Vec::new();
    // A VIP frontend belongs to the first LB (by name) that lists it.
    let mut taken: BTreeMap<Frontend, String> = BTreeMap::new();
    for lb in lbs {
        let object = object_name(Kind::L4LoadBalancer, &lb.namespace, &lb.name);
        let mut fault = |reason: String| {
            faults.push(Fault {
                object: object.clone(),
                reason,
            })
        };
        let name = format!("{}/{}", lb.namespace, lb.name);
        let check = match checks.get(&(lb.namespace.as_str(), lb.value.health_check.as_str())) {
            None => {
                fault(format!(
                    "HealthCheck {}/{} does not exist",
                    lb.namespace, lb.value.health_check
                ));
                continue;
            }
            Some(Read { value: None, .. }) => {
                fault(format!(
                    "HealthCheck {}/{} has no status yet",
                    lb.namespace, lb.value.health_check
                ));
                continue;
            }
            Some(Read { value: Some(c), .. }) => {
                match check_health(
                    "status",
                    &RawCheck {
                        port: c.port,
                        path: &c.request_path,
                        interval_s: c.check_interval_sec,
                        timeout_s: c.timeout_sec,
                        healthy: c.healthy_threshold,
                        unhealthy: c.unhealthy_threshold,
                    },
                ) {
                    Ok(h) => h,
                    Err(e) => {
                        fault(format!(
                            "HealthCheck {}/{}: {e}",
                            lb.namespace, lb.value.health_check
                        ));
                        continue;
                    }
                }
            }
        };
        let frontends = match frontends(lb, &name, &taken) {
            Ok(f) => f,
            Err(reason) => {
                fault(reason);
                continue;
            }
        };
        let (backends, missing) = backends(lb, &negs, &groups);
        for m in missing {
            fault(m);
        }
        match normalise(
            ServiceConfig {
                name: name.clone(),
                frontends,
                health_check: check,
                backends,
            },
            "spec",
        ) {
            Ok(s) => {
                for f in &s.frontends {
                    taken.insert(*f, name.clone());
                }
                services.push(s);
            }
            Err(e) => fault(e.to_string()),
        }
    }
    (LbConfig { services }, faults)
}

fn frontends(
    lb: &Read<LbSpec>,
    name: &str,
    taken: &BTreeMap<Frontend, String>,
) -> Result<Vec<Frontend>, String> {
    let mut out = Vec::with_capacity(lb.value.frontends.len());
    for (i, f) in lb.value.frontends.iter().enumerate() {
        let at = format!("spec.frontends[{i}]");
        let fe = Frontend {
            address: f.ip_address,
            port: f.port,
            protocol: f.protocol.into(),
        };
        check_frontend(&at, &fe).map_err(|e| e.to_string())?;
        if let Some(other) = taken.get(&fe).filter(|o| o.as_str() != name) {
            return Err(format!(
                "{at}: {}:{} {:?} is already a frontend of {other}",
                fe.address, fe.port, fe.protocol
            ));
        }
        out.push(fe);
    }
    Ok(out)
}

/// The LB's backend nodes, and a reason per group it names that is not
/// there (the controller may not have written it yet: the others serve).
fn backends(
    lb: &Read<LbSpec>,
    negs: &BTreeMap<(&str, &str), &Read<super::objects::NegSpec>>,
    groups: &BTreeMap<&str, &Read<super::objects::GroupSpec>>,
) -> (Vec<BackendConfig>, Vec<String>) {
    let from = lb
        .value
        .backends
        .unwrap_or(if lb.value.network_endpoint_groups.is_empty() {
            BackendsFrom::InstanceGroups
        } else {
            BackendsFrom::NetworkEndpointGroups
        });
    let mut out = Vec::new();
    let mut missing = Vec::new();
    // A node in two groups (it moved zones) is listed once.
    let mut seen = BTreeSet::new();
    let mut add = |members: Option<Vec<BackendConfig>>, group: String| match members {
        None => missing.push(format!("{group} does not exist (yet)")),
        Some(members) => {
            for b in members {
                if seen.insert(b.node.clone()) {
                    out.push(b);
                }
            }
        }
    };
    match from {
        BackendsFrom::NetworkEndpointGroups => {
            for n in &lb.value.network_endpoint_groups {
                let neg = negs.get(&(lb.namespace.as_str(), n.as_str()));
                add(
                    neg.map(|g| g.value.endpoints.iter().map(|e| e.backend()).collect()),
                    format!("NetworkEndpointGroup {}/{n}", lb.namespace),
                );
            }
        }
        BackendsFrom::InstanceGroups => {
            for g in &lb.value.instance_groups {
                let group = groups.get(g.as_str());
                add(
                    group.map(|g| g.value.instances.iter().map(|i| i.backend()).collect()),
                    format!("InstanceGroup {g}"),
                );
            }
        }
    }
    (out, missing)
}
