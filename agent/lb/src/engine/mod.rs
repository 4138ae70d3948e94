//! The engines: the same `sluice_datapath::lb` decision as a TC program on
//! the load balancer's interface (kernel) or in user space (emulated).
//!
//! - [`tables`]: [`LbDesired`] laid out as the program's tables, once, for
//!   both engines;
//! - [`kernel`]: the TC program, attached to the interface's ingress;
//! - [`emulated`]: a relay owning the wire, the kernel given a TAP.

pub mod emulated;
pub mod kernel;
pub mod tables;

use std::collections::BTreeMap;

use sluice_datapath::lb::{LbEvent, LbVerdict};

use crate::desired::{BackendId, LbDesired};

/// Packet counters an engine keeps, for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbCounters {
    /// Frames delivered to each backend.
    pub packets_per_backend: BTreeMap<BackendId, u64>,
    /// Live entries in the flow table.
    pub flows: u64,
    /// Frames by what happened to them (`sluice_datapath::lb::LbEvent`
    /// names, `lb_new_flow`, `lb_no_backend`, …) and by verdict
    /// (`lb_pass`, `lb_drop`, `lb_tx`); the emulated engine adds
    /// `lb_relay_errors`.
    pub events: BTreeMap<&'static str, u64>,
}

/// Every event and verdict counter by name, from a reader by index
/// (events first, then verdicts: the kernel's per-CPU array layout).
pub(crate) fn event_map(count: impl Fn(usize) -> u64) -> BTreeMap<&'static str, u64> {
    let events = LbEvent::ALL.iter().map(|e| (e.name(), count(e.index())));
    let verdicts = LbVerdict::KINDS
        .iter()
        .map(|v| (v.name(), count(v.counter_index() as usize)));
    events.chain(verdicts).collect()
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

/// Start the kernel engine on `iface` in the calling thread's network
/// namespace: load the BPF object (`object`, else
/// [`kernel::default_object`]) and attach it to the interface's TC
/// ingress. Nothing is delivered until the first [`LbEngine::apply`].
pub fn start_kernel(
    iface: &str,
    object: Option<&std::path::Path>,
) -> anyhow::Result<Box<dyn LbEngine>> {
    Ok(Box::new(kernel::KernelEngine::start(iface, object)?))
}

/// Start the emulated engine on `iface` in the calling thread's network
/// namespace: the link moves into a private namespace the relay owns and
/// a TAP with its name, MAC, addresses and routes takes its place.
pub fn start_emulated(iface: &str) -> anyhow::Result<Box<dyn LbEngine>> {
    Ok(Box::new(emulated::EmulatedEngine::start(iface)?))
}
