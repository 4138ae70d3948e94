//! The program's maps and the [`Maps`] adapter over them.
//!
//! Legacy (`maps` section) definitions, so they load without BTF; none is
//! pinned in the object: the agent chooses pin paths at load time (aya's
//! `EbpfLoader::map_pin_path`), so a restarted agent finds conntrack again.
//! Names and sizes are the contract with the agent's loader:
//!
//! | name | type | key → value | max entries |
//! |---|---|---|---|
//! | `SLUICE_SERVICES` | hash | `ServiceKey` → `ServiceValue` | 65 536 |
//! | `SLUICE_ENDPOINTS` | array | slot → `Endpoint` | 262 144 |
//! | `SLUICE_MAGLEV` | array | index → slot offset (`u32`) | 4 194 304 |
//! | `SLUICE_CT` | LRU hash | `CtKey` → `CtValue` | 262 144 |
//! | `SLUICE_AFFINITY` | LRU hash | `AffinityKey` → `AffinityValue` | 65 536 |
//! | `SLUICE_NODE` | array | 0 → `NodeConfig` | 1 |
//! | `SLUICE_EVENTS` | per-CPU array | `Event as u32` → count (`u64`) | `Event::COUNT` |
//!
//! Kernel map names keep the first 15 bytes (`SLUICE_ENDPOINT` in
//! `bpftool map`); aya finds maps by the full name above.

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray},
};
use sluice_datapath::{
    env::Maps,
    maps::{
        AffinityKey, AffinityValue, CtKey, CtValue, Endpoint, NodeConfig, ServiceKey, ServiceValue,
    },
    Event,
};

/// Frontends: (VIP, port, proto) → service.
pub const SERVICES_MAX: u32 = 65_536;
/// Endpoint slots, ready-first per service.
pub const ENDPOINTS_MAX: u32 = 262_144;
/// The flat Maglev array (each service owns a prime-sized window).
pub const MAGLEV_MAX: u32 = 4_194_304;
/// Conntrack entries (two per translated flow).
pub const CT_MAX: u32 = 262_144;
/// Session affinity entries.
pub const AFFINITY_MAX: u32 = 65_536;
/// One node configuration, index 0.
pub const NODE_MAX: u32 = 1;

#[map(name = "SLUICE_SERVICES")]
static SERVICES: HashMap<ServiceKey, ServiceValue> = HashMap::with_max_entries(SERVICES_MAX, 0);

#[map(name = "SLUICE_ENDPOINTS")]
static ENDPOINTS: Array<Endpoint> = Array::with_max_entries(ENDPOINTS_MAX, 0);

#[map(name = "SLUICE_MAGLEV")]
static MAGLEV: Array<u32> = Array::with_max_entries(MAGLEV_MAX, 0);

#[map(name = "SLUICE_CT")]
static CT: LruHashMap<CtKey, CtValue> = LruHashMap::with_max_entries(CT_MAX, 0);

#[map(name = "SLUICE_AFFINITY")]
static AFFINITY: LruHashMap<AffinityKey, AffinityValue> =
    LruHashMap::with_max_entries(AFFINITY_MAX, 0);

#[map(name = "SLUICE_NODE")]
static NODE: Array<NodeConfig> = Array::with_max_entries(NODE_MAX, 0);

/// Per-CPU counters indexed by `Event as u32`: the metrics the user-space
/// engine keeps too.
#[map(name = "SLUICE_EVENTS")]
static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Event::COUNT as u32, 0);

/// Count one event.
#[inline(always)]
pub fn count(event: u32) {
    if let Some(p) = EVENTS.get_ptr_mut(event) {
        // SAFETY: a per-CPU slot, valid for the program's run, no one else
        // writes it on this CPU meanwhile.
        unsafe { *p += 1 };
    }
}

/// The maps are globals; the adapter carries nothing.
pub struct AyaMaps;

impl Maps for AyaMaps {
    #[inline(always)]
    fn node(&self) -> NodeConfig {
        NODE.get(0).copied().unwrap_or_default()
    }

    #[inline(always)]
    fn service(&self, key: &ServiceKey) -> Option<ServiceValue> {
        // SAFETY: read-only by the program; the value is copied out at once.
        unsafe { SERVICES.get(key).copied() }
    }

    #[inline(always)]
    fn endpoint(&self, slot: u32) -> Option<Endpoint> {
        ENDPOINTS.get(slot).copied()
    }

    #[inline(always)]
    fn maglev(&self, slot: u32) -> Option<u32> {
        MAGLEV.get(slot).copied()
    }

    #[inline(always)]
    fn ct_get(&self, key: &CtKey) -> Option<CtValue> {
        // SAFETY: copied out at once; a concurrent update may tear the copy,
        // as in every per-packet eBPF conntrack (the next packet rewrites it).
        unsafe { CT.get(key).copied() }
    }

    #[inline(always)]
    fn ct_put(&mut self, key: &CtKey, value: &CtValue) -> bool {
        CT.insert(key, value, u64::from(BPF_ANY)).is_ok()
    }

    #[inline(always)]
    fn ct_put_new(&mut self, key: &CtKey, value: &CtValue) -> bool {
        CT.insert(key, value, u64::from(BPF_NOEXIST)).is_ok()
    }

    #[inline(always)]
    fn ct_delete(&mut self, key: &CtKey) {
        let _ = CT.remove(key);
    }

    #[inline(always)]
    fn affinity_get(&self, key: &AffinityKey) -> Option<AffinityValue> {
        // SAFETY: as `ct_get`.
        unsafe { AFFINITY.get(key).copied() }
    }

    #[inline(always)]
    fn affinity_put(&mut self, key: &AffinityKey, value: &AffinityValue) {
        let _ = AFFINITY.insert(key, value, u64::from(BPF_ANY));
    }
}
