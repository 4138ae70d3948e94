//! Writing the control-side maps of the kernel program without a half state
//! visible to packets.
//!
//! # The double-buffer scheme
//!
//! `SLUICE_ENDPOINTS` and `SLUICE_MAGLEV` are each split into two halves of
//! `max_entries / 2` (the agent creates them twice the size the object
//! declares, so each half holds the datapath's advertised capacity). At any time the services in `SLUICE_SERVICES` point
//! (`ep_base`, `maglev_base`) into one half, the *active* one. An apply:
//!
//! 1. writes the new endpoint slots and Maglev windows into the *other*
//!    half, which no service points at, so no packet reads it;
//! 2. deletes the service keys the new content no longer has;
//! 3. writes every new service value, its bases shifted into that half.
//!    Each hash-map update replaces one value atomically (RCU), so a packet
//!    sees either the old service (old half, still intact) or the new one
//!    (new half, already complete) — never a mix;
//! 4. makes that half the active one.
//!
//! The node config (one array slot) is written only when it changes.
//!
//! A packet that looked a service up just before step 3 reads the old half
//! for the microseconds it takes to finish; the old half is only overwritten
//! by the *next* apply, a poll period later.
//!
//! A restarted agent finds the active half by looking at where the pinned
//! services point ([`Writer::adopt`]). If an agent died between steps 2 and
//! 3, services may point into both halves: the new content then goes to the
//! half fewer services point at (logged).
//!
//! Writes are skipped where the half already holds the same value (a shadow
//! of what this agent wrote there), so a resync that changes one service
//! rewrites only its slots.

use anyhow::{bail, Context, Result};
use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData, PerCpuArray};
use aya::Ebpf;
use sluice_datapath::host::ServiceTables;
use sluice_datapath::maps::{Endpoint, LocalKey, LocalLink, NodeConfig, ServiceKey, ServiceValue};
use sluice_datapath::{Event, Verdict};
use tracing::warn;

/// Map names: the contract with `ebpf/programs`, kept in the datapath.
pub use sluice_datapath::maps::{
    MAP_AFFINITY as AFFINITY, MAP_CT as CT, MAP_ENDPOINTS as ENDPOINTS, MAP_EVENTS as EVENTS,
    MAP_LOCAL as LOCAL, MAP_MAGLEV as MAGLEV, MAP_NODE as NODE, MAP_SERVICES as SERVICES,
};

