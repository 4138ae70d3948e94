//! The subsets kept up to date one event at a time.
//!
//! After every event the state equals [`crate::compute`] over the nodes
//! and Services now, given the subsets just before the event as the
//! previous ones (the property tests check exactly this). It gets there by
//! redoing only what can differ:
//!
//! - `Cluster` Services all share the same candidates (the eligible nodes)
//!   and so the same per-zone quotas. Every zone holds exactly its quota of
//!   members, all candidates. A zone's pick can only change when its quota
//!   changes or one of its members stops being a candidate there; any other
//!   zone keeps its members as they are. So an event redoes, per `Cluster`
//!   Service, the zones whose quota changed and the zones of the changed
//!   node if it was a member: usually nothing, or one zone.
//! - `Local` Services each have their own candidates (nodes with serving
//!   pods), so only the Services listing the node are recomputed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::InputError;
use crate::node::Node;
use crate::rank::service_salt;
use crate::select::select_zone;
use crate::service::{ServiceKey, SubsetService, TrafficPolicy};
use crate::share::{subset_limit, zone_quotas};
use crate::subsets::{Outcome, Subset, Warning};
use crate::table::{NodeTable, Slot, ZoneId};

struct ServiceEntry {
    key: ServiceKey,
    salt: u64,
    serving: BTreeSet<String>,
    /// Member slots, any order, no repeats.
    members: Vec<Slot>,
    warning: Option<Warning>,
}

/// Nodes, Services and their subsets, updated per event.
pub struct SubsetState {
    table: NodeTable,
    services: Vec<Option<ServiceEntry>>,
    free_services: Vec<usize>,
    by_key: HashMap<ServiceKey, usize>,
    /// Node name → the `Local` Services that list it as serving.
    serving_index: HashMap<String, Vec<usize>>,
    /// The `Cluster` Services, by index.
    cluster_services: Vec<usize>,
    /// Per zone, the members every `Cluster` Service has there.
    cluster_quotas: Vec<usize>,
}

impl SubsetState {
    /// The full compute: every Service's subsets, keeping members of
    /// `previous` where the rules allow.
    pub fn new(
        nodes: &[Node],
        services: &[SubsetService],
        previous: &BTreeMap<ServiceKey, Subset>,
    ) -> Result<Self, InputError> {
        let mut state = SubsetState {
            table: NodeTable::build(nodes)?,
            services: Vec::with_capacity(services.len()),
            free_services: Vec::new(),
            by_key: HashMap::with_capacity(services.len()),
            serving_index: HashMap::new(),
            cluster_services: Vec::new(),
            cluster_quotas: Vec::new(),
        };
        state.cluster_quotas = state.compute_cluster_quotas();
        for service in services {
            let mut prev: Vec<Slot> = previous
                .get(&service.key)
                .map(|subset| {
                    subset
                        .members()
                        .filter_map(|name| state.table.slot(name))
                        .collect()
                })
                .unwrap_or_default();
            // A name given in two zones is still one previous member.
            prev.sort_unstable();
            prev.dedup();
            state.insert_service(service, prev)?;
        }
        Ok(state)
    }

    /// A node joined the cluster.
    pub fn add_node(&mut self, node: &Node) -> Result<Vec<ServiceKey>, InputError> {
        let slot = self.table.insert(node)?;
        Ok(self.after_node_event(&node.name, slot, None))
    }

    /// A node left the cluster.
    pub fn remove_node(&mut self, name: &str) -> Result<Vec<ServiceKey>, InputError> {
        let slot = self
            .table
            .slot(name)
            .ok_or_else(|| InputError::UnknownNode {
                node: name.to_string(),
            })?;
        let before = self.table.entry(slot).map(|e| (e.zone, e.eligible));
        let zone = self.table.zone_name(before.map_or(0, |b| b.0)).to_string();
        // Ineligible first, so members are replaced while the slot still
        // names the node; then the slot is freed.
        self.table.update(slot, &zone, false);
        let changed = self.after_node_event(name, slot, before);
        self.table.remove(slot);
        Ok(changed)
    }

    /// A node's zone or eligibility facts changed.
    pub fn update_node(&mut self, node: &Node) -> Result<Vec<ServiceKey>, InputError> {
        node.validate()?;
        let slot = self
            .table
            .slot(&node.name)
            .ok_or_else(|| InputError::UnknownNode {
                node: node.name.clone(),
            })?;
        let before = self.table.entry(slot).map(|e| (e.zone, e.eligible));
        self.table.update(slot, &node.zone, node.is_eligible());
        Ok(self.after_node_event(&node.name, slot, before))
    }

    /// A Service was created or changed (policy or serving nodes): it is
    /// recomputed, keeping its current members where the rules allow.
    pub fn upsert_service(&mut self, service: &SubsetService) -> Result<bool, InputError> {
        service.key.validate()?;
        let prev = match self.by_key.get(&service.key) {
            Some(&i) => {
                let before = self.sorted_members(i);
                self.drop_service(i);
                before
            }
            None => Vec::new(),
        };
        let i = self.insert_service(service, prev.clone())?;
        Ok(self.sorted_members(i) != prev)
    }

