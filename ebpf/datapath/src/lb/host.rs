//! Host side of the load balancer (feature `host`): the table builder both
//! engines use, so the map layout is decided once, and in-memory maps for
//! the emulated engine and the tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use super::maps::{
    mac_is_zero, vip_marker, Addr, FlowKey, FlowValue, FrontendKey, FrontendValue, LbBackend,
    LbConfig, BE_F_HEALTHY, FE_F_MARKER, LB_FLOWS_MAX_ENTRIES, MAGLEV_CHUNK, PROTO_TCP, PROTO_UDP,
};
use super::LbMaps;
use crate::host::{build_maglev, maglev_table_size, LruMap};

/// One Service as the control side describes it to the builder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbServiceSpec {
    /// Non-zero and stable while the Service exists (the engines hash its
    /// name, [`LbTables::service_id`]): backends name their Service by it.
    pub id: u32,
    pub frontends: Vec<FrontendKey>,
    /// Every configured backend, healthy or not.
    pub backends: Vec<LbBackendSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbBackendSpec {
    /// Unique over all Services; stable while configured.
    pub id: u32,
    /// The node's address: its Maglev identity, so every load balancer
    /// builds the same table for the same nodes.
    pub addr: Addr,
    pub mac: [u8; 6],
    pub healthy: bool,
}

/// Frontends, backends and the flat Maglev array as the program reads
/// them. Each Service's window starts on a [`MAGLEV_CHUNK`] boundary, so
/// the kernel engine writes whole elements of its chunked array.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbTables {
    pub frontends: BTreeMap<FrontendKey, FrontendValue>,
    pub backends: BTreeMap<u32, LbBackend>,
    pub maglev: Vec<u32>,
}

/// Why a set of Services cannot be laid out; nothing is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LbTablesError {
    /// Two Services claim the same (VIP, port, protocol).
    DuplicateFrontend(FrontendKey),
    /// Two backends share an id.
    DuplicateBackend(u32),
    /// A frontend neither TCP nor UDP, or with port 0.
    BadFrontend(FrontendKey),
    /// Service id 0 (reserved).
    ZeroServiceId,
}

fn show_addr(a: &Addr) -> String {
    if a[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        std::net::Ipv4Addr::new(a[12], a[13], a[14], a[15]).to_string()
    } else {
        std::net::Ipv6Addr::from(*a).to_string()
    }
}

fn show_key(k: &FrontendKey) -> String {
    let proto = match k.proto {
        PROTO_TCP => "TCP".to_string(),
        PROTO_UDP => "UDP".to_string(),
        p => format!("protocol {p}"),
    };
    format!("{} port {} {proto}", show_addr(&k.addr), k.port)
}

impl fmt::Display for LbTablesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LbTablesError::DuplicateFrontend(k) => {
                write!(f, "two Services claim the frontend {}", show_key(k))
            }
            LbTablesError::DuplicateBackend(id) => write!(f, "two backends have the id {id}"),
            LbTablesError::BadFrontend(k) => {
                write!(f, "the frontend {} is not a TCP or UDP port", show_key(k))
            }
            LbTablesError::ZeroServiceId => write!(f, "a Service has the id 0"),
        }
    }
}

impl std::error::Error for LbTablesError {}

