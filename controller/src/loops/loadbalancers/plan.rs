//! The load-balancer loop's decisions, pure: from one Service, the nodes,
//! the cluster's subsetting state and the objects written before, what to
//! create, change and delete so that the four `sluice.dev` kinds say what
//! `sluice-subsetting` decides — and nothing when nothing changed.
//!
//! - The kind (P7) and backends (N5) are decided when the `L4LoadBalancer`
//!   is first made and read back from it afterwards; annotations that
//!   later ask for another kind only give the condition
//!   [`ANNOTATION_IGNORED`].
//! - NEG members are computed with the previous members read from the
//!   NEGs themselves, so a restarted controller keeps them (N2's "stable
//!   as nodes come and go").
//! - Warnings (N3, N4) go into the LB's status; each one new to the
//!   status is also an Event on the Service.

use std::collections::{BTreeMap, BTreeSet};

use sluice_model::k8s::jiff::Timestamp;
use sluice_model::k8s::{ObjectMeta, OwnerReference, Service, Time};
use sluice_model::load_balancer::{
    neg_name, zone_label, Backends, GroupInstance, HealthCheck, HealthCheckSpec, HealthCheckStatus,
    InstanceGroup, InstanceGroupSpec, InstanceGroupStatus, L4LoadBalancer, L4LoadBalancerSpec,
    L4LoadBalancerStatus, LoadBalancerCondition, LoadBalancerType, NetworkEndpoint,
    NetworkEndpointGroup, NetworkEndpointGroupSpec, NetworkEndpointType, ANNOTATION_IGNORED,
};
use sluice_model::validation::health_check_overrides;
use sluice_subsetting::health_check::{health_check, HealthCheckOverrides, NODE_HEALTH_PORT};
use sluice_subsetting::instance_groups::instance_groups;
use sluice_subsetting::lb_kind::{
    kind_after_creation, kind_at_creation, InternalBackend, LbKind, RequestedKind, Subsetting,
};
use sluice_subsetting::node::fall_back_to_draining;
use sluice_subsetting::{compute, ServiceKey, Subset, SubsetService, TrafficPolicy};

use super::inputs::{
    frontends, health_check_node_port, is_load_balancer, policy, traffic_policy, NodeFacts,
};

/// The Event reason of a warning (N3's or N4's limit).
pub const TOO_MANY_BACKENDS: &str = "TooManyBackends";

/// What was written for one Service before this decision.
#[derive(Debug, Default, Clone, Copy)]
pub struct Existing<'a> {
    pub lb: Option<&'a L4LoadBalancer>,
    pub hc: Option<&'a HealthCheck>,
    /// The NEGs whose `spec.service` is this Service.
    pub negs: &'a [&'a NetworkEndpointGroup],
}

/// One Service's decision input.
pub struct Inputs<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// `None`: deleted.
    pub service: Option<&'a Service>,
    pub nodes: &'a [NodeFacts],
    /// Nodes with a serving endpoint of the Service (read for `Local`).
    pub serving: BTreeSet<String>,
    pub subsetting: Subsetting,
    pub existing: Existing<'a>,
    /// What this process already reported as Events for the Service (the
    /// subjects of its warnings, and [`ANNOTATION_IGNORED`]): the status
    /// it wrote with them may not be in the cache yet when the next
    /// change wakes the Service, and an Event is news only once.
    pub reported: &'a BTreeSet<String>,
    pub now: Timestamp,
}

/// An Event to report on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub reason: &'static str,
    pub message: String,
}

