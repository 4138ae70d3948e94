//! The nodes indexed for the subset decisions: slots that stay put while
//! nodes come and go, zones interned, and per zone the eligible nodes, so
//! a node event touches one zone's list instead of rebuilding everything.

use std::collections::HashMap;

use crate::error::InputError;
use crate::node::Node;
use crate::rank::node_hash;

/// A node's slot in the table; freed slots are reused.
pub(crate) type Slot = u32;
/// A zone's index in the table; zones are never forgotten.
pub(crate) type ZoneId = u32;

pub(crate) struct Entry {
    pub name: String,
    pub zone: ZoneId,
    pub hash: u64,
    pub eligible: bool,
}

#[derive(Default)]
pub(crate) struct NodeTable {
    slots: Vec<Option<Entry>>,
    free: Vec<Slot>,
    by_name: HashMap<String, Slot>,
    zones: Vec<String>,
    zone_ids: HashMap<String, ZoneId>,
    /// Per zone, the eligible nodes' slots, in no particular order.
    eligible: Vec<Vec<Slot>>,
    /// Per slot, its position in its zone's `eligible` list.
    position: Vec<u32>,
}

impl NodeTable {
    pub fn build(nodes: &[Node]) -> Result<Self, InputError> {
        let mut table = NodeTable::default();
        for node in nodes {
            table.insert(node)?;
        }
        Ok(table)
    }

    pub fn entry(&self, slot: Slot) -> Option<&Entry> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    pub fn slot(&self, name: &str) -> Option<Slot> {
        self.by_name.get(name).copied()
    }

    pub fn zone_count(&self) -> usize {
        self.zones.len()
    }

    pub fn zone_name(&self, zone: ZoneId) -> &str {
        self.zones.get(zone as usize).map_or("", String::as_str)
    }

    pub fn eligible_in(&self, zone: ZoneId) -> &[Slot] {
        self.eligible.get(zone as usize).map_or(&[], Vec::as_slice)
    }

    /// `(zone, eligible nodes)` for every zone ever seen.
    pub fn eligible_counts(&self) -> Vec<(ZoneId, usize)> {
        (0..self.zones.len())
            .map(|z| (z as ZoneId, self.eligible[z].len()))
            .collect()
    }

    /// Whether `a` comes before `b` for a Service: by rank, then by name.
    pub fn before(&self, a: (u64, Slot), b: (u64, Slot)) -> bool {
        if a.0 != b.0 {
            return a.0 < b.0;
        }
        let name = |s: Slot| self.entry(s).map_or("", |e| e.name.as_str());
        name(a.1) < name(b.1)
    }

    fn zone_id(&mut self, zone: &str) -> ZoneId {
        if let Some(&id) = self.zone_ids.get(zone) {
            return id;
        }
        let id = self.zones.len() as ZoneId;
        self.zones.push(zone.to_string());
        self.zone_ids.insert(zone.to_string(), id);
        self.eligible.push(Vec::new());
        id
    }

    pub fn insert(&mut self, node: &Node) -> Result<Slot, InputError> {
        node.validate()?;
        if self.by_name.contains_key(&node.name) {
            return Err(InputError::DuplicateNode {
                node: node.name.clone(),
            });
        }
        let zone = self.zone_id(&node.zone);
        let entry = Entry {
            name: node.name.clone(),
            zone,
            hash: node_hash(&node.name),
            eligible: false,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(entry);
                slot
            }
            None => {
                self.slots.push(Some(entry));
                self.position.push(0);
                (self.slots.len() - 1) as Slot
            }
        };
        self.by_name.insert(node.name.clone(), slot);
        if node.is_eligible() {
            self.set_eligible(slot, true);
        }
        Ok(slot)
    }

    /// Moves an existing node to `zone` with the given eligibility.
    pub fn update(&mut self, slot: Slot, zone: &str, eligible: bool) {
        let zone = self.zone_id(zone);
        self.set_eligible(slot, false);
        if let Some(entry) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) {
            entry.zone = zone;
        }
        self.set_eligible(slot, eligible);
    }

    pub fn remove(&mut self, slot: Slot) {
        self.set_eligible(slot, false);
        if let Some(entry) = self.slots.get_mut(slot as usize).and_then(Option::take) {
            self.by_name.remove(&entry.name);
            self.free.push(slot);
        }
    }

    fn set_eligible(&mut self, slot: Slot, eligible: bool) {
        let Some(entry) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        if entry.eligible == eligible {
            return;
        }
        entry.eligible = eligible;
        let list = &mut self.eligible[entry.zone as usize];
        if eligible {
            self.position[slot as usize] = list.len() as u32;
            list.push(slot);
        } else {
            let at = self.position[slot as usize] as usize;
            list.swap_remove(at);
            if let Some(&moved) = list.get(at) {
                self.position[moved as usize] = at as u32;
            }
        }
    }
}
