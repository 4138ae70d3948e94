//! What a write does to one key, decided from what the key holds. Pure:
//! the caller reads the key inside its write transaction and applies the
//! outcome in the same transaction.

use super::codec::{Change, Record};
use crate::error::{Result, StoreError};
use crate::types::{EventKind, Revision};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create(Vec<u8>),
    Update {
        value: Vec<u8>,
        expected_mod_rev: Revision,
    },
    Delete {
        expected_mod_rev: Option<Revision>,
    },
}

/// The key's new record (`None`: removed) and the history entry, for a
/// write made at revision `rev`; or why it is refused.
pub fn decide(
    key: &str,
    current: Option<Record>,
    op: Op,
    rev: Revision,
) -> Result<(Option<Record>, Change)> {
    let check = |expected: Revision, cur: &Record| {
        if cur.mod_rev == expected {
            Ok(())
        } else {
            Err(StoreError::Conflict {
                key: key.to_owned(),
                expected,
                current: cur.mod_rev,
            })
        }
    };
    let not_found = || StoreError::NotFound {
        key: key.to_owned(),
    };
    match op {
        Op::Create(value) => {
            if current.is_some() {
                return Err(StoreError::AlreadyExists {
                    key: key.to_owned(),
                });
            }
            let rec = Record {
                value: value.clone(),
                create_rev: rev,
                mod_rev: rev,
            };
            Ok((Some(rec), put(key, value, None)))
        }
        Op::Update {
            value,
            expected_mod_rev,
        } => {
            let cur = current.ok_or_else(not_found)?;
            check(expected_mod_rev, &cur)?;
            let rec = Record {
                value: value.clone(),
                create_rev: cur.create_rev,
                mod_rev: rev,
            };
            Ok((Some(rec), put(key, value, Some(cur))))
        }
        Op::Delete { expected_mod_rev } => {
            let cur = current.ok_or_else(not_found)?;
            if let Some(expected) = expected_mod_rev {
                check(expected, &cur)?;
            }
            let change = Change {
                kind: EventKind::Delete,
                key: key.to_owned(),
                value: Vec::new(),
                prev: Some(cur),
            };
            Ok((None, change))
        }
    }
}

fn put(key: &str, value: Vec<u8>, prev: Option<Record>) -> Change {
    Change {
        kind: EventKind::Put,
        key: key.to_owned(),
        value,
        prev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rev: Revision) -> Record {
        Record {
            value: b"old".to_vec(),
            create_rev: 1,
            mod_rev: rev,
        }
    }

    #[test]
    fn create_refuses_an_existing_key() {
        assert!(matches!(
            decide("k", Some(rec(1)), Op::Create(b"v".to_vec()), 2),
            Err(StoreError::AlreadyExists { .. })
        ));
        let (new, change) = decide("k", None, Op::Create(b"v".to_vec()), 2).unwrap();
        assert_eq!(new.map(|r| (r.create_rev, r.mod_rev)), Some((2, 2)));
        assert_eq!(change.prev, None);
    }

    #[test]
    fn update_checks_the_revision_and_keeps_the_creation() {
        let op = |e| Op::Update {
            value: b"new".to_vec(),
            expected_mod_rev: e,
        };
        assert!(matches!(
            decide("k", Some(rec(3)), op(2), 5),
            Err(StoreError::Conflict {
                expected: 2,
                current: 3,
                ..
            })
        ));
        assert!(matches!(
            decide("k", None, op(2), 5),
            Err(StoreError::NotFound { .. })
        ));
        let (new, change) = decide("k", Some(rec(3)), op(3), 5).unwrap();
        assert_eq!(new.map(|r| (r.create_rev, r.mod_rev)), Some((1, 5)));
        assert_eq!(change.prev, Some(rec(3)));
    }

    #[test]
    fn delete_returns_the_last_record() {
        let del = |e| Op::Delete {
            expected_mod_rev: e,
        };
        assert!(matches!(
            decide("k", Some(rec(3)), del(Some(4)), 5),
            Err(StoreError::Conflict { .. })
        ));
        let (new, change) = decide("k", Some(rec(3)), del(None), 5).unwrap();
        assert_eq!(new, None);
        assert_eq!(
            (change.kind, change.prev),
            (EventKind::Delete, Some(rec(3)))
        );
    }
}
