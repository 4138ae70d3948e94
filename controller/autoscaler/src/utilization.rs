//! A node's utilisation as scale-down reads it: the requests of the pods on
//! it, DaemonSet and mirror pods included, over its allocatable, for cpu
//! and for memory; the larger of the two decides (C2, C4). Finished pods
//! are not counted.

use serde::Serialize;
use sluice_model::k8s::{Node, Pod};
use sluice_model::quantity;
use sluice_scheduler::resources::pod_demand;

use crate::error::InputError;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Utilization {
    pub cpu: f64,
    pub memory: f64,
}

impl Utilization {
    pub fn max(&self) -> f64 {
        self.cpu.max(self.memory)
    }
}

/// The utilisation of `node` with `pods` on it.
pub(crate) fn of<'p>(
    node: &Node,
    pods: impl IntoIterator<Item = &'p Pod>,
) -> Result<Utilization, InputError> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let object = format!("node {name}");
    let alloc = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let read =
        |key: &str,
         f: fn(&sluice_model::k8s::Quantity) -> Result<i128, quantity::QuantityError>| {
            alloc
                .and_then(|m| m.get(key))
                .map(|q| {
                    f(q).map_err(|e| {
                        InputError::new(&object, format!("status.allocatable.{key}"), e.to_string())
                    })
                })
                .transpose()
                .map(|v| v.unwrap_or(0))
        };
    let cpu = read("cpu", quantity::milli)?;
    let memory = read("memory", quantity::units)?;
    let (mut used_cpu, mut used_mem) = (0i128, 0i128);
    for p in pods {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let key = sluice_scheduler::pod_key(p);
        let d = pod_demand(p, &format!("pod {key}"))?;
        used_cpu += d.exact.cpu_milli;
        used_mem += d.exact.memory;
    }
    let share = |used: i128, have: i128| {
        if have > 0 {
            used as f64 / have as f64
        } else if used > 0 {
            f64::INFINITY
        } else {
            0.0
        }
    };
    Ok(Utilization {
        cpu: share(used_cpu, cpu),
        memory: share(used_mem, memory),
    })
}
