//! Writing the control-side maps of the kernel program without a half state
//! visible to packets.
//!
//! # Windows
//!
//! Each service key owns a *window* of endpoint slots in `SLUICE_ENDPOINTS`
//! and one in the flat Maglev array (`SLUICE_MAGLEV`, [`MAGLEV_CHUNK`]
//! entries per element), handed out by a buddy allocator ([`super::alloc`]);
//! the key's value in `SLUICE_SERVICES` points at them (`ep_base`,
//! `maglev_base`). An apply:
//!
//! 1. checks the content fits ([`layout::check`]); nothing is written
//!    otherwise;
//! 2. deletes the keys the content no longer has and sets their windows
//!    aside;
//! 3. for each key whose windows changed (by a digest of the slots and the
//!    Maglev table): writes the new windows into free space (one batched
//!    system call each), which no service points at, so no packet reads
//!    them; then writes the key's value pointing there — one hash-map
//!    update, atomic (RCU): a packet sees the old windows, still intact, or
//!    the new ones, already complete, never a mix; then sets the old
//!    windows aside;
//! 4. rewrites only the value of a key whose windows are unchanged but
//!    whose flags, counts or timeout changed.
//!
//! Windows set aside are reused only [`GRACE`] later: a packet that read a
//! service value just before it moved may still read the old windows for
//! the microseconds its program runs. When free space runs out in the
//! middle of a large update the apply waits for the oldest set-aside
//! windows and goes on, so an update needs room for what is live plus the
//! windows of *one* changed service, not two copies of everything; changing
//! one service among 10 000 writes that one service's windows.
//!
//! A restarted agent rebuilds its allocator and digests from the pinned
//! services and the windows they point at ([`Writer::adopt`]), so its first
//! apply rewrites only what changed meanwhile. A window that overlaps
//! another's (not something this writer leaves) is not trusted: its key is
//! rewritten into fresh space at the next apply, and the overlapping range
//! is never handed out again by this agent.
//!
//! The node config (one array slot) is written only when it changes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sluice_datapath::host::ServiceTables;
use sluice_datapath::maps::{Endpoint, NodeConfig, ServiceKey, ServiceValue, MAGLEV_CHUNK};
use tracing::warn;

use super::alloc::{Buddy, Region};
use super::layout::{self, Frontend, MapSizes, EP_MIN_BLOCK, MG_MIN_BLOCK};
use super::maps::{ENDPOINTS, MAGLEV, NODE, SERVICES};

/// How long windows a service stopped pointing at are kept before reuse.
/// A TC program runs for microseconds, inside one RCU read section; this is
/// thousands of times that.
pub const GRACE: Duration = Duration::from_millis(20);

/// The operations an apply needs; over the kernel maps ([`AyaMaps`]) and,
/// in tests, memory.
pub trait ServiceMaps {
    /// The maps' capacities as created.
    fn sizes(&self) -> MapSizes;
    fn services(&self) -> Result<Vec<(ServiceKey, ServiceValue)>>;
    fn put_service(&mut self, k: &ServiceKey, v: &ServiceValue) -> Result<()>;
    fn del_service(&mut self, k: &ServiceKey) -> Result<()>;
    /// Slots `start .. start + eps.len()`.
    fn write_endpoints(&mut self, start: u32, eps: &[Endpoint]) -> Result<()>;
    /// Maglev entries `start ..` (`start` a multiple of [`MAGLEV_CHUNK`]);
    /// the rest of the last element is written as zeros.
    fn write_maglev(&mut self, start: u32, entries: &[u32]) -> Result<()>;
    fn read_endpoints(&self, start: u32, len: u32) -> Result<Vec<Endpoint>>;
    fn read_maglev(&self, start: u32, len: u32) -> Result<Vec<u32>>;
    fn node(&self) -> Result<NodeConfig>;
    fn set_node(&mut self, n: &NodeConfig) -> Result<()>;
}