/// The writes for one Service; empty when everything is as decided.
#[derive(Debug, Default)]
pub struct Plan {
    pub create_lb: Option<L4LoadBalancer>,
    /// The stored LB with its spec as decided (its resourceVersion kept,
    /// so a write that lost a race is a conflict, decided again).
    pub update_lb: Option<L4LoadBalancer>,
    pub lb_status: Option<L4LoadBalancerStatus>,
    pub create_hc: Option<HealthCheck>,
    pub hc_status: Option<HealthCheckStatus>,
    pub create_negs: Vec<NetworkEndpointGroup>,
    pub update_negs: Vec<NetworkEndpointGroup>,
    pub delete_negs: Vec<String>,
    pub delete_lb: bool,
    pub delete_hc: bool,
    pub events: Vec<Report>,
    /// What is reported once this plan is written: the `reported` of the
    /// next decision for the Service.
    pub reported: BTreeSet<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create_lb.is_none()
            && self.update_lb.is_none()
            && self.lb_status.is_none()
            && self.create_hc.is_none()
            && self.hc_status.is_none()
            && self.create_negs.is_empty()
            && self.update_negs.is_empty()
            && self.delete_negs.is_empty()
            && !self.delete_lb
            && !self.delete_hc
            && self.events.is_empty()
    }

    /// How many objects the plan writes (Events aside).
    pub fn writes(&self) -> usize {
        [
            self.create_lb.is_some(),
            self.update_lb.is_some(),
            self.lb_status.is_some(),
            self.create_hc.is_some(),
            self.hc_status.is_some(),
            self.delete_lb,
            self.delete_hc,
        ]
        .iter()
        .filter(|w| **w)
        .count()
            + self.create_negs.len()
            + self.update_negs.len()
            + self.delete_negs.len()
    }
}

/// The kind as the LB object spells it.
fn spelled(kind: LbKind) -> (LoadBalancerType, Backends) {
    match kind {
        LbKind::Internal(InternalBackend::Negs) => {
            (LoadBalancerType::Internal, Backends::NetworkEndpointGroups)
        }
        LbKind::Internal(InternalBackend::InstanceGroups) => {
            (LoadBalancerType::Internal, Backends::InstanceGroups)
        }
        // External LBs hold every node: the shared instance groups (a
        // target pool lists the same instances).
        LbKind::ExternalBackendService => (
            LoadBalancerType::ExternalBackendService,
            Backends::InstanceGroups,
        ),
        LbKind::ExternalTargetPool => (
            LoadBalancerType::ExternalTargetPool,
            Backends::InstanceGroups,
        ),
    }
}

/// The kind recorded in an LB object.
fn recorded(spec: &L4LoadBalancerSpec) -> LbKind {
    match (spec.type_, spec.backends) {
        (LoadBalancerType::Internal, Backends::NetworkEndpointGroups) => {
            LbKind::Internal(InternalBackend::Negs)
        }
        (LoadBalancerType::Internal, Backends::InstanceGroups) => {
            LbKind::Internal(InternalBackend::InstanceGroups)
        }
        (LoadBalancerType::ExternalBackendService, _) => LbKind::ExternalBackendService,
        (LoadBalancerType::ExternalTargetPool, _) => LbKind::ExternalTargetPool,
    }
}

fn requested_name(r: RequestedKind) -> &'static str {
    match r {
        RequestedKind::Internal => "Internal",
        RequestedKind::ExternalBackendService => "ExternalBackendService",
        RequestedKind::ExternalTargetPool => "ExternalTargetPool",
    }
}

fn owned_by(svc: &Service) -> Option<Vec<OwnerReference>> {
    let uid = svc.metadata.uid.clone()?;
    Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }])
}

fn meta(namespace: &str, name: &str, svc: &Service) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        owner_references: owned_by(svc),
        ..Default::default()
    }
}

/// The effective health check, and a warning when the Service cannot have
/// the one asked for (a `Local` Service without its `healthCheckNodePort`:
/// probed on the node's port instead, so the LB still has a check).
fn effective_check(
    policy: TrafficPolicy,
    node_port: Option<i64>,
    overrides: &HealthCheckOverrides,
) -> (HealthCheckStatus, Option<String>) {
    let (check, warning) = match health_check(policy, node_port, overrides) {
        Ok(c) => (Ok(c), None),
        Err(e) => (
            health_check(policy, Some(i64::from(NODE_HEALTH_PORT)), overrides).or_else(|_| {
                health_check(
                    policy,
                    Some(i64::from(NODE_HEALTH_PORT)),
                    &HealthCheckOverrides::default(),
                )
            }),
            Some(format!(
                "health check: {e}; probing with the defaults instead"
            )),
        ),
    };
    let status = check.map_or_else(
        |_| HealthCheckStatus::default(),
        |c| HealthCheckStatus {
            port: i64::from(c.port),
            request_path: c.path,
            check_interval_sec: i64::from(c.interval_seconds),
            timeout_sec: i64::from(c.timeout_seconds),
            healthy_threshold: i64::from(c.healthy_threshold),
            unhealthy_threshold: i64::from(c.unhealthy_threshold),
        },
    );
    (status, warning)
}

