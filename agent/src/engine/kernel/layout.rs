//! What a map content needs of the kernel maps, and whether it fits. Pure
//! logic, no I/O: the kernel engine's `check_capacity` and its writer
//! ([`super::writer::Writer`]) both count with it, so what is accepted is
//! what the writer can place.

use std::collections::HashSet;
use std::fmt;

use sluice_datapath::host::ServiceTables;
use sluice_datapath::maps::{
    vip_marker_key, Endpoint, ServiceKey, ServiceValue, ENDPOINTS_MAX_ENTRIES, MAGLEV_CHUNK,
    MAGLEV_MAX_ENTRIES, MAP_ENDPOINTS, MAP_MAGLEV, MAP_SERVICES, SERVICES_MAX_ENTRIES,
};

use super::alloc::block_len;

/// How large the agent makes the service-side maps (`--bpf-service-entries`,
/// `--bpf-endpoint-entries`, `--bpf-maglev-entries`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSizes {
    /// Keys of `SLUICE_SERVICES`: frontends plus one VIP marker per VIP.
    pub services: u32,
    /// Slots of `SLUICE_ENDPOINTS`.
    pub endpoints: u32,
    /// Entries of the flat Maglev array; `SLUICE_MAGLEV` holds them in
    /// elements of [`MAGLEV_CHUNK`], so this is rounded up to a multiple.
    pub maglev: u32,
}

impl Default for MapSizes {
    fn default() -> Self {
        MapSizes {
            services: SERVICES_MAX_ENTRIES,
            endpoints: ENDPOINTS_MAX_ENTRIES,
            maglev: MAGLEV_MAX_ENTRIES,
        }
    }
}

impl MapSizes {
    /// `maglev` rounded up to whole chunks (and every size at least one).
    pub fn normalized(self) -> MapSizes {
        let chunks = self.maglev.div_ceil(MAGLEV_CHUNK).max(1);
        MapSizes {
            services: self.services.max(1),
            endpoints: self.endpoints.max(1),
            maglev: chunks.saturating_mul(MAGLEV_CHUNK),
        }
    }

    /// Elements of `SLUICE_MAGLEV`.
    pub fn maglev_chunks(&self) -> u32 {
        self.maglev.div_ceil(MAGLEV_CHUNK)
    }
}

/// Smallest block of the endpoint array (slots are handed out one by one).
pub const EP_MIN_BLOCK: u32 = 1;
/// Smallest block of the Maglev array: one element, so no two services
/// ever share an element and a window is written as whole elements.
pub const MG_MIN_BLOCK: u32 = MAGLEV_CHUNK;

/// One service key as the program reads it, cut out of the flat tables.
#[derive(Clone, Copy, Debug)]
pub struct Frontend<'a> {
    pub key: ServiceKey,
    /// As laid out in the tables; the writer moves the bases.
    pub value: ServiceValue,
    /// `ready + terminating` slots (empty: no window).
    pub endpoints: &'a [Endpoint],
    /// The Maglev table (empty when nothing is ready: the program never
    /// reads it then).
    pub maglev: &'a [u32],
}

/// A content whose windows point outside its own tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("service {key} has endpoint slots {start}..{end} past the {len} endpoints")]
    Endpoints {
        key: String,
        start: u64,
        end: u64,
        len: usize,
    },
    #[error("service {key} has a Maglev window {start}..{end} past the table ({len} entries)")]
    Maglev {
        key: String,
        start: u64,
        end: u64,
        len: usize,
    },
}

/// `addr:port/proto` of a key, for messages.
pub fn key_name(k: &ServiceKey) -> String {
    let a = std::net::Ipv6Addr::from(k.addr);
    let ip = a
        .to_ipv4_mapped()
        .map_or_else(|| a.to_string(), |v4| v4.to_string());
    format!("{ip}:{}/{}", k.port, k.proto)
}

/// `v[start..end]`, if it is all there.
fn window<T>(v: &[T], start: u64, end: u64) -> Option<&[T]> {
    let (s, e) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
    v.get(s..e)
}