/// A digest of what a key's windows hold (slots and Maglev table). 64-bit
/// SipHash: two different contents of one key colliding is a 2^-64 event.
fn windows_digest(eps: &[Endpoint], maglev: &[u32]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write_usize(eps.len());
    for e in eps {
        h.write(&e.addr);
        h.write_u16(e.port);
        h.write_u16(e.flags);
    }
    h.write_usize(maglev.len());
    // In blocks: one `write` per 256 entries, not one per entry (every
    // apply digests every table).
    let mut buf = [0u8; 4 * MAGLEV_CHUNK as usize];
    for part in maglev.chunks(MAGLEV_CHUNK as usize) {
        for (b, m) in buf.chunks_exact_mut(4).zip(part) {
            b.copy_from_slice(&m.to_le_bytes());
        }
        h.write(&buf[..4 * part.len()]);
    }
    h.finish()
}

/// The value with its bases at `ep_base` / `maglev_base`.
fn placed(v: &ServiceValue, ep: Option<Region>, mg: Option<Region>) -> ServiceValue {
    ServiceValue {
        ep_base: ep.map_or(0, |r| r.start),
        maglev_base: mg.map_or(0, |r| r.start),
        ..*v
    }
}

/// The Maglev elements a window `start .. start + len` touches, as entries.
pub(super) fn chunk_region(start: u32, len: u32) -> Region {
    let first = start / MAGLEV_CHUNK * MAGLEV_CHUNK;
    let end = (u64::from(start) + u64::from(len)).div_ceil(u64::from(MAGLEV_CHUNK))
        * u64::from(MAGLEV_CHUNK);
    Region {
        start: first,
        len: u32::try_from(end - u64::from(first)).unwrap_or(u32::MAX),
    }
}

/// A key as this writer last wrote or found it.
#[derive(Clone, Debug)]
struct Live {
    /// As in the map (bases included).
    value: ServiceValue,
    /// The windows it owns (freed when it moves or goes).
    ep: Option<Region>,
    mg: Option<Region>,
    /// Of what the windows hold; `None`: unknown, rewrite at the next apply.
    digest: Option<u64>,
}

/// Windows no service points at any more, reusable from `at + GRACE`.
#[derive(Clone, Copy, Debug)]
struct SetAside {
    at: Instant,
    ep: Option<Region>,
    mg: Option<Region>,
}

/// No free window, and none set aside to wait for.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NoRoom(String);

/// What an apply wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyStats {
    /// Keys whose windows were (re)written.
    pub moved: usize,
    /// Keys whose value only was rewritten.
    pub updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
    pub endpoint_slots: u64,
    pub maglev_entries: u64,
    /// Times the apply waited for set-aside windows.
    pub waits: usize,
    /// Keys taken out while they moved, for want of room beside them.
    pub removed_to_move: usize,
}

#[derive(Debug)]
pub struct Writer {
    sizes: MapSizes,
    ep: Buddy,
    mg: Buddy,
    live: HashMap<ServiceKey, Live>,
    aside: VecDeque<SetAside>,
}

impl Writer {
    /// Start from whatever the (possibly pinned) maps hold.
    pub fn adopt(maps: &impl ServiceMaps) -> Result<Writer> {
        let sizes = maps.sizes();
        let mut w = Writer {
            sizes,
            ep: Buddy::new(sizes.endpoints, EP_MIN_BLOCK),
            mg: Buddy::new(sizes.maglev, MG_MIN_BLOCK),
            live: HashMap::new(),
            aside: VecDeque::new(),
        };
        let mut distrusted = 0usize;
        for (k, v) in maps.services()? {
            let n_ep = v.ready.saturating_add(v.terminating);
            let ep = (n_ep > 0).then_some(Region {
                start: v.ep_base,
                len: n_ep,
            });
            let mg = (v.ready > 0 && v.maglev_size > 0)
                .then(|| chunk_region(v.maglev_base, v.maglev_size));
            let ep_ok = ep.is_none_or(|r| w.ep.reserve(r).is_ok());
            let mg_ok = mg.is_none_or(|r| w.mg.reserve(r).is_ok());
            // What the windows hold, read back, so the first apply rewrites
            // only what changed while no agent ran.
            let digest = if ep_ok && mg_ok {
                let eps = match ep {
                    Some(r) => maps.read_endpoints(r.start, r.len).ok(),
                    None => Some(Vec::new()),
                };
                let table = if mg.is_some() {
                    maps.read_maglev(v.maglev_base, v.maglev_size).ok()
                } else {
                    Some(Vec::new())
                };
                eps.zip(table).map(|(e, t)| windows_digest(&e, &t))
            } else {
                distrusted += 1;
                None
            };
            w.live.insert(
                k,
                Live {
                    value: v,
                    // Only what was reserved is ours to free.
                    ep: ep.filter(|_| ep_ok),
                    mg: mg.filter(|_| mg_ok),
                    digest,
                },
            );
        }
        if distrusted > 0 {
            warn!(
                services = distrusted,
                "pinned services point at windows that overlap others; they are rewritten \
                 into fresh space at the next apply"
            );
        }
        Ok(w)
    }

