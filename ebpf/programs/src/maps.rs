//! The program's maps and the [`Maps`] adapter over them.
//!
//! Legacy (`maps` section) definitions, so they load without BTF; none is
//! pinned in the object: the agent chooses pin paths at load time (aya's
//! `EbpfLoader::map_pin_path`), so a restarted agent finds conntrack again.
//! Names and sizes are the contract with the agent's loader; they are
//! constants of `sluice_datapath::maps` (`MAP_*`, `*_MAX_ENTRIES`):
//!
//! | name | type | key → value | max entries |
//! |---|---|---|---|
//! | `SLUICE_SERVICES` | hash | `ServiceKey` → `ServiceValue` | 65 536 |
//! | `SLUICE_ENDPOINTS` | array | slot → `Endpoint` | 524 288 |
//! | `SLUICE_MAGLEV` | array | chunk → `MaglevChunk` (256 slot offsets) | 65 536 (16 777 216 entries) |
//! | `SLUICE_CT` | LRU hash | `CtKey` → `CtValue` | 262 144 |
//! | `SLUICE_AFFINITY` | LRU hash | `AffinityKey` → `AffinityValue` | 65 536 |
//! | `SLUICE_NODE` | array | 0 → `NodeConfig` | 1 |
//! | `SLUICE_EVENTS` | per-CPU array | `Event as u32` → count (`u64`) | `Event::COUNT` |
//! | `SLUICE_LOCAL` | hash | `LocalKey` → `LocalLink` | 16 384 |
//! | `SLUICE_SNAT_EXHAUSTED` | LRU per-CPU hash | `SnatExhaustKey` → count (`u64`) | 1 024 |
//!
//! The agent sets the sizes of the first three at load time
//! (`--bpf-service-entries`, `--bpf-endpoint-entries`,
//! `--bpf-maglev-entries`); these are the defaults.
//!
//! Kernel map names keep the first 15 bytes (`SLUICE_ENDPOINT` in
//! `bpftool map`); aya finds maps by the full name above.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    helpers::bpf_loop,
    macros::map,
    maps::{Array, HashMap, LruHashMap, LruPerCpuHashMap, PerCpuArray},
};
use sluice_datapath::{
    conntrack::{merge, PortHolder},
    env::{CtWrite, Maps, SeqTrack},
    maps::{
        AffinityKey, AffinityValue, CtKey, CtValue, Endpoint, LocalKey, LocalLink, MaglevChunk,
        NodeConfig, ServiceKey, ServiceValue, SnatExhaustKey, AFFINITY_MAX_ENTRIES, CT_DIR_FORWARD,
        CT_MAX_ENTRIES, ENDPOINTS_MAX_ENTRIES, EVENTS_MAX_ENTRIES, LOCAL_MAX_ENTRIES, MAGLEV_CHUNK,
        MAGLEV_MAX_CHUNKS, MAP_AFFINITY, MAP_CT, MAP_ENDPOINTS, MAP_EVENTS, MAP_LOCAL, MAP_MAGLEV,
        MAP_NODE, MAP_SERVICES, MAP_SNAT_EXHAUSTED, NODE_MAX_ENTRIES, SERVICES_MAX_ENTRIES,
        SNAT_EXHAUSTED_MAX_ENTRIES,
    },
};

// `#[map(name = ..)]` takes a literal; these keep the literals equal to the
// shared constants the agent opens the maps by.
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
const _: () = assert!(same(MAP_SERVICES, "SLUICE_SERVICES"));
const _: () = assert!(same(MAP_ENDPOINTS, "SLUICE_ENDPOINTS"));
const _: () = assert!(same(MAP_MAGLEV, "SLUICE_MAGLEV"));
const _: () = assert!(same(MAP_CT, "SLUICE_CT"));
const _: () = assert!(same(MAP_AFFINITY, "SLUICE_AFFINITY"));
const _: () = assert!(same(MAP_NODE, "SLUICE_NODE"));
const _: () = assert!(same(MAP_EVENTS, "SLUICE_EVENTS"));
const _: () = assert!(same(MAP_LOCAL, "SLUICE_LOCAL"));
const _: () = assert!(same(MAP_SNAT_EXHAUSTED, "SLUICE_SNAT_EXHAUSTED"));

#[map(name = "SLUICE_SERVICES")]
static SERVICES: HashMap<ServiceKey, ServiceValue> =
    HashMap::with_max_entries(SERVICES_MAX_ENTRIES, 0);

#[map(name = "SLUICE_ENDPOINTS")]
static ENDPOINTS: Array<Endpoint> = Array::with_max_entries(ENDPOINTS_MAX_ENTRIES, 0);

#[map(name = "SLUICE_MAGLEV")]
static MAGLEV: Array<MaglevChunk> = Array::with_max_entries(MAGLEV_MAX_CHUNKS, 0);

