//! The load balancer's maps and the [`LbMaps`] adapter over them.
//!
//! Legacy (`maps` section) definitions, none pinned: the load balancer's
//! kernel engine owns them for as long as it runs. Names and sizes are the
//! constants of `sluice_datapath::lb::maps`:
//!
//! | name | type | key → value | max entries |
//! |---|---|---|---|
//! | `SLB_FRONTENDS` | hash | `FrontendKey` → `FrontendValue` | 16 384 |
//! | `SLB_BACKENDS` | hash | backend id → `LbBackend` | 65 536 |
//! | `SLB_MAGLEV` | array | chunk → `MaglevChunk` (256 backend ids) | 8 192 (two generations of 1 048 576 entries) |
//! | `SLB_FLOWS` | LRU hash | `FlowKey` → `FlowValue` | 262 144 |
//! | `SLB_CONFIG` | array | 0 → `LbConfig` | 1 |
//! | `SLB_EVENTS` | per-CPU array | `LbEvent` index, then verdict kinds → count | `LbEvent::COUNT + 3` |
//! | `SLB_PACKETS` | per-CPU hash | backend id → frames delivered | 65 536 |

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
};
use sluice_datapath::lb::{
    maps::{
        FlowKey, FlowValue, FrontendKey, FrontendValue, LbBackend, LbConfig, MaglevChunk,
        LB_BACKENDS_MAX_ENTRIES, LB_CONFIG_MAX_ENTRIES, LB_EVENTS_MAX_ENTRIES,
        LB_FLOWS_MAX_ENTRIES, LB_FRONTENDS_MAX_ENTRIES, LB_MAGLEV_MAX_CHUNKS,
        LB_PACKETS_MAX_ENTRIES, MAGLEV_CHUNK, MAP_LB_BACKENDS, MAP_LB_CONFIG, MAP_LB_EVENTS,
        MAP_LB_FLOWS, MAP_LB_FRONTENDS, MAP_LB_MAGLEV, MAP_LB_PACKETS,
    },
    LbMaps,
};

// `#[map(name = ..)]` takes a literal; these keep the literals equal to the
// shared constants the engine opens the maps by.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
const _: () = assert!(same(MAP_LB_FRONTENDS, "SLB_FRONTENDS"));
const _: () = assert!(same(MAP_LB_BACKENDS, "SLB_BACKENDS"));
const _: () = assert!(same(MAP_LB_MAGLEV, "SLB_MAGLEV"));
const _: () = assert!(same(MAP_LB_FLOWS, "SLB_FLOWS"));
const _: () = assert!(same(MAP_LB_CONFIG, "SLB_CONFIG"));
const _: () = assert!(same(MAP_LB_EVENTS, "SLB_EVENTS"));
const _: () = assert!(same(MAP_LB_PACKETS, "SLB_PACKETS"));

#[map(name = "SLB_FRONTENDS")]
static FRONTENDS: HashMap<FrontendKey, FrontendValue> =
    HashMap::with_max_entries(LB_FRONTENDS_MAX_ENTRIES, 0);

#[map(name = "SLB_BACKENDS")]
static BACKENDS: HashMap<u32, LbBackend> = HashMap::with_max_entries(LB_BACKENDS_MAX_ENTRIES, 0);

#[map(name = "SLB_MAGLEV")]
static MAGLEV: Array<MaglevChunk> = Array::with_max_entries(LB_MAGLEV_MAX_CHUNKS, 0);

#[map(name = "SLB_FLOWS")]
static FLOWS: LruHashMap<FlowKey, FlowValue> =
    LruHashMap::with_max_entries(LB_FLOWS_MAX_ENTRIES, 0);

#[map(name = "SLB_CONFIG")]
static CONFIG: Array<LbConfig> = Array::with_max_entries(LB_CONFIG_MAX_ENTRIES, 0);

#[map(name = "SLB_EVENTS")]
static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(LB_EVENTS_MAX_ENTRIES, 0);

#[map(name = "SLB_PACKETS")]
static PACKETS: PerCpuHashMap<u32, u64> =
    PerCpuHashMap::with_max_entries(LB_PACKETS_MAX_ENTRIES, 0);

/// Count one event or verdict.
#[inline(always)]
pub fn count(index: u32) {
    if let Some(p) = EVENTS.get_ptr_mut(index) {
        // SAFETY: a per-CPU slot, valid for the program's run, written by
        // no one else on this CPU meanwhile.
        unsafe { *p += 1 };
    }
}

/// Count a frame delivered to backend `id`; the engine creates the entries
/// of the configured backends, one missing (an apply in flight) is added.
#[inline(always)]
pub fn count_backend(id: u32) {
    match PACKETS.get_ptr_mut(id) {
        // SAFETY: as in `count`.
        Some(p) => unsafe { *p += 1 },
        None => {
            let _ = PACKETS.insert(id, 1u64, u64::from(BPF_NOEXIST));
        }
    }
}

/// Copy a map value out (see the agent's adapter: `Option::copied` became
/// a `memmove` call).
#[inline(always)]
fn read<T: Copy>(v: &T) -> T {
    // SAFETY: a valid, aligned reference to a `Copy` value.
    unsafe { core::ptr::read(v) }
}

/// The maps are globals; the adapter carries nothing.
pub struct AyaLbMaps;

impl LbMaps for AyaLbMaps {
    #[inline(always)]
    fn config(&self) -> LbConfig {
        CONFIG.get(0).map(read).unwrap_or_default()
    }

    #[inline(always)]
    fn frontend(&self, key: &FrontendKey) -> Option<FrontendValue> {
        // SAFETY: read-only by the program; copied out at once.
        unsafe { FRONTENDS.get(key).map(read) }
    }

    #[inline(always)]
    fn backend(&self, id: u32) -> Option<LbBackend> {
        // SAFETY: as `frontend`.
        unsafe { BACKENDS.get(id).map(read) }
    }

    #[inline(always)]
    fn maglev(&self, entry: u32) -> Option<u32> {
        // A chunk, then a word in it (the mask bounds the offset inside the
        // 1 KiB value for the verifier).
        let chunk = MAGLEV.get(entry / MAGLEV_CHUNK)?;
        chunk.get((entry & (MAGLEV_CHUNK - 1)) as usize).map(read)
    }

    #[inline(always)]
    fn flow_get(&self, key: &FlowKey) -> Option<FlowValue> {
        // SAFETY: copied out at once; a concurrent update may tear the copy
        // (the backend id is one word and the time a refresh).
        unsafe { FLOWS.get(key).map(read) }
    }

    #[inline(always)]
    fn flow_put(&mut self, key: &FlowKey, value: &FlowValue) {
        let _ = FLOWS.insert(key, value, u64::from(BPF_ANY));
    }

    #[inline(always)]
    fn flow_touch(&mut self, key: &FlowKey, now_ns: u64) {
        // The one field, in place: no map update.
        if let Some(v) = FLOWS.get_ptr_mut(key) {
            // SAFETY: a live value of this map; a word store.
            unsafe { (*v).last_seen_ns = now_ns };
        }
    }
}