    pub fn sizes(&self) -> MapSizes {
        self.sizes
    }

    /// Whether `tables` (markers or not) fits the maps.
    pub fn check(&self, tables: &ServiceTables) -> Result<()> {
        let fronts = layout::frontends(tables).context("checking the map content")?;
        layout::check(&layout::need(&fronts), &self.sizes)?;
        Ok(())
    }

    /// Make windows set aside at least [`GRACE`] ago reusable.
    fn release(&mut self, now: Instant) {
        while let Some(a) = self.aside.front() {
            if now.duration_since(a.at) < GRACE {
                break;
            }
            if let Some(r) = a.ep {
                self.ep.free(r);
            }
            if let Some(r) = a.mg {
                self.mg.free(r);
            }
            self.aside.pop_front();
        }
    }

    fn set_aside(&mut self, l: &Live) {
        if l.ep.is_some() || l.mg.is_some() {
            self.aside.push_back(SetAside {
                at: Instant::now(),
                ep: l.ep,
                mg: l.mg,
            });
        }
    }

    /// A window of `len` in the endpoint (`maglev` false) or Maglev array,
    /// waiting for set-aside windows when nothing fits.
    fn alloc(&mut self, maglev: bool, len: u32, stats: &mut ApplyStats) -> Result<Region> {
        loop {
            let b = if maglev { &mut self.mg } else { &mut self.ep };
            if let Some(r) = b.alloc(len) {
                return Ok(r);
            }
            let Some(oldest) = self.aside.front().map(|a| a.at) else {
                // The capacity check passed, so the space is there but cut
                // up by windows of other sizes.
                let (name, flag) = if maglev {
                    (MAGLEV, "--bpf-maglev-entries")
                } else {
                    (ENDPOINTS, "--bpf-endpoint-entries")
                };
                return Err(NoRoom(format!(
                    "no free window of {len} in {name}: {} of {} entries are free but the \
                     largest free block holds {}; raise {flag}",
                    b.free_total(),
                    b.capacity(),
                    b.largest_free()
                ))
                .into());
            };
            let wait = (oldest + GRACE).saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            stats.waits += 1;
            self.release(Instant::now());
        }
    }

