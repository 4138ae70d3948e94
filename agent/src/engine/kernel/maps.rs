//! The kernel program's maps as the agent holds them (aya handles taken
//! out of the loaded object), and the [`ServiceMaps`] operations the
//! window writer ([`super::writer`]) performs on them: batched array
//! writes, service values, the node config, pod links, event counters.

use anyhow::{anyhow, Context, Result};
use aya::maps::{
    Array, HashMap as BpfHashMap, IterableMap, Map, MapData, PerCpuArray, PerCpuHashMap,
};
use aya::Ebpf;
use sluice_datapath::maps::{
    Endpoint, LocalKey, LocalLink, MaglevChunk, NodeConfig, ServiceKey, ServiceValue,
    SnatExhaustKey, MAGLEV_CHUNK,
};
use sluice_datapath::{Event, Verdict};

use super::batch;
use super::layout::MapSizes;
use super::writer::{chunk_region, ServiceMaps};
use tracing::warn;

/// Map names: the contract with `ebpf/programs`, kept in the datapath.
pub use sluice_datapath::maps::{
    MAP_AFFINITY as AFFINITY, MAP_CT as CT, MAP_ENDPOINTS as ENDPOINTS, MAP_EVENTS as EVENTS,
    MAP_LOCAL as LOCAL, MAP_MAGLEV as MAGLEV, MAP_NODE as NODE, MAP_SERVICES as SERVICES,
    MAP_SNAT_EXHAUSTED as SNAT_EXHAUSTED,
};

/// Every map of the object, with the key and value sizes the agent's types
/// have: the object must agree, or the two were built from different
/// datapath sources.
pub fn expected_layout() -> [(&'static str, usize, usize); 9] {
    use sluice_datapath::maps::{AffinityKey, AffinityValue, CtKey, CtValue};
    use std::mem::size_of;
    [
        (SERVICES, size_of::<ServiceKey>(), size_of::<ServiceValue>()),
        (ENDPOINTS, 4, size_of::<Endpoint>()),
        (MAGLEV, 4, size_of::<MaglevChunk>()),
        (CT, size_of::<CtKey>(), size_of::<CtValue>()),
        (
            AFFINITY,
            size_of::<AffinityKey>(),
            size_of::<AffinityValue>(),
        ),
        (NODE, 4, size_of::<NodeConfig>()),
        (EVENTS, 4, 8),
        (LOCAL, size_of::<LocalKey>(), size_of::<LocalLink>()),
        (SNAT_EXHAUSTED, size_of::<SnatExhaustKey>(), 8),
    ]
}

/// Map values the agent reads and writes, as aya wants them (`Pod`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct P<T>(pub T);

// SAFETY: `#[repr(C)]` plain-old-data structs of the datapath, with every
// padding byte an explicit field: any bit pattern is valid, none is a
// pointer.
unsafe impl aya::Pod for P<ServiceKey> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<ServiceValue> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<Endpoint> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<NodeConfig> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<LocalKey> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<LocalLink> {}
// SAFETY: as above.
unsafe impl aya::Pod for P<SnatExhaustKey> {}

/// A per-CPU counter's total.
fn cpu_sum(v: &aya::maps::PerCpuValues<u64>) -> u64 {
    v.iter().fold(0u64, |a, b| a.wrapping_add(*b))
}

/// The maps the agent writes or reads, taken out of the loaded object.
pub struct AyaMaps {
    services: BpfHashMap<MapData, P<ServiceKey>, P<ServiceValue>>,
    endpoints: Array<MapData, P<Endpoint>>,
    maglev: Array<MapData, MaglevChunk>,
    node: Array<MapData, P<NodeConfig>>,
    events: PerCpuArray<MapData, u64>,
    local: BpfHashMap<MapData, P<LocalKey>, P<LocalLink>>,
    snat_exhausted: PerCpuHashMap<MapData, P<SnatExhaustKey>, u64>,
    services_max: u32,
    /// `BPF_MAP_UPDATE_BATCH` works here (cleared at its first refusal:
    /// kernels before 5.6).
    batch: bool,
}

fn take(ebpf: &mut Ebpf, name: &str) -> Result<Map> {
    ebpf.take_map(name)
        .with_context(|| format!("the object has no map {name}"))
}

impl AyaMaps {
    pub fn take(ebpf: &mut Ebpf) -> Result<AyaMaps> {
        let services: BpfHashMap<MapData, P<ServiceKey>, P<ServiceValue>> =
            BpfHashMap::try_from(take(ebpf, SERVICES)?)
                .with_context(|| format!("opening {SERVICES}"))?;
        let services_max = {
            services
                .map()
                .info()
                .with_context(|| format!("reading the size of {SERVICES}"))?
                .max_entries()
        };
        Ok(AyaMaps {
            services,
            endpoints: Array::try_from(take(ebpf, ENDPOINTS)?)
                .with_context(|| format!("opening {ENDPOINTS}"))?,
            maglev: Array::try_from(take(ebpf, MAGLEV)?)
                .with_context(|| format!("opening {MAGLEV}"))?,
            node: Array::try_from(take(ebpf, NODE)?).with_context(|| format!("opening {NODE}"))?,
            events: PerCpuArray::try_from(take(ebpf, EVENTS)?)
                .with_context(|| format!("opening {EVENTS}"))?,
            local: BpfHashMap::try_from(take(ebpf, LOCAL)?)
                .with_context(|| format!("opening {LOCAL}"))?,
            snat_exhausted: PerCpuHashMap::try_from(take(ebpf, SNAT_EXHAUSTED)?)
                .with_context(|| format!("opening {SNAT_EXHAUSTED}"))?,
            services_max,
            batch: true,
        })
    }

    /// A pod on this node, for redirects to its link.
    pub fn put_local(&mut self, k: &LocalKey, v: &LocalLink) -> Result<()> {
        self.local
            .insert(P(*k), P(*v), 0)
            .with_context(|| format!("writing {LOCAL}"))
    }

    /// Forget a pod address; one that is not there is no error.
    pub fn del_local(&mut self, k: &LocalKey) -> Result<()> {
        match self.local.remove(&P(*k)) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing from {LOCAL}")),
        }
    }

    /// Every pod address the map holds and its link.
    pub fn local_entries(&self) -> Vec<(LocalKey, LocalLink)> {
        self.local
            .iter()
            .filter_map(|e| e.ok())
            .map(|(k, v)| (k.0, v.0))
            .collect()
    }

    /// New flows reset for want of a SNAT port, by Service and endpoint,
    /// summed over CPUs.
    pub fn snat_exhaustion(&self) -> Vec<(SnatExhaustKey, u64)> {
        self.snat_exhausted
            .iter()
            .filter_map(|e| e.ok())
            .map(|(k, v)| (k.0, cpu_sum(&v)))
            .collect()
    }

    /// Per-event packet counts, summed over CPUs, labelled as the emulated
    /// engine labels them.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let sum = |i: u32| self.events.get(&i, 0).map(|v| cpu_sum(&v)).unwrap_or(0);
        let events = Event::ALL.iter().map(|e| (e.name(), sum(e.index() as u32)));
        let verdicts = Verdict::KINDS
            .iter()
            .map(|v| (v.name(), sum(v.counter_index())));
        events.chain(verdicts).collect()
    }
}

