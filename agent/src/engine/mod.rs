//! Engines run the packet program at the node's hooks (`docs/architecture.md`).
//!
//! The emulated engine ([`emulated`]) relays `nic0` and the pods' links
//! through user space; the kernel engine ([`kernel`]) loads the same program
//! as TC classifiers with aya. What both do to a pod's link is in
//! [`podnet`].

pub mod emulated;
pub mod kernel;
pub mod podnet;

/// A pod's link to the node (computed by `control`).
pub use crate::control::pods::PodLinkSpec as PodLink;
/// Full desired content of the control-side maps (computed by `control`).
pub use crate::control::MapContent;

pub trait Engine: Send {
    /// `"emulated"` or `"kernel"`.
    fn kind(&self) -> &'static str;
    /// Swap in services, endpoints, Maglev and node config at once; the
    /// program never sees a half state. Conntrack is kept.
    fn apply(&mut self, content: &MapContent) -> anyhow::Result<()>;
    /// Whether `content` fits what this engine can hold, asked before
    /// anything changes: a state too large is rejected like an invalid one
    /// (the error states the limit and how to raise it), never half applied.
    fn check_capacity(&self, content: &MapContent) -> anyhow::Result<()> {
        let _ = content;
        Ok(())
    }
    /// Wire a pod's link; idempotent (a changed spec re-plugs).
    fn plug_pod(&mut self, pod: &PodLink) -> anyhow::Result<()>;
    /// Remove what `plug_pod` made; unknown keys are fine.
    fn unplug_pod(&mut self, key: &str) -> anyhow::Result<()>;
    /// Remove what a previous agent plugged for pods this one has not
    /// plugged: called once, when the first state's pods are plugged. A
    /// pod deleted while no agent ran would otherwise keep its link and
    /// have its addresses believed.
    fn release_unclaimed(&mut self) -> anyhow::Result<()>;
    /// Packet counters by event / verdict label, for metrics.
    fn counters(&self) -> Vec<(&'static str, u64)>;
    /// New flows reset for want of a SNAT port, by Service and endpoint.
    fn snat_exhaustion(&self) -> Vec<(sluice_datapath::maps::SnatExhaustKey, u64)>;
    /// Stop, give `nic0` back as it was, remove everything the engine made.
    fn shutdown(self: Box<Self>) -> anyhow::Result<()>;
}

/// Start the emulated engine on `nic` in the calling thread's network
/// namespace (the node's).
pub fn start_emulated(nic: &str, node_name: &str) -> anyhow::Result<Box<dyn Engine>> {
    Ok(Box::new(emulated::EmulatedEngine::start(nic, node_name)?))
}

/// Start the kernel engine on `nic` in the calling thread's network
/// namespace: load the BPF `object`, pin its maps and links under `pin_dir`
/// (adopting what a previous agent pinned there), attach to `nic`. `sizes`:
/// the service-side maps (`--bpf-*-entries`); a pinned map of another size
/// is recreated.
pub fn start_kernel(
    nic: &str,
    node_name: &str,
    object: &std::path::Path,
    pin_dir: &std::path::Path,
    sizes: kernel::MapSizes,
) -> anyhow::Result<Box<dyn Engine>> {
    let _ = node_name;
    Ok(Box::new(kernel::KernelEngine::start(
        nic, object, pin_dir, sizes,
    )?))
}
