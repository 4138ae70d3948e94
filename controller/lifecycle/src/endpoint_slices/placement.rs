//! Laying the desired endpoints into slices with the fewest writes, as
//! upstream's reconciler aims to:
//!
//! 1. each existing slice keeps the endpoints it holds that are still
//!    wanted (with their new conditions); it is written only if one of
//!    them changed, one left, or its labels changed, and deleted if none
//!    is left;
//! 2. new endpoints go first into the slices being written anyway, the
//!    fullest first;
//! 3. what is left goes, if it fits whole, into the unchanged slice it
//!    fills the most, else into new slices of up to `max` endpoints;
//! 4. a create and a delete of the same family become one update of the
//!    slice that would be deleted;
//! 5. a Service with no endpoints at all keeps one empty IPv4 slice (the
//!    placeholder), so consumers can tell "no endpoints" from "not yet
//!    synced".

use std::collections::{BTreeMap, VecDeque};

use k8s_openapi::api::discovery::v1::Endpoint;
use sluice_model::k8s::EndpointSlice;

use super::desired::{AddressFamily, Desired, EndpointKey, Group, PortKey};
use super::meta::{owned_by, ServiceRef};
use super::SlicePlan;

/// The writes for every family of the Service; `existing` are the
/// Service's slices managed by this controller, each with a name.
pub fn plan(
    svc: &ServiceRef,
    families: &[AddressFamily],
    mut wanted: Desired,
    existing: &[&EndpointSlice],
    max: usize,
) -> SlicePlan {
    let mut work = Work::default();
    let mut by_family: BTreeMap<AddressFamily, Vec<&EndpointSlice>> = BTreeMap::new();
    let mut sorted = existing.to_vec();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for slice in sorted {
        match AddressFamily::parse(&slice.address_type) {
            // A slice of a family the Service dropped, of another address
            // type, or left by an earlier Service of the same name goes.
            Some(f) if families.contains(&f) && owned_by(slice, &svc.uid) => {
                by_family.entry(f).or_default().push(slice)
            }
            _ => work.delete.push(slice.clone()),
        }
    }
    for &family in families {
        let slices = by_family.remove(&family).unwrap_or_default();
        let groups = wanted.remove(&family).unwrap_or_default();
        work.family(svc, family, groups, slices, max);
    }
    if work.create.is_empty() && work.update.is_empty() && work.kept == 0 {
        work.placeholder(svc);
    }
    work.reuse_deleted(svc);
    let mut update = work.update;
    update.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut delete: Vec<String> = work
        .delete
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    delete.sort();
    SlicePlan {
        create: work.create,
        update,
        delete,
    }
}

#[derive(Default)]
struct Work {
    create: Vec<EndpointSlice>,
    update: Vec<EndpointSlice>,
    delete: Vec<EndpointSlice>,
    /// Existing slices left as they are.
    kept: usize,
}

/// An existing slice that will be written, with its new endpoints.
struct Rewrite<'a> {
    slice: &'a EndpointSlice,
    endpoints: Vec<Endpoint>,
}

fn endpoint_count(slice: &EndpointSlice) -> usize {
    slice.endpoints.as_ref().map_or(0, Vec::len)
}

impl Work {
    fn family(
        &mut self,
        svc: &ServiceRef,
        family: AddressFamily,
        mut groups: BTreeMap<PortKey, Group>,
        slices: Vec<&EndpointSlice>,
        max: usize,
    ) {
        let mut by_ports: BTreeMap<PortKey, Vec<&EndpointSlice>> = BTreeMap::new();
        for slice in slices {
            let key = PortKey::of(slice.ports.as_deref().unwrap_or_default());
            if groups.contains_key(&key) {
                by_ports.entry(key).or_default().push(slice);
            } else {
                self.delete.push(slice.clone());
            }
        }
        for (key, group) in groups.iter_mut() {
            let existing = by_ports.remove(key).unwrap_or_default();
            self.group(svc, family, group, existing, max);
        }
    }

