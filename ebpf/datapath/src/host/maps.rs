//! In-memory maps for the user-space engine and the tests.

use super::lru::LruMap;
use super::tables::ServiceTables;
use crate::conntrack::{merged, port_use, PortHolder, PortUse};
use crate::env::{CtWrite, Maps, SeqTrack};
use crate::maps::{
    AffinityKey, AffinityValue, CtKey, CtValue, Endpoint, LocalKey, LocalLink, NodeConfig,
    ServiceKey, ServiceValue, SnatExhaustKey, SNAT_EXHAUSTED_MAX_ENTRIES,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Cilium's default conntrack size (`bpf-ct-global-tcp-max`).
pub const DEFAULT_CT_CAPACITY: usize = 262_144;
/// Cilium's default for its affinity map.
pub const DEFAULT_AFFINITY_CAPACITY: usize = 65_536;

#[derive(Clone, Debug)]
pub struct HostMaps {
    node: NodeConfig,
    tables: Arc<ServiceTables>,
    ct: LruMap<CtKey, CtValue>,
    affinity: LruMap<AffinityKey, AffinityValue>,
    local: HashMap<LocalKey, LocalLink>,
    snat_exhausted: LruMap<SnatExhaustKey, u64>,
}

impl Default for HostMaps {
    fn default() -> Self {
        Self::new()
    }
}

impl HostMaps {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CT_CAPACITY, DEFAULT_AFFINITY_CAPACITY)
    }

    pub fn with_capacity(ct: usize, affinity: usize) -> Self {
        Self {
            node: NodeConfig::default(),
            tables: Arc::new(ServiceTables::default()),
            ct: LruMap::new(ct),
            affinity: LruMap::new(affinity),
            local: HashMap::new(),
            snat_exhausted: LruMap::new(SNAT_EXHAUSTED_MAX_ENTRIES as usize),
        }
    }

    /// A pod on this node at `key`, reached on `link` (`SLUICE_LOCAL`).
    pub fn set_local_link(&mut self, key: LocalKey, link: LocalLink) {
        self.local.insert(key, link);
    }

    pub fn remove_local_link(&mut self, key: &LocalKey) {
        self.local.remove(key);
    }

    pub fn local_links(&self) -> Vec<(LocalKey, LocalLink)> {
        self.local.iter().map(|(k, v)| (*k, *v)).collect()
    }

    pub fn set_node(&mut self, node: NodeConfig) {
        self.node = node;
    }

    pub fn node_config(&self) -> NodeConfig {
        self.node
    }

    /// Swap in a complete set of services, endpoints and Maglev tables.
    /// Conntrack is kept: established flows keep their endpoints.
    pub fn replace_services(&mut self, tables: ServiceTables) {
        self.tables = Arc::new(tables);
    }

    /// Same, for tables shared between engines (built once per sync).
    pub fn replace_services_shared(&mut self, tables: Arc<ServiceTables>) {
        self.tables = tables;
    }

    pub fn tables(&self) -> &ServiceTables {
        &self.tables
    }

    pub fn ct_len(&self) -> usize {
        self.ct.len()
    }

    pub fn ct_capacity(&self) -> usize {
        self.ct.capacity()
    }

    pub fn ct_evictions(&self) -> u64 {
        self.ct.evictions()
    }

    pub fn ct_iter(&self) -> impl Iterator<Item = (&CtKey, &CtValue)> {
        self.ct.iter()
    }

    /// New flows reset for want of a SNAT port, by Service and endpoint
    /// (`SLUICE_SNAT_EXHAUSTED`).
    pub fn snat_exhausted_snapshot(&self) -> Vec<(SnatExhaustKey, u64)> {
        self.snat_exhausted.iter().map(|(k, v)| (*k, *v)).collect()
    }

    pub fn ct_snapshot(&self) -> Vec<(CtKey, CtValue)> {
        self.ct.iter().map(|(k, v)| (*k, *v)).collect()
    }

    pub fn ct_clear(&mut self) {
        self.ct.clear();
    }

    /// Drop conntrack entries the program has no more use for (it ignores
    /// expired ones; this frees the room). An expired entry of a FIN-closed
    /// flow stays while it holds its SNAT port for the endpoint's
    /// TIME_WAIT, as it does in the kernel's LRU map, or the claim would
    /// take the port as free. An entry of a flow that ended cleanly stays
    /// until it expires too, as late retransmits still need it. Returns how
    /// many went.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        self.ct.retain(|_, v| {
            v.expires_ns > now_ns || port_use(&PortHolder::of(v), now_ns) != PortUse::Free
        })
    }

    /// Drop affinity entries unused for longer than `max_age_ns`.
    pub fn expire_affinity(&mut self, now_ns: u64, max_age_ns: u64) -> usize {
        self.affinity
            .retain(|_, v| now_ns.saturating_sub(v.last_used_ns) <= max_age_ns)
    }

    pub fn affinity_len(&self) -> usize {
        self.affinity.len()
    }

    pub fn affinity_snapshot(&self) -> Vec<(AffinityKey, AffinityValue)> {
        self.affinity.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

impl Maps for HostMaps {
    fn node(&self) -> NodeConfig {
        self.node
    }

    fn service(&self, key: &ServiceKey) -> Option<ServiceValue> {
        self.tables.services.get(key).copied()
    }

    fn endpoint(&self, slot: u32) -> Option<Endpoint> {
        self.tables.endpoints.get(slot as usize).copied()
    }

    fn maglev(&self, slot: u32) -> Option<u32> {
        self.tables.maglev.get(slot as usize).copied()
    }

    fn ct_get(&self, key: &CtKey) -> Option<CtValue> {
        self.ct.get(key)
    }

    fn ct_get_tracking<F: FnOnce(&CtValue) -> Option<SeqTrack>>(
        &mut self,
        key: &CtKey,
        out: &mut CtValue,
        track: F,
    ) -> bool {
        let Some(v) = self.ct.get(key) else {
            return false;
        };
        *out = v;
        if let Some(t) = track(&v) {
            // In place, as the kernel writes into the map value.
            self.ct.update(key, |v| {
                v.seq_nxt = t.nxt;
                v.seq_ack = t.ack;
            });
        }
        true
    }

    fn ct_write_half(&mut self, key: &CtKey, w: &CtWrite) -> Option<u8> {
        let mut state = None;
        self.ct.update(key, |v| {
            w.apply(v);
            state = Some(merged(v).0);
        });
        state
    }

    fn ct_put(&mut self, key: &CtKey, value: &CtValue) -> bool {
        self.ct.insert(*key, *value);
        true
    }

    fn ct_put_new(&mut self, key: &CtKey, value: &CtValue) -> bool {
        self.ct.insert_new(*key, *value)
    }

    fn ct_delete(&mut self, key: &CtKey) {
        self.ct.remove(key);
    }

    fn affinity_get(&self, key: &AffinityKey) -> Option<AffinityValue> {
        self.affinity.get(key)
    }

    fn affinity_put(&mut self, key: &AffinityKey, value: &AffinityValue) {
        self.affinity.insert(*key, *value);
    }

    fn local_link(&self, key: &LocalKey) -> Option<LocalLink> {
        self.local.get(key).copied()
    }

    fn snat_exhausted(&mut self, key: &SnatExhaustKey) {
        let n = self.snat_exhausted.get(key).unwrap_or(0);
        self.snat_exhausted.insert(*key, n.saturating_add(1));
    }
}
