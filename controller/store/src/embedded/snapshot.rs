//! A list at an older revision, rebuilt from the current values and the
//! history after that revision. Pure: the caller reads the tables.
//!
//! The state of a key at revision R is the previous record of its first
//! change after R (none if that change created it); a key with no change
//! after R is as it is now.

use std::collections::BTreeMap;

use super::codec::{Change, Record};
use crate::error::Result;
use crate::types::{Kv, Revision};

/// Keys changed after the list's revision, with what they held at it
/// (`None`: absent then). Only keys the list covers belong in it.
pub type Undo = BTreeMap<String, Option<Record>>;

/// Adds a change made after the list's revision. Changes must come in
/// revision order: the first change of a key after R tells its state at R.
pub fn note_change(undo: &mut Undo, change: Change) {
    undo.entry(change.key).or_insert(change.prev);
}

/// The checks every list and watch makes against the compacted and the
/// current revision.
pub fn check_list_revision(at: Revision, compacted: Revision, current: Revision) -> Result<()> {
    use crate::error::StoreError;
    if at > current {
        return Err(StoreError::FutureRevision {
            requested: at,
            current,
        });
    }
    if at < compacted {
        return Err(StoreError::Compacted {
            requested: at,
            compacted,
        });
    }
    Ok(())
}

/// Merges the current values (in key order, from the page's start, within
/// the prefix) with the undone ones into one page of at most `limit`
/// items; the bool says whether more remain.
pub fn merge_page(
    current: impl Iterator<Item = Result<(String, Record)>>,
    undo: &Undo,
    limit: Option<usize>,
) -> Result<(Vec<Kv>, bool)> {
    let cap = limit.unwrap_or(usize::MAX);
    let mut out: Vec<Kv> = Vec::new();
    let mut older = undo
        .iter()
        .filter_map(|(k, r)| r.as_ref().map(|r| (k, r)))
        .peekable();
    for item in current {
        let (key, rec) = item?;
        while let Some((k, r)) = older.next_if(|(k, _)| k.as_str() < key.as_str()) {
            if out.len() == cap {
                return Ok((out, true));
            }
            out.push(kv(k.clone(), r.clone()));
        }
        if undo.contains_key(&key) {
            continue;
        }
        if out.len() == cap {
            return Ok((out, true));
        }
        out.push(kv(key, rec));
    }
    for (k, r) in older {
        if out.len() == cap {
            return Ok((out, true));
        }
        out.push(kv(k.clone(), r.clone()));
    }
    Ok((out, false))
}

pub fn kv(key: String, r: Record) -> Kv {
    Kv {
        key,
        value: r.value,
        create_rev: r.create_rev,
        mod_rev: r.mod_rev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::EventKind;

    fn rec(v: &str, rev: Revision) -> Record {
        Record {
            value: v.as_bytes().to_vec(),
            create_rev: rev,
            mod_rev: rev,
        }
    }

    fn change(key: &str, prev: Option<Record>) -> Change {
        Change {
            kind: EventKind::Put,
            key: key.into(),
            value: vec![],
            prev,
        }
    }

    fn keys(items: &[Kv]) -> Vec<(&str, &[u8])> {
        items
            .iter()
            .map(|k| (k.key.as_str(), k.value.as_slice()))
            .collect()
    }

    /// At revision 3: a=a1, b=b1, c=c1. Since: b updated, c deleted, d created.
    fn fixture() -> (Vec<(String, Record)>, Undo) {
        let now = vec![
            ("a".to_string(), rec("a1", 1)),
            ("b".to_string(), rec("b2", 4)),
            ("d".to_string(), rec("d1", 6)),
        ];
        let mut undo = Undo::new();
        note_change(&mut undo, change("b", Some(rec("b1", 2))));
        note_change(&mut undo, change("c", Some(rec("c1", 3))));
        note_change(&mut undo, change("d", None));
        // A later change of b must not hide what b was at revision 3.
        note_change(&mut undo, change("b", Some(rec("b2", 4))));
        (now, undo)
    }

    #[test]
    fn the_past_is_rebuilt_key_by_key() {
        let (now, undo) = fixture();
        let (items, more) = merge_page(now.into_iter().map(Ok), &undo, None).unwrap();
        assert_eq!(
            keys(&items),
            vec![("a", &b"a1"[..]), ("b", b"b1"), ("c", b"c1")]
        );
        assert!(!more);
    }

    #[test]
    fn limits_cut_pages_and_say_more_remains() {
        for limit in 1..=3 {
            let (now, undo) = fixture();
            let (items, more) = merge_page(now.into_iter().map(Ok), &undo, Some(limit)).unwrap();
            assert_eq!(items.len(), limit);
            assert_eq!(more, limit < 3, "limit {limit}");
        }
    }

    #[test]
    fn revisions_outside_the_history_are_refused() {
        assert!(check_list_revision(5, 3, 10).is_ok());
        assert!(check_list_revision(3, 3, 10).is_ok());
        assert!(matches!(
            check_list_revision(2, 3, 10),
            Err(crate::StoreError::Compacted {
                requested: 2,
                compacted: 3
            })
        ));
        assert!(matches!(
            check_list_revision(11, 3, 10),
            Err(crate::StoreError::FutureRevision { .. })
        ));
    }
}