impl LbTables {
    /// A Service's id from its name: FNV-1a, never 0.
    pub fn service_id(name: &str) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        for b in name.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        h.max(1)
    }

    /// Lay out `services`: every frontend points at its Service's Maglev
    /// window, built over the healthy backends (all configured ones when
    /// none is healthy); every VIP gets its marker. Backends without a MAC
    /// are kept (flows naming them are chosen again) but never chosen.
    pub fn build(services: &[LbServiceSpec]) -> Result<LbTables, LbTablesError> {
        let mut t = LbTables::default();
        let mut vips: BTreeSet<Addr> = BTreeSet::new();
        for s in services {
            if s.id == 0 {
                return Err(LbTablesError::ZeroServiceId);
            }
            for b in &s.backends {
                let v = LbBackend {
                    service: s.id,
                    mac: b.mac,
                    flags: if b.healthy { BE_F_HEALTHY } else { 0 },
                    _pad: 0,
                };
                if t.backends.insert(b.id, v).is_some() {
                    return Err(LbTablesError::DuplicateBackend(b.id));
                }
            }
            let usable: Vec<&LbBackendSpec> =
                s.backends.iter().filter(|b| !mac_is_zero(&b.mac)).collect();
            let healthy: Vec<&LbBackendSpec> =
                usable.iter().copied().filter(|b| b.healthy).collect();
            let mut chosen = if healthy.is_empty() {
                usable
            } else {
                healthy.clone()
            };
            // The table depends on the order: sort by identity so every
            // load balancer builds the same one whatever order it was given.
            chosen.sort_by_key(|b| (b.addr, b.id));
            let (base, size) = if chosen.is_empty() {
                (0, 0)
            } else {
                let m = maglev_table_size(chosen.len());
                let ids: Vec<(Addr, u16)> = chosen.iter().map(|b| (b.addr, 0)).collect();
                let base = t.maglev.len() as u32;
                t.maglev.extend(
                    build_maglev(&ids, m)
                        .into_iter()
                        .map(|i| chosen[i as usize].id),
                );
                // Pad to the next chunk: the next window starts an element.
                let padded = t.maglev.len().next_multiple_of(MAGLEV_CHUNK as usize);
                t.maglev.resize(padded, 0);
                (base, m)
            };
            let value = FrontendValue {
                service: s.id,
                flags: 0,
                backends: s.backends.len() as u32,
                healthy: healthy.len() as u32,
                maglev_base: base,
                maglev_size: size,
            };
            for k in &s.frontends {
                let k = FrontendKey { _pad: 0, ..*k };
                if (k.proto != PROTO_TCP && k.proto != PROTO_UDP) || k.port == 0 {
                    return Err(LbTablesError::BadFrontend(k));
                }
                if t.frontends.insert(k, value).is_some() {
                    return Err(LbTablesError::DuplicateFrontend(k));
                }
                vips.insert(k.addr);
            }
        }
        for a in vips {
            t.frontends.insert(
                vip_marker(&a),
                FrontendValue {
                    flags: FE_F_MARKER,
                    ..Default::default()
                },
            );
        }
        Ok(t)
    }
}

/// In-memory maps with the kernel's semantics: the tables swapped whole,
/// the flow table an LRU.
#[derive(Clone, Debug)]
pub struct HostLbMaps {
    config: LbConfig,
    tables: Arc<LbTables>,
    /// The tables' keys in hash maps: the per-frame lookups.
    frontends: HashMap<FrontendKey, FrontendValue>,
    backends: HashMap<u32, LbBackend>,
    flows: LruMap<FlowKey, FlowValue>,
}

impl Default for HostLbMaps {
    fn default() -> Self {
        Self::new()
    }
}

impl HostLbMaps {
    /// With the kernel map's flow capacity.
    pub fn new() -> Self {
        Self::with_capacity(LB_FLOWS_MAX_ENTRIES as usize)
    }

    pub fn with_capacity(flows: usize) -> Self {
        HostLbMaps {
            config: LbConfig::default(),
            tables: Arc::new(LbTables::default()),
            frontends: HashMap::new(),
            backends: HashMap::new(),
            flows: LruMap::new(flows),
        }
    }

    pub fn set_config(&mut self, c: LbConfig) {
        self.config = c;
    }

    /// Swap in a complete set of tables; the flow table is kept.
    pub fn replace_tables(&mut self, t: Arc<LbTables>) {
        self.frontends = t.frontends.iter().map(|(k, v)| (*k, *v)).collect();
        self.backends = t.backends.iter().map(|(k, v)| (*k, *v)).collect();
        self.tables = t;
    }

    pub fn tables(&self) -> &LbTables {
        &self.tables
    }

    pub fn flows_len(&self) -> usize {
        self.flows.len()
    }

    pub fn flows(&self) -> Vec<(FlowKey, FlowValue)> {
        self.flows.iter().map(|(k, v)| (*k, *v)).collect()
    }

    pub fn flows_clear(&mut self) {
        self.flows.clear();
    }
}

impl LbMaps for HostLbMaps {
    fn config(&self) -> LbConfig {
        self.config
    }

    fn frontend(&self, key: &FrontendKey) -> Option<FrontendValue> {
        self.frontends.get(key).copied()
    }

    fn backend(&self, id: u32) -> Option<LbBackend> {
        self.backends.get(&id).copied()
    }

    fn maglev(&self, entry: u32) -> Option<u32> {
        self.tables.maglev.get(entry as usize).copied()
    }

    fn flow_get(&self, key: &FlowKey) -> Option<FlowValue> {
        self.flows.get(key)
    }

    fn flow_put(&mut self, key: &FlowKey, value: &FlowValue) {
        self.flows.insert(*key, *value);
    }
}
