//! The four `sluice.dev/v1` kinds the controller writes, read from kube-rs
//! [`DynamicObject`]s into small structs holding only the fields the load
//! balancer uses. Unknown fields are ignored (the controller may add
//! some); a field that is there but wrong makes the object fail with the
//! field's path, and the object is left out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::file::WireProtocol;
use super::BackendConfig;

pub const GROUP: &str = "sluice.dev";
pub const VERSION: &str = "v1";

/// The kinds read, with their plural and whether they are namespaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    L4LoadBalancer,
    HealthCheck,
    NetworkEndpointGroup,
    InstanceGroup,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::L4LoadBalancer,
        Kind::HealthCheck,
        Kind::NetworkEndpointGroup,
        Kind::InstanceGroup,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::L4LoadBalancer => "L4LoadBalancer",
            Kind::HealthCheck => "HealthCheck",
            Kind::NetworkEndpointGroup => "NetworkEndpointGroup",
            Kind::InstanceGroup => "InstanceGroup",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::L4LoadBalancer => "l4loadbalancers",
            Kind::HealthCheck => "healthchecks",
            Kind::NetworkEndpointGroup => "networkendpointgroups",
            Kind::InstanceGroup => "instancegroups",
        }
    }

    /// What kube-rs needs to watch the kind without a Rust type.
    pub fn api_resource(self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, self.name());
        ApiResource::from_gvk_with_plural(&gvk, self.plural())
    }
}

/// An object that could not be read, or a reason one is left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{object}: {reason}")]
pub struct Fault {
    /// `Kind namespace/name` (or `Kind name` when cluster-scoped).
    pub object: String,
    pub reason: String,
}

/// `Kind ns/name` or `Kind name`.
pub fn object_name(kind: Kind, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{} {name}", kind.name())
    } else {
        format!("{} {namespace}/{name}", kind.name())
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiFrontend {
    pub ip_address: IpAddr,
    pub port: u16,
    pub protocol: WireProtocol,
}

/// Where an L4LoadBalancer's backends come from.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum BackendsFrom {
    NetworkEndpointGroups,
    InstanceGroups,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LbSpec {
    pub backends: Option<BackendsFrom>,
    #[serde(default)]
    pub frontends: Vec<ApiFrontend>,
    pub health_check: String,
    #[serde(default)]
    pub network_endpoint_groups: Vec<String>,
    #[serde(default)]
    pub instance_groups: Vec<String>,
}

/// A HealthCheck's effective check (its status), every field required.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiCheck {
    pub port: u16,
    pub request_path: String,
    pub check_interval_sec: u64,
    pub timeout_sec: u64,
    pub healthy_threshold: u32,
    pub unhealthy_threshold: u32,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    pub instance: String,
    pub ip_address: Ipv4Addr,
    pub ipv6_address: Option<Ipv6Addr>,
}

impl ApiEndpoint {
    pub fn backend(&self) -> BackendConfig {
        BackendConfig {
            node: self.instance.clone(),
            address: self.ip_address,
            ipv6: self.ipv6_address,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NegSpec {
    #[serde(default)]
    pub endpoints: Vec<ApiEndpoint>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiInstance {
    pub name: String,
    pub ip_address: Ipv4Addr,
    pub ipv6_address: Option<Ipv6Addr>,
}

impl ApiInstance {
    pub fn backend(&self) -> BackendConfig {
        BackendConfig {
            node: self.name.clone(),
            address: self.ip_address,
            ipv6: self.ipv6_address,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GroupSpec {
    #[serde(default)]
    pub instances: Vec<ApiInstance>,
}

/// One object read: where it lives and the part of it used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<T> {
    pub namespace: String,
    pub name: String,
    pub value: T,
}

/// Everything read from the four kinds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Objects {
    pub balancers: Vec<Read<LbSpec>>,
    /// `None`: the controller has not written the status yet.
    pub checks: Vec<Read<Option<ApiCheck>>>,
    pub negs: Vec<Read<NegSpec>>,
    pub groups: Vec<Read<GroupSpec>>,
}

/// Reads `field` (`spec` or `status`) of `obj`; `Ok(None)` when absent.
fn field<T: DeserializeOwned>(
    kind: Kind,
    obj: &DynamicObject,
    field: &str,
) -> Result<Option<Read<T>>, Fault> {
    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let object = object_name(kind, &namespace, &name);
    if name.is_empty() {
        return Err(Fault {
            object,
            reason: "metadata.name is empty".to_string(),
        });
    }
    let Some(v) = obj.data.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let value = serde_path_to_error::deserialize(v).map_err(|e| Fault {
        object: object.clone(),
        reason: format!("{field}.{}: {}", e.path(), e.inner()),
    })?;
    Ok(Some(Read {
        namespace,
        name,
        value,
    }))
}

/// A spec that must be there.
fn spec<T: DeserializeOwned>(kind: Kind, obj: &DynamicObject) -> Result<Read<T>, Fault> {
    field(kind, obj, "spec")?.ok_or_else(|| Fault {
        object: object_name(
            kind,
            obj.metadata.namespace.as_deref().unwrap_or(""),
            obj.metadata.name.as_deref().unwrap_or(""),
        ),
        reason: "has no spec".to_string(),
    })
}

/// Reads every object; those that fail are left out and reported.
pub fn read_all<'a>(
    lbs: impl IntoIterator<Item = &'a DynamicObject>,
    checks: impl IntoIterator<Item = &'a DynamicObject>,
    negs: impl IntoIterator<Item = &'a DynamicObject>,
    groups: impl IntoIterator<Item = &'a DynamicObject>,
) -> (Objects, Vec<Fault>) {
    let mut faults = Vec::new();
    let o = Objects {
        balancers: keep(lbs, &mut faults, |d| spec(Kind::L4LoadBalancer, d)),
        checks: keep(checks, &mut faults, check),
        negs: keep(negs, &mut faults, |d| spec(Kind::NetworkEndpointGroup, d)),
        groups: keep(groups, &mut faults, |d| spec(Kind::InstanceGroup, d)),
    };
    (o, faults)
}

/// The objects `read` takes; the others' faults go to `faults`.
fn keep<'a, T>(
    objects: impl IntoIterator<Item = &'a DynamicObject>,
    faults: &mut Vec<Fault>,
    read: impl Fn(&DynamicObject) -> Result<T, Fault>,
) -> Vec<T> {
    objects
        .into_iter()
        .filter_map(|d| read(d).map_err(|f| faults.push(f)).ok())
        .collect()
}

/// A HealthCheck without status yet is kept as such: its LB is then
/// skipped with that reason, not with "no such HealthCheck".
fn check(d: &DynamicObject) -> Result<Read<Option<ApiCheck>>, Fault> {
    Ok(match field(Kind::HealthCheck, d, "status")? {
        Some(r) => Read {
            namespace: r.namespace,
            name: r.name,
            value: Some(r.value),
        },
        None => Read {
            namespace: d.metadata.namespace.clone().unwrap_or_default(),
            name: d.metadata.name.clone().unwrap_or_default(),
            value: None,
        },
    })
}