    /// A Service is no longer an internal LB with NEGs.
    pub fn remove_service(&mut self, key: &ServiceKey) -> Result<(), InputError> {
        let &i = self
            .by_key
            .get(key)
            .ok_or_else(|| InputError::UnknownService {
                service: key.to_string(),
            })?;
        self.drop_service(i);
        Ok(())
    }

    /// One Service's subset, if the Service is known.
    pub fn subset(&self, key: &ServiceKey) -> Option<Subset> {
        let &i = self.by_key.get(key)?;
        self.services.get(i)?.as_ref().map(|s| self.subset_of(s))
    }

    /// Every Service's subset and the warnings, as [`crate::compute`]
    /// returns them.
    pub fn outcome(&self) -> Outcome {
        let mut subsets = BTreeMap::new();
        let mut warnings = BTreeMap::new();
        for service in self.services.iter().flatten() {
            subsets.insert(service.key.clone(), self.subset_of(service));
            if let Some(warning) = &service.warning {
                warnings.insert(&service.key, warning.clone());
            }
        }
        // By Service, so the outcome does not depend on the order the
        // Services were added in.
        let warnings = warnings.into_values().collect();
        Outcome { subsets, warnings }
    }

    fn subset_of(&self, service: &ServiceEntry) -> Subset {
        let mut zones: BTreeMap<String, Vec<String>> = (0..self.table.zone_count())
            .filter(|&z| !self.table.eligible_in(z as ZoneId).is_empty())
            .map(|z| (self.table.zone_name(z as ZoneId).to_string(), Vec::new()))
            .collect();
        for &slot in &service.members {
            if let Some(entry) = self.table.entry(slot) {
                zones
                    .entry(self.table.zone_name(entry.zone).to_string())
                    .or_default()
                    .push(entry.name.clone());
            }
        }
        for names in zones.values_mut() {
            names.sort();
        }
        Subset { zones }
    }

    fn sorted_members(&self, i: usize) -> Vec<Slot> {
        let mut members = self.services[i]
            .as_ref()
            .map(|s| s.members.clone())
            .unwrap_or_default();
        members.sort_unstable();
        members
    }

    fn compute_cluster_quotas(&self) -> Vec<usize> {
        // Zones of equal size are visited by name, never in the order they
        // were first seen (which differs between a full compute and a
        // state built by events).
        let counts: Vec<((&str, ZoneId), usize)> = self
            .table
            .eligible_counts()
            .into_iter()
            .map(|(z, c)| ((self.table.zone_name(z), z), c))
            .collect();
        let candidates = counts.iter().map(|c| c.1).sum();
        let zones = counts.iter().filter(|c| c.1 > 0).count();
        let limit = subset_limit(TrafficPolicy::Cluster, candidates, zones);
        zone_quotas(&counts, limit)
            .into_iter()
            .map(|q| q.1)
            .collect()
    }

    fn insert_service(
        &mut self,
        service: &SubsetService,
        prev: Vec<Slot>,
    ) -> Result<usize, InputError> {
        service.key.validate()?;
        if self.by_key.contains_key(&service.key) {
            return Err(InputError::DuplicateService {
                service: service.key.to_string(),
            });
        }
        let entry = ServiceEntry {
            key: service.key.clone(),
            salt: service_salt(&service.key.namespace, &service.key.name),
            serving: match service.policy {
                TrafficPolicy::Local => service.serving_nodes.clone(),
                TrafficPolicy::Cluster => BTreeSet::new(),
            },
            members: prev,
            warning: None,
        };
        let i = match self.free_services.pop() {
            Some(i) => {
                self.services[i] = Some(entry);
                i
            }
            None => {
                self.services.push(Some(entry));
                self.services.len() - 1
            }
        };
        self.by_key.insert(service.key.clone(), i);
        match service.policy {
            TrafficPolicy::Cluster => {
                self.cluster_services.push(i);
                self.recompute_cluster(i);
            }
            TrafficPolicy::Local => {
                for name in &service.serving_nodes {
                    self.serving_index.entry(name.clone()).or_default().push(i);
                }
                self.recompute_local(i);
            }
        }
        Ok(i)
    }

    fn drop_service(&mut self, i: usize) {
        let Some(entry) = self.services.get_mut(i).and_then(Option::take) else {
            return;
        };
        self.by_key.remove(&entry.key);
        self.cluster_services.retain(|&c| c != i);
        for name in &entry.serving {
            if let Some(list) = self.serving_index.get_mut(name) {
                list.retain(|&s| s != i);
                if list.is_empty() {
                    self.serving_index.remove(name);
                }
            }
        }
        self.free_services.push(i);
    }

    /// A `Cluster` Service from scratch; its `members` are the previous
    /// members on entry.
    fn recompute_cluster(&mut self, i: usize) {
        let Some(service) = self.services.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let prev = std::mem::take(&mut service.members);
        let mut members = Vec::new();
        let mut kept = Vec::new();
        for (z, &quota) in self.cluster_quotas.iter().enumerate() {
            let z = z as ZoneId;
            if quota == 0 {
                continue;
            }
            kept.clear();
            kept.extend(prev.iter().copied().filter(|&s| {
                self.table
                    .entry(s)
                    .is_some_and(|e| e.eligible && e.zone == z)
            }));
            let candidates = self.table.eligible_in(z);
            select_zone(
                &self.table,
                service.salt,
                candidates,
                &kept,
                quota,
                &mut members,
            );
        }
        service.members = members;
    }