#[map(name = "SLUICE_CT")]
static CT: LruHashMap<CtKey, CtValue> = LruHashMap::with_max_entries(CT_MAX_ENTRIES, 0);

#[map(name = "SLUICE_AFFINITY")]
static AFFINITY: LruHashMap<AffinityKey, AffinityValue> =
    LruHashMap::with_max_entries(AFFINITY_MAX_ENTRIES, 0);

#[map(name = "SLUICE_NODE")]
static NODE: Array<NodeConfig> = Array::with_max_entries(NODE_MAX_ENTRIES, 0);

#[map(name = "SLUICE_LOCAL")]
static LOCAL: HashMap<LocalKey, LocalLink> = HashMap::with_max_entries(LOCAL_MAX_ENTRIES, 0);

/// New flows reset for want of a SNAT port, by Service and endpoint:
/// per-CPU, so counting needs no atomics.
#[map(name = "SLUICE_SNAT_EXHAUSTED")]
static SNAT_EXHAUSTED: LruPerCpuHashMap<SnatExhaustKey, u64> =
    LruPerCpuHashMap::with_max_entries(SNAT_EXHAUSTED_MAX_ENTRIES, 0);

/// Per-CPU counters indexed by `Event as u32`: the metrics the user-space
/// engine keeps too.
#[map(name = "SLUICE_EVENTS")]
static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENTS_MAX_ENTRIES, 0);

/// Count one event.
#[inline(always)]
pub fn count(event: u32) {
    if let Some(p) = EVENTS.get_ptr_mut(event) {
        // SAFETY: a per-CPU slot, valid for the program's run, no one else
        // writes it on this CPU meanwhile.
        unsafe { *p += 1 };
    }
}

/// Copy a map value out. `ptr::read` is a plain copy from memory that does
/// not overlap the destination; LLVM lowers it to word loads and stores.
/// (`Option::copied` on the value reference became a call to `memmove`,
/// a BPF function of its own costing 32 bytes of the call chain's stack.)
#[inline(always)]
fn read<T: Copy>(v: &T) -> T {
    // SAFETY: a valid, aligned reference to a `Copy` value.
    unsafe { core::ptr::read(v) }
}

/// The maps are globals; the adapter carries nothing.
pub struct AyaMaps;

impl Maps for AyaMaps {
    #[inline(always)]
    fn node(&self) -> NodeConfig {
        // Not `map(read).unwrap_or_default()`: LLVM moved that `Option`
        // through a `memmove` byte loop, which the verifier walked 40 deep
        // for every state of `conntrack_new_flow` (VERIFIER_NOTES.md).
        match NODE.get(0) {
            Some(v) => read(v),
            None => NodeConfig::default(),
        }
    }

    #[inline(always)]
    fn service(&self, key: &ServiceKey) -> Option<ServiceValue> {
        // SAFETY: read-only by the program; the value is copied out at once.
        unsafe { SERVICES.get(key).map(read) }
    }

    #[inline(always)]
    fn endpoint(&self, slot: u32) -> Option<Endpoint> {
        ENDPOINTS.get(slot).map(read)
    }

    #[inline(always)]
    fn maglev(&self, slot: u32) -> Option<u32> {
        // Entry `slot` of the flat array: a chunk, then a word in it (the
        // mask bounds the offset inside the 1 KiB value for the verifier).
        let chunk = MAGLEV.get(slot / MAGLEV_CHUNK)?;
        chunk.get((slot & (MAGLEV_CHUNK - 1)) as usize).map(read)
    }

    #[inline(always)]
    fn ct_get(&self, key: &CtKey) -> Option<CtValue> {
        // SAFETY: copied out at once; a concurrent update may tear the copy,
        // as in every per-packet eBPF conntrack (the next packet rewrites it).
        unsafe { CT.get(key).map(read) }
    }