/// Every service key of `tables` with its slots and Maglev table, plus a
/// VIP marker for each VIP that has none (see `vip_marker_key`).
pub fn frontends(tables: &ServiceTables) -> Result<Vec<Frontend<'_>>, LayoutError> {
    let mut out = Vec::with_capacity(tables.services.len() * 2);
    let mut vips = HashSet::new();
    for (k, v) in &tables.services {
        vips.insert(k.addr);
        let ep_start = u64::from(v.ep_base);
        let ep_end = ep_start + u64::from(v.ready) + u64::from(v.terminating);
        let endpoints =
            window(&tables.endpoints, ep_start, ep_end).ok_or_else(|| LayoutError::Endpoints {
                key: key_name(k),
                start: ep_start,
                end: ep_end,
                len: tables.endpoints.len(),
            })?;
        let maglev = if v.ready > 0 && v.maglev_size > 0 {
            let s = u64::from(v.maglev_base);
            let e = s + u64::from(v.maglev_size);
            window(&tables.maglev, s, e).ok_or_else(|| LayoutError::Maglev {
                key: key_name(k),
                start: s,
                end: e,
                len: tables.maglev.len(),
            })?
        } else {
            &[]
        };
        out.push(Frontend {
            key: *k,
            value: *v,
            endpoints,
            maglev,
        });
    }
    for a in vips {
        let k = vip_marker_key(&a);
        if !tables.services.contains_key(&k) {
            out.push(Frontend {
                key: k,
                value: ServiceValue::default(),
                endpoints: &[],
                maglev: &[],
            });
        }
    }
    Ok(out)
}

/// What a content takes of the kernel maps, counted as the writer places
/// it: every window a power-of-two block (Maglev: at least one element).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// Keys of `SLUICE_SERVICES`, VIP markers included.
    pub keys: u64,
    /// Of which VIP markers.
    pub markers: u64,
    /// Endpoint slots the services use, and the blocks that hold them.
    pub endpoint_slots: u64,
    pub endpoint_blocks: u64,
    /// Maglev entries the services use, and the blocks that hold them.
    pub maglev_entries: u64,
    pub maglev_blocks: u64,
}

pub fn need(fronts: &[Frontend<'_>]) -> Need {
    let mut n = Need::default();
    for f in fronts {
        n.keys += 1;
        if f.key == vip_marker_key(&f.key.addr) {
            n.markers += 1;
        }
        if !f.endpoints.is_empty() {
            n.endpoint_slots += f.endpoints.len() as u64;
            n.endpoint_blocks += block_len(f.endpoints.len() as u64, EP_MIN_BLOCK);
        }
        if !f.maglev.is_empty() {
            n.maglev_entries += f.maglev.len() as u64;
            n.maglev_blocks += block_len(f.maglev.len() as u64, MG_MIN_BLOCK);
        }
    }
    n
}

/// A content larger than the kernel maps: the limit, what the state needs,
/// and the flag that raises the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    #[error(
        "the state needs {need} keys in {map} ({frontends} frontends and {markers} VIP \
         markers) but it holds {max}; raise --bpf-service-entries (SLUICE_BPF_SERVICE_ENTRIES)",
        map = MAP_SERVICES,
        frontends = need - markers
    )]
    Services { need: u64, markers: u64, max: u32 },
    #[error(
        "the state needs {need} slots in {map} ({slots} endpoints, each service's slots \
         taking a power-of-two block) but it holds {max}; raise --bpf-endpoint-entries \
         (SLUICE_BPF_ENDPOINT_ENTRIES)",
        map = MAP_ENDPOINTS
    )]
    Endpoints { need: u64, slots: u64, max: u32 },
    #[error(
        "the state needs {need} entries in {map} ({entries} Maglev entries, each service's \
         table taking a power-of-two block of at least {chunk}) but it holds {max}; raise \
         --bpf-maglev-entries (SLUICE_BPF_MAGLEV_ENTRIES)",
        map = MAP_MAGLEV,
        chunk = MAGLEV_CHUNK
    )]
    Maglev { need: u64, entries: u64, max: u32 },
}

/// Whether `need` fits maps of `sizes`: the first limit it passes.
pub fn check(need: &Need, sizes: &MapSizes) -> Result<(), CapacityError> {
    if need.keys > u64::from(sizes.services) {
        return Err(CapacityError::Services {
            need: need.keys,
            markers: need.markers,
            max: sizes.services,
        });
    }
    if need.endpoint_blocks > u64::from(sizes.endpoints) {
        return Err(CapacityError::Endpoints {
            need: need.endpoint_blocks,
            slots: need.endpoint_slots,
            max: sizes.endpoints,
        });
    }
    if need.maglev_blocks > u64::from(sizes.maglev) {
        return Err(CapacityError::Maglev {
            need: need.maglev_blocks,
            entries: need.maglev_entries,
            max: sizes.maglev,
        });
    }
    Ok(())
}