    /// Redoes zone `z` of a `Cluster` Service, keeping its members there.
    fn reselect_cluster_zone(&mut self, i: usize, z: ZoneId) {
        let Some(service) = self.services.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let table = &self.table;
        let mut kept = Vec::new();
        service.members.retain(|&s| match table.entry(s) {
            Some(e) if e.zone == z => {
                if e.eligible {
                    kept.push(s);
                }
                false
            }
            Some(_) => true,
            None => false,
        });
        let quota = self.cluster_quotas.get(z as usize).copied().unwrap_or(0);
        if quota > 0 {
            let candidates = table.eligible_in(z);
            select_zone(
                table,
                service.salt,
                candidates,
                &kept,
                quota,
                &mut service.members,
            );
        }
    }

    /// A `Local` Service from scratch; its `members` are the previous
    /// members on entry.
    fn recompute_local(&mut self, i: usize) {
        let Some(service) = self.services.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let table = &self.table;
        let mut by_zone: BTreeMap<ZoneId, Vec<Slot>> = BTreeMap::new();
        for name in &service.serving {
            if let Some(slot) = table.slot(name) {
                if let Some(entry) = table.entry(slot).filter(|e| e.eligible) {
                    by_zone.entry(entry.zone).or_default().push(slot);
                }
            }
        }
        let counts: Vec<((&str, ZoneId), usize)> = by_zone
            .iter()
            .map(|(&z, c)| ((table.zone_name(z), z), c.len()))
            .collect();
        let candidates: usize = counts.iter().map(|c| c.1).sum();
        let limit = subset_limit(TrafficPolicy::Local, candidates, counts.len());
        let quotas = zone_quotas(&counts, limit);
        let prev = std::mem::take(&mut service.members);
        let mut members = Vec::new();
        for ((_, z), quota) in quotas {
            let zone_candidates = by_zone.get(&z).map_or(&[][..], Vec::as_slice);
            let serving = &service.serving;
            let kept: Vec<Slot> = prev
                .iter()
                .copied()
                .filter(|&s| {
                    table
                        .entry(s)
                        .is_some_and(|e| e.eligible && e.zone == z && serving.contains(&e.name))
                })
                .collect();
            select_zone(
                table,
                service.salt,
                zone_candidates,
                &kept,
                quota,
                &mut members,
            );
        }
        service.members = members;
        service.warning = (candidates > limit).then(|| Warning::LocalOverLimit {
            service: service.key.clone(),
            serving_nodes: candidates,
            limit,
        });
    }

    /// What a node event changes; `before` is the node's zone and
    /// eligibility before the event (`None` for a new node), the table
    /// already holding its state after.
    fn after_node_event(
        &mut self,
        name: &str,
        slot: Slot,
        before: Option<(ZoneId, bool)>,
    ) -> Vec<ServiceKey> {
        let after = self.table.entry(slot).map(|e| (e.zone, e.eligible));
        let quotas = self.compute_cluster_quotas();
        let old_quotas = std::mem::replace(&mut self.cluster_quotas, quotas);
        let mut redo: Vec<ZoneId> = (0..self.cluster_quotas.len())
            .filter(|&z| old_quotas.get(z).copied().unwrap_or(0) != self.cluster_quotas[z])
            .map(|z| z as ZoneId)
            .collect();
        // A new node cannot be a member yet (its slot, if reused, was
        // purged from every subset when its last owner left).
        let moved = before.is_some() && before != after;
        let mut changed = Vec::new();
        for k in 0..self.cluster_services.len() {
            let i = self.cluster_services[k];
            let member = moved
                && self.services[i]
                    .as_ref()
                    .is_some_and(|s| s.members.contains(&slot));
            if redo.is_empty() && !member {
                continue;
            }
            let mut zones = redo.clone();
            if member {
                zones.extend(before.map(|b| b.0));
                zones.extend(after.map(|a| a.0));
            }
            zones.sort_unstable();
            zones.dedup();
            let old = self.sorted_members(i);
            for z in zones {
                self.reselect_cluster_zone(i, z);
            }
            if self.sorted_members(i) != old {
                changed.extend(self.services[i].as_ref().map(|s| s.key.clone()));
            }
        }
        redo.clear();
        let local: Vec<usize> = self.serving_index.get(name).cloned().unwrap_or_default();
        for i in local {
            let old = self.sorted_members(i);
            let warning = self.services[i].as_ref().and_then(|s| s.warning.clone());
            self.recompute_local(i);
            let now = self.services[i].as_ref().and_then(|s| s.warning.clone());
            if self.sorted_members(i) != old || warning != now {
                changed.extend(self.services[i].as_ref().map(|s| s.key.clone()));
            }
        }
        changed.sort();
        changed
    }
}