impl AyaMaps {
    /// Write `values` at `start ..` of `arr` in one batched call, or slot by
    /// slot where the kernel has no batch operations.
    fn write_array<V: aya::Pod>(
        batch_ok: &mut bool,
        arr: &mut Array<MapData, V>,
        start: u32,
        values: &[V],
    ) -> Result<()> {
        if *batch_ok {
            use std::os::fd::AsFd;
            match batch::update_array(arr.map().fd().as_fd(), start, values) {
                Ok(()) => return Ok(()),
                Err(e) if batch::unsupported(&e) => {
                    warn!(error = %e, "BPF_MAP_UPDATE_BATCH refused; writing slot by slot");
                    *batch_ok = false;
                }
                Err(e) => return Err(e.into()),
            }
        }
        for (i, v) in (start..).zip(values) {
            arr.set(i, *v, 0)?;
        }
        Ok(())
    }
}

impl ServiceMaps for AyaMaps {
    fn sizes(&self) -> MapSizes {
        MapSizes {
            services: self.services_max,
            endpoints: self.endpoints.len(),
            maglev: self.maglev.len().saturating_mul(MAGLEV_CHUNK),
        }
    }
    fn services(&self) -> Result<Vec<(ServiceKey, ServiceValue)>> {
        let mut out = Vec::new();
        for kv in self.services.iter() {
            let (k, v) = kv.with_context(|| format!("reading {SERVICES}"))?;
            out.push((k.0, v.0));
        }
        Ok(out)
    }
    fn put_service(&mut self, k: &ServiceKey, v: &ServiceValue) -> Result<()> {
        self.services.insert(P(*k), P(*v), 0)?;
        Ok(())
    }
    fn del_service(&mut self, k: &ServiceKey) -> Result<()> {
        match self.services.remove(&P(*k)) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    fn write_endpoints(&mut self, start: u32, eps: &[Endpoint]) -> Result<()> {
        let values: Vec<P<Endpoint>> = eps.iter().copied().map(P).collect();
        Self::write_array(&mut self.batch, &mut self.endpoints, start, &values)
    }
    fn write_maglev(&mut self, start: u32, entries: &[u32]) -> Result<()> {
        if !start.is_multiple_of(MAGLEV_CHUNK) {
            return Err(anyhow!(
                "a Maglev window at {start} does not start an element of {MAGLEV}"
            ));
        }
        let chunks: Vec<MaglevChunk> = entries
            .chunks(MAGLEV_CHUNK as usize)
            .map(|part| {
                let mut c: MaglevChunk = [0; MAGLEV_CHUNK as usize];
                c[..part.len()].copy_from_slice(part);
                c
            })
            .collect();
        Self::write_array(
            &mut self.batch,
            &mut self.maglev,
            start / MAGLEV_CHUNK,
            &chunks,
        )
    }
    fn read_endpoints(&self, start: u32, len: u32) -> Result<Vec<Endpoint>> {
        (start..start.saturating_add(len))
            .map(|i| Ok(self.endpoints.get(&i, 0)?.0))
            .collect()
    }
    fn read_maglev(&self, start: u32, len: u32) -> Result<Vec<u32>> {
        let r = chunk_region(start, len);
        let mut out = Vec::with_capacity(r.len as usize);
        for c in (r.start / MAGLEV_CHUNK)..(r.start / MAGLEV_CHUNK + r.len / MAGLEV_CHUNK) {
            out.extend_from_slice(&self.maglev.get(&c, 0)?);
        }
        let skip = (start - r.start) as usize;
        Ok(out.into_iter().skip(skip).take(len as usize).collect())
    }
    fn node(&self) -> Result<NodeConfig> {
        Ok(self.node.get(&0, 0)?.0)
    }
    fn set_node(&mut self, n: &NodeConfig) -> Result<()> {
        self.node.set(0, P(*n), 0)?;
        Ok(())
    }
}
