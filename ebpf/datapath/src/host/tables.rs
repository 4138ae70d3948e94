//! The service side of the maps, built whole by the control side and
//! swapped in at once, so the program never sees half a sync.

use super::maglev::{build_maglev, maglev_table_size};
use crate::maps::{vip_marker_key, Addr, Endpoint, ServiceKey, ServiceValue};
use std::collections::HashMap;

/// One frontend as the control side knows it. For `Local` services only this
/// node's endpoints belong in `ready` / `terminating` (P4).
#[derive(Clone, Debug, Default)]
pub struct ServiceSpec {
    pub key: ServiceKey,
    /// 0: derive a stable id from the key ([`ServiceTables::stable_id`]);
    /// ids name services in conntrack and affinity entries, so they should
    /// survive a resync.
    pub id: u32,
    /// `SVC_F_*`.
    pub flags: u32,
    pub affinity_timeout_s: u32,
    /// Ready, serving endpoints.
    pub ready: Vec<Endpoint>,
    /// Serving but terminating endpoints (the P5 fallback).
    pub terminating: Vec<Endpoint>,
}

/// Services, endpoint slots and the Maglev array, laid out as the program
/// reads them.
#[derive(Clone, Debug, Default)]
pub struct ServiceTables {
    pub services: HashMap<ServiceKey, ServiceValue>,
    pub endpoints: Vec<Endpoint>,
    pub maglev: Vec<u32>,
}

impl ServiceTables {
    pub fn new() -> Self {
        Self::default()
    }

    /// FNV-1a of the key, never 0.
    pub fn stable_id(key: &ServiceKey) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        for b in key
            .addr
            .iter()
            .chain(key.port.to_be_bytes().iter())
            .chain(core::iter::once(&key.proto))
        {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
        h.max(1)
    }

    /// Lay out one service: slots ready-first, then terminating; a Maglev
    /// window over the ready ones. Returns the service value stored.
    pub fn add(&mut self, spec: &ServiceSpec) -> ServiceValue {
        let ep_base = self.endpoints.len() as u32;
        self.endpoints.extend_from_slice(&spec.ready);
        self.endpoints.extend_from_slice(&spec.terminating);
        let (maglev_base, maglev_size) = if spec.ready.is_empty() {
            (0, 0)
        } else {
            let m = maglev_table_size(spec.ready.len());
            let ids: Vec<(Addr, u16)> = spec.ready.iter().map(|e| (e.addr, e.port)).collect();
            let base = self.maglev.len() as u32;
            self.maglev.extend(build_maglev(&ids, m));
            (base, m)
        };
        let v = ServiceValue {
            id: if spec.id == 0 {
                Self::stable_id(&spec.key)
            } else {
                spec.id
            },
            flags: spec.flags,
            ep_base,
            ready: spec.ready.len() as u32,
            terminating: spec.terminating.len() as u32,
            maglev_base,
            maglev_size,
            affinity_timeout_s: spec.affinity_timeout_s,
        };
        self.services.insert(spec.key, v);
        v
    }

    /// Mark `addr` as a VIP for packets that carry no port (see
    /// [`vip_marker_key`]).
    pub fn add_vip_marker(&mut self, addr: Addr) {
        self.services.entry(vip_marker_key(&addr)).or_default();
    }

    pub fn build<'a>(specs: impl IntoIterator<Item = &'a ServiceSpec>) -> Self {
        let mut t = Self::new();
        for s in specs {
            t.add(s);
            t.add_vip_marker(s.key.addr);
        }
        t
    }
}