/// The previous members, per zone, as the NEGs hold them.
fn previous(key: &ServiceKey, negs: &[&NetworkEndpointGroup]) -> BTreeMap<ServiceKey, Subset> {
    let mut subset = Subset::default();
    for neg in negs {
        subset
            .zones
            .entry(neg.spec.zone.clone())
            .or_default()
            .extend(neg.spec.endpoints.iter().map(|e| e.instance.clone()));
    }
    BTreeMap::from([(key.clone(), subset)])
}

/// Everything written for a Service that is gone or no longer a
/// LoadBalancer. The HealthCheck goes only with an LB or when the Service
/// made it: one a user wrote ahead of the Service stays for it.
fn removal(name: &str, existing: &Existing<'_>) -> Plan {
    let hc_ours = existing.hc.is_some_and(|hc| {
        existing.lb.is_some()
            || super::super::owner_of(&hc.metadata, "Service").is_some_and(|(_, n)| n == name)
    });
    Plan {
        delete_lb: existing.lb.is_some(),
        delete_hc: hc_ours,
        delete_negs: existing
            .negs
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect(),
        ..Default::default()
    }
}

/// The NEG writes from the subset decided for `svc`.
fn neg_writes(
    inputs: &Inputs<'_>,
    svc: &Service,
    subset: &Subset,
    by_name: &BTreeMap<&str, &NodeFacts>,
    plan: &mut Plan,
) -> Vec<String> {
    let existing: BTreeMap<&str, &NetworkEndpointGroup> = inputs
        .existing
        .negs
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, *n)))
        .collect();
    let mut names = Vec::new();
    for (zone, members) in &subset.zones {
        let name = neg_name(inputs.name, zone);
        let spec = NetworkEndpointGroupSpec {
            network_endpoint_type: NetworkEndpointType::GceVmIp,
            service: inputs.name.to_string(),
            zone: zone.clone(),
            endpoints: members
                .iter()
                .filter_map(|m| by_name.get(m.as_str()))
                .map(|f| NetworkEndpoint {
                    instance: f.name.clone(),
                    ip_address: f.ipv4.clone().unwrap_or_default(),
                    ipv6_address: f.ipv6.clone(),
                })
                .collect(),
        };
        match existing.get(name.as_str()) {
            Some(old) if old.spec == spec => {}
            Some(old) => {
                let mut neg = (*old).clone();
                neg.spec = spec;
                plan.update_negs.push(neg);
            }
            None => {
                let mut neg = NetworkEndpointGroup::new(&name, spec);
                neg.metadata = meta(inputs.namespace, &name, svc);
                plan.create_negs.push(neg);
            }
        }
        names.push(name);
    }
    plan.delete_negs = existing
        .keys()
        .filter(|n| !names.iter().any(|m| m == *n))
        .map(|n| n.to_string())
        .collect();
    names
}

/// What a warning is about: the text before its first `": "` (`instance
/// group of zone zone-a`, `Service shop/web`), every warning being
/// written "<subject>: <what>".
fn subject(warning: &str) -> &str {
    warning.split_once(": ").map_or(warning, |(s, _)| s)
}

/// The status condition for annotations asking for another kind (P7).
fn annotation_condition(
    requested: RequestedKind,
    kind: (LoadBalancerType, Backends),
    before: Option<&L4LoadBalancerStatus>,
    now: Timestamp,
) -> LoadBalancerCondition {
    let since = before
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == ANNOTATION_IGNORED))
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.clone());
    LoadBalancerCondition {
        type_: ANNOTATION_IGNORED.into(),
        status: "True".into(),
        reason: "KindKeptAtCreation".into(),
        message: format!(
            "the Service's annotations now ask for a {} load balancer; this one was made {:?} \
             with {:?} and is not converted (a load balancer keeps the kind it was made with; \
             recreate the Service to change it)",
            requested_name(requested),
            kind.0,
            kind.1
        ),
        last_transition_time: Some(since.unwrap_or(Time(now))),
    }
}