impl fmt::Display for MapSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{MAP_SERVICES} {} keys, {MAP_ENDPOINTS} {} slots, {MAP_MAGLEV} {} entries",
            self.services, self.endpoints, self.maglev
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_datapath::host::ServiceSpec;
    use sluice_datapath::maps::{v4_mapped, PROTO_TCP};

    fn spec(i: u32, n_ep: u32) -> ServiceSpec {
        let b = i.to_be_bytes();
        ServiceSpec {
            key: ServiceKey {
                addr: v4_mapped([10, b[1], b[2], b[3]]),
                port: 80,
                proto: PROTO_TCP,
                _pad: 0,
            },
            ready: (0..n_ep)
                .map(|e| Endpoint {
                    addr: v4_mapped([172, 16, (e / 250) as u8, (e % 250) as u8 + 1]),
                    port: 8080,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn tables(n: u32, n_ep: u32) -> ServiceTables {
        let specs: Vec<ServiceSpec> = (0..n).map(|i| spec(i, n_ep)).collect();
        // Without markers, as the control side hands it over.
        let mut t = ServiceTables::new();
        for s in &specs {
            t.add(s);
        }
        t
    }

    #[test]
    fn markers_are_added_once_per_vip() {
        let t = tables(3, 2);
        let f = frontends(&t).unwrap();
        assert_eq!(f.len(), 6);
        let n = need(&f);
        assert_eq!((n.keys, n.markers), (6, 3));
        assert_eq!(n.endpoint_slots, 6);
        assert_eq!(n.maglev_entries, 3 * 251);
        assert_eq!(n.maglev_blocks, 3 * 256);
        // Markers already there are not counted twice.
        let mut t2 = t.clone();
        t2.add_vip_marker(t.services.keys().next().unwrap().addr);
        assert_eq!(need(&frontends(&t2).unwrap()).keys, 6);
    }

    #[test]
    fn the_two_workloads_fit_the_defaults() {
        let sizes = MapSizes::default();
        // 10 000 Services x 10 endpoints: 1021-entry tables in 1024 blocks.
        let n = need(&frontends(&tables(10_000, 10)).unwrap());
        assert_eq!(n.maglev_blocks, 10_000 * 1024);
        assert_eq!(n.endpoint_blocks, 10_000 * 16);
        assert_eq!(n.keys, 20_000);
        check(&n, &sizes).unwrap();
        // 20 000 one-endpoint Services.
        let n = need(&frontends(&tables(20_000, 1)).unwrap());
        assert_eq!(n.maglev_blocks, 20_000 * 256);
        assert_eq!(n.keys, 40_000);
        check(&n, &sizes).unwrap();
    }

    #[test]
    fn over_the_limit_names_the_map_the_need_and_the_flag() {
        let n = need(&frontends(&tables(100, 10)).unwrap());
        let small = MapSizes {
            services: 1000,
            endpoints: 10_000,
            maglev: 50 * 1024,
        };
        let refused = |sizes: MapSizes| check(&n, &sizes).unwrap_err().to_string();
        let e = refused(small);
        assert!(e.contains("SLUICE_MAGLEV"), "{e}");
        assert!(e.contains("102400") && e.contains("51200"), "{e}");
        assert!(e.contains("--bpf-maglev-entries"), "{e}");
        assert!(e.contains("SLUICE_BPF_MAGLEV_ENTRIES"), "{e}");

        let e = refused(MapSizes {
            services: 150,
            ..small
        });
        assert!(
            e.contains("200 keys") && e.contains("100 VIP markers"),
            "{e}"
        );
        assert!(e.contains("--bpf-service-entries"), "{e}");

        let e = refused(MapSizes {
            endpoints: 1000,
            ..small
        });
        assert!(e.contains("1600 slots") && e.contains("holds 1000"), "{e}");
        assert!(e.contains("--bpf-endpoint-entries"), "{e}");
    }

    #[test]
    fn windows_outside_the_tables_are_refused_by_key() {
        let mut t = tables(1, 2);
        t.maglev.truncate(10);
        let e = frontends(&t).unwrap_err().to_string();
        assert!(e.contains("10.0.0.0:80/6") && e.contains("Maglev"), "{e}");
        let mut t = tables(1, 2);
        t.endpoints.clear();
        assert!(matches!(frontends(&t), Err(LayoutError::Endpoints { .. })));
    }

    #[test]
    fn sizes_round_maglev_to_whole_chunks() {
        let s = MapSizes {
            services: 0,
            endpoints: 0,
            maglev: 1000,
        }
        .normalized();
        assert_eq!(s.maglev, 1024);
        assert_eq!(s.maglev_chunks(), 4);
        assert_eq!(s.services, 1);
    }
}
