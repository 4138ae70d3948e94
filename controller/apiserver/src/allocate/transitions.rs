//! What a create or an update of a Service does to its allocations,
//! decided without I/O: the values the client left out of an update kept
//! (kube-apiserver's `patchAllocatedValues`, so a second `kubectl apply`
//! of the same manifest changes nothing), the fields a type change leaves
//! behind dropped, node ports shared by one port number on TCP and UDP,
//! the health-check node port of a LoadBalancer with
//! `externalTrafficPolicy: Local`; and from the values held before and
//! after, what is claimed, what must be chosen and what is released.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use super::{families, Alloc, Claim, Config, FieldError, Need, Plan, Pool, Refusal};
use super::{ServiceView, Slot};

/// The plan for writing `svc` over `old` (`None`: a create); `svc` gets
/// its allocation fields as far as they are known (the needs are filled
/// in once chosen, with [`super::fill`]).
pub fn plan(
    cfg: &Config,
    old: Option<&Value>,
    svc: &mut Value,
) -> Result<(Plan, ServiceView), Refusal> {
    let old = old.map(ServiceView::read);
    if let Some(old) = &old {
        drop_left_behind(svc, old);
    }
    let mut new = ServiceView::read(svc);
    let mut needs = match &old {
        None => {
            families::normalize(&mut new, None);
            check_external_name(&new)?;
            families::init(cfg, &mut new, None)?;
            families::needs_on_create(&mut new)
        }
        Some(old) => {
            keep_allocated(&mut new, old);
            families::normalize(&mut new, Some(old));
            drop_type_dependent(&mut new, old)?;
            check_external_name(&new)?;
            families::init(cfg, &mut new, Some(old))?;
            families::needs_on_update(&mut new, old)?
        }
    };
    needs.extend(node_port_needs(&mut new)?);
    // What the old object holds, faults and all (it is stored already).
    let was_held: BTreeSet<Alloc> = old
        .as_ref()
        .map(|o| collect(o).0.into_iter().map(|c| c.alloc).collect())
        .unwrap_or_default();
    if new.needs_health_check() && new.health_check == 0 {
        needs.push(Need {
            slot: Slot::HealthCheck,
            pool: Pool::Port,
        });
    }
    let now = held(&new)?;
    let held_now: BTreeSet<Alloc> = now.iter().map(|c| c.alloc).collect();
    let claims: Vec<Claim> = now
        .into_iter()
        .filter(|c| !was_held.contains(&c.alloc))
        .collect();
    for c in &claims {
        cfg.in_range(&c.alloc).map_err(|r| c.out_of_range(&r))?;
    }
    let releases = was_held.difference(&held_now).copied().collect();
    new.write(svc);
    Ok((
        Plan {
            claims,
            needs,
            releases,
        },
        new,
    ))
}

/// Every value `s` holds, with the field that holds it first; refused if
/// one is no port or two port numbers share a node port.
pub fn held(s: &ServiceView) -> Result<Vec<Claim>, Refusal> {
    match collect(s) {
        (held, faults) if faults.is_empty() => Ok(held),
        (_, mut faults) => Err(faults.swap_remove(0)),
    }
}

/// The values `s` holds, and the faults found on the way.
fn collect(s: &ServiceView) -> (Vec<Claim>, Vec<Refusal>) {
    let mut out: Vec<Claim> = Vec::new();
    let mut faults = Vec::new();
    if !s.is_external_name() && !s.is_headless() {
        for (i, ip) in s.cluster_ips.iter().enumerate() {
            if let Ok(ip) = ip.parse() {
                out.push(Claim {
                    alloc: Alloc::Ip(ip),
                    slot: Slot::ClusterIp(i),
                    field: format!("spec.clusterIPs[{i}]"),
                });
            }
        }
    }
    let port = |n: i64, slot: Slot, field: String| -> Result<Claim, Refusal> {
        // A number that is no port: refused naming the port range.
        let claim = |p| Claim {
            alloc: Alloc::Port(p),
            slot: slot.clone(),
            field: field.clone(),
        };
        u16::try_from(n).map(claim).map_err(|_| {
            // The value as sent: no claim can hold it.
            Refusal::invalid(
                &field,
                serde_json::json!(n),
                "provided port is not in the valid range. The range of valid ports is 1-65535",
            )
        })
    };
    let mut by_number: HashMap<i64, i64> = HashMap::new();
    if s.needs_node_ports() {
        for (i, p) in s.ports.iter().enumerate() {
            if p.node_port == 0 {
                continue;
            }
            let c = match port(
                p.node_port,
                Slot::NodePort(vec![i]),
                format!("spec.ports[{i}].nodePort"),
            ) {
                Ok(c) => c,
                Err(e) => {
                    faults.push(e);
                    continue;
                }
            };
            match by_number.insert(p.node_port, p.port) {
                // One port number on TCP and UDP shares its node port.
                Some(n) if n == p.port => {}
                // Two port numbers on one node port: the second is taken.
                Some(_) => faults.push(c.taken()),
                None => out.push(c),
            }
        }
    }
    if s.needs_health_check() && s.health_check != 0 {
        match port(
            s.health_check,
            Slot::HealthCheck,
            "spec.healthCheckNodePort".into(),
        ) {
            Ok(c) if by_number.contains_key(&s.health_check) => faults.push(c.taken()),
            Ok(c) => out.push(c),
            Err(e) => faults.push(e),
        }
    }
    (out, faults)
}