/// Every map of the object, with the key and value sizes the agent's types
/// have: the object must agree, or the two were built from different
/// datapath sources.
pub fn expected_layout() -> [(&'static str, usize, usize); 8] {
    use sluice_datapath::maps::{AffinityKey, AffinityValue, CtKey, CtValue};
    use std::mem::size_of;
    [
        (SERVICES, size_of::<ServiceKey>(), size_of::<ServiceValue>()),
        (ENDPOINTS, 4, size_of::<Endpoint>()),
        (MAGLEV, 4, 4),
        (CT, size_of::<CtKey>(), size_of::<CtValue>()),
        (
            AFFINITY,
            size_of::<AffinityKey>(),
            size_of::<AffinityValue>(),
        ),
        (NODE, 4, size_of::<NodeConfig>()),
        (EVENTS, 4, 8),
        (LOCAL, size_of::<LocalKey>(), size_of::<LocalLink>()),
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

/// The operations an apply needs; over the kernel maps ([`AyaMaps`]) and,
/// in tests, memory.
pub trait ServiceMaps {
    fn services_max(&self) -> u32;
    fn endpoints_max(&self) -> u32;
    fn maglev_max(&self) -> u32;
    fn services(&self) -> Result<Vec<(ServiceKey, ServiceValue)>>;
    fn put_service(&mut self, k: &ServiceKey, v: &ServiceValue) -> Result<()>;
    fn del_service(&mut self, k: &ServiceKey) -> Result<()>;
    fn set_endpoint(&mut self, i: u32, e: &Endpoint) -> Result<()>;
    fn set_maglev(&mut self, i: u32, v: u32) -> Result<()>;
    fn node(&self) -> Result<NodeConfig>;
    fn set_node(&mut self, n: &NodeConfig) -> Result<()>;
}

/// Which half a service value points into, if it points anywhere.
fn half_of(v: &ServiceValue, ep_half: u32, mg_half: u32) -> Option<usize> {
    if v.ready + v.terminating > 0 {
        Some(usize::from(v.ep_base >= ep_half))
    } else if v.ready > 0 && v.maglev_size > 0 {
        Some(usize::from(v.maglev_base >= mg_half))
    } else {
        None
    }
}

#[derive(Debug, Default)]
pub struct Writer {
    /// The half the services point into; `None`: no service points anywhere.
    active: Option<usize>,
    /// What this agent last wrote into each half.
    shadow: [Option<(Vec<Endpoint>, Vec<u32>)>; 2],
}

impl Writer {
    /// Start from whatever the (possibly pinned) maps hold.
    pub fn adopt(maps: &impl ServiceMaps) -> Result<Writer> {
        let (ep_half, mg_half) = (maps.endpoints_max() / 2, maps.maglev_max() / 2);
        let mut uses = [0usize; 2];
        for (_, v) in maps.services()? {
            if let Some(h) = half_of(&v, ep_half, mg_half) {
                uses[h] += 1;
            }
        }
        let active = match uses {
            [0, 0] => None,
            [_, 0] => Some(0),
            [0, _] => Some(1),
            [a, b] => {
                warn!(
                    lower = a,
                    upper = b,
                    "the pinned services point into both halves (an agent died mid-apply); \
                     the next apply overwrites the less used half"
                );
                Some(usize::from(a < b))
            }
        };
        Ok(Writer {
            active,
            shadow: [None, None],
        })
    }

    /// The half the next apply writes.
    pub fn target(&self) -> usize {
        match self.active {
            Some(h) => 1 - h,
            None => 0,
        }
    }

    /// Write `tables` (already checked, markers included) and `node`.
    pub fn apply(
        &mut self,
        maps: &mut impl ServiceMaps,
        node: &NodeConfig,
        tables: &ServiceTables,
    ) -> Result<()> {
        let (ep_half, mg_half) = (maps.endpoints_max() / 2, maps.maglev_max() / 2);
        if tables.endpoints.len() as u64 > u64::from(ep_half) {
            bail!(
                "{} endpoint slots do not fit {ENDPOINTS}: max_entries {} holds two \
                 generations of {ep_half}",
                tables.endpoints.len(),
                maps.endpoints_max()
            );
        }
        if tables.maglev.len() as u64 > u64::from(mg_half) {
            bail!(
                "{} Maglev entries do not fit {MAGLEV}: max_entries {} holds two \
                 generations of {mg_half}",
                tables.maglev.len(),
                maps.maglev_max()
            );
        }
        if tables.services.len() as u64 > u64::from(maps.services_max()) {
            bail!(
                "{} service keys (frontends and VIP markers) do not fit {SERVICES}: \
                 max_entries {}",
                tables.services.len(),
                maps.services_max()
            );
        }

        let target = self.target();
        let ep_off = target as u32 * ep_half;
        let mg_off = target as u32 * mg_half;

        // 1. The unused half.
        let old = self.shadow[target].take();
        let (old_ep, old_mg): (&[Endpoint], &[u32]) = match &old {
            Some((e, m)) => (e, m),
            None => (&[], &[]),
        };
        for (i, e) in tables.endpoints.iter().enumerate() {
            if old_ep.get(i) != Some(e) {
                maps.set_endpoint(ep_off + i as u32, e)
                    .with_context(|| format!("writing {ENDPOINTS}[{}]", ep_off + i as u32))?;
            }
        }
        for (i, m) in tables.maglev.iter().enumerate() {
            if old_mg.get(i) != Some(m) {
                maps.set_maglev(mg_off + i as u32, *m)
                    .with_context(|| format!("writing {MAGLEV}[{}]", mg_off + i as u32))?;
            }
        }
        self.shadow[target] = Some((tables.endpoints.clone(), tables.maglev.clone()));

        if maps.node().ok().as_ref() != Some(node) {
            maps.set_node(node)
                .with_context(|| format!("writing {NODE}[0]"))?;
        }

        // 2. Frontends that are gone (first, so the map never has to hold
        // old and new keys at once).
        for (k, _) in maps.services()? {
            if !tables.services.contains_key(&k) {
                maps.del_service(&k)
                    .with_context(|| format!("deleting {SERVICES} key {k:?}"))?;
            }
        }
        // 3. Every frontend, pointing into the freshly written half.
        for (k, v) in &tables.services {
            let mut v = *v;
            v.ep_base += ep_off;
            v.maglev_base += mg_off;
            maps.put_service(k, &v)
                .with_context(|| format!("writing {SERVICES} key {k:?}"))?;
        }
        // 4.
        self.active = Some(target);
        Ok(())
    }
}

/// The maps the agent writes or reads, taken out of the loaded object.
pub struct AyaMaps {
    services: BpfHashMap<MapData, P<ServiceKey>, P<ServiceValue>>,
    endpoints: Array<MapData, P<Endpoint>>,
    maglev: Array<MapData, u32>,
    node: Array<MapData, P<NodeConfig>>,
    events: PerCpuArray<MapData, u64>,
    local: BpfHashMap<MapData, P<LocalKey>, P<LocalLink>>,
    services_max: u32,
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
            use aya::maps::IterableMap;
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
            services_max,
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

    /// Every pod address the map holds (a restarted agent clears what no
    /// pod it plugs claims).
    pub fn local_keys(&self) -> Vec<LocalKey> {
        self.local
            .keys()
            .filter_map(|k| k.ok())
            .map(|k| k.0)
            .collect()
    }

    /// Per-event packet counts, summed over CPUs, labelled as the emulated
    /// engine labels them.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let sum = |i: u32| {
            self.events
                .get(&i, 0)
                .map(|v| v.iter().fold(0u64, |a, b| a.wrapping_add(*b)))
                .unwrap_or(0)
        };
        let events = Event::ALL.iter().map(|e| (e.name(), sum(e.index() as u32)));
        let verdicts = Verdict::KINDS
            .iter()
            .map(|v| (v.name(), sum(v.counter_index())));
        events.chain(verdicts).collect()
    }
}

impl ServiceMaps for AyaMaps {
    fn services_max(&self) -> u32 {
        self.services_max
    }
    fn endpoints_max(&self) -> u32 {
        self.endpoints.len()
    }
    fn maglev_max(&self) -> u32 {
        self.maglev.len()
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
    fn set_endpoint(&mut self, i: u32, e: &Endpoint) -> Result<()> {
        self.endpoints.set(i, P(*e), 0)?;
        Ok(())
    }
    fn set_maglev(&mut self, i: u32, v: u32) -> Result<()> {
        self.maglev.set(i, v, 0)?;
        Ok(())
    }
    fn node(&self) -> Result<NodeConfig> {
        Ok(self.node.get(&0, 0)?.0)
    }
    fn set_node(&mut self, n: &NodeConfig) -> Result<()> {
        self.node.set(0, P(*n), 0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_datapath::host::ServiceSpec;
    use sluice_datapath::maps::{v4_mapped, PROTO_TCP};
    use std::collections::HashMap;

    /// Memory maps that also check, on every service write, that the value
    /// points at slots already holding what the new content says.
    #[derive(Default)]
    struct Mem {
        services: HashMap<ServiceKey, ServiceValue>,
        endpoints: Vec<Endpoint>,
        maglev: Vec<u32>,
        node: NodeConfig,
        writes: usize,
    }

    impl Mem {
        fn new(ep: u32, mg: u32) -> Mem {
            Mem {
                endpoints: vec![Endpoint::default(); ep as usize],
                maglev: vec![0; mg as usize],
                ..Default::default()
            }
        }
    }

    impl ServiceMaps for Mem {
        fn services_max(&self) -> u32 {
            64
        }
        fn endpoints_max(&self) -> u32 {
            self.endpoints.len() as u32
        }
        fn maglev_max(&self) -> u32 {
            self.maglev.len() as u32
        }
        fn services(&self) -> Result<Vec<(ServiceKey, ServiceValue)>> {
            Ok(self.services.iter().map(|(k, v)| (*k, *v)).collect())
        }
        fn put_service(&mut self, k: &ServiceKey, v: &ServiceValue) -> Result<()> {
            self.services.insert(*k, *v);
            Ok(())
        }
        fn del_service(&mut self, k: &ServiceKey) -> Result<()> {
            self.services.remove(k);
            Ok(())
        }
        fn set_endpoint(&mut self, i: u32, e: &Endpoint) -> Result<()> {
            self.writes += 1;
            *self.endpoints.get_mut(i as usize).context("index")? = *e;
            Ok(())
        }
        fn set_maglev(&mut self, i: u32, v: u32) -> Result<()> {
            self.writes += 1;
            *self.maglev.get_mut(i as usize).context("index")? = v;
            Ok(())
        }
        fn node(&self) -> Result<NodeConfig> {
            Ok(self.node)
        }
        fn set_node(&mut self, n: &NodeConfig) -> Result<()> {
            self.node = *n;
            Ok(())
        }
    }

    fn ep(last: u8) -> Endpoint {
        Endpoint {
            addr: v4_mapped([198, 19, 1, last]),
            port: 8080,
            flags: 0,
            _pad: 0,
        }
    }

    fn key(n: u8) -> ServiceKey {
        ServiceKey {
            addr: v4_mapped([198, 18, 100, n]),
            port: 80,
            proto: PROTO_TCP,
            _pad: 0,
        }
    }

    fn tables(svcs: &[(u8, Vec<Endpoint>)]) -> ServiceTables {
        let specs: Vec<ServiceSpec> = svcs
            .iter()
            .map(|(n, eps)| ServiceSpec {
                key: key(*n),
                ready: eps.clone(),
                ..Default::default()
            })
            .collect();
        ServiceTables::build(&specs)
    }

    /// What a packet would read for `k`: the endpoints behind its Maglev
    /// window, resolved through the maps.
    fn resolve(m: &Mem, k: &ServiceKey) -> Option<Vec<Endpoint>> {
        let v = m.services.get(k)?;
        let mut out: Vec<Endpoint> = (0..v.maglev_size)
            .map(|i| {
                let off = m.maglev[(v.maglev_base + i) as usize];
                m.endpoints[(v.ep_base + off) as usize]
            })
            .collect();
        out.sort_by_key(|e| e.addr);
        out.dedup();
        Some(out)
    }

    #[test]
    fn applies_alternate_halves_and_resolve_to_the_content() {
        let mut m = Mem::new(1000, 20_000);
        let mut w = Writer::adopt(&m).unwrap();
        assert_eq!(w.target(), 0);
        let n = NodeConfig {
            snat_port_min: 1,
            ..Default::default()
        };
        w.apply(
            &mut m,
            &n,
            &tables(&[(1, vec![ep(10), ep(11)]), (2, vec![ep(12)])]),
        )
        .unwrap();
        assert_eq!(m.node, n);
        assert_eq!(resolve(&m, &key(1)), Some(vec![ep(10), ep(11)]));
        assert!(m.services[&key(1)].ep_base < 500);
        assert_eq!(w.target(), 1);

        // Service 2 goes, service 1 changes: the new content lands in the
        // upper half, service 2's key is removed (and its marker).
        w.apply(&mut m, &n, &tables(&[(1, vec![ep(11)])])).unwrap();
        assert_eq!(resolve(&m, &key(1)), Some(vec![ep(11)]));
        assert!(m.services[&key(1)].ep_base >= 500);
        assert!(m.services[&key(1)].maglev_base >= 10_000);
        assert!(!m.services.contains_key(&key(2)));
        assert_eq!(m.services.len(), 2, "service 1 and its VIP marker");

        // A restarted agent finds the upper half active and writes the lower.
        let w2 = Writer::adopt(&m).unwrap();
        assert_eq!(w2.target(), 0);
    }

    #[test]
    fn unchanged_content_rewrites_nothing_in_a_half_it_wrote() {
        let mut m = Mem::new(1000, 20_000);
        let mut w = Writer::adopt(&m).unwrap();
        let t = tables(&[(1, vec![ep(10), ep(11)])]);
        let n = NodeConfig::default();
        w.apply(&mut m, &n, &t).unwrap();
        w.apply(&mut m, &n, &t).unwrap();
        let before = m.writes;
        w.apply(&mut m, &n, &t).unwrap();
        w.apply(&mut m, &n, &t).unwrap();
        assert_eq!(m.writes, before, "both halves already hold the content");
        assert_eq!(resolve(&m, &key(1)), Some(vec![ep(10), ep(11)]));
    }

    #[test]
    fn content_too_big_for_a_half_is_refused_by_name() {
        let mut m = Mem::new(2, 20_000);
        let mut w = Writer::adopt(&m).unwrap();
        let e = w
            .apply(
                &mut m,
                &NodeConfig::default(),
                &tables(&[(1, vec![ep(10), ep(11)])]),
            )
            .unwrap_err();
        assert!(format!("{e:#}").contains(ENDPOINTS), "{e:#}");
        let mut m = Mem::new(100, 100);
        let e = w
            .apply(
                &mut m,
                &NodeConfig::default(),
                &tables(&[(1, vec![ep(10)])]),
            )
            .unwrap_err();
        assert!(format!("{e:#}").contains(MAGLEV), "{e:#}");
        assert!(m.services.is_empty(), "nothing written");
    }

    #[test]
    fn adopt_after_a_death_mid_apply_picks_the_less_used_half() {
        let mut m = Mem::new(1000, 20_000);
        for (n, base) in [(1u8, 0u32), (2, 0), (3, 600)] {
            m.services.insert(
                key(n),
                ServiceValue {
                    ep_base: base,
                    ready: 1,
                    maglev_size: 101,
                    ..Default::default()
                },
            );
        }
        assert_eq!(Writer::adopt(&m).unwrap().target(), 1);
    }
}