/// One Service's plan.
pub fn plan(inputs: &Inputs<'_>) -> Plan {
    let Some(svc) = inputs.service.filter(|s| is_load_balancer(s)) else {
        return removal(inputs.name, &inputs.existing);
    };
    let mut plan = Plan::default();
    let by_name: BTreeMap<&str, &NodeFacts> =
        inputs.nodes.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut nodes: Vec<sluice_subsetting::Node> =
        by_name.values().filter_map(|f| f.decision_node()).collect();
    // Every node draining at once keeps them behind the LB, not none.
    fall_back_to_draining(&mut nodes);
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    let (kind, disagrees) = match inputs.existing.lb {
        Some(lb) => {
            let d = kind_after_creation(recorded(&lb.spec), &annotations);
            (d.kind, d.annotation_disagrees)
        }
        None => (
            kind_at_creation(&annotations, &inputs.subsetting, inputs.now.into()),
            None,
        ),
    };
    let (lb_type, backends) = spelled(kind);
    let ext_policy = policy(svc);
    let mut warnings = Vec::new();
    let (members, negs, groups) = match backends {
        Backends::NetworkEndpointGroups => {
            let key = ServiceKey::new(inputs.namespace, inputs.name);
            let service = match ext_policy {
                sluice_model::load_balancer::ExternalTrafficPolicy::Cluster => {
                    SubsetService::cluster(key.clone())
                }
                sluice_model::load_balancer::ExternalTrafficPolicy::Local => {
                    SubsetService::local(key.clone(), inputs.serving.iter().cloned())
                }
            };
            let outcome = compute(&nodes, &[service], &previous(&key, inputs.existing.negs));
            let (subset, found) = match outcome {
                Ok(mut o) => (o.subsets.remove(&key).unwrap_or_default(), o.warnings),
                // The nodes are filtered to ones it takes; should it refuse
                // anyway, the NEGs stay as they are and the status says why.
                Err(e) => {
                    warnings.push(format!("subsets not computed: {e}"));
                    (
                        previous(&key, inputs.existing.negs)
                            .remove(&key)
                            .unwrap_or_default(),
                        Vec::new(),
                    )
                }
            };
            warnings.extend(found.iter().map(ToString::to_string));
            let names = neg_writes(inputs, svc, &subset, &by_name, &mut plan);
            (subset.len(), names, Vec::new())
        }
        Backends::InstanceGroups => {
            plan.delete_negs = inputs
                .existing
                .negs
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            let g = instance_groups(&nodes);
            warnings.extend(g.warnings.iter().map(ToString::to_string));
            let members = g.zones.values().map(Vec::len).sum();
            (
                members,
                Vec::new(),
                g.zones.keys().map(|z| zone_label(z)).collect(),
            )
        }
    };
    let spec = L4LoadBalancerSpec {
        service: inputs.name.to_string(),
        type_: lb_type,
        backends,
        external_traffic_policy: ext_policy,
        frontends: frontends(svc),
        health_check: inputs.name.to_string(),
        network_endpoint_groups: negs,
        instance_groups: groups,
    };

    // The health check: made empty, its status the effective check.
    let overrides = inputs
        .existing
        .hc
        .map(|hc| health_check_overrides(&hc.spec))
        .unwrap_or_default();
    let (check, hc_warning) = effective_check(
        traffic_policy(ext_policy),
        health_check_node_port(svc),
        &overrides,
    );
    warnings.extend(hc_warning);
    match inputs.existing.hc {
        None => {
            let mut hc = HealthCheck::new(inputs.name, HealthCheckSpec::default());
            hc.metadata = meta(inputs.namespace, inputs.name, svc);
            hc.status = Some(check.clone());
            plan.create_hc = Some(hc);
            plan.hc_status = Some(check);
        }
        Some(hc) if hc.status.as_ref() != Some(&check) => plan.hc_status = Some(check),
        Some(_) => {}
    }

    let before = inputs.existing.lb.and_then(|lb| lb.status.as_ref());
    let status = L4LoadBalancerStatus {
        conditions: disagrees
            .map(|r| annotation_condition(r, (lb_type, backends), before, inputs.now))
            .into_iter()
            .collect(),
        warnings,
        members: Some(i64::try_from(members).unwrap_or(i64::MAX)),
    };
    // A warning is new when its subject is (a count that moves as nodes
    // come is no news: one Event per zone, not one per node added).
    let mut known: BTreeSet<&str> = before
        .map(|s| s.warnings.iter().map(|w| subject(w)).collect())
        .unwrap_or_default();
    known.extend(inputs.reported.iter().map(String::as_str));
    for w in status
        .warnings
        .iter()
        .filter(|w| !known.contains(subject(w)))
    {
        plan.events.push(Report {
            reason: TOO_MANY_BACKENDS,
            message: w.clone(),
        });
    }
    let had_condition = known.contains(ANNOTATION_IGNORED)
        || before.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == ANNOTATION_IGNORED && c.status == "True")
        });
    if let (Some(c), false) = (status.conditions.first(), had_condition) {
        plan.events.push(Report {
            reason: "AnnotationIgnored",
            message: c.message.clone(),
        });
    }
    plan.reported = status
        .warnings
        .iter()
        .map(|w| subject(w).to_string())
        .chain(
            status
                .conditions
                .iter()
                .filter(|c| c.type_ == ANNOTATION_IGNORED && c.status == "True")
                .map(|_| ANNOTATION_IGNORED.to_string()),
        )
        .collect();
    match inputs.existing.lb {
        None => {
            let mut lb = L4LoadBalancer::new(inputs.name, spec);
            lb.metadata = meta(inputs.namespace, inputs.name, svc);
            lb.status = Some(status.clone());
            plan.create_lb = Some(lb);
            plan.lb_status = Some(status);
        }
        Some(old) => {
            if old.spec != spec {
                let mut lb = old.clone();
                lb.spec = spec;
                plan.update_lb = Some(lb);
            }
            if old.status.clone().unwrap_or_default() != status {
                plan.lb_status = Some(status);
            }
        }
    }
    plan
}