    fn group(
        &mut self,
        svc: &ServiceRef,
        family: AddressFamily,
        group: &mut Group,
        existing: Vec<&EndpointSlice>,
        max: usize,
    ) {
        let mut rewrites: Vec<Rewrite> = Vec::new();
        let mut unchanged: Vec<&EndpointSlice> = Vec::new();
        for slice in existing {
            let mut changed = slice.metadata.labels.as_ref() != Some(&svc.labels);
            let mut endpoints = Vec::new();
            for ep in slice.endpoints.iter().flatten() {
                match group.endpoints.remove(&EndpointKey::of(ep)) {
                    Some(want) => {
                        changed |= want != *ep;
                        endpoints.push(want);
                    }
                    // Gone, or already placed in an earlier slice.
                    None => changed = true,
                }
            }
            if !changed {
                unchanged.push(slice);
            } else if endpoints.is_empty() {
                self.delete.push(slice.clone());
            } else {
                rewrites.push(Rewrite { slice, endpoints });
            }
        }
        let mut remaining: VecDeque<Endpoint> =
            std::mem::take(&mut group.endpoints).into_values().collect();
        // Slices written anyway take new endpoints first, fullest first
        // (fewest slices in the end).
        rewrites.sort_by(|a, b| {
            b.endpoints
                .len()
                .cmp(&a.endpoints.len())
                .then_with(|| a.slice.metadata.name.cmp(&b.slice.metadata.name))
        });
        for r in rewrites.iter_mut() {
            while r.endpoints.len() < max {
                let Some(ep) = remaining.pop_front() else {
                    break;
                };
                r.endpoints.push(ep);
            }
        }
        while !remaining.is_empty() {
            let fill = if remaining.len() < max {
                closest_to_full(&unchanged, remaining.len(), max)
            } else {
                None
            };
            match fill {
                Some(i) => {
                    let slice = unchanged.remove(i);
                    let mut endpoints = slice.endpoints.clone().unwrap_or_default();
                    endpoints.extend(remaining.drain(..));
                    rewrites.push(Rewrite { slice, endpoints });
                }
                None => {
                    let take = remaining.len().min(max);
                    let endpoints: Vec<Endpoint> = remaining.drain(..take).collect();
                    self.create
                        .push(svc.new_slice(family, group.ports.clone(), endpoints));
                }
            }
        }
        self.kept += unchanged.len();
        for r in rewrites {
            let mut slice = r.slice.clone();
            slice.endpoints = Some(r.endpoints);
            slice.ports = Some(group.ports.clone());
            slice.metadata.labels = Some(svc.labels.clone());
            self.update.push(slice);
        }
    }

    /// The empty IPv4 slice a Service without endpoints keeps; an existing
    /// one is kept rather than deleted and created again.
    fn placeholder(&mut self, svc: &ServiceRef) {
        let placeholder = svc.new_slice(AddressFamily::IPv4, Vec::new(), Vec::new());
        let is_placeholder = |s: &EndpointSlice| {
            s.address_type == placeholder.address_type
                && endpoint_count(s) == 0
                && s.ports.as_ref().is_none_or(Vec::is_empty)
                && s.metadata.labels == placeholder.metadata.labels
                && owned_by(s, &svc.uid)
        };
        if let [only] = self.delete.as_slice() {
            if is_placeholder(only) {
                self.delete.clear();
                self.kept += 1;
                return;
            }
        }
        self.create.push(placeholder);
    }

    /// Turn a create and a delete of the same family into one update of
    /// the slice that would have been deleted (one write instead of two,
    /// and no moment without the endpoints).
    fn reuse_deleted(&mut self, svc: &ServiceRef) {
        let mut i = 0;
        while i < self.delete.len() && !self.create.is_empty() {
            let old = &self.delete[i];
            let last = self.create.len() - 1;
            if old.address_type == self.create[last].address_type && owned_by(old, &svc.uid) {
                let new = self.create.remove(last);
                let mut slice = self.delete.remove(i);
                slice.endpoints = new.endpoints;
                slice.ports = new.ports;
                slice.metadata.labels = new.metadata.labels;
                self.update.push(slice);
            } else {
                i += 1;
            }
        }
    }
}

/// The unchanged slice that `n` more endpoints fill the most without
/// passing `max`, if any.
fn closest_to_full(slices: &[&EndpointSlice], n: usize, max: usize) -> Option<usize> {
    slices
        .iter()
        .enumerate()
        .filter(|(_, s)| endpoint_count(s) + n <= max)
        // Ties go to the first (by name): max_by_key keeps the last.
        .rev()
        .max_by_key(|(_, s)| endpoint_count(s))
        .map(|(i, _)| i)
}