    #[inline(always)]
    fn ct_get_into(&self, key: &CtKey, out: &mut CtValue) -> bool {
        // SAFETY: as `ct_get`.
        match unsafe { CT.get(key) } {
            Some(v) => {
                // SAFETY: `v` points into the map, `out` onto the stack:
                // valid, aligned and disjoint. (A plain assignment became a
                // `memmove` call.)
                unsafe { core::ptr::copy_nonoverlapping(v, out, 1) };
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn ct_get_tracking<F: FnOnce(&CtValue) -> Option<SeqTrack>>(
        &mut self,
        key: &CtKey,
        out: &mut CtValue,
        track: F,
    ) -> bool {
        let Some(p) = CT.get_ptr_mut(key) else {
            return false;
        };
        // SAFETY: `p` points at the live map value, `out` onto the stack:
        // valid, aligned and disjoint. The writes touch only the tracking
        // words, which packets of this entry's direction alone write.
        unsafe {
            core::ptr::copy_nonoverlapping(p, out, 1);
            if let Some(t) = track(out) {
                core::ptr::write_volatile(&mut (*p).seq_nxt, t.nxt);
                core::ptr::write_volatile(&mut (*p).seq_ack, t.ack);
            }
        }
        true
    }

    #[inline(always)]
    fn ct_seq(&self, key: &CtKey) -> Option<SeqTrack> {
        // SAFETY: three words read from the map value.
        unsafe { CT.get(key) }.map(|v| SeqTrack {
            nxt: v.seq_nxt,
            ack: v.seq_ack,
        })
    }

    #[inline(always)]
    fn ct_write_half(&mut self, key: &CtKey, w: &CtWrite) -> Option<u8> {
        let p = CT.get_ptr_mut(key)?;
        // SAFETY: `p` points at the live map value. Volatile stores of
        // exactly the fields this direction owns: the compiler must not
        // widen them into a read-modify-write of the neighbouring bytes,
        // which the other side's CPU may be writing.
        unsafe {
            if w.dir == CT_DIR_FORWARD {
                core::ptr::write_volatile(&mut (*p).state, w.state);
                core::ptr::write_volatile(&mut (*p).flags, w.flags);
            } else {
                core::ptr::write_volatile(&mut (*p).rep_state, w.state);
                core::ptr::write_volatile(&mut (*p).rep_flags, w.flags);
            }
            if w.close {
                core::ptr::write_volatile(&mut (*p).close_seq, w.close_seq);
                core::ptr::write_volatile(&mut (*p).close_tsval, w.close_tsval);
            }
            core::ptr::write_volatile(&mut (*p).expires_ns, w.expires_ns);
            let (s, f) = (
                core::ptr::read_volatile(&(*p).state),
                core::ptr::read_volatile(&(*p).rep_state),
            );
            let (fl, rf) = (
                core::ptr::read_volatile(&(*p).flags),
                core::ptr::read_volatile(&(*p).rep_flags),
            );
            Some(merge(s, fl, f, rf).0)
        }
    }

    #[inline(always)]
    fn ct_holder(&self, key: &CtKey) -> Option<PortHolder> {
        // SAFETY: a few fields read from the map value.
        unsafe { CT.get(key) }.map(PortHolder::of)
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
        unsafe { AFFINITY.get(key).map(read) }
    }

    #[inline(always)]
    fn affinity_put(&mut self, key: &AffinityKey, value: &AffinityValue) {
        let _ = AFFINITY.insert(key, value, u64::from(BPF_ANY));
    }

    #[inline(always)]
    fn local_link(&self, key: &LocalKey) -> Option<LocalLink> {
        // SAFETY: read-only by the program; the value is copied out at once.
        unsafe { LOCAL.get(key).map(read) }
    }

    /// Through `bpf_loop`, so the verifier checks `body` until its state
    /// converges instead of once per iteration (see the trait).
    #[inline(always)]
    fn first_of<F: FnMut(&mut Self, u32) -> bool>(&mut self, n: u32, body: F) -> bool {
        let mut ctx = FirstOf { body, found: false };
        // SAFETY: `first_of_step::<F>` takes the context it is given here,
        // a `FirstOf<F>` that outlives the call; flags 0, and `n` is far
        // below the helper's limit (1 << 23). On an error (none of those
        // can happen) `found` stays false, as if no iteration succeeded.
        unsafe {
            bpf_loop(
                n,
                first_of_step::<F> as *mut c_void,
                (&mut ctx as *mut FirstOf<F>).cast(),
                0,
            )
        };
        ctx.found
    }

    #[inline(always)]
    fn snat_exhausted(&mut self, key: &SnatExhaustKey) {
        match SNAT_EXHAUSTED.get_ptr_mut(key) {
            // SAFETY: this CPU's value, valid for the program's run; no one
            // else writes it on this CPU meanwhile.
            Some(p) => unsafe { *p += 1 },
            None => {
                // From the stack: a constant's address would put it in a
                // `.rodata` section, which the loader takes for a map.
                let one = core::hint::black_box(1u64);
                let _ = SNAT_EXHAUSTED.insert(key, &one, u64::from(BPF_ANY));
            }
        }
    }
}

/// What [`AyaMaps::first_of`] hands `bpf_loop` as the callback's context.
struct FirstOf<F> {
    body: F,
    found: bool,
}

/// One `bpf_loop` iteration of [`AyaMaps::first_of`]: 1 stops the loop.
/// A BPF function of its own (its address is taken), verified as the
/// callback.
extern "C" fn first_of_step<F: FnMut(&mut AyaMaps, u32) -> bool>(
    index: u64,
    ctx: *mut c_void,
) -> i64 {
    // SAFETY: `bpf_loop` passes back the context `first_of` gave it, a live
    // `FirstOf<F>` no one else touches during the loop.
    let ctx = unsafe { &mut *ctx.cast::<FirstOf<F>>() };
    // `index` < `n`, a `u32`.
    if (ctx.body)(&mut AyaMaps, index as u32) {
        ctx.found = true;
        1
    } else {
        0
    }
}