/// The shared instance groups' writes (N4).
#[derive(Debug, Default)]
pub struct GroupPlan {
    pub create: Vec<InstanceGroup>,
    pub update: Vec<InstanceGroup>,
    /// (name, status) for groups whose status is not as decided.
    pub status: Vec<(String, InstanceGroupStatus)>,
    pub delete: Vec<String>,
}

impl GroupPlan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.update.is_empty()
            && self.status.is_empty()
            && self.delete.is_empty()
    }
}

/// One group per zone with an eligible node, while any LB uses instance
/// groups (`needed`); none otherwise.
pub fn plan_groups(nodes: &[NodeFacts], needed: bool, existing: &[&InstanceGroup]) -> GroupPlan {
    let mut plan = GroupPlan::default();
    let by_name: BTreeMap<&str, &NodeFacts> = nodes.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut decision: Vec<sluice_subsetting::Node> =
        by_name.values().filter_map(|f| f.decision_node()).collect();
    fall_back_to_draining(&mut decision);
    let groups = if needed {
        instance_groups(&decision)
    } else {
        Default::default()
    };
    let stored: BTreeMap<&str, &InstanceGroup> = existing
        .iter()
        .filter_map(|g| Some((g.metadata.name.as_deref()?, *g)))
        .collect();
    let mut wanted = BTreeSet::new();
    for (zone, names) in &groups.zones {
        let name = zone_label(zone);
        let spec = InstanceGroupSpec {
            zone: zone.clone(),
            instances: names
                .iter()
                .filter_map(|n| by_name.get(n.as_str()))
                .map(|f| GroupInstance {
                    name: f.name.clone(),
                    ip_address: f.ipv4.clone().unwrap_or_default(),
                    ipv6_address: f.ipv6.clone(),
                })
                .collect(),
        };
        let status = InstanceGroupStatus {
            warnings: groups
                .warnings
                .iter()
                .filter(|w| {
                    matches!(w, sluice_subsetting::Warning::InstanceGroupOverLimit { zone: z, .. } if z == zone)
                })
                .map(ToString::to_string)
                .collect(),
        };
        match stored.get(name.as_str()) {
            None => {
                let mut g = InstanceGroup::new(&name, spec);
                g.status = Some(status.clone());
                plan.create.push(g);
                plan.status.push((name.clone(), status));
            }
            Some(old) => {
                if old.spec != spec {
                    let mut g = (*old).clone();
                    g.spec = spec;
                    plan.update.push(g);
                }
                if old.status.clone().unwrap_or_default() != status {
                    plan.status.push((name.clone(), status));
                }
            }
        }
        wanted.insert(name);
    }
    plan.delete = stored
        .keys()
        .filter(|n| !wanted.contains(**n))
        .map(|n| n.to_string())
        .collect();
    plan
}
