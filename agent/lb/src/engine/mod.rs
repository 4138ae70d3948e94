//! The engines: the same `sluice_datapath::lb` decision as a TC program on
//! the load balancer's interface (kernel) or in user space (emulated).

use std::collections::BTreeMap;

use crate::desired::{BackendId, LbDesired};

/// Packet counters an engine keeps, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbCounters {
    /// Frames delivered to each backend.
    pub packets_per_backend: BTreeMap<BackendId, u64>,
    /// Live entries in the flow table.
    pub flows: u64,
}

/// A load-balancer engine attached to one interface (one-armed: frames come
/// in and leave by the same link).
pub trait LbEngine: Send {
    /// `"emulated"` or `"kernel"`.
    fn kind(&self) -> &'static str;
    /// Swap in frontends, backends and Maglev tables; the program never sees
    /// a half state. The flow table is kept.
    fn apply(&mut self, desired: &LbDesired) -> anyhow::Result<()>;
    /// The counters now.
    fn counters(&self) -> anyhow::Result<LbCounters>;
    /// Detach and remove everything the engine made.
    fn shutdown(self: Box<Self>) -> anyhow::Result<()>;
}

/// The kernel engine on `iface` (the packet program from `object`, or the
/// engine's default). Placeholder until the engines are merged.
pub fn start_kernel(
    iface: &str,
    object: Option<&std::path::Path>,
) -> anyhow::Result<Box<dyn LbEngine>> {
    let _ = object;
    anyhow::bail!("the kernel load-balancer engine on {iface}: not merged yet")
}

/// The emulated engine on `iface`. Placeholder until the engines are
/// merged.
pub fn start_emulated(iface: &str) -> anyhow::Result<Box<dyn LbEngine>> {
    anyhow::bail!("the emulated load-balancer engine on {iface}: not merged yet")
}
