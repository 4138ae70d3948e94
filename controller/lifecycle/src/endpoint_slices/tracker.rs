//! Which of a Service's slices this controller wrote and has not yet seen
//! come back through its cache, as upstream's endpointSliceTracker.
//!
//! Slices are created with `generateName`, and a plan is made against the
//! cache, not the store. A sync that runs before the cache holds the slice
//! the last sync created sees "no slice" and creates a second one; the
//! Service then has its endpoints split over two slices, and nothing puts
//! them back together. So each write is remembered (by uid, with the
//! generation the API server gave it, or "deleted"), and a Service's next
//! sync waits until its cached slices are at least that new.
//!
//! A wait is bounded ([`PATIENCE`]): were a watch event lost (a relist
//! after compaction says nothing of what was deleted in between), a
//! Service's endpoints would otherwise stay frozen. Past the bound the sync
//! goes ahead, as upstream's ReplicaSet expectations do after five minutes;
//! the cost is at worst the duplicate slice this guards against, which a
//! later sync deduplicates endpoint by endpoint.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sluice_model::k8s::EndpointSlice;

/// How long a Service waits for its own writes before syncing anyway.
/// A watch event normally arrives within milliseconds; a minute-long
/// freeze of a Service's endpoints would be an outage of its own.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// (namespace, name) of a Service.
pub type ServiceKey = (String, String);

/// What a written slice must look like in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Present with at least this generation (0 when the server gave
    /// none: present at all).
    Generation(i64),
    /// Absent, or marked for deletion.
    Deleted,
}

#[derive(Debug)]
struct Pending {
    slices: HashMap<String, Expect>,
    /// When the oldest write still awaited was made.
    since: Instant,
}

/// Whether a Service's cached slices can be planned against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Every write of this controller is in the cache (or none is awaited).
    Fresh,
    /// A write is not back yet: sync again when it is.
    Stale,
    /// A write has been awaited longer than [`PATIENCE`]; the wait is
    /// dropped and the sync goes ahead on what the cache holds.
    GaveUp,
}

#[derive(Debug, Default)]
pub struct Tracker {
    services: HashMap<ServiceKey, Pending>,
}

fn uid_of(slice: &EndpointSlice) -> Option<&str> {
    slice.metadata.uid.as_deref().filter(|u| !u.is_empty())
}

impl Tracker {
    fn expect(&mut self, service: &ServiceKey, uid: &str, what: Expect, now: Instant) {
        let p = self
            .services
            .entry(service.clone())
            .or_insert_with(|| Pending {
                slices: HashMap::new(),
                since: now,
            });
        if p.slices.is_empty() {
            p.since = now;
        }
        p.slices.insert(uid.to_owned(), what);
    }

    /// `written` is what the API server answered to a create or an update
    /// of one of `service`'s slices.
    pub fn written(&mut self, service: &ServiceKey, written: &EndpointSlice, now: Instant) {
        if let Some(uid) = uid_of(written) {
            let generation = written.metadata.generation.unwrap_or(0);
            self.expect(service, uid, Expect::Generation(generation), now);
        }
    }

    /// The slice `uid` of `service` was deleted by this controller.
    pub fn deleted(&mut self, service: &ServiceKey, uid: &str, now: Instant) {
        if !uid.is_empty() {
            self.expect(service, uid, Expect::Deleted, now);
        }
    }

    /// The watch told of the slice `uid`'s deletion, whoever made it: a
    /// slice someone else deleted before the cache ever showed it is not
    /// waited for.
    pub fn gone(&mut self, service: &ServiceKey, uid: &str) {
        if let Some(p) = self.services.get_mut(service) {
            p.slices.remove(uid);
            if p.slices.is_empty() {
                self.services.remove(service);
            }
        }
    }

    /// The Service is gone: nothing of it is awaited.
    pub fn forget(&mut self, service: &ServiceKey) {
        self.services.remove(service);
    }

    /// Whether `cached` (the Service's slices in the cache) holds every
    /// write awaited. Writes seen are no longer awaited.
    pub fn freshness(
        &mut self,
        service: &ServiceKey,
        cached: &[EndpointSlice],
        now: Instant,
    ) -> Freshness {
        let Some(p) = self.services.get_mut(service) else {
            return Freshness::Fresh;
        };
        let in_cache: HashMap<&str, &EndpointSlice> = cached
            .iter()
            .filter_map(|s| Some((uid_of(s)?, s)))
            .collect();
        p.slices.retain(|uid, expect| {
            let seen = in_cache.get(uid.as_str());
            let arrived = match *expect {
                Expect::Generation(g) => {
                    seen.is_some_and(|s| s.metadata.generation.unwrap_or(0) >= g)
                }
                Expect::Deleted => seen.is_none_or(|s| s.metadata.deletion_timestamp.is_some()),
            };
            !arrived
        });
        if p.slices.is_empty() {
            self.services.remove(service);
            return Freshness::Fresh;
        }
        if now.saturating_duration_since(p.since) > PATIENCE {
            self.services.remove(service);
            return Freshness::GaveUp;
        }
        Freshness::Stale
    }