    /// Write `tables` (markers added here if missing) and `node`.
    pub fn apply(
        &mut self,
        maps: &mut impl ServiceMaps,
        node: &NodeConfig,
        tables: &ServiceTables,
    ) -> Result<ApplyStats> {
        // 1. Nothing is written for a content that cannot fit.
        let fronts = layout::frontends(tables).context("checking the map content")?;
        layout::check(&layout::need(&fronts), &self.sizes)?;
        let mut stats = ApplyStats::default();
        self.release(Instant::now());

        if maps.node().ok().as_ref() != Some(node) {
            maps.set_node(node)
                .with_context(|| format!("writing {NODE}[0]"))?;
        }

        // 2. Keys that are gone (first: their keys and windows make room).
        let wanted: HashMap<ServiceKey, usize> =
            fronts.iter().enumerate().map(|(i, f)| (f.key, i)).collect();
        let gone: Vec<ServiceKey> = self
            .live
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .copied()
            .collect();
        for k in gone {
            self.remove_key(maps, &k)?;
            stats.deleted += 1;
        }

        // 3. and 4.
        let mut moving: Vec<(&Frontend<'_>, u64)> = Vec::new();
        for f in &fronts {
            let digest = windows_digest(f.endpoints, f.maglev);
            match self.live.get(&f.key) {
                Some(l) if l.digest == Some(digest) => {
                    let v = placed(&f.value, l.ep, l.mg);
                    if v == l.value {
                        stats.unchanged += 1;
                        continue;
                    }
                    maps.put_service(&f.key, &v).with_context(|| {
                        format!("writing {SERVICES} key {}", layout::key_name(&f.key))
                    })?;
                    if let Some(l) = self.live.get_mut(&f.key) {
                        l.value = v;
                    }
                    stats.updated += 1;
                }
                _ => moving.push((f, digest)),
            }
        }
        // Largest windows first: power-of-two blocks placed in decreasing
        // size never leave a hole a later one needed.
        moving.sort_by_key(|(f, _)| std::cmp::Reverse((f.maglev.len(), f.endpoints.len())));
        for (f, digest) in moving {
            self.place(maps, f, digest, &mut stats)?;
        }
        Ok(stats)
    }

    /// Delete a key from the map and set its windows aside.
    fn remove_key(&mut self, maps: &mut impl ServiceMaps, k: &ServiceKey) -> Result<()> {
        maps.del_service(k)
            .with_context(|| format!("deleting {SERVICES} key {}", layout::key_name(k)))?;
        if let Some(l) = self.live.remove(k) {
            self.set_aside(&l);
        }
        Ok(())
    }

    /// Move a key to new windows. When there is no room for them beside
    /// its old ones (an array full to the last block, everything changing),
    /// the key is taken out first and its own windows reused: that one
    /// frontend is briefly absent (its packets pass to the node), which is
    /// logged, rather than the update failing on every retry.
    fn place(
        &mut self,
        maps: &mut impl ServiceMaps,
        f: &Frontend<'_>,
        digest: u64,
        stats: &mut ApplyStats,
    ) -> Result<()> {
        match self.place_beside(maps, f, digest, stats) {
            Err(e) if e.is::<NoRoom>() && self.live.contains_key(&f.key) => {
                warn!(
                    service = %layout::key_name(&f.key),
                    reason = %e,
                    "no room to move the service atomically; removing it while its windows \
                     are rewritten"
                );
                self.remove_key(maps, &f.key)?;
                stats.removed_to_move += 1;
                self.place_beside(maps, f, digest, stats)
            }
            r => r,
        }
    }

    /// Write a key's windows into free space, then point its value there.
    fn place_beside(
        &mut self,
        maps: &mut impl ServiceMaps,
        f: &Frontend<'_>,
        digest: u64,
        stats: &mut ApplyStats,
    ) -> Result<()> {
        let len = |n: usize| u32::try_from(n).context("a window longer than u32");
        let ep = match f.endpoints.len() {
            0 => None,
            n => Some(self.alloc(false, len(n)?, stats)?),
        };
        let mg = match f.maglev.len() {
            0 => None,
            n => match self.alloc(true, len(n)?, stats) {
                Ok(r) => Some(r),
                Err(e) => {
                    // Not published: free at once.
                    if let Some(r) = ep {
                        self.ep.free(r);
                    }
                    return Err(e);
                }
            },
        };
        let v = placed(&f.value, ep, mg);
        let written = (|| -> Result<()> {
            if let Some(r) = ep {
                maps.write_endpoints(r.start, f.endpoints)
                    .with_context(|| format!("writing {ENDPOINTS}[{}..]", r.start))?;
            }
            if let Some(r) = mg {
                maps.write_maglev(r.start, f.maglev)
                    .with_context(|| format!("writing {MAGLEV}[{}..]", r.start))?;
            }
            maps.put_service(&f.key, &v)
                .with_context(|| format!("writing {SERVICES} key {}", layout::key_name(&f.key)))
        })();
        if let Err(e) = written {
            // A failed map update leaves the old value (each is atomic), so
            // no packet was sent to the new windows: they are free again,
            // and the key keeps its old, intact ones.
            if let Some(r) = ep {
                self.ep.free(r);
            }
            if let Some(r) = mg {
                self.mg.free(r);
            }
            return Err(e);
        }
        let new = Live {
            value: v,
            ep,
            mg,
            digest: Some(digest),
        };
        if let Some(old) = self.live.insert(f.key, new) {
            self.set_aside(&old);
        }
        stats.moved += 1;
        stats.endpoint_slots += f.endpoints.len() as u64;
        stats.maglev_entries += f.maglev.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_datapath::host::ServiceSpec;
    use sluice_datapath::maps::{v4_mapped, PROTO_TCP};

    /// Memory maps that check what packets could see: no write lands in a
    /// window a service points at, or pointed at less than [`GRACE`] ago.
    struct Mem {
        sizes: MapSizes,
        services: HashMap<ServiceKey, ServiceValue>,
        endpoints: Vec<Endpoint>,
        maglev: Vec<u32>,
        node: NodeConfig,
        /// Windows services stopped pointing at, and when.
        retired: Vec<(Instant, bool, Region)>,
        writes: usize,
        puts: usize,
    }

    impl Mem {
        fn new(ep: u32, mg: u32) -> Mem {
            Mem {
                sizes: MapSizes {
                    services: 1024,
                    endpoints: ep,
                    maglev: mg,
                },
                services: HashMap::new(),
                endpoints: vec![Endpoint::default(); ep as usize],
                maglev: vec![0; mg as usize],
                node: NodeConfig::default(),
                retired: Vec::new(),
                writes: 0,
                puts: 0,
            }
        }

        fn windows(v: &ServiceValue) -> [(bool, Option<Region>); 2] {
            let n = v.ready + v.terminating;
            [
                (
                    false,
                    (n > 0).then_some(Region {
                        start: v.ep_base,
                        len: n,
                    }),
                ),
                (
                    true,
                    (v.ready > 0 && v.maglev_size > 0)
                        .then(|| chunk_region(v.maglev_base, v.maglev_size)),
                ),
            ]
        }

        fn retire(&mut self, v: &ServiceValue) {
            for (mg, r) in Self::windows(v) {
                if let Some(r) = r {
                    self.retired.push((Instant::now(), mg, r));
                }
            }
        }

        /// Panics when writing `w` could change what a packet reads.
        fn check_write(&self, maglev: bool, w: Region) {
            let hits = |r: &Region| u64::from(w.start) < r.end() && u64::from(r.start) < w.end();
            for v in self.services.values() {
                for (mg, r) in Self::windows(v) {
                    if let Some(r) = r.filter(|r| mg == maglev && hits(r)) {
                        panic!("write {w:?} into the live window {r:?}");
                    }
                }
            }
            for (at, mg, r) in &self.retired {
                if *mg == maglev && hits(r) && at.elapsed() < GRACE {
                    panic!("write {w:?} into {r:?}, retired {:?} ago", at.elapsed());
                }
            }
        }
    }

    fn copy_out<T: Clone>(v: &[T], start: u32, len: u32) -> Result<Vec<T>> {
        let s = start as usize;
        Ok(v.get(s..s + len as usize).context("index")?.to_vec())
    }

    impl ServiceMaps for Mem {
        fn sizes(&self) -> MapSizes {
            self.sizes
        }
        fn services(&self) -> Result<Vec<(ServiceKey, ServiceValue)>> {
            Ok(self.services.iter().map(|(k, v)| (*k, *v)).collect())
        }
        fn put_service(&mut self, k: &ServiceKey, v: &ServiceValue) -> Result<()> {
            self.puts += 1;
            if let Some(old) = self.services.insert(*k, *v) {
                self.retire(&old);
            }
            Ok(())
        }
        fn del_service(&mut self, k: &ServiceKey) -> Result<()> {
            if let Some(old) = self.services.remove(k) {
                self.retire(&old);
            }
            Ok(())
        }
        fn write_endpoints(&mut self, start: u32, eps: &[Endpoint]) -> Result<()> {
            self.check_write(
                false,
                Region {
                    start,
                    len: eps.len() as u32,
                },
            );
            self.writes += eps.len();
            let s = start as usize;
            self.endpoints
                .get_mut(s..s + eps.len())
                .context("index")?
                .copy_from_slice(eps);
            Ok(())
        }
        fn write_maglev(&mut self, start: u32, entries: &[u32]) -> Result<()> {
            assert_eq!(start % MAGLEV_CHUNK, 0);
            let r = chunk_region(start, entries.len() as u32);
            self.check_write(true, r);
            self.writes += entries.len();
            let dst = self
                .maglev
                .get_mut(r.start as usize..r.end() as usize)
                .context("index")?;
            dst.fill(0);
            dst[..entries.len()].copy_from_slice(entries);
            Ok(())
        }
        fn read_endpoints(&self, start: u32, len: u32) -> Result<Vec<Endpoint>> {
            copy_out(&self.endpoints, start, len)
        }
        fn read_maglev(&self, start: u32, len: u32) -> Result<Vec<u32>> {
            copy_out(&self.maglev, start, len)
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
        let mut t = ServiceTables::new();
        for (n, eps) in svcs {
            t.add(&ServiceSpec {
                key: key(*n),
                ready: eps.clone(),
                ..Default::default()
            });
        }
        t
    }

    /// Services `ids`, each with the endpoints `f(id)`.
    fn svcs(
        ids: std::ops::RangeInclusive<u8>,
        f: impl Fn(u8) -> Vec<Endpoint>,
    ) -> Vec<(u8, Vec<Endpoint>)> {
        ids.map(|i| (i, f(i))).collect()
    }

    /// Maps of `ep` slots and `mg` Maglev entries holding `first`, and the
    /// writer that wrote them.
    fn written(ep: u32, mg: u32, first: &[(u8, Vec<Endpoint>)]) -> (Mem, Writer) {
        let mut m = Mem::new(ep, mg);
        let (w, r) = adopt_and_apply(&mut m, first);
        r.unwrap();
        (m, w)
    }

    /// A writer adopting `m`, and its first apply of `svcs`.
    fn adopt_and_apply(m: &mut Mem, svcs: &[(u8, Vec<Endpoint>)]) -> (Writer, Result<ApplyStats>) {
        let mut w = Writer::adopt(m).unwrap();
        let r = w.apply(m, &NodeConfig::default(), &tables(svcs));
        (w, r)
    }

    /// What a packet would read for `k`: the endpoints behind its Maglev
    /// window, and the whole table, resolved through the maps.
    fn resolve(m: &Mem, k: &ServiceKey) -> Option<(Vec<Endpoint>, Vec<u32>)> {
        let v = m.services.get(k)?;
        let table: Vec<u32> = (0..v.maglev_size)
            .map(|i| m.maglev[(v.maglev_base + i) as usize])
            .collect();
        let mut eps: Vec<Endpoint> = table
            .iter()
            .map(|off| m.endpoints[(v.ep_base + off) as usize])
            .collect();
        eps.sort_by_key(|e| e.addr);
        eps.dedup();
        Some((eps, table))
    }

    fn table_of(t: &ServiceTables, k: &ServiceKey) -> Vec<u32> {
        let v = t.services[k];
        t.maglev[v.maglev_base as usize..(v.maglev_base + v.maglev_size) as usize].to_vec()
    }

    #[test]
    fn every_service_resolves_to_its_content_with_a_marker_per_vip() {
        let mut m = Mem::new(1024, 16 * 1024);
        let mut w = Writer::adopt(&m).unwrap();
        let n = NodeConfig {
            snat_port_min: 1,
            ..Default::default()
        };
        let t = tables(&[(1, vec![ep(10), ep(11)]), (2, vec![ep(12)])]);
        let s = w.apply(&mut m, &n, &t).unwrap();
        assert_eq!(s.moved, 4, "two services, two VIP markers");
        assert_eq!(m.node, n);
        let (eps, table) = resolve(&m, &key(1)).unwrap();
        assert_eq!(eps, vec![ep(10), ep(11)]);
        assert_eq!(table, table_of(&t, &key(1)));
        assert_eq!(resolve(&m, &key(2)).unwrap().0, vec![ep(12)]);
        assert_eq!(m.services.len(), 4);
        for v in m.services.values() {
            assert_eq!(v.maglev_base % MAGLEV_CHUNK, 0, "windows start an element");
        }
    }

    #[test]
    fn one_changed_service_rewrites_only_its_windows() {
        let mut m = Mem::new(4096, 256 * 1024);
        let mut w = Writer::adopt(&m).unwrap();
        let n = NodeConfig::default();
        let mut svcs: Vec<(u8, Vec<Endpoint>)> =
            (1..=100).map(|i| (i, vec![ep(i), ep(i + 100)])).collect();
        w.apply(&mut m, &n, &tables(&svcs)).unwrap();
        let (writes, puts) = (m.writes, m.puts);

        let s = w.apply(&mut m, &n, &tables(&svcs)).unwrap();
        assert_eq!(
            (m.writes, m.puts),
            (writes, puts),
            "the same content writes nothing"
        );
        assert_eq!(s.unchanged, 200);

        svcs[41].1.push(ep(250));
        let t = tables(&svcs);
        let s = w.apply(&mut m, &n, &t).unwrap();
        assert_eq!((s.moved, s.unchanged, s.deleted), (1, 199, 0));
        assert_eq!(m.puts, puts + 1, "one services-map update");
        assert_eq!(m.writes - writes, 3 + 509, "its slots and its Maglev table");
        assert_eq!(resolve(&m, &key(42)).unwrap().0.len(), 3);
        assert_eq!(resolve(&m, &key(42)).unwrap().1, table_of(&t, &key(42)));
    }

    #[test]
    fn gone_services_are_deleted_and_their_windows_reused_after_the_grace() {
        // Room for four one-endpoint services exactly.
        let (mut m, mut w) = written(8, 1024, &svcs(1..=4, |i| vec![ep(i)]));
        // Four others: each waits for the windows the previous ones left.
        let other = svcs(5..=8, |i| vec![ep(i)]);
        let s = w
            .apply(&mut m, &NodeConfig::default(), &tables(&other))
            .unwrap();
        assert_eq!(s.deleted, 8);
        assert_eq!(s.moved, 8);
        assert!(s.waits > 0, "had to wait for the grace");
        for i in 5..=8 {
            assert_eq!(resolve(&m, &key(i)).unwrap().0, vec![ep(i)]);
        }
        assert!(!m.services.contains_key(&key(1)));
    }

    #[test]
    fn an_update_of_everything_needs_room_for_one_more_service_not_two_copies() {
        // 12 two-endpoint services (509-entry tables in 512 blocks) in a
        // Maglev array of 13 blocks: live content plus one window.
        let (mut m, mut w) = written(64, 13 * 512, &svcs(1..=12, |i| vec![ep(i), ep(i + 50)]));
        let t = tables(&svcs(1..=12, |i| vec![ep(i), ep(i + 100)]));
        let s = w.apply(&mut m, &NodeConfig::default(), &t).unwrap();
        assert_eq!(s.moved, 12);
        for i in 1..=12 {
            assert_eq!(resolve(&m, &key(i)).unwrap().0, vec![ep(i), ep(i + 100)]);
            assert_eq!(resolve(&m, &key(i)).unwrap().1, table_of(&t, &key(i)));
        }
    }

    #[test]
    fn an_array_full_to_the_last_block_still_takes_a_change_of_everything() {
        // Four one-endpoint services fill the Maglev array exactly; then
        // every one of them changes.
        let (mut m, mut w) = written(64, 4 * 256, &svcs(1..=4, |i| vec![ep(i)]));
        let b = svcs(1..=4, |i| vec![ep(i + 100)]);
        let s = w
            .apply(&mut m, &NodeConfig::default(), &tables(&b))
            .unwrap();
        assert_eq!(s.removed_to_move, 4);
        for i in 1..=4 {
            assert_eq!(resolve(&m, &key(i)).unwrap().0, vec![ep(i + 100)]);
        }
    }

    #[test]
    fn content_too_big_is_refused_by_name_and_nothing_is_written() {
        let mut m = Mem::new(2, 16 * 1024);
        let e = adopt_and_apply(&mut m, &[(1, vec![ep(10), ep(11), ep(12)])])
            .1
            .unwrap_err();
        assert!(format!("{e:#}").contains(ENDPOINTS), "{e:#}");
        assert!(format!("{e:#}").contains("--bpf-endpoint-entries"), "{e:#}");
        let mut m = Mem::new(100, 256);
        let (w, r) = adopt_and_apply(&mut m, &[(1, vec![ep(10)]), (2, vec![ep(11)])]);
        let e = r.unwrap_err();
        assert!(format!("{e:#}").contains(MAGLEV), "{e:#}");
        assert!(w.check(&tables(&[(1, vec![ep(10)])])).is_ok());
        assert!(m.services.is_empty(), "nothing written");
        assert_eq!(m.writes, 0);
    }

    #[test]
    fn a_restarted_writer_adopts_windows_and_rewrites_nothing() {
        let twenty = svcs(1..=20, |i| vec![ep(i)]);
        let (mut m, _) = written(1024, 64 * 1024, &twenty);
        let n = NodeConfig::default();
        let (writes, puts) = (m.writes, m.puts);
        let mut w2 = Writer::adopt(&m).unwrap();
        w2.apply(&mut m, &n, &tables(&twenty)).unwrap();
        assert_eq!((m.writes, m.puts), (writes, puts));
        // New windows stay clear of the adopted ones (Mem checks).
        let more = svcs(1..=30, |i| vec![ep(i)]);
        let s = w2.apply(&mut m, &n, &tables(&more)).unwrap();
        assert_eq!(s.moved, 20, "ten services and their markers");
        for i in 1..=30 {
            assert_eq!(resolve(&m, &key(i)).unwrap().0, vec![ep(i)]);
        }
    }

    #[test]
    fn overlapping_pinned_windows_are_rewritten_into_fresh_space() {
        let mut m = Mem::new(1024, 16 * 1024);
        for (n, base) in [(1u8, 0u32), (2, 0)] {
            m.services.insert(
                key(n),
                ServiceValue {
                    ep_base: base,
                    ready: 1,
                    maglev_base: 0,
                    maglev_size: 251,
                    ..Default::default()
                },
            );
        }
        let s = adopt_and_apply(&mut m, &[(1, vec![ep(1)]), (2, vec![ep(2)])])
            .1
            .unwrap();
        assert!(s.moved >= 1);
        assert_eq!(resolve(&m, &key(1)).unwrap().0, vec![ep(1)]);
        assert_eq!(resolve(&m, &key(2)).unwrap().0, vec![ep(2)]);
        assert_ne!(m.services[&key(1)].ep_base, m.services[&key(2)].ep_base);
    }

    #[test]
    fn a_value_change_alone_keeps_the_windows() {
        let mut m = Mem::new(64, 4096);
        let mut w = Writer::adopt(&m).unwrap();
        let n = NodeConfig::default();
        let mut t = tables(&[(1, vec![ep(1)])]);
        w.apply(&mut m, &n, &t).unwrap();
        let before = m.services[&key(1)];
        let writes = m.writes;
        if let Some(v) = t.services.get_mut(&key(1)) {
            v.affinity_timeout_s = 30;
        }
        let s = w.apply(&mut m, &n, &t).unwrap();
        assert_eq!((s.updated, s.moved), (1, 0));
        assert_eq!(m.writes, writes);
        let after = m.services[&key(1)];
        assert_eq!(after.affinity_timeout_s, 30);
        assert_eq!(
            (after.ep_base, after.maglev_base),
            (before.ep_base, before.maglev_base)
        );
    }
}
