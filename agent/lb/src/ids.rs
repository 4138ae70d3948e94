//! Backend ids: one per (Service, node) for as long as it stays configured,
//! so the flow table keeps naming the same backend across updates. A freed
//! id is not given out again until the counter has gone round the whole id
//! space (skipping ids in use), so a flow entry left from a removed backend
//! is never read as one for a new backend while such entries can live.

use std::collections::{BTreeMap, BTreeSet};

use crate::desired::BackendId;

/// The default id space, 1..=65 535: small enough for an array-indexed
/// map, and 65 535 allocations between two uses of one id is far longer
/// than a flow entry lives. 0 is never given (it reads as "no backend").
pub const DEFAULT_MAX_ID: BackendId = 65_535;

/// The id space is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no free backend id: all {0} are in use")]
pub struct Exhausted(pub BackendId);

/// (Service, node).
type Owner = (String, String);

#[derive(Debug)]
pub struct Ids {
    max: BackendId,
    /// The last id given out.
    last: BackendId,
    by_owner: BTreeMap<Owner, BackendId>,
    live: BTreeSet<BackendId>,
}

impl Default for Ids {
    fn default() -> Self {
        Ids::with_max(DEFAULT_MAX_ID)
    }
}

impl Ids {
    /// Ids 1..=`max`.
    pub fn with_max(max: BackendId) -> Ids {
        Ids {
            max: max.max(1),
            last: 0,
            by_owner: BTreeMap::new(),
            live: BTreeSet::new(),
        }
    }

    /// Keeps the ids of `owners` that have one, frees the others', and
    /// gives new owners the next free ids. Owners that find no free id are
    /// returned (they stay without one).
    pub fn sync<'a>(
        &mut self,
        owners: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<(String, String)> {
        let wanted: BTreeSet<Owner> = owners
            .into_iter()
            .map(|(s, n)| (s.to_string(), n.to_string()))
            .collect();
        let live = &mut self.live;
        self.by_owner.retain(|o, id| {
            let keep = wanted.contains(o);
            if !keep {
                live.remove(id);
            }
            keep
        });
        let mut unserved = Vec::new();
        for o in wanted {
            if self.by_owner.contains_key(&o) {
                continue;
            }
            match self.next_free() {
                Ok(id) => {
                    self.live.insert(id);
                    self.by_owner.insert(o, id);
                }
                Err(_) => unserved.push(o),
            }
        }
        unserved
    }

    fn next_free(&mut self) -> Result<BackendId, Exhausted> {
        if self.live.len() >= self.max as usize {
            return Err(Exhausted(self.max));
        }
        let mut id = self.last;
        loop {
            id = if id >= self.max { 1 } else { id + 1 };
            if !self.live.contains(&id) {
                self.last = id;
                return Ok(id);
            }
        }
    }

    pub fn get(&self, service: &str, node: &str) -> Option<BackendId> {
        self.by_owner
            .get(&(service.to_string(), node.to_string()))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_stays_while_configured_whatever_else_changes() {
        let mut ids = Ids::default();
        assert!(ids.sync([("web", "a"), ("web", "b")]).is_empty());
        let a = ids.get("web", "a").expect("id");
        let b = ids.get("web", "b").expect("id");
        assert_ne!(a, b);
        assert!(ids
            .sync([("web", "b"), ("db", "a"), ("web", "a")])
            .is_empty());
        assert_eq!(ids.get("web", "a"), Some(a));
        assert_eq!(ids.get("web", "b"), Some(b));
        let db = ids.get("db", "a").expect("id");
        assert!(db != a && db != b, "a node behind two Services has two ids");
        assert!(ids.get("web", "c").is_none());
        assert_ne!(a, 0);
    }

    #[test]
    fn a_freed_id_is_not_reused_until_the_counter_comes_round() {
        let mut ids = Ids::with_max(4);
        ids.sync([("s", "a"), ("s", "b")]);
        let a = ids.get("s", "a").expect("id");
        // a leaves, c comes: c gets a fresh id, not a's.
        ids.sync([("s", "b"), ("s", "c")]);
        let c = ids.get("s", "c").expect("id");
        assert_ne!(c, a);
        // d takes the last fresh one; e then wraps round, skipping the
        // live ids, onto a's old id.
        ids.sync([("s", "b"), ("s", "c"), ("s", "d")]);
        ids.sync([("s", "b"), ("s", "c"), ("s", "d"), ("s", "e")]);
        assert_eq!(ids.get("s", "e"), Some(a));
        let all: BTreeSet<_> = ["b", "c", "d", "e"]
            .iter()
            .filter_map(|n| ids.get("s", n))
            .collect();
        assert_eq!(all.len(), 4, "ids are distinct");
        // Full: a fifth owner is refused and named.
        let left = ids.sync([("s", "b"), ("s", "c"), ("s", "d"), ("s", "e"), ("s", "f")]);
        assert_eq!(left, vec![("s".to_string(), "f".to_string())]);
        assert!(ids.get("s", "f").is_none());
    }
}