    /// How many Services have writes awaited (for tests and metrics).
    pub fn waiting(&self) -> usize {
        self.services.len()
    }
}

#[cfg(test)]
mod tests {
    use sluice_model::k8s::{jiff::Timestamp, ObjectMeta, Time};

    use super::*;

    fn key() -> ServiceKey {
        ("default".into(), "web".into())
    }

    fn slice(uid: &str, generation: Option<i64>) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("web-{uid}")),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                generation,
                ..Default::default()
            },
            address_type: "IPv4".into(),
            ..Default::default()
        }
    }

    // Upstream behaviour (endpointSliceTracker.StaleSlices): no plan is
    // made against a cache that lacks this controller's last creation (a
    // second generateName slice would split the Service's endpoints).
    #[test]
    fn a_creation_is_awaited_until_the_cache_has_it() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(1)), t0);
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Stale);
        assert_eq!(
            t.freshness(&key(), &[slice("a", Some(1))], t0),
            Freshness::Fresh
        );
        assert_eq!(t.waiting(), 0, "a write seen is no longer awaited");
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Fresh);
    }

    #[test]
    fn an_update_is_awaited_until_its_generation_is_cached() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(3)), t0);
        assert_eq!(
            t.freshness(&key(), &[slice("a", Some(2))], t0),
            Freshness::Stale
        );
        // A newer one (someone else's write after ours) is fresh too.
        assert_eq!(
            t.freshness(&key(), &[slice("a", Some(4))], t0),
            Freshness::Fresh
        );
    }

    #[test]
    fn a_deletion_is_awaited_until_the_slice_leaves_or_is_terminating() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.deleted(&key(), "a", t0);
        assert_eq!(
            t.freshness(&key(), &[slice("a", Some(1))], t0),
            Freshness::Stale
        );
        let mut terminating = slice("a", Some(1));
        terminating.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert_eq!(t.freshness(&key(), &[terminating], t0), Freshness::Fresh);
        t.deleted(&key(), "b", t0);
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Fresh);
    }

    #[test]
    fn a_slice_deleted_by_someone_else_is_not_awaited() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(1)), t0);
        t.gone(&key(), "a");
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Fresh);
    }

    #[test]
    fn services_wait_apart_and_a_forgotten_service_waits_for_nothing() {
        let t0 = Instant::now();
        let other: ServiceKey = ("default".into(), "api".into());
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(1)), t0);
        assert_eq!(t.freshness(&other, &[], t0), Freshness::Fresh);
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Stale);
        t.forget(&key());
        assert_eq!(t.freshness(&key(), &[], t0), Freshness::Fresh);
    }

    #[test]
    fn a_write_never_seen_is_given_up_after_the_patience() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(1)), t0);
        assert_eq!(t.freshness(&key(), &[], t0 + PATIENCE), Freshness::Stale);
        assert_eq!(
            t.freshness(&key(), &[], t0 + PATIENCE + Duration::from_millis(1)),
            Freshness::GaveUp
        );
        assert_eq!(t.waiting(), 0);
        assert_eq!(
            t.freshness(&key(), &[], t0 + PATIENCE * 2),
            Freshness::Fresh
        );
    }

    #[test]
    fn the_patience_counts_from_the_oldest_write_awaited() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(20);
        let mut t = Tracker::default();
        t.written(&key(), &slice("a", Some(1)), t0);
        // A second write while the first is awaited does not restart the
        // clock: a Service written every few seconds still gets synced.
        t.written(&key(), &slice("b", Some(1)), later);
        assert_eq!(
            t.freshness(&key(), &[], t0 + PATIENCE + Duration::from_secs(1)),
            Freshness::GaveUp
        );
        // Once all are seen, the next write starts a new wait.
        t.written(&key(), &slice("c", Some(1)), later);
        assert_eq!(
            t.freshness(&key(), &[slice("c", Some(1))], later),
            Freshness::Fresh
        );
        t.written(&key(), &slice("d", Some(1)), t0 + PATIENCE * 2);
        assert_eq!(
            t.freshness(&key(), &[], t0 + PATIENCE * 2 + Duration::from_secs(1)),
            Freshness::Stale
        );
    }

    #[test]
    fn writes_without_a_uid_are_not_tracked() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        let mut s = slice("a", Some(1));
        s.metadata.uid = None;
        t.written(&key(), &s, t0);
        t.deleted(&key(), "", t0);
        assert_eq!(t.waiting(), 0);
    }
}