/// Node ports to choose: one per port number whose ports ask for none
/// (a port number with a node port on one protocol gives it to the other).
fn node_port_needs(s: &mut ServiceView) -> Result<Vec<Need>, Refusal> {
    if !s.needs_node_ports() {
        return Ok(Vec::new());
    }
    let mut needs: Vec<Need> = Vec::new();
    let mut need_of: HashMap<i64, usize> = HashMap::new();
    for i in 0..s.ports.len() {
        if s.ports[i].node_port != 0 || !s.allocates_node_ports() {
            continue;
        }
        let number = s.ports[i].port;
        if let Some(np) = s
            .ports
            .iter()
            .find(|p| p.port == number && p.node_port != 0)
            .map(|p| p.node_port)
        {
            s.ports[i].node_port = np;
            continue;
        }
        match need_of.get(&number) {
            Some(&n) => {
                if let Slot::NodePort(idx) = &mut needs[n].slot {
                    idx.push(i);
                }
            }
            None => {
                need_of.insert(number, needs.len());
                needs.push(Need {
                    slot: Slot::NodePort(vec![i]),
                    pool: Pool::Port,
                });
            }
        }
    }
    Ok(needs)
}

/// kube-apiserver's `patchAllocatedValues`: what an update left out and
/// the old object had allocated is kept.
fn keep_allocated(new: &mut ServiceView, old: &ServiceView) {
    if !old.is_external_name() && !new.is_external_name() {
        if new.cluster_ip.is_empty() {
            new.cluster_ip = old.cluster_ip.clone();
        }
        if new.cluster_ips.is_empty() && !old.cluster_ips.is_empty() {
            new.cluster_ips = old.cluster_ips.clone();
        }
    }
    if old.needs_node_ports() && new.needs_node_ports() {
        let used_new: BTreeSet<i64> = new.ports.iter().map(|p| p.node_port).collect();
        let by_name: HashMap<&str, i64> = old
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.node_port))
            .collect();
        for p in &mut new.ports {
            if p.node_port == 0 {
                if let Some(&was) = by_name.get(p.name.as_str()) {
                    if was != 0 && !used_new.contains(&was) {
                        p.node_port = was;
                    }
                }
            }
        }
    }
    if old.needs_health_check() && new.needs_health_check() && new.health_check == 0 {
        new.health_check = old.health_check;
    }
}

/// Fields of the old type an update left as they were: dropped (set to
/// something else, they are refused as kube-apiserver's validation does).
fn drop_type_dependent(new: &mut ServiceView, old: &ServiceView) -> Result<(), Refusal> {
    let mut errs = Vec::new();
    if !new.needs_node_ports() {
        let old_ports: BTreeSet<i64> = old.ports.iter().map(|p| p.node_port).collect();
        for (i, p) in new.ports.iter_mut().enumerate() {
            if p.node_port == 0 {
                continue;
            }
            if old.needs_node_ports() && old_ports.contains(&p.node_port) {
                p.node_port = 0;
            } else {
                errs.push(FieldError::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    format!("may not be used when `type` is '{}'", new.kind),
                ));
            }
        }
    }
    if new.is_external_name() && !old.is_external_name() {
        if new.cluster_ip == old.cluster_ip {
            new.cluster_ip.clear();
        }
        if new.cluster_ips == old.cluster_ips {
            new.cluster_ips.clear();
        }
        if new.families == old.families {
            new.families.clear();
        }
        if new.policy == old.policy {
            new.policy = None;
        }
    }
    if !new.needs_health_check() && new.health_check != 0 {
        if old.needs_health_check() && new.health_check == old.health_check {
            new.health_check = 0;
        } else {
            errs.push(hc_not_allowed(new.health_check));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(errs))
    }
}

fn hc_not_allowed(hc: i64) -> FieldError {
    FieldError::invalid(
        "spec.healthCheckNodePort",
        json!(hc),
        "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
    )
}

/// An ExternalName Service has no cluster IP; nor does a new Service
/// without a health check have a health-check node port.
fn check_external_name(new: &ServiceView) -> Result<(), Refusal> {
    let mut errs = Vec::new();
    if new.is_external_name() && !new.cluster_ip.is_empty() && new.cluster_ip != "None" {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            json!(new.cluster_ip),
            "may not be set for ExternalName services",
        ));
    }
    if !new.needs_health_check() && new.health_check != 0 {
        errs.push(hc_not_allowed(new.health_check));
    }
    if !new.needs_node_ports() {
        for (i, p) in new.ports.iter().enumerate() {
            if p.node_port != 0 {
                errs.push(FieldError::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    format!("may not be used when `type` is '{}'", new.kind),
                ));
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(errs))
    }
}

/// The spec fields the old type had and the new one does not use, left
/// as they were by the client (the defaults of the old type): gone.
fn drop_left_behind(svc: &mut Value, old: &ServiceView) {
    let new = ServiceView::read(svc);
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let old_spec_has = |k: &str, v: Option<&Value>| match k {
        "externalTrafficPolicy" => v.and_then(Value::as_str) == Some(&old.external_traffic_policy),
        _ => v.and_then(Value::as_bool) == Some(old.allocate_lb_node_ports),
    };
    if old.needs_node_ports()
        && !new.needs_node_ports()
        && old_spec_has("externalTrafficPolicy", spec.get("externalTrafficPolicy"))
    {
        spec.remove("externalTrafficPolicy");
    }
    if old.kind == "LoadBalancer"
        && new.kind != "LoadBalancer"
        && old_spec_has(
            "allocateLoadBalancerNodePorts",
            spec.get("allocateLoadBalancerNodePorts"),
        )
    {
        spec.remove("allocateLoadBalancerNodePorts");
    }
}

#[cfg(test)]
mod tests;
