//! The repair pass, decided without I/O (kube-apiserver runs repair
//! controllers for its cluster IPs and node ports): from the Services and
//! the allocation keys read at one revision, the keys held by no Service
//! (to free), the values Services hold without a key (to take for them:
//! Services stored before allocations were kept, or a store edited by
//! hand), and the values two Services hold (to report).

use std::collections::BTreeMap;

use super::Alloc;

/// A Service as the repair sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `namespace/name`, for reports.
    pub name: String,
    pub uid: String,
    pub held: Vec<Alloc>,
}

/// An allocation key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub alloc: Alloc,
    /// The uid of the Service it names.
    pub owner: String,
    pub mod_rev: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repair {
    /// Keys to delete (at their revision).
    pub free: Vec<Key>,
    /// Values to create keys for, and the Service (index into the input).
    pub take: Vec<(Alloc, usize)>,
    /// What cannot be mended here: a value held by two Services.
    pub reports: Vec<String>,
}

pub fn plan(services: &[Holder], keys: &[Key]) -> Repair {
    let mut r = Repair::default();
    let mut holders: BTreeMap<Alloc, Vec<usize>> = BTreeMap::new();
    for (i, s) in services.iter().enumerate() {
        for a in &s.held {
            holders.entry(*a).or_default().push(i);
        }
    }
    let keyed: BTreeMap<Alloc, &Key> = keys.iter().map(|k| (k.alloc, k)).collect();
    for k in keys {
        let held_by_owner = holders
            .get(&k.alloc)
            .is_some_and(|hs| hs.iter().any(|&i| services[i].uid == k.owner));
        if !held_by_owner {
            r.free.push(k.clone());
        }
    }
    for (a, hs) in &holders {
        if hs.len() > 1 {
            let names: Vec<&str> = hs.iter().map(|&i| services[i].name.as_str()).collect();
            r.reports.push(format!(
                "{a} is held by more than one Service: {}",
                names.join(", ")
            ));
        }
        let owner_holds = keyed
            .get(a)
            .is_some_and(|k| hs.iter().any(|&i| services[i].uid == k.owner));
        if !owner_holds {
            // The key (if any) is freed above; the first holder gets it.
            r.take.push((*a, hs[0]));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Alloc {
        Alloc::Ip(s.parse().expect("ip"))
    }

    #[test]
    fn orphans_are_freed_missing_keys_taken_and_doubles_reported() {
        let services = vec![
            Holder {
                name: "default/a".into(),
                uid: "ua".into(),
                held: vec![ip("198.18.0.1"), Alloc::Port(30001)],
            },
            Holder {
                name: "default/b".into(),
                uid: "ub".into(),
                held: vec![ip("198.18.0.2"), Alloc::Port(30001)],
            },
        ];
        let keys = vec![
            Key {
                alloc: ip("198.18.0.1"),
                owner: "ua".into(),
                mod_rev: 3,
            },
            // Its Service is gone.
            Key {
                alloc: ip("198.18.0.9"),
                owner: "gone".into(),
                mod_rev: 4,
            },
            Key {
                alloc: Alloc::Port(30001),
                owner: "ub".into(),
                mod_rev: 5,
            },
        ];
        let r = plan(&services, &keys);
        assert_eq!(
            r.free.iter().map(|k| k.alloc).collect::<Vec<_>>(),
            vec![ip("198.18.0.9")]
        );
        assert_eq!(r.take, vec![(ip("198.18.0.2"), 1)]);
        assert_eq!(r.reports.len(), 1);
        assert!(r.reports[0].contains("30001") && r.reports[0].contains("default/a, default/b"));
        // All in order: nothing to do.
        let fine = plan(&services[..1], &keys[..1]);
        assert_eq!(
            fine.take,
            vec![(Alloc::Port(30001), 0)],
            "a's port has no key of its own"
        );
        assert!(fine.free.is_empty() && fine.reports.is_empty());
    }
}
