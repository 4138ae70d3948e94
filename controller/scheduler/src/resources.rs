//! Resource requests and allocatable as exact integers: a pod's effective
//! request (kube-scheduler's `PodRequests`: init containers, sidecars,
//! pod-level resources, overhead) and a node's allocatable.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use sluice_model::k8s::Quantity;
use sluice_model::quantity::{milli, units};

use crate::error::InputError;

pub(crate) const CPU: &str = "cpu";
pub(crate) const MEMORY: &str = "memory";
pub(crate) const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub(crate) const PODS: &str = "pods";

/// What kube-scheduler assumes a container without a cpu request uses,
/// for scoring only (`DefaultMilliCPURequest`, 100m).
pub(crate) const DEFAULT_CPU_MILLI: i128 = 100;
/// The same for memory (`DefaultMemoryRequest`, 200 MiB).
pub(crate) const DEFAULT_MEMORY: i128 = 200 * 1024 * 1024;

/// Amounts of the resources the fit filter compares: cpu in milli-cores,
/// memory and ephemeral storage in bytes, extended resources (`vendor/x`,
/// `hugepages-*`) in whole units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_milli: i128,
    pub memory: i128,
    pub ephemeral_storage: i128,
    pub scalar: BTreeMap<String, i128>,
}

impl Resources {
    pub(crate) fn add(&mut self, o: &Resources) {
        self.cpu_milli += o.cpu_milli;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    pub(crate) fn sub(&mut self, o: &Resources) {
        self.cpu_milli -= o.cpu_milli;
        self.memory -= o.memory;
        self.ephemeral_storage -= o.ephemeral_storage;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    fn max_with(&mut self, o: &Resources) {
        self.cpu_milli = self.cpu_milli.max(o.cpu_milli);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// Nothing requested at all: the fit filter then checks the pod count
    /// alone, as upstream does.
    pub(crate) fn is_zero(&self) -> bool {
        self.cpu_milli == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// Whether kube-scheduler counts a resource name beyond cpu, memory and
/// ephemeral storage: extended resources (`example.com/gpu`, not in the
/// `kubernetes.io/` namespace) and huge pages.
fn is_scalar(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || (name.contains('/') && !name.contains("kubernetes.io/"))
}

/// Reads a requests (or allocatable) map into [`Resources`]; `field` is
/// the map's path, for errors.
pub(crate) fn read_map(
    map: Option<&BTreeMap<String, Quantity>>,
    object: &str,
    field: &str,
) -> Result<Resources, InputError> {
    let mut r = Resources::default();
    for (name, q) in map.into_iter().flatten() {
        let bad = |e: sluice_model::quantity::QuantityError| {
            InputError::new(object, format!("{field}.{name}"), e.to_string())
        };
        // As the API server refuses them: a negative request would hand its
        // node room that is not there.
        let non_negative = |v: i128| {
            if v < 0 {
                Err(InputError::new(
                    object,
                    format!("{field}.{name}"),
                    format!("{:?} must be greater than or equal to 0", q.0),
                ))
            } else {
                Ok(v)
            }
        };
        match name.as_str() {
            CPU => r.cpu_milli = non_negative(milli(q).map_err(bad)?)?,
            MEMORY => r.memory = non_negative(units(q).map_err(bad)?)?,
            EPHEMERAL_STORAGE => r.ephemeral_storage = non_negative(units(q).map_err(bad)?)?,
            n if is_scalar(n) => {
                r.scalar
                    .insert(n.to_owned(), non_negative(units(q).map_err(bad)?)?);
            }
            _ => {}
        }
    }
    Ok(r)
}

/// A request as the filter sees it (`exact`) and as the scoring sees it
/// (`non_zero_*`: a container that names no cpu or memory request counts
/// as the defaults above, so empty pods do not all pile onto one node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    pub exact: Resources,
    pub non_zero_cpu: i128,
    pub non_zero_memory: i128,
}

impl Demand {
    pub(crate) fn add(&mut self, o: &Demand) {
        self.exact.add(&o.exact);
        self.non_zero_cpu += o.non_zero_cpu;
        self.non_zero_memory += o.non_zero_memory;
    }

    pub(crate) fn sub(&mut self, o: &Demand) {
        self.exact.sub(&o.exact);
        self.non_zero_cpu -= o.non_zero_cpu;
        self.non_zero_memory -= o.non_zero_memory;
    }

    fn max_with(&mut self, o: &Demand) {
        self.exact.max_with(&o.exact);
        self.non_zero_cpu = self.non_zero_cpu.max(o.non_zero_cpu);
        self.non_zero_memory = self.non_zero_memory.max(o.non_zero_memory);
    }
}

fn container_demand(c: &Container, object: &str, field: &str) -> Result<Demand, InputError> {
    let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let exact = read_map(requests, object, &format!("{field}.resources.requests"))?;
    let named = |n: &str| requests.is_some_and(|m| m.contains_key(n));
    Ok(Demand {
        non_zero_cpu: if named(CPU) {
            exact.cpu_milli
        } else {
            DEFAULT_CPU_MILLI
        },
        non_zero_memory: if named(MEMORY) {
            exact.memory
        } else {
            DEFAULT_MEMORY
        },
        exact,
    })
}

/// The pod's effective request, per resource: the larger of the app
/// containers' sum (plus every sidecar, an init container with
/// `restartPolicy: Always`, since it keeps running) and the peak of the
/// init phase (each ordinary init container plus the sidecars started
/// before it); pod-level `spec.resources.requests` replace the containers'
/// cpu and memory where set; `spec.overhead` is added last.
pub fn pod_demand(pod: &Pod, object: &str) -> Result<Demand, InputError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Demand::default());
    };
    let mut total = Demand::default();
    for (i, c) in spec.containers.iter().enumerate() {
        total.add(&container_demand(
            c,
            object,
            &format!("spec.containers[{i}]"),
        )?);
    }
    let mut sidecars = Demand::default();
    let mut init_peak = Demand::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let d = container_demand(c, object, &format!("spec.initContainers[{i}]"))?;
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            total.add(&d);
            sidecars.add(&d);
            sidecars.clone()
        } else {
            let mut with = d;
            with.add(&sidecars);
            with
        };
        init_peak.max_with(&phase);
    }
    total.max_with(&init_peak);
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    if let Some(map) = pod_level {
        let r = read_map(Some(map), object, "spec.resources.requests")?;
        if map.contains_key(CPU) {
            total.exact.cpu_milli = r.cpu_milli;
            total.non_zero_cpu = r.cpu_milli;
        }
        if map.contains_key(MEMORY) {
            total.exact.memory = r.memory;
            total.non_zero_memory = r.memory;
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        let o = read_map(Some(overhead), object, "spec.overhead")?;
        total.non_zero_cpu += o.cpu_milli;
        total.non_zero_memory += o.memory;
        total.exact.add(&o);
    }
    Ok(total)
}

/// A node's `status.allocatable` and its pod limit (`pods`). A node that
/// reports nothing can hold nothing, as upstream reads a missing value as 0.
pub(crate) fn node_allocatable(node: &Node, object: &str) -> Result<(Resources, i128), InputError> {
    let map = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let r = read_map(map, object, "status.allocatable")?;
    let pods = match map.and_then(|m| m.get(PODS)) {
        Some(q) => units(q)
            .map_err(|e| InputError::new(object, "status.allocatable.pods", e.to_string()))?,
        None => 0,
    };
    Ok((r, pods))
}
